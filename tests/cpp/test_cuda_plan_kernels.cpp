// Every generated kernel of whole CUDA plans, run as CUDA text on the host SIMT emulator
// (tests/cpp/simt) against the loop interpreter. The graphs are compiled for sm_90 exactly as for a
// device (NVRTC, channels-last half convolutions, batch norms folded into frozen weights, library
// epilogues), so these are the kernels a GPU run of such models launches, including the
// parameter-only ones; only the cuDNN and cuBLASLt calls between them do not run here. Each kernel
// gets its own random buffers, as large as its strides reach.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "dsl/graph.h"
#include "jit/compile.h"
#include "simt/cuda_kernel_check.h"
#include "test_util.h"

namespace flow {
namespace {

using dsl::DType;
using dsl::Shape;

// The elements a kernel may index in one buffer: the reach of its coalesced strides over the
// kernel's dims, of its own strides over its value's dims (injective inputs), and at least the
// value's element count.
int64_t buffer_extent(const sched::KernelInstance& ki, const sched::KernelBuffer& b) {
  const Shape& shape = ki.graph->value(b.value).type.shape;
  int64_t extent = dsl::numel(shape);
  std::vector<int64_t> dims = ki.kept;
  dims.insert(dims.end(), ki.reduced.begin(), ki.reduced.end());
  auto reach = [](const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides) -> int64_t {
    int64_t r = 0;
    for (size_t d = 0; d < sizes.size(); ++d) {
      if (sizes[d] == 0) return 0;
      r += (sizes[d] - 1) * std::max<int64_t>(strides[d], 0);
    }
    return r + 1;
  };
  if (b.strides.size() == dims.size()) extent = std::max(extent, reach(dims, b.strides));
  if (b.own_strides.size() == shape.size()) extent = std::max(extent, reach(shape, b.own_strides));
  return extent;
}

// Compiles `g` for CUDA and checks each of its kernels on the emulator; returns how many ran.
int check_plan_kernels(const dsl::Graph& g, const std::vector<bool>& frozen, const std::string& what) {
  jit::CompileOptions opt;
  opt.target = dsl::Target::CUDA;
  opt.cuda_arch = "sm_90";
  opt.frozen_inputs = frozen;
  const std::shared_ptr<jit::Executable> exe = jit::compile(g, {}, opt);
  auto rng = test::rng(std::hash<std::string>()(what) % 100000);
  int ran = 0;
  for (size_t k = 0; k < exe->kernels().size(); ++k) {
    const sched::KernelInstance& ki = exe->instance(k);
    if (std::any_of(ki.kept.begin(), ki.kept.end(), [](int64_t s) { return s == 0; })) continue;
    const dsl::LoweredFunc& f = exe->kernels()[k]->scheduled.func;
    const std::vector<sched::KernelArg>& args = exe->kernel_args(k);
    std::vector<std::vector<unsigned char>> buffers;
    buffers.reserve(args.size());
    std::vector<dsl::ArgValue> av(args.size());
    std::vector<test::BufferSpan> spans(args.size());
    for (size_t i = 0; i < args.size(); ++i) {
      const sched::KernelArg& a = args[i];
      if (a.kind == sched::KernelArg::Kind::Int) {
        av[i].i64 = a.i;
      } else if (a.kind == sched::KernelArg::Kind::Float) {
        av[i].f64 = a.f;
      } else {
        const sched::KernelBuffer* b = ki.buffer_for(a.value);
        if (!b) {
          ADD_FAILURE() << what << ": kernel " << f.name << " has no buffer for value " << a.value;
          return ran;
        }
        // Finite inputs: a NaN anywhere in a normalized row makes the whole row NaN either way.
        buffers.push_back(test::random_bytes(f.params[i].dtype, buffer_extent(ki, *b), rng, /*specials=*/false));
        av[i].ptr = buffers.back().data();
        spans[i] = {buffers.back().data(), buffers.back().size()};
      }
    }
    test::expect_cuda_text_matches_interpreter(f, av, spans, what + ", kernel " + std::to_string(k));
    ++ran;
  }
  return ran;
}

int bn(dsl::Graph& g, int x, int64_t c) {
  std::vector<int> p = {x};
  for (const char* name : {"mean", "var", "gamma", "beta"}) {
    (void)name;
    p.push_back(g.add_input({{c}, DType::Float32}));
  }
  return g.add("batch_norm", p, {{"eps", 1e-5}, {"training", false}});
}

int conv(dsl::Graph& g, int x, int64_t cin, int64_t cout, int64_t k, int64_t stride, int64_t pad) {
  const int w = g.add_input({{cout, cin, k, k}, DType::Float32});
  return g.add("conv2d", {x, w}, {{"stride", stride}, {"padding", pad}});
}

// A ResNet-50 stem and bottleneck block with a projection shortcut, global pooling and the
// classifier, at batch 2 and 32x32 pixels.
dsl::Graph resnet_graph(const dsl::AutocastPolicy* amp) {
  dsl::Graph g;
  if (amp) g.set_autocast(*amp);
  const int x = g.add_input({{2, 3, 32, 32}, DType::Float32}, "x");
  int h = g.add("relu", {bn(g, conv(g, x, 3, 64, 7, 2, 3), 64)});  // 16x16
  int y = g.add("relu", {bn(g, conv(g, h, 64, 64, 1, 1, 0), 64)});
  y = g.add("relu", {bn(g, conv(g, y, 64, 64, 3, 1, 1), 64)});
  y = bn(g, conv(g, y, 64, 256, 1, 1, 0), 256);
  const int shortcut = bn(g, conv(g, h, 64, 256, 1, 1, 0), 256);
  h = g.add("relu", {g.add("add", {y, shortcut})});
  const int pooled = g.add("mean", {h}, {{"dims", std::vector<int64_t>{2, 3}}, {"keepdim", false}});
  const int fw = g.add_input({{10, 256}, DType::Float32});
  const int fb = g.add_input({{10}, DType::Float32});
  g.mark_output(g.add("linear", {pooled, fw, fb}));
  return g;
}

int linear(dsl::Graph& g, int x, int64_t in, int64_t out) {
  const int w = g.add_input({{out, in}, DType::Float32});
  const int b = g.add_input({{out}, DType::Float32});
  return g.add("linear", {x, w, b});
}

int layer_norm(dsl::Graph& g, int x, int64_t d) {
  const int w = g.add_input({{d}, DType::Float32});
  const int b = g.add_input({{d}, DType::Float32});
  return g.add("layer_norm", {x, w, b}, {{"normalized_shape", Shape{d}}, {"eps", 1e-5}});
}

// A pre-norm transformer encoder layer: batch 2, 64 tokens, width 128, 4 heads, MLP 256.
dsl::Graph encoder_graph(const dsl::AutocastPolicy* amp) {
  const int64_t B = 2, S = 64, D = 128, H = 4, Dh = 32, F = 256;
  dsl::Graph g;
  if (amp) g.set_autocast(*amp);
  const int x = g.add_input({{B, S, D}, DType::Float32}, "x");
  const int h = layer_norm(g, x, D);
  auto heads = [&](int t, std::vector<int64_t> perm) {
    t = g.add("reshape", {t}, {{"shape", Shape{B, S, H, Dh}}});
    return g.add("permute", {t}, {{"dims", perm}});
  };
  const int q = heads(linear(g, h, D, D), {0, 2, 1, 3});
  const int kt = heads(linear(g, h, D, D), {0, 2, 3, 1});
  const int v = heads(linear(g, h, D, D), {0, 2, 1, 3});
  int s = g.add("matmul", {q, kt});
  s = g.add("mul", {s, g.add_constant(1.0 / std::sqrt(double(Dh)), DType::Float64, true)});
  const int p = g.add("softmax", {s}, {{"dim", int64_t{-1}}});
  int c = g.add("permute", {g.add("matmul", {p, v})}, {{"dims", std::vector<int64_t>{0, 2, 1, 3}}});
  c = g.add("reshape", {c}, {{"shape", Shape{B, S, D}}});
  const int x1 = g.add("add", {x, linear(g, c, D, D)});
  int m = g.add("gelu", {linear(g, layer_norm(g, x1, D), D, F)});
  g.mark_output(g.add("add", {x1, linear(g, m, F, D)}));
  return g;
}

std::vector<bool> all_but_first(const dsl::Graph& g) {
  std::vector<bool> frozen(g.inputs().size(), true);
  frozen[0] = false;
  return frozen;
}

TEST(CudaPlanKernels, ResNetBlockKernelsRunOnTheSimtEmulator) {
  FLOW_REQUIRE_NVRTC();
  const dsl::AutocastPolicy f16{DType::Float16, dsl::AutocastDevice::CUDA};
  const dsl::AutocastPolicy bf16{DType::BFloat16, dsl::AutocastDevice::CUDA};
  for (const dsl::AutocastPolicy* amp : {static_cast<const dsl::AutocastPolicy*>(nullptr), &f16, &bf16}) {
    const std::string what = std::string("resnet ") + (amp ? dsl::dtype_name(amp->dtype) : "float32");
    const dsl::Graph g = resnet_graph(amp);
    EXPECT_GT(check_plan_kernels(g, all_but_first(g), what), 0) << what;
  }
}

TEST(CudaPlanKernels, EncoderLayerKernelsRunOnTheSimtEmulator) {
  FLOW_REQUIRE_NVRTC();
  const dsl::AutocastPolicy f16{DType::Float16, dsl::AutocastDevice::CUDA};
  const dsl::AutocastPolicy bf16{DType::BFloat16, dsl::AutocastDevice::CUDA};
  for (const dsl::AutocastPolicy* amp : {static_cast<const dsl::AutocastPolicy*>(nullptr), &f16, &bf16}) {
    const std::string what = std::string("encoder ") + (amp ? dsl::dtype_name(amp->dtype) : "float32");
    const dsl::Graph g = encoder_graph(amp);
    EXPECT_GT(check_plan_kernels(g, all_but_first(g), what), 0) << what;
  }
}

// How many vector loads a printed kernel declares ("= flow::load_vec<").
int vector_loads(const std::string& source) {
  int n = 0;
  for (size_t at = source.find("= flow::load_vec<"); at != std::string::npos;
       at = source.find("= flow::load_vec<", at + 1))
    ++n;
  return n;
}

// where(m, x, y) reads its inputs at the domain's index, bound before the select
// (scheduler/lowering.h), so all three are vector loads; cat's inputs are read under its select's
// arms at indices valid only on the chosen side, so they stay scalar (the store stays a vector),
// and the fenced emulator runs of the check fault on any read outside them.
TEST(CudaPlanKernels, WhereReadsVectorsAndCatReadsOnlyItsChosenInput) {
  FLOW_REQUIRE_NVRTC();
  jit::CompileOptions opt;
  opt.target = dsl::Target::CUDA;
  opt.cuda_arch = "sm_90";
  {
    dsl::Graph g;
    const int m = g.add_input({{4099}, DType::Bool});
    const int x = g.add_input({{4099}, DType::Float32});
    const int y = g.add_input({{4099}, DType::Float32});
    g.mark_output(g.add("where", {m, x, y}));
    const auto exe = jit::compile(g, {}, opt);
    ASSERT_EQ(exe->kernels().size(), 1u);
    EXPECT_EQ(vector_loads(exe->kernels()[0]->cuda_source), 3) << exe->kernels()[0]->cuda_source;
    EXPECT_EQ(check_plan_kernels(g, {false, false, false}, "where"), 1);
  }
  {
    dsl::Graph g;
    const int a = g.add_input({{1000}, DType::Float32});
    const int b = g.add_input({{1003}, DType::Float32});
    g.mark_output(g.add("cat", {a, b}, {{"dim", int64_t{0}}}));
    const auto exe = jit::compile(g, {}, opt);
    ASSERT_EQ(exe->kernels().size(), 1u);
    const std::string& src = exe->kernels()[0]->cuda_source;
    EXPECT_EQ(vector_loads(src), 0) << src;
    EXPECT_NE(src.find("flow::store_vec<"), std::string::npos) << src;
    EXPECT_EQ(check_plan_kernels(g, {false, false}, "cat"), 1);
  }
}

// The benchmark's row operations at widths that take the multi-chunk reduction paths (a row far
// longer than a block) and its pointwise chain past 2^20 elements, in float32 and half types.
TEST(CudaPlanKernels, WideRowsAndLongChainsRunOnTheSimtEmulator) {
  FLOW_REQUIRE_NVRTC();
  for (const DType t : {DType::Float32, DType::Float16, DType::BFloat16}) {
    const std::string tn = dsl::dtype_name(t);
    {
      dsl::Graph g;
      g.mark_output(g.add("softmax", {g.add_input({{3, 30011}, t})}, {{"dim", int64_t{-1}}}));
      EXPECT_GT(check_plan_kernels(g, {false}, "softmax 30011 " + tn), 0);
    }
    {
      dsl::Graph g;
      const int x = g.add_input({{5, 8192}, t});
      const int w = g.add_input({{8192}, t});
      const int b = g.add_input({{8192}, t});
      g.mark_output(g.add("layer_norm", {x, w, b}, {{"normalized_shape", Shape{8192}}, {"eps", 1e-5}}));
      EXPECT_GT(check_plan_kernels(g, {false, false, false}, "layer_norm 8192 " + tn), 0);
    }
    {
      dsl::Graph g;
      int y = g.add_input({{(int64_t{1} << 20) + 3}, t});
      const int x = y;
      y = g.add("add", {g.add("mul", {y, g.add_constant(2.0, DType::Float64, true)}),
                        g.add_constant(1.0, DType::Float64, true)});
      y = g.add("mul", {g.add("relu", {y}), x});
      g.mark_output(g.add("tanh", {y}));
      EXPECT_GT(check_plan_kernels(g, {false}, "chain " + tn), 0);
    }
  }
}

}  // namespace
}  // namespace flow
