// Reductions over long rows. CPU: a few long rows (ReductionParams::cpu_row_splits) run each row's
// passes as parallel chunks whose partial results are combined in order. The split and unsplit
// forms, compiled by LLVM (shape-specialized as under jit, and with sizes passed at run time as in
// eager), and the split loop nest run by the loop interpreter, all equal the graph interpreter; the
// heuristics split only a few long rows, and a split kernel is right for other sizes too. Both
// targets: long sums add blocks of steps into partials first, so float32 sums keep torch-like
// accuracy; the GPU row form's blocked loop nests match the reference in the loop interpreter and
// as CUDA text on the SIMT emulator.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "dsl/graph_interpreter.h"
#include "dsl/interpreter.h"
#include "dsl/ir_visitor.h"
#include "jit/compile.h"
#include "scheduler/fusion.h"
#include "scheduler/scheduler.h"
#include "simt/cuda_kernel_check.h"
#include "test_util.h"

namespace flow {
namespace {

using dsl::DType;
using dsl::Shape;

// One reduction group over the last dim of a [rows, cols] input.
dsl::Graph row_graph(const std::string& op, int64_t rows, int64_t cols, DType t = DType::Float32) {
  dsl::Graph g;
  const int x = g.add_input({{rows, cols}, t}, "x");
  if (op == "softmax" || op == "log_softmax") {
    g.mark_output(g.add(op, {x}, {{"dim", int64_t{-1}}}));
  } else if (op == "sum_times_2") {  // a row op after the reduction
    const int s = g.add("sum", {x}, {{"dims", std::vector<int64_t>{1}}, {"keepdim", true}});
    g.mark_output(g.add("mul", {s, g.add_constant(2.0, DType::Float64, true)}));
  } else if (op == "sum_of_squares") {  // a computed input
    const int sq = g.add("mul", {x, x});
    g.mark_output(g.add("sum", {sq}, {{"dims", std::vector<int64_t>{1}}, {"keepdim", true}}));
  } else {
    g.mark_output(g.add(op, {x}, {{"dims", std::vector<int64_t>{1}}, {"keepdim", true}}));
  }
  return g;
}

struct Loops {
  int parallel_chunks = 0;  // Parallel loops over "ch"
  int parallel_rows = 0;    // Parallel loops over "t": tasks of rows (scheduler/cpu_tasks.h)
};

struct LoopCounter : dsl::IRVisitor {
  Loops loops;
  void visit_For(const dsl::For* op) override {
    if (op->kind == dsl::ForKind::Parallel && op->var == "ch") ++loops.parallel_chunks;
    if (op->kind == dsl::ForKind::Parallel && op->var == "t") ++loops.parallel_rows;
    dsl::IRVisitor::visit_For(op);
  }
};

sched::ScheduledKernel schedule_cpu(const dsl::Graph& g, bool shape_specialized, const sched::Params* p = nullptr) {
  const sched::FusionPlan plan = sched::fuse(g);
  EXPECT_EQ(plan.groups.size(), 1u);
  const auto ki = sched::specialize(g, plan.groups.at(0), {}, shape_specialized);
  const auto& s = sched::scheduler_for(ki, dsl::Target::CPU);
  return s.schedule(ki, p ? *p : s.heuristics(ki, dsl::Target::CPU), dsl::Target::CPU);
}

Loops loops_of(const sched::ScheduledKernel& sk) {
  LoopCounter c;
  c.visit(sk.func.body);
  return c.loops;
}

int row_splits(const sched::ScheduledKernel& sk) {
  return std::get<sched::ReductionParams>(sk.params).cpu_row_splits;
}

dsl::HostTensor host_of(const jit::Tensor& t) {
  dsl::HostTensor h{{t.sizes, t.dtype}, {}};
  for (int64_t i = 0; i < t.numel(); ++i) h.data.push_back(dsl::read_element(t.dtype, t.data(), i).f);
  return h;
}

// Normal values, with a NaN in row 0's last chunk for amax (each chunk's partial must carry it).
jit::Tensor input(int64_t rows, int64_t cols, std::mt19937_64& rng, bool with_nan) {
  jit::Tensor x = jit::Tensor::empty({rows, cols}, DType::Float32);
  std::normal_distribution<float> d(0.f, 2.f);
  float* p = static_cast<float*>(x.data());
  for (int64_t i = 0; i < rows * cols; ++i) p[i] = d(rng);
  if (with_nan && cols > 0) p[cols - 3 > 0 ? cols - 3 : 0] = NAN;
  return x;
}

// Float32 results against the graph interpreter's float64 ones: a sum's error over `cols` terms of
// size ~2 in blocked float32 sums is far below cols * eps * 2, which a lost or doubled chunk exceeds
// by orders of magnitude (each chunk holds at least 16384 terms).
void expect_matches(const jit::Tensor& got, const dsl::HostTensor& want, int64_t cols, const std::string& what) {
  ASSERT_EQ(got.numel(), static_cast<int64_t>(want.data.size())) << what;
  const double tol = 1e-6 + 2.4e-7 * std::sqrt(static_cast<double>(cols)) * 8;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double w = want.data[static_cast<size_t>(i)];
    const double v = dsl::read_element(got.dtype, got.data(), i).f;
    if (std::isnan(w)) {
      ASSERT_TRUE(std::isnan(v)) << what << " element " << i;
    } else {
      ASSERT_NEAR(v, w, tol * (1 + std::fabs(w))) << what << " element " << i;
    }
  }
}

// Runs kernel `sk` of graph g (input x, output g's only output) in the loop interpreter and returns
// the output; `call` receives the arguments (for the CUDA text check).
jit::Tensor interpret_kernel(const dsl::Graph& g, const sched::ScheduledKernel& sk, const jit::Tensor& x,
                             test::KernelCall* call = nullptr) {
  const int out_value = g.outputs()[0];
  EXPECT_TRUE(std::any_of(sk.args.begin(), sk.args.end(), [&](const sched::KernelArg& a) {
    return a.value == out_value;
  })) << "the graph's output is not the kernel's";
  const dsl::TensorType& ot = g.value(out_value).type;
  jit::Tensor out = jit::Tensor::empty(ot.shape, ot.dtype);
  const test::KernelCall c = test::kernel_call(sk.args, [&](int v) { return v == out_value ? out : x; });
  dsl::interpret(sk.func, c.args);
  if (call) *call = c;
  return out;
}

const std::vector<std::string> kOps = {"sum", "mean",    "amax",       "amin", "sum_times_2", "sum_of_squares",
                                       "var", "softmax", "log_softmax"};

// Few long rows split; many rows or short rows do not; arg reductions never; with sizes passed at
// run time as with constant ones.
TEST(CpuRowSplits, HeuristicsSplitOnlyAFewLongRows) {
  for (const std::string& op : kOps) {
    for (const bool specialized : {true, false}) {
      const std::string what = op + (specialized ? " jit" : " eager");
      const auto few_long = schedule_cpu(row_graph(op, 3, 70001), specialized);
      EXPECT_GT(row_splits(few_long), 1) << what;
      EXPECT_GE(loops_of(few_long).parallel_chunks, 1) << what;
      EXPECT_EQ(loops_of(few_long).parallel_rows, 0) << what;
      const auto many = schedule_cpu(row_graph(op, 64, 70001), specialized);
      EXPECT_EQ(row_splits(many), 1) << what;
      EXPECT_EQ(loops_of(many).parallel_chunks, 0) << what;
      EXPECT_EQ(loops_of(many).parallel_rows, 1) << what;
      const auto short_rows = schedule_cpu(row_graph(op, 3, 20000), specialized);
      EXPECT_EQ(loops_of(short_rows).parallel_chunks, 0) << what;
    }
  }
  EXPECT_EQ(row_splits(schedule_cpu(row_graph("argmax", 2, 100000), true)), 1);
}

// The split loop nest, run by the loop interpreter, against the graph interpreter: rows of 2 chunks
// and a tail (70001 = 16 * 4375 + 1) and of 4 chunks; and, forced by the params (as a tuning record
// may), many short rows and rows shorter than one SIMD step (one chunk each).
TEST(CpuRowSplits, SplitLoopNestsMatchTheGraphInterpreter) {
  auto rng = test::rng(77);
  sched::ReductionParams forced;
  forced.cpu_vector_width = 16;
  forced.cpu_row_splits = 64;
  for (const std::string& op : kOps) {
    for (const auto& [rows, cols] :
         {std::pair<int64_t, int64_t>{1, 70001}, {2, 65536 + 7}, {40, 100}, {7, 9}, {3, 1 + 2}}) {
      const dsl::Graph g = row_graph(op, rows, cols);
      const bool heuristic = cols > 1000;
      const sched::Params params = forced;
      const auto sk = schedule_cpu(g, true, heuristic ? nullptr : &params);
      ASSERT_GE(loops_of(sk).parallel_chunks, 1) << op;
      const jit::Tensor x = input(rows, cols, rng, op == "amax");
      const jit::Tensor out = interpret_kernel(g, sk, x);
      const auto ref = dsl::interpret_graph(g, {host_of(x)}, /*float64_math=*/true);
      expect_matches(out, ref[0], cols, op + " " + std::to_string(rows) + "x" + std::to_string(cols));
    }
  }
}

// The GPU row form (a block per row, threads striding along it) with blocked sums: rows whose
// threads run several blocks of kSumBlock steps and a short last block, and rows shorter than a
// block, in the loop interpreter and as CUDA text on the emulator (outputs poisoned).
TEST(GpuLongRows, BlockedSumsMatchTheGraphInterpreter) {
  auto rng = test::rng(80);
  for (const std::string op : {"sum", "mean", "sum_times_2", "var", "softmax", "amax"}) {
    for (const auto& [rows, cols] : {std::pair<int64_t, int64_t>{2, 70001}, {3, 33}}) {
      const dsl::Graph g = row_graph(op, rows, cols);
      const sched::FusionPlan plan = sched::fuse(g);
      const auto ki = sched::specialize(g, plan.groups.at(0), {}, true);
      sched::ReductionParams p;
      p.gpu_block_x = 64;  // 70001 / 64: 1094 steps per thread, 5 blocks
      const auto sk = sched::scheduler_for(ki, dsl::Target::CUDA).schedule(ki, p, dsl::Target::CUDA);
      const jit::Tensor x = input(rows, cols, rng, op == "amax");
      test::KernelCall call;
      const jit::Tensor out = interpret_kernel(g, sk, x, &call);
      const auto ref = dsl::interpret_graph(g, {host_of(x)}, /*float64_math=*/true);
      const std::string what = op + " " + std::to_string(rows) + "x" + std::to_string(cols);
      expect_matches(out, ref[0], cols, what);
      test::expect_cuda_text_matches_interpreter(sk.func, call.args, call.spans, what);
    }
  }
}

// A GPU thread's blocked sum of values near 0.1 (2^18 in a row, 32 threads: 8192 steps each) stays
// within 3e-7 of the exact sum, relatively; one running total per thread was off by ~1e-6.
TEST(GpuLongRows, LongFloat32SumsStayAccurate) {
  auto rng = test::rng(81);
  const int64_t cols = int64_t{1} << 18;
  const dsl::Graph g = row_graph("sum", 1, cols);
  const sched::FusionPlan plan = sched::fuse(g);
  const auto ki = sched::specialize(g, plan.groups.at(0), {}, true);
  sched::ReductionParams p;
  p.gpu_block_x = 32;
  const auto sk = sched::scheduler_for(ki, dsl::Target::CUDA).schedule(ki, p, dsl::Target::CUDA);
  jit::Tensor x = jit::Tensor::empty({1, cols}, DType::Float32);
  std::uniform_real_distribution<float> d(0.1f, 0.1001f);
  float* px = static_cast<float*>(x.data());
  double exact = 0;
  for (int64_t i = 0; i < cols; ++i) exact += px[i] = d(rng);
  const jit::Tensor out = interpret_kernel(g, sk, x);
  EXPECT_LT(std::fabs(static_cast<const float*>(out.data())[0] - exact), 3e-7 * exact);
}

#ifdef FLOW_HAS_LLVM

// Compiled by LLVM, shape-specialized (jit) and with sizes passed at run time (eager), split (few
// long rows) and unsplit (many rows, short rows).
TEST(CpuRowSplits, CompiledFormsMatchTheGraphInterpreter) {
  auto rng = test::rng(78);
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 70001}, {3, 32768}, {2, 100003}, {32, 32771}, {7, 9}};
  for (const std::string& op : kOps) {
    for (const auto& [rows, cols] : shapes) {
      const dsl::Graph g = row_graph(op, rows, cols);
      const jit::Tensor x = input(rows, cols, rng, op == "amax");
      const auto ref = dsl::interpret_graph(g, {host_of(x)}, /*float64_math=*/true);
      for (const bool specialized : {true, false}) {
        jit::CompileOptions o;
        o.inline_constants = specialized;
        auto exe = jit::compile(g, {}, o);
        ASSERT_EQ(exe->num_kernels(), 1) << op;
        const auto out = exe->run({x}).at(0);
        expect_matches(out, ref[0], cols,
                       op + (specialized ? " jit " : " eager ") + std::to_string(rows) + "x" + std::to_string(cols));
      }
    }
  }
}

// Blocked sums: float32 sums of values near 0.1 (where the rounding of one long running total errs
// the same way step after step) stay within 5e-7 of the exact sums, relatively, for one row of 2^22
// (split) and 64 rows of 2^16 (not split): they are off by ~1.0e-7 on average and by up to 3.7e-7
// (one seed in a dozen went past the earlier 3e-7; torch's cascade sum errs up to ~1.2e-7 there),
// and one running total per lane was off by ~1.0e-6.
TEST(CpuRowSplits, LongFloat32SumsStayAccurate) {
  auto rng = test::rng(79);
  const int64_t n = int64_t{1} << 22;
  for (const int64_t rows : {int64_t{1}, int64_t{64}}) {
    const int64_t cols = n / rows;
    const dsl::Graph g = row_graph("sum", rows, cols);
    auto exe = jit::compile(g, {}, {});
    jit::Tensor x = jit::Tensor::empty({rows, cols}, DType::Float32);
    std::uniform_real_distribution<float> d(0.1f, 0.1001f);
    float* p = static_cast<float*>(x.data());
    for (int64_t i = 0; i < n; ++i) p[i] = d(rng);
    const auto out = exe->run({x}).at(0);
    for (int64_t r = 0; r < rows; ++r) {
      double exact = 0;
      for (int64_t c = 0; c < cols; ++c) exact += p[r * cols + c];
      const double err = std::fabs(static_cast<const float*>(out.data())[r] - exact) / exact;
      EXPECT_LT(err, 5e-7) << rows << " rows, row " << r;
    }
  }
}

#endif  // FLOW_HAS_LLVM

}  // namespace
}  // namespace flow
