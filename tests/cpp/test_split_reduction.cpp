// Reductions over a few long rows split in two (scheduler/split_reduction.h). The rewritten graph
// equals the original one in the graph interpreter for every splittable op and dtype, reduced runs
// at the start, middle and end of the dims, keepdim, NaN and computed inputs; the reshape reaches
// graph inputs through elementwise producers (so r1 never reads a written-out intermediate); and
// what must not split (many rows, short or prime rows, gaps in the dims, partial broadcasts,
// strided inputs, argmax, scans, eager graphs whose ids would move) keeps its one reduction. Then
// jit::compile for CUDA: the split plan's kernels (compiled by NVRTC) launch S blocks per row.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "dsl/graph_interpreter.h"
#include "dsl/op_table.h"
#include "jit/compile.h"
#include "jit/cuda_launch.h"
#include "scheduler/split_reduction.h"
#include "test_util.h"

namespace flow {
namespace {

using dsl::DType;
using dsl::Graph;
using dsl::Shape;
using Dims = std::vector<int64_t>;

// Small thresholds, so graphs the interpreter runs quickly still split.
sched::SplitReductionOptions small() {
  sched::SplitReductionOptions o;
  o.max_rows = 64;
  o.min_row = 64;
  o.target_rows = 64;
  o.column_target_rows = 128;
  o.min_chunk = 8;
  o.column_min_chunk = 4;
  o.min_splits = 2;
  return o;
}

std::vector<dsl::HostTensor> random_inputs(const Graph& g, std::mt19937_64& rng, bool with_nan = false) {
  std::vector<dsl::HostTensor> ins;
  for (int v : g.inputs()) {
    dsl::HostTensor t{g.value(v).type, {}};
    const int64_t n = dsl::numel(t.type.shape);
    std::uniform_real_distribution<double> u(-1, 1);
    std::uniform_int_distribution<int> coin(0, 1);
    for (int64_t i = 0; i < n; ++i) {
      switch (t.type.dtype) {
        case DType::Bool:
          t.data.push_back(coin(rng) && coin(rng) && coin(rng));  // mostly false: any/all both vary
          break;
        case DType::Int32:
        case DType::Int64:
          t.data.push_back(coin(rng) ? 1 : -1);  // products stay exact in the interpreter's doubles
          break;
        default:
          t.data.push_back(u(rng));
      }
    }
    if (with_nan && n > 0) t.data[static_cast<size_t>(n / 2)] = std::nan("");
    ins.push_back(std::move(t));
  }
  return ins;
}

// The two graphs' outputs agree: exactly for integers, bools and NaN positions; floats within an
// ulp or so of the result's dtype plus what adding float32 partials in another order moves
// (relative to the sum of the row's magnitudes, `scale`).
void expect_same_outputs(const Graph& a, const Graph& b, const std::vector<dsl::HostTensor>& ins, double scale,
                         const std::string& what) {
  const auto ra = dsl::interpret_graph(a, ins);
  const auto rb = dsl::interpret_graph(b, ins);
  ASSERT_EQ(ra.size(), rb.size()) << what;
  for (size_t o = 0; o < ra.size(); ++o) {
    ASSERT_EQ(ra[o].type, rb[o].type) << what;
    const DType t = ra[o].type.dtype;
    const double rel = t == DType::Float16    ? 0x1p-10
                       : t == DType::BFloat16 ? 0x1p-7
                       : t == DType::Float32  ? 1e-6
                       : t == DType::Float64  ? 1e-14
                                              : 0;
    const double abs = t == DType::Float64 ? 1e-15 * scale : dsl::is_floating(t) ? 1e-7 * scale : 0;
    for (size_t i = 0; i < ra[o].data.size(); ++i) {
      const double x = ra[o].data[i], y = rb[o].data[i];
      if (std::isnan(x) || std::isnan(y)) {
        EXPECT_TRUE(std::isnan(x) && std::isnan(y)) << what << " [" << i << "]: " << x << " vs " << y;
      } else {
        EXPECT_NEAR(x, y, rel * std::max(std::abs(x), std::abs(y)) + abs) << what << " [" << i << "]";
      }
    }
  }
}

Graph one_reduction(const std::string& op, const Shape& shape, DType t, const Dims& dims, bool keepdim) {
  Graph g;
  const int x = g.add_input({shape, t}, "x");
  g.mark_output(g.add(op, {x}, {{"dims", dims}, {"keepdim", keepdim}}));
  return g;
}

int count_op(const Graph& g, const std::string& op) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node.op == op;
  return n;
}

TEST(SplitReduction, EveryOpAndDtypeMatchesTheUnsplitGraph) {
  auto rng = test::rng(1);
  struct Case {
    std::string op;
    std::vector<DType> dtypes;
  };
  const std::vector<Case> cases = {
      {"sum", {DType::Float32, DType::Float16, DType::BFloat16, DType::Float64, DType::Int32, DType::Bool}},
      {"mean", {DType::Float32, DType::Float16, DType::BFloat16}},
      {"amax", {DType::Float32, DType::Float16, DType::Int32}},
      {"amin", {DType::Float32, DType::BFloat16, DType::Int64}},
      {"prod", {DType::Float32, DType::Float16, DType::Int32}},
      {"any", {DType::Bool, DType::Float32}},
      {"all", {DType::Bool, DType::Int32}},
  };
  for (const Case& c : cases) {
    for (DType t : c.dtypes) {
      for (bool keepdim : {false, true}) {
        const Graph g = one_reduction(c.op, {3, 1000}, t, {1}, keepdim);
        const std::string what = c.op + " " + dsl::dtype_name(t) + (keepdim ? " keepdim" : "");
        const sched::SplitReductionResult r = sched::split_long_reductions(g, {}, small());
        ASSERT_EQ(r.split(), 1) << what;
        EXPECT_EQ(count_op(r.graph, c.op), 2) << what << "\n" << r.graph.to_string();
        const auto ins = random_inputs(g, rng);
        expect_same_outputs(g, r.graph, ins, c.op == "prod" ? 0 : 1000, what);
      }
    }
  }
}

// Every reshape that gives a full-size value the split shape reads a graph input: r1 computes its
// input from memory it was going to read anyway.
void expect_reshapes_of_inputs_only(const Graph& g, int64_t full_numel) {
  for (const auto& node : g.nodes()) {
    if (node.op != "reshape" || dsl::numel(g.value(node.outputs[0]).type.shape) < full_numel) continue;
    EXPECT_EQ(g.value(node.inputs[0]).kind, dsl::ValueKind::Input) << g.to_string();
  }
}

// dtype= converts the input first (torch's semantics, and the unsplit kernel's): to half before
// float32 partials (a float32 70000 overflows half), and to int8 before partials that wrap.
TEST(SplitReduction, ExplicitDtypesConvertTheInputFirst) {
  auto rng = test::rng(5);
  struct Case {
    std::string op;
    DType in, out;
    double value;  // the input's magnitude (alternating signs)
  };
  const std::vector<Case> cases = {
      {"sum", DType::Float32, DType::Float16, 70000}, {"sum", DType::Float32, DType::Float16, 0.3},
      {"mean", DType::Float32, DType::BFloat16, 0.3}, {"sum", DType::BFloat16, DType::Float16, 0.3},
      {"sum", DType::Int32, DType::Int8, 100},        {"prod", DType::Int32, DType::Int8, 1}};
  for (const Case& c : cases) {
    Graph g;
    const int x = g.add_input({{2, 1024}, c.in}, "x");
    g.mark_output(g.add(c.op, {x}, {{"dims", Dims{1}}, {"dtype", std::string(dsl::dtype_name(c.out))}}));
    const std::string what = c.op + " of " + dsl::dtype_name(c.in) + " dtype=" + dsl::dtype_name(c.out);
    const sched::SplitReductionResult r = sched::split_long_reductions(g, {}, small());
    ASSERT_EQ(r.split(), 1) << what;
    dsl::HostTensor t{g.value(x).type, {}};
    std::uniform_real_distribution<double> u(0.5, 1);
    for (int i = 0; i < 2048; ++i) t.data.push_back((i % 2 ? -1 : 1) * (c.value > 1 ? c.value : c.value * u(rng)));
    if (c.value == 70000)
      t.data[5] = 70000;  // one more +70000 than -70000: the true sum overflows no
                          // float, but every element is inf in half
    expect_same_outputs(g, r.graph, {t}, 1, what);
  }
  // Unsplit, sum(x, dtype=float16) of 70000s is NaN (inf - inf); the split graph must say so too.
  Graph g;
  const int x = g.add_input({{1, 1024}, DType::Float32}, "x");
  g.mark_output(g.add("sum", {x}, {{"dims", Dims{1}}, {"dtype", std::string("float16")}}));
  dsl::HostTensor t{g.value(x).type, {}};
  for (int i = 0; i < 1024; ++i) t.data.push_back(i % 2 ? -70000 : 70000);
  EXPECT_TRUE(std::isnan(dsl::interpret_graph(sched::split_long_reductions(g, {}, small()).graph, {t})[0].data[0]));
}

// Elementwise ops are appended with their canonical attrs as they are (integer add with alpha: its
// canonical double alpha would be refused by a second canonicalization), 0-dim tensor operands keep
// their promotion category, and nodes nothing read before the rewrite stay.
TEST(SplitReduction, AttrsPromotionAndUnreadNodes) {
  auto rng = test::rng(6);
  Graph g;
  const int a = g.add_input({{2, 1024}, DType::Int64}, "a");
  const int b = g.add_input({{2, 1024}, DType::Int64}, "b");
  const int h = g.add_input({{2, 1024}, DType::Float16}, "h");
  const int t = g.add_input({{}, DType::Float32}, "t");  // 0-dim: h * t stays float16
  g.add("exp", {t});                                     // read by nothing
  g.mark_output(g.add("sum", {g.add("add", {a, b}, {{"alpha", int64_t{2}}})}, {{"dims", Dims{1}}}));
  g.mark_output(g.add("amax", {g.add("mul", {h, t})}, {{"dims", Dims{1}}}));
  const sched::SplitReductionResult r = sched::split_long_reductions(g, {}, small());
  EXPECT_EQ(r.split(), 2) << r.graph.to_string();
  EXPECT_EQ(count_op(r.graph, "exp"), 1) << r.graph.to_string();
  expect_reshapes_of_inputs_only(r.graph, 2048);
  expect_same_outputs(g, r.graph, random_inputs(g, rng), 1, "alpha and a 0-dim operand");
}

TEST(SplitReduction, HalfSumsKeepFloat32Partials) {
  const Graph g = one_reduction("sum", {2, 4096}, DType::Float16, {1}, false);
  const sched::SplitReductionResult r = sched::split_long_reductions(g, {}, small());
  ASSERT_EQ(r.split(), 1);
  // r1 sums into float32 (its dtype attr), r2 adds the float32 partials, one cast rounds to half.
  int float32_sums = 0;
  for (const auto& node : r.graph.nodes())
    if (node.op == "sum") float32_sums += r.graph.value(node.outputs[0]).type.dtype == DType::Float32;
  EXPECT_EQ(float32_sums, 2) << r.graph.to_string();
  EXPECT_EQ(count_op(r.graph, "cast"), 1) << r.graph.to_string();
  // All ones: 4096 is exact in half; rounding each partial to half would not change that, so also
  // a row whose partials are not halves: 0.1 each, 512 per chunk.
  std::vector<dsl::HostTensor> ins{{g.value(g.inputs()[0]).type, std::vector<double>(2 * 4096, 0.1)}};
  const auto a = dsl::interpret_graph(g, ins), b = dsl::interpret_graph(r.graph, ins);
  EXPECT_EQ(a[0].data, b[0].data);
}

// Chunk sums added together are a shallow tree: a float32 sum of 2^16 copies of 0.1 (a running total
// that drifts: every add rounds the same way) comes far closer to the float64 result than the
// interpreter's one running sum.
TEST(SplitReduction, Float32SumsAreNoLessAccurate) {
  const Graph g = one_reduction("sum", {1, 1 << 16}, DType::Float32, {1}, false);
  const sched::SplitReductionResult r = sched::split_long_reductions(g, {}, small());
  ASSERT_EQ(r.split(), 1);
  const dsl::HostTensor x{g.value(g.inputs()[0]).type, std::vector<double>(1 << 16, 0.1)};
  const double exact = dsl::interpret_graph(g, {x}, /*float64_math=*/true)[0].data[0];
  const double one = dsl::interpret_graph(g, {x})[0].data[0];
  const double two = dsl::interpret_graph(r.graph, {x})[0].data[0];
  EXPECT_LT(std::abs(two - exact), std::abs(one - exact) / 10) << exact << " " << one << " " << two;
  EXPECT_LT(std::abs(two - exact), 2e-5 * exact);  // each chunk still a running sum of 1024 here
}

TEST(SplitReduction, ReducedRunsAnywhereInTheDims) {
  auto rng = test::rng(2);
  struct Case {
    Shape shape;
    Dims dims;
  };
  const std::vector<Case> cases = {
      {{4, 6, 8}, {0, 1, 2}},   // every dim
      {{5, 512}, {1}},          // trailing
      {{1024, 7}, {0}},         // leading: each row strided (column form)
      {{3, 256, 5}, {1}},       // middle
      {{2, 16, 32}, {1, 2}},    // a run of two
      {{4, 32, 4, 3}, {0, 1}},  // a leading run of two
      {{1, 1, 300}, {2}},       // unit kept dims
  };
  for (const Case& c : cases) {
    for (bool keepdim : {false, true}) {
      for (const std::string op : {"sum", "amax"}) {
        const Graph g = one_reduction(op, c.shape, DType::Float32, c.dims, keepdim);
        const std::string what = op + " " + g.value(g.inputs()[0]).type.str() + " dims " + std::to_string(c.dims[0]) +
                                 ".." + std::to_string(c.dims.back()) + (keepdim ? " keepdim" : "");
        const sched::SplitReductionResult r = sched::split_long_reductions(g, {}, small());
        ASSERT_EQ(r.split(), 1) << what;
        ASSERT_EQ(r.notes.size(), 1u) << what;
        for (bool nan : {false, true}) expect_same_outputs(g, r.graph, random_inputs(g, rng, nan), 1000, what);
      }
    }
  }
}

TEST(SplitReduction, ComputedInputsArePushedThroughToGraphInputs) {
  auto rng = test::rng(3);
  const Shape shape{2, 4096};
  {  // softmax: amax(x), then sum(exp(x - max)), a [2, 1] operand broadcast over the row
    Graph g;
    const int x = g.add_input({shape, DType::Float32}, "x");
    g.mark_output(g.add("softmax", {x}, {{"dim", int64_t{-1}}}));
    const sched::SplitReductionResult r = sched::split_long_reductions(g, {}, small());
    EXPECT_EQ(r.split(), 2) << r.graph.to_string();
    expect_reshapes_of_inputs_only(r.graph, 8192);
    expect_same_outputs(g, r.graph, random_inputs(g, rng), 1, "softmax");
  }
  {  // var: mean, then the mean of squared deviations (a reduction reading another's result)
    Graph g;
    const int x = g.add_input({shape, DType::Float32}, "x");
    g.mark_output(g.add("var", {x}, {{"dims", Dims{1}}, {"keepdim", false}}));
    const sched::SplitReductionResult r = sched::split_long_reductions(g, {}, small());
    EXPECT_GE(r.split(), 2) << r.graph.to_string();
    expect_reshapes_of_inputs_only(r.graph, 8192);
    // (var's sum of 4096 squares, ~1400, added in another order, over 4095)
    expect_same_outputs(g, r.graph, random_inputs(g, rng), 10, "var");
  }
  {  // sqrt(sum(x * y + 2)) with y broadcast over the rows ([4096]) and a wrapped scalar
    Graph g;
    const int x = g.add_input({shape, DType::Float32}, "x");
    const int y = g.add_input({{4096}, DType::Float32}, "y");
    const int two = g.add_constant(2.0, DType::Float64, true);
    const int e = g.add("add", {g.add("mul", {x, y}), two});
    const int s = g.add("sum", {e}, {{"dims", Dims{1}}, {"keepdim", false}});
    g.mark_output(g.add("sqrt", {g.add("abs", {s})}));
    g.mark_output(e);  // the elementwise value is also an output: it stays, and r1 recomputes it
    const sched::SplitReductionResult r = sched::split_long_reductions(g, {}, small());
    EXPECT_EQ(r.split(), 1);
    EXPECT_EQ(count_op(r.graph, "mul"), 2) << r.graph.to_string();
    expect_same_outputs(g, r.graph, random_inputs(g, rng), 1000, "sum of x * y + 2");
  }
}

TEST(SplitReduction, LeavesAloneWhatDoesNotFit) {
  struct Case {
    std::string what;
    Graph g;
    std::vector<std::vector<int64_t>> strides;
  };
  std::vector<Case> cases;
  cases.push_back({"many rows", one_reduction("sum", {64, 1024}, DType::Float32, {1}, false), {}});
  cases.push_back({"short rows", one_reduction("sum", {2, 63}, DType::Float32, {1}, false), {}});
  cases.push_back({"a prime row", one_reduction("sum", {2, 1031}, DType::Float32, {1}, false), {}});
  cases.push_back({"dims with a gap", one_reduction("sum", {32, 2, 32}, DType::Float32, {0, 2}, false), {}});
  cases.push_back({"argmax", one_reduction("argmax", {2, 1024}, DType::Float32, {1}, false), {}});
  cases.push_back({"a strided input",
                   one_reduction("sum", {2, 16, 64}, DType::Float32, {1, 2}, false),
                   {{1024, 1, 16}}});  // dims 1 and 2 transposed in memory: [2, 32, 32] is no view
  {
    Graph g;
    const int x = g.add_input({{2, 1024}, DType::Float32}, "x");
    g.mark_output(g.add("cumsum", {x}, {{"dim", int64_t{1}}}));
    cases.push_back({"cumsum", std::move(g), {}});
  }
  {  // b broadcasts over dim 1 but not dim 2 of the reduced run
    Graph g;
    const int x = g.add_input({{2, 32, 32}, DType::Float32}, "x");
    const int b = g.add_input({{32}, DType::Float32}, "b");
    g.mark_output(g.add("sum", {g.add("add", {x, b})}, {{"dims", Dims{1, 2}}, {"keepdim", false}}));
    cases.push_back({"a partial broadcast", std::move(g), {}});
  }
  for (const Case& c : cases) {
    const sched::SplitReductionResult r = sched::split_long_reductions(c.g, c.strides, small());
    EXPECT_EQ(r.split(), 0) << c.what << "\n" << r.graph.to_string();
  }
  // The same strided shape with contiguous strides splits: the strides were the reason.
  EXPECT_EQ(sched::split_long_reductions(cases[5].g, {{1024, 64, 1}}, small()).split(), 1);
}

TEST(SplitReduction, EagerGraphsSplitOnlyWhereIdsSurvive) {
  // A scalar argument before the tensor (as eager builds `where(c, 2.0, x)`-like calls): the
  // replay would renumber them, and eager binds scalars by id.
  Graph g;
  const int two = g.add_constant(2.0, DType::Float64, true);
  const int x = g.add_input({{2, 1024}, DType::Float32}, "x");
  g.mark_output(g.add("sum", {g.add("mul", {x, two})}, {{"dims", Dims{1}}, {"keepdim", false}}));
  sched::SplitReductionOptions o = small();
  EXPECT_EQ(sched::split_long_reductions(g, {}, o).split(), 1);
  o.keep_leaf_ids = true;
  EXPECT_EQ(sched::split_long_reductions(g, {}, o).split(), 0);
  const Graph plain = one_reduction("sum", {2, 1024}, DType::Float32, {1}, false);
  EXPECT_EQ(sched::split_long_reductions(plain, {}, o).split(), 1);
}

// The default thresholds, through jit::compile for sm_90 (NVRTC compiles each kernel): x.sum() of
// 2^20 becomes a kernel of 256 blocks and one of a single block, where it was one block in all.
TEST(SplitReduction, CudaPlansLaunchBlocksPerChunk) {
  FLOW_REQUIRE_NVRTC();
  const Graph g = one_reduction("sum", {1 << 20}, DType::Float32, {0}, false);
  jit::CompileOptions opt;
  opt.target = dsl::Target::CUDA;
  opt.cuda_arch = "sm_90";
  const auto exe = jit::compile(g, {}, opt);
  ASSERT_EQ(exe->split_reductions().size(), 1u) << exe->explain(false);
  EXPECT_NE(exe->explain(false).find("split reduction"), std::string::npos);
  ASSERT_EQ(exe->kernels().size(), 2u) << exe->explain(false);
  std::vector<int64_t> grids;
  for (size_t k = 0; k < exe->kernels().size(); ++k)
    grids.push_back(jit::cuda_launch_shape(exe->kernels()[k]->scheduled.func, exe->kernel_args(k)).grid[0]);
  EXPECT_EQ(grids, (std::vector<int64_t>{256, 1}));

  // Softmax over 2 rows of 2^17: amax and sum each in two kernels, the reciprocal of the sum a row op
  // in the second (r2 keeps the dim, so no reshape stands between), then the normalizing pass.
  Graph sm;
  sm.mark_output(sm.add("softmax", {sm.add_input({{2, 1 << 17}, DType::Float32}, "x")}, {{"dim", int64_t{-1}}}));
  const auto sme = jit::compile(sm, {}, opt);
  EXPECT_EQ(sme->split_reductions().size(), 2u) << sme->explain(false);
  EXPECT_EQ(sme->kernels().size(), 5u) << sme->explain(false);

  // The CPU splits long rows inside its kernel instead; FLOW_SPLIT_REDUCTIONS=0 keeps one kernel.
  jit::CompileOptions cpu;
  EXPECT_TRUE(jit::compile(g, {}, cpu)->split_reductions().empty());
  setenv("FLOW_SPLIT_REDUCTIONS", "0", 1);
  const auto off = jit::compile(g, {}, opt);
  unsetenv("FLOW_SPLIT_REDUCTIONS");
  EXPECT_TRUE(off->split_reductions().empty());
  EXPECT_EQ(off->kernels().size(), 1u);
}

}  // namespace
}  // namespace flow
