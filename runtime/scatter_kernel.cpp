#include "runtime/scatter_kernel.h"

#include <algorithm>
#include <array>
#include <memory>
#include <stdexcept>

#include "runtime/device_error.h"

namespace flow::runtime::cuda {

const std::string& scatter_kernel_source() {
  static const std::string source = fixed_kernel_prelude() + R"(// flow: scatter (runtime/scatter_kernel.h)
#define FLOW_SCATTER_MAX_RANK 8
struct flow_scatter_params {
  long long rank, dim, count, lines, n, inner, out_dim_size, reduce, include_self;
  long long sizes[FLOW_SCATTER_MAX_RANK], src_strides[FLOW_SCATTER_MAX_RANK], out_strides[FLOW_SCATTER_MAX_RANK];
};
enum { FLOW_NONE = 0, FLOW_SUM = 1, FLOW_PROD = 2, FLOW_AMAX = 3, FLOW_AMIN = 4 };

// Per element type: the value type combined in, the reduction identities, and the atomic combine
// (an atomicCAS loop on the word that holds the element).
template <class T> struct flow_scatter_type;

template <class T>
__device__ __forceinline__ T flow_combine(T a, T b, long long reduce) {
  switch (reduce) {
    case FLOW_SUM: return a + b;
    case FLOW_PROD: return a * b;
    case FLOW_AMAX: return (a != a) ? a : (b != b) ? b : (a > b ? a : b);  // NaN propagates
    case FLOW_AMIN: return (a != a) ? a : (b != b) ? b : (a < b ? a : b);
    default: return b;
  }
}
__device__ __forceinline__ unsigned char flow_combine_bool(unsigned char a, unsigned char b, long long reduce) {
  const bool x = a != 0, y = b != 0;
  switch (reduce) {
    case FLOW_SUM: case FLOW_AMAX: return (x || y) ? 1 : 0;
    case FLOW_PROD: case FLOW_AMIN: return (x && y) ? 1 : 0;
    default: return y ? 1 : 0;
  }
}

template <> struct flow_scatter_type<float> {
  static __device__ __forceinline__ float identity(long long r) {
    return r == FLOW_PROD ? 1.0f : r == FLOW_AMAX ? -__int_as_float(0x7f800000) : r == FLOW_AMIN ? __int_as_float(0x7f800000) : 0.0f;
  }
  static __device__ __forceinline__ float combine(float a, float b, long long r) { return flow_combine(a, b, r); }
  static __device__ __forceinline__ void atomic_combine(float* p, float v, long long r) {
    unsigned* w = (unsigned*)p;
    unsigned old = *w, assumed;
    do {
      assumed = old;
      old = atomicCAS(w, assumed, __float_as_uint(flow_combine(__uint_as_float(assumed), v, r)));
    } while (old != assumed);
  }
};
template <> struct flow_scatter_type<double> {
  static __device__ __forceinline__ double identity(long long r) {
    return r == FLOW_PROD ? 1.0 : r == FLOW_AMAX ? -__longlong_as_double(0x7ff0000000000000ll)
         : r == FLOW_AMIN ? __longlong_as_double(0x7ff0000000000000ll) : 0.0;
  }
  static __device__ __forceinline__ double combine(double a, double b, long long r) { return flow_combine(a, b, r); }
  static __device__ __forceinline__ void atomic_combine(double* p, double v, long long r) {
    unsigned long long* w = (unsigned long long*)p;
    unsigned long long old = *w, assumed;
    do {
      assumed = old;
      old = atomicCAS(w, assumed,
                      (unsigned long long)__double_as_longlong(flow_combine(__longlong_as_double((long long)assumed), v, r)));
    } while (old != assumed);
  }
};
template <> struct flow_scatter_type<int> {
  static __device__ __forceinline__ int identity(long long r) {
    return r == FLOW_PROD ? 1 : r == FLOW_AMAX ? (int)0x80000000 : r == FLOW_AMIN ? 0x7fffffff : 0;
  }
  static __device__ __forceinline__ int combine(int a, int b, long long r) {
    // integers wrap as torch's do: add and multiply as unsigned
    if (r == FLOW_SUM) return (int)((unsigned)a + (unsigned)b);
    if (r == FLOW_PROD) return (int)((unsigned)a * (unsigned)b);
    return flow_combine(a, b, r);
  }
  static __device__ __forceinline__ void atomic_combine(int* p, int v, long long r) {
    unsigned* w = (unsigned*)p;
    unsigned old = *w, assumed;
    do {
      assumed = old;
      old = atomicCAS(w, assumed, (unsigned)combine((int)assumed, v, r));
    } while (old != assumed);
  }
};
template <> struct flow_scatter_type<long long> {
  static __device__ __forceinline__ long long identity(long long r) {
    return r == FLOW_PROD ? 1 : r == FLOW_AMAX ? (long long)0x8000000000000000ull : r == FLOW_AMIN ? 0x7fffffffffffffffll : 0;
  }
  static __device__ __forceinline__ long long combine(long long a, long long b, long long r) {
    if (r == FLOW_SUM) return (long long)((unsigned long long)a + (unsigned long long)b);
    if (r == FLOW_PROD) return (long long)((unsigned long long)a * (unsigned long long)b);
    return flow_combine(a, b, r);
  }
  static __device__ __forceinline__ void atomic_combine(long long* p, long long v, long long r) {
    unsigned long long* w = (unsigned long long*)p;
    unsigned long long old = *w, assumed;
    do {
      assumed = old;
      old = atomicCAS(w, assumed, (unsigned long long)combine((long long)assumed, v, r));
    } while (old != assumed);
  }
};
template <> struct flow_scatter_type<unsigned char> {  // bool: or for sum/amax, and for prod/amin
  static __device__ __forceinline__ unsigned char identity(long long r) {
    return (r == FLOW_PROD || r == FLOW_AMIN) ? 1 : 0;
  }
  static __device__ __forceinline__ unsigned char combine(unsigned char a, unsigned char b, long long r) {
    return flow_combine_bool(a, b, r);
  }
  static __device__ __forceinline__ void atomic_combine(unsigned char* p, unsigned char v, long long r) {
    const unsigned long long address = (unsigned long long)p;
    unsigned* w = (unsigned*)(address & ~3ull);
    const unsigned shift = (unsigned)(address & 3ull) * 8u;
    unsigned old = *w, assumed;
    do {
      assumed = old;
      const unsigned char cur = (unsigned char)((assumed >> shift) & 0xffu);
      const unsigned next = (assumed & ~(0xffu << shift)) | ((unsigned)flow_combine_bool(cur, v, r) << shift);
      old = atomicCAS(w, assumed, next);
    } while (old != assumed);
  }
};

// The output and src offsets of index position e; false when its index is out of range, which is
// reported as torch's "index out of bounds" (code 3: the index, the size, the dim) and skipped.
__device__ __forceinline__ bool flow_scatter_offsets(const flow_scatter_params& p, const long long* index,
                                                     long long e, long long* target, long long* source,
                                                     long long* err) {
  const long long v = index[e];
  if (v < 0 || v >= p.out_dim_size) {
    flow_report_error(err, 3, v, p.out_dim_size, p.dim);
    return false;
  }
  long long rest = e, t = 0, s = 0;
  for (int d = (int)p.rank - 1; d >= 0; --d) {
    const long long c = rest % p.sizes[d];
    rest /= p.sizes[d];
    t += (d == p.dim ? v : c) * p.out_strides[d];
    s += c * p.src_strides[d];
  }
  *target = t;
  *source = s;
  return true;
}

// One thread per line (o, i): the positions (o, j, i) for j along dim, in order.
template <class T>
__device__ void flow_scatter_lines(T* out, const long long* index, const T* src, const flow_scatter_params& p,
                                   long long* err) {
  typedef flow_scatter_type<T> K;
  for (long long line = (long long)blockIdx.x * blockDim.x + threadIdx.x; line < p.lines;
       line += (long long)gridDim.x * blockDim.x) {
    const long long o = line / p.inner, i = line % p.inner;
    long long t, s;
    if (!p.include_self && p.reduce != FLOW_NONE) {
      for (long long j = 0; j < p.n; ++j)
        if (flow_scatter_offsets(p, index, (o * p.n + j) * p.inner + i, &t, &s, nullptr))
          out[t] = K::identity(p.reduce);  // (the loop below reports a bad index)
    }
    for (long long j = 0; j < p.n; ++j)
      if (flow_scatter_offsets(p, index, (o * p.n + j) * p.inner + i, &t, &s, err))
        out[t] = K::combine(out[t], src[s], p.reduce);
  }
}

// One thread per index position, combining atomically (stores for reduce "none").
template <class T>
__device__ void flow_scatter_positions(T* out, const long long* index, const T* src, const flow_scatter_params& p,
                                       long long* err) {
  typedef flow_scatter_type<T> K;
  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < p.count; e += (long long)gridDim.x * blockDim.x) {
    long long t, s;
    if (!flow_scatter_offsets(p, index, e, &t, &s, err)) continue;
    if (p.reduce == FLOW_NONE)
      out[t] = src[s];
    else
      K::atomic_combine(out + t, src[s], p.reduce);
  }
}

// The identity at every targeted element (include_self=false on the positions path).
template <class T>
__device__ void flow_scatter_reset(T* out, const long long* index, const T* src, const flow_scatter_params& p) {
  for (long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x; e < p.count; e += (long long)gridDim.x * blockDim.x) {
    long long t, s;
    if (flow_scatter_offsets(p, index, e, &t, &s, nullptr))  // (the positions kernel reports)
      out[t] = flow_scatter_type<T>::identity(p.reduce);
  }
}

#define FLOW_SCATTER_ENTRIES(NAME, T)                                                                     \
  extern "C" __global__ void flow_scatter_lines_##NAME(T* out, const long long* index, const T* src,    \
                                                       flow_scatter_params p, long long* err) {         \
    flow_scatter_lines<T>(out, index, src, p, err);                                                     \
  }                                                                                                     \
  extern "C" __global__ void flow_scatter_positions_##NAME(T* out, const long long* index, const T* src, \
                                                           flow_scatter_params p, long long* err) {     \
    flow_scatter_positions<T>(out, index, src, p, err);                                                 \
  }                                                                                                     \
  extern "C" __global__ void flow_scatter_reset_##NAME(T* out, const long long* index, const T* src,    \
                                                       flow_scatter_params p, long long* err) {         \
    flow_scatter_reset<T>(out, index, src, p);                                                          \
  }
FLOW_SCATTER_ENTRIES(f32, float)
FLOW_SCATTER_ENTRIES(f64, double)
FLOW_SCATTER_ENTRIES(i32, int)
FLOW_SCATTER_ENTRIES(i64, long long)
FLOW_SCATTER_ENTRIES(b8, unsigned char)
)";
  return source;
}

namespace {

const char* type_suffix(FixedKernelType t) {
  if (t == FixedKernelType::Float16 || t == FixedKernelType::BFloat16)
    throw std::invalid_argument("flow: scatter: half-precision types are widened to float32 before the scatter");
  return fixed_kernel_suffix(t);
}

constexpr unsigned kThreads = 256;
constexpr long long kMaxBlocks = 65535;  // the kernels loop over the rest (grid-stride)

unsigned blocks_for(long long work) {
  return static_cast<unsigned>(std::max<long long>(1, std::min(kMaxBlocks, (work + kThreads - 1) / kThreads)));
}

}  // namespace

ScatterParams scatter_params(const ScatterShape& shape) {
  if (shape.rank < 1 || shape.rank > kScatterMaxRank)
    throw std::invalid_argument("flow: scatter on CUDA supports 1 to " + std::to_string(kScatterMaxRank) +
                                " dims, got " + std::to_string(shape.rank));
  ScatterParams p{};
  p.rank = shape.rank;
  p.dim = shape.dim;
  p.count = 1;
  p.inner = 1;
  for (int d = 0; d < shape.rank; ++d) {
    p.sizes[d] = shape.sizes[d];
    p.src_strides[d] = shape.src_strides[d];
    p.out_strides[d] = shape.out_strides[d];
    p.count *= shape.sizes[d];
    if (d > shape.dim) p.inner *= shape.sizes[d];
  }
  p.n = shape.sizes[shape.dim];
  p.lines = p.n == 0 ? 0 : p.count / p.n;
  p.out_dim_size = shape.out_dim_size;
  p.reduce = static_cast<long long>(shape.reduce);
  p.include_self = shape.include_self ? 1 : 0;
  return p;
}

std::vector<ScatterLaunch> plan_scatter(FixedKernelType type, const ScatterShape& shape, ScatterPath path) {
  const ScatterParams p = scatter_params(shape);
  const std::string suffix = type_suffix(type);
  std::vector<ScatterLaunch> plan;
  if (p.count == 0) return plan;
  const bool lines = path == ScatterPath::Lines || (path == ScatterPath::Auto && p.lines >= kScatterLinesPath);
  if (lines) {
    plan.push_back({"flow_scatter_lines_" + suffix, blocks_for(p.lines), kThreads});
    return plan;
  }
  if (!shape.include_self && shape.reduce != ScatterReduce::None)
    plan.push_back({"flow_scatter_reset_" + suffix, blocks_for(p.count), kThreads});
  plan.push_back({"flow_scatter_positions_" + suffix, blocks_for(p.count), kThreads});
  return plan;
}

void scatter(FixedKernelType type, void* out, const int64_t* index, const void* src, const ScatterShape& shape,
             Stream stream, ScatterPath path) {
  const std::vector<ScatterLaunch> plan = plan_scatter(type, shape, path);
  if (plan.empty()) return;  // before touching the device
  const DeviceProps& props = device_props(current_device());
  const std::shared_ptr<const CudaModule> module = CudaModule::get(
      "flow_scatter/" + props.arch, fixed_kernel_cubin("flow_scatter", scatter_kernel_source(), props.arch));
  ScatterParams p = scatter_params(shape);
  const void* index_ptr = index;
  long long* err = device_error_word(current_device(), stream);
  for (const ScatterLaunch& l : plan) {
    std::array<void*, 5> params = {&out, &index_ptr, &src, &p, &err};
    launch(module->function(l.entry), {l.blocks, 1, 1}, {l.threads, 1, 1}, 0, stream, params.data(), "scatter");
  }
}

}  // namespace flow::runtime::cuda
