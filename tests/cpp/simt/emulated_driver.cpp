// Note: an emulated CUDA device for the tests: this file builds a libcuda.so.1 that implements the
// driver entry points flow uses (runtime/cuda_driver.cpp's FLOW_CU_FUNCTIONS) on the host, so that
// flow's whole CUDA path (flow.Tensor on device="cuda", eager ops, @flow.jit executables, the caching
// allocator, streams, events, CUDA graph capture and replay) and the GPU test suites run on a
// machine without a GPU. Put its folder first on LD_LIBRARY_PATH and FLOW_CUDA_LIB_PATH
// (tools/emulated_gpu_pytest.sh does).
//  - Device memory is host memory; every allocation is tracked, and a copy or free that names
//    memory the device never allocated (or already freed) fails as CUDA_ERROR_INVALID_VALUE.
//    It lies in one reserved range that is PROT_NONE except while the device works in it, so host
//    code that dereferences a device pointer faults, as on a GPU.
//  - Kernels: the emulated libnvrtc.so (emulated_nvrtc.cpp) compiles with the real NVRTC and hands
//    back an image that carries the CUDA source; cuModuleGetFunction builds that source for the
//    host and cuLaunchKernel runs it on the SIMT emulator (simt_emulator.h), which reports faults
//    (misaligned vector accesses, barrier deadlocks, shuffle-mask errors) with block and thread.
//  - Streams run everything in order at the call (no asynchrony); events hold host times.
//  - Capture: work issued to a capturing stream is recorded (kernel parameters copied, as the real
//    driver does) and replayed by cuGraphLaunch. What the real driver refuses during a capture is
//    refused here too and invalidates it: synchronizing the capturing stream or the context,
//    allocating or freeing outside relaxed mode, capturing the legacy default stream.
// What it is not: a performance model, a memory-ordering model, or a device: streams run in order
// at the call (a missing synchronization cannot show), and kernels are not bounds-checked inside
// device memory.
// cuBLASLt and cuDNN are emulated by emulated_cublaslt.cpp and emulated_cudnn.cpp, which reach this
// driver through emulated_driver_hooks.h.
#include <cuda.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "simt/emulated_image.h"
#include "simt/simt_emulator.h"

namespace {

namespace simt = flow::test::simt;

constexpr size_t kTotalMemory = size_t{16} << 30;  // what the emulated device reports

struct Function {
  std::shared_ptr<const simt::Module> module;
  std::string name;
  std::vector<size_t> param_sizes;
};

struct Module {
  flow::test::simt::EmulatedImage image;
  std::map<std::string, std::unique_ptr<Function>> functions;
};

// One recorded operation of a capture, replayed by cuGraphLaunch.
struct Op {
  enum Kind { Kernel, Copy, Set, Host } kind = Kernel;
  std::shared_ptr<void>
      host_arg;  // Host: host_fn(host_arg) (a library call of emulated_cublaslt.cpp / emulated_cudnn.cpp)
  int (*host_fn)(void*) = nullptr;
  const Function* fn = nullptr;
  simt::Dim3 grid, block;
  std::vector<std::vector<unsigned char>> params;  // copies of the parameter values
  void* dst = nullptr;
  const void* src = nullptr;
  size_t bytes = 0;
  unsigned char value = 0;
};

struct Graph {
  std::vector<Op> ops;
};

struct Stream {
  bool capturing = false;
  bool invalidated = false;
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_GLOBAL;  // of the capture in progress
  std::thread::id thread;                                    // that began it
  std::unique_ptr<Graph> graph;
};

struct Event {
  std::chrono::steady_clock::time_point t{};
  bool recorded = false;
};

// Device memory: one reserved range of host address space that host code cannot touch (PROT_NONE)
// except while the device itself works in it (a DeviceAccess: a copy, a kernel, a library call),
// so host code that reads or writes a device pointer faults here as it would on a GPU.
struct Arena {
  char* base = nullptr;
  std::map<size_t, size_t> free_ranges;  // offset -> bytes, coalesced
  std::mutex access_mu;
  int access_depth = 0;
  size_t open_bytes = 0;  // readable and writable now, from base
  Arena() {
    void* p = ::mmap(nullptr, kTotalMemory, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      std::fprintf(stderr, "[emulated cuda] cannot reserve %zu bytes of address space\n", kTotalMemory);
      std::abort();
    }
    base = static_cast<char*>(p);
    // Huge pages: each protection change then rewrites 512 times fewer page-table entries.
    ::madvise(base, kTotalMemory, MADV_HUGEPAGE);
    free_ranges[0] = kTotalMemory;
  }
  // The bytes from base that were ever handed out (what a protection change must cover).
  std::atomic<size_t> high_water{0};
  // First fit; nullptr when no free range is large enough.
  char* take(size_t bytes) {
    for (auto it = free_ranges.begin(); it != free_ranges.end(); ++it) {
      if (it->second < bytes) continue;
      const size_t offset = it->first, left = it->second - bytes;
      free_ranges.erase(it);
      if (left > 0) free_ranges[offset + bytes] = left;
      constexpr size_t kHuge = size_t{2} << 20;
      const size_t end = (offset + bytes + kHuge - 1) / kHuge * kHuge;
      if (end > high_water.load()) high_water.store(std::min(end, kTotalMemory));
      return base + offset;
    }
    return nullptr;
  }
  void give_back(char* p, size_t bytes) {
    size_t offset = static_cast<size_t>(p - base);
    auto next = free_ranges.lower_bound(offset);
    if (next != free_ranges.end() && next->first == offset + bytes) {
      bytes += next->second;
      next = free_ranges.erase(next);
    }
    if (next != free_ranges.begin()) {
      auto prev = std::prev(next);
      if (prev->first + prev->second == offset) {
        prev->second += bytes;
        return;
      }
    }
    free_ranges[offset] = bytes;
  }
};

Arena& arena() {
  static auto* a = new Arena();  // never destroyed, like device()
  return *a;
}

// While one exists (on any thread), device memory is readable and writable.
class DeviceAccess {
 public:
  DeviceAccess() {
    Arena& a = arena();
    std::lock_guard<std::mutex> lock(a.access_mu);
    const size_t want = a.high_water.load();
    if (a.access_depth++ == 0 || want > a.open_bytes) {  // memory allocated since counts too
      ::mprotect(a.base, want, PROT_READ | PROT_WRITE);
      a.open_bytes = want;
    }
  }
  ~DeviceAccess() {
    Arena& a = arena();
    std::lock_guard<std::mutex> lock(a.access_mu);
    if (--a.access_depth == 0) {
      ::mprotect(a.base, a.open_bytes, PROT_NONE);
      a.open_bytes = 0;
    }
  }
  DeviceAccess(const DeviceAccess&) = delete;
  DeviceAccess& operator=(const DeviceAccess&) = delete;
};

struct Device {
  std::mutex mu;
  std::map<uintptr_t, size_t> allocations;  // start -> bytes (rounded up to 256)
  size_t allocated = 0;
  std::vector<Stream*> capturing;  // streams in a capture
  uint64_t launches = 0;
};

Device& device() {
  static auto* d = new Device();  // never destroyed: frees may come from static destructors
  return *d;
}

int g_context_tag = 0;
thread_local CUcontext tl_context = nullptr;
// The thread's capture interaction mode (cuThreadExchangeStreamCaptureMode), not a capture's mode.
thread_local CUstreamCaptureMode tl_capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

Stream* as_stream(CUstream s) {
  return reinterpret_cast<Stream*>(s);
}

// Whether a potentially unsafe call (`what`) is prohibited now, per cuda.h's rules for
// cuThreadExchangeStreamCaptureMode: never in a thread in RELAXED mode; else when this thread began a
// capture that is not RELAXED, or (this thread in GLOBAL mode) another thread began a GLOBAL one.
// A prohibited call invalidates those captures (the driver invalidates the sequence), says so on
// stderr, and fails. `always`: a call that conflicts with any capture whatever the modes
// (synchronizing the context).
bool refused_during_capture(const char* what, bool always = false) {
  Device& d = device();
  std::lock_guard<std::mutex> lock(d.mu);
  if (d.capturing.empty() || (!always && tl_capture_mode == CU_STREAM_CAPTURE_MODE_RELAXED)) return false;
  const std::thread::id self = std::this_thread::get_id();
  bool refused = false;
  for (Stream* s : d.capturing) {
    const bool mine = s->thread == self;
    const bool prohibits =
        always || (mine ? s->mode != CU_STREAM_CAPTURE_MODE_RELAXED
                        : s->mode == CU_STREAM_CAPTURE_MODE_GLOBAL && tl_capture_mode == CU_STREAM_CAPTURE_MODE_GLOBAL);
    if (prohibits) {
      s->invalidated = true;
      refused = true;
    }
  }
  if (refused)
    std::fprintf(stderr, "[emulated cuda] %s during a stream capture: not permitted (capture invalidated)\n", what);
  return refused;
}

// Whether [p, p + bytes) lies inside one live allocation.
bool is_device_range(const void* p, size_t bytes) {
  Device& d = device();
  std::lock_guard<std::mutex> lock(d.mu);
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = d.allocations.upper_bound(a);
  if (it == d.allocations.begin()) return false;
  --it;
  return a >= it->first && a + bytes <= it->first + it->second;
}

CUresult run(const Op& op) {
  const DeviceAccess access;
  switch (op.kind) {
    case Op::Copy:
      std::memmove(op.dst, op.src, op.bytes);
      return CUDA_SUCCESS;
    case Op::Set:
      std::memset(op.dst, op.value, op.bytes);
      return CUDA_SUCCESS;
    case Op::Host:
      return op.host_fn(op.host_arg.get()) == 0 ? CUDA_SUCCESS : CUDA_ERROR_LAUNCH_FAILED;
    case Op::Kernel: {
      std::vector<void*> ptrs;
      for (const auto& p : op.params) ptrs.push_back(const_cast<unsigned char*>(p.data()));
      try {
        ++device().launches;
        op.fn->module->launch(op.fn->name, op.grid, op.block, ptrs.data(), device().launches);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "[emulated cuda] kernel %s failed: %s\n  (source: %s)\n", op.fn->name.c_str(), e.what(),
                     op.fn->module->source_path().c_str());
        return CUDA_ERROR_LAUNCH_FAILED;
      }
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_UNKNOWN;
}

// Runs `op` now, or records it when `s` is capturing.
CUresult submit(CUstream s, Op op) {
  Stream* st = as_stream(s);
  if (st && st->capturing) {
    if (st->invalidated) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    st->graph->ops.push_back(std::move(op));
    return CUDA_SUCCESS;
  }
  return run(op);
}

CUresult copy(void* dst, const void* src, size_t bytes, CUstream s, bool dst_device, bool src_device) {
  if (bytes == 0) return CUDA_SUCCESS;
  if ((dst_device && !is_device_range(dst, bytes)) || (src_device && !is_device_range(src, bytes))) {
    std::fprintf(stderr, "[emulated cuda] copy of %zu bytes names memory the device did not allocate\n", bytes);
    return CUDA_ERROR_INVALID_VALUE;
  }
  Op op;
  op.kind = Op::Copy;
  op.dst = dst;
  op.src = src;
  op.bytes = bytes;
  return submit(s, std::move(op));
}

}  // namespace

extern "C" {

CUresult CUDAAPI cuGetErrorName(CUresult error, const char** pStr) {
  switch (error) {
    case CUDA_SUCCESS:
      *pStr = "CUDA_SUCCESS";
      return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_VALUE:
      *pStr = "CUDA_ERROR_INVALID_VALUE";
      return CUDA_SUCCESS;
    case CUDA_ERROR_OUT_OF_MEMORY:
      *pStr = "CUDA_ERROR_OUT_OF_MEMORY";
      return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_IMAGE:
      *pStr = "CUDA_ERROR_INVALID_IMAGE";
      return CUDA_SUCCESS;
    case CUDA_ERROR_NOT_FOUND:
      *pStr = "CUDA_ERROR_NOT_FOUND";
      return CUDA_SUCCESS;
    case CUDA_ERROR_LAUNCH_FAILED:
      *pStr = "CUDA_ERROR_LAUNCH_FAILED";
      return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_HANDLE:
      *pStr = "CUDA_ERROR_INVALID_HANDLE";
      return CUDA_SUCCESS;
    case CUDA_ERROR_INVALID_DEVICE:
      *pStr = "CUDA_ERROR_INVALID_DEVICE";
      return CUDA_SUCCESS;
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
      *pStr = "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED";
      return CUDA_SUCCESS;
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
      *pStr = "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED";
      return CUDA_SUCCESS;
    case CUDA_ERROR_ILLEGAL_STATE:
      *pStr = "CUDA_ERROR_ILLEGAL_STATE";
      return CUDA_SUCCESS;
    case CUDA_ERROR_NOT_READY:
      *pStr = "CUDA_ERROR_NOT_READY";
      return CUDA_SUCCESS;
    case CUDA_ERROR_NOT_SUPPORTED:
      *pStr = "CUDA_ERROR_NOT_SUPPORTED";
      return CUDA_SUCCESS;
    default:
      *pStr = nullptr;
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult CUDAAPI cuGetErrorString(CUresult error, const char** pStr) {
  const CUresult r = cuGetErrorName(error, pStr);
  if (r == CUDA_SUCCESS) *pStr = "(emulated device)";
  return r;
}

CUresult CUDAAPI cuInit(unsigned int) {
  return CUDA_SUCCESS;
}

// The real NVRTC and CUDA runtime look for the driver's private tables; the emulated device has none,
// and they carry on without it.
CUresult CUDAAPI cuGetExportTable(const void** table, const CUuuid*) {
  *table = nullptr;
  return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult CUDAAPI cuDriverGetVersion(int* v) {
  *v = CUDA_VERSION;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int* n) {
  *n = 1;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice* d, int ordinal) {
  if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
  *d = 0;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice d) {
  if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
  std::snprintf(name, static_cast<size_t>(len), "%s", "flow emulated device (sm_90 on the host)");
  return CUDA_SUCCESS;
}

// An H200's figures, so flow schedules as it would for one.
CUresult CUDAAPI cuDeviceGetAttribute(int* v, CUdevice_attribute a, CUdevice d) {
  if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
  switch (a) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      *v = 9;
      break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      *v = 0;
      break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      *v = 132;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      *v = 1024;
      break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE:
      *v = 32;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK:
      *v = 48 << 10;
      break;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN:
      *v = 227 << 10;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceTotalMem(size_t* bytes, CUdevice d) {
  if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
  *bytes = kTotalMemory;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice d) {
  if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
  *ctx = reinterpret_cast<CUcontext>(&g_context_tag);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext* ctx) {
  *ctx = tl_context;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext ctx) {
  tl_context = ctx;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSynchronize() {
  if (refused_during_capture("cuCtxSynchronize", /*always=*/true)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemGetInfo(size_t* free_bytes, size_t* total) {
  Device& d = device();
  std::lock_guard<std::mutex> lock(d.mu);
  *total = kTotalMemory;
  *free_bytes = kTotalMemory - std::min(kTotalMemory, d.allocated);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAlloc(CUdeviceptr* p, size_t bytes) {
  if (refused_during_capture("cuMemAlloc")) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  if (bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  Device& d = device();
  std::lock_guard<std::mutex> lock(d.mu);
  if (d.allocated + bytes > kTotalMemory) return CUDA_ERROR_OUT_OF_MEMORY;
  const size_t rounded = (bytes + 255) / 256 * 256;
  char* mem = arena().take(rounded);
  if (!mem) return CUDA_ERROR_OUT_OF_MEMORY;
  {
    const DeviceAccess access;
    std::memset(mem, 0xA5, rounded);  // never zero: code that forgets to write shows
  }
  d.allocations[reinterpret_cast<uintptr_t>(mem)] = bytes;
  d.allocated += bytes;
  *p = reinterpret_cast<CUdeviceptr>(mem);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemFree(CUdeviceptr p) {
  if (refused_during_capture("cuMemFree")) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  Device& d = device();
  std::lock_guard<std::mutex> lock(d.mu);
  const auto it = d.allocations.find(static_cast<uintptr_t>(p));
  if (it == d.allocations.end()) {
    std::fprintf(stderr, "[emulated cuda] cuMemFree of %p, which is not a live allocation\n",
                 reinterpret_cast<void*>(p));
    return CUDA_ERROR_INVALID_VALUE;
  }
  const size_t bytes = it->second;
  d.allocated -= bytes;
  d.allocations.erase(it);
  arena().give_back(reinterpret_cast<char*>(p), (bytes + 255) / 256 * 256);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr dst, const void* src, size_t bytes, CUstream s) {
  return copy(reinterpret_cast<void*>(dst), src, bytes, s, true, false);
}

CUresult CUDAAPI cuMemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t bytes, CUstream s) {
  return copy(dst, reinterpret_cast<const void*>(src), bytes, s, false, true);
}

CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream s) {
  return copy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes, s, true, true);
}

// Device-to-device only (what flow uses): one queued copy per row.
CUresult CUDAAPI cuMemcpy2DAsync(const CUDA_MEMCPY2D* p, CUstream s) {
  if (!p || p->srcMemoryType != CU_MEMORYTYPE_DEVICE || p->dstMemoryType != CU_MEMORYTYPE_DEVICE ||
      p->srcXInBytes != 0 || p->srcY != 0 || p->dstXInBytes != 0 || p->dstY != 0 ||
      (p->Height > 1 && (p->srcPitch < p->WidthInBytes || p->dstPitch < p->WidthInBytes)))
    return CUDA_ERROR_INVALID_VALUE;
  for (size_t r = 0; r < p->Height; ++r) {
    const CUresult e =
        copy(reinterpret_cast<void*>(p->dstDevice + r * p->dstPitch),
             reinterpret_cast<const void*>(p->srcDevice + r * p->srcPitch), p->WidthInBytes, s, true, true);
    if (e != CUDA_SUCCESS) return e;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t n, CUstream s) {
  if (n == 0) return CUDA_SUCCESS;
  if (!is_device_range(reinterpret_cast<void*>(dst), n)) return CUDA_ERROR_INVALID_VALUE;
  Op op;
  op.kind = Op::Set;
  op.dst = reinterpret_cast<void*>(dst);
  op.bytes = n;
  op.value = value;
  return submit(s, std::move(op));
}

CUresult CUDAAPI cuStreamCreate(CUstream* s, unsigned int) {
  *s = reinterpret_cast<CUstream>(std::make_unique<Stream>().release());
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamDestroy(CUstream s) {
  if (!s) return CUDA_ERROR_INVALID_HANDLE;
  if (as_stream(s)->capturing) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // end the capture first
  std::unique_ptr<Stream> owned(as_stream(s));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamSynchronize(CUstream s) {
  Stream* st = as_stream(s);
  if (st && st->capturing) {
    std::fprintf(stderr, "[emulated cuda] cuStreamSynchronize of a capturing stream (capture invalidated)\n");
    st->invalidated = true;
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventCreate(CUevent* e, unsigned int) {
  *e = reinterpret_cast<CUevent>(std::make_unique<Event>().release());
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventDestroy(CUevent e) {
  std::unique_ptr<Event> owned(reinterpret_cast<Event*>(e));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventRecord(CUevent e, CUstream s) {
  Stream* st = as_stream(s);
  if (st && st->capturing) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // flow records no events in graphs
  auto* ev = reinterpret_cast<Event*>(e);
  ev->t = std::chrono::steady_clock::now();
  ev->recorded = true;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventSynchronize(CUevent e) {
  return reinterpret_cast<Event*>(e)->recorded ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

CUresult CUDAAPI cuEventElapsedTime(float* ms, CUevent start, CUevent stop) {
  const auto* a = reinterpret_cast<Event*>(start);
  const auto* b = reinterpret_cast<Event*>(stop);
  if (!a->recorded || !b->recorded) return CUDA_ERROR_INVALID_HANDLE;
  *ms = std::chrono::duration<float, std::milli>(b->t - a->t).count();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleLoadData(CUmodule* m, const void* image) {
  auto mod = std::make_unique<Module>();
  if (!flow::test::simt::parse_emulated_image(static_cast<const char*>(image), mod->image)) {
    std::fprintf(stderr, "[emulated cuda] cuModuleLoadData: not an image of the emulated NVRTC\n");
    return CUDA_ERROR_INVALID_IMAGE;
  }
  *m = reinterpret_cast<CUmodule>(mod.release());
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleUnload(CUmodule m) {
  std::unique_ptr<Module> owned(reinterpret_cast<Module*>(m));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name) {
  auto* mod = reinterpret_cast<Module*>(m);
  auto& slot = mod->functions[name];
  if (!slot) {
    auto fn = std::make_unique<Function>();
    try {
      fn->module = simt::module_for(mod->image.source, {name}, mod->image.headers);
      fn->param_sizes = fn->module->param_sizes(name);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "[emulated cuda] cuModuleGetFunction(%s): %s\n", name, e.what());
      mod->functions.erase(name);
      return CUDA_ERROR_NOT_FOUND;
    }
    fn->name = name;
    slot = std::move(fn);
  }
  *f = reinterpret_cast<CUfunction>(slot.get());
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncSetAttribute(CUfunction, CUfunction_attribute, int) {
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz, unsigned int bx,
                                unsigned int by, unsigned int bz, unsigned int shared_bytes, CUstream s, void** params,
                                void** extra) {
  if (extra != nullptr) return CUDA_ERROR_INVALID_VALUE;  // flow passes parameters by pointer
  if (shared_bytes > (227u << 10)) return CUDA_ERROR_INVALID_VALUE;
  if (static_cast<uint64_t>(bx) * by * bz > 1024 || bx == 0 || by == 0 || bz == 0 || gx == 0 || gy == 0 || gz == 0 ||
      gy > 65535 || gz > 65535)
    return CUDA_ERROR_INVALID_VALUE;
  const auto* fn = reinterpret_cast<const Function*>(f);
  Op op;
  op.kind = Op::Kernel;
  op.fn = fn;
  op.grid = {gx, gy, gz};
  op.block = {bx, by, bz};
  for (size_t i = 0; i < fn->param_sizes.size(); ++i) {
    const auto* p = static_cast<const unsigned char*>(params[i]);
    op.params.emplace_back(p, p + fn->param_sizes[i]);
  }
  return submit(s, std::move(op));
}

CUresult CUDAAPI cuStreamBeginCapture(CUstream s, CUstreamCaptureMode mode) {
  Stream* st = as_stream(s);
  if (!st) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // the legacy default stream cannot capture
  if (st->capturing) return CUDA_ERROR_ILLEGAL_STATE;
  st->capturing = true;
  st->invalidated = false;
  st->mode = mode;
  st->thread = std::this_thread::get_id();
  st->graph = std::make_unique<Graph>();
  Device& d = device();
  std::lock_guard<std::mutex> lock(d.mu);
  d.capturing.push_back(st);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamEndCapture(CUstream s, CUgraph* g) {
  Stream* st = as_stream(s);
  if (!st || !st->capturing) return CUDA_ERROR_ILLEGAL_STATE;
  if (st->thread != std::this_thread::get_id()) return CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
  st->capturing = false;
  {
    Device& d = device();
    std::lock_guard<std::mutex> lock(d.mu);
    d.capturing.erase(std::remove(d.capturing.begin(), d.capturing.end(), st), d.capturing.end());
  }
  if (st->invalidated) {
    st->graph.reset();
    *g = nullptr;
    return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
  }
  *g = reinterpret_cast<CUgraph>(st->graph.release());
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus* status) {
  Stream* st = as_stream(s);
  *status = !st || !st->capturing ? CU_STREAM_CAPTURE_STATUS_NONE
            : st->invalidated     ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                  : CU_STREAM_CAPTURE_STATUS_ACTIVE;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode) {
  std::swap(*mode, tl_capture_mode);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphInstantiate(CUgraphExec* e, CUgraph g, unsigned long long) {
  if (!g) return CUDA_ERROR_INVALID_VALUE;
  *e = reinterpret_cast<CUgraphExec>(std::make_unique<Graph>(*reinterpret_cast<Graph*>(g)).release());
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphLaunch(CUgraphExec e, CUstream s) {
  if (as_stream(s) && as_stream(s)->capturing) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
  for (const Op& op : reinterpret_cast<Graph*>(e)->ops) {
    if (const CUresult r = run(op); r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec e) {
  std::unique_ptr<Graph> owned(reinterpret_cast<Graph*>(e));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphDestroy(CUgraph g) {
  std::unique_ptr<Graph> owned(reinterpret_cast<Graph*>(g));
  return CUDA_SUCCESS;
}

// ---- for the emulated libraries (emulated_cublaslt.cpp, emulated_cudnn.cpp) ----------------------

// Whether [p, p + bytes) lies inside one live device allocation.
__attribute__((visibility("default"))) int flow_emulated_is_device_range(const void* p, size_t bytes) {
  return is_device_range(p, bytes) ? 1 : 0;
}

// Runs fn(arg) in stream order: now, or at each replay when `s` is capturing; `release(arg)` when the
// last graph holding it is gone. fn returns 0 on success.
__attribute__((visibility("default"))) CUresult flow_emulated_enqueue(CUstream s, int (*fn)(void*), void* arg,
                                                                      void (*release)(void*)) {
  Op op;
  op.kind = Op::Host;
  op.host_fn = fn;
  op.host_arg = std::shared_ptr<void>(arg, release);
  return submit(s, std::move(op));
}

}  // extern "C"
