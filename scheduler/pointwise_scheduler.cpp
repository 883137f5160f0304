// Note: the pointwise scheduler. CPU: the iteration space is cut into tiles of the innermost dim;
// tiles are spread over the thread pool and each tile runs explicit SIMD steps (cpu_vector_width
// lanes x cpu_unroll) plus a scalar tail, so vectorization does not hinge on the auto-vectorizer.
// GPU: rank-1 contiguous kernels give each thread `gpu_elements_per_thread` elements as
// 16-byte vector accesses (coalesced across the warp); anything else indexes element by element
// from a linear thread index.
#include <algorithm>
#include <functional>
#include <limits>
#include <numeric>
#include <stdexcept>

#include "dsl/canonical_names.h"
#include "dsl/ir_visitor.h"
#include "dsl/op_table.h"
#include "scheduler/cpu_tasks.h"
#include "scheduler/lowering.h"
#include "scheduler/scheduler.h"
#include "scheduler/unswitch.h"

namespace flow::sched {

using namespace flow::dsl;

namespace {

// Stores of every group output at the current indices (computing what they need).
void emit_outputs(const KernelInstance& ki, GroupValues& gv, StmtList& body) {
  for (const auto& b : ki.buffers)
    if (b.is_output) body.add(make_store(b.name, gv.index(b), gv.stored_value(b.value)));
}

class PointwiseScheduler final : public Scheduler {
 public:
  const char* name() const override { return "pointwise"; }

  bool can_schedule(const KernelInstance& ki, Target) const override { return ki.group->kind == GroupKind::Pointwise; }

  Params heuristics(const KernelInstance& ki, Target t) const override {
    PointwiseParams p;
    int widest = 1;
    for (const auto& b : ki.buffers) widest = std::max(widest, dtype_size(b.dtype));
    // Four 256-bit registers per SIMD step: independent registers hide the latency of exp/erf/tanh
    // chains and the loop overhead (exp 1.36x, gelu 1.37x, a 6-op chain 1.58x faster than one
    // register per step at 1.5M-16M floats; bandwidth-bound adds unchanged; in-process A/B, 2-core
    // AVX-512 Xeon). Not size-dependent, so one eager kernel serves every size: short innermost dims
    // run the one-register remainder loop.
    p.cpu_vector_width = static_cast<int>(register_lanes(ki)) * 4;
    p.gpu_vector_width = std::max(1, 16 / widest);  // 16-byte accesses
    p.gpu_elements_per_thread = std::max(4, p.gpu_vector_width);
    (void)t;
    return p;
  }

  ScheduledKernel lower(const KernelInstance& ki, const Params& params, Target t) const override {
    const auto* p = std::get_if<PointwiseParams>(&params);
    if (!p) throw std::invalid_argument("pointwise scheduler needs PointwiseParams");
    ScheduledKernel sk;
    sk.params = *p;
    sk.scheduler = name();
    KernelSignature sig(ki);
    sk.func.name = kernel_name(ki, "pointwise");
    sk.func.target = t;
    sk.func.params = sig.params();
    sk.args = sig.args();
    sk.func.body = t == Target::CPU ? lower_cpu(ki, sig, *p) : lower_gpu(ki, sig, *p, sk.func);
    return sk;
  }

 private:
  static Stmt lower_cpu(const KernelInstance& ki, const KernelSignature& sig, const PointwiseParams& p) {
    const size_t K = ki.kept.size();
    int64_t W = std::max(1, p.cpu_vector_width);
    const int64_t U = std::max(1, p.cpu_unroll);
    // An innermost dim shorter than a SIMD step (NHWC with 3 channels next to a per-channel operand
    // or an index_select along W: dims that do not coalesce) would never vectorize and would pay
    // the per-row index arithmetic every few elements. Then the last two dims run as one flat loop,
    // the short size c compiled in as a constant so the split f / c, f % c is a multiply and shift.
    // Its SIMD steps are widened to a multiple of c (at most 64 lanes), and tiles are whole steps,
    // so every step starts at channel 0: lane l is channel l % c in every step, and a per-channel
    // operand's lanes are the same constant gather each step (hoisted out of the loop). Only for
    // shape-specialized kernels (compiled graphs, groups with an injective op): any other eager
    // kernel stays one kernel for every size of its signature.
    const bool flat = ki.shape_specialized && K >= 2 && ki.kept[K - 1] > 1 && ki.kept[K - 1] < W;
    const int64_t c_size = flat ? ki.kept[K - 1] : 1;
    if (flat) {
      const int64_t period = std::lcm(c_size, register_lanes(ki));
      if (period <= 64) W = period * std::max<int64_t>(1, W / period);
    }
    const bool aligned_steps = flat && W % c_size == 0;
    const int64_t step = W * U;
    const int64_t tile = std::max<int64_t>(step, p.cpu_tile / step * step);
    const size_t outer_dims = flat ? K - 2 : K - 1;
    const Expr short_size = make_int(c_size);
    const Expr inner = flat ? sig.kept_size(K - 2) * short_size : sig.kept_size(K - 1);
    const Expr ntile = (inner + make_int(tile - 1)) / make_int(tile);
    Expr outer = make_int(1);
    for (size_t d = 0; d < outer_dims; ++d) outer = d == 0 ? sig.kept_size(d) : outer * sig.kept_size(d);

    GroupValues gv(ki, sig);
    StmtList task;
    task.let("ti", var("t") % var("ntile"));
    std::vector<Expr> outer_idx;
    if (outer_dims > 0) outer_idx = unravel(task, var("t") / var("ntile"), kept_sizes(sig, outer_dims), "i");
    task.let("j0", var("ti") * make_int(tile));
    task.let("jn", min(inner - var("j0"), make_int(tile)));

    // step_start, lane: a SIMD step that starts at a multiple of c (j = step_start + lane).
    auto body_at = [&](Expr j, Expr step_start = Expr(), Expr lane = Expr()) {
      StmtList body;
      gv.kept_idx = outer_idx;
      if (flat) {
        body.let("f", var("j0") + j);
        gv.flat_inner = var("f");
        if (lane.defined()) {
          body.let("f0", var("j0") + step_start);
          gv.kept_idx.push_back(var("f0") / short_size + lane / short_size);
          gv.kept_idx.push_back(lane % short_size);
        } else {
          gv.kept_idx.push_back(var("f") / short_size);
          gv.kept_idx.push_back(var("f") % short_size);
        }
      } else {
        gv.kept_idx.push_back(var("j0") + j);
      }
      gv.begin_body(&body);
      emit_outputs(ki, gv, body);
      return body.build();
    };
    // SIMD steps over [from, from + n) of the tile: for c: for u unrolled: for l vectorized, then
    // the remainder. `body` gives the element at tile offset j.
    auto simd_loops = [&](StmtList& out, const Expr& from, const Expr& n, const std::function<Stmt(Expr)>& body) {
      const Expr offset = from + var("c") * make_int(step) + var("u") * make_int(W);
      Stmt simd = make_for("l", make_int(0), make_int(W), ForKind::Vectorized,
                           aligned_steps ? body_at(offset + var("l"), offset, var("l")) : body(offset + var("l")));
      Stmt unrolled =
          U > 1 ? make_for("u", make_int(0), make_int(U), ForKind::Unrolled, simd) : make_let("u", make_int(0), simd);
      out.add(make_for("c", make_int(0), n / make_int(step), ForKind::Serial, unrolled));
      for (const Stmt& s : simd_remainder(n, step, register_lanes(ki), [&](Expr j, bool) { return body(from + j); }))
        out.add(s);
    };
    StmtList loops;
    // A cat along the innermost dim chooses its input by the index (NHWC cat along channels): the
    // tile is split at the inputs' bounds and each piece reads its one input (scheduler/unswitch.h).
    // Only cat makes such choices; other groups skip lowering the probe body.
    const bool has_cat = std::any_of(ki.group->nodes.begin(), ki.group->nodes.end(),
                                     [&](int n) { return ki.graph->node(n).op == "cat"; });
    const Expr jx = var("jx");
    const Stmt probe = flat || !has_cat ? Stmt() : body_at(jx);
    const std::vector<int64_t> bounds =
        probe.defined() ? read_choice_bounds(probe, var("j0") + jx) : std::vector<int64_t>{};
    if (!bounds.empty() && bounds.size() < 64) {
      // One tile per row of a known size (the usual case: a row of channels) makes every piece's
      // range a constant, so its loops have constant trip counts and the empty ones vanish.
      const bool one_tile = ki.shape_specialized && ki.kept[K - 1] <= tile;
      for (size_t k = 0; k <= bounds.size(); ++k) {
        const int64_t lo = k == 0 ? 0 : bounds[k - 1];
        const int64_t hi = k == bounds.size() ? std::numeric_limits<int64_t>::max() : bounds[k];
        const Stmt piece = resolve_read_choices(probe, var("j0") + jx, lo, hi);
        auto element = [&](Expr j) { return substitute(piece, "jx", j); };
        if (one_tile) {
          const int64_t n = std::min(hi, ki.kept[K - 1]) - lo;
          if (n > 0) simd_loops(loops, make_int(lo), make_int(n), element);
          continue;
        }
        StmtList seg;
        seg.let("slo", max(var("j0"), make_int(lo)) - var("j0"));  // the piece's part of the tile
        seg.let("sn", max(make_int(0),
                          (k == bounds.size() ? var("jn") : min(var("jn"), make_int(hi) - var("j0"))) - var("slo")));
        simd_loops(seg, var("slo"), var("sn"), element);
        loops.add(seg.build());
      }
    } else {
      simd_loops(loops, make_int(0), var("jn"), body_at);
    }
    // A choice between inputs fixed for the whole task (cat along an outer dim) is made once per
    // task, not per element (scheduler/unswitch.h).
    task.add(unswitch_invariant_selects(loops.build()));
    // A parallel task takes several (outer index, tile) items when rows are short (cpu_tasks.h):
    // with a 32-wide innermost dim (a max pool's strided slices, which do not coalesce) one item
    // per task spent more time dispatching than computing.
    StmtList top;
    top.let("ntile", ntile);
    top.add(cpu_parallel_items("tt", "t", outer * var("ntile"), inner, 1, task.build()));
    return top.build();
  }

  static bool rank1_vectorizable(const KernelInstance& ki) {
    if (ki.kept.size() != 1) return false;
    for (const auto& b : ki.buffers)
      if (b.classes[0] == StrideClass::Dynamic || b.classes[0] == StrideClass::Small) return false;
    return true;
  }

  static Stmt lower_gpu(const KernelInstance& ki, const KernelSignature& sig, const PointwiseParams& p,
                        LoweredFunc& f) {
    const int64_t T = std::max(32, p.gpu_threads);
    const bool vec = rank1_vectorizable(ki) && p.gpu_vector_width > 1;
    const int64_t V = vec ? p.gpu_vector_width : 1;
    const int64_t U = std::max<int64_t>(1, p.gpu_elements_per_thread / V);
    const int64_t per_block = T * U * V;
    const Expr total = sig.kept_total();
    f.grid[0] = (total + make_int(per_block - 1)) / make_int(per_block);
    f.grid[1] = make_int(1);
    f.grid[2] = make_int(1);
    f.block[0] = make_int(T);
    f.block[1] = make_int(1);
    f.block[2] = make_int(1);

    GroupValues gv(ki, sig);
    auto body_at_linear = [&](Expr linear) {
      StmtList body;
      gv.kept_idx =
          ki.kept.size() == 1 ? std::vector<Expr>{linear} : unravel(body, linear, kept_sizes(sig, ki.kept.size()), "i");
      gv.begin_body(&body);
      emit_outputs(ki, gv, body);
      return body.build();
    };

    StmtList thread;
    // Vector chunk u of this thread: consecutive threads touch consecutive 16-byte chunks.
    thread.let("base", (var("bx") * make_int(T * U) + var("u") * make_int(T) + var("tx")) * make_int(V));
    Stmt step;
    if (V > 1) {
      const Stmt full =
          make_for("v", make_int(0), make_int(V), ForKind::Vectorized, body_at_linear(var("base") + var("v")));
      const Stmt tail = make_for("v", make_int(0), make_int(V), ForKind::Unrolled,
                                 make_if(var("base") + var("v") < total, body_at_linear(var("base") + var("v"))));
      thread.add(make_if(var("base") + make_int(V) <= total, full, tail));
    } else {
      thread.add(make_if(var("base") < total, body_at_linear(var("base"))));
    }
    step = thread.build();
    Stmt per_thread =
        U > 1 ? make_for("u", make_int(0), make_int(U), ForKind::Unrolled, step) : make_let("u", make_int(0), step);
    Stmt threads = make_for("tx", make_int(0), make_int(T), ForKind::GPUThread, per_thread, 0);
    return make_for("bx", make_int(0), f.grid[0], ForKind::GPUBlock, threads, 0);
  }
};

}  // namespace

const Scheduler& pointwise_scheduler() {
  static const PointwiseScheduler s;
  return s;
}

ScheduledKernel Scheduler::schedule(const KernelInstance& ki, const Params& p, Target t) const {
  ScheduledKernel sk = lower(ki, p, t);
  sk.func = dsl::canonical_value_names(sk.func);
  return sk;
}

const Scheduler& scheduler_for(const KernelInstance& ki, Target t) {
  if (pointwise_scheduler().can_schedule(ki, t)) return pointwise_scheduler();
  if (reduction_scheduler().can_schedule(ki, t)) return reduction_scheduler();
  throw std::logic_error(std::string("no scheduler for a ") + group_kind_name(ki.group->kind) + " group");
}

}  // namespace flow::sched
