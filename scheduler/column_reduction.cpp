#include "scheduler/column_reduction.h"

#include <algorithm>

#include "dsl/op_table.h"
#include "scheduler/reduction_parts.h"

namespace flow::sched {

using namespace flow::dsl;

namespace {

constexpr int64_t kBlock = 256;  // elements of a row summed into one partial before its total

bool has_reduced_extent(const KernelBuffer& b, size_t K) {
  return std::any_of(b.classes.begin() + static_cast<std::ptrdiff_t>(K), b.classes.end(),
                     [](StrideClass c) { return c != StrideClass::Zero; });
}

}  // namespace

bool column_reduction_fits(const KernelInstance& ki) {
  const size_t K = ki.kept.size(), R = ki.reduced.size();
  if (K == 0 || R == 0 || ki.group->kind != GroupKind::Reduction) return false;
  const Graph& g = *ki.graph;
  for (int n : ki.group->nodes) {
    const OpDef& def = lookup_op(g.node(n).op);
    if (def.pattern == OpPattern::Reduction && (!def.reduce || def.reduce->arg)) return false;
  }
  bool strided_rows = false;
  for (const KernelBuffer& b : ki.buffers) {
    if (b.is_output) {
      if (!is_row_value(ki, b.value)) return false;
      continue;
    }
    if (!has_reduced_extent(b, K)) continue;  // a per-row operand
    if (b.classes[K - 1] != StrideClass::One || b.classes[K + R - 1] == StrideClass::One) return false;
    strided_rows = true;
  }
  return strided_rows;
}

Stmt lower_column_reduction_cpu(const KernelInstance& ki, const KernelSignature& sig, const ReductionParams& p) {
  const Graph& g = *ki.graph;
  const size_t K = ki.kept.size(), R = ki.reduced.size();
  const int64_t W = std::max(1, p.cpu_vector_width);
  GroupValues gv(ki, sig);

  StmtList tile;
  std::vector<Expr> kept_idx;
  if (K > 1) kept_idx = unravel(tile, var("t") / var("ntile"), kept_sizes(sig, K - 1), "i");
  tile.let("base", var("t") % var("ntile") * make_int(W));
  tile.let("nl", min(make_int(W), sig.kept_size(K - 1) - var("base")));
  kept_idx.push_back(var("base") + var("l"));

  // One tile's statements; `simd`: all W lanes (a vectorized lane loop), else the last tile's nl
  // lanes one at a time. Row values live in per-lane local arrays between the loops.
  auto tile_body = [&](bool simd) {
    StmtList s;
    auto lanes = [&](const Stmt& body) {
      return make_for("l", make_int(0), simd ? make_int(W) : var("nl"), simd ? ForKind::Vectorized : ForKind::Serial,
                      body);
    };
    gv.kept_idx = kept_idx;
    for (int n : ki.group->nodes) {
      if (!is_reduction_node(g, n)) continue;  // full-domain ops are computed where read, row ops too
      const ReductionInfo info = reduction_info(g, n);
      const int in = g.node(n).inputs[0];
      const int out = g.node(n).outputs[0];
      const DType out_t = g.value(out).type.dtype;
      const std::string acc = "acc" + std::to_string(out), part = "part" + std::to_string(out);
      s.allocate(acc, info.acc, W, MemoryScope::Local);
      s.allocate(part, info.acc, W, MemoryScope::Local);
      s.add(lanes(make_store(acc, var("l"), reduce_identity(info.op, info.acc))));
      // The innermost reduced dim in blocks of kBlock; the outer reduced dims around it.
      std::vector<Expr> red(R);
      for (size_t d = 0; d + 1 < R; ++d) red[d] = var("r" + std::to_string(d) + "i");
      red[R - 1] = var("j");
      gv.red_idx = red;
      StmtList body;
      gv.begin_body(&body);
      const Expr x = cast(info.acc, cast(out_t, gv.value(in)));
      body.add(make_store(part, var("l"), reduce_combine(info.op, load(info.acc, part, var("l")), x)));
      const Expr inner = sig.reduced_size(R - 1);
      StmtList block;
      block.let("j0", var("cb") * make_int(kBlock));
      block.add(lanes(make_store(part, var("l"), reduce_identity(info.op, info.acc))));
      block.add(
          make_for("j", var("j0"), min(make_int(kBlock), inner - var("j0")), ForKind::Serial, lanes(body.build())));
      block.add(lanes(make_store(
          acc, var("l"), reduce_combine(info.op, load(info.acc, acc, var("l")), load(info.acc, part, var("l"))))));
      Stmt loops = make_for("cb", make_int(0), (inner + make_int(kBlock - 1)) / make_int(kBlock), ForKind::Serial,
                            block.build());
      for (size_t d = R - 1; d-- > 0;)
        loops = make_for("r" + std::to_string(d) + "i", make_int(0), sig.reduced_size(d), ForKind::Serial, loops);
      s.add(loops);
      const std::string row = "row" + std::to_string(out);
      const DType ct = compute_dtype(out_t);
      s.allocate(row, ct, W, MemoryScope::Local);
      s.add(lanes(make_store(row, var("l"), finish_reduction(info, load(info.acc, acc, var("l")), sig, out_t))));
      gv.bind_row(out, load(ct, row, var("l")));
    }
    StmtList stores;
    gv.begin_body(&stores);
    for (const KernelBuffer& b : ki.buffers)
      if (b.is_output) stores.add(make_store(b.name, gv.index(b), gv.stored_value(b.value)));
    s.add(lanes(stores.build()));
    return s.build();
  };
  const Stmt full = tile_body(true);
  const Stmt last = tile_body(false);
  tile.add(make_if(var("nl") == make_int(W), full, last));

  Expr outer = make_int(1);
  for (size_t d = 0; d + 1 < K; ++d) outer = d == 0 ? sig.kept_size(d) : outer * sig.kept_size(d);
  StmtList top;
  top.let("ntile", (sig.kept_size(K - 1) + make_int(W - 1)) / make_int(W));
  top.add(make_for("t", make_int(0), outer * var("ntile"), ForKind::Parallel, tile.build()));
  return top.build();
}

}  // namespace flow::sched
