// The emulated device's libcudnn (see emulated_driver.cpp): the legacy convolution entry points flow
// uses (runtime/cudnn.cpp's function table), implemented on the host from cuDNN's documented
// semantics:
//  - tensors are 4-d (n, c, h, w) with explicit strides; filters are (k, c / groups, r, s) in NCHW
//    or NHWC memory order; cross-correlation with padding, stride, dilation and groups;
//  - cudnnConvolutionForward: y = alpha * conv(x, w) + beta * y;
//  - cudnnConvolutionBiasActivationForward: y = act(alpha1 * conv(x, w) + alpha2 * z + bias), with
//    the documented limits (activation RELU or IDENTITY; IDENTITY only with IMPLICIT_PRECOMP_GEMM).
//    z is read even when alpha2 is 0 (so 0 * NaN = NaN), since cuDNN does not document that it is
//    not; FLOW_EMULATED_CUDNN_SKIP_ZERO_ALPHA2=1 skips it instead, as a kernel that tests alpha2
//    first would (flow's runtime must be right either way);
//  - cudnnConvolutionBackwardData: dx = alpha * conv_transpose(dy, w) + beta * dx, the adjoint of the
//    forward convolution of dx's shape into dy's (each dy element spread over the dx positions its
//    forward window read);
//  - the heuristic and the timed search offer the algorithms in a fixed order, each with a
//    workspace size that the call then insists on, and operands must lie in live device memory.
// The arithmetic runs in double on the host, in stream order through the emulated driver.
#include <cuda.h>
#include <cudnn.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "simt/emulated_driver_hooks.h"
#include "simt/emulated_handles.h"
#include "simt/emulated_values.h"

namespace {

using flow::test::simt::drop_handle;
using flow::test::simt::emulated_driver;
using flow::test::simt::load_value;
using flow::test::simt::make_handle;
using flow::test::simt::store_value;
using flow::test::simt::value_bytes;
using flow::test::simt::ValueType;

ValueType value_type(cudnnDataType_t t) {
  switch (t) {
    case CUDNN_DATA_FLOAT:
      return ValueType::F32;
    case CUDNN_DATA_HALF:
      return ValueType::F16;
    case CUDNN_DATA_BFLOAT16:
      return ValueType::BF16;
    default:
      return ValueType::Unsupported;
  }
}

struct Tensor4 {
  cudnnDataType_t type{};
  int dims[4] = {};     // n, c, h, w
  int strides[4] = {};  // elements
};

struct Filter4 {
  cudnnDataType_t type{};
  cudnnTensorFormat_t format{};
  int k = 0, c = 0, r = 0, s = 0;
};

struct Conv {
  int pad_h = 0, pad_w = 0, u = 1, v = 1, dil_h = 1, dil_w = 1;
  cudnnConvolutionMode_t mode{};
  cudnnDataType_t compute{};
  int groups = 1;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

// Calls f(r, s, h, w) for each filter tap (r, s) of output position (p, q) that lands inside the
// H x W input, at input position (h, w).
template <class F>
void for_each_tap(const Conv& cv, int R, int S, int H, int W, int p, int q, F f) {
  for (int r = 0; r < R; ++r) {
    const int h = p * cv.u - cv.pad_h + r * cv.dil_h;
    if (h < 0 || h >= H) continue;
    for (int s = 0; s < S; ++s) {
      const int w = q * cv.v - cv.pad_w + s * cv.dil_w;
      if (w >= 0 && w < W) f(r, s, h, w);
    }
  }
}

struct Activation {
  cudnnActivationMode_t mode{};
  cudnnNanPropagation_t nan{};
  double coef = 0;
};

struct Handle {
  cudaStream_t stream = nullptr;
};

thread_local std::string tl_last_error;

cudnnStatus_t fail(cudnnStatus_t s, const std::string& why) {
  tl_last_error = why;
  std::fprintf(stderr, "[emulated cuDNN] %s\n", why.c_str());
  return s;
}

// The offered algorithms, best first, and the workspace each needs.
constexpr cudnnConvolutionFwdAlgo_t kAlgos[] = {
    CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM,
    CUDNN_CONVOLUTION_FWD_ALGO_GEMM, CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED};

size_t workspace_for(cudnnConvolutionFwdAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM:
      return 0;
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM:
      return 4096;
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM:
      return 1 << 20;
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED:
      return 2 << 20;
    default:
      return ~size_t{0};
  }
}

bool offered(cudnnConvolutionFwdAlgo_t a) {
  for (const auto o : kAlgos)
    if (o == a) return true;
  return false;
}

constexpr cudnnConvolutionBwdDataAlgo_t kBwdDataAlgos[] = {
    CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, CUDNN_CONVOLUTION_BWD_DATA_ALGO_0, CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING};

size_t workspace_for(cudnnConvolutionBwdDataAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_0:
      return 0;
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_1:
      return 8192;
    case CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT_TILING:
      return 3 << 20;
    default:
      return ~size_t{0};
  }
}

bool offered(cudnnConvolutionBwdDataAlgo_t a) {
  for (const auto o : kBwdDataAlgos)
    if (o == a) return true;
  return false;
}

int64_t extent(const Tensor4& t) {
  int64_t last = 0;
  for (int i = 0; i < 4; ++i) {
    if (t.dims[i] == 0) return 0;
    last += static_cast<int64_t>(t.dims[i] - 1) * t.strides[i];
  }
  return last + 1;
}

std::string shape(const int* d) {
  return std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]) + "x" + std::to_string(d[3]);
}

void output_dims(const Conv& cv, const Tensor4& x, const Filter4& w, int* out) {
  out[0] = x.dims[0];
  out[1] = w.k;
  out[2] = (x.dims[2] + 2 * cv.pad_h - (cv.dil_h * (w.r - 1) + 1)) / cv.u + 1;
  out[3] = (x.dims[3] + 2 * cv.pad_w - (cv.dil_w * (w.s - 1) + 1)) / cv.v + 1;
}

// Shapes and types of (x, w, conv, y); empty when cuDNN would accept them.
std::string validate(const Tensor4& x, const Filter4& w, const Conv& cv, const Tensor4& y) {
  if (value_type(x.type) == ValueType::Unsupported) return "x has a data type the emulation lacks";
  if (x.type != w.type || x.type != y.type) return "x, w and y differ in data type";
  if (cv.mode != CUDNN_CROSS_CORRELATION) return "only cross-correlation is emulated";
  if (cv.compute != CUDNN_DATA_FLOAT) return "only float compute is emulated";
  if (w.c * cv.groups != x.dims[1])
    return "the filter's c (" + std::to_string(w.c) + ") times groups (" + std::to_string(cv.groups) +
           ") is not x's c (" + std::to_string(x.dims[1]) + ")";
  if (w.k % cv.groups != 0) return "the filter's k is not a multiple of groups";
  int out[4];
  output_dims(cv, x, w, out);
  for (int i = 0; i < 4; ++i)
    if (out[i] != y.dims[i]) return "y is " + shape(y.dims) + ", the convolution gives " + shape(out);
  return {};
}

bool in_device_memory(const void* p, int64_t elements, cudnnDataType_t t) {
  return elements == 0 ||
         emulated_driver().is_device_range(p, static_cast<size_t>(elements * value_bytes(value_type(t)))) != 0;
}

struct Call {
  Tensor4 x, y, z;
  Filter4 w;
  Conv cv;
  const void *px = nullptr, *pw = nullptr, *pz = nullptr, *pbias = nullptr;
  void* py = nullptr;
  double alpha = 1, beta = 0;  // beta: y's (Forward) or z's (alpha2) scale
  bool fused = false, relu = false;
  bool read_z = false;  // fused: z is read (alpha2 != 0, or a zero alpha2 not skipped)
};

// Whether a fused call skips z when alpha2 is 0 (read at each call, so a test can set it).
bool skips_zero_alpha2() {
  const char* v = std::getenv("FLOW_EMULATED_CUDNN_SKIP_ZERO_ALPHA2");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

int run(void* arg) {
  const Call& k = *static_cast<const Call*>(arg);
  const ValueType t = value_type(k.x.type);
  const int N = k.x.dims[0], C = k.x.dims[1], H = k.x.dims[2], W = k.x.dims[3];
  const int K = k.y.dims[1], P = k.y.dims[2], Q = k.y.dims[3];
  const int R = k.w.r, S = k.w.s, Cg = k.w.c, Kg = K / k.cv.groups;
  // Dense double copies, channels innermost so that the inner loop is one contiguous dot product:
  // x as [n][h][w][c], w as [k][r][s][c].
  std::vector<double> x(static_cast<size_t>(N) * C * H * W), w(static_cast<size_t>(K) * Cg * R * S);
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int h = 0; h < H; ++h)
        for (int ww = 0; ww < W; ++ww)
          x[((static_cast<size_t>(n) * H + h) * W + ww) * C + c] =
              load_value(t, k.px,
                         static_cast<int64_t>(n) * k.x.strides[0] + static_cast<int64_t>(c) * k.x.strides[1] +
                             static_cast<int64_t>(h) * k.x.strides[2] + static_cast<int64_t>(ww) * k.x.strides[3]);
  const bool nhwc = k.w.format == CUDNN_TENSOR_NHWC;
  for (int kk = 0; kk < K; ++kk)
    for (int c = 0; c < Cg; ++c)
      for (int r = 0; r < R; ++r)
        for (int s = 0; s < S; ++s)
          w[((static_cast<size_t>(kk) * R + r) * S + s) * Cg + c] =
              load_value(t, k.pw,
                         nhwc ? ((static_cast<int64_t>(kk) * R + r) * S + s) * Cg + c
                              : ((static_cast<int64_t>(kk) * Cg + c) * R + r) * S + s);
  for (int n = 0; n < N; ++n) {
    for (int p = 0; p < P; ++p) {
      for (int q = 0; q < Q; ++q) {
        for (int kk = 0; kk < K; ++kk) {  // the input window stays in cache over the output channels
          const int g = kk / Kg;
          double acc = 0;
          for_each_tap(k.cv, R, S, H, W, p, q, [&](int r, int s, int h, int ww) {
            const double* xp = x.data() + ((static_cast<size_t>(n) * H + h) * W + ww) * C + g * Cg;
            const double* wp = w.data() + ((static_cast<size_t>(kk) * R + r) * S + s) * Cg;
            for (int c = 0; c < Cg; ++c) acc += xp[c] * wp[c];
          });
          const int64_t yo = static_cast<int64_t>(n) * k.y.strides[0] + static_cast<int64_t>(kk) * k.y.strides[1] +
                             static_cast<int64_t>(p) * k.y.strides[2] + static_cast<int64_t>(q) * k.y.strides[3];
          double v = k.alpha * acc;
          if (k.fused) {
            if (k.read_z) {
              const int64_t zo = static_cast<int64_t>(n) * k.z.strides[0] + static_cast<int64_t>(kk) * k.z.strides[1] +
                                 static_cast<int64_t>(p) * k.z.strides[2] + static_cast<int64_t>(q) * k.z.strides[3];
              v += k.beta * load_value(t, k.pz, zo);
            }
            v += load_value(t, k.pbias, kk);
            if (k.relu) v = std::isnan(v) ? v : (v > 0 ? v : 0);
          } else if (k.beta != 0) {
            v += k.beta * load_value(t, k.py, yo);
          }
          store_value(t, k.py, yo, v);
        }
      }
    }
  }
  return 0;
}

// cudnnConvolutionBackwardData: dx = alpha * conv_transpose(dy, w) + beta * dx.
struct BackwardDataCall {
  Tensor4 dx, dy;
  Filter4 w;
  Conv cv;
  const void *pdy = nullptr, *pw = nullptr;
  void* pdx = nullptr;
  double alpha = 1, beta = 0;
};

int64_t offset(const Tensor4& t, int n, int c, int h, int w) {
  return static_cast<int64_t>(n) * t.strides[0] + static_cast<int64_t>(c) * t.strides[1] +
         static_cast<int64_t>(h) * t.strides[2] + static_cast<int64_t>(w) * t.strides[3];
}

int run_backward_data(void* arg) {
  const BackwardDataCall& k = *static_cast<const BackwardDataCall*>(arg);
  const ValueType t = value_type(k.dx.type);
  const int N = k.dx.dims[0], C = k.dx.dims[1], H = k.dx.dims[2], W = k.dx.dims[3];
  const int K = k.dy.dims[1], P = k.dy.dims[2], Q = k.dy.dims[3];
  const int R = k.w.r, S = k.w.s, Cg = k.w.c, Kg = K / k.cv.groups;
  const bool nhwc = k.w.format == CUDNN_TENSOR_NHWC;
  std::vector<double> acc(static_cast<size_t>(N) * C * H * W, 0.0);
  for (int n = 0; n < N; ++n)
    for (int kk = 0; kk < K; ++kk) {
      const int g = kk / Kg;
      for (int p = 0; p < P; ++p)
        for (int q = 0; q < Q; ++q) {
          const double dy = load_value(t, k.pdy, offset(k.dy, n, kk, p, q));
          for_each_tap(k.cv, R, S, H, W, p, q, [&](int r, int s, int h, int ww) {
            for (int c = 0; c < Cg; ++c) {
              const int64_t wo = nhwc ? ((static_cast<int64_t>(kk) * R + r) * S + s) * Cg + c
                                      : ((static_cast<int64_t>(kk) * Cg + c) * R + r) * S + s;
              acc[((static_cast<size_t>(n) * C + g * Cg + c) * H + h) * W + ww] += dy * load_value(t, k.pw, wo);
            }
          });
        }
    }
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int h = 0; h < H; ++h)
        for (int ww = 0; ww < W; ++ww) {
          const int64_t o = offset(k.dx, n, c, h, ww);
          double v = k.alpha * acc[((static_cast<size_t>(n) * C + c) * H + h) * W + ww];
          if (k.beta != 0) v += k.beta * load_value(t, k.pdx, o);
          store_value(t, k.pdx, o, v);
        }
  return 0;
}

Tensor4& T(cudnnTensorDescriptor_t d) {
  return *reinterpret_cast<Tensor4*>(d);
}
Filter4& F(cudnnFilterDescriptor_t d) {
  return *reinterpret_cast<Filter4*>(d);
}
Conv& CV(cudnnConvolutionDescriptor_t d) {
  return *reinterpret_cast<Conv*>(d);
}

template <typename CallT>
cudnnStatus_t enqueue(cudnnHandle_t h, std::unique_ptr<CallT> call, int (*fn)(void*)) {
  const CUresult r =
      emulated_driver().enqueue(reinterpret_cast<CUstream>(reinterpret_cast<Handle*>(h)->stream), fn, call.release(),
                                [](void* p) { std::unique_ptr<CallT> owned(static_cast<CallT*>(p)); });
  return r == CUDA_SUCCESS ? CUDNN_STATUS_SUCCESS : fail(CUDNN_STATUS_EXECUTION_FAILED, "the emulated launch failed");
}

cudnnStatus_t enqueue(cudnnHandle_t h, std::unique_ptr<Call> call) {
  return enqueue(h, std::move(call), &run);
}

// The checks every convolution call makes: shapes, the algorithm, its workspace, the operands'
// memory (x and y in the forward convolution's terms).
template <typename Algo>
cudnnStatus_t check_call(const Tensor4& x, const void* px, const Filter4& w, const void* pw, const Conv& cv, Algo algo,
                         const void* ws, size_t ws_bytes, const Tensor4& y, const void* py) {
  if (const std::string why = validate(x, w, cv, y); !why.empty()) return fail(CUDNN_STATUS_BAD_PARAM, why);
  if (!offered(algo)) return fail(CUDNN_STATUS_NOT_SUPPORTED, "an algorithm the emulation does not offer");
  if (ws_bytes < workspace_for(algo))
    return fail(CUDNN_STATUS_BAD_PARAM, "the workspace (" + std::to_string(ws_bytes) + " bytes) is smaller than the " +
                                            std::to_string(workspace_for(algo)) + " the algorithm needs");
  if (!in_device_memory(px, extent(x), x.type) || !in_device_memory(py, extent(y), y.type) ||
      !in_device_memory(pw, static_cast<int64_t>(w.k) * w.c * w.r * w.s, w.type))
    return fail(CUDNN_STATUS_EXECUTION_FAILED, "an operand is not inside live device memory");
  // The algorithm's kernels use the workspace it asked for: it must be device memory.
  if (workspace_for(algo) > 0 && emulated_driver().is_device_range(ws, workspace_for(algo)) == 0)
    return fail(CUDNN_STATUS_EXECUTION_FAILED, "the workspace is not inside live device memory");
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t check_forward(const Tensor4& x, const void* px, const Filter4& w, const void* pw, const Conv& cv,
                            cudnnConvolutionFwdAlgo_t algo, const void* ws, size_t ws_bytes, const Tensor4& y,
                            const void* py) {
  return check_call(x, px, w, pw, cv, algo, ws, ws_bytes, y, py);
}

// The heuristic's answer: the offered algorithms in order, each with its workspace.
template <typename Perf, typename Algo, size_t N>
int offer(const Algo (&algos)[N], cudnnMathType_t math, int requested, Perf* perf) {
  int n = 0;
  for (const Algo a : algos) {
    if (n == requested) break;
    perf[n] = Perf{};
    perf[n].algo = a;
    perf[n].status = CUDNN_STATUS_SUCCESS;
    perf[n].time = -1;
    perf[n].memory = workspace_for(a);
    perf[n].mathType = math;
    ++n;
  }
  return n;
}

// A workspace query for one algorithm (NOT_SUPPORTED, quietly, for one not offered).
template <typename Algo>
cudnnStatus_t workspace_query(Algo algo, size_t* bytes) {
  if (!offered(algo)) {  // a query, as for every algorithm in a search: no message
    tl_last_error = "an algorithm the emulation does not offer";
    return CUDNN_STATUS_NOT_SUPPORTED;
  }
  *bytes = workspace_for(algo);
  return CUDNN_STATUS_SUCCESS;
}

// The timed search: runs each offered algorithm that fits the workspace (`run(algo)`), fastest first.
template <typename Perf, typename Algo, size_t N, typename Run>
cudnnStatus_t time_each(const Algo (&algos)[N], cudnnMathType_t math, size_t ws_bytes, int requested, int* returned,
                        Perf* perf, Run run) {
  std::vector<Perf> all;
  for (const Algo a : algos) {
    Perf r{};
    r.algo = a;
    r.memory = workspace_for(a);
    r.mathType = math;
    if (r.memory > ws_bytes) {
      r.status = CUDNN_STATUS_ALLOC_FAILED;
      r.time = -1;
    } else {
      const auto t0 = std::chrono::steady_clock::now();
      r.status = run(a);
      if (r.status == CUDNN_STATUS_BAD_PARAM) return r.status;
      r.time = std::chrono::duration<float, std::milli>(std::chrono::steady_clock::now() - t0).count();
    }
    all.push_back(r);
  }
  std::stable_sort(all.begin(), all.end(), [](const auto& p, const auto& q) {
    return (p.status == CUDNN_STATUS_SUCCESS) > (q.status == CUDNN_STATUS_SUCCESS) ||
           ((p.status == CUDNN_STATUS_SUCCESS) == (q.status == CUDNN_STATUS_SUCCESS) && p.time < q.time);
  });
  *returned = std::min(requested, static_cast<int>(all.size()));
  for (int i = 0; i < *returned; ++i) perf[i] = all[static_cast<size_t>(i)];
  return CUDNN_STATUS_SUCCESS;
}

}  // namespace

extern "C" {

size_t CUDNNWINAPI cudnnGetVersion(void) {
  return CUDNN_VERSION;
}

const char* CUDNNWINAPI cudnnGetErrorString(cudnnStatus_t status) {
  switch (status) {
    case CUDNN_STATUS_SUCCESS:
      return "CUDNN_STATUS_SUCCESS";
    case CUDNN_STATUS_BAD_PARAM:
      return "CUDNN_STATUS_BAD_PARAM";
    case CUDNN_STATUS_NOT_SUPPORTED:
      return "CUDNN_STATUS_NOT_SUPPORTED";
    case CUDNN_STATUS_EXECUTION_FAILED:
      return "CUDNN_STATUS_EXECUTION_FAILED";
    case CUDNN_STATUS_NOT_INITIALIZED:
      return "CUDNN_STATUS_NOT_INITIALIZED";
    default:
      return "CUDNN_STATUS_(other)";
  }
}

void CUDNNWINAPI cudnnGetLastErrorString(char* message, size_t max_size) {
  if (max_size == 0) return;
  std::snprintf(message, max_size, "%s", tl_last_error.c_str());
  tl_last_error.clear();
}

cudnnStatus_t CUDNNWINAPI cudnnCreate(cudnnHandle_t* handle) {
  if (!emulated_driver().enqueue) return fail(CUDNN_STATUS_NOT_INITIALIZED, "the emulated driver is not loaded");
  make_handle<Handle>(handle);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnSetStream(cudnnHandle_t handle, cudaStream_t stream) {
  reinterpret_cast<Handle*>(handle)->stream = stream;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnCreateTensorDescriptor(cudnnTensorDescriptor_t* d) {
  make_handle<Tensor4>(d);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnSetTensor4dDescriptorEx(cudnnTensorDescriptor_t d, cudnnDataType_t type, int n, int c,
                                                       int h, int w, int ns, int cs, int hs, int ws) {
  if (n <= 0 || c <= 0 || h <= 0 || w <= 0 || ns <= 0 || cs <= 0 || hs <= 0 || ws <= 0)
    return fail(CUDNN_STATUS_BAD_PARAM, "a tensor dimension or stride is not positive");
  Tensor4& t = T(d);
  t.type = type;
  const int dims[4] = {n, c, h, w}, strides[4] = {ns, cs, hs, ws};
  std::memcpy(t.dims, dims, sizeof(dims));
  std::memcpy(t.strides, strides, sizeof(strides));
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d) {
  drop_handle<Tensor4>(d);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t* d) {
  make_handle<Filter4>(d);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t type,
                                                     cudnnTensorFormat_t format, int k, int c, int h, int w) {
  if (k <= 0 || c <= 0 || h <= 0 || w <= 0) return fail(CUDNN_STATUS_BAD_PARAM, "a filter dimension is not positive");
  if (format != CUDNN_TENSOR_NCHW && format != CUDNN_TENSOR_NHWC)
    return fail(CUDNN_STATUS_BAD_PARAM, "a filter format other than NCHW or NHWC");
  F(d) = Filter4{type, format, k, c, h, w};
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d) {
  drop_handle<Filter4>(d);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t* d) {
  make_handle<Conv>(d);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int pad_h, int pad_w, int u,
                                                          int v, int dilation_h, int dilation_w,
                                                          cudnnConvolutionMode_t mode, cudnnDataType_t compute) {
  if (pad_h < 0 || pad_w < 0 || u <= 0 || v <= 0 || dilation_h <= 0 || dilation_w <= 0)
    return fail(CUDNN_STATUS_BAD_PARAM, "a negative padding or a non-positive stride or dilation");
  Conv& cv = CV(d);
  cv.pad_h = pad_h;
  cv.pad_w = pad_w;
  cv.u = u;
  cv.v = v;
  cv.dil_h = dilation_h;
  cv.dil_w = dilation_w;
  cv.mode = mode;
  cv.compute = compute;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnSetConvolutionGroupCount(cudnnConvolutionDescriptor_t d, int groups) {
  if (groups < 1) return fail(CUDNN_STATUS_BAD_PARAM, "groups < 1");
  CV(d).groups = groups;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnSetConvolutionMathType(cudnnConvolutionDescriptor_t d, cudnnMathType_t math) {
  CV(d).math = math;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnDestroyConvolutionDescriptor(cudnnConvolutionDescriptor_t d) {
  drop_handle<Conv>(d);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnCreateActivationDescriptor(cudnnActivationDescriptor_t* d) {
  make_handle<Activation>(d);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnSetActivationDescriptor(cudnnActivationDescriptor_t d, cudnnActivationMode_t mode,
                                                       cudnnNanPropagation_t nan, double coef) {
  *reinterpret_cast<Activation*>(d) = Activation{mode, nan, coef};
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnDestroyActivationDescriptor(cudnnActivationDescriptor_t d) {
  drop_handle<Activation>(d);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnGetConvolution2dForwardOutputDim(const cudnnConvolutionDescriptor_t conv,
                                                                const cudnnTensorDescriptor_t x,
                                                                const cudnnFilterDescriptor_t w, int* n, int* c, int* h,
                                                                int* wo) {
  int out[4];
  output_dims(CV(conv), T(x), F(w), out);
  if (out[2] <= 0 || out[3] <= 0)  // as cuDNN: a filter larger than the padded input has no output
    return fail(CUDNN_STATUS_BAD_PARAM, "the dilated filter is larger than the padded input");
  *n = out[0];
  *c = out[1];
  *h = out[2];
  *wo = out[3];
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionForwardAlgorithmMaxCount(cudnnHandle_t, int* count) {
  *count = CUDNN_CONVOLUTION_FWD_ALGO_COUNT;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionForwardAlgorithm_v7(cudnnHandle_t, const cudnnTensorDescriptor_t x,
                                                                 const cudnnFilterDescriptor_t w,
                                                                 const cudnnConvolutionDescriptor_t conv,
                                                                 const cudnnTensorDescriptor_t y, const int requested,
                                                                 int* returned, cudnnConvolutionFwdAlgoPerf_t* perf) {
  if (const std::string why = validate(T(x), F(w), CV(conv), T(y)); !why.empty())
    return fail(CUDNN_STATUS_BAD_PARAM, why);
  *returned = offer(kAlgos, CV(conv).math, requested, perf);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionForwardWorkspaceSize(cudnnHandle_t, const cudnnTensorDescriptor_t x,
                                                                  const cudnnFilterDescriptor_t w,
                                                                  const cudnnConvolutionDescriptor_t conv,
                                                                  const cudnnTensorDescriptor_t y,
                                                                  cudnnConvolutionFwdAlgo_t algo, size_t* bytes) {
  if (const std::string why = validate(T(x), F(w), CV(conv), T(y)); !why.empty())
    return fail(CUDNN_STATUS_BAD_PARAM, why);
  return workspace_query(algo, bytes);
}

cudnnStatus_t CUDNNWINAPI cudnnConvolutionForward(cudnnHandle_t handle, const void* alpha,
                                                  const cudnnTensorDescriptor_t xd, const void* x,
                                                  const cudnnFilterDescriptor_t wd, const void* w,
                                                  const cudnnConvolutionDescriptor_t conv,
                                                  cudnnConvolutionFwdAlgo_t algo, void* ws, size_t ws_bytes,
                                                  const void* beta, const cudnnTensorDescriptor_t yd, void* y) {
  if (const cudnnStatus_t s = check_forward(T(xd), x, F(wd), w, CV(conv), algo, ws, ws_bytes, T(yd), y);
      s != CUDNN_STATUS_SUCCESS)
    return s;
  auto call = std::make_unique<Call>();
  call->x = T(xd);
  call->w = F(wd);
  call->cv = CV(conv);
  call->y = T(yd);
  call->px = x;
  call->pw = w;
  call->py = y;
  call->alpha = *static_cast<const float*>(alpha);
  call->beta = *static_cast<const float*>(beta);
  return enqueue(handle, std::move(call));
}

cudnnStatus_t CUDNNWINAPI cudnnConvolutionBiasActivationForward(
    cudnnHandle_t handle, const void* alpha1, const cudnnTensorDescriptor_t xd, const void* x,
    const cudnnFilterDescriptor_t wd, const void* w, const cudnnConvolutionDescriptor_t conv,
    cudnnConvolutionFwdAlgo_t algo, void* ws, size_t ws_bytes, const void* alpha2, const cudnnTensorDescriptor_t zd,
    const void* z, const cudnnTensorDescriptor_t biasd, const void* bias, const cudnnActivationDescriptor_t actd,
    const cudnnTensorDescriptor_t yd, void* y) {
  const auto& act = *reinterpret_cast<const Activation*>(actd);
  if (act.mode != CUDNN_ACTIVATION_RELU && act.mode != CUDNN_ACTIVATION_IDENTITY)
    return fail(CUDNN_STATUS_NOT_SUPPORTED, "an activation other than RELU or IDENTITY");
  if (act.mode == CUDNN_ACTIVATION_IDENTITY && algo != CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM)
    return fail(CUDNN_STATUS_NOT_SUPPORTED, "IDENTITY needs CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM");
  if (const cudnnStatus_t s = check_forward(T(xd), x, F(wd), w, CV(conv), algo, ws, ws_bytes, T(yd), y);
      s != CUDNN_STATUS_SUCCESS)
    return s;
  const Tensor4& b = T(biasd);
  if (b.dims[0] != 1 || b.dims[1] != T(yd).dims[1] || b.dims[2] != 1 || b.dims[3] != 1 || b.type != T(yd).type)
    return fail(CUDNN_STATUS_BAD_PARAM, "the bias is not 1 x k x 1 x 1 of y's type");
  const Tensor4& zt = T(zd);
  for (int i = 0; i < 4; ++i)
    if (zt.dims[i] != T(yd).dims[i]) return fail(CUDNN_STATUS_BAD_PARAM, "z and y differ in shape");
  const double a2 = *static_cast<const float*>(alpha2);
  const bool read_z = a2 != 0 || !skips_zero_alpha2();
  if (!in_device_memory(bias, b.dims[1], b.type) || (read_z && !in_device_memory(z, extent(zt), zt.type)))
    return fail(CUDNN_STATUS_EXECUTION_FAILED, "the bias or z is not inside live device memory");
  auto call = std::make_unique<Call>();
  call->x = T(xd);
  call->w = F(wd);
  call->cv = CV(conv);
  call->y = T(yd);
  call->z = zt;
  call->px = x;
  call->pw = w;
  call->pz = z;
  call->pbias = bias;
  call->py = y;
  call->alpha = *static_cast<const float*>(alpha1);
  call->beta = a2;
  call->fused = true;
  call->read_z = read_z;
  call->relu = act.mode == CUDNN_ACTIVATION_RELU;
  return enqueue(handle, std::move(call));
}

// Times each offered algorithm by running it (each writes y), fastest first.
cudnnStatus_t CUDNNWINAPI cudnnFindConvolutionForwardAlgorithmEx(
    cudnnHandle_t handle, const cudnnTensorDescriptor_t xd, const void* x, const cudnnFilterDescriptor_t wd,
    const void* w, const cudnnConvolutionDescriptor_t conv, const cudnnTensorDescriptor_t yd, void* y,
    const int requested, int* returned, cudnnConvolutionFwdAlgoPerf_t* perf, void* ws, size_t ws_bytes) {
  const float one = 1, zero = 0;
  return time_each(kAlgos, CV(conv).math, ws_bytes, requested, returned, perf, [&](cudnnConvolutionFwdAlgo_t a) {
    return cudnnConvolutionForward(handle, &one, xd, x, wd, w, conv, a, ws, ws_bytes, &zero, yd, y);
  });
}

// ---- backward data (flow's conv_transpose2d) ---------------------------------------------------------

cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionBackwardDataAlgorithmMaxCount(cudnnHandle_t, int* count) {
  *count = CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionBackwardDataAlgorithm_v7(cudnnHandle_t, const cudnnFilterDescriptor_t w,
                                                                      const cudnnTensorDescriptor_t dy,
                                                                      const cudnnConvolutionDescriptor_t conv,
                                                                      const cudnnTensorDescriptor_t dx,
                                                                      const int requested, int* returned,
                                                                      cudnnConvolutionBwdDataAlgoPerf_t* perf) {
  if (const std::string why = validate(T(dx), F(w), CV(conv), T(dy)); !why.empty())
    return fail(CUDNN_STATUS_BAD_PARAM, why);
  *returned = offer(kBwdDataAlgos, CV(conv).math, requested, perf);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionBackwardDataWorkspaceSize(cudnnHandle_t, const cudnnFilterDescriptor_t w,
                                                                       const cudnnTensorDescriptor_t dy,
                                                                       const cudnnConvolutionDescriptor_t conv,
                                                                       const cudnnTensorDescriptor_t dx,
                                                                       cudnnConvolutionBwdDataAlgo_t algo,
                                                                       size_t* bytes) {
  if (const std::string why = validate(T(dx), F(w), CV(conv), T(dy)); !why.empty())
    return fail(CUDNN_STATUS_BAD_PARAM, why);
  return workspace_query(algo, bytes);
}

cudnnStatus_t CUDNNWINAPI cudnnConvolutionBackwardData(cudnnHandle_t handle, const void* alpha,
                                                       const cudnnFilterDescriptor_t wd, const void* w,
                                                       const cudnnTensorDescriptor_t dyd, const void* dy,
                                                       const cudnnConvolutionDescriptor_t conv,
                                                       cudnnConvolutionBwdDataAlgo_t algo, void* ws, size_t ws_bytes,
                                                       const void* beta, const cudnnTensorDescriptor_t dxd, void* dx) {
  if (const cudnnStatus_t s = check_call(T(dxd), dx, F(wd), w, CV(conv), algo, ws, ws_bytes, T(dyd), dy);
      s != CUDNN_STATUS_SUCCESS)
    return s;
  auto call = std::make_unique<BackwardDataCall>();
  call->dx = T(dxd);
  call->dy = T(dyd);
  call->w = F(wd);
  call->cv = CV(conv);
  call->pdy = dy;
  call->pw = w;
  call->pdx = dx;
  call->alpha = *static_cast<const float*>(alpha);
  call->beta = *static_cast<const float*>(beta);
  return enqueue(handle, std::move(call), &run_backward_data);
}

// Times each offered algorithm by running it (each writes dx), fastest first.
cudnnStatus_t CUDNNWINAPI cudnnFindConvolutionBackwardDataAlgorithmEx(
    cudnnHandle_t handle, const cudnnFilterDescriptor_t wd, const void* w, const cudnnTensorDescriptor_t dyd,
    const void* dy, const cudnnConvolutionDescriptor_t conv, const cudnnTensorDescriptor_t dxd, void* dx,
    const int requested, int* returned, cudnnConvolutionBwdDataAlgoPerf_t* perf, void* ws, size_t ws_bytes) {
  const float one = 1, zero = 0;
  return time_each(
      kBwdDataAlgos, CV(conv).math, ws_bytes, requested, returned, perf, [&](cudnnConvolutionBwdDataAlgo_t a) {
        return cudnnConvolutionBackwardData(handle, &one, wd, w, dyd, dy, conv, a, ws, ws_bytes, &zero, dxd, dx);
      });
}

}  // extern "C"
