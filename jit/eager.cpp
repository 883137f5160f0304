#include "jit/eager.h"

#include "jit/backend.h"
#include "jit/compile.h"

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

Tensor eager_contiguous(const Tensor& src, dsl::DType dtype) {
  return eager_op("cast", {src}, {{"dtype", std::string(dsl::dtype_name(dtype))}}).at(0);
}

LaunchCounters launch_counters() { return {total_launches()}; }
void reset_launch_counters() { reset_total_launches(); }

}  // namespace flow::jit
