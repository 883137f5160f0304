// Note: a Buffer owns one allocation of device memory. Host buffers are 64-byte aligned (a cache
// line and an AVX-512 vector), and their size is rounded up to a multiple of 64 internally so that
// vectorized kernels may read a whole last vector; size() reports what was asked for. A zero-size
// buffer is valid and still has a non-null, aligned data() pointer, so kernels never see null.
// Contents are uninitialized. Buffers are shared (std::shared_ptr) because tensors, views and
// executables hold the same storage; they are neither copyable nor movable.
//
// Identity and versions (torch's `_version`): every buffer has a process-unique uid() and a
// version() that writers into existing storage bump (flow's Python in-place ops do; kernels only
// write buffers allocated for their outputs). Together they let a cache of values derived from a
// buffer (the executable's parameter-only results, oneDNN's reordered weights) know that the
// contents are unchanged without reading them. A write through a raw pointer or a numpy array
// that shares the memory is not seen, as in torch.
//
// Large host blocks (>= 1 MiB) are cached on release and reused by later allocations of a close
// size, like PyTorch's caching allocators: a fresh multi-megabyte malloc is an mmap whose pages
// fault in on first touch, which costs as much as the kernel that writes them. The cache holds at
// most FLOW_HOST_CACHE_MB (default 2048) MiB; `release_cached_host_memory()` empties it.
//
// CUDA buffers hold a device pointer from the caching device allocator (runtime/cuda_allocator.h)
// of the device that was current at allocation, and give it back to that allocator when released
// (no driver call, so releasing is safe anywhere). data() of a CUDA buffer must not be dereferenced
// on the host; copy with runtime/cuda_copy.h.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

namespace flow::runtime {

enum class DeviceType { CPU, CUDA };
const char* device_type_name(DeviceType d);  // "cpu", "cuda"

class Buffer {
 public:
  static constexpr size_t kAlignment = 64;

  // Throws std::runtime_error naming the size when host memory runs out. CUDA: on the current device
  // (runtime::cuda::current_device()); throws runtime::cuda::CudaError (a std::runtime_error) when
  // CUDA is unavailable ("flow: CUDA is not available: ... driver ...") or device memory runs out.
  static std::shared_ptr<Buffer> allocate(size_t bytes, DeviceType device = DeviceType::CPU);

  void* data() { return data_.get(); }
  const void* data() const { return data_.get(); }
  template <typename T>
  T* data_as() {
    return static_cast<T*>(data());
  }
  template <typename T>
  const T* data_as() const {
    return static_cast<const T*>(data());
  }
  size_t size() const { return size_; }
  DeviceType device() const { return device_; }
  // The CUDA device index of a CUDA buffer; -1 for a host buffer.
  int device_index() const { return data_.get_deleter().device_index; }
  uint64_t uid() const { return uid_; }  // unique in the process, never reused
  uint64_t version() const { return version_.load(std::memory_order_acquire); }
  void bump_version() { version_.fetch_add(1, std::memory_order_acq_rel); }

  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

 private:
  // Returns the block to the host caching allocator (see buffer.cpp), which needs its size, or to
  // the device allocator of device_index (>= 0 for CUDA memory).
  struct Free {
    size_t capacity = 0;
    int device_index = -1;
    void operator()(void* p) const noexcept;
  };
  struct Private {};  // lets allocate() use std::make_shared with a non-public constructor

 public:
  Buffer(Private, std::unique_ptr<void, Free> data, size_t size, DeviceType device);

 private:
  std::unique_ptr<void, Free> data_;
  size_t size_ = 0;
  DeviceType device_ = DeviceType::CPU;
  uint64_t uid_ = 0;
  std::atomic<uint64_t> version_{0};
};

// Frees every cached host block; returns the bytes released.
size_t release_cached_host_memory();
size_t cached_host_bytes();

}  // namespace flow::runtime
