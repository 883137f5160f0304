#include "autotune/verify.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <sstream>

#include "dsl/interpreter.h"

namespace flow::autotune {

namespace {

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
  const int64_t es = dsl::dtype_size(t);
  const auto n = static_cast<int64_t>(bytes / static_cast<size_t>(es));
  const bool floating = dsl::is_floating(t);
  double scale = 0;
  for (int64_t i = 0; floating && i < n; ++i) {
    const double v = std::fabs(dsl::read_element(t, want, i).f);
    if (std::isfinite(v)) scale = std::max(scale, v);
  }
  const double r = rtol(t);
  for (int64_t i = 0; i < n; ++i) {
    const dsl::Scalar sa = dsl::read_element(t, want, i), sb = dsl::read_element(t, got, i);
    const double a = floating ? sa.f : static_cast<double>(sa.i), b = floating ? sb.f : static_cast<double>(sb.i);
    bool ok;
    if (!floating)  // bytes equal: exact beyond 2^53, and a poisoned (unwritten) bool is not "true"
      ok = std::memcmp(static_cast<const char*>(want) + i * es, static_cast<const char*>(got) + i * es, es) == 0;
    else if (std::isnan(a) || std::isnan(b))
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
