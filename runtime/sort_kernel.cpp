#include "runtime/sort_kernel.h"

#include <algorithm>
#include <array>
#include <memory>
#include <stdexcept>

#include "runtime/fixed_kernel.h"

namespace flow::runtime::cuda {

const std::string& sort_kernel_source() {
  static const std::string source =
      fixed_kernel_prelude() + R"(// flow: argsort by bitonic sorting (runtime/sort_kernel.h)
#define FLOW_SORT_TILE 2048

// The comparison type of each element type, and the load into it.
template <class T> struct flow_sort_key;
template <> struct flow_sort_key<float> {
  typedef float type;
  static __device__ __forceinline__ float load(float v) { return v; }
};
template <> struct flow_sort_key<double> {
  typedef double type;
  static __device__ __forceinline__ double load(double v) { return v; }
};
template <> struct flow_sort_key<int> {
  typedef long long type;
  static __device__ __forceinline__ long long load(int v) { return v; }
};
template <> struct flow_sort_key<long long> {
  typedef long long type;
  static __device__ __forceinline__ long long load(long long v) { return v; }
};
template <> struct flow_sort_key<unsigned char> {  // bool
  typedef long long type;
  static __device__ __forceinline__ long long load(unsigned char v) { return v != 0; }
};
template <> struct flow_sort_key<flow_f16> {
  typedef float type;
  static __device__ __forceinline__ float load(flow_f16 h) { return flow_to_float(h); }
};
template <> struct flow_sort_key<flow_bf16> {
  typedef float type;
  static __device__ __forceinline__ float load(flow_bf16 h) { return flow_to_float(h); }
};

// Whether (a, at position pa) sorts before (b, at pb): padded positions (>= len) last, NaN above
// every number, equal values by position. A total order, so bitonic sorting gives a stable result.
template <class K>
__device__ __forceinline__ bool flow_sort_before(K a, int pa, K b, int pb, long long len, int descending) {
  const bool a_pad = pa >= len, b_pad = pb >= len;
  if (a_pad || b_pad) return a_pad && b_pad ? pa < pb : b_pad;
  const bool a_nan = a != a, b_nan = b != b;
  if (a_nan || b_nan) return a_nan && b_nan ? pa < pb : (descending ? a_nan : b_nan);
  if (a != b) return descending ? a > b : a < b;
  return pa < pb;
}

// Tiles of min(padded, FLOW_SORT_TILE) positions of each line, sorted in shared memory through merge
// levels [k_begin, k_end] (each from exchange distance min(level, tile) / 2 down to 1). Positions
// come from the line itself (first) or the scratch array, and go to out (last, the first k of
// them) or back to the scratch array. Each block takes tiles in turn. keys and pos are the entry's
// __shared__ arrays of FLOW_SORT_TILE (declared there, not in this template: the tests' SIMT emulator
// poisons shared memory before each block only for statics outside templates).
template <class T, class K>
__device__ __forceinline__ void flow_sort_block(const T* x, long long* out, int* scratch, long long outer,
                                                long long len, long long inner, long long k, long long padded,
                                                int descending, int first, int last, long long k_begin,
                                                long long k_end, K* keys, int* pos) {
  const long long tile = padded < FLOW_SORT_TILE ? padded : FLOW_SORT_TILE;
  const long long tiles = padded / tile;
  const long long work = outer * inner * tiles;
  for (long long b = blockIdx.x; b < work; b += gridDim.x) {
    const long long line = b / tiles, base = (b % tiles) * tile;
    const long long o = line / inner, i = line % inner;
    const T* xl = x + o * len * inner + i;  // element p of the line: xl[p * inner]
    for (long long t = threadIdx.x; t < tile; t += blockDim.x) {
      const int p = first ? (int)(base + t) : scratch[line * padded + base + t];
      pos[t] = p;
      keys[t] = p < len ? flow_sort_key<T>::load(xl[p * inner]) : (K)0;
    }
    __syncthreads();
    for (long long level = k_begin; level <= k_end; level <<= 1) {
      for (long long j = (level < tile ? level : tile) >> 1; j > 0; j >>= 1) {
        for (long long t = threadIdx.x; t < tile / 2; t += blockDim.x) {
          const long long lo = 2 * j * (t / j) + t % j, hi = lo + j;
          const bool up = ((base + lo) & level) == 0;
          const K a = keys[lo], c = keys[hi];
          const int pa = pos[lo], pc = pos[hi];
          if (up ? flow_sort_before(c, pc, a, pa, len, descending) : flow_sort_before(a, pa, c, pc, len, descending)) {
            keys[lo] = c;
            keys[hi] = a;
            pos[lo] = pc;
            pos[hi] = pa;
          }
        }
        __syncthreads();
      }
    }
    for (long long t = threadIdx.x; t < tile; t += blockDim.x) {
      const long long g = base + t;
      if (!last) {
        scratch[line * padded + g] = pos[t];
      } else if (g < k) {
        out[(o * k + g) * inner + i] = pos[t];
      }
    }
    __syncthreads();  // the next tile's loads reuse keys and pos
  }
}

// Exchange distance j (>= the tile) of merge level `level`, over the scratch positions of every line.
template <class T>
__device__ __forceinline__ void flow_sort_step(const T* x, int* scratch, long long outer, long long len,
                                               long long inner, long long padded, int descending, long long level,
                                               long long j) {
  typedef typename flow_sort_key<T>::type K;
  const long long half = padded / 2, total = outer * inner * half;
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long q = (long long)blockIdx.x * blockDim.x + threadIdx.x; q < total; q += stride) {
    const long long line = q / half, t = q % half;
    const long long lo = 2 * j * (t / j) + t % j, hi = lo + j;
    const long long o = line / inner, i = line % inner;
    const T* xl = x + o * len * inner + i;
    int* sl = scratch + line * padded;
    const int pa = sl[lo], pc = sl[hi];
    const K a = pa < len ? flow_sort_key<T>::load(xl[pa * inner]) : (K)0;
    const K c = pc < len ? flow_sort_key<T>::load(xl[pc * inner]) : (K)0;
    const bool up = (lo & level) == 0;
    if (up ? flow_sort_before(c, pc, a, pa, len, descending) : flow_sort_before(a, pa, c, pc, len, descending)) {
      sl[lo] = pc;
      sl[hi] = pa;
    }
  }
}

#define FLOW_SORT_ENTRIES(suffix, T)                                                                           \
  extern "C" __global__ void flow_sort_block_##suffix(const void* x, long long* out, int* scratch,            \
                                                      long long outer, long long len, long long inner,         \
                                                      long long k, long long padded, int descending, int first, \
                                                      int last, long long k_begin, long long k_end, long long j) { \
    __shared__ flow_sort_key<T>::type keys[FLOW_SORT_TILE];                                                    \
    __shared__ int pos[FLOW_SORT_TILE];                                                                        \
    flow_sort_block<T>((const T*)x, out, scratch, outer, len, inner, k, padded, descending, first, last, k_begin, \
                       k_end, keys, pos);                                                                     \
  }                                                                                                            \
  extern "C" __global__ void flow_sort_step_##suffix(const void* x, long long* out, int* scratch,             \
                                                     long long outer, long long len, long long inner,          \
                                                     long long k, long long padded, int descending, int first,  \
                                                     int last, long long k_begin, long long k_end, long long j) { \
    flow_sort_step<T>((const T*)x, scratch, outer, len, inner, padded, descending, k_begin, j);                \
  }
FLOW_SORT_ENTRIES(f32, float)
FLOW_SORT_ENTRIES(f16, flow_f16)
FLOW_SORT_ENTRIES(bf16, flow_bf16)
FLOW_SORT_ENTRIES(f64, double)
FLOW_SORT_ENTRIES(i32, int)
FLOW_SORT_ENTRIES(i64, long long)
FLOW_SORT_ENTRIES(bool, unsigned char)
)";
  return source;
}

namespace {

// The kernels' parameters that are the same for every launch of one sort (pointers first).
struct SortParams {
  const void* x;
  int64_t* out;
  int32_t* scratch;
  long long outer, len, inner, k, padded;
  int descending;
};

const char* suffix_of(SortKeyType t) {
  switch (t) {
    case SortKeyType::Float32:
      return "f32";
    case SortKeyType::Float16:
      return "f16";
    case SortKeyType::BFloat16:
      return "bf16";
    case SortKeyType::Float64:
      return "f64";
    case SortKeyType::Int32:
      return "i32";
    case SortKeyType::Int64:
      return "i64";
    case SortKeyType::Bool:
      return "bool";
  }
  throw std::logic_error("flow: sort kernel: unknown element type");
}

}  // namespace

SortPlan plan_sort(SortKeyType type, const SortShape& s, int sm_count) {
  SortPlan plan;
  const long long lines = s.outer * s.inner;
  if (lines == 0 || s.len == 0 || s.k == 0) return plan;
  if (s.len >= (1LL << 31)) throw std::invalid_argument("flow: sort: a line of 2^31 elements or more is not supported");
  long long padded = 1;
  while (padded < s.len) padded <<= 1;
  plan.padded = padded;
  const long long tile = std::min<long long>(padded, kSortTile);
  const long long max_blocks = static_cast<long long>(std::max(sm_count, 1)) * 16;
  const std::string block_entry = std::string("flow_sort_block_") + suffix_of(type);
  const std::string step_entry = std::string("flow_sort_step_") + suffix_of(type);
  SortLaunch block;
  block.entry = block_entry;
  block.blocks = static_cast<unsigned>(std::min(lines * (padded / tile), max_blocks));
  block.threads = static_cast<unsigned>(std::clamp<long long>(tile / 2, 32, 256));
  block.first = 1;
  block.last = padded == tile ? 1 : 0;
  block.k_begin = 2;
  block.k_end = tile;
  plan.launches.push_back(block);
  if (padded == tile) return plan;
  plan.scratch_elements = lines * padded;
  SortLaunch step;
  step.entry = step_entry;
  step.threads = 256;
  step.blocks = static_cast<unsigned>(std::min((lines * (padded / 2) + 255) / 256, max_blocks * 2));
  for (long long level = 2 * tile; level <= padded; level <<= 1) {
    for (long long j = level / 2; j >= tile; j >>= 1) {
      step.k_begin = step.k_end = level;
      step.j = j;
      plan.launches.push_back(step);
    }
    SortLaunch merge = block;
    merge.first = 0;
    merge.last = level == padded ? 1 : 0;
    merge.k_begin = merge.k_end = level;
    plan.launches.push_back(merge);
  }
  return plan;
}

void argsort_lines(SortKeyType type, const void* x, int64_t* out, int32_t* scratch, const SortShape& shape,
                   Stream stream) {
  if (shape.outer * shape.inner * shape.len * shape.k == 0) return;  // before touching the device
  const DeviceProps& props = device_props(current_device());
  const SortPlan plan = plan_sort(type, shape, props.sm_count);
  if (plan.scratch_elements > 0 && scratch == nullptr)
    throw std::invalid_argument("flow: sort: this line length needs a scratch array");
  const std::shared_ptr<const CudaModule> module =
      CudaModule::get("flow_sort/" + props.arch, fixed_kernel_cubin("flow_sort", sort_kernel_source(), props.arch));
  SortParams p{x, out, scratch, shape.outer, shape.len, shape.inner, shape.k, plan.padded, shape.descending ? 1 : 0};
  for (const SortLaunch& l : plan.launches) {
    const Function f = module->function(l.entry);
    int first = l.first, last = l.last;
    long long k_begin = l.k_begin, k_end = l.k_end, j = l.j;
    std::array<void*, 14> params = {&p.x,      &p.out,        &p.scratch, &p.outer, &p.len,   &p.inner, &p.k,
                                    &p.padded, &p.descending, &first,     &last,    &k_begin, &k_end,   &j};
    launch(f, {l.blocks, 1, 1}, {l.threads, 1, 1}, 0, stream, params.data(), "sort");
  }
}

}  // namespace flow::runtime::cuda
