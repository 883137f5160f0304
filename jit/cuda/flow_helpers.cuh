// flow device helpers, #included by every kernel the CUDA printer (jit/cuda/cuda_printer.cpp) emits.
// This file is embedded into the library at build time (jit/cuda/embed.cmake) and handed to NVRTC
// as an in-memory header, so the GPU host needs no CUDA headers at run time.
//
// Note: self-contained on purpose. NVRTC has no standard headers without --include-path, and
// cuda_fp16.h / cuda_bf16.h would tie the kernel cache to one toolkit's header layout. So:
//  - the fixed-width integer names are defined here (long long is 64-bit, int is 32-bit on every
//    CUDA target);
//  - float16 / bfloat16 are 2-byte storage structs (trivial, so they may live in __shared__ arrays
//    and in flow::Vec) converted to and from float with single PTX cvt instructions
//    (cvt.rn.f16.f32 on every architecture; cvt.rn.bf16.f32 on sm_80+, with a bit-exact
//    round-to-nearest-even fallback below sm_80). Arithmetic never happens on them: the IR casts to
//    float32 first ("opmath", as PyTorch does);
//  - math uses the accurate libdevice functions (expf, logf, tanhf, erff): kernels are compiled
//    without --use_fast_math, correctness first;
//  - FLOW_SIMT_HOST is defined only when the tests build a kernel for the host SIMT emulator
//    (tests/cpp/simt): the PTX conversions then have bit-exact C++ twins, and vector accesses
//    check their alignment, which the device would fault on.
#pragma once

typedef long long int64_t;
typedef int int32_t;
typedef unsigned long long uint64_t;
typedef unsigned int uint32_t;
typedef unsigned short uint16_t;
typedef unsigned char uint8_t;
typedef short int16_t;
typedef signed char int8_t;

namespace flow {

// ---- half-precision storage types -------------------------------------------------------------

struct alignas(2) half {
  uint16_t bits;
};
struct alignas(2) bfloat16 {
  uint16_t bits;
};

__device__ __forceinline__ float to_float(half h) {
#ifdef FLOW_SIMT_HOST
  return flow_simt_f16_to_f32(h.bits);
#else
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h.bits));
  return f;
#endif
}

__device__ __forceinline__ float to_float(bfloat16 h) {
  return __uint_as_float(static_cast<uint32_t>(h.bits) << 16);
}

// Identity overloads so generated code may call to_float on any compute type.
__device__ __forceinline__ float to_float(float f) {
  return f;
}

// A NaN rounded to a half type keeps its sign and its payload's leading bits (the quiet bit when
// none survive), as the interpreter and the CPU backend do; the PTX conversions would give the
// canonical NaN, losing the sign (signbit, a traced Tensor.view(dtype)).
__device__ __forceinline__ uint16_t nan_to_small(uint32_t u, uint32_t mant_bits) {
  const uint32_t payload = (u & 0x7fffffu) >> (23 - mant_bits);
  const uint32_t exp_ones = mant_bits == 10 ? 0x7c00u : 0x7f80u;
  return static_cast<uint16_t>(((u >> 16) & 0x8000u) | exp_ones | (payload ? payload : 1u << (mant_bits - 1)));
}

__device__ __forceinline__ half float_to_half(float f) {
  half h;
  if (f != f) {
    h.bits = nan_to_small(__float_as_uint(f), 10);
    return h;
  }
#ifdef FLOW_SIMT_HOST
  h.bits = flow_simt_f32_to_f16(f);
#else
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
#endif
  return h;
}

__device__ __forceinline__ bfloat16 float_to_bfloat16(float f) {
  bfloat16 h;
  if (f != f) {
    h.bits = nan_to_small(__float_as_uint(f), 7);
    return h;
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h.bits) : "f"(f));
#else
  const uint32_t u = __float_as_uint(f);
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to even
  h.bits = static_cast<uint16_t>((u + rounding) >> 16);
#endif
  return h;
}

// ---- aligned vectors for 16-byte global memory accesses ---------------------------------------

// N elements of T accessed as one unit. The alignment is the vector's size up to 16 bytes (the
// widest global access); larger vectors become several 16-byte accesses.
template <class T, int N>
struct alignas(sizeof(T) * N < 16 ? sizeof(T) * N : 16) Vec {
  T v[N];
};

// Whether p is aligned for a Vec<T, N> access. A vectorized loop takes its vector form only then,
// else its scalar form: a buffer's base may be a view at any element offset.
template <int N, class T>
__device__ __forceinline__ bool vec_aligned(const T* p) {
  return (reinterpret_cast<unsigned long long>(p) & (alignof(Vec<T, N>) - 1)) == 0;
}

// Loads N consecutive elements at p (which must be aligned to the vector's alignment).
template <int N, class T>
__device__ __forceinline__ Vec<T, N> load_vec(const T* p) {
#ifdef FLOW_SIMT_HOST
  flow_simt_check_aligned(p, alignof(Vec<T, N>));
#endif
  return *reinterpret_cast<const Vec<T, N>*>(p);
}

template <int N, class T>
__device__ __forceinline__ void store_vec(T* p, const Vec<T, N>& x) {
#ifdef FLOW_SIMT_HOST
  flow_simt_check_aligned(p, alignof(Vec<T, N>));
#endif
  *reinterpret_cast<Vec<T, N>*>(p) = x;
}

// ---- scalar math --------------------------------------------------------------------------------
// Semantics follow the reference interpreter (dsl/interpreter.h), the definition every backend is
// held to.

// IR Min/Max. On floats they propagate NaN (as torch.minimum / torch.maximum) and order -0 below
// +0: max(-0, +0) = +0, min(-0, +0) = -0.
template <class T>
__device__ __forceinline__ T min(T a, T b) {
  return b < a ? b : a;
}
template <class T>
__device__ __forceinline__ T max(T a, T b) {
  return a < b ? b : a;
}
template <>
__device__ __forceinline__ float min<float>(float a, float b) {
  if (a != a) return a;
  if (b != b) return b;
  if (a == b) return __int_as_float(__float_as_int(a) | __float_as_int(b));  // -0 wins
  return a < b ? a : b;
}
template <>
__device__ __forceinline__ float max<float>(float a, float b) {
  if (a != a) return a;
  if (b != b) return b;
  if (a == b) return __int_as_float(__float_as_int(a) & __float_as_int(b));  // +0 wins
  return a > b ? a : b;
}
template <>
__device__ __forceinline__ double min<double>(double a, double b) {
  if (a != a) return a;
  if (b != b) return b;
  if (a == b) return __longlong_as_double(__double_as_longlong(a) | __double_as_longlong(b));
  return a < b ? a : b;
}
template <>
__device__ __forceinline__ double max<double>(double a, double b) {
  if (a != a) return a;
  if (b != b) return b;
  if (a == b) return __longlong_as_double(__double_as_longlong(a) & __double_as_longlong(b));
  return a > b ? a : b;
}

// Two's complement wrap for INT_MIN, as the interpreter.
template <class T>
__device__ __forceinline__ T abs(T a) {
  return a < T(0) ? static_cast<T>(T(0) - a) : a;
}
template <>
__device__ __forceinline__ float abs<float>(float a) {
  return fabsf(a);
}
template <>
__device__ __forceinline__ double abs<double>(double a) {
  return fabs(a);
}

// Integer pow, torch's powi: by squaring, wrapping (in unsigned arithmetic: signed overflow is
// undefined); a negative exponent gives 1, +-1 or 0.
template <class T, class U>
__device__ __forceinline__ T ipow_wrapping(T base, T exp) {
  if (exp < T(0)) return base == T(1) ? T(1) : base == T(-1) ? ((exp & T(1)) ? T(-1) : T(1)) : T(0);
  U r = 1, b = static_cast<U>(base);
  for (U e = static_cast<U>(exp); e != 0; e >>= 1) {
    if (e & 1u) r *= b;
    b *= b;
  }
  return static_cast<T>(r);
}
__device__ __forceinline__ int ipow(int base, int exp) {
  return ipow_wrapping<int, unsigned int>(base, exp);
}
__device__ __forceinline__ long long ipow(long long base, long long exp) {
  return ipow_wrapping<long long, unsigned long long>(base, exp);
}

// Floating -> integer cast: truncates toward zero; NaN and out-of-range values give the minimum of
// the target type (what x86 cvtt* return, so CPU and GPU agree; the bare PTX cvt would saturate).
template <class I, class F>
__device__ __forceinline__ I float_to_int(F x) {
  constexpr F lo = sizeof(I) == 8 ? F(-9223372036854775808.0) : F(-2147483648.0);
  constexpr F hi = sizeof(I) == 8 ? F(9223372036854775808.0) : F(2147483648.0);
  constexpr I imin = sizeof(I) == 8 ? I(-9223372036854775807LL - 1) : I(-2147483647 - 1);
  return (x >= lo && x < hi) ? static_cast<I>(x) : imin;
}

// float64 -> half types with a single rounding: truncate to float, make the result sticky (round to
// odd: set the last bit when inexact), then round to nearest even. Exact because float keeps more
// than two bits beyond either half format.
__device__ __forceinline__ float double_to_float_odd(double d) {
  const float t = __double2float_rz(d);
  if (static_cast<double>(t) == d || d != d) return d != d ? static_cast<float>(d) : t;
  return __int_as_float(__float_as_int(t) | 1);
}
__device__ __forceinline__ half double_to_half(double d) {
  return float_to_half(double_to_float_odd(d));
}
__device__ __forceinline__ bfloat16 double_to_bfloat16(double d) {
  return float_to_bfloat16(double_to_float_odd(d));
}

// ---- index checks -------------------------------------------------------------------------------

// dsl CheckIndex: an index outside [lo, hi) claims the device's error word (runtime/device_error.h:
// code 3, then the index, the size and the dim; the first report wins) for the host to raise at its
// next synchronization. A null word (a launch captured before the word existed) drops the report.
__device__ __forceinline__ int64_t check_index(int64_t i, int64_t lo, int64_t hi, int64_t dim, int64_t* err) {
  if ((i < lo || i >= hi) && err != nullptr &&
      atomicCAS(reinterpret_cast<unsigned long long*>(err), 0ull, 3ull) == 0ull) {
    err[1] = i;
    err[2] = hi;
    err[3] = dim;
  }
  return i;
}

// ---- block reductions ---------------------------------------------------------------------------

struct SumOp {
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct MaxOp {
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return max(a, b);
  }
};
struct MinOp {
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return min(a, b);
  }
};
struct ProdOp {
  template <class T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return a * b;
  }
};

// Combines v over the `count` (1..32) lowest lanes of a warp; the result is in lane 0 (and in every
// lane when count is 32). `mask` holds exactly those lanes.
template <class T, class Op>
__device__ __forceinline__ T warp_reduce(T v, unsigned mask, int lane, int count, Op op) {
  if (count == 32) {
#pragma unroll
    for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  } else {
    for (int offset = 16; offset > 0; offset >>= 1) {
      const T other = __shfl_down_sync(mask, v, offset);
      if (lane + offset < count) v = op(v, other);
    }
  }
  return v;
}

// Combines v over every thread of the block and returns the result to every thread. `smem` is a
// __shared__ scratch array of at least 32 elements (one per warp). Collective: every thread of the
// block must call it (at the same program point). Any block shape works, including a thread count
// that is not a multiple of 32. The leading __syncthreads lets consecutive reductions share `smem`.
template <class T, class Op>
__device__ __forceinline__ T block_reduce(T v, T* smem, Op op) {
  const int nthreads = static_cast<int>(blockDim.x * blockDim.y * blockDim.z);
  const int tid = static_cast<int>(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const int nwarps = (nthreads + 31) >> 5;
  const int count = nthreads - warp * 32 < 32 ? nthreads - warp * 32 : 32;
  const unsigned mask = count == 32 ? 0xffffffffu : ((1u << count) - 1u);
  v = warp_reduce(v, mask, lane, count, op);
  if (nwarps == 1) return __shfl_sync(mask, v, 0);
  __syncthreads();
  if (lane == 0) smem[warp] = v;
  __syncthreads();
  if (warp == 0) {
    const unsigned mask0 = nwarps == 32 ? 0xffffffffu : ((1u << nwarps) - 1u);
    if (lane < nwarps) {
      T w = smem[lane];
      w = warp_reduce(w, mask0, lane, nwarps, op);
      if (lane == 0) smem[0] = w;
    }
  }
  __syncthreads();
  return smem[0];
}

template <class T>
__device__ __forceinline__ T block_reduce_sum(T v, T* smem) {
  return block_reduce(v, smem, SumOp());
}
template <class T>
__device__ __forceinline__ T block_reduce_max(T v, T* smem) {
  return block_reduce(v, smem, MaxOp());
}
template <class T>
__device__ __forceinline__ T block_reduce_min(T v, T* smem) {
  return block_reduce(v, smem, MinOp());
}
template <class T>
__device__ __forceinline__ T block_reduce_prod(T v, T* smem) {
  return block_reduce(v, smem, ProdOp());
}

}  // namespace flow
