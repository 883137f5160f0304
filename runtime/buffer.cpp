#include "runtime/buffer.h"

#include <cstdint>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

namespace flow::runtime {

const char* device_type_name(DeviceType d) {
  switch (d) {
    case DeviceType::CPU:
      return "cpu";
    case DeviceType::CUDA:
      return "cuda";
  }
  return "unknown";
}

void Buffer::HostFree::operator()(void* p) const noexcept {
  std::free(p);
}

Buffer::Buffer(Private, std::unique_ptr<void, HostFree> data, size_t size, DeviceType device)
    : data_(std::move(data)), size_(size), device_(device) {}

std::shared_ptr<Buffer> Buffer::allocate(size_t bytes, DeviceType device) {
  if (device == DeviceType::CUDA) {
    throw std::runtime_error("flow: Buffer::allocate(" + std::to_string(bytes) +
                             " bytes, cuda): CUDA buffers are not supported yet (the device allocator is not "
                             "implemented); allocate on the cpu");
  }
  if (bytes > SIZE_MAX - kAlignment) throw std::bad_alloc();
  // aligned_alloc needs a size that is a multiple of the alignment; zero becomes one block.
  const size_t padded = bytes == 0 ? kAlignment : (bytes + kAlignment - 1) / kAlignment * kAlignment;
  std::unique_ptr<void, HostFree> data(std::aligned_alloc(kAlignment, padded));
  if (!data) throw std::bad_alloc();
  return std::make_shared<Buffer>(Private{}, std::move(data), bytes, device);
}

}  // namespace flow::runtime
