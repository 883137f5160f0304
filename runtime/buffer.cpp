#include "runtime/buffer.h"

#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

#include "runtime/cuda_allocator.h"
#include "runtime/cuda_driver.h"

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

namespace {

constexpr size_t kCachedMin = size_t{1} << 20;  // smaller blocks come from malloc's own free lists

class HostBlockCache {
 public:
  HostBlockCache() {
    const char* env = std::getenv("FLOW_HOST_CACHE_MB");
    limit_ = (env ? std::strtoull(env, nullptr, 10) : 2048) << 20;
  }
  ~HostBlockCache() { release(); }

  // A cached block of capacity in [bytes, bytes * 5/4], or nullptr.
  void* take(size_t bytes, size_t* capacity) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = free_.lower_bound(bytes);
    if (it == free_.end() || it->first > bytes + bytes / 4) return nullptr;
    *capacity = it->first;
    void* p = it->second;
    cached_ -= it->first;
    free_.erase(it);
    return p;
  }

  void give(void* p, size_t capacity) noexcept {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (capacity >= kCachedMin && cached_ + capacity <= limit_) {
        // Before the blocks of the same capacity: of those, take() hands out the most recently
        // freed one, whose lines are the likeliest to still be in cache (a smaller fitting
        // capacity still comes first).
        free_.emplace_hint(free_.lower_bound(capacity), capacity, p);
        cached_ += capacity;
        return;
      }
    }
    std::free(p);
  }

  size_t release() {
    std::lock_guard<std::mutex> lock(mu_);
    const size_t n = cached_;
    for (auto& kv : free_) std::free(kv.second);
    free_.clear();
    cached_ = 0;
    return n;
  }

  size_t cached() {
    std::lock_guard<std::mutex> lock(mu_);
    return cached_;
  }

 private:
  std::mutex mu_;
  std::multimap<size_t, void*> free_;
  size_t cached_ = 0;
  size_t limit_ = 0;
};

HostBlockCache& host_cache() {
  static HostBlockCache* cache = new HostBlockCache();  // never destroyed: buffers may outlive statics
  return *cache;
}

}  // namespace

size_t release_cached_host_memory() {
  return host_cache().release();
}
size_t cached_host_bytes() {
  return host_cache().cached();
}

void Buffer::Free::operator()(void* p) const noexcept {
  if (device_index >= 0) {
    // The allocator exists: it made this block. Returning a block makes no driver call.
    try {
      cuda::device_allocator(device_index).free(p);
    } catch (...) {
    }
    return;
  }
  host_cache().give(p, capacity);
}

namespace {
std::atomic<uint64_t> g_next_uid{1};
}  // namespace

Buffer::Buffer(Private, std::unique_ptr<void, Free> data, size_t size, DeviceType device)
    : data_(std::move(data)), size_(size), device_(device), uid_(g_next_uid.fetch_add(1)) {}

std::shared_ptr<Buffer> Buffer::allocate(size_t bytes, DeviceType device) {
  if (device == DeviceType::CUDA) {
    const int index = cuda::current_device();
    cuda::CudaCachingAllocator& alloc = cuda::device_allocator(index);  // throws when CUDA is unavailable
    std::unique_ptr<void, Free> data(alloc.allocate(bytes), Free{0, index});
    return std::make_shared<Buffer>(Private{}, std::move(data), bytes, device);
  }
  // torch's message for a failed host allocation (a RuntimeError in Python, where bad_alloc would be
  // a bare MemoryError naming nothing).
  const auto out_of_memory = [bytes] {
    return std::runtime_error("CPU allocator: can't allocate memory: you tried to allocate " + std::to_string(bytes) +
                              " bytes.");
  };
  if (bytes > SIZE_MAX - kAlignment) throw out_of_memory();
  // aligned_alloc needs a size that is a multiple of the alignment; zero becomes one block.
  const size_t padded = bytes == 0 ? kAlignment : (bytes + kAlignment - 1) / kAlignment * kAlignment;
  size_t capacity = padded;
  void* p = padded >= kCachedMin ? host_cache().take(padded, &capacity) : nullptr;
  if (!p) {
    capacity = padded;
    p = std::aligned_alloc(kAlignment, padded);
  }
  if (!p) {
    release_cached_host_memory();  // memory is tight: give the cache back and try once more
    p = std::aligned_alloc(kAlignment, padded);
  }
  if (!p) throw out_of_memory();
  std::unique_ptr<void, Free> data(p, Free{capacity, -1});
  return std::make_shared<Buffer>(Private{}, std::move(data), bytes, device);
}

}  // namespace flow::runtime
