// Shared by the GPU library tests (test_cuda_libs.cpp: cuBLASLt and the epilogue kernel;
// test_cudnn.cpp: cuDNN convolutions): 16-bit float conversions, random values representable in a
// library type, uploads and downloads through the device, the tolerance of results stored in a
// type, and the skip rules of tests that need a library.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "runtime/buffer.h"
#include "runtime/cuda_copy.h"
#include "runtime/cuda_driver.h"
#include "runtime/data_type.h"

// A library wrapper for device-less tests. A build without the headers (cudnn.h, cublasLt.h) has no
// wrapper to test: a skip, but a failure where a GPU is present (the GPU script carries the
// headers). A library that does not load: FLOW_REQUIRE_CUDA_LIB's rule (tests/cpp/cuda_test_util.h).
#define FLOW_REQUIRE_LIB(load_fn)                                       \
  if (const std::string flow_lib_err = flow::test::load_error(load_fn); \
      flow::test::contains(flow_lib_err, "built without")) {            \
    if (flow::runtime::cuda::cuda_available()) FAIL() << flow_lib_err;  \
    GTEST_SKIP() << flow_lib_err;                                       \
  }                                                                     \
  FLOW_REQUIRE_CUDA_LIB(load_fn)

namespace flow::test {

using runtime::Buffer;
using runtime::DataType;
using runtime::DeviceType;

// ---- 16-bit floats ---------------------------------------------------------------------------------

inline uint16_t float_to_half(float f) {
  uint32_t x = 0;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t fexp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (fexp == 0xffu) return static_cast<uint16_t>(sign | 0x7c00u | (mant != 0 ? 0x200u : 0u));
  const int32_t exp = static_cast<int32_t>(fexp) - 127 + 15;
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (exp <= 0) {  // subnormal half: m * 2^-24
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const int shift = 14 - exp;
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry rounds up into the exponent
  return static_cast<uint16_t>(sign | h);
}

inline float half_to_float(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  const uint32_t bits = exp == 31 ? (sign | 0x7f800000u | (mant << 13)) : (sign | ((exp + 112) << 23) | (mant << 13));
  float f = 0;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t float_to_bf16(float f) {
  uint32_t x = 0;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN stays NaN
  x += 0x7fffu + ((x >> 16) & 1u);                                                       // round to nearest even
  return static_cast<uint16_t>(x >> 16);
}

inline float bf16_to_float(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f = 0;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline float quantize(float f, DataType t) {
  switch (t) {
    case DataType::Float32:
      return f;
    case DataType::Float16:
      return half_to_float(float_to_half(f));
    case DataType::BFloat16:
      return bf16_to_float(float_to_bf16(f));
  }
  return f;
}

inline std::vector<uint8_t> encode(const std::vector<float>& v, DataType t) {
  const size_t size = runtime::data_type_size(t);
  std::vector<uint8_t> out(v.size() * size);
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == DataType::Float32) {
      std::memcpy(&out[i * 4], &v[i], 4);
    } else {
      const uint16_t h = t == DataType::Float16 ? float_to_half(v[i]) : float_to_bf16(v[i]);
      std::memcpy(&out[i * 2], &h, 2);
    }
  }
  return out;
}

inline std::vector<float> decode(const std::vector<uint8_t>& bytes, DataType t) {
  const size_t size = runtime::data_type_size(t);
  std::vector<float> out(bytes.size() / size);
  for (size_t i = 0; i < out.size(); ++i) {
    if (t == DataType::Float32) {
      std::memcpy(&out[i], &bytes[i * 4], 4);
    } else {
      uint16_t h = 0;
      std::memcpy(&h, &bytes[i * 2], 2);
      out[i] = t == DataType::Float16 ? half_to_float(h) : bf16_to_float(h);
    }
  }
  return out;
}

// Random values already representable in `t` (so the reference sees exactly what the GPU reads).
inline std::vector<float> random_values(size_t n, DataType t, std::mt19937_64& rng, float lo = -1.f, float hi = 1.f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = quantize(dist(rng), t);
  return v;
}

inline std::shared_ptr<Buffer> upload(const std::vector<float>& host, DataType t) {
  const std::vector<uint8_t> bytes = encode(host, t);
  auto buf = Buffer::allocate(bytes.size(), DeviceType::CUDA);
  runtime::cuda::copy_host_to_device(buf->data(), bytes.data(), bytes.size());
  return buf;
}

inline std::vector<float> download(const Buffer& buf, size_t count, DataType t) {
  std::vector<uint8_t> bytes(count * runtime::data_type_size(t));
  runtime::cuda::copy_device_to_host(bytes.data(), buf.data(), bytes.size());
  return decode(bytes, t);
}

// Relative tolerance (of the sum of absolute terms) for results stored in `t`. float32: accumulation
// error only (strict FP32; TF32 inputs would be off by ~5e-4 per product); 16-bit: one or two
// roundings of the output.
inline double rel_tolerance(DataType t) {
  switch (t) {
    case DataType::Float32:
      return 2e-5;
    case DataType::Float16:
      return 2e-3;
    case DataType::BFloat16:
      return 1.6e-2;
  }
  return 0;
}

// Whether the device is the emulated one (tests/cpp/simt/emulated_driver.cpp names itself so).
inline bool emulated_device() {
  return runtime::cuda::device_props(runtime::cuda::current_device()).name.find("emulated") != std::string::npos;
}

// An environment variable set for a scope (unset after, whatever the test's exit).
struct ScopedEnv {
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

}  // namespace flow::test
