// Note: the cuDNN function table follows cuda_driver.cpp: an X-macro list of the entry points,
// resolved once from load_cuda_library(CudaLib::Cudnn), each typed by the real header's prototype
// (decltype(&::name)). The library is built against cudnn.h (FLOW_HAVE_CUDNN_HEADERS, found next to
// cuda.h or in .deps/include, which tools/prepare_gpu_deps.sh fills); without it the pure parts
// (supported(), problem_key(), algo_names()) still work and the rest throws "flow was built without
// cuDNN headers (cudnn.h)". Only entry points present in every cuDNN 9.x are used.
//
// Descriptors are built from the problem on every call (host-only and cheap) and owned by
// unique_ptrs; x and y get the dense strides of the filter's layout (supported() checked that they
// are dense in it, up to strides of size-1 dimensions, which cuDNN must not see).
//
// Errors: every call is checked and throws "flow: cuDNN error in <call> (<problem key>):
// CUDNN_STATUS_...: <detail>". The status name is cudnnGetErrorString's (cuDNN 9 returns the enum
// name; a category name otherwise); the detail is cudnnGetLastErrorString's, which the legacy calls
// often leave empty (seen for BAD_PARAM from the descriptor functions), and then a hint to cuDNN's
// own logging. cuDNN 9 reports NOT_SUPPORTED as a category (3000..3999) of specific codes; the
// fused-path fallback treats the whole category as "not supported".
#include "runtime/cudnn.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <utility>

#include "runtime/cuda_allocator.h"
#include "runtime/cuda_stream.h"
#include "runtime/dynlib.h"
#include "runtime/epilogue_kernel.h"

#if defined(FLOW_HAVE_CUDA_HEADERS) && defined(FLOW_HAVE_CUDNN_HEADERS)
#include <cudnn.h>
#define FLOW_HAVE_CUDNN 1
#endif

namespace flow::runtime::cuda::cudnn {

#define FLOW_DNN_STR2(x) #x
#define FLOW_DNN_STR(x) FLOW_DNN_STR2(x)

// Every cuDNN entry point flow uses (all exported by libcudnn.so.9 since 9.0).
#define FLOW_DNN_FUNCTIONS(X)                         \
  X(cudnnGetVersion)                                  \
  X(cudnnGetErrorString)                              \
  X(cudnnGetLastErrorString)                          \
  X(cudnnCreate)                                      \
  X(cudnnSetStream)                                   \
  X(cudnnCreateTensorDescriptor)                      \
  X(cudnnSetTensor4dDescriptorEx)                     \
  X(cudnnSetTensorNdDescriptor)                       \
  X(cudnnDestroyTensorDescriptor)                     \
  X(cudnnCreateFilterDescriptor)                      \
  X(cudnnSetFilter4dDescriptor)                       \
  X(cudnnSetFilterNdDescriptor)                       \
  X(cudnnDestroyFilterDescriptor)                     \
  X(cudnnCreateConvolutionDescriptor)                 \
  X(cudnnSetConvolution2dDescriptor)                  \
  X(cudnnSetConvolutionNdDescriptor)                  \
  X(cudnnSetConvolutionGroupCount)                    \
  X(cudnnSetConvolutionMathType)                      \
  X(cudnnDestroyConvolutionDescriptor)                \
  X(cudnnCreateActivationDescriptor)                  \
  X(cudnnSetActivationDescriptor)                     \
  X(cudnnDestroyActivationDescriptor)                 \
  X(cudnnGetConvolution2dForwardOutputDim)            \
  X(cudnnGetConvolutionNdForwardOutputDim)            \
  X(cudnnGetConvolutionForwardAlgorithmMaxCount)      \
  X(cudnnGetConvolutionForwardAlgorithm_v7)           \
  X(cudnnFindConvolutionForwardAlgorithmEx)           \
  X(cudnnGetConvolutionForwardWorkspaceSize)          \
  X(cudnnConvolutionForward)                          \
  X(cudnnConvolutionBiasActivationForward)            \
  X(cudnnGetConvolutionBackwardDataAlgorithmMaxCount) \
  X(cudnnGetConvolutionBackwardDataAlgorithm_v7)      \
  X(cudnnFindConvolutionBackwardDataAlgorithmEx)      \
  X(cudnnGetConvolutionBackwardDataWorkspaceSize)     \
  X(cudnnConvolutionBackwardData)

namespace {

constexpr int kAlgoCount = 8;
const char* const kAlgoNames[kAlgoCount] = {
    "IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
// Transposed problems run cuDNN's backward data, whose algorithms are another enum.
constexpr int kBwdDataAlgoCount = 6;
const char* const kBwdDataAlgoNames[kBwdDataAlgoCount] = {"ALGO_0",     "ALGO_1",   "FFT",
                                                          "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};

int algo_count(bool transposed) {
  return transposed ? kBwdDataAlgoCount : kAlgoCount;
}
const char* algo_name(bool transposed, int id) {
  return transposed ? kBwdDataAlgoNames[id] : kAlgoNames[id];
}

// Dense strides of an (n, c, spatial...) tensor, in that order: channels second (NCHW, NCDHW) or
// innermost (NHWC, NDHWC).
std::vector<int64_t> dense_strides(const std::vector<int64_t>& dims, bool nhwc) {
  std::vector<size_t> order = {0};  // the dims in memory order, outermost first
  if (!nhwc) order.push_back(1);
  for (size_t i = 2; i < dims.size(); ++i) order.push_back(i);
  if (nhwc) order.push_back(1);
  std::vector<int64_t> st(dims.size());
  int64_t next = 1;
  for (size_t j = order.size(); j-- > 0;) {
    st[order[j]] = next;
    next *= dims[order[j]];
  }
  return st;
}

// Whether `strides` address the same elements as the dense strides (a size-1 dimension's stride
// does not matter).
bool dense_in(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides, bool nhwc) {
  if (strides.size() != dims.size()) return false;
  const std::vector<int64_t> want = dense_strides(dims, nhwc);
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i] != 1 && strides[i] != want[i]) return false;
  return true;
}

// "[a,b,c,d]"
template <typename T>
std::string list_of(const std::vector<T>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

// The product of values[from:], saturated at INT64_MAX (all non-negative).
int64_t product(const std::vector<int64_t>& values, size_t from = 0) {
  int64_t r = 1;
  for (size_t i = from; i < values.size(); ++i) {
    const int64_t v = values[i];
    if (v != 0 && r > INT64_MAX / v) return INT64_MAX;
    r *= v;
  }
  return r;
}

// The most elements a cuDNN tensor may have: 2^31-1 (its descriptors take int sizes and strides).
// FLOW_CUDNN_MAX_TENSOR_ELEMENTS lowers it, so the tests can split small batches.
int64_t tensor_element_limit() {
  const char* v = std::getenv("FLOW_CUDNN_MAX_TENSOR_ELEMENTS");
  if (v == nullptr || *v == '\0') return INT_MAX;
  char* end = nullptr;
  const long long n = std::strtoll(v, &end, 10);
  return *end == '\0' && n > 0 && n < INT_MAX ? static_cast<int64_t>(n) : INT_MAX;
}

// One spatial axis of a problem: input size, filter size, padding, stride, dilation, output size.
struct Axis {
  int64_t in, f, pad, stride, dil, out;
};
// p's spatial axes, outermost first: (d,) h, w.
std::vector<Axis> axes(const ConvProblem& p) {
  std::vector<Axis> a;
  if (p.spatial == 3) a.push_back({p.d, p.t, p.pad_d, p.stride_d, p.dil_d, p.out_d});
  a.push_back({p.h, p.r, p.pad_h, p.stride_h, p.dil_h, p.out_h});
  a.push_back({p.w, p.s, p.pad_w, p.stride_w, p.dil_w, p.out_w});
  return a;
}

// (n, c, spatial...) of x, y and the filter (k, c / groups, taps...).
std::vector<int64_t> x_dims(const ConvProblem& p) {
  std::vector<int64_t> d = {p.n, p.c};
  for (const Axis& a : axes(p)) d.push_back(a.in);
  return d;
}
std::vector<int64_t> y_dims(const ConvProblem& p) {
  std::vector<int64_t> d = {p.n, p.k};
  for (const Axis& a : axes(p)) d.push_back(a.out);
  return d;
}
std::vector<int64_t> w_dims(const ConvProblem& p) {
  std::vector<int64_t> d = {p.k, p.groups > 0 ? p.c / p.groups : 0};
  for (const Axis& a : axes(p)) d.push_back(a.f);
  return d;
}

// The axes' values joined by " x " ("3 x 3").
template <typename Field>
std::string joined(const ConvProblem& p, Field field, const char* sep = " x ") {
  std::string s;
  for (const Axis& a : axes(p)) s += (s.empty() ? "" : sep) + std::to_string(field(a));
  return s;
}

bool empty_output(const ConvProblem& p) {
  return p.n == 0 || (p.k == 0 && !p.transposed);
}

// What choose() returns for an empty output (nothing will run).
Algo empty_algo(const ConvProblem& p) {
  Algo a;
  a.id = 0;
  a.name = algo_name(p.transposed, 0);
  return a;
}

void check_supported(const ConvProblem& p) {
  std::string why;
  if (!supported(p, &why)) throw std::invalid_argument("flow: cuDNN cannot run this convolution: " + why);
}

// The argument checks of choose(): false when there is nothing to run (an empty output).
bool check_choose_args(const ConvProblem& p, Search search, const void* x, const void* w, const void* y) {
  check_supported(p);
  if (empty_output(p)) return false;
  if (search == Search::Exhaustive && (x == nullptr || w == nullptr || y == nullptr))
    throw std::invalid_argument("flow: cuDNN exhaustive search needs x, w and y buffers (" + problem_key(p) + ")");
  return true;
}

// The argument checks of forward(): false when there is nothing to run (an empty output).
bool check_forward_args(const ConvProblem& p, const Algo& algo, const void* x, const void* w, const void* bias,
                        const void* z, const void* y) {
  check_supported(p);
  if (empty_output(p)) return false;
  auto need = [&](const void* ptr, const char* what) {
    if (ptr == nullptr)
      throw std::invalid_argument(std::string("flow: cuDNN forward: ") + what + " is null (" + problem_key(p) + ")");
  };
  need(x, "x");
  need(w, "w");
  need(y, "y");
  if (p.bias) need(bias, "bias");
  if (p.residual) need(z, "z");
  if (algo.id < 0 || algo.id >= algo_count(p.transposed))
    throw std::invalid_argument("flow: cuDNN forward: unknown algorithm id " + std::to_string(algo.id) + " (" +
                                problem_key(p) + ")");
  return true;
}

}  // namespace

std::vector<std::string> algo_names(bool transposed) {
  std::vector<std::string> names;
  for (int i = 0; i < algo_count(transposed); ++i) names.emplace_back(algo_name(transposed, i));
  return names;
}

int algo_id(const std::string& name, bool transposed) {
  for (int i = 0; i < algo_count(transposed); ++i)
    if (name == algo_name(transposed, i)) return i;
  return -1;
}

int64_t conv_out_size(int64_t in, int64_t pad, int64_t dil, int64_t f, int64_t stride) {
  const int64_t span = in + 2 * pad - dil * (f - 1) - 1;
  if (span < 0 || stride < 1) return 0;
  return span / stride + 1;
}

bool supported(const ConvProblem& p, std::string* why) {
  auto reject = [&](const std::string& reason) {
    if (why != nullptr) *why = reason;
    return false;
  };
  auto positive = [&](int64_t v, const char* name, int64_t min) {
    if (v >= min) return true;
    if (why != nullptr)
      *why = std::string(name) + " = " + std::to_string(v) + " (must be >= " + std::to_string(min) + ")";
    return false;
  };
  if (p.spatial != 2 && p.spatial != 3)
    return reject("spatial = " + std::to_string(p.spatial) + " (cuDNN runs 2-D and 3-D convolutions)");
  if (!positive(p.n, "n", 0) || !positive(p.c, "c", 1) || !positive(p.h, "h", 1) || !positive(p.w, "w", 1) ||
      !positive(p.k, "k", 0) || !positive(p.r, "r", 1) || !positive(p.s, "s", 1) || !positive(p.groups, "groups", 1) ||
      !positive(p.pad_h, "pad_h", 0) || !positive(p.pad_w, "pad_w", 0) || !positive(p.stride_h, "stride_h", 1) ||
      !positive(p.stride_w, "stride_w", 1) || !positive(p.dil_h, "dil_h", 1) || !positive(p.dil_w, "dil_w", 1))
    return false;
  if (p.spatial == 3 && (!positive(p.d, "d", 1) || !positive(p.t, "t", 1) || !positive(p.pad_d, "pad_d", 0) ||
                         !positive(p.stride_d, "stride_d", 1) || !positive(p.dil_d, "dil_d", 1)))
    return false;
  for (const int64_t v :
       {p.n,        p.c,     p.h,     p.w,     p.k,     p.r, p.s, p.groups, p.pad_h,    p.pad_w, p.stride_h,
        p.stride_w, p.dil_h, p.dil_w, p.out_h, p.out_w, p.d, p.t, p.pad_d,  p.stride_d, p.dil_d, p.out_d})
    if (v > INT_MAX) return reject("a size or parameter exceeds 2^31-1 (" + problem_key(p) + ")");
  if (p.c % p.groups != 0 || p.k % p.groups != 0)
    return reject("groups = " + std::to_string(p.groups) + " does not divide c = " + std::to_string(p.c) +
                  " and k = " + std::to_string(p.k));
  const auto out_of = [](const Axis& a) { return conv_out_size(a.in, a.pad, a.dil, a.f, a.stride); };
  for (const Axis& a : axes(p))
    if (out_of(a) < 1)
      return reject("the dilated filter (" + joined(p, [](const Axis& b) { return b.dil * (b.f - 1) + 1; }) +
                    ") is larger than the padded input (" + joined(p, [](const Axis& b) { return b.in + 2 * b.pad; }) +
                    ")");
  for (const Axis& a : axes(p))
    if (a.out != out_of(a))
      return reject(std::string(p.spatial == 3 ? "out_d x " : "") +
                    "out_h x out_w = " + joined(p, [](const Axis& b) { return b.out; }) +
                    ", but the convolution gives " + joined(p, out_of));
  // A batch too large for one call runs in chunks of images (forward, choose); one image and the
  // filter must fit.
  const int64_t limit = tensor_element_limit();
  if (product(x_dims(p), 1) > limit || product(y_dims(p), 1) > limit || product(w_dims(p)) > limit)
    return reject("one image or the filter has more than " + std::to_string(limit) +
                  " elements, cuDNN's limit per tensor: " + problem_key(p));
  if (empty_output(p)) return true;  // nothing to run
  if (p.transposed && p.k == 0)
    return reject("a transposed convolution of an input without channels (its output would be the bias alone)");
  const bool three = p.spatial == 3;
  // NDHWC through the legacy N-d calls has not run on a device (TVM's cuDNN wrapper refuses it), and
  // flow's layout pass never asks for it: 3-D runs NCDHW.
  if (three && p.w_nhwc) return reject("a 3-D convolution in NDHWC (flow runs 3-D convolutions NCDHW)");
  const char* layout = p.w_nhwc ? "NHWC" : (three ? "NCDHW" : "NCHW");
  const char* filter = p.w_nhwc ? "KRSC" : (three ? "KCTRS" : "KCRS");
  if (!dense_in(x_dims(p), p.x_strides, p.w_nhwc))
    return reject("x strides " + list_of(p.x_strides) + " are not " + layout + "-dense (the filter is " + filter +
                  ", so x and y must be " + layout + ")");
  if (!dense_in(y_dims(p), p.y_strides, p.w_nhwc))
    return reject("y strides " + list_of(p.y_strides) + " are not " + layout + "-dense (the filter is " + filter +
                  ", so x and y must be " + layout + ")");
  return true;
}

std::string problem_key(const ConvProblem& p) {
  // 2-D: "n8c64h56w56_k64r3s3_g1_p1x1_s1x1_d1x1_o56x56_..."; 3-D adds the depth: "c64d8h56w56_k64t3r3s3_",
  // and an axis to the padding, stride, dilation and output.
  const bool three = p.spatial == 3;
  const std::string depth = three ? "d" + std::to_string(p.d) : "", taps = three ? "t" + std::to_string(p.t) : "";
  std::string s = "n" + std::to_string(p.n) + "c" + std::to_string(p.c) + depth + "h" + std::to_string(p.h) + "w" +
                  std::to_string(p.w) + "_k" + std::to_string(p.k) + taps + "r" + std::to_string(p.r) + "s" +
                  std::to_string(p.s) + "_g" + std::to_string(p.groups) + "_p" +
                  joined(
                      p, [](const Axis& a) { return a.pad; }, "x") +
                  "_s" +
                  joined(
                      p, [](const Axis& a) { return a.stride; }, "x") +
                  "_d" +
                  joined(
                      p, [](const Axis& a) { return a.dil; }, "x") +
                  "_o" +
                  joined(
                      p, [](const Axis& a) { return a.out; }, "x") +
                  "_" + data_type_name(p.dtype) + "_x" + list_of(p.x_strides) + "_y" + list_of(p.y_strides) +
                  (p.w_nhwc ? (three ? "_KTRSC" : "_KRSC") : (three ? "_KCTRS" : "_KCRS"));
  if (p.bias) s += "_bias";
  if (p.residual) s += "_res";
  if (p.relu) s += "_relu";
  if (p.transposed) s += "_transposed";
  return s;
}

namespace {

// Counts are atomics (forward() bumps one per call); the refusal text, rare, takes the mutex.
struct CounterState {
  std::atomic<int64_t> fused{0}, unfused{0}, refused{0}, z_probes{0}, z_read{0};
  std::mutex mu;
  std::string last_refusal;
};
CounterState& counter_state() {
  static auto* s = new CounterState();  // never destroyed, like the handles
  return *s;
}

}  // namespace

Counters counters() {
  CounterState& s = counter_state();
  Counters c;
  c.fused = s.fused.load(std::memory_order_relaxed);
  c.unfused = s.unfused.load(std::memory_order_relaxed);
  c.refused = s.refused.load(std::memory_order_relaxed);
  c.z_probes = s.z_probes.load(std::memory_order_relaxed);
  c.z_read = s.z_read.load(std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(s.mu);
  c.last_refusal = s.last_refusal;
  return c;
}

std::vector<std::string> symbol_names() {
  return {
#define FLOW_X(fn) FLOW_DNN_STR(fn),
      FLOW_DNN_FUNCTIONS(FLOW_X)
#undef FLOW_X
  };
}

#if defined(FLOW_HAVE_CUDNN)

namespace {

constexpr size_t kMaxWorkspace = size_t{1} << 30;

// algo_names() is the enum, in order.
static_assert(CUDNN_CONVOLUTION_FWD_ALGO_COUNT == kAlgoCount, "cuDNN's forward algorithms changed");
static_assert(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT == kBwdDataAlgoCount && CUDNN_CONVOLUTION_BWD_DATA_ALGO_0 == 0 &&
                  CUDNN_CONVOLUTION_BWD_DATA_ALGO_1 == 1 && CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT == 2 &&
                  CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING == 3 && CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD == 4 &&
                  CUDNN_CONVOLUTION_BWD_DATA_ALGO_WINOGRAD_NONFUSED == 5,
              "algo_names(true) must follow cudnnConvolutionBwdDataAlgo_t");
static_assert(CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM == 0 && CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM == 1 &&
                  CUDNN_CONVOLUTION_FWD_ALGO_GEMM == 2 && CUDNN_CONVOLUTION_FWD_ALGO_DIRECT == 3 &&
                  CUDNN_CONVOLUTION_FWD_ALGO_FFT == 4 && CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING == 5 &&
                  CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD == 6 && CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED == 7,
              "algo_names() must follow cudnnConvolutionFwdAlgo_t");

struct Api {
#define FLOW_X(fn) decltype(&::fn) fn = nullptr;
  FLOW_DNN_FUNCTIONS(FLOW_X)
#undef FLOW_X
};

Api resolve(const DynamicLibrary& lib) {
  Api a;
#define FLOW_X(fn) a.fn = lib.function<decltype(&::fn)>(FLOW_DNN_STR(fn));
  FLOW_DNN_FUNCTIONS(FLOW_X)
#undef FLOW_X
  return a;
}

// A failed load throws out of the initializer and is retried by the next call.
const Api& api() {
  static const Api instance = resolve(load_cuda_library(CudaLib::Cudnn));
  return instance;
}

// cuDNN's thread-local detail of the last error (empty if none); reading it clears it.
std::string last_error() {
  char buf[1024] = {0};
  api().cudnnGetLastErrorString(buf, sizeof(buf) - 1);
  return buf;
}

std::string status_text(cudnnStatus_t s) {
  const int code = static_cast<int>(s);
  const char* text = api().cudnnGetErrorString(s);
  std::string name = text != nullptr ? text : "";
  std::string message;
  if (name.rfind("CUDNN_STATUS_", 0) != 0) {  // not an enum name: name it by category
    message = name;
    switch (code / 1000 * 1000) {
      case 1000:
        name = "CUDNN_STATUS_NOT_INITIALIZED";
        break;
      case 2000:
        name = "CUDNN_STATUS_BAD_PARAM";
        break;
      case 3000:
        name = "CUDNN_STATUS_NOT_SUPPORTED";
        break;
      case 4000:
        name = "CUDNN_STATUS_INTERNAL_ERROR";
        break;
      case 5000:
        name = "CUDNN_STATUS_EXECUTION_FAILED";
        break;
      default:
        name = "CUDNN_STATUS";
    }
    name += " (" + std::to_string(code) + ")";
  }
  const std::string detail = last_error();
  if (!detail.empty()) message = detail;
  if (message.empty()) message = "no detail from cuDNN (CUDNN_LOGLEVEL_DBG=2 CUDNN_LOGDEST_DBG=stderr logs its calls)";
  return name + ": " + message;
}

[[noreturn]] void fail(cudnnStatus_t s, const std::string& call, const std::string& context) {
  throw std::runtime_error("flow: cuDNN error in " + call + " (" + context + "): " + status_text(s));
}

#define FLOW_DNN_CHECK(expr, call, context)                                    \
  do {                                                                         \
    const cudnnStatus_t flow_dnn_s_ = (expr);                                  \
    if (flow_dnn_s_ != CUDNN_STATUS_SUCCESS) fail(flow_dnn_s_, call, context); \
  } while (0)

struct Deleter {
  void operator()(cudnnTensorStruct* d) const noexcept { api().cudnnDestroyTensorDescriptor(d); }
  void operator()(cudnnFilterStruct* d) const noexcept { api().cudnnDestroyFilterDescriptor(d); }
  void operator()(cudnnConvolutionStruct* d) const noexcept { api().cudnnDestroyConvolutionDescriptor(d); }
  void operator()(cudnnActivationStruct* d) const noexcept { api().cudnnDestroyActivationDescriptor(d); }
};
using TensorDesc = std::unique_ptr<cudnnTensorStruct, Deleter>;
using FilterDesc = std::unique_ptr<cudnnFilterStruct, Deleter>;
using ConvDesc = std::unique_ptr<cudnnConvolutionStruct, Deleter>;
using ActivationDesc = std::unique_ptr<cudnnActivationStruct, Deleter>;

cudnnDataType_t cudnn_type(DataType t) {
  switch (t) {
    case DataType::Float32:
      return CUDNN_DATA_FLOAT;
    case DataType::Float16:
      return CUDNN_DATA_HALF;
    case DataType::BFloat16:
      return CUDNN_DATA_BFLOAT16;
  }
  throw std::logic_error("flow: cuDNN: unknown data type");
}

cudnnMathType_t math_type(DataType t) {
  return t == DataType::Float32 ? CUDNN_FMA_MATH : CUDNN_TENSOR_OP_MATH;
}

// A result cuDNN reports for a math type flow does not allow: tensor ops (TF32) for float32.
bool math_allowed(DataType t, cudnnMathType_t m) {
  return t != DataType::Float32 || (m != CUDNN_TENSOR_OP_MATH && m != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION);
}

std::vector<int> ints(const std::vector<int64_t>& v) {
  return std::vector<int>(v.begin(), v.end());  // supported() checked that each fits
}

// A 4-D tensor through the 4d call (as flow's 2-D path always has), a 5-D one through the Nd call.
TensorDesc tensor_desc(DataType t, const std::vector<int64_t>& dims, const std::vector<int64_t>& strides,
                       const std::string& context) {
  cudnnTensorDescriptor_t raw = nullptr;
  FLOW_DNN_CHECK(api().cudnnCreateTensorDescriptor(&raw), "cudnnCreateTensorDescriptor", context);
  TensorDesc d(raw);
  const std::vector<int> di = ints(dims), si = ints(strides);
  if (dims.size() == 4) {
    FLOW_DNN_CHECK(
        api().cudnnSetTensor4dDescriptorEx(raw, cudnn_type(t), di[0], di[1], di[2], di[3], si[0], si[1], si[2], si[3]),
        "cudnnSetTensor4dDescriptorEx(" + list_of(dims) + ", strides " + list_of(strides) + ")", context);
  } else {
    FLOW_DNN_CHECK(
        api().cudnnSetTensorNdDescriptor(raw, cudnn_type(t), static_cast<int>(di.size()), di.data(), si.data()),
        "cudnnSetTensorNdDescriptor(" + list_of(dims) + ", strides " + list_of(strides) + ")", context);
  }
  return d;
}

// x, the filter and the convolution: what the output dims need.
struct ConvDescs {
  TensorDesc x;
  FilterDesc w;
  ConvDesc conv;
};

ConvDescs conv_descs(const ConvProblem& p, const std::string& context) {
  const Api& a = api();
  ConvDescs d;
  d.x = tensor_desc(p.dtype, x_dims(p), dense_strides(x_dims(p), p.w_nhwc), context);
  cudnnFilterDescriptor_t raw_w = nullptr;
  FLOW_DNN_CHECK(a.cudnnCreateFilterDescriptor(&raw_w), "cudnnCreateFilterDescriptor", context);
  d.w.reset(raw_w);
  // The filter's dims are given in (k, c, taps...) order in either format; the format is its memory
  // order (NHWC: channels innermost, KRSC or KTRSC).
  const cudnnTensorFormat_t format = p.w_nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW;
  const std::vector<int> wd = ints(w_dims(p));
  if (p.spatial == 2) {
    FLOW_DNN_CHECK(a.cudnnSetFilter4dDescriptor(raw_w, cudnn_type(p.dtype), format, wd[0], wd[1], wd[2], wd[3]),
                   "cudnnSetFilter4dDescriptor", context);
  } else {
    FLOW_DNN_CHECK(
        a.cudnnSetFilterNdDescriptor(raw_w, cudnn_type(p.dtype), format, static_cast<int>(wd.size()), wd.data()),
        "cudnnSetFilterNdDescriptor", context);
  }
  cudnnConvolutionDescriptor_t raw_conv = nullptr;
  FLOW_DNN_CHECK(a.cudnnCreateConvolutionDescriptor(&raw_conv), "cudnnCreateConvolutionDescriptor", context);
  d.conv.reset(raw_conv);
  if (p.spatial == 2) {
    FLOW_DNN_CHECK(a.cudnnSetConvolution2dDescriptor(raw_conv, static_cast<int>(p.pad_h), static_cast<int>(p.pad_w),
                                                     static_cast<int>(p.stride_h), static_cast<int>(p.stride_w),
                                                     static_cast<int>(p.dil_h), static_cast<int>(p.dil_w),
                                                     CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                   "cudnnSetConvolution2dDescriptor", context);
  } else {
    std::vector<int> pad, stride, dil;
    for (const Axis& x : axes(p)) {
      pad.push_back(static_cast<int>(x.pad));
      stride.push_back(static_cast<int>(x.stride));
      dil.push_back(static_cast<int>(x.dil));
    }
    FLOW_DNN_CHECK(a.cudnnSetConvolutionNdDescriptor(raw_conv, static_cast<int>(pad.size()), pad.data(), stride.data(),
                                                     dil.data(), CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                   "cudnnSetConvolutionNdDescriptor", context);
  }
  FLOW_DNN_CHECK(a.cudnnSetConvolutionGroupCount(raw_conv, static_cast<int>(p.groups)), "cudnnSetConvolutionGroupCount",
                 context);
  FLOW_DNN_CHECK(a.cudnnSetConvolutionMathType(raw_conv, math_type(p.dtype)), "cudnnSetConvolutionMathType", context);
  return d;
}

// Everything a forward call needs.
struct Descs {
  ConvDescs conv;
  TensorDesc y;
  TensorDesc bias;  // [1, k, 1, 1] (3-D: [1, k, 1, 1, 1])
};

Descs descs(const ConvProblem& p, const std::string& context) {
  std::vector<int64_t> bias_dims(static_cast<size_t>(p.spatial) + 2, 1);
  bias_dims[1] = p.k;
  Descs d{conv_descs(p, context), tensor_desc(p.dtype, y_dims(p), dense_strides(y_dims(p), p.w_nhwc), context),
          tensor_desc(p.dtype, bias_dims, dense_strides(bias_dims, false), context)};
  return d;
}

// Per-stream scratch memory of a device: the workspace (grown to the largest request), allocated
// on its stream. A workspace that is outgrown is retired, never freed: a CUDA graph captured on the
// stream may have recorded it, and every replay still writes it. Growth at least doubles, so what
// is retired stays below the size of the workspace in use.
struct Scratch {
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  std::vector<void*> retired;
};

// What forward() sets up for one (problem, algorithm) on a device, made by its first call and
// reused by every later one: the descriptors, the workspace size and whether the fused call works.
// Building them costs about as much host time as enqueuing the convolution itself.
struct Prepared {
  Descs d;
  ActivationDesc act;  // set when the problem has a relu
  size_t ws_bytes = 0;
  int fused = -1;  // cudnnConvolutionBiasActivationForward: -1 not tried yet, 0 refused, 1 works
  // Without a residual, whether the fused call's result depends on what y held (z = y scaled by
  // alpha2 = 0; see fused_without_residual): -1 not probed yet, 0 no, 1 yes (y is zeroed first).
  int reads_z = -1;
};

// A device's handle, scratch and prepared calls, used under `mu` (cudnnSetStream and the calls
// after it).
struct DeviceState {
  std::mutex mu;
  cudnnHandle_t handle = nullptr;
  std::map<Stream, Scratch> scratch;
  std::map<std::string, std::unique_ptr<Prepared>> prepared;  // problem_key | algo
};

// The device's state, with its handle created on first use; never destroyed (convolutions may run
// from static destructors).
DeviceState& device_state(int device) {
  static std::mutex mu;
  static auto* states = new std::map<int, DeviceState*>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = states->find(device);
  if (it != states->end()) return *it->second;
  ensure_context(device);
  cudnnHandle_t h = nullptr;
  FLOW_DNN_CHECK(api().cudnnCreate(&h), "cudnnCreate", "device " + std::to_string(device));
  auto* s = new DeviceState();
  s->handle = h;
  states->emplace(device, s);
  return *s;
}

// The workspace of `scratch` (on `stream`), grown to at least `bytes`; the caller holds the device's
// lock.
void* grow(Scratch& scratch, int device, Stream stream, size_t bytes) {
  if (bytes == 0) return scratch.workspace;
  if (scratch.workspace != nullptr && scratch.workspace_bytes >= bytes) return scratch.workspace;
  // At least double: the retired blocks then add up to less than the workspace in use.
  const size_t size = std::max(bytes, 2 * scratch.workspace_bytes);
  StreamGuard guard(stream);
  void* const bigger = device_allocator(device).allocate(size);
  if (scratch.workspace != nullptr) scratch.retired.push_back(scratch.workspace);
  scratch.workspace = bigger;
  scratch.workspace_bytes = size;
  return bigger;
}

// A temporary device block on the current stream, returned to the allocator when dropped.
class TempBlock {
 public:
  TempBlock(int device, size_t bytes) : device_(device) {
    if (bytes > 0) p_ = device_allocator(device).allocate(bytes);
  }
  ~TempBlock() {
    if (p_ != nullptr) device_allocator(device_).free(p_);
  }
  TempBlock(const TempBlock&) = delete;
  TempBlock& operator=(const TempBlock&) = delete;
  void* get() const { return p_; }

 private:
  int device_;
  void* p_ = nullptr;
};

// The two directions flow runs: the convolution (cudnnConvolutionForward and its queries) and its
// transpose (cudnnConvolutionBackwardData and its queries), over the same descriptors: x the
// forward input, y the forward output (for the transpose, x is what it writes and y what it reads).
struct Forward {
  using Enum = cudnnConvolutionFwdAlgo_t;
  using Perf = cudnnConvolutionFwdAlgoPerf_t;
  static constexpr bool kTransposed = false;
  static constexpr const char* kMaxCount = "cudnnGetConvolutionForwardAlgorithmMaxCount";
  static constexpr const char* kQuery = "cudnnGetConvolutionForwardAlgorithm_v7";
  static constexpr const char* kFind = "cudnnFindConvolutionForwardAlgorithmEx";
  static constexpr const char* kWorkspace = "cudnnGetConvolutionForwardWorkspaceSize";
  static cudnnStatus_t max_count(cudnnHandle_t h, int* n) {
    return api().cudnnGetConvolutionForwardAlgorithmMaxCount(h, n);
  }
  static cudnnStatus_t query(cudnnHandle_t h, const Descs& d, int requested, int* returned, Perf* perf) {
    return api().cudnnGetConvolutionForwardAlgorithm_v7(h, d.conv.x.get(), d.conv.w.get(), d.conv.conv.get(), d.y.get(),
                                                        requested, returned, perf);
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const Descs& d, Enum algo, size_t* bytes) {
    return api().cudnnGetConvolutionForwardWorkspaceSize(h, d.conv.x.get(), d.conv.w.get(), d.conv.conv.get(),
                                                         d.y.get(), algo, bytes);
  }
  // `in` and `out` in the caller's terms (here x and y).
  static cudnnStatus_t find(cudnnHandle_t h, const Descs& d, const void* in, const void* w, void* out, int requested,
                            int* returned, Perf* perf, void* ws, size_t ws_bytes) {
    return api().cudnnFindConvolutionForwardAlgorithmEx(h, d.conv.x.get(), in, d.conv.w.get(), w, d.conv.conv.get(),
                                                        d.y.get(), out, requested, returned, perf, ws, ws_bytes);
  }
};

struct BackwardData {
  using Enum = cudnnConvolutionBwdDataAlgo_t;
  using Perf = cudnnConvolutionBwdDataAlgoPerf_t;
  static constexpr bool kTransposed = true;
  static constexpr const char* kMaxCount = "cudnnGetConvolutionBackwardDataAlgorithmMaxCount";
  static constexpr const char* kQuery = "cudnnGetConvolutionBackwardDataAlgorithm_v7";
  static constexpr const char* kFind = "cudnnFindConvolutionBackwardDataAlgorithmEx";
  static constexpr const char* kWorkspace = "cudnnGetConvolutionBackwardDataWorkspaceSize";
  static cudnnStatus_t max_count(cudnnHandle_t h, int* n) {
    return api().cudnnGetConvolutionBackwardDataAlgorithmMaxCount(h, n);
  }
  static cudnnStatus_t query(cudnnHandle_t h, const Descs& d, int requested, int* returned, Perf* perf) {
    return api().cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.conv.w.get(), d.y.get(), d.conv.conv.get(),
                                                             d.conv.x.get(), requested, returned, perf);
  }
  static cudnnStatus_t workspace(cudnnHandle_t h, const Descs& d, Enum algo, size_t* bytes) {
    return api().cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.conv.w.get(), d.y.get(), d.conv.conv.get(),
                                                              d.conv.x.get(), algo, bytes);
  }
  // `in` is the caller's input (the forward output, dy), `out` its output (dx).
  static cudnnStatus_t find(cudnnHandle_t h, const Descs& d, const void* in, const void* w, void* out, int requested,
                            int* returned, Perf* perf, void* ws, size_t ws_bytes) {
    return api().cudnnFindConvolutionBackwardDataAlgorithmEx(h, d.conv.w.get(), w, d.y.get(), in, d.conv.conv.get(),
                                                             d.conv.x.get(), out, requested, returned, perf, ws,
                                                             ws_bytes);
  }
};

template <typename Dir>
Algo make_algo(typename Dir::Enum id, size_t workspace, double ms) {
  const int i = static_cast<int>(id);
  Algo a;
  a.id = i;
  a.name = i >= 0 && i < algo_count(Dir::kTransposed) ? algo_name(Dir::kTransposed, i) : "ALGO_" + std::to_string(i);
  a.workspace = workspace;
  a.ms = ms;
  return a;
}

struct Caches {
  std::mutex mu;
  std::map<std::string, Algo> algos;  // problem_key | arch | search
};
Caches& caches() {
  static auto* c = new Caches();  // never destroyed, see device_state()
  return *c;
}

template <typename Dir>
Algo heuristic(const ConvProblem& p, const Descs& d, cudnnHandle_t h, const std::string& context) {
  int max_count = 0;
  FLOW_DNN_CHECK(Dir::max_count(h, &max_count), Dir::kMaxCount, context);
  std::vector<typename Dir::Perf> perf(static_cast<size_t>(std::max(max_count, 1)));
  int returned = 0;
  FLOW_DNN_CHECK(Dir::query(h, d, static_cast<int>(perf.size()), &returned, perf.data()), Dir::kQuery, context);
  for (int i = 0; i < returned; ++i) {
    const typename Dir::Perf& r = perf[static_cast<size_t>(i)];
    if (r.status != CUDNN_STATUS_SUCCESS || r.memory > kMaxWorkspace || !math_allowed(p.dtype, r.mathType)) continue;
    size_t bytes = 0;
    if (Dir::workspace(h, d, r.algo, &bytes) != CUDNN_STATUS_SUCCESS || bytes > kMaxWorkspace) {
      last_error();  // clear the detail of the error we skip
      continue;
    }
    return make_algo<Dir>(r.algo, bytes, -1);
  }
  fail(CUDNN_STATUS_NOT_SUPPORTED,
       std::string(Dir::kQuery) + " (no algorithm of " + std::to_string(returned) +
           " succeeds with a workspace <= 1 GiB)",
       context);
}

template <typename Dir>
Algo exhaustive(const ConvProblem& p, const Descs& d, cudnnHandle_t h, const void* in, const void* w, void* out,
                int device, const std::string& context) {
  const int count = algo_count(Dir::kTransposed);
  // The workspace: what the hungriest algorithm asks (at most 1 GiB); less if that much is not free.
  size_t bytes = 0;
  for (int i = 0; i < count; ++i) {
    size_t b = 0;
    if (Dir::workspace(h, d, static_cast<typename Dir::Enum>(i), &b) == CUDNN_STATUS_SUCCESS && b <= kMaxWorkspace)
      bytes = std::max(bytes, b);
  }
  last_error();
  std::unique_ptr<TempBlock> ws;
  try {
    ws = std::make_unique<TempBlock>(device, bytes);
  } catch (const CudaError& e) {
    if (e.code() != driver::kErrorOutOfMemory) throw;
    bytes = 0;  // time the algorithms that need no workspace
    ws = std::make_unique<TempBlock>(device, bytes);
  }
  std::vector<typename Dir::Perf> perf(static_cast<size_t>(count));
  int returned = 0;
  FLOW_DNN_CHECK(Dir::find(h, d, in, w, out, count, &returned, perf.data(), ws->get(), bytes),
                 std::string(Dir::kFind) + "(workspace " + std::to_string(bytes) + " bytes)", context);
  for (int i = 0; i < returned; ++i) {  // sorted by time
    const typename Dir::Perf& r = perf[static_cast<size_t>(i)];
    if (r.status != CUDNN_STATUS_SUCCESS || r.memory > bytes || !math_allowed(p.dtype, r.mathType)) continue;
    return make_algo<Dir>(r.algo, r.memory, static_cast<double>(r.time));
  }
  fail(CUDNN_STATUS_NOT_SUPPORTED,
       std::string(Dir::kFind) + " (none of " + std::to_string(returned) + " algorithms ran)", context);
}

template <typename Dir>
Algo search_algo(const ConvProblem& p, Search search, const Descs& d, cudnnHandle_t h, const void* x, const void* w,
                 void* y, int device, const std::string& context) {
  return search == Search::Exhaustive ? exhaustive<Dir>(p, d, h, x, w, y, device, context)
                                      : heuristic<Dir>(p, d, h, context);
}

// The prepared call of (p, algo) on the device (made on first use); the caller holds state.mu.
template <typename Dir>
Prepared& prepared(DeviceState& state, const ConvProblem& p, int algo_id, const std::string& context) {
  std::unique_ptr<Prepared>& slot = state.prepared[context + "|" + std::to_string(algo_id)];
  if (slot) return *slot;
  const Api& a = api();
  auto made = std::make_unique<Prepared>(Prepared{descs(p, context), ActivationDesc(), 0, -1});
  FLOW_DNN_CHECK(Dir::workspace(state.handle, made->d, static_cast<typename Dir::Enum>(algo_id), &made->ws_bytes),
                 std::string(Dir::kWorkspace) + "(" + algo_name(Dir::kTransposed, algo_id) + ")", context);
  if (p.relu) {
    cudnnActivationDescriptor_t raw = nullptr;
    FLOW_DNN_CHECK(a.cudnnCreateActivationDescriptor(&raw), "cudnnCreateActivationDescriptor", context);
    made->act.reset(raw);
    // NaN propagates, as torch.relu's does.
    FLOW_DNN_CHECK(a.cudnnSetActivationDescriptor(raw, CUDNN_ACTIVATION_RELU, CUDNN_PROPAGATE_NAN, 0.0),
                   "cudnnSetActivationDescriptor(relu)", context);
  }
  slot = std::move(made);
  return *slot;
}

// The output of p (the caller's terms) as the epilogue kernel's rows: the bias is per channel, a
// column of NHWC's rows, a row of an NCHW image.
EpilogueShape output_epilogue_shape(const ConvProblem& p) {
  const std::vector<int64_t> dims = p.transposed ? x_dims(p) : y_dims(p);
  const int64_t n = dims[0], channels = dims[1], pixels = product(dims, 2);
  EpilogueShape shape;
  if (p.w_nhwc) {
    shape.rows = n * pixels;
    shape.cols = channels;
    shape.row_stride = channels;
  } else {
    shape.batch = n;
    shape.rows = channels;
    shape.cols = pixels;
    shape.row_stride = pixels;
    shape.batch_stride = channels * pixels;
    shape.bias_per_row = true;
  }
  return shape;
}

// The bytes of the caller's output (y; x for a transposed problem), dense.
size_t output_bytes(const ConvProblem& p) {
  return static_cast<size_t>(product(p.transposed ? x_dims(p) : y_dims(p))) * data_type_size(p.dtype);
}

// The residual's copy into the output (unless it is the output), before the library call adds
// to it with beta = 1.
void copy_residual(const ConvProblem& p, const void* z, void* out, Stream stream) {
  if (!p.residual || z == out) return;
  driver::memcpy_dtod(out, z, output_bytes(p), stream);
}

// The transposed convolution: out = [relu](conv_transpose(in, w) + bias + z). cuDNN's backward data
// has no fused epilogue: the residual is its beta = 1 operand, bias and relu one epilogue pass.
void run_transposed(const ConvProblem& p, const Algo& algo, const void* in, const void* w, const void* bias,
                    const void* z, void* out, Stream stream, int device, const std::string& context) {
  const Api& a = api();
  DeviceState& state = device_state(device);
  std::lock_guard<std::mutex> lock(state.mu);
  FLOW_DNN_CHECK(a.cudnnSetStream(state.handle, stream), "cudnnSetStream", context);
  const Prepared& pr = prepared<BackwardData>(state, p, algo.id, context);
  void* const ws = grow(state.scratch[stream], device, stream, pr.ws_bytes);
  counter_state().unfused.fetch_add(1, std::memory_order_relaxed);
  copy_residual(p, z, out, stream);
  const float one = 1.0f;
  const float beta = p.residual ? 1.0f : 0.0f;
  FLOW_DNN_CHECK(
      a.cudnnConvolutionBackwardData(state.handle, &one, pr.d.conv.w.get(), w, pr.d.y.get(), in, pr.d.conv.conv.get(),
                                     static_cast<cudnnConvolutionBwdDataAlgo_t>(algo.id), ws, pr.ws_bytes, &beta,
                                     pr.d.conv.x.get(), out),
      std::string("cudnnConvolutionBackwardData(") + kBwdDataAlgoNames[algo.id] + ")", context);
  if (p.bias || p.relu)
    apply_bias_activation(p.dtype, p.relu ? EpilogueActivation::Relu : EpilogueActivation::None,
                          p.bias ? bias : nullptr, out, output_epilogue_shape(p), stream);
}

// The first and last bytes of y (up to 2 KiB each), after the stream's work so far.
std::vector<unsigned char> output_sample(const void* y, size_t bytes, Stream stream) {
  const size_t part = std::min<size_t>(bytes, 2048);
  std::vector<unsigned char> sample(2 * part);
  driver::memcpy_dtoh(sample.data(), y, part, stream);
  driver::memcpy_dtoh(sample.data() + part, static_cast<const unsigned char*>(y) + (bytes - part), part, stream);
  driver::stream_synchronize(stream);
  return sample;
}

// The fused call without a residual: z is y, scaled by alpha2 = 0, as torch's
// cudnn_convolution_relu does. cuDNN documents y = act(alpha1 conv(x) + alpha2 z + bias) but not,
// as it does for cudnnConvolutionForward's beta, that a zero alpha2 leaves z unread, and y holds
// whatever the allocator's block held (NaN is possible: 0 * NaN = NaN). So the first call of each
// prepared problem runs twice, over y filled with NaN bytes (0xFF) and then with zeros, and compares
// samples of the two results: if they differ, cuDNN read z, and every later call zeroes y first (one
// memset, cheaper than the unfused convolution and epilogue pass). Inside a CUDA graph capture
// nothing can be read back, so an unprobed problem zeroes y there. Runs under the device's lock
// (forward holds it): the probe's two stream synchronizations make other threads' cuDNN calls on
// the device wait, once per prepared problem. Returns the call's status.
template <typename Call>
cudnnStatus_t fused_without_residual(const ConvProblem& p, Prepared& pr, void* y, Stream stream,
                                     const Call& fused_call) {
  const size_t bytes = output_bytes(p);
  if (pr.reads_z < 0 && !driver::stream_is_capturing(stream)) {
    driver::memset_d8(y, 0xFF, bytes, stream);
    const cudnnStatus_t st = fused_call();
    if (st != CUDNN_STATUS_SUCCESS) return st;
    const std::vector<unsigned char> over_nan = output_sample(y, bytes, stream);
    driver::memset_d8(y, 0, bytes, stream);
    const cudnnStatus_t again = fused_call();
    if (again != CUDNN_STATUS_SUCCESS) return again;
    pr.reads_z = output_sample(y, bytes, stream) != over_nan ? 1 : 0;
    counter_state().z_probes.fetch_add(1, std::memory_order_relaxed);
    if (pr.reads_z == 1) counter_state().z_read.fetch_add(1, std::memory_order_relaxed);
    return again;
  }
  if (pr.reads_z != 0) driver::memset_d8(y, 0, bytes, stream);
  return fused_call();
}

// The images per cuDNN call: all of them when x and y fit tensor_element_limit(), else as many
// as fit (torch's CUDA convolution splits a large batch the same way). supported() has checked
// that one image fits.
int64_t batch_chunk(const ConvProblem& p) {
  const int64_t per_image = std::max(product(x_dims(p), 1), product(y_dims(p), 1));
  return per_image == 0 ? p.n : std::max<int64_t>(1, tensor_element_limit() / per_image);
}

ConvProblem with_batch(ConvProblem p, int64_t n) {
  p.n = n;
  return p;
}

}  // namespace

Algo choose(const ConvProblem& p, Search search, const void* x, const void* w, void* y) {
  if (!check_choose_args(p, search, x, w, y)) return empty_algo(p);  // nothing will run
  // A batch in chunks: the first chunk's algorithm (any algorithm runs any batch size).
  if (const int64_t chunk = batch_chunk(p); p.n > chunk) return choose(with_batch(p, chunk), search, x, w, y);
  require_cuda();
  (void)api();
  const int device = current_device();
  const std::string context = problem_key(p);
  const std::string key =
      context + "|" + device_props(device).arch + "|" + (search == Search::Exhaustive ? "exhaustive" : "heuristic");
  {
    Caches& c = caches();
    std::lock_guard<std::mutex> lock(c.mu);
    auto it = c.algos.find(key);
    if (it != c.algos.end()) return it->second;
  }
  ensure_context(device);
  const Descs d = descs(p, context);
  DeviceState& state = device_state(device);
  Algo algo;
  {
    std::lock_guard<std::mutex> lock(state.mu);
    FLOW_DNN_CHECK(api().cudnnSetStream(state.handle, current_stream()), "cudnnSetStream", context);
    algo = p.transposed ? search_algo<BackwardData>(p, search, d, state.handle, x, w, y, device, context)
                        : search_algo<Forward>(p, search, d, state.handle, x, w, y, device, context);
  }
  Caches& c = caches();
  std::lock_guard<std::mutex> lock(c.mu);
  c.algos.emplace(key, algo);
  return algo;
}

void forward(const ConvProblem& p, const Algo& algo, const void* x, const void* w, const void* bias, const void* z,
             void* y, Stream stream) {
  if (!check_forward_args(p, algo, x, w, bias, z, y)) return;  // nothing to run
  if (const int64_t chunk = batch_chunk(p); p.n > chunk) {
    // Dense tensors: the images of a chunk are contiguous in x, y and z (z has the output's shape).
    const size_t bytes = data_type_size(p.dtype);
    const size_t x_image = static_cast<size_t>(product(x_dims(p), 1)) * bytes;
    const size_t y_image = static_cast<size_t>(product(y_dims(p), 1)) * bytes;
    const size_t in_image = p.transposed ? y_image : x_image, out_image = p.transposed ? x_image : y_image;
    const auto* in = static_cast<const unsigned char*>(x);
    auto* out = static_cast<unsigned char*>(y);
    const auto* zz = static_cast<const unsigned char*>(z);
    for (int64_t i = 0; i < p.n; i += chunk) {
      const size_t at = static_cast<size_t>(i);
      forward(with_batch(p, std::min(chunk, p.n - i)), algo, in + at * in_image, w, bias,
              zz == nullptr ? nullptr : zz + at * out_image, out + at * out_image, stream);
    }
    return;
  }
  const std::string context = problem_key(p);
  require_cuda();
  const Api& a = api();
  const int device = current_device();
  ensure_context(device);
  if (p.transposed) return run_transposed(p, algo, x, w, bias, z, y, stream, device, context);
  const auto algo_enum = static_cast<cudnnConvolutionFwdAlgo_t>(algo.id);
  const std::string algo_name = kAlgoNames[algo.id];  // algo.name may be empty (an Algo from a record)
  const float one = 1.0f;

  DeviceState& state = device_state(device);
  std::lock_guard<std::mutex> lock(state.mu);
  const cudnnHandle_t h = state.handle;
  FLOW_DNN_CHECK(a.cudnnSetStream(h, stream), "cudnnSetStream", context);
  Prepared& pr = prepared<Forward>(state, p, algo.id, context);
  const Descs& d = pr.d;
  const size_t ws_bytes = pr.ws_bytes;
  Scratch& scratch = state.scratch[stream];
  void* const ws = grow(scratch, device, stream, ws_bytes);

  // The fused call only with a bias of the caller's: a zero bias would be persistent device memory
  // that a CUDA graph capture could record without ever initializing it.
  if (p.relu && p.bias && pr.fused != 0) {
    const float alpha2 = p.residual ? 1.0f : 0.0f;
    auto fused_call = [&] {
      return a.cudnnConvolutionBiasActivationForward(h, &one, d.conv.x.get(), x, d.conv.w.get(), w, d.conv.conv.get(),
                                                     algo_enum, ws, ws_bytes, &alpha2, d.y.get(), p.residual ? z : y,
                                                     d.bias.get(), bias, pr.act.get(), d.y.get(), y);
    };
    const cudnnStatus_t st = p.residual ? fused_call() : fused_without_residual(p, pr, y, stream, fused_call);
    // Any refusal but a failed execution (5xxx) takes the unfused path: cuDNN 9 answers some
    // data-type and layout combinations of this legacy call with BAD_PARAM subcodes, not
    // NOT_SUPPORTED; the unfused calls raise genuine parameter errors themselves.
    const bool execution_failed = static_cast<int>(st) / 1000 == 5;
    if (st == CUDNN_STATUS_SUCCESS || execution_failed) {
      if (st != CUDNN_STATUS_SUCCESS) fail(st, "cudnnConvolutionBiasActivationForward(" + algo_name + ")", context);
      pr.fused = 1;
      counter_state().fused.fetch_add(1, std::memory_order_relaxed);
      return;
    }
    const std::string detail = last_error();  // not supported here: take the unfused path
    pr.fused = 0;
    CounterState& cs = counter_state();
    cs.refused.fetch_add(1, std::memory_order_relaxed);
    std::lock_guard<std::mutex> counter_lock(cs.mu);
    cs.last_refusal = context + " (" + algo_name + "): " + status_text(st) + (detail.empty() ? "" : "; " + detail);
  }
  counter_state().unfused.fetch_add(1, std::memory_order_relaxed);

  copy_residual(p, z, y, stream);
  const float beta = p.residual ? 1.0f : 0.0f;
  FLOW_DNN_CHECK(a.cudnnConvolutionForward(h, &one, d.conv.x.get(), x, d.conv.w.get(), w, d.conv.conv.get(), algo_enum,
                                           ws, ws_bytes, &beta, d.y.get(), y),
                 "cudnnConvolutionForward(" + algo_name + ")", context);
  // Bias and relu in one pass over y (runtime/epilogue_kernel.h), not cuDNN's add and activation
  // calls (two passes).
  apply_bias_activation(p.dtype, p.relu ? EpilogueActivation::Relu : EpilogueActivation::None, p.bias ? bias : nullptr,
                        y, output_epilogue_shape(p), stream);
}

void load() {
  (void)api();
}

std::string version() {
  const size_t v = api().cudnnGetVersion();
  return "cuDNN " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

std::vector<int> output_dims(const ConvProblem& p) {
  for (const int64_t v : {p.n, p.c, p.h, p.w, p.k, p.r, p.s, p.groups, p.pad_h, p.pad_w, p.stride_h, p.stride_w,
                          p.dil_h, p.dil_w, p.d, p.t, p.pad_d, p.stride_d, p.dil_d})
    if (v < 0 || v > INT_MAX)
      throw std::invalid_argument("flow: cuDNN output_dims: a size is negative or exceeds 2^31-1 (" + problem_key(p) +
                                  ")");
  if (p.groups < 1 || p.c % p.groups != 0)
    throw std::invalid_argument("flow: cuDNN output_dims: groups must divide c (" + problem_key(p) + ")");
  if (p.spatial != 2 && p.spatial != 3)
    throw std::invalid_argument("flow: cuDNN output_dims: spatial must be 2 or 3 (" + problem_key(p) + ")");
  const std::string context = problem_key(p);
  const ConvDescs d = conv_descs(p, context);
  std::vector<int> out(static_cast<size_t>(p.spatial) + 2);
  if (p.spatial == 2) {
    FLOW_DNN_CHECK(api().cudnnGetConvolution2dForwardOutputDim(d.conv.get(), d.x.get(), d.w.get(), &out[0], &out[1],
                                                               &out[2], &out[3]),
                   "cudnnGetConvolution2dForwardOutputDim", context);
  } else {
    FLOW_DNN_CHECK(api().cudnnGetConvolutionNdForwardOutputDim(d.conv.get(), d.x.get(), d.w.get(),
                                                               static_cast<int>(out.size()), out.data()),
                   "cudnnGetConvolutionNdForwardOutputDim", context);
  }
  return out;
}

#else  // !FLOW_HAVE_CUDNN

namespace {
[[noreturn]] void no_headers() {
  throw std::runtime_error(
      "flow was built without cuDNN headers (cudnn.h): GPU convolutions are unavailable (run "
      "tools/prepare_gpu_deps.sh to put cudnn*.h in .deps/include and reconfigure)");
}
}  // namespace

Algo choose(const ConvProblem& p, Search search, const void* x, const void* w, void* y) {
  if (!check_choose_args(p, search, x, w, y)) return empty_algo(p);
  no_headers();
}
void forward(const ConvProblem& p, const Algo& algo, const void* x, const void* w, const void* bias, const void* z,
             void* y, Stream) {
  if (!check_forward_args(p, algo, x, w, bias, z, y)) return;
  no_headers();
}
void load() {
  no_headers();
}
std::string version() {
  no_headers();
}
std::vector<int> output_dims(const ConvProblem&) {
  no_headers();
}

#endif  // FLOW_HAVE_CUDNN

}  // namespace flow::runtime::cuda::cudnn
