// Note: the reduction / normalization scheduler ("persistent rows"). A reduction group iterates a
// domain split into rows (kept dims) and a row (reduced dims). One row is handled by one CPU task
// or one GPU block, which runs every reduction of the group over the row in turn (each reading the
// row again, while it is hot in cache), binds the per-row results, computes per-row ops once, and
// then writes the full-domain outputs in a last pass. So softmax, log_softmax and layer norm are
// one kernel each. CPU reductions keep `cpu_vector_width` partial accumulators per row so the
// inner loop is SIMD; GPU reductions use a strided loop per thread and a block reduction.
// A CPU row is one task unless there are too few rows to fill the cores: then each pass over a long
// row runs as parallel chunks whose partial results are combined in chunk order, so the result does
// not depend on the thread count.
#include <algorithm>
#include <cstdlib>
#include <set>
#include <stdexcept>

#include "dsl/op_table.h"
#include "scheduler/arg_scan_lowering.h"
#include "scheduler/column_reduction.h"
#include "scheduler/cpu_tasks.h"
#include "scheduler/lowering.h"
#include "scheduler/reduction_parts.h"
#include "scheduler/scheduler.h"

namespace flow::sched {

using namespace flow::dsl;

namespace {

bool gpu_column_reductions_on() {
  const char* v = std::getenv("FLOW_GPU_COLUMN_REDUCTION");
  return !v || std::string(v) != "0";
}

// Softmax's exp(x - max) feeds both the last reduction (the sum) and the output (the division):
// rather than compute it again in the final pass, the last reduction's pass stores it into the
// output buffer and the final pass reads it back from there (the row is still in L1), as torch's
// and oneDNN's softmax kernels do. `StoredInput` names the value and the output buffer that holds
// it. Applies when that value is computed in the kernel (not a plain load), an output of the full
// domain with the same storage dtype exists (so the round trip is exact: values are already
// rounded to their storage dtype), and that output's expression uses the value.
struct StoredInput {
  int value = -1;
  const KernelBuffer* buffer = nullptr;
};

// Whether value v is computed by a node of the kernel's group.
bool computed_in_group(const KernelInstance& ki, int v) {
  const Graph& g = *ki.graph;
  const auto& nodes = ki.group->nodes;
  return g.value(v).kind == ValueKind::OpResult &&
         std::find(nodes.begin(), nodes.end(), g.value(v).producer) != nodes.end();
}

bool uses_value(const KernelInstance& ki, const GroupValues& gv, int from, int target) {
  const Graph& g = *ki.graph;
  std::vector<int> stack{from};
  std::set<int> seen;
  while (!stack.empty()) {
    const int v = stack.back();
    stack.pop_back();
    if (v == target) return true;
    if (!seen.insert(v).second || gv.is_row_value(v) || !computed_in_group(ki, v)) continue;
    for (int in : g.node(g.value(v).producer).inputs) stack.push_back(in);
  }
  return false;
}

StoredInput last_reduction_input_to_store(const KernelInstance& ki, const GroupValues& gv) {
  const Graph& g = *ki.graph;
  int last = -1;
  for (int n : ki.group->nodes)
    if (is_reduction_node(g, n)) last = n;
  if (last < 0 || lookup_op(g.node(last).op).reduce->arg) return {};
  const int in = g.node(last).inputs.at(0);
  if (gv.is_row_value(in) || !computed_in_group(ki, in)) return {};
  for (const KernelBuffer& b : ki.buffers) {
    if (!b.is_output || b.dtype != g.value(in).type.dtype || g.value(b.value).type.shape != ki.group->domain) continue;
    if (uses_value(ki, gv, b.value, in)) return {in, &b};
  }
  return {};
}

// CPU row splits (ReductionParams::cpu_row_splits): a row of at least 2 * kSplitChunkMin elements
// is split when there are fewer than kSplitRowsBelow rows, into chunks of at least kSplitChunkMin
// elements (64 KiB of float32: the work of a task outweighs its dispatch).
constexpr int64_t kSplitRowsBelow = 32;
constexpr int64_t kSplitChunkMin = 16384;
constexpr int kMaxRowSplits = 64;

// Row splits fit the row form's kernels with one (coalesced) reduced dim and no value-and-index
// reduction.
bool row_splits_fit(const KernelInstance& ki) {
  if (ki.reduced.size() != 1 || is_scan_group(ki) || column_reduction_fits(ki)) return false;
  const Graph& g = *ki.graph;
  for (int n : ki.group->nodes)
    if (is_reduction_node(g, n) && lookup_op(g.node(n).op).reduce->arg) return false;
  return true;
}

bool few_long_rows(const KernelInstance& ki) {
  return ki.rows() < kSplitRowsBelow && ki.row_size() >= 2 * kSplitChunkMin;
}

// The SIMD steps of the innermost reduced dim a loop nest covers: [begin, begin + count), and the
// rest of the row after the last full step when `tail` (undefined: always) holds.
struct StepRange {
  Expr begin, count, tail;
};

class ReductionScheduler final : public Scheduler {
 public:
  const char* name() const override { return "reduction"; }

  bool can_schedule(const KernelInstance& ki, Target) const override { return ki.group->kind == GroupKind::Reduction; }

  Params heuristics(const KernelInstance& ki, Target t) const override {
    ReductionParams p;
    // Two 256-bit registers of partial accumulators per step: two independent chains hide the
    // add/max latency (softmax over rows of 128-4096: 1.1-1.2x over one). Not size-dependent, so
    // one eager kernel serves every row length: short rows run the one-register remainder loop.
    p.cpu_vector_width = static_cast<int>(register_lanes(ki)) * 2;
    const int64_t r = ki.row_size();
    // The block size follows the row length. CPU kernels keep the default: the params are part of
    // the cache key, and EfficientNet-B0's means compiled four identical CPU kernels, one per block
    // size the CPU never uses.
    if (t == Target::CPU) {
      // A few long rows are split. (Eager plans are per shape too, so an eager call of other sizes
      // gets its own params, and the kernel of the form they take.)
      if (row_splits_fit(ki) && few_long_rows(ki)) p.cpu_row_splits = kMaxRowSplits;
      return p;
    }
    // Rows strided in memory with adjacent rows contiguous (scheduler/column_reduction.h): a warp per
    // 32 adjacent rows when a warp's worth of them is contiguous and there are rows for a few blocks
    // per SM of a large GPU (256 blocks); each row split over 8 threads, 16 for long rows. Fewer rows
    // keep a block per row, which computes the same values: with so few blocks the column form would
    // leave SMs idle, as no schedule here splits a row across blocks (a few long rows were split into
    // two reductions before fusion: scheduler/split_reduction.h). FLOW_GPU_COLUMN_REDUCTION=0 keeps
    // the row form (to compare the two).
    if (column_reduction_fits(ki) && ki.kept.back() >= 32 && ki.rows() >= 256 * 32 && gpu_column_reductions_on()) {
      ReductionParams column = p;
      column.gpu_block_x = 32;
      column.gpu_block_y = r >= 4096 ? 16 : 8;
      if (gpu_column_form(ki, column)) return column;  // (not when its partials overflow shared memory)
    }
    p.gpu_block_x = r >= 2048 ? 512 : r >= 512 ? 256 : r >= 128 ? 128 : 64;
    p.gpu_block_y = 1;
    return p;
  }

  ScheduledKernel lower(const KernelInstance& ki, const Params& params, Target t) const override {
    const auto* p = std::get_if<ReductionParams>(&params);
    if (!p) throw std::invalid_argument("reduction scheduler needs ReductionParams");
    ScheduledKernel sk;
    sk.params = *p;
    sk.scheduler = name();
    KernelSignature sig(ki);
    sk.func.name = kernel_name(ki, "reduction");
    sk.func.target = t;
    sk.func.params = sig.params();
    sk.args = sig.args();
    if (is_scan_group(ki)) {  // cumsum/cumprod: scheduler/arg_scan_lowering.cpp
      sk.func.body = lower_scan(ki, sig, *p, t, sk.func);
      return sk;
    }
    if (t == Target::CPU) {
      sk.func.body = column_reduction_fits(ki) ? lower_column_reduction_cpu(ki, sig, *p) : lower_cpu(ki, sig, *p);
    } else if (gpu_column_form(ki, *p)) {
      sk.func.body = lower_column_reduction_gpu(ki, sig, *p, sk.func);
    } else {
      sk.func.body = lower_gpu(ki, sig, *p, sk.func);
    }
    return sk;
  }

 private:
  // Row scope shared by both targets: reductions in order (a pass of them at a time:
  // reduction_passes), row ops, row outputs, final pass. `reduce_pass(nodes, row)` appends the
  // accumulation of the pass's reductions and binds their results; `full_pass(row)` appends the
  // loops writing full-domain outputs.
  template <class ReducePass, class FullPass, class RowStore>
  static void emit_row(const KernelInstance& ki, GroupValues& gv, StmtList& row, ReducePass reduce_pass,
                       FullPass full_pass, RowStore row_store) {
    const Graph& g = *ki.graph;
    const std::vector<std::vector<int>> passes = reduction_passes(ki);
    size_t next = 0;
    for (int n : ki.group->nodes) {
      const int out = g.node(n).outputs.at(0);
      if (is_reduction_node(g, n)) {
        if (next < passes.size() && passes[next].front() == n) reduce_pass(passes[next++], row);
      } else if (gv.is_row_value(out)) {
        gv.begin_body(&row);
        const Expr e = gv.compute_node(n);
        const std::string name = "v" + std::to_string(out);
        row.let(name, e);
        gv.bind_row(out, var(name, e.type()));
      }
    }
    // Row-level outputs, stored once per row.
    for (const auto& b : ki.buffers)
      if (b.is_output && gv.is_row_value(b.value)) row_store(b);
    bool any_full = false;
    for (const auto& b : ki.buffers) any_full = any_full || (b.is_output && !gv.is_row_value(b.value));
    if (any_full) full_pass(row);
  }

  // CPU: rows in parallel tasks; or, for a few long rows (cpu_row_splits > 1), rows one after the
  // other with each row's passes split into at most cpu_row_splits parallel chunks (correct for any
  // sizes: a short row is one chunk).
  static Stmt lower_cpu(const KernelInstance& ki, const KernelSignature& sig, const ReductionParams& p) {
    return cpu_row_form(ki, sig, p, row_splits_fit(ki) ? std::max(1, p.cpu_row_splits) : 1);
  }

  static Stmt cpu_row_form(const KernelInstance& ki, const KernelSignature& sig, const ReductionParams& p,
                           int64_t splits) {
    const Graph& g = *ki.graph;
    const size_t K = ki.kept.size();
    const size_t R = ki.reduced.size();
    const int64_t W = std::max(1, p.cpu_vector_width);
    GroupValues gv(ki, sig);
    StmtList row;
    const std::vector<Expr> kept_idx = unravel(row, var("row"), kept_sizes(sig, K), "i");
    gv.kept_idx = kept_idx;
    const StoredInput stored = last_reduction_input_to_store(ki, gv);
    const Expr inner = sig.reduced_size(R - 1);
    const Expr steps = inner / make_int(W);  // full SIMD steps of the innermost reduced dim
    // A split row: "nchunk" chunks (at most `splits`, of at least kSplitChunkMin elements); chunk
    // "ch" covers steps [ch * chunk, ...), and the last one also the rest of the row.
    if (splits > 1) {
      row.let("nchunk", max(make_int(1), min(make_int(splits), inner / make_int(kSplitChunkMin))));
      row.let("chunk", (steps + var("nchunk") - make_int(1)) / var("nchunk"));
    }
    const Expr chunk_begin = var("ch") * var("chunk");
    const StepRange chunk_range{chunk_begin, max(make_int(0), min(var("chunk"), steps - chunk_begin)),
                                var("ch") == var("nchunk") - make_int(1)};
    const StepRange whole_row{make_int(0), steps, Expr()};

    // Loops over the reduced dims; the innermost is split into SIMD steps of W lanes plus a tail, of
    // which `range` covers a part. With `blocking` (open defined), the steps run in blocks
    // (blocked_steps). `body(simd, in_block)` builds the statement at the current red_idx.
    auto row_loops = [&](const std::function<Stmt(bool simd, bool in_block)>& body, const StepRange& range,
                         const BlockStmts& blocking) {
      std::vector<Expr> red(R);
      for (size_t d = 0; d + 1 < R; ++d) red[d] = var("r" + std::to_string(d) + "i");
      red[R - 1] = var("c") * make_int(W) + var("l");
      gv.red_idx = red;
      const Stmt lanes =
          make_for("l", make_int(0), make_int(W), ForKind::Vectorized, body(true, blocking.open.defined()));
      std::vector<Stmt> loops{blocked_steps("sb", "c", range.begin, range.count, lanes, blocking)};
      // The rest of the row: one-register steps (into the first lanes), then scalar.
      std::vector<Stmt> rest;
      for (Stmt& s : simd_remainder(inner, W, register_lanes(ki), [&](Expr j, bool simd) {
             red[R - 1] = std::move(j);
             gv.red_idx = red;
             return body(simd, false);
           }))
        rest.push_back(std::move(s));
      loops.push_back(range.tail.defined() ? make_if(range.tail, make_block(rest)) : make_block(rest));
      Stmt s = make_block(loops);
      for (size_t d = R - 1; d-- > 0;)
        s = make_for("r" + std::to_string(d) + "i", make_int(0), sig.reduced_size(d), ForKind::Serial, s);
      return s;
    };
    // One pass over the row: serial, or its chunks in parallel.
    auto row_pass = [&](const std::function<Stmt(const StepRange&)>& pass) {
      if (splits == 1) return pass(whole_row);
      return make_for("ch", make_int(0), var("nchunk"), ForKind::Parallel, pass(chunk_range));
    };

    auto reduce_pass = [&](const std::vector<int>& pass, StmtList& scope) {
      if (lookup_op(g.node(pass.front()).op).reduce->arg) {  // value-and-index: arg_scan_lowering.cpp
        emit_arg_reduction_cpu(
            ki, sig, gv, pass.front(), W, kept_idx,
            [&](const std::function<Stmt(bool)>& body) {
              return row_loops([&](bool simd, bool) { return body(simd); }, whole_row, BlockStmts{});
            },
            scope);
        return;
      }
      const std::vector<PassReduction> rs = pass_reductions(g, pass);
      auto lanes = [&](Stmt s) { return make_for("l", make_int(0), make_int(W), ForKind::Vectorized, std::move(s)); };
      // Long sums add blocks of steps into per-lane partials first (reduction_parts.h).
      const BlockStmts lane_block = pass_blocks(rs, var("l"));
      const BlockStmts blocking =
          lane_block.open.defined() ? BlockStmts{lanes(lane_block.open), lanes(lane_block.close)} : BlockStmts{};
      // Accumulates the range's elements into each acc's lanes and then into acc[0].
      auto accumulate = [&](const StepRange& range) {
        StmtList s;
        allocate_accumulators(s, rs, W);
        for (const PassReduction& r : rs)
          s.add(lanes(make_store(r.acc, var("l"), reduce_identity(r.info.op, r.info.acc))));
        s.add(row_loops(
            [&](bool simd, bool in_block) {
              StmtList body;
              gv.kept_idx = kept_idx;
              gv.begin_body(&body);
              const Expr lane = simd ? var("l") : make_int(0);
              for (const PassReduction& r : rs) {
                if (r.in == stored.value)
                  body.add(make_store(stored.buffer->name, gv.index(*stored.buffer), gv.stored_value(r.in)));
                body.add(fold_step(gv, r, in_block && r.blocked ? r.part : r.acc, lane));
              }
              return body.build();
            },
            range, blocking));
        for (const PassReduction& r : rs)
          s.add(make_for("l", make_int(1), make_int(W - 1), ForKind::Unrolled,
                         make_store(r.acc, make_int(0),
                                    reduce_combine(r.info.op, load(r.info.acc, r.acc, make_int(0)),
                                                   load(r.info.acc, r.acc, var("l"))))));
        return s;
      };
      std::vector<Expr> totals;
      if (splits == 1) {
        scope.append(accumulate(whole_row));
        for (const PassReduction& r : rs) totals.push_back(load(r.info.acc, r.acc, make_int(0)));
      } else {  // each chunk's totals into parts[ch], then the chunks' totals in order
        StmtList chunk = accumulate(chunk_range);
        for (const PassReduction& r : rs) {
          const std::string parts = "parts" + std::to_string(r.out);
          scope.allocate(parts, r.info.acc, splits, MemoryScope::Local);
          chunk.add(make_store(parts, var("ch"), load(r.info.acc, r.acc, make_int(0))));
        }
        scope.add(make_for("ch", make_int(0), var("nchunk"), ForKind::Parallel, chunk.build()));
        for (const PassReduction& r : rs) {
          const std::string parts = "parts" + std::to_string(r.out);
          scope.add(make_for("ch", make_int(1), var("nchunk") - make_int(1), ForKind::Serial,
                             make_store(parts, make_int(0),
                                        reduce_combine(r.info.op, load(r.info.acc, parts, make_int(0)),
                                                       load(r.info.acc, parts, var("ch"))))));
          totals.push_back(load(r.info.acc, parts, make_int(0)));
        }
      }
      for (size_t i = 0; i < rs.size(); ++i) bind_result(scope, gv, sig, rs[i], totals[i]);
    };

    auto row_store = [&](const KernelBuffer& b) {
      gv.kept_idx = kept_idx;
      gv.begin_body(&row);
      row.add(make_store(b.name, gv.index(b), gv.stored_value(b.value)));
    };

    auto full_pass = [&](StmtList& scope) {
      scope.add(row_pass([&](const StepRange& range) {
        return row_loops(
            [&](bool, bool) {
              StmtList body;
              gv.kept_idx = kept_idx;
              gv.begin_body(&body);
              if (stored.buffer) {  // loaded into a Let before any store of this body overwrites it
                const DType st = stored.buffer->dtype;
                const std::string name = "v" + std::to_string(stored.value);
                body.let(name, cast(compute_dtype(st), load(st, stored.buffer->name, gv.index(*stored.buffer))));
                gv.bind_body(stored.value, var(name, compute_dtype(st)));
              }
              for (const auto& b : ki.buffers)
                if (b.is_output && !gv.is_row_value(b.value))
                  body.add(make_store(b.name, gv.index(b), gv.stored_value(b.value)));
              return body.build();
            },
            range, BlockStmts{});
      }));
    };

    emit_row(ki, gv, row, reduce_pass, full_pass, row_store);
    if (splits > 1) return make_for("row", make_int(0), sig.kept_total(), ForKind::Serial, row.build());
    // Tasks of at least cpu_rows_per_task consecutive rows, and of enough elements that small
    // reductions run serially (cpu_tasks.h).
    return cpu_parallel_items("t", "row", sig.kept_total(), sig.reduced_total(), p.cpu_rows_per_task, row.build());
  }

  static Stmt lower_gpu(const KernelInstance& ki, const KernelSignature& sig, const ReductionParams& p,
                        LoweredFunc& f) {
    const Graph& g = *ki.graph;
    const size_t K = ki.kept.size();
    const size_t R = ki.reduced.size();
    const int64_t T = std::max(32, p.gpu_block_x);
    f.grid[0] = sig.kept_total();
    f.grid[1] = make_int(1);
    f.grid[2] = make_int(1);
    f.block[0] = make_int(T);
    f.block[1] = make_int(1);
    f.block[2] = make_int(1);

    GroupValues gv(ki, sig);
    StmtList row;
    const std::vector<Expr> kept_idx = unravel(row, var("row"), kept_sizes(sig, K), "i");
    const Expr total = sig.reduced_total();
    // Thread-strided loop over the row: element j = c * T + tx, unravelled over the reduced dims;
    // with `blocking` (open defined), the steps c run in blocks (blocked_steps).
    auto strided_blocks = [&](const std::function<void(StmtList&)>& body_fn, const BlockStmts& blocking) {
      StmtList body;
      const std::vector<Expr> red = unravel(body, var("j"), reduced_sizes(sig, R), "rj");
      gv.kept_idx = kept_idx;
      gv.red_idx = red;
      gv.begin_body(&body);
      body_fn(body);
      StmtList loop;
      loop.let("j", var("c") * make_int(T) + var("tx"));
      loop.add(make_if(var("j") < total, body.build()));
      return blocked_steps("sb", "c", make_int(0), (total + make_int(T - 1)) / make_int(T), loop.build(), blocking);
    };
    auto strided = [&](const std::function<void(StmtList&)>& body_fn) { return strided_blocks(body_fn, BlockStmts{}); };

    auto reduce_pass = [&](const std::vector<int>& pass, StmtList& scope) {
      if (lookup_op(g.node(pass.front()).op).reduce->arg) {  // value-and-index: arg_scan_lowering.cpp
        emit_arg_reduction_gpu(ki, sig, gv, pass.front(), T, strided, scope);
        return;
      }
      const std::vector<PassReduction> rs = pass_reductions(g, pass);
      // A thread's long sums add blocks of steps into partials first (reduction_parts.h).
      allocate_accumulators(scope, rs, 1);
      for (const PassReduction& r : rs)
        scope.add(make_store(r.acc, make_int(0), reduce_identity(r.info.op, r.info.acc)));
      scope.add(strided_blocks(
          [&](StmtList& body) {
            for (const PassReduction& r : rs) body.add(fold_step(gv, r, r.blocked ? r.part : r.acc, make_int(0)));
          },
          pass_blocks(rs, make_int(0))));
      for (const PassReduction& r : rs) {
        scope.add(make_block_reduce(r.info.op, r.acc, r.info.acc));
        bind_result(scope, gv, sig, r, load(r.info.acc, r.acc, make_int(0)));
      }
    };

    auto row_store = [&](const KernelBuffer& b) {
      gv.kept_idx = kept_idx;
      StmtList body;
      gv.begin_body(&body);
      body.add(make_store(b.name, gv.index(b), gv.stored_value(b.value)));
      row.add(make_if(var("tx") == make_int(0), body.build()));
    };

    auto full_pass = [&](StmtList& scope) {
      scope.add(strided([&](StmtList& body) {
        for (const auto& b : ki.buffers)
          if (b.is_output && !gv.is_row_value(b.value))
            body.add(make_store(b.name, gv.index(b), gv.stored_value(b.value)));
      }));
    };

    emit_row(ki, gv, row, reduce_pass, full_pass, row_store);
    const Stmt threads = make_for("tx", make_int(0), make_int(T), ForKind::GPUThread, row.build(), 0);
    return make_for("row", make_int(0), f.grid[0], ForKind::GPUBlock, threads, 0);
  }
};

}  // namespace

const Scheduler& reduction_scheduler() {
  static const ReductionScheduler s;
  return s;
}

}  // namespace flow::sched
