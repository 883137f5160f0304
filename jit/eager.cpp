#include "jit/eager.h"

#include "jit/backend.h"
#include "jit/compile.h"
#include "dsl/op_table.h"

namespace flow::jit {

std::vector<Tensor> eager_op(const std::string& op, const std::vector<EagerArg>& args, const dsl::Attrs& attrs) {
  dsl::Graph g;
  std::vector<int> ids;
  std::vector<Tensor> tensors;
  std::vector<std::vector<int64_t>> strides;
  for (const auto& a : args) {
    if (const auto* t = std::get_if<Tensor>(&a)) {
      ids.push_back(g.add_input({t->sizes, t->dtype}));
      tensors.push_back(*t);
      strides.push_back(t->strides);
    } else {
      const auto& s = std::get<ScalarArg>(a);
      ids.push_back(g.add_constant(s.value, s.dtype, /*wrapped_number=*/true));
    }
  }
  for (int v : g.add_op(op, ids, attrs)) g.mark_output(v);
  CompileOptions opt;
  opt.inline_constants = false;  // scalars are kernel parameters: one kernel for every value
  return compile(g, strides, opt)->run(tensors);
}

Tensor eager_view(const std::string& op, const Tensor& src, const dsl::Attrs& attrs) {
  const dsl::OpDef& def = dsl::lookup_op(op);
  if (def.pattern != dsl::OpPattern::View)
    throw dsl::OpError(dsl::OpError::Kind::Value, "'" + op + "' is not a view op");
  // Type inference through a one-op graph: the same checks and messages as everywhere else.
  dsl::Graph g;
  const int out = g.add(op, {g.add_input({src.sizes, src.dtype})}, attrs);
  const dsl::Attrs& canonical = g.node(g.value(out).producer).attrs;
  auto alias = [&](const Tensor& t, const dsl::Layout& l) {
    Tensor v = t;
    v.sizes = l.sizes;
    v.strides = l.strides;
    v.offset = l.offset;
    return v;
  };
  if (auto l = def.view(dsl::Layout{src.sizes, src.strides, src.offset}, canonical)) return alias(src, *l);
  if (op == "view")
    throw dsl::OpError(dsl::OpError::Kind::Value,
                       "view size is not compatible with input tensor's size and stride (at least one dimension spans "
                       "across two contiguous subspaces). Use .reshape(...) instead.");
  const Tensor copy = eager_contiguous(src, src.dtype);
  return alias(copy, *def.view(dsl::Layout{copy.sizes, copy.strides, copy.offset}, canonical));
}

Tensor eager_contiguous(const Tensor& src, dsl::DType dtype) {
  return eager_op("cast", {src}, {{"dtype", std::string(dsl::dtype_name(dtype))}}).at(0);
}

LaunchCounters launch_counters() { return {total_launches()}; }
void reset_launch_counters() { reset_total_launches(); }

}  // namespace flow::jit
