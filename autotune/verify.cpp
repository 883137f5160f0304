#include "autotune/verify.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>

#include "dsl/interpreter.h"

namespace flow::autotune {

namespace {

double element(const unsigned char* p, dsl::DType t) {
  switch (t) {
    case dsl::DType::Bool:
      return *p;
    case dsl::DType::Int32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case dsl::DType::Int64: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return static_cast<double>(v);
    }
    case dsl::DType::Float16:
    case dsl::DType::BFloat16: {
      uint16_t v;
      std::memcpy(&v, p, 2);
      return t == dsl::DType::Float16 ? dsl::half_bits_to_float(v) : dsl::bf16_bits_to_float(v);
    }
    case dsl::DType::Float32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case dsl::DType::Float64: {
      double v;
      std::memcpy(&v, p, 8);
      return v;
    }
  }
  return 0;
}

double rtol(dsl::DType t) {
  switch (t) {
    case dsl::DType::Float16:
      return 1e-2;
    case dsl::DType::BFloat16:
      return 4e-2;
    case dsl::DType::Float32:
      return 1e-3;
    case dsl::DType::Float64:
      return 1e-9;
    default:
      return 0;
  }
}

}  // namespace

std::string compare_outputs(const void* want, const void* got, size_t bytes, dsl::DType t) {
  const auto* w = static_cast<const unsigned char*>(want);
  const auto* g = static_cast<const unsigned char*>(got);
  const size_t es = static_cast<size_t>(dsl::dtype_size(t));
  const size_t n = bytes / es;
  double scale = 0;
  for (size_t i = 0; i < n; ++i) {
    const double v = std::fabs(element(w + i * es, t));
    if (std::isfinite(v)) scale = std::max(scale, v);
  }
  const double r = rtol(t);
  for (size_t i = 0; i < n; ++i) {
    const double a = element(w + i * es, t), b = element(g + i * es, t);
    bool ok;
    if (std::isnan(a) || std::isnan(b))
      ok = std::isnan(a) && std::isnan(b);
    else if (std::isinf(a) || std::isinf(b))
      ok = a == b;
    else
      ok = std::fabs(a - b) <= r * (std::fabs(a) + scale);
    if (ok) continue;
    std::ostringstream os;
    os.precision(9);
    os << "wrong result: element " << i << " of a " << dsl::dtype_name(t) << " output is " << b
       << ", the default schedule gives " << a;
    return os.str();
  }
  return "";
}

}  // namespace flow::autotune
