// Note: dtypes and tensor types shared by every layer of flow. Half-precision types are storage
// types: expressions load them and cast to float32 for arithmetic ("opmath", as PyTorch does), and
// cast back when storing.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace flow::dsl {

// The small integer types come last so that the enum values of the others (in serialized graphs,
// bundles and kernel-cache keys) never change.
enum class DType : uint8_t { Bool, Int32, Int64, Float16, BFloat16, Float32, Float64, UInt8, Int8, Int16 };

inline constexpr DType kAllDTypes[] = {DType::Bool,    DType::Int32,   DType::Int64, DType::Float16, DType::BFloat16,
                                       DType::Float32, DType::Float64, DType::UInt8, DType::Int8,    DType::Int16};

const char* dtype_name(DType t);            // "float32", "int64", ...
DType dtype_from_name(const std::string&);  // throws std::invalid_argument
int dtype_size(DType t);                    // bytes in storage (bool is 1)
bool is_floating(DType t);
bool is_integral(DType t);      // int32, int64: the integer types expressions compute in (not bool)
bool is_small_int(DType t);     // uint8, int8, int16: storage types that compute in int32
bool is_integer(DType t);       // torch's integer types: the small ones and the integral ones
bool is_half(DType t);          // float16, bfloat16
bool is_storage_only(DType t);  // half or small int: loaded into compute_dtype, rounded back per op
// The least and greatest values of an integer dtype (bool: 0 and 1); throws for floating dtypes.
int64_t integer_min(DType t);
int64_t integer_max(DType t);
// An integer computed modulo 2^64 wrapped into integer dtype t's range, as a cast to t does (bool:
// nonzero is 1); throws for floating dtypes.
int64_t wrap_integer(DType t, int64_t v);
// The type arithmetic is done in: half types compute in float32, small ints in int32 (their sums
// and products wrap when rounded back to storage, as torch's do), everything else in itself.
DType compute_dtype(DType t);
// torch.promote_types
DType promote_types(DType a, DType b);

using Shape = std::vector<int64_t>;
int64_t numel(const Shape& s);
std::string shape_str(const Shape& s);  // "[2, 3]"

}  // namespace flow::dsl
