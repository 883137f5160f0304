// End to end through the compiler core: graph -> fusion -> schedule -> LLVM -> run, checked
// against direct computation; the GPU schedules of the same graphs run by the loop interpreter;
// every CUDA kernel compiled by NVRTC.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>

#include "dsl/graph_interpreter.h"
#include "dsl/interpreter.h"
#include "dsl/ir_visitor.h"
#include "jit/compile.h"
#include "jit/cuda/cuda_compile.h"
#include "scheduler/fusion.h"
#include "simt/cuda_kernel_check.h"
#include "test_util.h"

using namespace flow;
using dsl::DType;

namespace {

jit::Tensor random_tensor(const dsl::Shape& shape, std::mt19937_64& rng, float lo = -3.f, float hi = 3.f) {
  jit::Tensor t = jit::Tensor::empty(shape, DType::Float32);
  std::uniform_real_distribution<float> dist(lo, hi);
  float* p = static_cast<float*>(t.data());
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = dist(rng);
  return t;
}

const float* f32(const jit::Tensor& t) {
  return static_cast<const float*>(t.data());
}

dsl::Graph chain_graph(int64_t n, int* x, int* a, int* b) {
  dsl::Graph g;
  *x = g.add_input({{n}, DType::Float32}, "x");
  *a = g.add_input({{n}, DType::Float32}, "a");
  *b = g.add_input({{n}, DType::Float32}, "b");
  const int xa = g.add("mul", {*x, *a});
  const int xab = g.add("add", {xa, *b});
  const int r = g.add("relu", {xab});
  const int s = g.add("sigmoid", {*x});
  const int m = g.add("mul", {r, s});
  const int one = g.add_constant(1.0, DType::Float64, true);
  g.mark_output(g.add("add", {m, one}));
  return g;
}

dsl::Graph softmax_graph(int64_t rows, int64_t cols) {
  dsl::Graph g;
  const int x = g.add_input({{rows, cols}, DType::Float32}, "x");
  g.mark_output(g.add("softmax", {x}, {{"dim", int64_t{-1}}}));
  return g;
}

}  // namespace

#ifdef FLOW_HAS_LLVM

TEST(Pipeline, ChainIsOneKernelAndMatches) {
  auto rng = test::rng(1);
  for (int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{1031}, int64_t{100003}}) {
    int x, a, b;
    const dsl::Graph g = chain_graph(n, &x, &a, &b);
    auto exe = jit::compile(g, {}, {});
    EXPECT_EQ(exe->num_kernels(), 1);
    const auto tx = random_tensor({n}, rng), ta = random_tensor({n}, rng), tb = random_tensor({n}, rng);
    const auto out = exe->run({tx, ta, tb}).at(0);
    for (int64_t i = 0; i < n; ++i) {
      const float xv = f32(tx)[i];
      const float ref = std::max(0.f, xv * f32(ta)[i] + f32(tb)[i]) * (1.f / (1.f + std::exp(-xv))) + 1.f;
      ASSERT_NEAR(f32(out)[i], ref, 1e-5f * (1.f + std::fabs(ref))) << "n=" << n << " i=" << i;
    }
  }
}

TEST(Pipeline, SoftmaxIsOneKernelAndRowsSumToOne) {
  auto rng = test::rng(2);
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 1}, {3, 7}, {17, 4096}, {5, 1000}}) {
    const dsl::Graph g = softmax_graph(rows, cols);
    auto exe = jit::compile(g, {}, {});
    EXPECT_EQ(exe->num_kernels(), 1) << exe->explain(false);
    const auto tx = random_tensor({rows, cols}, rng);
    const auto out = exe->run({tx}).at(0);
    for (int64_t r = 0; r < rows; ++r) {
      double m = -INFINITY, s = 0;
      for (int64_t c = 0; c < cols; ++c) m = std::max(m, double(f32(tx)[r * cols + c]));
      for (int64_t c = 0; c < cols; ++c) s += std::exp(double(f32(tx)[r * cols + c]) - m);
      for (int64_t c = 0; c < cols; ++c) {
        const double ref = std::exp(double(f32(tx)[r * cols + c]) - m) / s;
        ASSERT_NEAR(f32(out)[r * cols + c], ref, 1e-6 + 1e-5 * ref) << rows << "x" << cols;
      }
    }
  }
}

TEST(Pipeline, NonContiguousInputUsesStrides) {
  auto rng = test::rng(3);
  // x is the transpose of a contiguous [5, 9] tensor: logical [9, 5], strides [1, 9].
  const auto base = random_tensor({5, 9}, rng);
  jit::Tensor xt = base;
  xt.sizes = {9, 5};
  xt.strides = {1, 9};
  dsl::Graph g;
  const int x = g.add_input({{9, 5}, DType::Float32});
  g.mark_output(g.add("exp", {x}));
  auto exe = jit::compile(g, {xt.strides}, {});
  const auto out = exe->run({xt}).at(0);
  for (int64_t i = 0; i < 9; ++i)
    for (int64_t j = 0; j < 5; ++j)
      ASSERT_NEAR(f32(out)[i * 5 + j], std::exp(f32(base)[j * 9 + i]), 1e-5 * std::exp(f32(base)[j * 9 + i]));
}

// Every run checks its inputs against the compiled signature (Executable::input_mismatch, the one
// definition shared with CUDA graph replays and the Python binding): dtype, shape, device and the
// compiled strides, where size-1 dims and empty tensors may have any.
TEST(Pipeline, InputsAreCheckedAgainstTheCompiledSignature) {
  auto rng = test::rng(4);
  dsl::Graph g;
  const int x = g.add_input({{9, 5}, DType::Float32});
  g.mark_output(g.add("neg", {x}));
  auto exe = jit::compile(g, {{1, 9}}, {});
  jit::Tensor xt = random_tensor({5, 9}, rng);
  xt.sizes = {9, 5};
  xt.strides = {1, 9};
  EXPECT_EQ(exe->input_mismatch(0, xt), "");
  auto message_of = [&](const std::vector<jit::Tensor>& inputs) {
    try {
      exe->run(inputs);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(message_of({random_tensor({9, 5}, rng)}),
            "input 0 has strides [5, 1] but the graph was compiled for strides [1, 9]");
  EXPECT_EQ(message_of({jit::Tensor::empty({9, 5}, DType::Float64)}),
            "input 0 is float64[9, 5] but the graph was compiled for float32[9, 5]");
  EXPECT_EQ(message_of({random_tensor({9, 4}, rng)}),
            "input 0 is float32[9, 4] but the graph was compiled for float32[9, 5]");
  EXPECT_EQ(message_of({jit::Tensor()}), "input 0 has no storage");
  EXPECT_EQ(message_of({xt, xt}), "expected 1 inputs, got 2");

  // A size-1 dim's stride and an empty tensor's strides do not matter.
  dsl::Graph g1;
  g1.mark_output(g1.add("neg", {g1.add_input({{1, 5}, DType::Float32})}));
  auto row = random_tensor({1, 5}, rng);
  row.strides = {77, 1};
  EXPECT_EQ(jit::compile(g1, {}, {})->run({row}).at(0).numel(), 5);
  dsl::Graph g0;
  g0.mark_output(g0.add("neg", {g0.add_input({{0, 5}, DType::Float32})}));
  auto none = jit::Tensor::empty({0, 5}, DType::Float32);
  none.strides = {1, 3};
  EXPECT_EQ(jit::compile(g0, {}, {})->run({none}).at(0).numel(), 0);
}

// Intermediates are dropped after their last use and their blocks reused while still in cache: in
// an unfused chain x -> a -> b -> c -> d, b dies after c, so d is written into b's block; a stays
// alive until its view's last use at the end; the results are unchanged.
TEST(Pipeline, IntermediatesAreReleasedAfterTheirLastUse) {
  auto rng = test::rng(5);
  using I = std::vector<int64_t>;
  const int64_t rows = 512, cols = 1024;  // 2 MiB per value: above the host cache's minimum block
  dsl::Graph g;
  const int x = g.add_input({{rows, cols}, DType::Float32}, "x");
  const int a = g.add("exp", {x});
  const int b = g.add("add", {a, g.add_constant(1.0, DType::Float64, true)});
  const int c = g.add("mul", {b, g.add_constant(2.0, DType::Float64, true)});
  const int d = g.add("sub", {c, g.add_constant(3.0, DType::Float64, true)});
  const int a_view = g.add("reshape", {a}, {{"shape", I{cols, rows}}});
  g.mark_output(g.add("add", {g.add("reshape", {d}, {{"shape", I{cols, rows}}}), a_view}));
  jit::CompileOptions opt;
  opt.fuse = false;
  auto exe = jit::compile(g, {}, opt);
  ASSERT_EQ(exe->num_kernels(), 5) << exe->explain(false);
  ASSERT_EQ(exe->plan().groups.size(), 5u);
  std::vector<const void*> out_ptr;
  std::vector<std::vector<bool>> alive;  // per kernel: is each of a, b, c bound when it starts
  const auto tx = random_tensor({rows, cols}, rng);
  const auto out = exe->run_with_hook({tx}, [&](size_t k, const std::vector<const jit::Tensor*>& values) {
    const int o = exe->plan().groups[k].outputs.at(0);
    out_ptr.push_back(values[o]->data());
    alive.push_back({values[a] != nullptr, values[b] != nullptr, values[c] != nullptr});
  })[0];
  ASSERT_EQ(out_ptr.size(), 5u);
  EXPECT_EQ(alive[3], (std::vector<bool>{true, false, true})) << "b is dropped after c, its last use";
  EXPECT_EQ(alive[4], (std::vector<bool>{true, false, false})) << "a lives until its view's last use";
  EXPECT_EQ(out_ptr[3], out_ptr[1]) << "d reuses b's block, the most recently freed";
  for (int64_t i = 0; i < rows * cols; ++i) {  // element i of the [cols, rows] output is x's i
    const double ea = std::exp(double(f32(tx)[i]));
    const double ref = (ea + 1) * 2 - 3 + ea;
    ASSERT_NEAR(f32(out)[i], ref, 1e-5 * (1 + std::fabs(ref))) << i;
  }
}

// Kernels load or compile on several threads (FLOW_COMPILE_THREADS); they still come out in plan
// order, and kernels that differ only in which graph values they compute (the two neg-exp branches)
// are one compiled kernel (dsl/canonical_names.h).
TEST(Pipeline, KernelsCompileInParallelInPlanOrder) {
  struct Threads {
    Threads() { setenv("FLOW_COMPILE_THREADS", "4", 1); }
    ~Threads() { unsetenv("FLOW_COMPILE_THREADS"); }
  } threads;
  auto rng = test::rng(6);
  const int64_t n = 4099;
  dsl::Graph g;
  const int x = g.add_input({{n}, DType::Float32}, "x");
  const int y = g.add_input({{n}, DType::Float32}, "y");
  const int a = g.add("exp", {g.add("neg", {x})});
  const int b = g.add("exp", {g.add("neg", {y})});
  g.mark_output(g.add("add", {a, b}));
  jit::CompileOptions opt;
  opt.fuse = false;
  auto exe = jit::compile(g, {}, opt);
  const auto& kernels = exe->kernels();
  ASSERT_EQ(kernels.size(), 5u) << exe->explain(false);
  const std::vector<std::string> order = {"neg", "exp", "neg", "exp", "add"};
  for (size_t k = 0; k < kernels.size(); ++k)
    EXPECT_NE(kernels[k]->scheduled.func.name.find(order[k]), std::string::npos)
        << k << ": " << kernels[k]->scheduled.func.name;
  EXPECT_EQ(kernels[0].get(), kernels[2].get()) << "identical kernels compiled twice";
  EXPECT_EQ(kernels[1].get(), kernels[3].get()) << "identical kernels compiled twice";
  EXPECT_NE(kernels[0].get(), kernels[1].get());
  const auto tx = random_tensor({n}, rng), ty = random_tensor({n}, rng);
  const auto out = exe->run({tx, ty}).at(0);
  for (int64_t i = 0; i < n; ++i) {
    const double ref = std::exp(-double(f32(tx)[i])) + std::exp(-double(f32(ty)[i]));
    ASSERT_NEAR(f32(out)[i], ref, 1e-5 * (1 + std::fabs(ref))) << i;
  }
}

#endif  // FLOW_HAS_LLVM

// The GPU schedules, run by the reference interpreter, give the same answers; NVRTC compiles them.
TEST(Pipeline, GpuSchedulesInterpretCorrectlyAndCompile) {
  auto rng = test::rng(4);
  int x, a, b;
  const int64_t n = 3001;
  std::vector<dsl::Graph> graphs = {chain_graph(n, &x, &a, &b), softmax_graph(6, 333)};
  for (const auto& g : graphs) {
    const sched::FusionPlan plan = sched::fuse(g);
    ASSERT_EQ(plan.groups.size(), 1u);
    const auto ki = sched::specialize(g, plan.groups[0], {}, true);
    const auto& s = sched::scheduler_for(ki, dsl::Target::CUDA);
    const auto sk = s.schedule(ki, s.heuristics(ki, dsl::Target::CUDA), dsl::Target::CUDA);
    const auto cpu_sk = s.schedule(ki, s.heuristics(ki, dsl::Target::CPU), dsl::Target::CPU);
    // Inputs and two outputs (GPU and CPU schedule, both interpreted).
    std::vector<jit::Tensor> ins;
    for (int v : g.inputs()) ins.push_back(random_tensor(g.value(v).type.shape, rng));
    const auto& out_t = g.value(g.outputs()[0]).type;
    jit::Tensor o_gpu = jit::Tensor::empty(out_t.shape, DType::Float32);
    jit::Tensor o_cpu = jit::Tensor::empty(out_t.shape, DType::Float32);
    for (int64_t i = 0; i < o_gpu.numel(); ++i) static_cast<float*>(o_gpu.data())[i] = NAN;  // poison
    auto args_for = [&](const sched::ScheduledKernel& k, jit::Tensor& out) {
      std::vector<dsl::ArgValue> av;
      for (const auto& arg : k.args) {
        dsl::ArgValue v;
        if (arg.kind == sched::KernelArg::Kind::Buffer) {
          v.ptr = arg.value == g.outputs()[0] ? out.data() : nullptr;
          for (size_t i = 0; i < g.inputs().size(); ++i)
            if (g.inputs()[i] == arg.value) v.ptr = ins[i].data();
        } else if (arg.kind == sched::KernelArg::Kind::Int) {
          v.i64 = arg.i;
        } else {
          v.f64 = arg.f;
        }
        av.push_back(v);
      }
      return av;
    };
    dsl::interpret(sk.func, args_for(sk, o_gpu));
    dsl::interpret(cpu_sk.func, args_for(cpu_sk, o_cpu));
    std::vector<test::BufferSpan> spans;
    for (const auto& arg : sk.args) {
      spans.emplace_back();
      if (arg.kind != sched::KernelArg::Kind::Buffer) continue;
      if (arg.value == g.outputs()[0]) spans.back() = test::span_of(o_gpu);
      for (size_t i = 0; i < g.inputs().size(); ++i)
        if (g.inputs()[i] == arg.value) spans.back() = test::span_of(ins[i]);
    }
    test::expect_cuda_text_matches_interpreter(sk.func, args_for(sk, o_gpu), spans);
    for (int64_t i = 0; i < o_gpu.numel(); ++i)
      ASSERT_NEAR(f32(o_gpu)[i], f32(o_cpu)[i], 1e-6f + 1e-5f * std::fabs(f32(o_cpu)[i])) << sk.func.name << " i=" << i;
    const auto compiled = jit::cuda::cuda_compile(sk.func, "sm_90");
    EXPECT_NE(compiled.ptx.find(".entry"), std::string::npos);
    if (plan.groups[0].kind == sched::GroupKind::Pointwise) {
      // The scheduled contiguous float32 chain moves 16 bytes per load and store.
      EXPECT_NE(compiled.ptx.find(".v4.f32"), std::string::npos) << compiled.ptx;
      EXPECT_NE(compiled.ptx.find("st.global.v4.f32"), std::string::npos) << compiled.ptx;
    }
    EXPECT_FALSE(compiled.cubin.empty());
    EXPECT_EQ(compiled.ptx.find("ld.local"), std::string::npos) << compiled.ptx;
  }
}

namespace {

// Casts to bfloat16 in a kernel's loop nest, less its stores (each store rounds once).
int bf16_roundings(const dsl::Stmt& body) {
  struct Count : dsl::IRVisitor {
    int casts = 0, stores = 0;
    void visit_Cast(const dsl::Cast* op) override {
      casts += op->type == DType::BFloat16;
      dsl::IRVisitor::visit_Cast(op);
    }
    void visit_Store(const dsl::Store* op) override {
      ++stores;
      dsl::IRVisitor::visit_Store(op);
    }
  } c;
  c.visit(body);
  return c.casts - c.stores;
}

// Roundings to bfloat16 beyond the stores in the one kernel of `g`.
int bf16_roundings_of(const dsl::Graph& g) {
  const sched::FusionPlan plan = sched::fuse(g);
  EXPECT_EQ(plan.groups.size(), 1u);
  sched::GroupLayouts gl;
  const auto ki = sched::specialize(g, plan.groups[0], gl, true);
  const auto& s = sched::scheduler_for(ki, dsl::Target::CPU);
  return bf16_roundings(s.schedule(ki, s.heuristics(ki, dsl::Target::CPU), dsl::Target::CPU).func.body);
}

}  // namespace

// A half-precision op's result is rounded to its storage type before the next op reads it, as
// eager torch stores it; where the value is already exact in that type (a selection, max or
// negation of values read in it) the rounding is left out, so chains like relu -> max pooling do no
// rounding per op. An op that computes new values (exp) is still rounded.
TEST(Pipeline, ExactHalfValuesAreNotRoundedAgain) {
  auto chain = [](bool with_exp) {
    dsl::Graph g;
    const int x = g.add_input({{4, 64}, DType::BFloat16});
    const int y = g.add_input({{4, 64}, DType::BFloat16});
    int h = g.add("maximum", {g.add("relu", {x}), y});
    h = g.add("neg", {h});
    if (with_exp) h = g.add("exp", {h});
    g.mark_output(g.add("maximum", {h, x}));
    return g;
  };
  const int exact = bf16_roundings_of(chain(false));
  const int with_exp = bf16_roundings_of(chain(true));
  EXPECT_EQ(exact, 0);  // relu, maximum, neg, maximum: nothing to round but the store
  EXPECT_GT(with_exp, 0);
  // Values: the exact chain against the interpreter's op-by-op rounding.
  const dsl::Graph g = chain(false);
  auto rng = test::rng(61);
  std::vector<jit::Tensor> ins;
  std::vector<dsl::HostTensor> host;
  for (int i = 0; i < 2; ++i) {
    jit::Tensor t = jit::Tensor::empty({4, 64}, DType::BFloat16);
    const auto bytes = test::random_bytes(DType::BFloat16, 256, rng);
    std::memcpy(t.data(), bytes.data(), 512);
    dsl::HostTensor h{{{4, 64}, DType::BFloat16}, {}};
    for (int e = 0; e < 256; ++e) h.data.push_back(dsl::bf16_bits_to_float(static_cast<uint16_t*>(t.data())[e]));
    ins.push_back(t);
    host.push_back(h);
  }
#ifdef FLOW_HAS_LLVM
  const auto out = jit::compile(g, {}, {})->run(ins);
  const auto ref = dsl::interpret_graph(g, host);
  for (int e = 0; e < 256; ++e) {
    const float got = dsl::bf16_bits_to_float(static_cast<const uint16_t*>(out[0].data())[e]);
    const double want = ref[0].data[static_cast<size_t>(e)];
    EXPECT_TRUE(got == want || (std::isnan(got) && std::isnan(want))) << e << ": " << got << " vs " << want;
  }
#endif
}

// An injective op reads its input at computed indices through the input's own strides, which are
// constants in its index arithmetic, in eager kernels too (the group is shape-specialized anyway):
// so a unit stride is a contiguous read that vectorizes (a run-time stride made it a gather, and
// half types have none on x86). And a pad leaves dims it does not pad unclamped, so the contiguous
// channel dim of an NHWC max pool's pad stays a plain index.
TEST(Pipeline, InjectiveReadsAlongUnitStridesAreContiguous) {
  dsl::Graph g;
  const int x = g.add_input({{2, 5, 6, 64}, DType::BFloat16});
  g.mark_output(g.add("pad", {x}, {{"pads", std::vector<int64_t>{0, 0, 1, 1, 1, 1}}, {"value", -1e30}}));
  const sched::FusionPlan plan = sched::fuse(g);
  ASSERT_EQ(plan.groups.size(), 1u);
  for (const bool compiled_graph : {false, true}) {
    sched::GroupLayouts gl;
    const auto ki = sched::specialize(g, plan.groups[0], gl, compiled_graph);
    EXPECT_TRUE(ki.shape_specialized);
    for (const dsl::Target t : {dsl::Target::CPU, dsl::Target::CUDA}) {
      const auto& s = sched::scheduler_for(ki, t);
      const auto sk = s.schedule(ki, s.heuristics(ki, t), t);
      for (const auto& p : sk.func.params) EXPECT_NE(p.name.rfind("o_", 0), 0u) << p.name;
      // Strides 1920, 384 and 64 in the index arithmetic; the unit stride of dim 3 is no multiply.
      const std::string nest = dsl::to_string(sk.func);
      EXPECT_NE(nest.find("* 1920"), std::string::npos) << nest;
      EXPECT_NE(nest.find("* 384"), std::string::npos) << nest;
      EXPECT_NE(nest.find("* 64"), std::string::npos) << nest;
    }
  }
}

#ifdef FLOW_HAS_LLVM
// Short innermost dims (an NHWC image with 3 channels next to per-channel constants, or an
// index_select along W, so W and C do not coalesce) run as one flat loop over the last two dims;
// the uint8 image is then read at the flat index (a vector load, no gather), and the results equal
// the interpreter's, for sizes whose flat loop ends mid-vector and mid-tile.
TEST(Pipeline, ShortInnermostDimsRunAsOneFlatLoop) {
  for (const bool flip : {false, true}) {
    for (const int64_t w : {int64_t{1}, int64_t{5}, int64_t{37}, int64_t{11000}}) {
      const dsl::Shape shape = {2, 3, w, 3};
      dsl::Graph g;
      const int x = g.add_input({shape, DType::UInt8}, "x");
      const int mean = g.add_input({{3}, DType::Float32}, "mean");
      const int rev = g.add_input({{w}, DType::Int64}, "rev");
      int src = x;
      if (flip) src = g.add("index_select", {x, rev}, {{"dim", int64_t{2}}});
      const int f = g.add("cast", {src}, {{"dtype", std::string("float32")}});
      g.mark_output(g.add("mul", {g.add("sub", {f, mean}), mean}));
      auto rng = test::rng(91 + static_cast<uint64_t>(w));
      jit::Tensor xt = jit::Tensor::empty(shape, DType::UInt8);
      jit::Tensor mt = random_tensor({3}, rng);
      jit::Tensor rt = jit::Tensor::empty({w}, DType::Int64);
      dsl::HostTensor xh{{shape, DType::UInt8}, {}}, mh{{{3}, DType::Float32}, {}}, rh{{{w}, DType::Int64}, {}};
      for (int64_t i = 0; i < xt.numel(); ++i) {
        static_cast<uint8_t*>(xt.data())[i] = static_cast<uint8_t>(rng());
        xh.data.push_back(static_cast<uint8_t*>(xt.data())[i]);
      }
      for (int64_t i = 0; i < 3; ++i) mh.data.push_back(f32(mt)[i]);
      for (int64_t i = 0; i < w; ++i) {
        static_cast<int64_t*>(rt.data())[i] = w - 1 - i;
        rh.data.push_back(static_cast<double>(w - 1 - i));
      }
      auto exe = jit::compile(g, {}, {});
      const auto out = exe->run({xt, mt, rt}).at(0);
      const auto ref = dsl::interpret_graph(g, {xh, mh, rh});
      for (int64_t i = 0; i < out.numel(); ++i)
        ASSERT_EQ(f32(out)[i], static_cast<float>(ref[0].data[static_cast<size_t>(i)]))
            << "flip " << flip << " w " << w << " at " << i;
      if (w > 1) {  // one flat loop over W and C: the channel is the flat index modulo 3
        const std::string nest = dsl::to_string(exe->kernels().at(0)->scheduled.func);
        EXPECT_NE(nest.find(" % 3]"), std::string::npos) << nest;
      }
    }
  }
}
#endif

#ifdef FLOW_HAS_LLVM
// Reductions over strided rows whose neighbours are adjacent in memory (a mean over H and W of
// channels-last data, a sum over dim 0) take the column schedule (scheduler/column_reduction.h):
// SIMD across adjacent rows, tiles narrower than the vector width for small kept extents, the
// last tile overlapping its neighbour, blocked sums. Results equal the interpreter's for mean, sum
// and a row op, var (two reductions, the second reading the first's per-lane result), amax with
// NaN, and kept extents of 2 to 40 (overlaps at every tile width) and rows longer than a block; a
// contiguous row keeps the row schedule.
TEST(Pipeline, StridedRowsReduceAcrossAdjacentRows) {
  auto rng = test::rng(77);
  for (const dsl::Shape& shape :
       {dsl::Shape{1, 5, 7, 32}, dsl::Shape{2, 3, 300, 19}, dsl::Shape{3, 1, 2, 3}, dsl::Shape{1, 4, 9, 9},
        dsl::Shape{2, 2, 3, 40}, dsl::Shape{2, 3, 3, 2}, dsl::Shape{1, 2, 5, 6}}) {
    for (const std::string op : {"mean", "sum", "var", "amax"}) {
      for (const bool nhwc : {true, false}) {
        dsl::Graph g;
        const int x = g.add_input({shape, DType::Float32}, "x");
        // NHWC data viewed as NCHW, reduced over H and W; or plain NCHW data reduced over its
        // last two dims (contiguous rows).
        const int v = nhwc ? g.add("permute", {x}, {{"dims", std::vector<int64_t>{0, 3, 1, 2}}}) : x;
        int r = g.add(op, {v}, {{"dims", std::vector<int64_t>{2, 3}}, {"keepdim", true}});
        if (op == "sum") r = g.add("mul", {r, g.add_constant(2.0, DType::Float64, true)});
        g.mark_output(r);
        jit::Tensor xt = random_tensor(shape, rng);
        if (op == "amax") static_cast<float*>(xt.data())[xt.numel() / 2] = NAN;
        dsl::HostTensor xh{{shape, DType::Float32}, {}};
        for (int64_t i = 0; i < xt.numel(); ++i) xh.data.push_back(f32(xt)[i]);
        auto exe = jit::compile(g, {}, {});
        const auto out = exe->run({xt}).at(0);
        const auto ref = dsl::interpret_graph(g, {xh}, /*float64_math=*/true);
        const std::string what = op + (nhwc ? " nhwc " : " rows ") + dsl::shape_str(shape);
        ASSERT_EQ(out.numel(), static_cast<int64_t>(ref[0].data.size())) << what;
        for (int64_t i = 0; i < out.numel(); ++i) {
          const double want = ref[0].data[static_cast<size_t>(i)];
          const double got = f32(out)[i];
          if (std::isnan(want)) {
            EXPECT_TRUE(std::isnan(got)) << what << " at " << i;
          } else {
            // A float32 sum of n terms of |x| <= 3 (doubled) may cancel: its error scales with n.
            const double n = static_cast<double>(shape[1] * shape[2]);
            EXPECT_NEAR(got, want, 2e-5 * (1 + std::fabs(want)) + (op == "sum" ? 6e-6 * n : 0.0))
                << what << " at " << i;
          }
        }
        bool column = false;
        for (const auto& k : exe->kernels()) {
          const std::string nest = dsl::to_string(k->scheduled.func);
          column = column || nest.find("min(t % ") != std::string::npos;  // a tile's first column
        }
        EXPECT_EQ(column, nhwc && shape[3] > 1) << what << "\n" << exe->explain(false);
      }
    }
  }
}
#endif
