// Note: embedding_bag, as one op: embedding_bag(indices, weight, offsets[, per_sample_weights];
// mode, padding_idx) -> [bags, dim], where bag b is positions [offsets[b], offsets[b+1]) of
// `indices` and its row of the output combines the weight rows those positions name:
//   sum   sum of the rows (each times its per-sample weight when given),
//   mean  the sum over the number of rows counted,
//   max   the elementwise maximum, as torch's kernels compute it: the first row is taken as it is
//         and a later value replaces it only when greater (so a NaN in the first row stays, a NaN
//         later never wins), and
// positions whose index is padding_idx are left out and not counted. An empty bag gives
// zeros. Rows accumulate in float32 for half-precision weights (float64 for float64), rounded to
// the weight's dtype once.
//
// `offsets` holds bags + 1 boundaries: torch.nn.functional.embedding_bag (python/flow/nn/
// _functional_more.py) appends the input's length unless include_last_offset, and builds them for
// a 2-D input of fixed-length bags. The data-dependent checks are the executor's (the CPU raises
// torch's messages: offsets[0] has to be 0, offsets no greater than the input's length and
// non-decreasing, indices in [0, num_embeddings); CUDA clamps the boundaries and skips an index
// out of range, as a kernel cannot raise).
//
// Why one op and not embedding + scatter_add: the decomposition materializes a [positions, dim]
// gather and a scatter over it (3 passes over positions x dim, 10x torch's time); the op reads each
// named row once and writes each output row once.
//
// It is a library op (OutEWiseFusable, no epilogues: scheduler/library_patterns.h): the loop over a
// bag has data-dependent bounds, which no loop nest expresses. The CPU and CUDA run it in
// jit/embedding_bag_op.cpp (CUDA through runtime/embedding_bag_kernel.h), the reference interpreter
// in dsl/library_reference.cpp.
//
// Canonical attrs: "mode" one of sum, mean, max; "padding_idx" normalized to [0, num_embeddings),
// absent when there is none.
#include <string>

#include "dsl/ops/op_util.h"

namespace flow::dsl {

namespace {

Attrs embedding_bag_canonicalize(const Graph& g, const std::vector<int>& in, const Attrs& a) {
  check_attrs("embedding_bag", a, {"mode", "padding_idx"});
  if (in.size() != 3 && in.size() != 4)
    throw OpError(OpError::Kind::Value,
                  "embedding_bag(): expected indices, weight, offsets and optionally per_sample_weights");
  const TensorType& indices = g.value(in[0]).type;
  const TensorType& weight = g.value(in[1]).type;
  const TensorType& offsets = g.value(in[2]).type;
  if (indices.dtype != DType::Int64 || offsets.dtype != DType::Int64)
    throw OpError(OpError::Kind::Type, "embedding_bag(): indices and offsets are int64 (the caller converts int32)");
  if (indices.shape.size() != 1) throw OpError(OpError::Kind::Value, "embedding_bag(): indices must be 1-D");
  if (offsets.shape.size() != 1 || offsets.shape[0] < 1)
    throw OpError(OpError::Kind::Value, "embedding_bag(): offsets must be 1-D with bags + 1 boundaries");
  // The weight's and per-sample weights' checks are torch's (messages and RuntimeError, Kind::Value):
  // F.embedding_bag leaves them to the op.
  if (weight.shape.size() != 2)
    throw OpError(OpError::Kind::Value, "embedding_bag: weight has to be a 2D Tensor, but got Tensor of dimension " +
                                            std::to_string(weight.shape.size()));
  if (!is_floating(weight.dtype))
    throw OpError(OpError::Kind::Value,
                  std::string("Expected tensor for argument #1 'weight' to have one of the following scalar types: "
                              "Half, BFloat16, Float, Double; but got ") +
                      torch_dtype_name(weight.dtype) + " instead (while checking arguments for embedding_bag)");
  const std::string mode = attr_find(a, "mode") ? attr_str(a, "mode", "embedding_bag") : "mean";
  if (mode != "sum" && mode != "mean" && mode != "max")
    throw OpError(OpError::Kind::Value, "embedding_bag(): mode has to be one of sum, mean or max, got " + mode);
  if (in.size() == 4) {
    const TensorType& psw = g.value(in[3]).type;
    if (mode != "sum")
      throw OpError(OpError::Kind::NotImplemented,
                    "embedding_bag: per_sample_weights was not None. per_sample_weights is only supported for "
                    "mode='sum' (got mode='" +
                        mode + "')");
    if (psw.dtype != weight.dtype)
      throw OpError(OpError::Kind::Value,
                    std::string("Expected tensor for argument #1 'weight' to have the same type as tensor for "
                                "argument #1 'per_sample_weights'; but type ") +
                        torch_dtype_name(weight.dtype) + " does not equal " + torch_dtype_name(psw.dtype) +
                        " (while checking arguments for embedding_bag)");
    if (psw.shape != indices.shape)
      throw OpError(OpError::Kind::Value, "embedding_bag(): per_sample_weights must have the indices' shape");
  }
  Attrs out{{"mode", mode}};
  if (attr_find(a, "padding_idx")) {
    const int64_t rows = weight.shape[0];
    const int64_t padding_idx = attr_int(a, "padding_idx", "embedding_bag");
    if (padding_idx < -rows || padding_idx >= rows)
      throw OpError(OpError::Kind::Value, "padding_idx must be within the number of embeddings, " +
                                              std::to_string(-rows) + " through " + std::to_string(rows - 1) +
                                              ", but got " + std::to_string(padding_idx));
    out["padding_idx"] = padding_idx < 0 ? padding_idx + rows : padding_idx;
  }
  return out;
}

std::vector<TensorType> embedding_bag_infer(const Graph& g, const std::vector<int>& in, const Attrs&) {
  const TensorType& weight = g.value(in.at(1)).type;
  TensorType out = weight;
  out.shape = {g.value(in.at(2)).type.shape.at(0) - 1, weight.shape.at(1)};
  return {out};
}

}  // namespace

void register_embedding_bag_ops() {
  OpDef d;
  d.name = "embedding_bag";
  d.pattern = OpPattern::OutEWiseFusable;
  d.num_inputs = -1;  // 3 or 4
  d.canonicalize = embedding_bag_canonicalize;
  d.infer = embedding_bag_infer;
  register_builtin(std::move(d));
}

}  // namespace flow::dsl
