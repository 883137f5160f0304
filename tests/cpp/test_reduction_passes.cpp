// Reductions of a group in passes over the row (scheduler/reduction_parts.h reduction_passes): a
// reduction shares the previous one's pass unless it reads that pass's results (directly, through
// full-domain ops or through row ops bound since). var's and layer_norm's sum(d) and sum(d * d) of
// the corrected two-pass moments (dsl/ops/moments.h) are one pass; softmax's sum reads its max and
// is not. The CPU row nest reads the row once per pass, and
// the compiled kernels of multi-reduction passes equal the graph interpreter (forms other than the
// CPU row form are checked by test_long_row_reductions, test_gpu_column_reduction, test_pipeline).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "dsl/graph_interpreter.h"
#include "dsl/interpreter.h"
#include "dsl/ir_visitor.h"
#include "jit/compile.h"
#include "scheduler/fusion.h"
#include "scheduler/reduction_parts.h"
#include "scheduler/scheduler.h"
#include "test_util.h"

namespace flow {
namespace {

using dsl::DType;

dsl::Attrs last_dim() {
  return {{"dims", std::vector<int64_t>{1}}, {"keepdim", true}};
}

// The pass sizes of the graph's only group, and the ops of each pass.
std::vector<std::vector<std::string>> passes_of(const dsl::Graph& g) {
  const sched::FusionPlan plan = sched::fuse(g);
  EXPECT_EQ(plan.groups.size(), 1u);
  const auto ki = sched::specialize(g, plan.groups.at(0), {}, true);
  std::vector<std::vector<std::string>> out;
  for (const auto& pass : sched::reduction_passes(ki)) {
    out.emplace_back();
    for (int n : pass) out.back().push_back(g.node(n).op);
  }
  return out;
}

using Ops = std::vector<std::vector<std::string>>;

TEST(ReductionPasses, IndependentReductionsShareAPass) {
  {  // var: mean; then sum(d) and sum(d * d) (the corrected two-pass moments)
    dsl::Graph g;
    const int x = g.add_input({{4, 100}, DType::Float32}, "x");
    g.mark_output(g.add("var", {x}, last_dim()));
    EXPECT_EQ(passes_of(g), (Ops{{"mean"}, {"mean", "sum"}}));
  }
  {  // two reductions of the input itself
    dsl::Graph g;
    const int x = g.add_input({{4, 100}, DType::Float32}, "x");
    const int s = g.add("sum", {x}, last_dim());
    const int m = g.add("amax", {x}, last_dim());
    g.mark_output(g.add("add", {s, m}));
    EXPECT_EQ(passes_of(g), (Ops{{"sum", "amax"}}));
  }
  {  // layer_norm: the same moments
    dsl::Graph g;
    const int x = g.add_input({{4, 100}, DType::Float32}, "x");
    g.mark_output(g.add("layer_norm", {x}, {{"normalized_shape", std::vector<int64_t>{100}}}));
    EXPECT_EQ(passes_of(g), (Ops{{"mean"}, {"mean", "sum"}}));
  }
}

TEST(ReductionPasses, AReductionReadingAnEarlierResultStartsAPass) {
  {  // softmax: sum(exp(x - max)) reads max through full-domain ops
    dsl::Graph g;
    const int x = g.add_input({{4, 100}, DType::Float32}, "x");
    g.mark_output(g.add("softmax", {x}, {{"dim", int64_t{-1}}}));
    EXPECT_EQ(passes_of(g), (Ops{{"amax"}, {"sum"}}));
  }
  {  // through a row op: sum(x * (2 * sum(x)))
    dsl::Graph g;
    const int x = g.add_input({{4, 100}, DType::Float32}, "x");
    const int s = g.add("sum", {x}, last_dim());
    const int twice = g.add("mul", {s, g.add_constant(2.0, DType::Float64, true)});
    g.mark_output(g.add("sum", {g.add("mul", {x, twice})}, last_dim()));
    EXPECT_EQ(passes_of(g), (Ops{{"sum"}, {"sum"}}));
  }
}

// Loops over the row in the CPU row form: one per pass (each a blocked "sb" loop for sums).
struct RowLoops : dsl::IRVisitor {
  int blocked = 0;
  void visit_For(const dsl::For* op) override {
    if (op->var == "sb") ++blocked;
    dsl::IRVisitor::visit_For(op);
  }
};

TEST(ReductionPasses, TheCpuRowFormReadsTheRowOncePerPass) {
  dsl::Graph g;
  const int x = g.add_input({{16, 4096}, DType::Float32}, "x");
  g.mark_output(g.add("var", {x}, last_dim()));
  const sched::FusionPlan plan = sched::fuse(g);
  const auto ki = sched::specialize(g, plan.groups.at(0), {}, true);
  const auto& s = sched::scheduler_for(ki, dsl::Target::CPU);
  sched::ReductionParams p = std::get<sched::ReductionParams>(s.heuristics(ki, dsl::Target::CPU));
  p.cpu_row_splits = 1;
  const auto sk = s.schedule(ki, p, dsl::Target::CPU);
  RowLoops loops;
  loops.visit(sk.func.body);
  EXPECT_EQ(loops.blocked, 2) << dsl::to_string(sk.func);  // mean; then both sums of d
}

#ifdef FLOW_HAS_LLVM
// Compiled (LLVM) multi-reduction passes against the graph interpreter: sums, a max and a min of
// one computed input, with a NaN in one row and rows long enough for several blocks of partials.
TEST(ReductionPasses, CompiledPassesMatchTheGraphInterpreter) {
  auto rng = test::rng(7);
  for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{5, 1000}, {3, 70001}, {64, 33}}) {
    dsl::Graph g;
    const int x = g.add_input({{rows, cols}, DType::Float32}, "x");
    const int sq = g.add("mul", {x, x});
    const int s = g.add("sum", {sq}, last_dim());
    const int m = g.add("amax", {sq}, last_dim());
    const int lo = g.add("amin", {x}, last_dim());
    const int mean = g.add("mean", {x}, last_dim());
    g.mark_output(g.add("add", {g.add("add", {s, m}), g.add("mul", {lo, mean})}));
    ASSERT_EQ(passes_of(g).size(), 1u);
    jit::Tensor xt = jit::Tensor::empty({rows, cols}, DType::Float32);
    std::normal_distribution<float> d(0.f, 1.f);
    float* px = static_cast<float*>(xt.data());
    for (int64_t i = 0; i < rows * cols; ++i) px[i] = d(rng);
    px[cols + cols / 2] = NAN;  // row 1
    dsl::HostTensor xh{{{rows, cols}, DType::Float32}, {}};
    for (int64_t i = 0; i < rows * cols; ++i) xh.data.push_back(px[i]);
    const auto out = jit::compile(g, {}, {})->run({xt}).at(0);
    const auto ref = dsl::interpret_graph(g, {xh}, /*float64_math=*/true);
    for (int64_t r = 0; r < rows; ++r) {
      const double want = ref[0].data[static_cast<size_t>(r)];
      const double got = static_cast<const float*>(out.data())[r];
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(got)) << "row " << r;
      } else {
        // float32 sums of `cols` squares (~cols in size), blocked: well inside 1e-6 relative
        EXPECT_NEAR(got, want, 1e-6 * (std::fabs(want) + static_cast<double>(cols))) << "row " << r;
      }
    }
  }
}

#endif  // FLOW_HAS_LLVM

}  // namespace
}  // namespace flow
