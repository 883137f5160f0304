// Note: dtype tables. promote_types follows torch.promote_types for the dtypes flow has: the
// lattice is Bool < {UInt8, Int8} < Int16 < Int32 < Int64 < {Float16, BFloat16} < Float32 < Float64,
// where the two pairs in braces are incomparable: uint8 and int8 meet at int16, the half types at
// float32.
#include "dsl/types.h"

#include <algorithm>
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
    case DType::UInt8:
      return "uint8";
    case DType::Int8:
      return "int8";
    case DType::Int16:
      return "int16";
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
  if (name == "short") return DType::Int16;
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
    case DType::UInt8:
    case DType::Int8:
      return 1;
    case DType::Int16:
      return 2;
  }
  throw std::invalid_argument("dtype_size: invalid dtype");
}

bool is_floating(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 || t == DType::Float32 || t == DType::Float64;
}
bool is_integral(DType t) {
  return t == DType::Int32 || t == DType::Int64;
}
bool is_small_int(DType t) {
  return t == DType::UInt8 || t == DType::Int8 || t == DType::Int16;
}
bool is_integer(DType t) {
  return is_integral(t) || is_small_int(t);
}
bool is_half(DType t) {
  return t == DType::Float16 || t == DType::BFloat16;
}
bool is_storage_only(DType t) {
  return is_half(t) || is_small_int(t);
}
int64_t integer_min(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::UInt8:
      return 0;
    case DType::Int8:
      return -128;
    case DType::Int16:
      return -32768;
    case DType::Int32:
      return -2147483648LL;
    case DType::Int64:
      return INT64_MIN;
    default:
      throw std::invalid_argument(std::string("integer_min: ") + dtype_name(t) + " is not an integer dtype");
  }
}

int64_t integer_max(DType t) {
  switch (t) {
    case DType::Bool:
      return 1;
    case DType::UInt8:
      return 255;
    case DType::Int8:
      return 127;
    case DType::Int16:
      return 32767;
    case DType::Int32:
      return 2147483647;
    case DType::Int64:
      return INT64_MAX;
    default:
      throw std::invalid_argument(std::string("integer_max: ") + dtype_name(t) + " is not an integer dtype");
  }
}

int64_t wrap_integer(DType t, int64_t v) {
  const auto u = static_cast<uint64_t>(v);  // the two's complement bits, without implementation-defined casts
  auto sign_extend = [](uint64_t low, int bits) {
    const uint64_t half = uint64_t{1} << (bits - 1);
    return low >= half ? static_cast<int64_t>(low) - static_cast<int64_t>(half << 1) : static_cast<int64_t>(low);
  };
  switch (t) {
    case DType::Bool:
      return v != 0 ? 1 : 0;
    case DType::UInt8:
      return static_cast<int64_t>(u & 0xFFu);
    case DType::Int8:
      return sign_extend(u & 0xFFu, 8);
    case DType::Int16:
      return sign_extend(u & 0xFFFFu, 16);
    case DType::Int32:
      return sign_extend(u & 0xFFFFFFFFu, 32);
    case DType::Int64:
      return v;
    default:
      throw std::invalid_argument(std::string("wrap_integer: ") + dtype_name(t) + " is not an integer dtype");
  }
}

DType compute_dtype(DType t) {
  if (is_half(t)) return DType::Float32;
  return is_small_int(t) ? DType::Int32 : t;
}

namespace {

// Height in the promotion lattice; equal heights are incomparable and meet one level up.
int promotion_rank(DType t) {
  switch (t) {
    case DType::Bool:
      return 0;
    case DType::UInt8:
    case DType::Int8:
      return 1;
    case DType::Int16:
      return 2;
    case DType::Int32:
      return 3;
    case DType::Int64:
      return 4;
    case DType::Float16:
    case DType::BFloat16:
      return 5;
    case DType::Float32:
      return 6;
    case DType::Float64:
      return 7;
  }
  throw std::invalid_argument("promote_types: invalid dtype");
}

}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  const int ra = promotion_rank(a);
  const int rb = promotion_rank(b);
  if (ra == rb) return ra == 1 ? DType::Int16 : DType::Float32;  // uint8/int8, float16/bfloat16
  return ra > rb ? a : b;
}

int64_t numel(const Shape& s) {
  int64_t n = 1;
  bool overflow = false;
  for (int64_t d : s) {
    if (d < 0) throw std::invalid_argument("numel: negative dimension in shape " + shape_str(s));
    overflow = __builtin_mul_overflow(n, d, &n) || overflow;
  }
  // (a shape with a 0 has no elements, whatever the product of its other sizes: n is 0 then)
  if (overflow && std::find(s.begin(), s.end(), 0) == s.end())
    throw std::runtime_error("numel: integer multiplication overflow (shape " + shape_str(s) + ")");
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
