// Note: helpers shared by the op table entries (dsl/ops/*.cpp) and the registry (dsl/op_table.cpp).
// Internal to dsl: other layers use dsl/op_table.h. Entries register through register_builtin(),
// which, unlike the public register_op, does not trigger the one-time built-in registration it is
// part of.
#pragma once
#include <initializer_list>
#include <string>
#include <vector>

#include "dsl/op_table.h"

namespace flow::dsl {

// Called once, in this order, by the registry (std::call_once); each registers one file's ops.
void register_elementwise_ops();
void register_reduction_ops();
void register_composite_ops();
void register_view_ops();
void register_injective_ops();
void register_library_ops();
void register_elementwise_more_ops();  // dsl/ops/elementwise_more.cpp
void register_reduction_more_ops();    // dsl/ops/reduction_more.cpp
void register_norm_ops();              // dsl/ops/norms.cpp
void register_random_ops();            // dsl/ops/random.cpp
void register_sort_ops();              // dsl/ops/sort.cpp
void register_scatter_ops();           // dsl/ops/scatter.cpp
void register_embedding_bag_ops();     // dsl/ops/embedding_bag.cpp
void register_bitcast_ops();           // dsl/ops/bitcast.cpp
void register_builtin(OpDef def);

// torch's scalar type names used in its messages: "Bool", "Int", "Long", "Half", "BFloat16",
// "Float", "Double".
const char* torch_dtype_name(DType t);

// torch's dtype refusal, a NotImplementedError as torch's: "\"exp\" not implemented for 'Long'".
[[noreturn]] inline void not_implemented_for(const std::string& op, DType t) {
  throw OpError(OpError::Kind::NotImplemented, "\"" + op + "\" not implemented for '" + torch_dtype_name(t) + "'");
}

// Wraps a possibly negative dim into [0, ndim); a 0-dim tensor accepts -1 and 0 as torch does.
// Throws OpError(Index) "Dimension out of range (expected to be in range of [-2, 1], but got 2)".
int64_t normalize_dim(int64_t dim, int64_t ndim);
// Normalizes and sorts; an empty list means all dims. A duplicate raises OpError(Value)
// "dim 1 appears multiple times in the list of dims". For a 0-dim tensor the result is empty.
std::vector<int64_t> normalize_dims(const std::vector<int64_t>& dims, int64_t ndim);

// torch.result_type over typed operands: dimensioned tensors > zero-dim tensors > wrapped numbers,
// each group promoted on its own, a lower group winning only with a higher category
// (bool < integer < floating); a floating wrapped number counts as the default dtype (float32).
DType result_type(const std::vector<TensorType>& types, const std::vector<bool>& wrapped);

// Rejects attrs not in `allowed`: OpError(Type) "add(): unexpected attribute 'alhpa'".
void check_attrs(const std::string& op, const Attrs& attrs, std::initializer_list<const char*> allowed);

// A dtype attr (a name such as "float32" or an alias "float"); OpError(Type) when invalid.
DType attr_dtype(const Attrs& attrs, const std::string& key, const std::string& op);

// The canonical attrs of an op whose only attr is a target "dtype" (cast, bitcast): the dtype's
// canonical name ("float" -> "float32").
inline Attrs canonical_dtype_attrs(const std::string& op, const Attrs& a) {
  check_attrs(op, a, {"dtype"});
  Attrs out;
  out["dtype"] = std::string(dtype_name(attr_dtype(a, "dtype", op)));
  return out;
}

// An operand of dtype `own` (given in compute_dtype(own)) as the computation type of `common`. A
// small integer common dtype wraps it first, as torch converts every operand, Python numbers
// included, to the common dtype (uint8 x // 300 divides by 44); with `round_to_half`, a half common
// dtype rounds it first likewise (rounds_operands_to_half).
Expr operand_as(const Expr& x, DType own, DType common, bool round_to_half = false);

// Whether torch rounds an operand of another dtype (a Python number, a 0-dim tensor) to a half
// common dtype before computing binary op `op`, rather than keeping its full value in the float32
// computation. Measured on torch 2.15's CPU kernels over 20000 float16 and bfloat16 values: the
// comparisons, add, sub (and their alpha), pow, fmod and remainder round (float16 x + 0.7 adds
// 0.7001953125); mul, div and floor_divide keep the full value.
bool rounds_operands_to_half(const std::string& op);

// Types and wrapped flags of graph values.
std::vector<TensorType> value_types(const Graph& g, const std::vector<int>& ids);
std::vector<bool> wrapped_flags(const Graph& g, const std::vector<int>& ids);

}  // namespace flow::dsl
