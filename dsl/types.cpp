// Note: dtype tables. promote_types follows torch.promote_types for the dtypes flow has: the
// enum order Bool < Int32 < Int64 < Float16/BFloat16 < Float32 < Float64 is the promotion
// lattice, except that the two half types are incomparable and meet at Float32.
#include "dsl/types.h"

#include <stdexcept>

namespace flow::dsl {

const char* dtype_name(DType t) {
  switch (t) {
    case DType::Bool:
      return "bool";
    case DType::Int32:
      return "int32";
    case DType::Int64:
      return "int64";
    case DType::Float16:
      return "float16";
    case DType::BFloat16:
      return "bfloat16";
    case DType::Float32:
      return "float32";
    case DType::Float64:
      return "float64";
  }
  return "<invalid dtype>";
}

DType dtype_from_name(const std::string& name) {
  for (DType t : kAllDTypes) {
    if (name == dtype_name(t)) return t;
  }
  // torch's aliases
  if (name == "float") return DType::Float32;
  if (name == "double") return DType::Float64;
  if (name == "half") return DType::Float16;
  if (name == "int") return DType::Int32;
  if (name == "long") return DType::Int64;
  throw std::invalid_argument("unknown dtype name '" + name + "'");
}

int dtype_size(DType t) {
  switch (t) {
    case DType::Bool:
      return 1;
    case DType::Int32:
      return 4;
    case DType::Int64:
      return 8;
    case DType::Float16:
      return 2;
    case DType::BFloat16:
      return 2;
    case DType::Float32:
      return 4;
    case DType::Float64:
      return 8;
  }
  throw std::invalid_argument("dtype_size: invalid dtype");
}

bool is_floating(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 || t == DType::Float32 || t == DType::Float64;
}
bool is_integral(DType t) {
  return t == DType::Int32 || t == DType::Int64;
}
bool is_half(DType t) {
  return t == DType::Float16 || t == DType::BFloat16;
}
DType compute_dtype(DType t) {
  return is_half(t) ? DType::Float32 : t;
}

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (is_half(a) && is_half(b)) return DType::Float32;
  return static_cast<uint8_t>(a) > static_cast<uint8_t>(b) ? a : b;
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) {
    if (d < 0) throw std::invalid_argument("numel: negative dimension in shape " + shape_str(s));
    n *= d;
  }
  return n;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

}  // namespace flow::dsl
