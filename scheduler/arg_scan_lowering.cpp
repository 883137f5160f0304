// Note: see arg_scan_lowering.h.
#include "scheduler/arg_scan_lowering.h"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "dsl/op_table.h"
#include "scheduler/cpu_tasks.h"

namespace flow::sched {

using namespace flow::dsl;

namespace {

const ReduceSpec& spec_of(const Graph& g, int node) {
  const OpDef& def = lookup_op(g.node(node).op);
  if (!def.reduce) throw std::logic_error("op '" + g.node(node).op + "' has no reduce spec");
  return *def.reduce;
}

// The dtype values are compared in: the input's compute dtype (bool compares as int32).
DType arg_value_type(const Graph& g, int node) {
  const DType t = compute_dtype(g.value(g.node(node).inputs.at(0)).type.dtype);
  return t == DType::Bool ? DType::Int32 : t;
}

// Whether candidate (v2, i2) replaces the current (v1, i1).
Expr better(bool is_max, const Expr& v2, const Expr& i2, const Expr& v1, const Expr& i1) {
  const Expr cmp = is_max ? v2 > v1 : v2 < v1;
  const Expr earlier = i2 < i1;
  if (!is_floating(v1.type())) return cmp || (v2 == v1 && earlier);
  const Expr nan1 = call(Intrinsic::IsNan, {v1}), nan2 = call(Intrinsic::IsNan, {v2});
  return (nan1 && nan2 && earlier) || (!nan1 && (nan2 || cmp || (v2 == v1 && earlier)));
}

Expr max_index() {
  return make_int(std::numeric_limits<int64_t>::max());
}

// The row-major linear index over the reduced dims at gv.red_idx.
Expr linear_reduced_index(const KernelInstance& ki, const KernelSignature& sig, const GroupValues& gv) {
  Expr j;
  for (size_t d = 0; d < ki.reduced.size(); ++d)
    j = d == 0 ? gv.red_idx.at(0) : j * sig.reduced_size(d) + gv.red_idx.at(d);
  return j.defined() ? j : make_int(0);
}

// Updates buffers (vb, ib) at `slot` with candidate (v, i).
void update(StmtList& body, bool is_max, const std::string& vb, const std::string& ib, DType vt, const Expr& slot,
            const Expr& v, const Expr& i, const std::string& take) {
  const Expr cur_v = load(vt, vb, slot), cur_i = load(DType::Int64, ib, slot);
  body.let(take, better(is_max, v, i, cur_v, cur_i));
  const Expr t = var(take, DType::Bool);
  body.add(make_store(vb, slot, select(t, v, cur_v)));
  body.add(make_store(ib, slot, select(t, i, cur_i)));
}

// Binds the node's outputs ((values,) indices) from the accumulators' element 0.
void bind_outputs(const Graph& g, int node, GroupValues& gv, StmtList& scope, const std::string& vb,
                  const std::string& ib, DType vt) {
  const Node& n = g.node(node);
  if (n.outputs.size() == 2) {
    const DType out = g.value(n.outputs[0]).type.dtype;
    const Expr v = GroupValues::round_to_storage(cast(compute_dtype(out), cast(out, load(vt, vb, make_int(0)))), out);
    const std::string name = "v" + std::to_string(n.outputs[0]);
    scope.let(name, v);
    gv.bind_row(n.outputs[0], var(name, v.type()));
  }
  const std::string name = "v" + std::to_string(n.outputs.back());
  scope.let(name, load(DType::Int64, ib, make_int(0)));
  gv.bind_row(n.outputs.back(), var(name, DType::Int64));
}

}  // namespace

void emit_arg_reduction_cpu(const KernelInstance& ki, const KernelSignature& sig, GroupValues& gv, int node, int64_t W,
                            const std::vector<Expr>& kept_idx,
                            const std::function<Stmt(const std::function<Stmt(bool)>&)>& row_loops, StmtList& scope) {
  const Graph& g = *ki.graph;
  const ReduceSpec& spec = spec_of(g, node);
  const bool is_max = spec.op == ReduceOp::Max;
  const DType vt = arg_value_type(g, node);
  const int in = g.node(node).inputs.at(0);
  const std::string tag = std::to_string(g.node(node).outputs.back());
  const std::string vb = "accv" + tag, ib = "acci" + tag;
  scope.allocate(vb, vt, W, MemoryScope::Local);
  scope.allocate(ib, DType::Int64, W, MemoryScope::Local);
  scope.add(make_for(
      "l", make_int(0), make_int(W), ForKind::Vectorized,
      make_block({make_store(vb, var("l"), reduce_identity(spec.op, vt)), make_store(ib, var("l"), max_index())})));
  scope.add(row_loops([&](bool simd) {
    StmtList body;
    gv.kept_idx = kept_idx;
    gv.begin_body(&body);
    const Expr x = cast(vt, gv.value(in));
    const Expr j = linear_reduced_index(ki, sig, gv);
    update(body, is_max, vb, ib, vt, simd ? var("l") : make_int(0), x, j, "take" + tag);
    return body.build();
  }));
  // Merge lanes 1..W-1 into lane 0 (order-independent: the index breaks ties).
  StmtList merge;
  update(merge, is_max, vb, ib, vt, make_int(0), load(vt, vb, var("l")), load(DType::Int64, ib, var("l")),
         "mtake" + tag);
  scope.add(make_for("l", make_int(1), make_int(W - 1), ForKind::Serial, merge.build()));
  bind_outputs(g, node, gv, scope, vb, ib, vt);
}

void emit_arg_reduction_gpu(const KernelInstance& ki, const KernelSignature& sig, GroupValues& gv, int node, int64_t T,
                            const std::function<Stmt(const std::function<void(StmtList&)>&)>& strided,
                            StmtList& scope) {
  const Graph& g = *ki.graph;
  const ReduceSpec& spec = spec_of(g, node);
  const bool is_max = spec.op == ReduceOp::Max;
  const DType vt = arg_value_type(g, node);
  const int in = g.node(node).inputs.at(0);
  const std::string tag = std::to_string(g.node(node).outputs.back());
  const std::string vb = "accv" + tag, ib = "acci" + tag, sv = "sv" + tag, si = "si" + tag;
  scope.allocate(vb, vt, 1, MemoryScope::Local);
  scope.allocate(ib, DType::Int64, 1, MemoryScope::Local);
  scope.add(make_store(vb, make_int(0), reduce_identity(spec.op, vt)));
  scope.add(make_store(ib, make_int(0), max_index()));
  scope.add(strided([&](StmtList& body) {
    const Expr x = cast(vt, gv.value(in));
    update(body, is_max, vb, ib, vt, make_int(0), x, linear_reduced_index(ki, sig, gv), "take" + tag);
  }));
  int64_t P = 1;
  while (P < T) P *= 2;
  scope.allocate(sv, vt, P, MemoryScope::Shared);
  scope.allocate(si, DType::Int64, P, MemoryScope::Shared);
  const Expr tx = var("tx");
  scope.add(make_store(sv, tx, load(vt, vb, make_int(0))));
  scope.add(make_store(si, tx, load(DType::Int64, ib, make_int(0))));
  if (P > T) {
    scope.add(make_if(tx + make_int(T) < make_int(P),
                      make_block({make_store(sv, tx + make_int(T), reduce_identity(spec.op, vt)),
                                  make_store(si, tx + make_int(T), max_index())})));
  }
  scope.add(make_barrier());
  for (int64_t s = P / 2; s >= 1; s /= 2) {
    StmtList step;
    update(step, is_max, sv, si, vt, tx, load(vt, sv, tx + make_int(s)), load(DType::Int64, si, tx + make_int(s)),
           "stake" + tag);
    scope.add(make_if(tx < make_int(s), step.build()));
    scope.add(make_barrier());
  }
  scope.add(make_store(vb, make_int(0), load(vt, sv, make_int(0))));
  scope.add(make_store(ib, make_int(0), load(DType::Int64, si, make_int(0))));
  bind_outputs(g, node, gv, scope, vb, ib, vt);
}

bool is_scan_group(const KernelInstance& ki) {
  for (int n : ki.group->nodes) {
    const OpDef& def = lookup_op(ki.graph->node(n).op);
    if (def.reduce && def.reduce->scan) return true;
  }
  return false;
}

Stmt lower_scan(const KernelInstance& ki, const KernelSignature& sig, const ReductionParams& p, Target t,
                LoweredFunc& f) {
  const Graph& g = *ki.graph;
  if (ki.group->nodes.size() != 1) throw std::logic_error("a scan kernel holds exactly one scan node");
  const int node = ki.group->nodes[0];
  const ReduceSpec& spec = spec_of(g, node);
  const int in = g.node(node).inputs.at(0), out = g.node(node).outputs.at(0);
  const DType out_t = g.value(out).type.dtype;
  const DType acc = spec.acc_dtype(out_t);
  const KernelBuffer* ob = ki.buffer_for(out);
  if (!ob) throw std::logic_error("scan output is not a kernel buffer");
  const size_t K = ki.kept.size(), R = ki.reduced.size();

  GroupValues gv(ki, sig);
  StmtList line;
  const std::vector<Expr> kept_idx = unravel(line, var("row"), kept_sizes(sig, K), "i");
  line.allocate("acc", acc, 1, MemoryScope::Local);
  line.add(make_store("acc", make_int(0), reduce_identity(spec.op, acc)));
  StmtList body;
  std::vector<Expr> red(R);
  for (size_t d = 0; d < R; ++d) red[d] = var("r" + std::to_string(d) + "i");
  gv.kept_idx = kept_idx;
  gv.red_idx = red;
  gv.begin_body(&body);
  const Expr x = cast(acc, cast(out_t, gv.value(in)));
  body.add(make_store("acc", make_int(0), reduce_combine(spec.op, load(acc, "acc", make_int(0)), x)));
  body.add(make_store(ob->name, gv.index(*ob), cast(out_t, load(acc, "acc", make_int(0)))));
  Stmt loops = body.build();
  for (size_t d = R; d-- > 0;)
    loops = make_for("r" + std::to_string(d) + "i", make_int(0), sig.reduced_size(d), ForKind::Serial, loops);
  line.add(loops);
  if (t == Target::CPU) return cpu_parallel_items("t", "row", sig.kept_total(), sig.reduced_total(), 1, line.build());

  const int64_t T = std::max(32, p.gpu_block_x);
  f.grid[0] = (sig.kept_total() + make_int(T - 1)) / make_int(T);
  f.grid[1] = make_int(1);
  f.grid[2] = make_int(1);
  f.block[0] = make_int(T);
  f.block[1] = make_int(1);
  f.block[2] = make_int(1);
  StmtList thread;
  thread.let("row", var("bx") * make_int(T) + var("tx"));
  thread.add(make_if(var("row") < sig.kept_total(), line.build()));
  const Stmt threads = make_for("tx", make_int(0), make_int(T), ForKind::GPUThread, thread.build(), 0);
  return make_for("bx", make_int(0), f.grid[0], ForKind::GPUBlock, threads, 0);
}

}  // namespace flow::sched
