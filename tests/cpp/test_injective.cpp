// Injective ops (cat, pad, flip, index_select, gather, embedding) through the whole pipeline, against
// direct C++ computation and the graph interpreter; max pooling as pad + as_strided + amax.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <random>

#include "dsl/graph_interpreter.h"
#include "dsl/interpreter.h"
#include "dsl/ir_visitor.h"
#include "jit/compile.h"
#include "jit/cuda/cuda_compile.h"
#include "jit/cuda/cuda_printer.h"
#include "jit/cuda/embedded_helpers.h"
#include "jit/cuda_launch.h"
#include "jit/layouts.h"
#include "scheduler/unswitch.h"
#include "simt/cuda_kernel_check.h"
#include "simt/simt_emulator.h"
#include "test_util.h"

using namespace flow;
using dsl::DType;

namespace {

jit::Tensor random_f32(const dsl::Shape& s, std::mt19937_64& rng) {
  jit::Tensor t = jit::Tensor::empty(s, DType::Float32);
  std::normal_distribution<float> d;
  for (int64_t i = 0; i < t.numel(); ++i) static_cast<float*>(t.data())[i] = d(rng);
  return t;
}

// A [4, 6] view of random [6, 4] data: strides [1, 4].
jit::Tensor transposed_4x6(std::mt19937_64& rng) {
  jit::Tensor t = random_f32({6, 4}, rng);
  t.sizes = {4, 6};
  t.strides = {1, 4};
  return t;
}

jit::Tensor random_index(const dsl::Shape& s, int64_t n, std::mt19937_64& rng) {
  jit::Tensor t = jit::Tensor::empty(s, DType::Int64);
  std::uniform_int_distribution<int64_t> d(0, n - 1);
  for (int64_t i = 0; i < t.numel(); ++i) static_cast<int64_t*>(t.data())[i] = d(rng);
  return t;
}

dsl::HostTensor to_host(const jit::Tensor& t) {
  dsl::HostTensor h{{t.sizes, t.dtype}, {}};
  for (int64_t i = 0; i < t.numel(); ++i)
    h.data.push_back(t.dtype == DType::Int64 ? double(static_cast<const int64_t*>(t.data())[i])
                                             : double(static_cast<const float*>(t.data())[i]));
  return h;
}

std::vector<float> gather_f32(const jit::Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  std::vector<int64_t> idx(t.sizes.size(), 0);
  for (size_t k = 0; k < out.size(); ++k) {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * t.strides[d];
    out[k] = static_cast<const float*>(t.data())[off];
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < t.sizes[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

// Runs `g` through jit (CPU), and its GPU schedules through the loop interpreter (and NVRTC), and
// compares both with the graph interpreter.
void check_graph(const dsl::Graph& g, const std::vector<jit::Tensor>& ins,
                 const std::vector<std::vector<int64_t>>& strides, int expected_kernels) {
  std::vector<dsl::HostTensor> host;
  for (const auto& t : ins) {
    jit::Tensor c = t;
    if (!t.is_contiguous()) {
      // Reference data in logical (row-major) order.
      dsl::HostTensor h{{t.sizes, t.dtype}, {}};
      for (float v : gather_f32(t)) h.data.push_back(v);
      host.push_back(h);
      continue;
    }
    host.push_back(to_host(c));
  }
  const auto ref = dsl::interpret_graph(g, host);
#ifdef FLOW_HAS_LLVM
  auto exe = jit::compile(g, strides, {});
  if (expected_kernels >= 0) {
    EXPECT_EQ(exe->num_kernels(), expected_kernels) << exe->explain(false);
  }
  const auto outs = exe->run(ins);
  for (size_t o = 0; o < outs.size(); ++o) {
    const auto got = gather_f32(outs[o]);
    ASSERT_EQ(got.size(), ref[o].data.size());
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], ref[o].data[i], 1e-5 * (1 + std::fabs(ref[o].data[i]))) << i;
  }
#endif
  // GPU schedules, interpreted.
  const dsl::Graph mg = jit::materialize_unviewable(g, strides);
  const auto plan = sched::fuse(mg);
  const auto lay = jit::compute_layouts(mg, strides);
  sched::GroupLayouts gl;
  for (size_t v = 0; v < mg.values().size(); ++v) gl[static_cast<int>(v)] = lay.layout[v].strides;
  std::vector<jit::Tensor> slots(mg.values().size());
  for (size_t i = 0; i < ins.size(); ++i) slots[mg.inputs()[i]] = ins[i];
  auto bind = [&](int v) { return test::bind_view(slots, lay, v); };
  for (const auto& grp : plan.groups) {
    const auto ki = sched::specialize(mg, grp, gl, true);
    for (int v : grp.outputs) slots[v] = jit::Tensor::empty(mg.value(v).type.shape, mg.value(v).type.dtype);
    const auto& s = sched::scheduler_for(ki, dsl::Target::CUDA);
    const auto sk = s.schedule(ki, s.heuristics(ki, dsl::Target::CUDA), dsl::Target::CUDA);
    const test::KernelCall call = test::kernel_call(sk.args, bind);
    const std::vector<dsl::ArgValue>& av = call.args;
    const std::vector<test::BufferSpan>& spans = call.spans;
    dsl::interpret(sk.func, av);
    test::expect_cuda_text_matches_interpreter(sk.func, av, spans);
    EXPECT_NO_THROW(jit::cuda::cuda_compile(sk.func, "sm_90")) << sk.func.name;
  }
  for (size_t o = 0; o < ref.size(); ++o) {
    const auto got = gather_f32(bind(mg.outputs()[o]));
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], ref[o].data[i], 1e-5 * (1 + std::fabs(ref[o].data[i]))) << "gpu " << i;
  }
}

}  // namespace

TEST(Injective, CatWithConsumerIsOneKernel) {
  auto rng = test::rng(21);
  dsl::Graph g;
  const int a = g.add_input({{3, 4, 5}, DType::Float32});
  const int b = g.add_input({{3, 1, 5}, DType::Float32});
  const int c = g.add_input({{3, 7, 5}, DType::Float32});
  const int cat = g.add("cat", {a, b, c}, {{"dim", int64_t{1}}});
  g.mark_output(g.add("relu", {cat}));
  check_graph(g, {random_f32({3, 4, 5}, rng), random_f32({3, 1, 5}, rng), random_f32({3, 7, 5}, rng)}, {}, 1);
}

TEST(Injective, CatOfTransposedInput) {
  auto rng = test::rng(22);
  const jit::Tensor t = transposed_4x6(rng);
  dsl::Graph g;
  const int a = g.add_input({{4, 6}, DType::Float32});
  const int b = g.add_input({{4, 2}, DType::Float32});
  g.mark_output(g.add("cat", {a, b}, {{"dim", int64_t{-1}}}));
  check_graph(g, {t, random_f32({4, 2}, rng)}, {{1, 4}, {}}, 1);
}

TEST(Injective, MaxPoolAsPadViewAndAmax) {
  auto rng = test::rng(23);
  const int64_t N = 2, C = 3, H = 9, W = 8;
  dsl::Graph g;
  const int x = g.add_input({{N, C, H, W}, DType::Float32});
  const int p = g.add("pad", {x}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"value", -INFINITY}});
  const int64_t Hp = H + 2, Wp = W + 2, OH = (Hp - 3) / 2 + 1, OW = (Wp - 3) / 2 + 1;
  const int win = g.add("as_strided", {p},
                        {{"size", std::vector<int64_t>{N, C, OH, OW, 3, 3}},
                         {"stride", std::vector<int64_t>{C * Hp * Wp, Hp * Wp, 2 * Wp, 2, Wp, 1}}});
  g.mark_output(g.add("amax", {win}, {{"dims", std::vector<int64_t>{4, 5}}, {"keepdim", false}}));
  const auto xt = random_f32({N, C, H, W}, rng);
  check_graph(g, {xt}, {}, 2);
#ifdef FLOW_HAS_LLVM
  // And against a direct max pool.
  auto out = jit::compile(g, {}, {})->run({xt}).at(0);
  const float* xv = static_cast<const float*>(xt.data());
  for (int64_t n = 0; n < N; ++n)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t oh = 0; oh < OH; ++oh)
        for (int64_t ow = 0; ow < OW; ++ow) {
          float m = -INFINITY;
          for (int64_t kh = 0; kh < 3; ++kh)
            for (int64_t kw = 0; kw < 3; ++kw) {
              const int64_t h = oh * 2 - 1 + kh, w = ow * 2 - 1 + kw;
              if (h >= 0 && h < H && w >= 0 && w < W) m = std::max(m, xv[((n * C + c) * H + h) * W + w]);
            }
          ASSERT_EQ(static_cast<const float*>(out.data())[((n * C + c) * OH + oh) * OW + ow], m);
        }
#endif
}

TEST(Injective, IndexSelectGatherEmbedding) {
  auto rng = test::rng(24);
  {
    dsl::Graph g;
    const int x = g.add_input({{5, 7}, DType::Float32});
    const int i = g.add_input({{4}, DType::Int64});
    g.mark_output(g.add("index_select", {x, i}, {{"dim", int64_t{0}}}));
    check_graph(g, {random_f32({5, 7}, rng), random_index({4}, 5, rng)}, {}, 1);
  }
  {
    dsl::Graph g;
    const int x = g.add_input({{5, 7}, DType::Float32});
    const int i = g.add_input({{5, 3}, DType::Int64});
    g.mark_output(g.add("exp", {g.add("gather", {x, i}, {{"dim", int64_t{1}}})}));
    check_graph(g, {random_f32({5, 7}, rng), random_index({5, 3}, 7, rng)}, {}, 1);
  }
  {
    dsl::Graph g;
    const int ids = g.add_input({{2, 6}, DType::Int64});
    const int w = g.add_input({{11, 8}, DType::Float32});
    g.mark_output(g.add("embedding", {ids, w}));
    check_graph(g, {random_index({2, 6}, 11, rng), random_f32({11, 8}, rng)}, {}, 1);
  }
}

// Injective kernels over one domain merge: the taps of a resize along W (gathers through index
// tensors, weighted and summed), with a flip and a pad of the same input added in, run as one
// kernel, from a contiguous and from a transposed input, on the CPU and in the GPU schedules.
TEST(Injective, InjectiveKernelsOfOneDomainMerge) {
  auto rng = test::rng(25);
  for (const bool transposed : {false, true}) {
    dsl::Graph g;
    const int x = g.add_input({{2, 3, 6, 9}, DType::Float32});
    const int i0 = g.add_input({{9}, DType::Int64});
    const int i1 = g.add_input({{9}, DType::Int64});
    const int w = g.add_input({{9}, DType::Float32});
    const int tap0 = g.add("mul", {g.add("index_select", {x, i0}, {{"dim", int64_t{3}}}), w});
    const int tap1 = g.add("mul", {g.add("index_select", {x, i1}, {{"dim", int64_t{3}}}), w});
    const int flipped = g.add("flip", {x}, {{"dims", std::vector<int64_t>{2, 3}}});
    const int padded = g.add(
        "pad",
        {g.add("slice", {x}, {{"dim", int64_t{3}}, {"start", int64_t{1}}, {"end", int64_t{8}}, {"step", int64_t{1}}})},
        {{"pads", std::vector<int64_t>{1, 1}}, {"value", 0.5}});
    g.mark_output(g.add("add", {g.add("add", {tap0, tap1}), g.add("sub", {flipped, padded})}));
    jit::Tensor xt = random_f32({2, 3, 6, 9}, rng);
    std::vector<std::vector<int64_t>> strides;
    if (transposed) {  // the same logical tensor stored as [2, 3, 9, 6]
      jit::Tensor base = random_f32({2, 3, 9, 6}, rng);
      xt = base;
      xt.sizes = {2, 3, 6, 9};
      xt.strides = {162, 54, 1, 6};
      strides = {xt.strides, {1}, {1}, {1}};
    }
    check_graph(g, {xt, random_index({9}, 9, rng), random_index({9}, 9, rng), random_f32({9}, rng)}, strides, 1);
  }
}

TEST(Injective, BadArgumentsRaise) {
  dsl::Graph g;
  const int a = g.add_input({{3, 4}, DType::Float32});
  const int b = g.add_input({{2, 5}, DType::Float32});
  EXPECT_THROW(g.add("cat", {a, b}, {{"dim", int64_t{0}}}), dsl::OpError);
  EXPECT_THROW(g.add("index_select", {a, b}, {{"dim", int64_t{0}}}), dsl::OpError);
  EXPECT_THROW(g.add("pad", {a}, {{"pads", std::vector<int64_t>{1}}}), dsl::OpError);
}

// An index out of range under jit raises torch's message after the kernel instead of reading a
// clamped row: on the CPU from the launch (the kernel's report word), in the GPU schedules from the
// loop interpreter and from the printed CUDA text's report into its error word. Bad positions at
// the start, the middle and the end of a vectorized loop; negatives wrap for index_select and
// gather (Python indexing) but not for embedding (as torch's).
TEST(Injective, IndexOutOfRangeRaisesAfterTheKernel) {
  auto rng = test::rng(31);
  struct Case {
    const char* op;
    int64_t n, dim, bad;
    bool embedding;  // takes (indices, weight): a [n, 8] table
  };
  for (const Case& c : {Case{"index_select", 100, 0, 1000, false}, Case{"index_select", 100, 0, -101, false},
                        Case{"gather", 100, 0, 100, false}, Case{"embedding", 100, 0, -1, true},
                        Case{"embedding", 100, 0, 100, true}}) {
    for (const int64_t at : {int64_t{0}, int64_t{17}, int64_t{36}}) {
      SCOPED_TRACE(std::string(c.op) + " index " + std::to_string(c.bad) + " at " + std::to_string(at));
      dsl::Graph g;
      const bool emb = c.embedding;
      const int x = g.add_input({emb ? dsl::Shape{c.n, 8} : dsl::Shape{c.n}, DType::Float32});
      const int i = g.add_input({{37}, DType::Int64});
      const int y = emb ? g.add("embedding", {i, x}) : g.add(c.op, {x, i}, {{"dim", c.dim}});
      g.mark_output(g.add("exp", {y}));
      jit::Tensor xt = random_f32(emb ? dsl::Shape{c.n, 8} : dsl::Shape{c.n}, rng);
      jit::Tensor it = random_index({37}, c.n, rng);
      static_cast<int64_t*>(it.data())[at] = c.bad;
      const std::string message = "index " + std::to_string(c.bad) + " is out of bounds for dimension " +
                                  std::to_string(c.dim) + " with size " + std::to_string(c.n);
      const std::vector<jit::Tensor> ins = {xt, it};  // the graph's inputs, in the order added
#ifdef FLOW_HAS_LLVM
      auto exe = jit::compile(g, {}, {});
      try {
        exe->run(ins);
        ADD_FAILURE() << "no error on the CPU";
      } catch (const dsl::OpError& e) {
        EXPECT_EQ(e.kind, dsl::OpError::Kind::Index);
        EXPECT_EQ(std::string(e.what()), message);
      }
      static_cast<int64_t*>(it.data())[at] = c.n - 1;  // the same kernel, in range: runs
      EXPECT_NO_THROW(exe->run(ins));
      static_cast<int64_t*>(it.data())[at] = c.bad;
#endif
      const auto plan = sched::fuse(g);
      ASSERT_EQ(plan.groups.size(), 1u);
      std::vector<jit::Tensor> slots(g.values().size());
      for (size_t k = 0; k < ins.size(); ++k) slots[g.inputs()[k]] = ins[k];
      for (int v : plan.groups[0].outputs) slots[v] = jit::Tensor::empty(g.value(v).type.shape, DType::Float32);
      const auto ki = sched::specialize(g, plan.groups[0], {}, true);
      const auto& s = sched::scheduler_for(ki, dsl::Target::CUDA);
      const auto sk = s.schedule(ki, s.heuristics(ki, dsl::Target::CUDA), dsl::Target::CUDA);
      test::KernelCall call = test::kernel_call(sk.args, [&](int v) { return slots[static_cast<size_t>(v)]; });
      try {
        dsl::interpret(sk.func, call.args);
        ADD_FAILURE() << "no error from the loop interpreter";
      } catch (const dsl::OpError& e) {
        EXPECT_EQ(e.kind, dsl::OpError::Kind::Index);
        EXPECT_EQ(std::string(e.what()), message + " (in kernel '" + sk.func.name + "')");
      }
      const jit::cuda::CudaSource src = jit::cuda::print_cuda_source(sk.func);
      EXPECT_NE(src.source.find("flow::check_index("), std::string::npos);
      if (at == 0) {  // NVRTC: the report's atomicCAS, and no local memory
        const jit::cuda::CudaCompiled compiled = jit::cuda::cuda_compile(sk.func, "sm_90");
        EXPECT_NE(compiled.ptx.find("atom.global.cas.b64"), std::string::npos);
        EXPECT_EQ(compiled.ptx.find(".local"), std::string::npos);
      }
      const auto module = test::simt::module_for(src.source, {src.name}, jit::cuda::embedded_helpers());
      std::array<long long, 4> word{};
      std::vector<dsl::ArgValue> a = call.args;
      a.emplace_back().ptr = word.data();
      std::vector<void*> params;
      for (dsl::ArgValue& v : a) params.push_back(&v);
      const jit::CudaLaunchShape shape = jit::cuda_launch_shape(sk.func, sk.args);
      module->launch(src.name, {shape.grid[0], shape.grid[1], shape.grid[2]},
                     {shape.block[0], shape.block[1], shape.block[2]}, params.data());
      EXPECT_EQ(word, (std::array<long long, 4>{3, c.bad, c.n, c.dim}));
    }
  }
}

namespace {

// The CPU loop nest of the one pointwise group of `g` (contiguous inputs).
dsl::Stmt cpu_loops_of(const dsl::Graph& g) {
  const auto plan = sched::fuse(g);
  const auto lay = jit::compute_layouts(g, {});
  sched::GroupLayouts gl;
  for (size_t v = 0; v < g.values().size(); ++v) gl[static_cast<int>(v)] = lay.layout[v].strides;
  for (const auto& grp : plan.groups) {
    if (grp.kind != sched::GroupKind::Pointwise) continue;
    const auto ki = sched::specialize(g, grp, gl, true);
    const auto& s = sched::scheduler_for(ki, dsl::Target::CPU);
    return s.schedule(ki, s.heuristics(ki, dsl::Target::CPU), dsl::Target::CPU).func.body;
  }
  return dsl::Stmt();
}

struct ChoiceCount : dsl::IRVisitor {
  int ifs = 0, choices = 0;  // IfThenElse statements; selects whose arms both read memory
  void visit_IfThenElse(const dsl::IfThenElse* op) override {
    ++ifs;
    dsl::IRVisitor::visit_IfThenElse(op);
  }
  void visit_Select(const dsl::Select* op) override {
    struct Loads : dsl::IRVisitor {
      bool any = false;
      void visit_Load(const dsl::Load*) override { any = true; }
    } t, f;
    t.visit(op->true_value);
    f.visit(op->false_value);
    if (t.any && f.any) ++choices;
    dsl::IRVisitor::visit_Select(op);
  }
};

}  // namespace

// cat along an outer dim chooses its input once per task (scheduler/unswitch.h): the CPU loop nest
// holds one version of the loops per input and no per-element choice between inputs. Past the cap
// on versions the remaining inputs are chosen per element.
TEST(Injective, CatAlongAnOuterDimChoosesItsInputOncePerTask) {
  auto rng = test::rng(23);
  for (const int inputs : {3, 20}) {
    dsl::Graph g;
    std::vector<int> ins;
    std::vector<jit::Tensor> data;
    std::uniform_int_distribution<int> width(1, 3);
    for (int k = 0; k < inputs; ++k) {
      const dsl::Shape s{2, width(rng), 3, 37};
      ins.push_back(g.add_input({s, DType::Float32}));
      data.push_back(random_f32(s, rng));
    }
    const int cat = g.add("cat", ins, {{"dim", int64_t{1}}});
    g.mark_output(g.add("relu", {cat}));
    check_graph(g, data, {}, 1);
    const dsl::Stmt loops = cpu_loops_of(g);
    ChoiceCount count;
    count.visit(loops);
    const std::string what = std::to_string(inputs) + " inputs";
    EXPECT_EQ(count.ifs, inputs - 1) << what;
    EXPECT_EQ(count.choices, 0) << what;
  }
}

// The pass alone: only invariant choices between two reads are hoisted, at most max_versions - 1
// times.
TEST(Unswitch, HoistsInvariantChoicesBetweenReadsUpToTheCap) {
  using namespace dsl;
  const Expr k = var("k"), l = var("l");
  auto read = [&](int input) { return load(DType::Float32, "in" + std::to_string(input), l); };
  Expr chain = read(19);
  for (int input = 18; input >= 0; --input) chain = select(k < make_int(input + 1), read(input), chain);
  const Expr pad = select(k < make_int(5), read(0), make_float(0.0));  // a read or a constant
  const Expr per_lane = select(l < make_int(3), read(1), read(2));     // varies in the loop
  const Stmt loop =
      make_for("l", make_int(0), make_int(8), ForKind::Serial, make_store("out", l, chain + pad + per_lane));
  ChoiceCount before, all, capped;
  before.visit(loop);
  all.visit(sched::unswitch_invariant_selects(loop));
  capped.visit(sched::unswitch_invariant_selects(loop, 8));
  EXPECT_EQ(before.choices, 20);  // the chain's 19 and the per-lane one
  EXPECT_EQ(all.ifs, 19);
  EXPECT_EQ(all.choices, 20);  // the per-lane choice, once in each of the 20 versions
  EXPECT_EQ(capped.ifs, 7);
  EXPECT_GT(capped.choices, 8);  // the chain's rest stays per element in the last version
}

// cat along the innermost dim (an NHWC cat along channels) splits each row at the inputs' bounds:
// each piece reads one input, with no per-element choice. Rows within one tile get constant trip
// counts; rows longer than a tile (70000 elements) are split at run time.
TEST(Injective, CatAlongTheInnermostDimSplitsRowsAtTheInputs) {
  auto rng = test::rng(24);
  for (const std::vector<int64_t>& widths :
       {std::vector<int64_t>{32, 17, 1, 40}, std::vector<int64_t>{3, 64, 5}, std::vector<int64_t>{40000, 30000}}) {
    const int64_t rows = widths[0] > 1000 ? 2 : 15;
    dsl::Graph g;
    std::vector<int> ins;
    std::vector<jit::Tensor> data;
    for (int64_t w : widths) {
      const dsl::Shape s{rows, w};
      ins.push_back(g.add_input({s, DType::Float32}));
      data.push_back(random_f32(s, rng));
    }
    const int cat = g.add("cat", ins, {{"dim", int64_t{-1}}});
    g.mark_output(g.add("relu", {cat}));
    check_graph(g, data, {}, 1);
    ChoiceCount count;
    count.visit(cpu_loops_of(g));
    EXPECT_EQ(count.choices, 0) << widths.size() << " inputs, first width " << widths[0];
  }
}

namespace {

struct GuardedLoads : dsl::IRVisitor {
  int guarded = 0, loads = 0;  // loads under a select arm; all loads
  int depth = 0;
  void visit_Load(const dsl::Load* op) override {
    ++loads;
    if (depth > 0) ++guarded;
    dsl::IRVisitor::visit_Load(op);
  }
  void visit_Select(const dsl::Select* op) override {
    visit(op->cond);
    ++depth;
    visit(op->true_value);
    visit(op->false_value);
    --depth;
  }
};

}  // namespace

// A pad's taps read clamped indices, in range at every output index (scheduler/lowering.cpp,
// index_range): they are bound before the select that picks the fill, so the code generators read
// them unconditionally and keep the vector loop. A max pool's nine taps (pad of a strided slice)
// are one kernel with no guarded load. A load at an index the op does not keep in range (cat's
// inputs past their own extent) stays under its select.
TEST(Injective, PadTapsAreReadUnconditionally) {
  auto rng = test::rng(25);
  dsl::Graph g;
  const dsl::Shape s{2, 9, 7, 16};  // NHWC: rows and columns padded, channels innermost
  const int x = g.add_input({s, DType::Float32});
  int out = -1;
  // Outputs [lo, hi] of a 3x3 max pool (stride 2, padding 1) whose tap `k` lands inside `size`.
  auto range = [](int64_t size, int64_t out, int64_t k) {
    const int64_t shift = k - 1;
    return std::pair<int64_t, int64_t>{shift < 0 ? 1 : 0, std::min(out - 1, (size - 1 - shift) / 2)};
  };
  const int64_t OH = 5, OW = 4;
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 3; ++j) {
      const auto [r_lo, r_hi] = range(9, OH, i);
      const auto [c_lo, c_hi] = range(7, OW, j);
      const int64_t r0 = r_lo * 2 + i - 1, c0 = c_lo * 2 + j - 1;
      int t = g.add("slice", {x},
                    {{"dim", int64_t{1}}, {"start", r0}, {"end", r0 + (r_hi - r_lo) * 2 + 1}, {"step", int64_t{2}}});
      t = g.add("slice", {t},
                {{"dim", int64_t{2}}, {"start", c0}, {"end", c0 + (c_hi - c_lo) * 2 + 1}, {"step", int64_t{2}}});
      t = g.add(
          "pad", {t},
          {{"pads", std::vector<int64_t>{0, 0, c_lo, OW - 1 - c_hi, r_lo, OH - 1 - r_hi, 0, 0}}, {"value", -INFINITY}});
      out = out < 0 ? t : g.add("maximum", {out, t});
    }
  }
  g.mark_output(out);
  check_graph(g, {random_f32(s, rng)}, {}, 1);
  GuardedLoads pool;
  pool.visit(cpu_loops_of(g));
  EXPECT_GT(pool.loads, 0);
  EXPECT_EQ(pool.guarded, 0);

  dsl::Graph c;
  const int a = c.add_input({{3, 8}, DType::Float32}), b = c.add_input({{5, 8}, DType::Float32});
  c.mark_output(c.add("cat", {a, b}, {{"dim", int64_t{0}}}));
  GuardedLoads cat;
  cat.visit(cpu_loops_of(c));
  EXPECT_GT(cat.guarded, 0);
}

// Elementwise work read only by a cat, pad, flip or roll is computed inside that kernel, at the
// indices where the op reads it (operands broadcast there): one kernel, results equal the
// interpreter's on the CPU and in the GPU schedules. A gather takes only data movement and cheap
// arithmetic (it may read an element many times). Work that something else reads too stays a
// kernel of its own (computing it twice would repeat it).
TEST(Injective, ElementwiseProducersAreComputedWhereTheInjectiveOpReadsThem) {
  auto rng = test::rng(24);
  {  // cat along channels of relu(a) and sigmoid(b) * bias, beside a plain input
    dsl::Graph g;
    const int a = g.add_input({{2, 3, 4, 5}, DType::Float32});
    const int b = g.add_input({{2, 2, 4, 5}, DType::Float32});
    const int bias = g.add_input({{2, 1, 1}, DType::Float32});
    const int c = g.add_input({{2, 4, 4, 5}, DType::Float32});
    const int sb = g.add("mul", {g.add("sigmoid", {b}), bias});
    g.mark_output(g.add("cat", {g.add("relu", {a}), sb, c}, {{"dim", int64_t{1}}}));
    check_graph(g,
                {random_f32({2, 3, 4, 5}, rng), random_f32({2, 2, 4, 5}, rng), random_f32({2, 1, 1}, rng),
                 random_f32({2, 4, 4, 5}, rng)},
                {}, 1);
    const auto plan = sched::fuse(g);
    ASSERT_EQ(plan.groups.size(), 1u);
    EXPECT_EQ(plan.groups[0].inlined.size(), 3u) << plan.to_string(g);  // relu, sigmoid, mul
    EXPECT_NE(plan.to_string(g).find("computed where read: sigmoid#"), std::string::npos) << plan.to_string(g);
  }
  {  // cat along the innermost dim (a row split at the inputs' bounds), then a consumer
    dsl::Graph g;
    const int a = g.add_input({{2, 4, 3}, DType::Float32});
    const int b = g.add_input({{2, 4, 5}, DType::Float32});
    const int cat = g.add("cat", {g.add("relu", {a}), b}, {{"dim", int64_t{-1}}});
    g.mark_output(g.add("mul", {cat, cat}));
    check_graph(g, {random_f32({2, 4, 3}, rng), random_f32({2, 4, 5}, rng)}, {}, 1);
  }
  {  // pad of x * 2 + 1 (a transposed input), flip of exp(x)
    const jit::Tensor t = transposed_4x6(rng);
    dsl::Graph g;
    const int x = g.add_input({{4, 6}, DType::Float32});
    const int two = g.add_constant(2.0, DType::Float64, true);
    const int one = g.add_constant(1.0, DType::Float64, true);
    const int lin = g.add("add", {g.add("mul", {x, two}), one});
    g.mark_output(g.add("pad", {lin}, {{"pads", std::vector<int64_t>{1, 2, 0, 1}}, {"value", -1.0}}));
    g.mark_output(g.add("flip", {g.add("exp", {x})}, {{"dims", std::vector<int64_t>{1}}}));
    check_graph(g, {t}, {{1, 4}}, 2);
  }
  {  // nearest upsampling between a relu and a cat: relu and the row gather in one kernel, the
     // column gather (it checks indices the second gather might not read) inside the cat's
    dsl::Graph g;
    const int x = g.add_input({{1, 3, 4, 2}, DType::Float32});
    const int rows = g.add_input({{8}, DType::Int64});
    const int cols = g.add_input({{6}, DType::Int64});
    const int skip = g.add_input({{1, 8, 6, 2}, DType::Float32});
    const int up_h = g.add("index_select", {g.add("relu", {x}), rows}, {{"dim", int64_t{1}}});
    const int up = g.add("index_select", {up_h, cols}, {{"dim", int64_t{2}}});
    g.mark_output(g.add("cat", {up, skip}, {{"dim", int64_t{3}}}));
    check_graph(g,
                {random_f32({1, 3, 4, 2}, rng), random_index({8}, 3, rng), random_index({6}, 4, rng),
                 random_f32({1, 8, 6, 2}, rng)},
                {}, 2);
  }
  {  // an index_select whose checks a where or a cropping pad could skip stays a kernel of its own
    dsl::Graph g;
    const int x = g.add_input({{4, 3}, DType::Float32});
    const int idx = g.add_input({{2}, DType::Int64});
    const int m = g.add_input({{2, 1}, DType::Bool});
    const int z = g.add_input({{1, 3}, DType::Float32});
    const int sel = g.add("index_select", {x, idx}, {{"dim", int64_t{0}}});
    const int zero = g.add_constant(0.0, DType::Float64, true);
    g.mark_output(g.add("cat", {g.add("where", {m, sel, zero}), z}, {{"dim", int64_t{0}}}));
    EXPECT_EQ(sched::fuse(g).groups.size(), 2u) << sched::fuse(g).to_string(g);
    dsl::Graph h;
    const int hx = h.add_input({{4, 3}, DType::Float32});
    const int hidx = h.add_input({{2}, DType::Int64});
    const int hsel = h.add("index_select", {hx, hidx}, {{"dim", int64_t{0}}});
    h.mark_output(h.add("pad", {hsel}, {{"pads", std::vector<int64_t>{0, 0, -1, 0}}}));
    EXPECT_EQ(sched::fuse(h).groups.size(), 2u) << sched::fuse(h).to_string(h);
  }
  {  // an exp read repeatedly by a gather would be recomputed per read: it stays a kernel
    dsl::Graph g;
    const int x = g.add_input({{5, 3}, DType::Float32});
    const int idx = g.add_input({{9}, DType::Int64});
    g.mark_output(g.add("index_select", {g.add("exp", {x}), idx}, {{"dim", int64_t{0}}}));
    check_graph(g, {random_f32({5, 3}, rng), random_index({9}, 5, rng)}, {}, 2);
  }
  {  // relu(a) read by the cat and by a graph output: it stays a kernel
    dsl::Graph g;
    const int a = g.add_input({{2, 3, 4}, DType::Float32});
    const int b = g.add_input({{2, 3, 4}, DType::Float32});
    const int r = g.add("relu", {a});
    g.mark_output(g.add("cat", {r, b}, {{"dim", int64_t{0}}}));
    g.mark_output(r);
    check_graph(g, {random_f32({2, 3, 4}, rng), random_f32({2, 3, 4}, rng)}, {}, 2);
    EXPECT_TRUE(sched::fuse(g).groups[1].inlined.empty());
  }
}
