// Note: errors that kernels find but cannot raise (an embedding_bag or scatter index out of range),
// reported at the host's next synchronization point, as torch's device-side asserts are.
//
// Each device has one error word in device memory: 4 x 64 bits, {code, a, b, c}, code 0 meaning
// none. A kernel that finds a problem claims the word with an atomicCAS on `code` (the first
// report wins) and writes its three values. synchronize() and every copy to the host (so
// `.cpu()`, `.item()`, printing) then read the word, reset it and throw std::runtime_error with the
// message for the code; the results of the kernels launched since the last check must not be
// trusted. The word is created (outside any stream capture, as it is zeroed with a synchronize) at
// the first launch of a reporting kernel on the device; from then on each check costs one 32-byte
// copy to the host. A kernel launched while a capture is recording before the word exists reports
// nothing (it gets a null word).
#pragma once
#include <string>

#include "runtime/cuda_driver.h"

namespace flow::runtime::cuda {

enum class DeviceErrorCode : long long {
  None = 0,
  EmbeddingBagIndex = 1,   // a: position, b: the index there, c: the number of rows
  EmbeddingBagOffset = 2,  // a: the boundary's position in offsets, b: its value, c: the input's length
  IndexOutOfBounds = 3,    // an index out of range (a generated kernel's dsl CheckIndex, the scatter
                           // kernel): a: the index, b: the size of the dim, c: the dim, possibly
                           // tagged with kIndexReportTag (dsl::kCheckIndexRuntimeError)
};
// A CheckIndex's dim carries this bit when torch raises RuntimeError for it (gather); on the device
// every report is a RuntimeError anyway, so the message only drops it (jit/cuda_launch.cpp checks
// that it is dsl's bit).
constexpr long long kIndexReportTag = 1LL << 40;

// The device's error word, created on first use unless `stream` is capturing (then null when it
// does not exist yet).
long long* device_error_word(int device, Stream stream);

// Reads the current device's word (after the caller has synchronized the current stream) and, when
// a kernel reported, resets it and throws std::runtime_error naming the problem. No-op before the
// device has a word.
void raise_device_errors();

// The message for a report (also used by the tests).
std::string device_error_message(long long code, long long a, long long b, long long c);

}  // namespace flow::runtime::cuda

// Generated CPU kernels report into a host word of the same layout, one per launch (jit::launch_cpu
// reads it after the kernel and raises): each index that CheckIndex finds outside [lo, hi) is
// reported with code IndexOutOfBounds, the first report winning. In range, it does nothing. Called
// by LLVM-generated code only off its fast path (the loader resolves it by address).
extern "C" void flow_report_index_error(long long* word, long long index, long long lo, long long hi, long long dim);
