#include "scheduler/reduction_parts.h"

#include <algorithm>
#include <set>
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

namespace {

// Whether value `from` is computed (within the group) from any of `targets`.
bool reads_any(const KernelInstance& ki, int from, const std::set<int>& targets) {
  const Graph& g = *ki.graph;
  const auto& nodes = ki.group->nodes;
  std::vector<int> stack{from};
  std::set<int> seen;
  while (!stack.empty()) {
    const int v = stack.back();
    stack.pop_back();
    if (targets.count(v)) return true;
    if (!seen.insert(v).second || g.value(v).kind != ValueKind::OpResult) continue;
    const int producer = g.value(v).producer;
    if (std::find(nodes.begin(), nodes.end(), producer) == nodes.end()) continue;
    for (int in : g.node(producer).inputs) stack.push_back(in);
  }
  return false;
}

// (The fuser gives value-and-index reductions groups of their own today; their lowering takes one
// node at a time either way.)
bool runs_alone(const Graph& g, int node) {
  const ReduceSpec& spec = *lookup_op(g.node(node).op).reduce;
  return spec.arg || spec.scan;
}

// Opens a block (partial `part` at `index` reset to the identity) and closes it (added into `acc` at
// `index`).
BlockStmts partial_block(const ReductionInfo& info, const std::string& acc, const std::string& part,
                         const Expr& index) {
  return {make_store(part, index, reduce_identity(info.op, info.acc)),
          make_store(acc, index, reduce_combine(info.op, load(info.acc, acc, index), load(info.acc, part, index)))};
}

}  // namespace

std::vector<std::vector<int>> reduction_passes(const KernelInstance& ki) {
  const Graph& g = *ki.graph;
  std::vector<std::vector<int>> passes;
  std::set<int> since;  // row values bound since the last pass began
  for (const int n : ki.group->nodes) {
    const int out = g.node(n).outputs.at(0);
    if (!is_reduction_node(g, n)) {
      if (is_row_value(ki, out)) since.insert(out);
      continue;
    }
    const bool joins = !passes.empty() && !runs_alone(g, n) && !runs_alone(g, passes.back().front()) &&
                       !reads_any(ki, g.node(n).inputs.at(0), since);
    if (!joins) {
      passes.emplace_back();
      since.clear();
    }
    passes.back().push_back(n);
    for (const int o : g.node(n).outputs) since.insert(o);
  }
  return passes;
}

std::vector<PassReduction> pass_reductions(const Graph& g, const std::vector<int>& pass) {
  std::vector<PassReduction> rs;
  for (const int n : pass) {
    const int out = g.node(n).outputs.at(0);
    const ReductionInfo info = reduction_info(g, n);
    rs.push_back({g.node(n).inputs.at(0), out, g.value(out).type.dtype, info, "acc" + std::to_string(out),
                  "part" + std::to_string(out), info.op == ReduceOp::Sum});
  }
  return rs;
}

void allocate_accumulators(StmtList& scope, const std::vector<PassReduction>& rs, int64_t size) {
  for (const PassReduction& r : rs) {
    scope.allocate(r.acc, r.info.acc, size, MemoryScope::Local);
    if (r.blocked) scope.allocate(r.part, r.info.acc, size, MemoryScope::Local);
  }
}

Stmt fold_step(GroupValues& gv, const PassReduction& r, const std::string& into, const Expr& index) {
  const Expr x = cast(r.info.acc, cast(r.out_t, gv.value(r.in)));
  return make_store(into, index, reduce_combine(r.info.op, load(r.info.acc, into, index), x));
}

void bind_result(StmtList& scope, GroupValues& gv, const KernelSignature& sig, const PassReduction& r,
                 const Expr& total) {
  const Expr result = finish_reduction(r.info, total, sig, r.out_t);
  const std::string name = "v" + std::to_string(r.out);
  scope.let(name, result);
  gv.bind_row(r.out, var(name, result.type()));
}

BlockStmts pass_blocks(const std::vector<PassReduction>& rs, const Expr& index) {
  StmtList open, close;
  bool any = false;
  for (const PassReduction& r : rs) {
    if (!r.blocked) continue;
    const BlockStmts b = partial_block(r.info, r.acc, r.part, index);
    open.add(b.open);
    close.add(b.close);
    any = true;
  }
  if (!any) return {};
  return {open.build(), close.build()};
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
