// The host stand-in for what CUDA C++ takes from the compiler and the device: force-included
// (g++ -include) before a kernel's source when tests/cpp/simt/simt_emulator.cpp builds that
// source into a host shared object, so the very text NVRTC compiles runs on the CPU.
//
// Note: no system header on purpose. flow's device helpers (jit/cuda/flow_helpers.cuh) define
// int64_t and friends themselves, as NVRTC has no standard headers; glibc's headers would define
// them again with other types (int64_t is `long` there). So the math functions are declared here,
// by their C names, and everything else is compiler builtins.
//
// What a kernel thread sees of the emulator: its builtins (threadIdx, blockIdx, blockDim,
// gridDim), read from flow_simt_state, which the emulator rewrites before it resumes a thread;
// and the collective operations (__syncthreads, __shfl_*_sync) and checks, which call back into
// the emulator through flow_simt_state.api.
#pragma once

#define FLOW_SIMT_HOST 1

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
// One section for every __shared__ variable, so the emulator can poison them all before each block
// (simt_abi.h). GCC leaves a static of a function template in its own COMDAT section instead,
// unpoisoned, and refuses one in a non-template inline function ("section type conflict"), so flow's
// kernels declare __shared__ arrays in plain functions: the entries (runtime/sort_kernel.cpp).
#define __shared__ static __attribute__((section("flow_simt_shared")))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))

#include "simt_abi.h"  // next to this file; no system headers

extern "C" __attribute__((visibility("default"))) flow_simt_state_t flow_simt_state;

#define threadIdx (flow_simt_state.threadIdx)
#define blockIdx (flow_simt_state.blockIdx)
#define blockDim (flow_simt_state.blockDim)
#define gridDim (flow_simt_state.gridDim)
#define warpSize 32

inline void __syncthreads() {
  flow_simt_state.api->syncthreads();
}

template <class T>
inline T flow_simt_shfl(int kind, unsigned mask, T v, int arg, int width) {
  static_assert(sizeof(T) <= 8, "a shuffle moves at most 8 bytes");
  unsigned long long bits = 0;
  __builtin_memcpy(&bits, &v, sizeof(T));
  bits = flow_simt_state.api->shfl(kind, mask, bits, arg, width);
  T out;
  __builtin_memcpy(&out, &bits, sizeof(T));
  return out;
}
template <class T>
inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  return flow_simt_shfl(0, mask, v, src, width);
}
template <class T>
inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return flow_simt_shfl(1, mask, v, static_cast<int>(delta), width);
}
template <class T>
inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  return flow_simt_shfl(2, mask, v, static_cast<int>(delta), width);
}
template <class T>
inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  return flow_simt_shfl(3, mask, v, lane_mask, width);
}

// A global access of `bytes` at p must be aligned to `bytes` on the device (else: "misaligned
// address", which ends the context). The helpers' vector loads and stores call this on the host.
inline void flow_simt_check_aligned(const void* p, unsigned long long bytes) {
  if (reinterpret_cast<unsigned long long>(p) % bytes != 0)
    flow_simt_state.api->fault("misaligned vector access", reinterpret_cast<unsigned long long>(p));
}

// ---- atomics ------------------------------------------------------------------------------------
// A thread runs without interruption between synchronization points (fibers switch only at
// __syncthreads and shuffles), so a compare-and-swap is a plain read, compare and write here. The
// shuffled order of threads still makes racing plain stores land in a varying order.
inline unsigned atomicCAS(unsigned* p, unsigned compare, unsigned value) {
  const unsigned old = *p;
  if (old == compare) *p = value;
  return old;
}
inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long compare, unsigned long long value) {
  const unsigned long long old = *p;
  if (old == compare) *p = value;
  return old;
}

// ---- bit casts and conversions (CUDA's __int_as_float family) ----------------------------------

template <class To, class From>
inline To flow_simt_bits(From f) {
  static_assert(sizeof(To) == sizeof(From), "bit cast between sizes");
  To t;
  __builtin_memcpy(&t, &f, sizeof(To));
  return t;
}
inline float __int_as_float(int i) {
  return flow_simt_bits<float>(i);
}
inline int __float_as_int(float f) {
  return flow_simt_bits<int>(f);
}
inline float __uint_as_float(unsigned u) {
  return flow_simt_bits<float>(u);
}
inline unsigned __float_as_uint(float f) {
  return flow_simt_bits<unsigned>(f);
}
inline double __longlong_as_double(long long i) {
  return flow_simt_bits<double>(i);
}
inline long long __double_as_longlong(double d) {
  return flow_simt_bits<long long>(d);
}
// double -> float rounded toward zero.
inline float __double2float_rz(double d) {
  float f = static_cast<float>(d);  // to nearest
  if (d != d || f == d) return f;
  const bool away = (d > 0) ? static_cast<double>(f) > d : static_cast<double>(f) < d;
  if (away) f = flow_simt_bits<float>(flow_simt_bits<int>(f) - 1);  // one step toward zero
  return f;
}

// float16 bits <-> float, exactly as cvt.f32.f16 and cvt.rn.f16.f32 (round to nearest even;
// NaN stays a quiet NaN with its sign).
inline float flow_simt_f16_to_f32(unsigned short h) {
  const unsigned sign = static_cast<unsigned>(h & 0x8000u) << 16;
  const unsigned exp = (h >> 10) & 0x1fu;
  const unsigned man = h & 0x3ffu;
  if (exp == 0x1f) return flow_simt_bits<float>(sign | 0x7f800000u | (man << 13) | (man ? 0x400000u : 0u));
  if (exp != 0) return flow_simt_bits<float>(sign | ((exp + 112u) << 23) | (man << 13));
  const float sub = static_cast<float>(man) * 5.9604644775390625e-8f;  // man * 2^-24, exact
  return sign ? -sub : sub;
}
inline unsigned short flow_simt_f32_to_f16(float f) {
  const unsigned u = flow_simt_bits<unsigned>(f);
  const unsigned short sign = static_cast<unsigned short>((u >> 16) & 0x8000u);
  const unsigned abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return 0x7fffu;                                       // the canonical NaN, as cvt gives
  if (abs >= 0x477ff000u) return static_cast<unsigned short>(sign | 0x7c00u);  // rounds to inf
  if (abs < 0x38800000u) {
    // A float16 subnormal (or zero): value / 2^-24, rounded to nearest even by the FPU.
    const float scaled = flow_simt_bits<float>(abs) * 16777216.0f;  // exact: a power of two
    float r = __builtin_rintf(scaled);
    return static_cast<unsigned short>(sign | static_cast<unsigned short>(r));
  }
  const unsigned rounding = 0xfffu + ((abs >> 13) & 1u);
  return static_cast<unsigned short>(sign | ((abs - 0x38000000u + rounding) >> 13));
}

// ---- math: the C library's, declared by hand (see the note above) -----------------------------

extern "C" {
float expf(float);
double exp(double);
float logf(float);
double log(double);
float sqrtf(float);
double sqrt(double);
float tanhf(float);
double tanh(double);
float erff(float);
double erf(double);
float powf(float, float);
double pow(double, double);
float floorf(float);
double floor(double);
float ceilf(float);
double ceil(double);
float sinf(float);
double sin(double);
float cosf(float);
double cos(double);
float log1pf(float);
double log1p(double);
float expm1f(float);
double expm1(double);
float truncf(float);
double trunc(double);
float rintf(float);
double rint(double);
float fmodf(float, float);
double fmod(double, double);
float fabsf(float);
double fabs(double);
float tanf(float);
double tan(double);
float atanf(float);
double atan(double);
float asinf(float);
double asin(double);
float acosf(float);
double acos(double);
float sinhf(float);
double sinh(double);
float coshf(float);
double cosh(double);
float asinhf(float);
double asinh(double);
float acoshf(float);
double acosh(double);
float atanhf(float);
double atanh(double);
float log2f(float);
double log2(double);
float log10f(float);
double log10(double);
float exp2f(float);
double exp2(double);
float erfcf(float);
double erfc(double);
float atan2f(float, float);
double atan2(double, double);
float hypotf(float, float);
double hypot(double, double);
}
inline float rsqrtf(float x) {
  return 1.0f / sqrtf(x);
}
inline double rsqrt(double x) {
  return 1.0 / sqrt(x);
}
inline bool isnan(float x) {
  return __builtin_isnan(x);
}
inline bool isnan(double x) {
  return __builtin_isnan(x);
}
