// The emulated device's libcudnn (see emulated_driver.cpp): the legacy convolution entry points flow
// uses (runtime/cudnn.cpp's function table), implemented on the host from cuDNN's documented
// semantics:
//  - tensors are 4-d (n, c, h, w) or 5-d (n, c, d, h, w) with explicit strides; filters are
//    (k, c / groups, [t,] r, s) in NCHW or NHWC memory order (channels second or innermost);
//    cross-correlation with padding, stride, dilation and groups over 2 or 3 spatial axes, the rank
//    of tensors, filter and convolution agreeing (a 4-d tensor is held as 5-d of depth 1);
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

// Every tensor as 5-d (n, c, d, h, w); `nb` is the rank it was described with (4: depth 1).
struct Tensor5 {
  cudnnDataType_t type{};
  int nb = 0;
  int dims[5] = {};     // n, c, d, h, w
  int strides[5] = {};  // elements
};

struct Filter5 {
  cudnnDataType_t type{};
  cudnnTensorFormat_t format{};
  int nb = 0;
  int k = 0, c = 0, t = 1, r = 0, s = 0;
};

// Padding, stride and dilation per spatial axis (d, h, w); a 2-d convolution has depth's at rest.
struct Conv {
  int spatial = 0;  // 2 or 3: the axes it was described with
  int pad[3] = {0, 0, 0}, stride[3] = {1, 1, 1}, dil[3] = {1, 1, 1};
  cudnnConvolutionMode_t mode{};
  cudnnDataType_t compute{};
  int groups = 1;
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

// The spatial sizes of an input and a filter, and the offset of filter tap (t, r, s) of output
// channel k, input channel c (of its group's cg) in either memory order.
struct Geometry {
  int D, H, W, T, R, S, Cg;
  bool nhwc;
  int64_t filter_offset(int k, int c, int t, int r, int s) const {
    return nhwc ? (((static_cast<int64_t>(k) * T + t) * R + r) * S + s) * Cg + c
                : (((static_cast<int64_t>(k) * Cg + c) * T + t) * R + r) * S + s;
  }
};

// Calls f(t, r, s, d, h, w) for each filter tap (t, r, s) of output position (o, p, q) that lands
// inside the D x H x W input, at input position (d, h, w).
template <class F>
void for_each_tap(const Conv& cv, const Geometry& g, int o, int p, int q, F f) {
  for (int t = 0; t < g.T; ++t) {
    const int d = o * cv.stride[0] - cv.pad[0] + t * cv.dil[0];
    if (d < 0 || d >= g.D) continue;
    for (int r = 0; r < g.R; ++r) {
      const int h = p * cv.stride[1] - cv.pad[1] + r * cv.dil[1];
      if (h < 0 || h >= g.H) continue;
      for (int s = 0; s < g.S; ++s) {
        const int w = q * cv.stride[2] - cv.pad[2] + s * cv.dil[2];
        if (w >= 0 && w < g.W) f(t, r, s, d, h, w);
      }
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

int64_t extent(const Tensor5& t) {
  int64_t last = 0;
  for (int i = 0; i < 5; ++i) {
    if (t.dims[i] == 0) return 0;
    last += static_cast<int64_t>(t.dims[i] - 1) * t.strides[i];
  }
  return last + 1;
}

std::string shape(const int* d) {
  std::string s = std::to_string(d[0]);
  for (int i = 1; i < 5; ++i) s += "x" + std::to_string(d[i]);
  return s;
}

Geometry geometry(const Tensor5& x, const Filter5& w) {
  return {x.dims[2], x.dims[3], x.dims[4], w.t, w.r, w.s, w.c, w.format == CUDNN_TENSOR_NHWC};
}

// (n, k, d, h, w) of the convolution's output.
void output_dims(const Conv& cv, const Tensor5& x, const Filter5& w, int* out) {
  out[0] = x.dims[0];
  out[1] = w.k;
  const int taps[3] = {w.t, w.r, w.s};
  for (int i = 0; i < 3; ++i)
    out[2 + i] = (x.dims[2 + i] + 2 * cv.pad[i] - (cv.dil[i] * (taps[i] - 1) + 1)) / cv.stride[i] + 1;
}

// Shapes and types of (x, w, conv, y); empty when cuDNN would accept them.
std::string validate(const Tensor5& x, const Filter5& w, const Conv& cv, const Tensor5& y) {
  if (value_type(x.type) == ValueType::Unsupported) return "x has a data type the emulation lacks";
  if (x.type != w.type || x.type != y.type) return "x, w and y differ in data type";
  if (cv.mode != CUDNN_CROSS_CORRELATION) return "only cross-correlation is emulated";
  if (cv.compute != CUDNN_DATA_FLOAT) return "only float compute is emulated";
  if (x.nb != cv.spatial + 2 || y.nb != x.nb || w.nb != x.nb)
    return "x, w, y and the convolution differ in rank (" + std::to_string(x.nb) + ", " + std::to_string(w.nb) + ", " +
           std::to_string(y.nb) + ", " + std::to_string(cv.spatial) + " spatial axes)";
  if (w.c * cv.groups != x.dims[1])
    return "the filter's c (" + std::to_string(w.c) + ") times groups (" + std::to_string(cv.groups) +
           ") is not x's c (" + std::to_string(x.dims[1]) + ")";
  if (w.k % cv.groups != 0) return "the filter's k is not a multiple of groups";
  int out[5];
  output_dims(cv, x, w, out);
  for (int i = 0; i < 5; ++i)
    if (out[i] != y.dims[i]) return "y is " + shape(y.dims) + ", the convolution gives " + shape(out);
  return {};
}

bool in_device_memory(const void* p, int64_t elements, cudnnDataType_t t) {
  return elements == 0 ||
         emulated_driver().is_device_range(p, static_cast<size_t>(elements * value_bytes(value_type(t)))) != 0;
}

struct Call {
  Tensor5 x, y, z;
  Filter5 w;
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

int64_t offset(const Tensor5& t, int n, int c, int d, int h, int w) {
  return static_cast<int64_t>(n) * t.strides[0] + static_cast<int64_t>(c) * t.strides[1] +
         static_cast<int64_t>(d) * t.strides[2] + static_cast<int64_t>(h) * t.strides[3] +
         static_cast<int64_t>(w) * t.strides[4];
}

int run(void* arg) {
  const Call& k = *static_cast<const Call*>(arg);
  const ValueType t = value_type(k.x.type);
  const Geometry g = geometry(k.x, k.w);
  const int N = k.x.dims[0], C = k.x.dims[1], D = g.D, H = g.H, W = g.W;
  const int K = k.y.dims[1], O = k.y.dims[2], P = k.y.dims[3], Q = k.y.dims[4];
  const int Cg = g.Cg, Kg = K / k.cv.groups;
  // Dense double copies, channels innermost so that the inner loop is one contiguous dot product:
  // x as [n][d][h][w][c], w as [k][t][r][s][c].
  std::vector<double> x(static_cast<size_t>(N) * C * D * H * W), w(static_cast<size_t>(K) * Cg * g.T * g.R * g.S);
  auto x_at = [&](int n, int d, int h, int ww) { return (((static_cast<size_t>(n) * D + d) * H + h) * W + ww) * C; };
  auto w_at = [&](int kk, int tt, int r, int ss) {
    return (((static_cast<size_t>(kk) * g.T + tt) * g.R + r) * g.S + ss) * Cg;
  };
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int d = 0; d < D; ++d)
        for (int h = 0; h < H; ++h)
          for (int ww = 0; ww < W; ++ww) x[x_at(n, d, h, ww) + c] = load_value(t, k.px, offset(k.x, n, c, d, h, ww));
  for (int kk = 0; kk < K; ++kk)
    for (int c = 0; c < Cg; ++c)
      for (int tt = 0; tt < g.T; ++tt)
        for (int r = 0; r < g.R; ++r)
          for (int ss = 0; ss < g.S; ++ss)
            w[w_at(kk, tt, r, ss) + c] = load_value(t, k.pw, g.filter_offset(kk, c, tt, r, ss));
  for (int n = 0; n < N; ++n) {
    for (int o = 0; o < O; ++o) {
      for (int p = 0; p < P; ++p) {
        for (int q = 0; q < Q; ++q) {
          for (int kk = 0; kk < K; ++kk) {  // the input window stays in cache over the output channels
            const int grp = kk / Kg;
            double acc = 0;
            for_each_tap(k.cv, g, o, p, q, [&](int tt, int r, int ss, int d, int h, int ww) {
              const double* xp = x.data() + x_at(n, d, h, ww) + grp * Cg;
              const double* wp = w.data() + w_at(kk, tt, r, ss);
              for (int c = 0; c < Cg; ++c) acc += xp[c] * wp[c];
            });
            const int64_t yo = offset(k.y, n, kk, o, p, q);
            double v = k.alpha * acc;
            if (k.fused) {
              if (k.read_z) v += k.beta * load_value(t, k.pz, offset(k.z, n, kk, o, p, q));
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
  }
  return 0;
}

// cudnnConvolutionBackwardData: dx = alpha * conv_transpose(dy, w) + beta * dx.
struct BackwardDataCall {
  Tensor5 dx, dy;
  Filter5 w;
  Conv cv;
  const void *pdy = nullptr, *pw = nullptr;
  void* pdx = nullptr;
  double alpha = 1, beta = 0;
};

int run_backward_data(void* arg) {
  const BackwardDataCall& k = *static_cast<const BackwardDataCall*>(arg);
  const ValueType t = value_type(k.dx.type);
  const Geometry g = geometry(k.dx, k.w);
  const int N = k.dx.dims[0], C = k.dx.dims[1], D = g.D, H = g.H, W = g.W;
  const int K = k.dy.dims[1], O = k.dy.dims[2], P = k.dy.dims[3], Q = k.dy.dims[4];
  const int Cg = g.Cg, Kg = K / k.cv.groups;
  std::vector<double> acc(static_cast<size_t>(N) * C * D * H * W, 0.0);  // [n][c][d][h][w]
  auto acc_at = [&](int n, int c, int d, int h, int ww) {
    return (((static_cast<size_t>(n) * C + c) * D + d) * H + h) * W + ww;
  };
  for (int n = 0; n < N; ++n)
    for (int kk = 0; kk < K; ++kk) {
      const int grp = kk / Kg;
      for (int o = 0; o < O; ++o)
        for (int p = 0; p < P; ++p)
          for (int q = 0; q < Q; ++q) {
            const double dy = load_value(t, k.pdy, offset(k.dy, n, kk, o, p, q));
            for_each_tap(k.cv, g, o, p, q, [&](int tt, int r, int ss, int d, int h, int ww) {
              for (int c = 0; c < Cg; ++c)
                acc[acc_at(n, grp * Cg + c, d, h, ww)] += dy * load_value(t, k.pw, g.filter_offset(kk, c, tt, r, ss));
            });
          }
    }
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C; ++c)
      for (int d = 0; d < D; ++d)
        for (int h = 0; h < H; ++h)
          for (int ww = 0; ww < W; ++ww) {
            const int64_t o = offset(k.dx, n, c, d, h, ww);
            double v = k.alpha * acc[acc_at(n, c, d, h, ww)];
            if (k.beta != 0) v += k.beta * load_value(t, k.pdx, o);
            store_value(t, k.pdx, o, v);
          }
  return 0;
}

Tensor5& T(cudnnTensorDescriptor_t d) {
  return *reinterpret_cast<Tensor5*>(d);
}
Filter5& F(cudnnFilterDescriptor_t d) {
  return *reinterpret_cast<Filter5*>(d);
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
cudnnStatus_t check_call(const Tensor5& x, const void* px, const Filter5& w, const void* pw, const Conv& cv, Algo algo,
                         const void* ws, size_t ws_bytes, const Tensor5& y, const void* py) {
  if (const std::string why = validate(x, w, cv, y); !why.empty()) return fail(CUDNN_STATUS_BAD_PARAM, why);
  if (!offered(algo)) return fail(CUDNN_STATUS_NOT_SUPPORTED, "an algorithm the emulation does not offer");
  if (ws_bytes < workspace_for(algo))
    return fail(CUDNN_STATUS_BAD_PARAM, "the workspace (" + std::to_string(ws_bytes) + " bytes) is smaller than the " +
                                            std::to_string(workspace_for(algo)) + " the algorithm needs");
  if (!in_device_memory(px, extent(x), x.type) || !in_device_memory(py, extent(y), y.type) ||
      !in_device_memory(pw, static_cast<int64_t>(w.k) * w.c * w.t * w.r * w.s, w.type))
    return fail(CUDNN_STATUS_EXECUTION_FAILED, "an operand is not inside live device memory");
  // The algorithm's kernels use the workspace it asked for: it must be device memory.
  if (workspace_for(algo) > 0 && emulated_driver().is_device_range(ws, workspace_for(algo)) == 0)
    return fail(CUDNN_STATUS_EXECUTION_FAILED, "the workspace is not inside live device memory");
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t check_forward(const Tensor5& x, const void* px, const Filter5& w, const void* pw, const Conv& cv,
                            cudnnConvolutionFwdAlgo_t algo, const void* ws, size_t ws_bytes, const Tensor5& y,
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
  make_handle<Tensor5>(d);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnSetTensorNdDescriptor(cudnnTensorDescriptor_t d, cudnnDataType_t type, int nb,
                                                     const int dims[], const int strides[]) {
  if (nb != 4 && nb != 5) return fail(CUDNN_STATUS_NOT_SUPPORTED, "the emulation has 4-d and 5-d tensors only");
  for (int i = 0; i < nb; ++i)
    if (dims[i] <= 0 || strides[i] <= 0)
      return fail(CUDNN_STATUS_BAD_PARAM, "a tensor dimension or stride is not positive");
  Tensor5& t = T(d);
  t.type = type;
  t.nb = nb;
  const int depth = nb == 5 ? 1 : 0;  // a 4-d tensor gets depth 1 (its stride unused)
  t.dims[0] = dims[0];
  t.strides[0] = strides[0];
  t.dims[1] = dims[1];
  t.strides[1] = strides[1];
  t.dims[2] = depth ? dims[2] : 1;
  t.strides[2] = depth ? strides[2] : 1;
  for (int i = 0; i < 2; ++i) {
    t.dims[3 + i] = dims[2 + depth + i];
    t.strides[3 + i] = strides[2 + depth + i];
  }
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnSetTensor4dDescriptorEx(cudnnTensorDescriptor_t d, cudnnDataType_t type, int n, int c,
                                                       int h, int w, int ns, int cs, int hs, int ws) {
  const int dims[4] = {n, c, h, w}, strides[4] = {ns, cs, hs, ws};
  return cudnnSetTensorNdDescriptor(d, type, 4, dims, strides);
}

cudnnStatus_t CUDNNWINAPI cudnnDestroyTensorDescriptor(cudnnTensorDescriptor_t d) {
  drop_handle<Tensor5>(d);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnCreateFilterDescriptor(cudnnFilterDescriptor_t* d) {
  make_handle<Filter5>(d);
  return CUDNN_STATUS_SUCCESS;
}

// Dims in (k, c, [t,] r, s) order whatever the format (the format is the memory order).
cudnnStatus_t CUDNNWINAPI cudnnSetFilterNdDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t type,
                                                     cudnnTensorFormat_t format, int nb, const int dims[]) {
  if (nb != 4 && nb != 5) return fail(CUDNN_STATUS_NOT_SUPPORTED, "the emulation has 4-d and 5-d filters only");
  for (int i = 0; i < nb; ++i)
    if (dims[i] <= 0) return fail(CUDNN_STATUS_BAD_PARAM, "a filter dimension is not positive");
  if (format != CUDNN_TENSOR_NCHW && format != CUDNN_TENSOR_NHWC)
    return fail(CUDNN_STATUS_BAD_PARAM, "a filter format other than NCHW or NHWC");
  F(d) = nb == 5 ? Filter5{type, format, nb, dims[0], dims[1], dims[2], dims[3], dims[4]}
                 : Filter5{type, format, nb, dims[0], dims[1], 1, dims[2], dims[3]};
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnSetFilter4dDescriptor(cudnnFilterDescriptor_t d, cudnnDataType_t type,
                                                     cudnnTensorFormat_t format, int k, int c, int h, int w) {
  const int dims[4] = {k, c, h, w};
  return cudnnSetFilterNdDescriptor(d, type, format, 4, dims);
}

cudnnStatus_t CUDNNWINAPI cudnnDestroyFilterDescriptor(cudnnFilterDescriptor_t d) {
  drop_handle<Filter5>(d);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnCreateConvolutionDescriptor(cudnnConvolutionDescriptor_t* d) {
  make_handle<Conv>(d);
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnSetConvolutionNdDescriptor(cudnnConvolutionDescriptor_t d, int axes, const int pad[],
                                                          const int stride[], const int dilation[],
                                                          cudnnConvolutionMode_t mode, cudnnDataType_t compute) {
  if (axes != 2 && axes != 3) return fail(CUDNN_STATUS_NOT_SUPPORTED, "the emulation has 2 or 3 spatial axes only");
  for (int i = 0; i < axes; ++i)
    if (pad[i] < 0 || stride[i] <= 0 || dilation[i] <= 0)
      return fail(CUDNN_STATUS_BAD_PARAM, "a negative padding or a non-positive stride or dilation");
  Conv& cv = CV(d);
  cv.spatial = axes;
  const int first = 3 - axes;  // a 2-d convolution leaves depth at rest
  for (int i = 0; i < 3; ++i) {
    cv.pad[i] = i < first ? 0 : pad[i - first];
    cv.stride[i] = i < first ? 1 : stride[i - first];
    cv.dil[i] = i < first ? 1 : dilation[i - first];
  }
  cv.mode = mode;
  cv.compute = compute;
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnSetConvolution2dDescriptor(cudnnConvolutionDescriptor_t d, int pad_h, int pad_w, int u,
                                                          int v, int dilation_h, int dilation_w,
                                                          cudnnConvolutionMode_t mode, cudnnDataType_t compute) {
  const int pad[2] = {pad_h, pad_w}, stride[2] = {u, v}, dil[2] = {dilation_h, dilation_w};
  return cudnnSetConvolutionNdDescriptor(d, 2, pad, stride, dil, mode, compute);
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
  if (const cudnnStatus_t s = cudnnGetConvolutionNdForwardOutputDim(conv, x, w, 4, out); s != CUDNN_STATUS_SUCCESS)
    return s;
  *n = out[0];
  *c = out[1];
  *h = out[2];
  *wo = out[3];
  return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnGetConvolutionNdForwardOutputDim(const cudnnConvolutionDescriptor_t conv,
                                                                const cudnnTensorDescriptor_t x,
                                                                const cudnnFilterDescriptor_t w, int nb, int* dims) {
  const Conv& cv = CV(conv);
  if (nb != cv.spatial + 2 || T(x).nb != nb || F(w).nb != nb)
    return fail(CUDNN_STATUS_BAD_PARAM, "the tensor, filter and convolution differ in rank");
  int out[5];
  output_dims(cv, T(x), F(w), out);
  for (int i = 2; i < 5; ++i)
    if (out[i] <= 0)  // as cuDNN: a filter larger than the padded input has no output
      return fail(CUDNN_STATUS_BAD_PARAM, "the dilated filter is larger than the padded input");
  dims[0] = out[0];
  dims[1] = out[1];
  for (int i = 2; i < nb; ++i) dims[i] = out[5 - nb + i];  // (d,) h, w
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
  const Tensor5& b = T(biasd);
  if (b.nb != T(yd).nb || b.dims[0] != 1 || b.dims[1] != T(yd).dims[1] || b.dims[2] != 1 || b.dims[3] != 1 ||
      b.dims[4] != 1 || b.type != T(yd).type)
    return fail(CUDNN_STATUS_BAD_PARAM, "the bias is not 1 x k x 1 x 1 (x 1) of y's type");
  const Tensor5& zt = T(zd);
  if (zt.nb != T(yd).nb) return fail(CUDNN_STATUS_BAD_PARAM, "z and y differ in rank");
  for (int i = 0; i < 5; ++i)
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
