// Note: copies between host and device memory. Every copy is enqueued on the current stream, so it
// is ordered after the kernels and memsets enqueued before it, and returns when it has completed:
// the host may reuse or read its memory at once (host memory is pageable, which the driver stages
// anyway). memset_device is stream-ordered and asynchronous, like a kernel. Zero bytes is a no-op
// that touches no driver, so empty tensors work everywhere.
#pragma once
#include <cstddef>

#include "runtime/buffer.h"

namespace flow::runtime::cuda {

void copy_host_to_device(void* dst, const void* src, size_t bytes);
void copy_device_to_host(void* dst, const void* src, size_t bytes);
void copy_device_to_device(void* dst, const void* src, size_t bytes);
// `height` rows of `width` bytes from rows `src_pitch` bytes apart to rows `dst_pitch` bytes
// apart, stream-ordered and asynchronous like a kernel (eager cat: jit/eager_cat.h).
void copy_rows_device_to_device(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width,
                                size_t height);
// Sets `bytes` bytes at `dst` to `value` (0xFF bytes make float NaNs: a poison).
void memset_device(void* dst, unsigned char value, size_t bytes);

}  // namespace flow::runtime::cuda

namespace flow::runtime {

// Copies `bytes` between memory on any two devices (CPU <-> CUDA, CUDA <-> CUDA, CPU <-> CPU).
void copy_bytes(void* dst, DeviceType dst_device, const void* src, DeviceType src_device, size_t bytes);

}  // namespace flow::runtime
