#include "scheduler/reduction_parts.h"

#include <stdexcept>

#include "dsl/op_table.h"

namespace flow::sched {

using namespace flow::dsl;

ReductionInfo reduction_info(const Graph& g, int node) {
  const Node& n = g.node(node);
  const OpDef& def = lookup_op(n.op);
  if (!def.reduce) throw std::logic_error("op '" + n.op + "' has no reduce spec");
  const DType out = g.value(n.outputs[0]).type.dtype;
  return {def.reduce->op, def.reduce->mean, def.reduce->acc_dtype ? def.reduce->acc_dtype(out) : compute_dtype(out)};
}

bool is_reduction_node(const Graph& g, int node) {
  return lookup_op(g.node(node).op).pattern == OpPattern::Reduction;
}

Expr finish_reduction(const ReductionInfo& info, Expr acc, const KernelSignature& sig, DType out) {
  if (info.mean) acc = acc / cast(acc.type(), sig.reduced_total());
  return GroupValues::round_to_storage(cast(compute_dtype(out), cast(out, acc)), out);
}

}  // namespace flow::sched
