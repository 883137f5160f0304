// Element access for the emulated libraries (emulated_cublaslt.cpp, emulated_cudnn.cpp): float32,
// float16 and bfloat16 values read as float and written back rounded to nearest even, as the
// device's conversions do. Computation itself is in double (a reference, not a model of the
// libraries' accumulation order).
// Deliberately not dsl's conversions (dsl/interpreter.h): the emulated libraries stand in for NVIDIA's and
// must not share flow's code, or a bug there would agree with itself.
#pragma once
#include <cstdint>
#include <cstring>

namespace flow::test::simt {

enum class ValueType { F32, F16, BF16, Unsupported };

inline float bf16_to_float(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint16_t float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return 0x7fc0;  // NaN
  return static_cast<uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16);
}

inline double load_value(ValueType t, const void* base, int64_t i) {
  switch (t) {
    case ValueType::F32: {
      float v;
      std::memcpy(&v, static_cast<const char*>(base) + 4 * i, 4);
      return v;
    }
    case ValueType::F16: {
      _Float16 v;
      std::memcpy(&v, static_cast<const char*>(base) + 2 * i, 2);
      return static_cast<float>(v);
    }
    case ValueType::BF16: {
      uint16_t v;
      std::memcpy(&v, static_cast<const char*>(base) + 2 * i, 2);
      return bf16_to_float(v);
    }
    default:
      return 0;
  }
}

inline void store_value(ValueType t, void* base, int64_t i, double value) {
  const auto f = static_cast<float>(value);
  switch (t) {
    case ValueType::F32:
      std::memcpy(static_cast<char*>(base) + 4 * i, &f, 4);
      break;
    case ValueType::F16: {
      const auto h = static_cast<_Float16>(f);
      std::memcpy(static_cast<char*>(base) + 2 * i, &h, 2);
      break;
    }
    case ValueType::BF16: {
      const uint16_t b = float_to_bf16(f);
      std::memcpy(static_cast<char*>(base) + 2 * i, &b, 2);
      break;
    }
    default:
      break;
  }
}

inline int64_t value_bytes(ValueType t) {
  return t == ValueType::F32 ? 4 : 2;
}

}  // namespace flow::test::simt
