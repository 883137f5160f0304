// Note: composite ops, expanded into primitive ops when added to a graph, so the fuser, every
// backend and the interpreter only ever see the primitives:
//   softmax(x, dim)     = e * (1 / sum(e, dim, keepdim))      with e = exp(x - amax(x, dim, keepdim))
//   log_softmax(x, dim) = (x - m) - log(sum(exp(x - m), dim, keepdim)),  m = amax(x, dim, keepdim)
// as torch computes them (its CPU kernels also multiply by the sum's reciprocal, one division per
// row instead of one per element), so a row of all -inf gives NaN (x - m = -inf - -inf). The optional
// "dtype" attr converts the input first (torch's dtype=). Half inputs are computed in float32 and
// the result cast back, as torch's kernels accumulate in float. A softmax dim of size 0 has an
// empty result: the (converted) input is returned, since amax would refuse the empty extent.
#include "dsl/ops/op_util.h"

namespace flow::dsl {

namespace {

std::vector<int> softmax_decompose(const std::string& op, bool log, Graph& g, const std::vector<int>& in,
                                   const Attrs& attrs) {
  check_attrs(op, attrs, {"dim", "dtype"});
  int x = in[0];
  const TensorType xt = g.value(x).type;
  const int64_t dim = normalize_dim(attr_int(attrs, "dim", op), static_cast<int64_t>(xt.shape.size()));
  const bool convert = attr_find(attrs, "dtype") != nullptr;
  const DType t = convert ? attr_dtype(attrs, "dtype", op) : xt.dtype;
  // Validate everything before adding a node: a failed add_op leaves the graph unchanged.
  if (!is_floating(t)) not_implemented_for(op, t);
  if (convert) x = g.add("cast", {x}, {{"dtype", std::string(dtype_name(t))}});
  if (!xt.shape.empty() && xt.shape[dim] == 0) return {x};
  if (is_half(t)) x = g.add("cast", {x}, {{"dtype", std::string("float32")}});
  const Attrs red{{"dims", std::vector<int64_t>{dim}}, {"keepdim", true}};
  const int m = g.add("amax", {x}, red);
  const int shifted = g.add("sub", {x, m});
  const int e = g.add("exp", {shifted});
  const int z = g.add("sum", {e}, red);
  int out = log ? g.add("sub", {shifted, g.add("log", {z})}) : g.add("mul", {e, g.add("reciprocal", {z})});
  if (is_half(t)) out = g.add("cast", {out}, {{"dtype", std::string(dtype_name(t))}});
  return {out};
}

void add_softmax(const std::string& name, bool log) {
  OpDef d;
  d.name = name;
  d.pattern = OpPattern::Composite;
  d.num_inputs = 1;
  d.decompose = [name, log](Graph& g, const std::vector<int>& in, const Attrs& a) {
    return softmax_decompose(name, log, g, in, a);
  };
  register_builtin(std::move(d));
}

}  // namespace

void register_composite_ops() {
  add_softmax("softmax", false);
  add_softmax("log_softmax", true);
}

}  // namespace flow::dsl
