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

BlockStmts partial_block(const ReductionInfo& info, const std::string& acc, const std::string& part,
                         const Expr& index) {
  return {make_store(part, index, reduce_identity(info.op, info.acc)),
          make_store(acc, index, reduce_combine(info.op, load(info.acc, acc, index), load(info.acc, part, index)))};
}

Stmt blocked_steps(const std::string& block, const std::string& step, const Expr& begin, const Expr& count,
                   const Stmt& step_body, const BlockStmts& blk) {
  if (!blk.open.defined()) return make_for(step, begin, count, ForKind::Serial, step_body);
  const std::string first = block + "0";
  StmtList body;
  body.let(first, var(block) * make_int(kSumBlock));
  body.add(blk.open);
  body.add(
      make_for(step, begin + var(first), min(make_int(kSumBlock), count - var(first)), ForKind::Serial, step_body));
  body.add(blk.close);
  return make_for(block, make_int(0), (count + make_int(kSumBlock - 1)) / make_int(kSumBlock), ForKind::Serial,
                  body.build());
}

Expr finish_reduction(const ReductionInfo& info, Expr acc, const KernelSignature& sig, DType out) {
  if (info.mean) acc = acc / cast(acc.type(), sig.reduced_total());
  return GroupValues::round_to_storage(cast(compute_dtype(out), cast(out, acc)), out);
}

}  // namespace flow::sched
