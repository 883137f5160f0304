#include "scheduler/column_reduction.h"

#include <algorithm>

#include "dsl/op_table.h"
#include "scheduler/cpu_tasks.h"
#include "scheduler/reduction_parts.h"

namespace flow::sched {

using namespace flow::dsl;

namespace {

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

namespace {

// The tiles of width w (a constant): tile t covers rows [base, base + w) of the innermost kept dim,
// base = min(t * w, extent - w), so the last tile overlaps its neighbour rather than running short
// and every lane loop is a full w-lane vector. The rows two tiles share are computed and stored
// by both, with the same bits: a lane's arithmetic does not depend on its position, and no kernel
// output aliases one of its inputs. (Storing only the owned lanes took a runtime-bounded loop
// that LLVM vectorized again, with its checks and epilogue, for ~15 ms of compile per width.)
Stmt lower_tiles(const KernelInstance& ki, const KernelSignature& sig, int64_t w) {
  const size_t K = ki.kept.size(), R = ki.reduced.size();
  GroupValues gv(ki, sig);

  StmtList tile;
  std::vector<Expr> kept_idx;
  if (K > 1) kept_idx = unravel(tile, var("t") / var("ntile"), kept_sizes(sig, K - 1), "i");
  tile.let("base", min(var("t") % var("ntile") * make_int(w), sig.kept_size(K - 1) - make_int(w)));
  kept_idx.push_back(var("base") + var("l"));
  // Row values live in per-lane local arrays between the lane loops.
  auto lanes = [&](const Stmt& body) { return make_for("l", make_int(0), make_int(w), ForKind::Vectorized, body); };
  gv.kept_idx = kept_idx;
  const Graph& g = *ki.graph;
  for (const std::vector<int>& pass : reduction_passes(ki)) {
    const std::vector<PassReduction> rs = pass_reductions(g, pass);
    allocate_accumulators(tile, rs, w);
    for (const PassReduction& r : rs)
      tile.add(lanes(make_store(r.acc, var("l"), reduce_identity(r.info.op, r.info.acc))));
    // The innermost reduced dim in blocks (reduction_parts.h); the outer reduced dims around it.
    std::vector<Expr> red(R);
    for (size_t d = 0; d + 1 < R; ++d) red[d] = var("r" + std::to_string(d) + "i");
    red[R - 1] = var("j");
    gv.red_idx = red;
    StmtList body;
    gv.begin_body(&body);
    for (const PassReduction& r : rs) body.add(fold_step(gv, r, r.blocked ? r.part : r.acc, var("l")));
    const Expr inner = sig.reduced_size(R - 1);
    const BlockStmts blk = pass_blocks(rs, var("l"));
    Stmt loops = blocked_steps("cb", "j", make_int(0), inner, lanes(body.build()),
                               blk.open.defined() ? BlockStmts{lanes(blk.open), lanes(blk.close)} : BlockStmts{});
    for (size_t d = R - 1; d-- > 0;)
      loops = make_for("r" + std::to_string(d) + "i", make_int(0), sig.reduced_size(d), ForKind::Serial, loops);
    tile.add(loops);
    for (const PassReduction& r : rs) {
      const std::string row = "row" + std::to_string(r.out);
      const DType ct = compute_dtype(r.out_t);
      tile.allocate(row, ct, w, MemoryScope::Local);
      tile.add(
          lanes(make_store(row, var("l"), finish_reduction(r.info, load(r.info.acc, r.acc, var("l")), sig, r.out_t))));
      gv.bind_row(r.out, load(ct, row, var("l")));
    }
  }
  StmtList stores;
  gv.begin_body(&stores);
  for (const KernelBuffer& b : ki.buffers)
    if (b.is_output) stores.add(make_store(b.name, gv.index(b), gv.stored_value(b.value)));
  tile.add(lanes(stores.build()));

  Expr outer = make_int(1);
  for (size_t d = 0; d + 1 < K; ++d) outer = d == 0 ? sig.kept_size(d) : outer * sig.kept_size(d);
  StmtList top;
  top.let("ntile", (sig.kept_size(K - 1) + make_int(w - 1)) / make_int(w));
  top.add(cpu_parallel_items("tt", "t", outer * var("ntile"), make_int(w) * sig.reduced_total(), 1, tile.build()));
  return top.build();
}

}  // namespace

int64_t column_shared_bytes(const KernelInstance& ki, int64_t block_x, int64_t block_y) {
  int64_t bytes = 0;
  for (const std::vector<int>& pass : reduction_passes(ki))
    for (const PassReduction& r : pass_reductions(*ki.graph, pass))
      bytes += block_x * block_y * dsl::dtype_size(r.info.acc);
  return bytes;
}

bool gpu_column_form(const KernelInstance& ki, const ReductionParams& p) {
  return p.gpu_block_y > 1 && column_reduction_fits(ki) &&
         column_shared_bytes(ki, p.gpu_block_x, p.gpu_block_y) <= kMaxStaticSharedBytes;
}

Stmt lower_column_reduction_gpu(const KernelInstance& ki, const KernelSignature& sig, const ReductionParams& p,
                                LoweredFunc& f) {
  const size_t K = ki.kept.size(), R = ki.reduced.size();
  const int64_t X = p.gpu_block_x, Y = p.gpu_block_y;
  Expr outer = make_int(1);
  for (size_t d = 0; d + 1 < K; ++d) outer = d == 0 ? sig.kept_size(d) : outer * sig.kept_size(d);
  const Expr inner = sig.kept_size(K - 1);
  const Expr ntile = (inner + make_int(X - 1)) / make_int(X);
  f.grid[0] = outer * ntile;
  f.grid[1] = make_int(1);
  f.grid[2] = make_int(1);
  f.block[0] = make_int(X);
  f.block[1] = make_int(Y);
  f.block[2] = make_int(1);

  GroupValues gv(ki, sig);
  StmtList body;  // one thread's: column `col` of the tile, elements j = ty, ty + Y, ... of its row
  std::vector<Expr> kept_idx;
  if (K > 1) kept_idx = unravel(body, var("blk") / ntile, kept_sizes(sig, K - 1), "i");
  body.let("col", var("blk") % ntile * make_int(X) + var("tx"));
  kept_idx.push_back(var("col"));
  const Expr live = var("col") < inner;
  const Expr total = sig.reduced_total();
  body.let("cnt", (total - var("ty") + make_int(Y - 1)) / make_int(Y));
  const Graph& g = *ki.graph;
  for (const std::vector<int>& pass : reduction_passes(ki)) {
    const std::vector<PassReduction> rs = pass_reductions(g, pass);
    allocate_accumulators(body, rs, 1);
    for (const PassReduction& r : rs) body.add(make_store(r.acc, make_int(0), reduce_identity(r.info.op, r.info.acc)));
    // The thread's elements in blocks (reduction_parts.h), as the CPU form's.
    // (Names here avoid the kernel parameters' k<d>, r<d> and c<value>.)
    StmtList elem;
    gv.kept_idx = kept_idx;
    gv.red_idx = unravel(elem, var("j"), reduced_sizes(sig, R), "rj");
    gv.begin_body(&elem);
    for (const PassReduction& r : rs) elem.add(fold_step(gv, r, r.blocked ? r.part : r.acc, make_int(0)));
    body.add(make_if(live, blocked_steps("cb", "m", make_int(0), var("cnt"),
                                         make_let("j", var("ty") + make_int(Y) * var("m"), elem.build()),
                                         pass_blocks(rs, make_int(0)))));
    for (const PassReduction& r : rs) {
      // The Y partials of each column through shared memory; every thread combines its column's, in
      // the same order, so a later reduction of the group reads the row value in every thread.
      const std::string shared = "cols" + std::to_string(r.out);
      body.allocate(shared, r.info.acc, X * Y, MemoryScope::Shared);
      body.add(make_store(shared, var("ty") * make_int(X) + var("tx"), load(r.info.acc, r.acc, make_int(0))));
      body.add(make_barrier());
      body.add(make_store(r.acc, make_int(0), load(r.info.acc, shared, var("tx"))));
      body.add(make_for("y", make_int(1), make_int(Y - 1), ForKind::Unrolled,
                        make_store(r.acc, make_int(0),
                                   reduce_combine(r.info.op, load(r.info.acc, r.acc, make_int(0)),
                                                  load(r.info.acc, shared, var("y") * make_int(X) + var("tx"))))));
      bind_result(body, gv, sig, r, load(r.info.acc, r.acc, make_int(0)));
    }
  }
  StmtList stores;
  gv.kept_idx = kept_idx;
  gv.begin_body(&stores);
  for (const KernelBuffer& b : ki.buffers)
    if (b.is_output) stores.add(make_store(b.name, gv.index(b), gv.stored_value(b.value)));
  body.add(make_if(live && var("ty") == make_int(0), stores.build()));
  const Stmt threads = make_for("ty", make_int(0), make_int(Y), ForKind::GPUThread,
                                make_for("tx", make_int(0), make_int(X), ForKind::GPUThread, body.build(), 0), 1);
  return make_for("blk", make_int(0), f.grid[0], ForKind::GPUBlock, threads, 0);
}

Stmt lower_column_reduction_cpu(const KernelInstance& ki, const KernelSignature& sig, const ReductionParams& p) {
  // The widest tile the innermost kept extent holds, chosen when the kernel runs (one kernel serves
  // every shape): W = p.cpu_vector_width, W / 4, ... down to 1. Each width is a copy of the body,
  // so the steps are 4x, not 2x: every width 16, 8, ..., 1 took a sum kernel's compile from 100 to
  // 176 ms and EfficientNet-B0's from 1.3 to 2.2 s, while a kept extent of 8 runs as fast on 4-wide
  // tiles as on 8-wide ones ([4M, 8].sum(0)) and one of 3 on 1-wide tiles within 1.5x of 2-wide.
  const int64_t W = std::max(1, p.cpu_vector_width);
  const Expr extent = sig.kept_size(ki.kept.size() - 1);
  std::vector<int64_t> widths{W};
  while (widths.back() > 1) widths.push_back(std::max<int64_t>(1, widths.back() / 4));
  Stmt body = lower_tiles(ki, sig, widths.back());
  for (size_t i = widths.size() - 1; i-- > 0;)
    body = make_if(extent >= make_int(widths[i]), lower_tiles(ki, sig, widths[i]), body);
  return body;
}

}  // namespace flow::sched
