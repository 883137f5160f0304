// Note: sorting, as one op: argsort(x; dim, descending, k) -> the int64 indices of the first k
// elements of each line along `dim` in sorted order (k = the whole line unless given). torch.sort,
// torch.argsort and torch.topk are this op and a gather of the values (python/flow/_ops.py), so
// the values are read once, where the indices say, and fuse into their consumers.
//
// The order is a total one, so every backend gives the same indices:
//   - ascending: smaller values first; descending: larger first;
//   - NaN counts as larger than every number (torch: last ascending, first descending);
//   - equal values (-0 == +0) keep their order along the line: a stable sort, whatever the
//     caller's `stable` flag (torch's unstable sort may order ties either way, so stable is one of
//     its valid answers; topk's tie order is unspecified in torch).
// It is a library op (pattern OutEWiseFusable with no epilogues, scheduler/library_patterns.h): no
// loop nest expresses a sort, so the CPU runs a parallel std::sort per line (jit/sort_op.cpp), CUDA
// a bitonic sort kernel (runtime/sort_kernel.h), and the reference interpreter a std::stable_sort
// (dsl/library_reference.cpp).
//
// Canonical attrs: "dim" normalized (0 for a 0-dim input, which sorts as one element), "descending"
// a bool, "k" in [0, n] (n = the line's length; 1 for a 0-dim input).
#include <string>

#include "dsl/ops/op_util.h"

namespace flow::dsl {

namespace {

int64_t line_length(const TensorType& x, int64_t dim) {
  return x.shape.empty() ? 1 : x.shape[static_cast<size_t>(dim)];
}

Attrs argsort_canonicalize(const Graph& g, const std::vector<int>& in, const Attrs& a) {
  check_attrs("argsort", a, {"dim", "descending", "k"});
  if (in.size() != 1) throw OpError(OpError::Kind::Value, "argsort(): expected one input");
  const TensorType& x = g.value(in[0]).type;
  if (is_small_int(x.dtype))
    throw OpError(OpError::Kind::Type, "argsort(): small integer tensors are widened to int32 by the caller");
  const int64_t ndim = static_cast<int64_t>(x.shape.size());
  const int64_t dim = normalize_dim(attr_find(a, "dim") ? attr_int(a, "dim", "argsort") : -1, ndim);
  const int64_t n = line_length(x, ndim == 0 ? 0 : dim);
  const int64_t k = attr_find(a, "k") ? attr_int(a, "k", "argsort") : n;
  if (k < 0 || k > n) throw OpError(OpError::Kind::Value, "selected index k out of range");
  const bool descending = attr_find(a, "descending") ? attr_bool(a, "descending", "argsort") : false;
  return Attrs{{"dim", ndim == 0 ? int64_t{0} : dim}, {"descending", descending}, {"k", k}};
}

std::vector<TensorType> argsort_infer(const Graph& g, const std::vector<int>& in, const Attrs& a) {
  TensorType out{g.value(in.at(0)).type.shape, DType::Int64};
  if (!out.shape.empty()) out.shape[static_cast<size_t>(attr_int(a, "dim", "argsort"))] = attr_int(a, "k", "argsort");
  return {out};
}

}  // namespace

void register_sort_ops() {
  OpDef d;
  d.name = "argsort";
  d.pattern = OpPattern::OutEWiseFusable;
  d.num_inputs = 1;
  d.canonicalize = argsort_canonicalize;
  d.infer = argsort_infer;
  register_builtin(std::move(d));
}

}  // namespace flow::dsl
