// The channels-last layout pass (scheduler/channels_last.h): which convolutions and ops go NHWC,
// what seeds the pass (NHWC inputs, permutes of [N, H, W, C] values), what keeps values NCHW, and
// that the rewritten graphs compute what the originals do, compiled and interpreted.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "dsl/graph_interpreter.h"
#include "jit/compile.h"
#include "library_test_util.h"
#include "scheduler/channels_last.h"
#include "test_util.h"

using namespace flow;
using namespace flow::libtest;

// As in test_library_ops.cpp: library epilogue fusion on, so the plans match those tests'.
static const bool kEpiloguesOn = (setenv("FLOW_LIBRARY_EPILOGUES", "1", 1), true);

namespace flow {
namespace {

// A ResNet-like stem and block: conv + per-channel bias + relu, a -inf pad and the 3x3/2 max pool as
// strided slices, a 3x3 conv, a 1x1 conv, a residual add + relu and a spatial mean. `nchw_reader`
// adds a full-size NCHW input to the block's output, which keeps the convolutions feeding it NCHW.
dsl::Graph resnet_like(int64_t n, int64_t h, int64_t w, bool nchw_reader) {
  dsl::Graph g;
  const int x = g.add_input({{n, 3, h, w}, DType::Float32});
  const int w1 = g.add_input({{8, 3, 5, 5}, DType::Float32});
  const int b1 = g.add_input({{8, 1, 1}, DType::Float32});
  const int w2 = g.add_input({{8, 8, 3, 3}, DType::Float32});
  const int w3 = g.add_input({{8, 8, 1, 1}, DType::Float32});
  const int y =
      g.add("relu", {g.add("add", {g.add("conv2d", {x, w1}, {{"stride", int64_t{2}}, {"padding", int64_t{2}}}), b1})});
  const int p = g.add("pad", {y}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"value", -INFINITY}});
  const int64_t ph = g.value(p).type.shape[2], pw = g.value(p).type.shape[3];
  const int64_t oh = (ph - 3) / 2 + 1, ow = (pw - 3) / 2 + 1;
  int pool = -1;
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t j = 0; j < 3; ++j) {
      const int rows =
          g.add("slice", {p}, {{"dim", int64_t{2}}, {"start", i}, {"end", i + (oh - 1) * 2 + 1}, {"step", int64_t{2}}});
      const int at = g.add("slice", {rows},
                           {{"dim", int64_t{-1}}, {"start", j}, {"end", j + (ow - 1) * 2 + 1}, {"step", int64_t{2}}});
      pool = pool < 0 ? at : g.add("maximum", {pool, at});
    }
  }
  const int z = g.add("relu", {g.add("conv2d", {pool, w2}, {{"padding", int64_t{1}}})});
  int out = g.add("relu", {g.add("add", {g.add("conv2d", {z, w3}), pool})});
  if (nchw_reader) {
    const int other = g.add_input({g.value(out).type.shape, DType::Float32});
    out = g.add("mul", {out, other});
  }
  g.mark_output(g.add("mean", {out}, {{"dims", std::vector<int64_t>{2, 3}}, {"keepdim", false}}));
  g.mark_output(z);  // an NHWC value returned: the caller sees its NCHW view
  return g;
}

TEST(ChannelsLast, ConvolutionsAndTheOpsBetweenThemRunOnNhwc) {
  REQUIRE_BACKENDS();
  auto rng = test::rng(71);
  for (const auto& [n, h, w] : std::vector<std::array<int64_t, 3>>{{1, 17, 15}, {2, 24, 24}, {3, 9, 30}}) {
    const dsl::Graph g = resnet_like(n, h, w, false);
    const sched::ChannelsLastResult r = sched::to_channels_last(g);
    EXPECT_EQ(r.convolutions, 3);
    EXPECT_EQ(r.ops, 2 + 1 + 18 + 8 + 1 + 2);  // add, relu; pad; slices; maximums; relu; add, relu
    // The rewrite is an identity: the interpreter gives the same values on both graphs.
    std::vector<jit::Tensor> in{random_tensor({n, 3, h, w}, rng), random_tensor({8, 3, 5, 5}, rng),
                                random_tensor({8, 1, 1}, rng), random_tensor({8, 8, 3, 3}, rng),
                                random_tensor({8, 8, 1, 1}, rng)};
    std::vector<dsl::HostTensor> hin;
    for (const auto& t : in) hin.push_back(host_of(t));
    const auto a = dsl::interpret_graph(g, hin, true), b = dsl::interpret_graph(r.graph, hin, true);
    ASSERT_EQ(a.size(), b.size());
    for (size_t o = 0; o < a.size(); ++o) {
      EXPECT_EQ(a[o].type.shape, b[o].type.shape);
      EXPECT_EQ(a[o].data, b[o].data) << "output " << o;
    }
    // Compiled: every convolution writes NHWC, and the results match the interpreter.
    const std::string what = "n=" + std::to_string(n) + " " + std::to_string(h) + "x" + std::to_string(w);
    auto exe = check(g, in, what);
    EXPECT_EQ(exe->num_channels_last(), 3) << exe->explain(false);
    const auto outs = exe->run(in);
    EXPECT_FALSE(outs[1].is_contiguous()) << "the returned conv output is the NCHW view of an NHWC buffer";
    // Off: the same values, NCHW throughout.
    setenv("FLOW_CHANNELS_LAST", "0", 1);
    auto off = check(g, in, what + " (off)");
    unsetenv("FLOW_CHANNELS_LAST");
    EXPECT_EQ(off->num_channels_last(), 0);
  }
}

TEST(ChannelsLast, AConvolutionReadByAnNchwElementwiseOpStaysNchw) {
  REQUIRE_BACKENDS();
  auto rng = test::rng(72);
  const dsl::Graph g = resnet_like(2, 16, 16, true);
  const sched::ChannelsLastResult r = sched::to_channels_last(g);
  // `mul` reads the block's output in NCHW. That output comes, through NHWC ops, from the 1x1 conv
  // and (through the residual, the pool and the stem's relu) from the stem conv: both stay NCHW.
  // The 3x3 conv's result is read only by a conv and as a graph output, so it still converts.
  EXPECT_EQ(r.convolutions, 1);
  std::vector<jit::Tensor> in{random_tensor({2, 3, 16, 16}, rng), random_tensor({8, 3, 5, 5}, rng),
                              random_tensor({8, 1, 1}, rng),      random_tensor({8, 8, 3, 3}, rng),
                              random_tensor({8, 8, 1, 1}, rng),   random_tensor({2, 8, 4, 4}, rng)};
  auto exe = check(g, in, "NCHW reader");
  EXPECT_EQ(exe->num_channels_last(), 1) << exe->explain(false);
}

TEST(ChannelsLast, AutocastInputCastWritesNhwcForTheConvolutions) {
  // Under autocast the image is cast to half before the first convolution: on CUDA (half convs go
  // NHWC) the cast writes NHWC itself, so the conv reads it without a copy into its layout; a cast
  // that something else also reads stays NCHW.
  REQUIRE_BACKENDS();
  auto rng = test::rng(73);
  for (const bool other_reader : {false, true}) {
    dsl::Graph g;
    g.set_autocast(dsl::AutocastPolicy{DType::BFloat16, dsl::AutocastDevice::CUDA});
    const int x = g.add_input({{2, 3, 9, 11}, DType::Float32}, "x");
    const int w = g.add_input({{8, 3, 3, 3}, DType::Float32}, "w");
    const int y = g.add("conv2d", {x, w}, {{"padding", int64_t{1}}});
    g.set_autocast(std::nullopt);
    g.mark_output(g.add("cast", {y}, {{"dtype", std::string("float32")}}));
    if (other_reader) g.mark_output(g.add("relu", {g.node(g.value(y).producer).inputs[0]}));
    const sched::ChannelsLastResult r = sched::to_channels_last(g, dsl::Target::CUDA);
    EXPECT_EQ(r.convolutions, 1);
    // The output cast runs on the NHWC result in both cases; the input cast only without the relu.
    EXPECT_EQ(r.ops, other_reader ? 1 : 2) << r.graph.to_string();
    const std::string text = r.graph.to_string();
    EXPECT_EQ(text.find("= cast(%2) {dtype=\"bfloat16\"}") != std::string::npos, !other_reader) << text;
    std::vector<jit::Tensor> in{random_tensor({2, 3, 9, 11}, rng), random_tensor({8, 3, 3, 3}, rng)};
    std::vector<dsl::HostTensor> hin;
    for (const auto& t : in) hin.push_back(host_of(t));
    const auto a = dsl::interpret_graph(g, hin, true), b = dsl::interpret_graph(r.graph, hin, true);
    ASSERT_EQ(a.size(), b.size());
    for (size_t o = 0; o < a.size(); ++o) EXPECT_EQ(a[o].data, b[o].data) << "output " << o;
  }
}

}  // namespace
}  // namespace flow

// Channels-last data seeds the layout pass without any convolution, as torch's memory-format
// propagation does: a graph input with NHWC strides, or an in-graph permute of an [N, H, W, C]
// value to NCHW. A max pool's taps and the elementwise ops after it then run on the NHWC values
// (channels innermost) and the output is returned channels-last; a contiguous input changes nothing.
TEST(ChannelsLast, ChannelsLastDataSeedsThePassWithoutConvolutions) {
  REQUIRE_BACKENDS();
  auto rng = test::rng(74);
  const Shape s{2, 6, 9, 7};
  auto pool_relu = [](dsl::Graph& g, int x) {  // two taps of a 2x2 pool, stride 2, then relu + bias
    const int b = g.add_input({{6, 1, 1}, DType::Float32}, "b");
    auto tap = [&](int64_t i) {
      int t = g.add("slice", {x}, {{"dim", int64_t{2}}, {"start", i}, {"end", int64_t{8} + i}, {"step", int64_t{2}}});
      t = g.add("slice", {t}, {{"dim", int64_t{3}}, {"start", int64_t{0}}, {"end", int64_t{7}}, {"step", int64_t{2}}});
      return g.add("pad", {t}, {{"pads", std::vector<int64_t>{0, 1, 0, 0}}, {"value", -INFINITY}});
    };
    g.mark_output(g.add("add", {g.add("relu", {g.add("maximum", {tap(0), tap(1)})}), b}));
  };
  for (const bool nhwc_input : {false, true}) {  // jit::compile marks an NHWC-strided input so
    dsl::Graph g;
    pool_relu(g, g.add_input({s, DType::Float32}, "x"));
    const sched::ChannelsLastResult r = sched::to_channels_last(g, dsl::Target::CPU, {nhwc_input, false});
    EXPECT_EQ(r.convolutions, 0);
    EXPECT_EQ(r.ops, nhwc_input ? 4 + 2 + 3 : 0) << r.graph.to_string();  // slices; pads; max, relu, add
    std::vector<jit::Tensor> in{nhwc_input ? permuted_tensor(s, {0, 2, 3, 1}, rng) : random_tensor(s, rng),
                                random_tensor({6, 1, 1}, rng)};
    auto exe = check(g, in, nhwc_input ? "NHWC input" : "NCHW input");
    EXPECT_EQ(exe->num_kernels(), 1) << exe->explain(false);
    const jit::Tensor out = exe->run(in).at(0);
    EXPECT_EQ(out.is_contiguous(), !nhwc_input);
    if (nhwc_input) {
      EXPECT_EQ(out.strides, (std::vector<int64_t>{4 * 5 * 6, 1, 5 * 6, 6}));  // [2, 6, 4, 5] in NHWC
    }
  }
  // An in-graph permute of NHWC data (a model that computes in [N, H, W, C], then permutes).
  dsl::Graph g;
  const int nhwc = g.add_input({{2, 9, 7, 6}, DType::Float32}, "x_nhwc");
  pool_relu(g, g.add("permute", {nhwc}, {{"dims", std::vector<int64_t>{0, 3, 1, 2}}}));
  const sched::ChannelsLastResult r = sched::to_channels_last(g);
  EXPECT_EQ(r.ops, 4 + 2 + 3) << r.graph.to_string();
  std::vector<jit::Tensor> in{random_tensor({2, 9, 7, 6}, rng), random_tensor({6, 1, 1}, rng)};
  auto exe = check(g, in, "permuted input");
  EXPECT_FALSE(exe->run(in).at(0).is_contiguous());
}

// The seeding rules alone (no compiler needed): without a convolution library no convolution goes
// NHWC, while the ops after a channels-last input still do; an input that an as_strided reads
// (directly or through views) is no seed, since as_strided addresses the input's own memory.
TEST(ChannelsLast, SeedsWithoutALibraryAndBesideAsStrided) {
  {
    dsl::Graph g;
    const int x = g.add_input({{2, 6, 9, 7}, DType::Float32}, "x");
    const int w = g.add_input({{4, 6, 3, 3}, DType::Float32}, "w");
    g.mark_output(g.add("relu", {x}));
    g.mark_output(g.add("conv2d", {x, w}));
    const auto with = sched::to_channels_last(g, dsl::Target::CPU, {true, false}, true);
    const auto without = sched::to_channels_last(g, dsl::Target::CPU, {true, false}, false);
    EXPECT_EQ(with.convolutions, 1);
    EXPECT_EQ(without.convolutions, 0);
    EXPECT_EQ(without.ops, 1) << without.graph.to_string();  // the relu
  }
  for (const bool through_view : {false, true}) {
    dsl::Graph g;
    const int x = g.add_input({{2, 6, 9, 7}, DType::Float32}, "x");
    g.mark_output(g.add("relu", {x}));
    const int src =
        through_view ? g.add("slice", {x}, {{"dim", int64_t{2}}, {"start", int64_t{1}}, {"end", int64_t{9}}}) : x;
    g.mark_output(g.add("as_strided", {src},
                        {{"size", std::vector<int64_t>{2, 6, 4, 7}}, {"stride", std::vector<int64_t>{378, 63, 7, 1}}}));
    const auto r = sched::to_channels_last(g, dsl::Target::CPU, {true});
    EXPECT_EQ(r.ops, 0) << r.graph.to_string();
  }
}

// Resizing's taps, index_select along H and W, run on an NHWC input's data along H and W of the
// NHWC value (dims 1 and 2), and the result matches the NCHW graph's.
TEST(ChannelsLast, IndexSelectAlongHAndWRunsOnNhwc) {
  REQUIRE_BACKENDS();
  auto rng = test::rng(75);
  const Shape s{2, 5, 6, 7};
  dsl::Graph g;
  const int x = g.add_input({s, DType::Float32}, "x");
  const int rows = g.add_input({{9}, DType::Int64}, "rows");
  const int cols = g.add_input({{4}, DType::Int64}, "cols");
  const int h = g.add("index_select", {x, rows}, {{"dim", int64_t{2}}});
  g.mark_output(g.add("relu", {g.add("index_select", {h, cols}, {{"dim", int64_t{-1}}})}));
  const sched::ChannelsLastResult r = sched::to_channels_last(g, dsl::Target::CPU, {true, false, false});
  EXPECT_EQ(r.ops, 3) << r.graph.to_string();
  std::vector<int64_t> dims;
  for (const dsl::Node& n : r.graph.nodes())
    if (n.op == "index_select") dims.push_back(dsl::attr_int(n.attrs, "dim", "index_select"));
  EXPECT_EQ(dims, (std::vector<int64_t>{1, 2})) << r.graph.to_string();
  std::vector<jit::Tensor> in{permuted_tensor(s, {0, 2, 3, 1}, rng), int64_tensor({0, 5, 1, 1, 4, 3, 2, 0, 5}),
                              int64_tensor({6, 0, 3, 3})};
  auto exe = check(g, in, "NHWC input");
  EXPECT_FALSE(exe->run(in).at(0).is_contiguous());
}
