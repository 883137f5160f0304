// Note: the `bitcast` op, torch's Tensor.view(dtype) between types of one size, as a value: the bits
// of each element read as `dtype`. The front end (python/flow/_view_dtype.py) aliases the storage
// eagerly; a traced graph has no aliases, so there the view is this op, and views between sizes
// are composed from it with shifts and masks.
//
// A half type's value arrives in float32 and is rounded back to the half type, exactly, before its
// bits are read: every backend keeps a NaN's sign and payload in both conversions (the GPU's
// helpers see to it, jit/cuda/flow_helpers.cuh), though a GPU's widening of float16 (cvt.f32.f16)
// quiets a signaling NaN. Bool converts by value: a byte reads as true when nonzero, true as 1.
#include <string>
#include <vector>

#include "dsl/ops/op_util.h"

namespace flow::dsl {

void register_bitcast_ops() {
  OpDef op;
  op.name = "bitcast";
  op.pattern = OpPattern::Elementwise;
  op.num_inputs = 1;
  op.canonicalize = [](const Graph&, const std::vector<int>&, const Attrs& a) {
    return canonical_dtype_attrs("bitcast", a);
  };
  op.infer = [](const Graph& g, const std::vector<int>& in, const Attrs& a) {
    const TensorType& x = g.value(in[0]).type;
    const DType to = attr_dtype(a, "dtype", "bitcast");
    if (dtype_size(to) != dtype_size(x.dtype)) {
      throw OpError(OpError::Kind::Value, std::string("bitcast: ") + torch_dtype_name(x.dtype) + " and " +
                                              torch_dtype_name(to) + " differ in size (" +
                                              std::to_string(dtype_size(x.dtype)) + " and " +
                                              std::to_string(dtype_size(to)) + " bytes)");
    }
    return std::vector<TensorType>{TensorType{x.shape, to}};
  };
  op.compute = [](const std::vector<Expr>& in, const OpContext& ctx) {
    const Expr& x = in.at(0);  // in the input's compute type
    const DType from = ctx.inputs.at(0).dtype;
    const DType to = ctx.outputs.at(0).dtype;
    const DType ct = compute_dtype(to);
    if (from == to) return x;
    if (to == DType::Bool) return x != make_zero(x.type());  // from a byte
    if (from == DType::Bool) return cast(ct, x);             // to a byte: 0 or 1
    return cast(ct, reinterpret(to, cast(from, x)));
  };
  register_builtin(std::move(op));
}

}  // namespace flow::dsl
