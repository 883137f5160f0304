#include "runtime/device_error.h"

#include <array>
#include <map>
#include <mutex>
#include <stdexcept>

#include "runtime/cuda_stream.h"

namespace flow::runtime::cuda {

namespace {

constexpr size_t kWordBytes = 4 * sizeof(long long);

struct Words {
  std::mutex mu;
  std::map<int, long long*> by_device;  // never freed: kernels in flight or in graphs may hold them
};
Words& words() {
  static auto* w = new Words();
  return *w;
}

long long* existing_word(int device) {
  Words& w = words();
  std::lock_guard<std::mutex> lock(w.mu);
  auto it = w.by_device.find(device);
  return it == w.by_device.end() ? nullptr : it->second;
}

}  // namespace

long long* device_error_word(int device, Stream stream) {
  if (long long* word = existing_word(device)) return word;
  if (driver::stream_is_capturing(stream)) return nullptr;
  Words& w = words();
  std::lock_guard<std::mutex> lock(w.mu);
  long long*& word = w.by_device[device];
  if (word == nullptr) {
    DeviceGuard guard(device);
    auto* p = static_cast<long long*>(driver::mem_alloc(kWordBytes));
    driver::memset_d8(p, 0, kWordBytes, stream);
    driver::stream_synchronize(stream);
    word = p;
  }
  return word;
}

std::string device_error_message(long long code, long long a, long long b, long long c) {
  const std::string where = " (found by a CUDA kernel; the results of kernels since the last check are not valid)";
  switch (static_cast<DeviceErrorCode>(code)) {
    case DeviceErrorCode::EmbeddingBagIndex:
      return "embedding_bag: Index " + std::to_string(a) + " of input takes value " + std::to_string(b) +
             " which is not in the valid range [0, " + std::to_string(c) + ")" + where;
    case DeviceErrorCode::EmbeddingBagOffset:
      return "embedding_bag: offsets[" + std::to_string(a) + "] of " + std::to_string(b) +
             " is not a bag boundary: offsets start at 0, never decrease and do not pass the input's length " +
             std::to_string(c) + where;
    case DeviceErrorCode::IndexOutOfBounds:
      return "index " + std::to_string(a) + " is out of bounds for dimension " + std::to_string(c & ~kIndexReportTag) +
             " with size " + std::to_string(b) + where;
    case DeviceErrorCode::None:
      break;
  }
  return "a CUDA kernel reported error code " + std::to_string(code) + where;
}

void raise_device_errors() {
  long long* word = existing_word(current_device());
  if (word == nullptr) return;
  const Stream s = current_stream();
  std::array<long long, 4> report{};
  driver::memcpy_dtoh(report.data(), word, kWordBytes, s);
  driver::stream_synchronize(s);
  if (report[0] == 0) return;
  driver::memset_d8(word, 0, kWordBytes, s);
  driver::stream_synchronize(s);
  throw std::runtime_error(device_error_message(report[0], report[1], report[2], report[3]));
}

}  // namespace flow::runtime::cuda

extern "C" void flow_report_index_error(long long* word, long long index, long long lo, long long hi, long long dim) {
  if (word == nullptr || (index >= lo && index < hi)) return;
  long long none = 0;
  if (__atomic_compare_exchange_n(word, &none,
                                  static_cast<long long>(flow::runtime::cuda::DeviceErrorCode::IndexOutOfBounds), false,
                                  __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    word[1] = index;
    word[2] = hi;
    word[3] = dim;
  }
}
