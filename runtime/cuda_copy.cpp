#include "runtime/cuda_copy.h"

#include <cstring>

#include "runtime/cuda_driver.h"
#include "runtime/cuda_stream.h"
#include "runtime/device_error.h"

namespace flow::runtime::cuda {

void copy_host_to_device(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  const Stream s = current_stream();
  driver::memcpy_htod(dst, src, bytes, s);
  driver::stream_synchronize(s);
}

void copy_device_to_host(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  const Stream s = current_stream();
  driver::memcpy_dtoh(dst, src, bytes, s);
  driver::stream_synchronize(s);
  raise_device_errors();  // what the kernels before the copy reported (runtime/device_error.h)
}

void copy_device_to_device(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  const Stream s = current_stream();
  driver::memcpy_dtod(dst, src, bytes, s);
  driver::stream_synchronize(s);
}

void copy_rows_device_to_device(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width,
                                size_t height) {
  if (width == 0 || height == 0) return;
  driver::memcpy_2d_dtod(dst, dst_pitch, src, src_pitch, width, height, current_stream());
}

void memset_device(void* dst, unsigned char value, size_t bytes) {
  if (bytes == 0) return;
  driver::memset_d8(dst, value, bytes, current_stream());
}

}  // namespace flow::runtime::cuda

namespace flow::runtime {

void copy_bytes(void* dst, DeviceType dst_device, const void* src, DeviceType src_device, size_t bytes) {
  if (bytes == 0) return;
  const bool dst_gpu = dst_device == DeviceType::CUDA;
  const bool src_gpu = src_device == DeviceType::CUDA;
  if (!dst_gpu && !src_gpu) {
    std::memmove(dst, src, bytes);
  } else if (dst_gpu && !src_gpu) {
    cuda::copy_host_to_device(dst, src, bytes);
  } else if (!dst_gpu && src_gpu) {
    cuda::copy_device_to_host(dst, src, bytes);
  } else {
    cuda::copy_device_to_device(dst, src, bytes);
  }
}

}  // namespace flow::runtime
