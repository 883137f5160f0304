// Note: the CUDA driver API, loaded with dlopen (runtime/dynlib.h) on first use, so flow builds,
// imports and runs its CPU paths on machines with no GPU and no driver. Each entry point is
// resolved by the exact name cuda.h maps it to (cuMemAlloc -> cuMemAlloc_v2, cuEventElapsedTime ->
// cuEventElapsedTime_v2, ...: the name is taken from the header's own #define, so the function
// type and the symbol always agree). Every call is checked; a failure throws CudaError naming the
// call, the error (cuGetErrorName: cuGetErrorString) and the flow call site.
//
// Contexts: flow uses each device's primary context (the one the CUDA runtime and PyTorch share),
// retained once per device for the life of the process (never released: buffers, modules and
// streams may outlive static destructors) and made current on the calling thread before any call
// that needs it. The current device is per thread (default 0), as in the CUDA runtime.
//
// Public headers do not include cuda.h: handles are the driver's own opaque struct pointers,
// forward-declared here, so code that does include cuda.h can pass CUfunction / CUstream directly.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

struct CUfunc_st;
struct CUmod_st;
struct CUstream_st;
struct CUevent_st;
struct CUgraph_st;
struct CUgraphExec_st;

namespace flow::runtime::cuda {

using Function = CUfunc_st*;              // CUfunction
using Stream = CUstream_st*;              // CUstream (nullptr: the legacy default stream)
using Event = CUevent_st*;                // CUevent
using GraphHandle = CUgraph_st*;          // CUgraph (runtime/cuda_graph.h owns them)
using GraphExecHandle = CUgraphExec_st*;  // CUgraphExec

// A failed driver call. what(): "flow: CUDA error in cuMemAlloc(1048576 bytes) at
// runtime/cuda_allocator.cpp:42: CUDA_ERROR_OUT_OF_MEMORY: out of memory".
class CudaError : public std::runtime_error {
 public:
  CudaError(const std::string& what, int code) : std::runtime_error(what), code_(code) {}
  int code() const { return code_; }  // the CUresult; -1 when the driver itself is unavailable

 private:
  int code_;
};

// True when the driver loads, initializes and reports at least one device. Never throws; the first
// call does the work, later calls are a load.
bool cuda_available();
// Why CUDA is unavailable ("" when it is available), e.g. "could not load the CUDA driver
// (libcuda); tried: libcuda.so.1; ..." or "cuInit(0) failed: CUDA_ERROR_NO_DEVICE: ...".
std::string unavailable_reason();
// Throws CudaError (code -1) with unavailable_reason() unless cuda_available().
void require_cuda();

// Number of devices; 0 when CUDA is unavailable (never throws).
int device_count();
// The driver version as reported by cuDriverGetVersion (13000 for 13.0); throws if unavailable.
int driver_version();

struct DeviceProps {
  int index = 0;
  std::string name;          // "NVIDIA H200"
  int major = 0, minor = 0;  // compute capability
  std::string arch;          // "sm_90": what NVRTC compiles for
  int sm_count = 0;          // multiprocessors
  int max_threads_per_block = 0;
  int warp_size = 0;
  int64_t shared_per_block = 0;        // default limit (48 KiB)
  int64_t shared_per_block_optin = 0;  // with cuFuncSetAttribute (227 KiB on sm_90)
  int64_t total_memory = 0;            // bytes
};
// Properties of device `device` (cached). Throws CudaError if CUDA is unavailable or the index is
// out of range.
const DeviceProps& device_props(int device);

// The calling thread's current device (default 0) and its setter (validates the index and makes
// the device's primary context current).
int current_device();
void set_device(int device);
// Makes the current device's primary context current on this thread (retaining it on first use);
// every wrapper below calls it. Throws CudaError if CUDA is unavailable.
void ensure_context();
// Same for a given device, without changing current_device().
void ensure_context(int device);
// RAII: sets the current device for a scope and restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_;
};

// Waits for all work on the current device (cuCtxSynchronize).
void synchronize_device();
// Free and total memory of the current device (cuMemGetInfo).
std::pair<size_t, size_t> memory_info();

// A loaded module (cuModuleLoadData of a cubin, or of PTX which the driver then JIT-compiles),
// owned by one device; unloaded on destruction. function() is cached per name and thread-safe.
class CudaModule {
 public:
  // Loads `image` on `device` (default: the current one). Throws CudaError (e.g.
  // CUDA_ERROR_NO_BINARY_FOR_GPU when the cubin is for another architecture) naming `what`.
  explicit CudaModule(const std::string& image, const std::string& what = "module", int device = -1);
  ~CudaModule();
  CudaModule(const CudaModule&) = delete;
  CudaModule& operator=(const CudaModule&) = delete;

  // cuModuleGetFunction; throws CudaError naming the entry point.
  Function function(const std::string& name) const;
  int device() const { return device_; }

  // The module for `key` on the current device, loading `image` the first time (thread-safe; the
  // cache lives for the process). `image` is only read on a miss.
  static std::shared_ptr<const CudaModule> get(const std::string& key, const std::string& image);
  static size_t cached_modules();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int device_ = 0;
};

// Launch configuration limits are the driver's to check (its error names the problem). Launches
// with `shared_bytes` of dynamic shared memory (above 48 KiB the function's opt-in attribute is
// raised first). `params[i]` points to the value of kernel parameter i. With FLOW_CUDA_SYNC=1 in
// the environment every launch is followed by a stream synchronize, so an asynchronous fault is
// reported at the launch that caused it (`what` names it).
void launch(Function f, const std::array<unsigned, 3>& grid, const std::array<unsigned, 3>& block,
            unsigned shared_bytes, Stream stream, void** params, const std::string& what = "kernel");

// The driver symbols flow resolves (exported for a test that checks them against a libcuda).
std::vector<std::string> driver_symbol_names();

// Thin checked wrappers over the driver calls the allocator, copies and streams use. Each makes the
// current device's context current first and throws CudaError on failure. Device pointers are
// plain void* (a CUdeviceptr is an address in the unified address space).
namespace driver {
constexpr int kErrorOutOfMemory = 2;  // CUDA_ERROR_OUT_OF_MEMORY
void* mem_alloc(size_t bytes);
void mem_free(void* p);
void memcpy_htod(void* dst, const void* src, size_t bytes, Stream stream);
void memcpy_dtoh(void* dst, const void* src, size_t bytes, Stream stream);
void memcpy_dtod(void* dst, const void* src, size_t bytes, Stream stream);
// `height` rows of `width` bytes, rows `src_pitch` and `dst_pitch` bytes apart (cuMemcpy2DAsync).
void memcpy_2d_dtod(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, size_t height,
                    Stream stream);
void memset_d8(void* dst, unsigned char value, size_t bytes, Stream stream);
Stream stream_create_non_blocking();
void stream_destroy(Stream s) noexcept;  // errors ignored (teardown)
void stream_synchronize(Stream s);
Event event_create();
void event_destroy(Event e) noexcept;  // errors ignored (teardown)
void event_record(Event e, Stream s);
void event_synchronize(Event e);
float event_elapsed_ms(Event start, Event stop);
// Stream capture and graphs (runtime/cuda_graph.h). Capture is in CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
// mode. stream_is_capturing: true while a capture is active on `s`, or was invalidated and not ended.
void stream_begin_capture(Stream s);
GraphHandle stream_end_capture(Stream s);
bool stream_is_capturing(Stream s);
GraphExecHandle graph_instantiate(GraphHandle g);
void graph_launch(GraphExecHandle e, Stream s);
void graph_exec_destroy(GraphExecHandle e) noexcept;  // errors ignored (teardown)
void graph_destroy(GraphHandle g) noexcept;           // errors ignored (teardown)
}  // namespace driver

}  // namespace flow::runtime::cuda
