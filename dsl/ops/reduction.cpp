// Note: the reductions sum, mean, amax, amin. Attrs "dims" (a list; empty or missing = all dims),
// "keepdim" (bool, default false) and, for sum/mean, "dtype". Canonicalization stores "dims"
// normalized (non-negative, sorted: the exact set of reduced dims, so [] only for a 0-dim input)
// and "keepdim" always, so the scheduler reads them without defaults; "dtype" stays optional.
//
// Dtypes as torch: sum of bool/ints gives int64; mean needs a floating input (or dtype); amax/amin
// keep the dtype and refuse an empty reduced extent (with torch's IndexError message, checked at
// canonicalization where it is still known whether the user named the dims).
#include <algorithm>

#include "dsl/ops/op_util.h"

namespace flow::dsl {

namespace {

DType acc_dtype_for(DType out) {
  if (is_half(out) || out == DType::Float32) return DType::Float32;
  if (out == DType::Float64) return DType::Float64;
  return DType::Int64;
}

Attrs reduction_canonicalize(const std::string& op, bool has_dtype, const Graph& g, const std::vector<int>& in,
                             const Attrs& attrs) {
  if (has_dtype) {
    check_attrs(op, attrs, {"dims", "keepdim", "dtype"});
  } else {
    check_attrs(op, attrs, {"dims", "keepdim"});
  }
  const TensorType& x = g.value(in[0]).type;
  const int64_t ndim = static_cast<int64_t>(x.shape.size());
  const std::vector<int64_t> given = attr_find(attrs, "dims") ? attr_ints(attrs, "dims", op) : std::vector<int64_t>{};
  const std::vector<int64_t> dims = normalize_dims(given, ndim);
  if (op == "amax" || op == "amin") {
    if (given.empty() && numel(x.shape) == 0) {
      throw OpError(OpError::Kind::Value, op + "(): Expected reduction dim to be specified for input.numel() == 0. "
                                               "Specify the reduction dim with the 'dim' argument.");
    }
    for (int64_t d : dims) {
      if (x.shape[d] == 0) {
        throw OpError(OpError::Kind::Index,
                      op + "(): Expected reduction dim " + std::to_string(d) + " to have non-zero size.");
      }
    }
  }
  Attrs out;
  out["dims"] = dims;
  out["keepdim"] = attr_find(attrs, "keepdim") ? attr_bool(attrs, "keepdim", op) : false;
  if (has_dtype && attr_find(attrs, "dtype")) out["dtype"] = std::string(dtype_name(attr_dtype(attrs, "dtype", op)));
  return out;
}

std::vector<TensorType> reduction_infer(const std::string& op, const Graph& g, const std::vector<int>& in,
                                        const Attrs& attrs) {
  const TensorType& x = g.value(in[0]).type;
  const std::vector<int64_t> dims = attr_ints(attrs, "dims", op);
  const bool keepdim = attr_bool(attrs, "keepdim", op);
  const bool has_dtype = attr_find(attrs, "dtype") != nullptr;
  DType t = has_dtype ? attr_dtype(attrs, "dtype", op) : x.dtype;
  if (op == "sum" && !has_dtype && !is_floating(t)) t = DType::Int64;
  if (op == "mean" && !is_floating(t)) {
    throw OpError(OpError::Kind::Value,
                  std::string("mean(): could not infer output dtype. ") + (has_dtype ? "Optional" : "Input") +
                      " dtype must be either a floating point or complex dtype. Got: " + torch_dtype_name(t));
  }
  Shape shape;
  for (int64_t d = 0; d < static_cast<int64_t>(x.shape.size()); ++d) {
    const bool reduced = std::find(dims.begin(), dims.end(), d) != dims.end();
    if (!reduced) {
      shape.push_back(x.shape[d]);
    } else if (keepdim) {
      shape.push_back(1);
    }
  }
  return {TensorType{shape, t}};
}

void add_reduction(const std::string& name, ReduceOp op, bool mean, bool has_dtype) {
  OpDef d;
  d.name = name;
  d.pattern = OpPattern::Reduction;
  d.num_inputs = 1;
  d.canonicalize = [name, has_dtype](const Graph& g, const std::vector<int>& in, const Attrs& a) {
    return reduction_canonicalize(name, has_dtype, g, in, a);
  };
  d.infer = [name](const Graph& g, const std::vector<int>& in, const Attrs& a) {
    return reduction_infer(name, g, in, a);
  };
  d.reduce = ReduceSpec{op, mean, acc_dtype_for};
  register_builtin(std::move(d));
}

}  // namespace

void register_reduction_ops() {
  add_reduction("sum", ReduceOp::Sum, false, true);
  add_reduction("mean", ReduceOp::Sum, true, true);
  add_reduction("amax", ReduceOp::Max, false, false);
  add_reduction("amin", ReduceOp::Min, false, false);
}

}  // namespace flow::dsl
