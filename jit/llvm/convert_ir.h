// Note: how each dtype lives in LLVM registers and memory, and casts between all of them as inline
// IR. In registers: Bool is i1, Int32/Int64 are i32/i64, Float32/Float64 are float/double, and the
// storage-only Float16/BFloat16 are their i16 bit patterns. In memory Bool is an i8 (0/1).
// Half conversions use integer bit operations plus one float add for subnormals (no compiler-rt
// helper, no F16C needed), round to nearest even once (float64 -> float16 is direct, not through
// float32), overflow to infinity and keep NaN sign and leading payload bits (an all-zero payload
// becomes the quiet bit) — bit-identical to dsl::float_to_half_bits & co. Everything works on
// scalars and vectors alike, so it vectorizes.
// Float -> integer follows the interpreter (x86 cvtt*): truncation, and NaN or out-of-range gives
// the minimum of the target type.
#pragma once
#include "dsl/types.h"

namespace llvm {
class IRBuilderBase;
class LLVMContext;
class Type;
class Value;
}  // namespace llvm

namespace flow::jit::llvm_backend::ir {

llvm::Type* register_type(llvm::LLVMContext& ctx, dsl::DType t);
llvm::Type* storage_type(llvm::LLVMContext& ctx, dsl::DType t);
// `v` (a scalar or vector in the register representation of `from`) as `to`.
llvm::Value* cast_value(llvm::IRBuilderBase& b, llvm::Value* v, dsl::DType from, dsl::DType to);
// Register <-> storage representation (only Bool differs).
llvm::Value* to_storage(llvm::IRBuilderBase& b, llvm::Value* v, dsl::DType t);
llvm::Value* from_storage(llvm::IRBuilderBase& b, llvm::Value* v, dsl::DType t);

}  // namespace flow::jit::llvm_backend::ir
