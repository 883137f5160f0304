// Note: scatter, as one op: scatter(self, index, src; dim, reduce, include_self) -> a copy of
// `self` in which, for every position p of `index`, the element at p with coordinate `dim`
// replaced by index[p] is combined with src[p]. reduce "none" stores (duplicates: the last along
// `dim` wins), "sum", "prod", "amax", "amin" combine (NaN propagates through amax/amin, as in
// torch); include_self=false starts every targeted element from the reduction's identity instead
// of self's value. torch.scatter, scatter_add, scatter_reduce (its "mean" is two of these and a
// division), index_add, index_copy, index_fill, index_reduce, index_put (accumulate or not), put,
// bincount and histc are this op in python/flow/_scatter.py.
//
// It is a library op (OutEWiseFusable with no epilogues, scheduler/library_patterns.h), like
// argsort: no loop nest expresses a data-dependent store. The CPU and CUDA run it in
// jit/scatter_op.cpp (CUDA through runtime/scatter_kernel.h), the reference interpreter in
// dsl/library_reference.cpp.
//
// Types: self and src share the output's dtype, one of float32, float64, int32, int64, bool (the
// caller widens half precision to float32 and rounds once after, as torch's kernels accumulate in
// float32); index is int64 (the caller converts int32). Shapes as torch's: equal ranks (a 0-dim
// tensor counting as 1-dim), index no larger than src in every dim and than self apart from `dim`.
// An index outside [0, self.size(dim)) raises on the CPU and is skipped on CUDA.
//
// Canonical attrs: "dim" normalized, "reduce" one of the five names, "include_self" a bool.
#include <algorithm>
#include <string>

#include "dsl/ops/op_util.h"

namespace flow::dsl {

namespace {

bool is_scatter_reduce(const std::string& r) {
  return r == "none" || r == "sum" || r == "prod" || r == "amax" || r == "amin";
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

Attrs scatter_canonicalize(const Graph& g, const std::vector<int>& in, const Attrs& a) {
  check_attrs("scatter", a, {"dim", "reduce", "include_self"});
  if (in.size() != 3) throw OpError(OpError::Kind::Value, "scatter(): expected self, index and src");
  const TensorType& self = g.value(in[0]).type;
  const TensorType& index = g.value(in[1]).type;
  const TensorType& src = g.value(in[2]).type;
  const int64_t ndim = static_cast<int64_t>(self.shape.size());
  const int64_t dim = normalize_dim(attr_find(a, "dim") ? attr_int(a, "dim", "scatter") : 0, ndim);
  if (index.dtype != DType::Int64) throw OpError(OpError::Kind::Type, "scatter(): Expected dtype int64 for index");
  if (src.dtype != self.dtype)
    throw OpError(OpError::Kind::Type, "scatter(): Expected self.dtype to be equal to src.dtype");
  if (is_storage_only(self.dtype))
    throw OpError(OpError::Kind::Type,
                  "scatter(): half-precision and small integer tensors are widened (to float32, int32) by the caller");
  const std::string reduce = attr_find(a, "reduce") ? attr_str(a, "reduce", "scatter") : "none";
  if (!is_scatter_reduce(reduce))
    throw OpError(OpError::Kind::Value,
                  "scatter(): reduce argument must be one of none, sum, prod, amax, amin, got " + reduce);
  const auto rank = [](const TensorType& t) { return std::max<size_t>(t.shape.size(), 1); };
  if (rank(index) != rank(self) || rank(src) != rank(self))
    throw OpError(OpError::Kind::Value,
                  "Index tensor must have the same number of dimensions as self tensor and src tensor");
  const auto size = [](const TensorType& t, size_t d) { return t.shape.empty() ? int64_t{1} : t.shape[d]; };
  for (size_t d = 0; d < rank(self); ++d) {
    if (size(index, d) > size(src, d) || (static_cast<int64_t>(d) != dim && size(index, d) > size(self, d)))
      throw OpError(OpError::Kind::Value, "Expected index " + shape_str(index.shape) + " to be no larger than self " +
                                              shape_str(self.shape) + " apart from dimension " + std::to_string(dim) +
                                              " and to be no larger size than src " + shape_str(src.shape));
  }
  const bool include_self = attr_find(a, "include_self") ? attr_bool(a, "include_self", "scatter") : true;
  return Attrs{{"dim", dim}, {"reduce", reduce}, {"include_self", include_self}};
}

std::vector<TensorType> scatter_infer(const Graph& g, const std::vector<int>& in, const Attrs&) {
  return {g.value(in.at(0)).type};
}

}  // namespace

void register_scatter_ops() {
  OpDef d;
  d.name = "scatter";
  d.pattern = OpPattern::OutEWiseFusable;
  d.num_inputs = 3;
  d.canonicalize = scatter_canonicalize;
  d.infer = scatter_infer;
  register_builtin(std::move(d));
}

}  // namespace flow::dsl
