// Note: the driver state (function table, cuInit result, device count) is built once, never
// throws, and is never destroyed: buffers and modules may be released by static destructors after
// this file's statics would be gone. A failed initialization is remembered (the driver does not
// appear during a process's life) and reported by every later call.
#include "runtime/cuda_driver.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "runtime/dynlib.h"

#if defined(FLOW_HAVE_CUDA_HEADERS)
#include <cuda.h>
#endif

namespace flow::runtime::cuda {

namespace {

thread_local int tl_device = 0;

}  // namespace

int current_device() {
  return tl_device;
}

DeviceGuard::DeviceGuard(int device) : previous_(tl_device) {
  set_device(device);
}
DeviceGuard::~DeviceGuard() {
  tl_device = previous_;
}

void require_cuda() {
  if (!cuda_available()) throw CudaError("flow: CUDA is not available: " + unavailable_reason(), -1);
}

#if defined(FLOW_HAVE_CUDA_HEADERS)

namespace {

#define FLOW_CU_STR2(x) #x
#define FLOW_CU_STR(x) FLOW_CU_STR2(x)

// Every entry point flow uses. cuda.h #defines many of these names to versioned ones
// (cuMemAlloc -> cuMemAlloc_v2); the member and the symbol string both go through that #define.
#define FLOW_CU_FUNCTIONS(X)           \
  X(cuGetErrorName)                    \
  X(cuGetErrorString)                  \
  X(cuInit)                            \
  X(cuDriverGetVersion)                \
  X(cuDeviceGetCount)                  \
  X(cuDeviceGet)                       \
  X(cuDeviceGetName)                   \
  X(cuDeviceGetAttribute)              \
  X(cuDeviceTotalMem)                  \
  X(cuDevicePrimaryCtxRetain)          \
  X(cuCtxGetCurrent)                   \
  X(cuCtxSetCurrent)                   \
  X(cuCtxSynchronize)                  \
  X(cuMemGetInfo)                      \
  X(cuMemAlloc)                        \
  X(cuMemFree)                         \
  X(cuMemcpyHtoDAsync)                 \
  X(cuMemcpyDtoHAsync)                 \
  X(cuMemcpyDtoDAsync)                 \
  X(cuMemcpy2DAsync)                   \
  X(cuMemsetD8Async)                   \
  X(cuStreamCreate)                    \
  X(cuStreamDestroy)                   \
  X(cuStreamSynchronize)               \
  X(cuEventCreate)                     \
  X(cuEventDestroy)                    \
  X(cuEventRecord)                     \
  X(cuEventSynchronize)                \
  X(cuEventElapsedTime)                \
  X(cuModuleLoadData)                  \
  X(cuModuleUnload)                    \
  X(cuModuleGetFunction)               \
  X(cuFuncSetAttribute)                \
  X(cuLaunchKernel)                    \
  X(cuStreamBeginCapture)              \
  X(cuStreamEndCapture)                \
  X(cuStreamIsCapturing)               \
  X(cuThreadExchangeStreamCaptureMode) \
  X(cuGraphInstantiate)                \
  X(cuGraphLaunch)                     \
  X(cuGraphExecDestroy)                \
  X(cuGraphDestroy)

struct Api {
#define FLOW_X(fn) decltype(&::fn) fn = nullptr;
  FLOW_CU_FUNCTIONS(FLOW_X)
#undef FLOW_X
};

// Versioned names that a slightly older driver may lack, with an unversioned entry point of the
// same signature and meaning for flow's use.
const char* fallback_symbol(const std::string& name) {
  if (name == "cuEventElapsedTime_v2") return "cuEventElapsedTime";
  return nullptr;
}

struct DriverState {
  Api api;
  bool ok = false;
  std::string reason;
  int version = 0;
  int count = 0;
};

std::string error_text(const Api& api, CUresult r) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api.cuGetErrorName) api.cuGetErrorName(r, &name);
  if (api.cuGetErrorString) api.cuGetErrorString(r, &text);
  std::string s = name ? name : "CUDA error " + std::to_string(static_cast<int>(r));
  if (text) s += std::string(": ") + text;
  return s;
}

void resolve(const DynamicLibrary& lib, Api& api){
#define FLOW_X(fn)                                                                                           \
  {                                                                                                          \
    void* p = lib.find_symbol(FLOW_CU_STR(fn));                                                              \
    if (!p) {                                                                                                \
      const char* alt = fallback_symbol(FLOW_CU_STR(fn));                                                    \
      if (alt) p = lib.find_symbol(alt);                                                                     \
    }                                                                                                        \
    if (!p)                                                                                                  \
      throw std::runtime_error(std::string("the CUDA driver ") + lib.path() + " has no " + FLOW_CU_STR(fn) + \
                               " (the driver is older than flow needs)");                                    \
    api.fn = reinterpret_cast<decltype(api.fn)>(p);                                                          \
  }
    FLOW_CU_FUNCTIONS(FLOW_X)
#undef FLOW_X
}

DriverState* init_state() {
  auto* s = new DriverState();  // never destroyed, see the note at the top
  try {
    const DynamicLibrary& lib = load_cuda_library(CudaLib::Driver);
    resolve(lib, s->api);
    const CUresult r = s->api.cuInit(0);
    if (r != CUDA_SUCCESS) {
      s->reason =
          "the CUDA driver (" + lib.path() + ") failed to initialize: cuInit(0) returned " + error_text(s->api, r);
      return s;
    }
    s->api.cuDriverGetVersion(&s->version);
    if (s->api.cuDeviceGetCount(&s->count) != CUDA_SUCCESS) s->count = 0;
    if (s->count <= 0) {
      s->reason = "the CUDA driver (" + lib.path() + ") reports no CUDA device";
      return s;
    }
    s->ok = true;
  } catch (const std::exception& e) {
    s->reason = e.what();
  }
  return s;
}

const DriverState& state() {
  static const DriverState* s = init_state();
  return *s;
}

// The API table of an initialized driver; throws CudaError otherwise.
const Api& api() {
  const DriverState& s = state();
  if (!s.ok) throw CudaError("flow: CUDA is not available: " + s.reason, -1);
  return s.api;
}

[[noreturn]] void fail(CUresult r, const std::string& call, const char* file, int line) {
  throw CudaError(
      "flow: CUDA error in " + call + " at " + file + ":" + std::to_string(line) + ": " + error_text(state().api, r),
      static_cast<int>(r));
}

#define FLOW_CU_CHECK(expr, call)                                               \
  do {                                                                          \
    const CUresult flow_cu_r_ = (expr);                                         \
    if (flow_cu_r_ != CUDA_SUCCESS) fail(flow_cu_r_, call, __FILE__, __LINE__); \
  } while (0)

void check_device_index(int device) {
  const int n = state().count;
  if (device < 0 || device >= n)
    throw CudaError(
        "flow: CUDA device index " + std::to_string(device) + " is out of range (" + std::to_string(n) + " device(s))",
        static_cast<int>(CUDA_ERROR_INVALID_DEVICE));
}

// Primary contexts, retained on first use and kept for the process.
CUcontext primary_context(int device) {
  static std::mutex mu;
  static auto* contexts = new std::map<int, CUcontext>();
  const Api& a = api();
  check_device_index(device);
  std::lock_guard<std::mutex> lock(mu);
  auto it = contexts->find(device);
  if (it != contexts->end()) return it->second;
  CUdevice dev = 0;
  FLOW_CU_CHECK(a.cuDeviceGet(&dev, device), "cuDeviceGet(" + std::to_string(device) + ")");
  CUcontext ctx = nullptr;
  FLOW_CU_CHECK(a.cuDevicePrimaryCtxRetain(&ctx, dev),
                "cuDevicePrimaryCtxRetain(device " + std::to_string(device) + ")");
  contexts->emplace(device, ctx);
  return ctx;
}

CUdeviceptr dptr(const void* p) {
  return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p));
}

bool sync_after_launch() {
  static const bool on = [] {
    const char* e = std::getenv("FLOW_CUDA_SYNC");
    return e != nullptr && *e != '\0' && std::string(e) != "0";
  }();
  return on;
}

}  // namespace

bool cuda_available() {
  return state().ok;
}
std::string unavailable_reason() {
  return state().ok ? std::string() : state().reason;
}
int device_count() {
  return state().ok ? state().count : 0;
}

int driver_version() {
  require_cuda();
  return state().version;
}

void set_device(int device) {
  require_cuda();
  check_device_index(device);
  ensure_context(device);
  tl_device = device;
}

void ensure_context() {
  ensure_context(tl_device);
}

void ensure_context(int device) {
  const Api& a = api();
  CUcontext want = primary_context(device);
  CUcontext cur = nullptr;
  FLOW_CU_CHECK(a.cuCtxGetCurrent(&cur), "cuCtxGetCurrent");
  if (cur != want) FLOW_CU_CHECK(a.cuCtxSetCurrent(want), "cuCtxSetCurrent(device " + std::to_string(device) + ")");
}

const DeviceProps& device_props(int device) {
  static std::mutex mu;
  static auto* cache = new std::map<int, DeviceProps>();
  const Api& a = api();
  check_device_index(device);
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache->find(device);
  if (it != cache->end()) return it->second;
  CUdevice dev = 0;
  FLOW_CU_CHECK(a.cuDeviceGet(&dev, device), "cuDeviceGet(" + std::to_string(device) + ")");
  DeviceProps p;
  p.index = device;
  char name[256] = {0};
  FLOW_CU_CHECK(a.cuDeviceGetName(name, sizeof(name) - 1, dev), "cuDeviceGetName");
  p.name = name;
  auto attr = [&](CUdevice_attribute at, const char* what) {
    int v = 0;
    FLOW_CU_CHECK(a.cuDeviceGetAttribute(&v, at, dev), std::string("cuDeviceGetAttribute(") + what + ")");
    return v;
  };
  p.major = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, "compute capability major");
  p.minor = attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, "compute capability minor");
  p.arch = "sm_" + std::to_string(p.major) + std::to_string(p.minor);
  p.sm_count = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, "multiprocessor count");
  p.max_threads_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, "max threads per block");
  p.warp_size = attr(CU_DEVICE_ATTRIBUTE_WARP_SIZE, "warp size");
  p.shared_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, "shared memory per block");
  p.shared_per_block_optin =
      attr(CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, "shared memory per block (opt-in)");
  size_t total = 0;
  FLOW_CU_CHECK(a.cuDeviceTotalMem(&total, dev), "cuDeviceTotalMem");
  p.total_memory = static_cast<int64_t>(total);
  return cache->emplace(device, std::move(p)).first->second;
}

void synchronize_device() {
  const Api& a = api();
  ensure_context();
  FLOW_CU_CHECK(a.cuCtxSynchronize(), "cuCtxSynchronize");
}

std::pair<size_t, size_t> memory_info() {
  const Api& a = api();
  ensure_context();
  size_t free_b = 0, total_b = 0;
  FLOW_CU_CHECK(a.cuMemGetInfo(&free_b, &total_b), "cuMemGetInfo");
  return {free_b, total_b};
}

// ---- modules -----------------------------------------------------------------------------------

struct CudaModule::Impl {
  CUmodule module = nullptr;
  std::string what;
  mutable std::mutex mu;
  mutable std::unordered_map<std::string, CUfunction> functions;
};

CudaModule::CudaModule(const std::string& image, const std::string& what, int device)
    : impl_(std::make_unique<Impl>()), device_(device < 0 ? current_device() : device) {
  const Api& a = api();
  ensure_context(device_);
  impl_->what = what;
  if (image.empty()) throw std::invalid_argument("flow: CudaModule(" + what + "): empty image");
  // cuModuleLoadData reads a cubin (ELF) by its header, or PTX as a NUL-terminated string.
  FLOW_CU_CHECK(a.cuModuleLoadData(&impl_->module, image.c_str()),
                "cuModuleLoadData(" + what + ", " + std::to_string(image.size()) + " bytes, device " +
                    std::to_string(device_) + ")");
}

CudaModule::~CudaModule() {
  if (!impl_ || !impl_->module) return;
  try {
    ensure_context(device_);
    state().api.cuModuleUnload(impl_->module);  // errors ignored: teardown
  } catch (...) {
  }
}

Function CudaModule::function(const std::string& name) const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  auto it = impl_->functions.find(name);
  if (it != impl_->functions.end()) return it->second;
  const Api& a = api();
  ensure_context(device_);
  CUfunction f = nullptr;
  FLOW_CU_CHECK(a.cuModuleGetFunction(&f, impl_->module, name.c_str()),
                "cuModuleGetFunction(" + impl_->what + ", \"" + name + "\")");
  impl_->functions.emplace(name, f);
  return f;
}

namespace {
struct ModuleCache {
  std::mutex mu;
  std::map<std::pair<int, std::string>, std::shared_ptr<const CudaModule>> modules;
};
ModuleCache& module_cache() {
  static auto* cache = new ModuleCache();  // never destroyed, see the note at the top
  return *cache;
}
}  // namespace

std::shared_ptr<const CudaModule> CudaModule::get(const std::string& key, const std::string& image) {
  ModuleCache& c = module_cache();
  const int device = current_device();
  std::lock_guard<std::mutex> lock(c.mu);
  auto it = c.modules.find({device, key});
  if (it != c.modules.end()) return it->second;
  auto m = std::make_shared<const CudaModule>(image, key, device);
  c.modules.emplace(std::make_pair(device, key), m);
  return m;
}

size_t CudaModule::cached_modules() {
  ModuleCache& c = module_cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.modules.size();
}

// ---- launch ------------------------------------------------------------------------------------

void launch(Function f, const std::array<unsigned, 3>& grid, const std::array<unsigned, 3>& block,
            unsigned shared_bytes, Stream stream, void** params, const std::string& what) {
  const Api& a = api();
  ensure_context();
  if (shared_bytes > 48 * 1024) {
    FLOW_CU_CHECK(
        a.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, static_cast<int>(shared_bytes)),
        "cuFuncSetAttribute(" + what + ", max dynamic shared = " + std::to_string(shared_bytes) + ")");
  }
  auto shape = [&] {
    return what + " grid (" + std::to_string(grid[0]) + ", " + std::to_string(grid[1]) + ", " +
           std::to_string(grid[2]) + ") block (" + std::to_string(block[0]) + ", " + std::to_string(block[1]) + ", " +
           std::to_string(block[2]) + ") shared " + std::to_string(shared_bytes);
  };
  const CUresult r = a.cuLaunchKernel(f, grid[0], grid[1], grid[2], block[0], block[1], block[2], shared_bytes, stream,
                                      params, nullptr);
  if (r != CUDA_SUCCESS) fail(r, "cuLaunchKernel(" + shape() + ")", __FILE__, __LINE__);
  // Not while `stream` captures a CUDA graph: nothing runs then, and a synchronize would end the capture.
  CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
  if (sync_after_launch() && a.cuStreamIsCapturing(stream, &capture) == CUDA_SUCCESS &&
      capture == CU_STREAM_CAPTURE_STATUS_NONE) {
    const CUresult s = a.cuStreamSynchronize(stream);
    if (s != CUDA_SUCCESS)
      fail(s, "cuStreamSynchronize after cuLaunchKernel(" + shape() + ") [FLOW_CUDA_SYNC]", __FILE__, __LINE__);
  }
}

std::vector<std::string> driver_symbol_names() {
  return {
#define FLOW_X(fn) FLOW_CU_STR(fn),
      FLOW_CU_FUNCTIONS(FLOW_X)
#undef FLOW_X
  };
}

// ---- thin wrappers -----------------------------------------------------------------------------

namespace driver {

void* mem_alloc(size_t bytes) {
  const Api& a = api();
  ensure_context();
  CUdeviceptr p = 0;
  // cuMemAlloc is a "potentially unsafe" call during a stream capture on this thread: relaxed mode
  // allows it (as PyTorch's allocator does). A graph only ever sees the address, and flow never
  // frees a block a graph uses while the graph exists (runtime/cuda_allocator.h).
  CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
  FLOW_CU_CHECK(a.cuThreadExchangeStreamCaptureMode(&mode), "cuThreadExchangeStreamCaptureMode(relaxed)");
  const CUresult r = a.cuMemAlloc(&p, bytes);
  a.cuThreadExchangeStreamCaptureMode(&mode);  // restores the thread's mode
  if (r != CUDA_SUCCESS)
    fail(r, "cuMemAlloc(" + std::to_string(bytes) + " bytes, device " + std::to_string(current_device()) + ")",
         __FILE__, __LINE__);
  return reinterpret_cast<void*>(static_cast<uintptr_t>(p));
}

void mem_free(void* p) {
  const Api& a = api();
  ensure_context();
  FLOW_CU_CHECK(a.cuMemFree(dptr(p)), "cuMemFree");
}

void memcpy_htod(void* dst, const void* src, size_t bytes, Stream stream) {
  const Api& a = api();
  ensure_context();
  FLOW_CU_CHECK(a.cuMemcpyHtoDAsync(dptr(dst), src, bytes, stream),
                "cuMemcpyHtoDAsync(" + std::to_string(bytes) + " bytes)");
}

void memcpy_dtoh(void* dst, const void* src, size_t bytes, Stream stream) {
  const Api& a = api();
  ensure_context();
  FLOW_CU_CHECK(a.cuMemcpyDtoHAsync(dst, dptr(src), bytes, stream),
                "cuMemcpyDtoHAsync(" + std::to_string(bytes) + " bytes)");
}

void memcpy_dtod(void* dst, const void* src, size_t bytes, Stream stream) {
  const Api& a = api();
  ensure_context();
  FLOW_CU_CHECK(a.cuMemcpyDtoDAsync(dptr(dst), dptr(src), bytes, stream),
                "cuMemcpyDtoDAsync(" + std::to_string(bytes) + " bytes)");
}

void memcpy_2d_dtod(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, size_t height,
                    Stream stream) {
  const Api& a = api();
  ensure_context();
  CUDA_MEMCPY2D p;
  std::memset(&p, 0, sizeof p);
  p.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  p.srcDevice = dptr(src);
  p.srcPitch = src_pitch;
  p.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  p.dstDevice = dptr(dst);
  p.dstPitch = dst_pitch;
  p.WidthInBytes = width;
  p.Height = height;
  FLOW_CU_CHECK(a.cuMemcpy2DAsync(&p, stream),
                "cuMemcpy2DAsync(" + std::to_string(height) + " rows of " + std::to_string(width) + " bytes)");
}

void memset_d8(void* dst, unsigned char value, size_t bytes, Stream stream) {
  const Api& a = api();
  ensure_context();
  FLOW_CU_CHECK(a.cuMemsetD8Async(dptr(dst), value, bytes, stream),
                "cuMemsetD8Async(" + std::to_string(bytes) + " bytes)");
}

Stream stream_create_non_blocking() {
  const Api& a = api();
  ensure_context();
  CUstream s = nullptr;
  FLOW_CU_CHECK(a.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate(non-blocking)");
  return s;
}

void stream_destroy(Stream s) noexcept {
  if (!s || !state().ok) return;
  state().api.cuStreamDestroy(s);
}

void stream_synchronize(Stream s) {
  const Api& a = api();
  ensure_context();
  FLOW_CU_CHECK(a.cuStreamSynchronize(s), "cuStreamSynchronize");
}

Event event_create() {
  const Api& a = api();
  ensure_context();
  CUevent e = nullptr;
  FLOW_CU_CHECK(a.cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
  return e;
}

void event_destroy(Event e) noexcept {
  if (!e || !state().ok) return;
  state().api.cuEventDestroy(e);
}

void event_record(Event e, Stream s) {
  const Api& a = api();
  ensure_context();
  FLOW_CU_CHECK(a.cuEventRecord(e, s), "cuEventRecord");
}

void event_synchronize(Event e) {
  const Api& a = api();
  ensure_context();
  FLOW_CU_CHECK(a.cuEventSynchronize(e), "cuEventSynchronize");
}

float event_elapsed_ms(Event start, Event stop) {
  const Api& a = api();
  ensure_context();
  float ms = 0;
  FLOW_CU_CHECK(a.cuEventElapsedTime(&ms, start, stop), "cuEventElapsedTime");
  return ms;
}

void stream_begin_capture(Stream s) {
  const Api& a = api();
  ensure_context();
  FLOW_CU_CHECK(a.cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL), "cuStreamBeginCapture(thread-local)");
}

GraphHandle stream_end_capture(Stream s) {
  const Api& a = api();
  ensure_context();
  CUgraph g = nullptr;
  FLOW_CU_CHECK(a.cuStreamEndCapture(s, &g), "cuStreamEndCapture");
  return g;
}

bool stream_is_capturing(Stream s) {
  const Api& a = api();
  ensure_context();
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  FLOW_CU_CHECK(a.cuStreamIsCapturing(s, &status), "cuStreamIsCapturing");
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

GraphExecHandle graph_instantiate(GraphHandle g) {
  const Api& a = api();
  ensure_context();
  CUgraphExec e = nullptr;
  FLOW_CU_CHECK(a.cuGraphInstantiate(&e, g, 0), "cuGraphInstantiate");
  return e;
}

void graph_launch(GraphExecHandle e, Stream s) {
  const Api& a = api();
  ensure_context();
  FLOW_CU_CHECK(a.cuGraphLaunch(e, s), "cuGraphLaunch");
}

void graph_exec_destroy(GraphExecHandle e) noexcept {
  if (!e || !state().ok) return;
  state().api.cuGraphExecDestroy(e);
}

void graph_destroy(GraphHandle g) noexcept {
  if (!g || !state().ok) return;
  state().api.cuGraphDestroy(g);
}

}  // namespace driver

#else  // !FLOW_HAVE_CUDA_HEADERS: a build without cuda.h has no CUDA runtime.

namespace {
const char* kNoHeaders = "this build of flow has no CUDA driver support (cuda.h was not found at configure time)";
}

bool cuda_available() {
  return false;
}
std::string unavailable_reason() {
  return kNoHeaders;
}
int device_count() {
  return 0;
}
int driver_version() {
  require_cuda();
  return 0;
}
void set_device(int) {
  require_cuda();
}
void ensure_context() {
  require_cuda();
}
void ensure_context(int) {
  require_cuda();
}
const DeviceProps& device_props(int) {
  require_cuda();
  throw std::logic_error("unreachable");
}
void synchronize_device() {
  require_cuda();
}
std::pair<size_t, size_t> memory_info() {
  require_cuda();
  return {0, 0};
}
struct CudaModule::Impl {};
CudaModule::CudaModule(const std::string&, const std::string&, int) {
  require_cuda();
}
CudaModule::~CudaModule() = default;
Function CudaModule::function(const std::string&) const {
  require_cuda();
  return nullptr;
}
std::shared_ptr<const CudaModule> CudaModule::get(const std::string&, const std::string&) {
  require_cuda();
  return nullptr;
}
size_t CudaModule::cached_modules() {
  return 0;
}
void launch(Function, const std::array<unsigned, 3>&, const std::array<unsigned, 3>&, unsigned, Stream, void**,
            const std::string&) {
  require_cuda();
}
std::vector<std::string> driver_symbol_names() {
  return {};
}
namespace driver {
void* mem_alloc(size_t) {
  require_cuda();
  return nullptr;
}
void mem_free(void*) {
  require_cuda();
}
void memcpy_htod(void*, const void*, size_t, Stream) {
  require_cuda();
}
void memcpy_dtoh(void*, const void*, size_t, Stream) {
  require_cuda();
}
void memcpy_dtod(void*, const void*, size_t, Stream) {
  require_cuda();
}
void memcpy_2d_dtod(void*, size_t, const void*, size_t, size_t, size_t, Stream) {
  require_cuda();
}
void memset_d8(void*, unsigned char, size_t, Stream) {
  require_cuda();
}
Stream stream_create_non_blocking() {
  require_cuda();
  return nullptr;
}
void stream_destroy(Stream) noexcept {}
void stream_synchronize(Stream) {
  require_cuda();
}
Event event_create() {
  require_cuda();
  return nullptr;
}
void event_destroy(Event) noexcept {}
void event_record(Event, Stream) {
  require_cuda();
}
void event_synchronize(Event) {
  require_cuda();
}
float event_elapsed_ms(Event, Event) {
  require_cuda();
  return 0;
}
void stream_begin_capture(Stream) {
  require_cuda();
}
GraphHandle stream_end_capture(Stream) {
  require_cuda();
  return nullptr;
}
bool stream_is_capturing(Stream) {
  require_cuda();
  return false;
}
GraphExecHandle graph_instantiate(GraphHandle) {
  require_cuda();
  return nullptr;
}
void graph_launch(GraphExecHandle, Stream) {
  require_cuda();
}
void graph_exec_destroy(GraphExecHandle) noexcept {}
void graph_destroy(GraphHandle) noexcept {}
}  // namespace driver

#endif  // FLOW_HAVE_CUDA_HEADERS

}  // namespace flow::runtime::cuda
