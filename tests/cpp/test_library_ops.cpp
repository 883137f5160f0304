// Library ops (matmul, linear, conv2d, conv_transpose2d) through oneDNN, checked against the
// reference interpreter (naive loops in double) over random shapes, strided inputs and fused
// epilogues; type inference and torch's error messages; the fusion rules of library groups.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "autotune/tuner.h"
#include "dsl/graph_interpreter.h"
#include "dsl/op_table.h"
#include "jit/backend.h"
#include "jit/compile.h"
#include "jit/eager.h"
#include "library_test_util.h"
#include "runtime/onednn.h"
#include "scheduler/fold_pad.h"
#include "scheduler/fusion.h"
#include "test_util.h"

using namespace flow;
using namespace flow::libtest;
using dsl::DType;
using dsl::Shape;

// These tests check epilogue fusion into library calls, which is opt-in (see FusionOptions).
static const bool kEpiloguesOn = (setenv("FLOW_LIBRARY_EPILOGUES", "1", 1), true);

namespace {

using Attrs = dsl::Attrs;
using I = std::vector<int64_t>;

int64_t rnd(std::mt19937_64& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

// Every other element along the last dim of a [..., 2n] tensor: strides not 1.
jit::Tensor strided_tensor(const Shape& shape, std::mt19937_64& rng) {
  Shape big = shape;
  big.back() *= 2;
  jit::Tensor base = random_tensor(big, rng);
  jit::Tensor t = base;
  t.sizes = shape;
  t.strides.back() = 2;
  return t;
}

std::string op_error(const std::function<void()>& f, dsl::OpError::Kind* kind = nullptr) {
  try {
    f();
  } catch (const dsl::OpError& e) {
    if (kind) *kind = e.kind;
    return e.what();
  }
  return "<no error>";
}

const sched::FusionGroup* library_group(const jit::Executable& exe) {
  for (const auto& grp : exe.plan().groups)
    if (grp.kind == sched::GroupKind::Library) return &grp;
  return nullptr;
}

}  // namespace

// ---- type inference and errors -------------------------------------------------------------------

TEST(LibraryOps, MatmulShapes) {
  auto shape_of = [](const Shape& a, const Shape& b) {
    dsl::Graph g;
    const int x = g.add_input({a, DType::Float32}), y = g.add_input({b, DType::Float32});
    return g.value(g.add("matmul", {x, y})).type.shape;
  };
  EXPECT_EQ(shape_of({3}, {3}), Shape{});
  EXPECT_EQ(shape_of({2, 3}, {3}), Shape{2});
  EXPECT_EQ(shape_of({3}, {3, 5}), Shape{5});
  EXPECT_EQ(shape_of({2, 3}, {3, 5}), (Shape{2, 5}));
  EXPECT_EQ(shape_of({4, 1, 2, 3}, {6, 3, 5}), (Shape{4, 6, 2, 5}));
  EXPECT_EQ(shape_of({7, 2, 3}, {3}), (Shape{7, 2}));
  EXPECT_EQ(shape_of({3}, {7, 3, 5}), (Shape{7, 5}));
}

TEST(LibraryOps, MatmulErrorsReadLikeTorch) {
  auto mm = [](const Shape& a, const Shape& b, DType ta = DType::Float32, DType tb = DType::Float32) {
    return [=] {
      dsl::Graph g;
      const int x = g.add_input({a, ta}), y = g.add_input({b, tb});
      g.add("matmul", {x, y});
    };
  };
  EXPECT_EQ(op_error(mm({2, 3}, {4, 5})), "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)");
  EXPECT_EQ(op_error(mm({7, 2, 3}, {7, 4, 5})),
            "Expected size for first two dimensions of batch2 tensor to be: [7, 3] but got: [7, 4].");
  EXPECT_EQ(op_error(mm({7, 2, 3}, {6, 3, 5})),
            "The size of tensor a (7) must match the size of tensor b (6) at non-singleton dimension 0");
  EXPECT_EQ(op_error(mm({2, 3}, {4})), "size mismatch, got input (2), mat (2x3), vec (4)");
  EXPECT_EQ(op_error(mm({3}, {4})),
            "inconsistent tensor size, expected tensor [3] and src [4] to have the same number of elements, but got 3 "
            "and 4 elements respectively");
  EXPECT_EQ(op_error(mm({3}, {})), "both arguments to matmul need to be at least 1D, but they are 1D and 0D");
  dsl::OpError::Kind kind{};
  EXPECT_EQ(op_error(mm({2, 3}, {3, 4}, DType::Float32, DType::Float64), &kind),
            "expected m1 and m2 to have the same dtype, but got: float != double");
  EXPECT_EQ(kind, dsl::OpError::Kind::Value);  // torch raises RuntimeError
  EXPECT_NE(op_error(mm({2, 3}, {3, 4}, DType::Int32, DType::Int32), &kind).find("not implemented for 'Int'"),
            std::string::npos);
  EXPECT_EQ(kind, dsl::OpError::Kind::NotImplemented);
}

TEST(LibraryOps, LinearShapesAndErrors) {
  dsl::Graph g;
  const int x = g.add_input({{6, 2, 3}, DType::Float32}), w = g.add_input({{4, 3}, DType::Float32});
  const int b = g.add_input({{4}, DType::Float32}), w1 = g.add_input({{3}, DType::Float32});
  EXPECT_EQ(g.value(g.add("linear", {x, w, b})).type.shape, (Shape{6, 2, 4}));
  EXPECT_EQ(g.value(g.add("linear", {x, w1})).type.shape, (Shape{6, 2}));
  const int w5 = g.add_input({{4, 5}, DType::Float32}), b5 = g.add_input({{5}, DType::Float32});
  EXPECT_EQ(op_error([&] { g.add("linear", {x, w5}); }), "mat1 and mat2 shapes cannot be multiplied (12x3 and 5x4)");
  EXPECT_EQ(op_error([&] {
              g.add("linear", {x, w, b5});
            }),
            "The expanded size of the tensor (4) must match the existing size (5) at non-singleton dimension 2.  "
            "Target sizes: [6, 2, 4].  Tensor sizes: [5]");
}

TEST(LibraryOps, ConvShapesAttrsAndErrors) {
  auto conv = [](const Shape& xs, const Shape& ws, const Attrs& a, bool bias = false, const Shape& bs = {}) {
    dsl::Graph g;
    std::vector<int> in{g.add_input({xs, DType::Float32}), g.add_input({ws, DType::Float32})};
    if (bias) in.push_back(g.add_input({bs, DType::Float32}));
    const int out = g.add("conv2d", in, a);
    return std::make_pair(g.value(out).type.shape, g.node(g.value(out).producer).attrs);
  };
  EXPECT_EQ(conv({2, 3, 10, 10}, {8, 3, 3, 3}, {}).first, (Shape{2, 8, 8, 8}));
  EXPECT_EQ(conv({2, 4, 11, 9}, {8, 2, 3, 3}, {{"stride", int64_t{2}}, {"padding", int64_t{1}}, {"groups", int64_t{2}}})
                .first,
            (Shape{2, 8, 6, 5}));
  EXPECT_EQ(conv({3, 10, 10}, {8, 3, 3, 3}, {{"dilation", I{2, 1}}}).first, (Shape{8, 6, 8}));
  const auto same = conv({1, 3, 9, 9}, {4, 3, 4, 3}, {{"padding", std::string("same")}});
  EXPECT_EQ(same.first, (Shape{1, 4, 9, 9}));
  EXPECT_EQ(std::get<I>(same.second.at("padding")), (I{1, 1}));
  EXPECT_EQ(std::get<I>(same.second.at("padding_end")), (I{2, 1}));
  EXPECT_EQ(std::get<I>(conv({1, 3, 9, 9}, {4, 3, 3, 3}, {{"stride", I{2}}}).second.at("stride")), (I{2, 2}));

  auto err = [&](const Shape& xs, const Shape& ws, const Attrs& a, bool bias = false, const Shape& bs = {}) {
    return op_error([&] { conv(xs, ws, a, bias, bs); });
  };
  EXPECT_EQ(err({2, 3, 8, 8}, {4, 2, 3, 3}, {}),
            "Given groups=1, weight of size [4, 2, 3, 3], expected input[2, 3, 8, 8] to have 2 channels, but got 3 "
            "channels instead");
  EXPECT_EQ(err({2, 3, 8, 8}, {3, 1, 3, 3}, {{"groups", int64_t{2}}}),
            "Given groups=2, expected weight to be divisible by 2 at dimension 0, but got weight of size [[3, 1, 3, "
            "3]] instead");
  EXPECT_EQ(err({2, 3, 8, 8}, {4, 3, 3, 3}, {}, true, {5}),
            "Given weight of size [4, 3, 3, 3], expected bias to be 1-dimensional with 4 elements, but got bias of "
            "size [5] instead");
  EXPECT_EQ(err({2, 3, 8, 8}, {4, 3, 9, 9}, {}),
            "Calculated padded input size per channel: (8 x 8). Kernel size: (9 x 9). Kernel size can't be greater "
            "than actual input size");
  EXPECT_EQ(err({2, 3}, {4, 3, 3, 3}, {}),
            "Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: [2, 3]");
  EXPECT_EQ(err({2, 3, 8, 8}, {4, 3, 3, 3}, {{"stride", int64_t{0}}}), "non-positive stride is not supported");
  EXPECT_EQ(err({2, 3, 8, 8}, {4, 3, 3, 3}, {{"padding", int64_t{-1}}}), "negative padding is not supported");
  EXPECT_EQ(err({2, 3, 8, 8}, {4, 3, 3, 3}, {{"stride", int64_t{2}}, {"padding", std::string("same")}}),
            "padding='same' is not supported for strided convolutions");
  EXPECT_EQ(err({2, 3, 8, 8}, {4, 3, 3, 3}, {{"padding", std::string("foo")}}), "Invalid padding string: 'foo'");
  EXPECT_EQ(err({2, 3, 8, 8}, {4, 3, 3, 3}, {{"strid", int64_t{1}}}), "conv2d(): unexpected attribute 'strid'");

  dsl::Graph g;
  const int x = g.add_input({{2, 3, 8, 8}, DType::Float32}), w = g.add_input({{3, 4, 3, 3}, DType::Float32});
  EXPECT_EQ(g.value(g.add("conv_transpose2d", {x, w},
                          {{"stride", int64_t{2}}, {"padding", int64_t{1}}, {"output_padding", int64_t{1}}}))
                .type.shape,
            (Shape{2, 4, 16, 16}));
  EXPECT_NE(op_error([&] {
              g.add("conv_transpose2d", {x, w}, {{"output_padding", int64_t{1}}});
            }).find("output padding must be smaller than either stride or dilation"),
            std::string::npos);
}

TEST(LibraryOps, Conv3dShapesAttrsAndErrors) {
  auto add = [](const std::string& op, const Shape& xs, const Shape& ws, const Attrs& a) {
    dsl::Graph g;
    const int out = g.add(op, {g.add_input({xs, DType::Float32}), g.add_input({ws, DType::Float32})}, a);
    return std::make_pair(g.value(out).type.shape, g.node(g.value(out).producer).attrs);
  };
  auto err = [&](const std::string& op, const Shape& xs, const Shape& ws, const Attrs& a) {
    return op_error([&] { add(op, xs, ws, a); });
  };
  const auto strided = add("conv3d", {2, 4, 7, 9, 11}, {6, 2, 3, 3, 3},
                           {{"stride", I{1, 2, 3}}, {"padding", int64_t{1}}, {"groups", int64_t{2}}});
  EXPECT_EQ(strided.first, (Shape{2, 6, 7, 5, 4}));
  EXPECT_EQ(std::get<I>(strided.second.at("padding")), (I{1, 1, 1}));
  EXPECT_EQ(add("conv3d", {4, 5, 6, 7}, {3, 4, 2, 2, 2}, {{"dilation", I{2}}}).first, (Shape{3, 3, 4, 5}));
  const auto same = add("conv3d", {1, 2, 5, 6, 7}, {3, 2, 2, 3, 4}, {{"padding", std::string("same")}});
  EXPECT_EQ(same.first, (Shape{1, 3, 5, 6, 7}));
  EXPECT_EQ(std::get<I>(same.second.at("padding")), (I{0, 1, 1}));
  EXPECT_EQ(std::get<I>(same.second.at("padding_end")), (I{1, 1, 2}));
  EXPECT_EQ(add("conv_transpose3d", {2, 4, 3, 4, 5}, {4, 3, 3, 2, 3},
                {{"stride", I{2, 1, 2}}, {"padding", int64_t{1}}, {"output_padding", I{1, 0, 1}}})
                .first,
            (Shape{2, 3, 6, 3, 10}));

  EXPECT_EQ(err("conv3d", {2, 3, 8}, {4, 3, 3, 3, 3}, {}),
            "Expected 4D (unbatched) or 5D (batched) input to conv3d, but got input of size: [2, 3, 8]");
  EXPECT_EQ(err("conv3d", {2, 3, 8, 8, 8}, {4, 3, 3, 3}, {}),
            "weight should have 5 dimensions for conv3d, but got weight of size [4, 3, 3, 3]");
  EXPECT_EQ(err("conv3d", {2, 3, 8, 8, 8}, {4, 3, 3, 3, 3}, {{"stride", I{1, 2}}}),
            "expected stride to be a single integer value or a list of 3 values to match the convolution dimensions, "
            "but got stride=[1, 2]");
  EXPECT_EQ(err("conv3d", {2, 3, 2, 8, 8}, {4, 3, 3, 3, 3}, {}),
            "Calculated padded input size per channel: (2 x 8 x 8). Kernel size: (3 x 3 x 3). Kernel size can't be "
            "greater than actual input size");
  EXPECT_EQ(err("conv3d", {2, 3, 8, 8, 8}, {4, 3, 3, 3, 3}, {{"channels_last", int64_t{1}}}),
            "conv3d: channels_last needs a 4-D input");
  EXPECT_EQ(err("conv_transpose3d", {1, 2, 3, 3, 3}, {2, 2, 1, 1, 1}, {{"output_padding", I{0, 0, 1}}}),
            "output padding must be smaller than either stride or dilation, but got output_padding_depth: 0 "
            "output_padding_height: 0 output_padding_width: 1 stride_depth: 1 stride_height: 1 stride_width: 1 "
            "dilation_depth: 1 dilation_height: 1 dilation_width: 1");
  EXPECT_EQ(err("conv_transpose3d", {1, 2, 1, 1, 1}, {2, 2, 1, 1, 1}, {{"padding", int64_t{1}}}),
            "Given input size per channel: (1 x 1 x 1). Calculated output size per channel: (-1 x -1 x -1). Output "
            "size is too small");
}

// ---- numerics vs the reference interpreter ---------------------------------------------------------

TEST(LibraryOps, MatmulRandomShapesMatchReference) {
  REQUIRE_BACKENDS();
  auto rng = test::rng(11);
  for (int iter = 0; iter < 30; ++iter) {
    const int64_t m = rnd(rng, 1, 17), k = rnd(rng, 1, 40), n = rnd(rng, 1, 19);
    const int kind = static_cast<int>(rnd(rng, 0, 5));
    Shape as{m, k}, bs{k, n};
    if (kind == 1) as = {k};                                  // vector @ matrix
    if (kind == 2) bs = {k};                                  // matrix @ vector
    if (kind == 3) as = {rnd(rng, 1, 3), m, k}, bs = {k, n};  // batch @ matrix
    if (kind == 4) as = {3, 1, m, k}, bs = {2, k, n};         // broadcast batches
    if (kind == 5) as = {2, m, k}, bs = {2, k, n};
    dsl::Graph g;
    const int a = g.add_input({as, DType::Float32}), b = g.add_input({bs, DType::Float32});
    g.mark_output(g.add("matmul", {a, b}));
    auto exe = check(g, {random_tensor(as, rng), random_tensor(bs, rng)},
                     "matmul " + dsl::shape_str(as) + " @ " + dsl::shape_str(bs));
    EXPECT_EQ(exe->num_kernels(), 0);
    EXPECT_EQ(exe->num_library_calls(), 1);
  }
}

TEST(LibraryOps, MatmulStridedOperands) {
  REQUIRE_BACKENDS();
  auto rng = test::rng(12);
  const int64_t m = rnd(rng, 2, 13), k = rnd(rng, 2, 29), n = rnd(rng, 2, 11), bt = rnd(rng, 2, 4);
  struct Case {
    jit::Tensor a, b;
    std::string what;
  };
  jit::Tensor expanded = random_tensor({1, k, n}, rng);  // a stride-0 batch dim
  expanded.sizes = {bt, k, n};
  expanded.strides = {0, n, 1};
  std::vector<Case> cases = {
      {permuted_tensor({m, k}, {1, 0}, rng), permuted_tensor({k, n}, {1, 0}, rng), "both transposed"},
      {permuted_tensor({bt, m, k}, {1, 0, 2}, rng), random_tensor({bt, k, n}, rng), "permuted batch"},
      {strided_tensor({bt, m, k}, rng), strided_tensor({k, n}, rng), "inner stride 2 (copied)"},
      {random_tensor({bt, m, k}, rng), expanded, "expanded batch"},
  };
  for (const auto& c : cases) {
    dsl::Graph g;
    const int a = g.add_input({c.a.sizes, DType::Float32}), b = g.add_input({c.b.sizes, DType::Float32});
    g.mark_output(g.add("matmul", {a, b}));
    check(g, {c.a, c.b}, c.what);
  }
}

TEST(LibraryOps, LinearMatchesReference) {
  REQUIRE_BACKENDS();
  auto rng = test::rng(13);
  for (int iter = 0; iter < 16; ++iter) {
    const int64_t in = rnd(rng, 1, 33), out = rnd(rng, 1, 21);
    Shape xs = {rnd(rng, 1, 9), in};
    if (iter % 4 == 1) xs = {rnd(rng, 1, 3), rnd(rng, 1, 5), in};
    if (iter % 4 == 2) xs = {in};
    const bool bias = iter % 2 == 0;
    const bool w_transposed = iter % 3 == 0;
    dsl::Graph g;
    std::vector<int> ins{g.add_input({xs, DType::Float32}), g.add_input({{out, in}, DType::Float32})};
    std::vector<jit::Tensor> ts{random_tensor(xs, rng),
                                w_transposed ? permuted_tensor({out, in}, {1, 0}, rng) : random_tensor({out, in}, rng)};
    if (bias) {
      ins.push_back(g.add_input({{out}, DType::Float32}));
      ts.push_back(random_tensor({out}, rng));
    }
    g.mark_output(g.add("linear", ins));
    check(g, ts, "linear x" + dsl::shape_str(xs) + " out " + std::to_string(out));
  }
}

TEST(LibraryOps, Conv2dRandomConfigsMatchReference) {
  REQUIRE_BACKENDS();
  auto rng = test::rng(14);
  for (int iter = 0; iter < 40; ++iter) {
    const int64_t groups = iter % 5 == 0 ? rnd(rng, 2, 3) : 1;
    const int64_t icg = rnd(rng, 1, 5), ocg = rnd(rng, 1, 6);
    const bool depthwise = iter % 7 == 3;
    const int64_t g_ = depthwise ? rnd(rng, 2, 6) : groups;
    const int64_t c = depthwise ? g_ : icg * g_, oc = depthwise ? g_ * rnd(rng, 1, 2) : ocg * g_;
    const int64_t kh = iter % 3 == 0 ? 1 : rnd(rng, 1, 3) * 2 - 1 + (iter % 8 == 5 ? 1 : 0);
    const int64_t kw = iter % 3 == 0 ? 1 : (iter % 4 == 1 ? kh + 1 : kh);
    Attrs a{{"stride", I{rnd(rng, 1, 2), rnd(rng, 1, 2)}},
            {"padding", I{rnd(rng, 0, 2), rnd(rng, 0, 2)}},
            {"dilation", I{rnd(rng, 1, 2), rnd(rng, 1, 2)}},
            {"groups", g_}};
    if (iter % 6 == 4) a = {{"padding", std::string("same")}, {"dilation", I{rnd(rng, 1, 2), 1}}, {"groups", g_}};
    const int64_t h = rnd(rng, 1, 10) + 2 * kh, w = rnd(rng, 1, 10) + 2 * kw, n = rnd(rng, 1, 3);
    const bool unbatched = iter % 9 == 8;
    const Shape xs = unbatched ? Shape{c, h, w} : Shape{n, c, h, w};
    const Shape ws{oc, c / g_, kh, kw};
    const bool bias = iter % 2 == 1;
    // Input layouts: contiguous, channels-last, or a non-dense slice (copied first).
    const int layout = static_cast<int>(iter % 3);
    jit::Tensor x = layout == 1 && !unbatched ? permuted_tensor(xs, {0, 2, 3, 1}, rng)
                    : layout == 2             ? strided_tensor(xs, rng)
                                              : random_tensor(xs, rng);
    dsl::Graph g;
    std::vector<int> ins{g.add_input({xs, DType::Float32}), g.add_input({ws, DType::Float32})};
    std::vector<jit::Tensor> ts{x, random_tensor(ws, rng)};
    if (bias) {
      ins.push_back(g.add_input({{oc}, DType::Float32}));
      ts.push_back(random_tensor({oc}, rng));
    }
    g.mark_output(g.add("conv2d", ins, a));
    std::string what =
        "conv2d x" + dsl::shape_str(xs) + " w" + dsl::shape_str(ws) + " layout " + std::to_string(layout) + " attrs";
    for (const auto& [key, v] : g.node(0).attrs)
      what += " " + key + "=" + (std::holds_alternative<I>(v) ? dsl::shape_str(std::get<I>(v)) : "g");
    check(g, ts, what);
  }
}

TEST(LibraryOps, ConvTranspose2dMatchesReference) {
  REQUIRE_BACKENDS();
  auto rng = test::rng(15);
  for (int iter = 0; iter < 16; ++iter) {
    const int64_t groups = iter % 4 == 3 ? 2 : 1;
    const int64_t c = groups * rnd(rng, 1, 4), ocg = rnd(rng, 1, 4), k = rnd(rng, 1, 3);
    const int64_t stride = rnd(rng, 1, 3), dil = rnd(rng, 1, 2), pad = rnd(rng, 0, 1);
    const int64_t out_pad = stride > 1 ? rnd(rng, 0, 1) : 0;
    const Shape xs{rnd(rng, 1, 2), c, rnd(rng, 3, 8), rnd(rng, 3, 8)}, ws{c, ocg, k, k};
    dsl::Graph g;
    const int x = g.add_input({xs, DType::Float32}), w = g.add_input({ws, DType::Float32});
    const int b = g.add_input({{ocg * groups}, DType::Float32});
    std::vector<int> ins{x, w};
    if (iter % 2 == 0) ins.push_back(b);
    g.mark_output(g.add(
        "conv_transpose2d", ins,
        {{"stride", stride}, {"padding", pad}, {"output_padding", out_pad}, {"dilation", dil}, {"groups", groups}}));
    std::vector<jit::Tensor> ts{random_tensor(xs, rng), random_tensor(ws, rng), random_tensor({ocg * groups}, rng)};
    check(g, ts,
          "conv_transpose2d x" + dsl::shape_str(xs) + " w" + dsl::shape_str(ws) + " s" + std::to_string(stride) + " p" +
              std::to_string(pad) + " op" + std::to_string(out_pad) + " d" + std::to_string(dil) + " g" +
              std::to_string(groups));
  }
}

// oneDNN's 3-d convolution and deconvolution against the reference loops: groups, strides,
// paddings (asymmetric too), dilations, unbatched, channels-last and strided inputs, a bias, and a
// fused relu + residual epilogue.
TEST(LibraryOps, Conv3dRandomConfigsMatchReference) {
  REQUIRE_BACKENDS();
  auto rng = test::rng(17);
  for (int iter = 0; iter < 24; ++iter) {
    const bool transposed = iter % 3 == 2;
    const int64_t groups = iter % 4 == 1 ? 2 : 1;
    const int64_t c = groups * rnd(rng, 1, 3), ocg = rnd(rng, 1, 4);
    const I k{rnd(rng, 1, 3), rnd(rng, 1, 3), rnd(rng, 1, 2)};
    I stride{rnd(rng, 1, 2), rnd(rng, 1, 2), rnd(rng, 1, 3)}, dil{rnd(rng, 1, 2), 1, rnd(rng, 1, 2)};
    I pad{rnd(rng, 0, 1), rnd(rng, 0, 1), rnd(rng, 0, transposed ? 1 : 2)};  // (a transposed output stays > 0)
    const bool unbatched = iter % 7 == 3;
    Shape xs{rnd(rng, 1, 2), c, rnd(rng, 1, 4) + 2 * k[0], rnd(rng, 1, 5) + 2 * k[1], rnd(rng, 1, 6) + 2 * k[2]};
    if (unbatched) xs.erase(xs.begin());
    const Shape ws = transposed ? Shape{c, ocg, k[0], k[1], k[2]} : Shape{ocg * groups, c / groups, k[0], k[1], k[2]};
    Attrs a{{"stride", stride}, {"padding", pad}, {"dilation", dil}, {"groups", groups}};
    if (transposed) {
      I op(3);
      for (int d = 0; d < 3; ++d) op[d] = stride[d] > 1 ? rnd(rng, 0, stride[d] - 1) : 0;
      a["output_padding"] = op;
    } else if (iter % 4 == 0) {
      a["padding_end"] = I{pad[0] + 1, pad[1], pad[2] + 1};
    }
    const int layout = unbatched ? 0 : iter % 3;  // contiguous, channels-last (NDHWC), strided
    jit::Tensor x = layout == 1   ? permuted_tensor(xs, {0, 2, 3, 4, 1}, rng)
                    : layout == 2 ? strided_tensor(xs, rng)
                                  : random_tensor(xs, rng);
    const std::string op = transposed ? "conv_transpose3d" : "conv3d";
    dsl::Graph g;
    std::vector<int> ins{g.add_input({xs, DType::Float32}), g.add_input({ws, DType::Float32})};
    std::vector<jit::Tensor> ts{x, random_tensor(ws, rng)};
    if (iter % 2 == 1) {
      ins.push_back(g.add_input({{ocg * groups}, DType::Float32}));
      ts.push_back(random_tensor({ocg * groups}, rng));
    }
    int y = g.add(op, ins, a);
    const bool epilogue = iter % 5 == 0;
    if (epilogue) {
      const Shape ys = g.value(y).type.shape;
      ts.push_back(random_tensor(ys, rng));
      y = g.add("add", {g.add("relu", {y}), g.add_input({ys, DType::Float32})});
    }
    g.mark_output(y);
    std::string what = op + " x" + dsl::shape_str(xs) + " w" + dsl::shape_str(ws) + " layout " + std::to_string(layout);
    for (const auto& [key, v] : g.node(0).attrs)
      what += " " + key + "=" + (std::holds_alternative<I>(v) ? dsl::shape_str(std::get<I>(v)) : "g");
    auto exe = check(g, ts, what);
    ASSERT_EQ(exe->num_library_calls(), 1) << what;
    EXPECT_EQ(exe->library_steps()[0].library, "oneDNN") << what;
    if (epilogue) {
      EXPECT_EQ(exe->library_steps()[0].epilogue.size(), 2u) << what;
    }
  }
}

TEST(LibraryOps, Float64RunsByReferenceLoops) {
  REQUIRE_BACKENDS();
  auto rng = test::rng(16);
  dsl::Graph g;
  const int a = g.add_input({{3, 5, 7}, DType::Float64}), b = g.add_input({{7, 4}, DType::Float64});
  g.mark_output(g.add("relu", {g.add("matmul", {a, b})}));
  auto exe = check(g, {random_tensor({3, 5, 7}, rng, DType::Float64), random_tensor({7, 4}, rng, DType::Float64)},
                   "float64 matmul", 1e-12);
  ASSERT_EQ(exe->num_library_calls(), 1);
  EXPECT_EQ(exe->library_steps()[0].library, "reference");
  EXPECT_TRUE(exe->library_steps()[0].epilogue.empty());  // post-ops are float32 only
}

// ---- fused epilogues ------------------------------------------------------------------------------

TEST(LibraryOps, ConvBiasResidualReluIsOneLibraryCall) {
  REQUIRE_BACKENDS();
  auto rng = test::rng(17);
  const int64_t n = 2, c = 5, oc = 6, h = 9, w = 7;
  dsl::Graph g;
  const int x = g.add_input({{n, c, h, w}, DType::Float32}), wt = g.add_input({{oc, c, 3, 3}, DType::Float32});
  const int bias = g.add_input({{oc, 1, 1}, DType::Float32}), res = g.add_input({{n, oc, h, w}, DType::Float32});
  const int y = g.add("conv2d", {x, wt}, {{"padding", int64_t{1}}});
  g.mark_output(g.add("relu", {g.add("add", {res, g.add("add", {y, bias})})}));
  auto exe = check(g,
                   {random_tensor({n, c, h, w}, rng), random_tensor({oc, c, 3, 3}, rng), random_tensor({oc, 1, 1}, rng),
                    random_tensor({n, oc, h, w}, rng)},
                   "conv + bias + residual + relu");
  EXPECT_EQ(exe->plan().groups.size(), 1u) << exe->explain(false);
  EXPECT_EQ(exe->num_kernels(), 0);
  const std::string ex = exe->explain(false);
  EXPECT_NE(ex.find("library call: conv2d (oneDNN) + post-ops [add, add, relu]"), std::string::npos) << ex;
  EXPECT_NE(ex.find("0 generated, 1 library calls"), std::string::npos) << ex;
}

TEST(LibraryOps, EpilogueChainsMatchReference) {
  REQUIRE_BACKENDS();
  auto rng = test::rng(18);
  struct Chain {
    std::string name;
    std::function<int(dsl::Graph&, int y, int other)> build;  // other: a tensor of the output's shape
    size_t post_ops;
  };
  auto c = [](dsl::Graph& g, double v) { return g.add_constant(v, DType::Float64, true); };
  const std::vector<Chain> chains = {
      {"gelu", [](dsl::Graph& g, int y, int) { return g.add("gelu", {y}); }, 1},
      {"gelu tanh",
       [](dsl::Graph& g, int y, int) {
         return g.add("gelu", {y}, {{"approximate", std::string("tanh")}});
       },
       1},
      {"silu * 0.5 + 1",
       [&](dsl::Graph& g, int y, int) {
         return g.add("add", {g.add("mul", {g.add("silu", {y}), c(g, 0.5)}), c(g, 1.0)});
       },
       3},
      {"sigmoid, tanh", [](dsl::Graph& g, int y, int) { return g.add("tanh", {g.add("sigmoid", {y})}); }, 2},
      {"clamp(-0.5, 0.25)",
       [](dsl::Graph& g, int y, int) {
         return g.add("clamp", {y}, {{"min", -0.5}, {"max", 0.25}});
       },
       1},
      {"clamp(min=0) (relu6 style max only)",
       [](dsl::Graph& g, int y, int) {
         return g.add("clamp", {y}, {{"max", int64_t{6}}});
       },
       1},
      {"other - y (reversed sub)",
       [](dsl::Graph& g, int y, int o) {
         return g.add("sub", {o, y});
       },
       2},
      {"y * other / 4",
       [&](dsl::Graph& g, int y, int o) {
         return g.add("div", {g.add("mul", {y, o}), c(g, 4.0)});
       },
       2},
      {"2 - y",
       [&](dsl::Graph& g, int y, int) {
         return g.add("sub", {c(g, 2.0), y});
       },
       1},
      {"y / other",
       [](dsl::Graph& g, int y, int o) {
         return g.add("div", {y, o});
       },
       1},
  };
  for (const auto& ch : chains) {
    for (const std::string op : {"matmul", "linear", "conv2d"}) {
      dsl::Graph g;
      std::vector<jit::Tensor> ts;
      int y = -1;
      Shape out;
      if (op == "conv2d") {
        const int x = g.add_input({{2, 3, 6, 5}, DType::Float32}), w = g.add_input({{4, 3, 3, 3}, DType::Float32});
        ts = {random_tensor({2, 3, 6, 5}, rng), random_tensor({4, 3, 3, 3}, rng)};
        y = g.add("conv2d", {x, w}, {{"padding", int64_t{1}}});
      } else if (op == "linear") {
        const int x = g.add_input({{2, 3, 7}, DType::Float32}), w = g.add_input({{5, 7}, DType::Float32});
        const int b = g.add_input({{5}, DType::Float32});
        ts = {random_tensor({2, 3, 7}, rng), random_tensor({5, 7}, rng), random_tensor({5}, rng)};
        y = g.add("linear", {x, w, b});
      } else {
        const int a = g.add_input({{3, 4, 7}, DType::Float32}), b = g.add_input({{7, 6}, DType::Float32});
        ts = {random_tensor({3, 4, 7}, rng), random_tensor({7, 6}, rng)};
        y = g.add("matmul", {a, b});
      }
      out = g.value(y).type.shape;
      const int other = g.add_input({out, DType::Float32});
      jit::Tensor ot = random_tensor(out, rng);
      if (ch.name == "y / other")  // keep the divisor away from 0
        for (int64_t i = 0; i < ot.numel(); ++i) static_cast<float*>(ot.data())[i] += 3.f;
      ts.push_back(ot);
      g.mark_output(ch.build(g, y, other));
      auto exe = check(g, ts, op + " + " + ch.name);
      EXPECT_EQ(exe->plan().groups.size(), 1u) << op << " + " << ch.name << "\n" << exe->explain(false);
      const sched::FusionGroup* lg = library_group(*exe);
      ASSERT_NE(lg, nullptr);
      EXPECT_EQ(lg->epilogue.size(), ch.post_ops) << op << " + " << ch.name;
    }
  }
}

TEST(LibraryOps, BroadcastPostOpOperands) {
  REQUIRE_BACKENDS();
  // Per-channel, per-row, scalar-tensor and odd broadcasts: oneDNN takes some as post-ops and the
  // rest run through the fallback loop; the results must match either way. With an NCHW input the
  // convolution reorders it to NHWC (its destination's layout) and runs oneDNN's 1x1 jit
  // convolution, which broadcast the per-row and per-position operands wrongly when it took them.
  auto rng = test::rng(19);
  const Shape out{2, 4, 5, 3};
  for (const bool nhwc_input : {false, true}) {
    for (const Shape& os :
         {Shape{4, 1, 1}, Shape{1, 4, 1, 1}, Shape{3}, Shape{}, Shape{2, 1, 5, 1}, Shape{5, 3}, Shape{2, 4, 5, 3}}) {
      dsl::Graph g;
      const int x = g.add_input({{2, 3, 5, 3}, DType::Float32}), w = g.add_input({{4, 3, 1, 1}, DType::Float32});
      const int o = g.add_input({os, DType::Float32});
      g.mark_output(g.add("mul", {g.add("conv2d", {x, w}), o}));
      const jit::Tensor xt =
          nhwc_input ? permuted_tensor({2, 3, 5, 3}, {0, 2, 3, 1}, rng) : random_tensor({2, 3, 5, 3}, rng);
      auto exe = check(g, {xt, random_tensor({4, 3, 1, 1}, rng), random_tensor(os, rng)},
                       "conv * operand " + dsl::shape_str(os) + (nhwc_input ? ", NHWC input" : ""));
      EXPECT_EQ(exe->plan().groups.size(), 1u) << dsl::shape_str(os);
    }
  }
  // A non-contiguous residual (a channels-last view) as the binary operand.
  dsl::Graph g;
  const int x = g.add_input({{2, 3, 5, 3}, DType::Float32}), w = g.add_input({{4, 3, 1, 1}, DType::Float32});
  const int r = g.add_input({out, DType::Float32});
  g.mark_output(g.add("add", {g.add("conv2d", {x, w}), r}));
  check(g,
        {random_tensor({2, 3, 5, 3}, rng), random_tensor({4, 3, 1, 1}, rng), permuted_tensor(out, {0, 2, 3, 1}, rng)},
        "conv + channels-last residual");
}

TEST(LibraryOps, RejectedEpiloguesFallBackToKernels) {
  REQUIRE_BACKENDS();
  auto rng = test::rng(20);
  const auto x_t = random_tensor({3, 8}, rng), w_t = random_tensor({8, 5}, rng);
  auto reason = [](const jit::Executable& exe) {
    std::string all;
    for (const auto& r : exe.plan().rejected) all += r.reason + ";";
    return all;
  };
  {  // not in the table: exp becomes a generated kernel after the library call
    dsl::Graph g;
    const int a = g.add_input({{3, 8}, DType::Float32}), b = g.add_input({{8, 5}, DType::Float32});
    g.mark_output(g.add("exp", {g.add("relu", {g.add("matmul", {a, b})})}));
    auto exe = check(g, {x_t, w_t}, "matmul + relu + exp");
    EXPECT_EQ(exe->num_library_calls(), 1);
    EXPECT_EQ(exe->num_kernels(), 1);
    EXPECT_NE(reason(*exe).find("'exp' is not a oneDNN post-op of matmul"), std::string::npos) << reason(*exe);
    EXPECT_NE(exe->explain(false).find("1 generated, 1 library calls"), std::string::npos);
  }
  {  // the library output is also a graph output: it must be written, so no post-op
    dsl::Graph g;
    const int a = g.add_input({{3, 8}, DType::Float32}), b = g.add_input({{8, 5}, DType::Float32});
    const int y = g.add("matmul", {a, b});
    g.mark_output(y);
    g.mark_output(g.add("relu", {y}));
    auto exe = check(g, {x_t, w_t}, "matmul output and relu");
    EXPECT_EQ(exe->plan().groups.size(), 2u);
    EXPECT_NE(reason(*exe).find("library output is a graph output"), std::string::npos) << reason(*exe);
  }
  {  // two consumers of the library output
    dsl::Graph g;
    const int a = g.add_input({{3, 8}, DType::Float32}), b = g.add_input({{8, 5}, DType::Float32});
    const int y = g.add("matmul", {a, b});
    g.mark_output(g.add("mul", {g.add("relu", {y}), g.add("sigmoid", {y})}));
    auto exe = check(g, {x_t, w_t}, "matmul with two consumers");
    EXPECT_EQ(exe->num_library_calls(), 1);
    EXPECT_NE(reason(*exe).find("library output has other consumers"), std::string::npos) << reason(*exe);
  }
  {  // the epilogue broadcasts the output to a larger shape
    dsl::Graph g;
    const int a = g.add_input({{3, 8}, DType::Float32}), b = g.add_input({{8, 5}, DType::Float32});
    const int big = g.add_input({{2, 3, 5}, DType::Float32});
    g.mark_output(g.add("add", {g.add("matmul", {a, b}), big}));
    auto exe = check(g, {x_t, w_t, random_tensor({2, 3, 5}, rng)}, "matmul + broadcast to a larger shape");
    EXPECT_EQ(exe->num_kernels(), 1);
    EXPECT_NE(reason(*exe).find("differs from the library output"), std::string::npos) << reason(*exe);
  }
  {  // a float64 operand promotes the result: not a float32 post-op
    dsl::Graph g;
    const int a = g.add_input({{3, 8}, DType::Float32}), b = g.add_input({{8, 5}, DType::Float32});
    const int d = g.add_input({{3, 5}, DType::Float64});
    g.mark_output(g.add("add", {g.add("matmul", {a, b}), d}));
    auto exe = check(g, {x_t, w_t, random_tensor({3, 5}, rng, DType::Float64)}, "matmul + float64");
    EXPECT_EQ(exe->num_kernels(), 1);
    EXPECT_NE(reason(*exe).find("not float32"), std::string::npos) << reason(*exe);
  }
  {  // a chain of two library calls: the second matmul reads the first's fused output
    dsl::Graph g;
    const int a = g.add_input({{3, 8}, DType::Float32}), b = g.add_input({{8, 5}, DType::Float32});
    const int c2 = g.add_input({{5, 4}, DType::Float32});
    const int h = g.add("relu", {g.add("matmul", {a, b})});
    g.mark_output(g.add("tanh", {g.add("matmul", {h, c2})}));
    auto exe = check(g, {x_t, w_t, random_tensor({5, 4}, rng)}, "two matmuls");
    EXPECT_EQ(exe->num_library_calls(), 2);
    EXPECT_EQ(exe->num_kernels(), 0);
  }
  {  // an elementwise producer stays a kernel before the call; relu of a view stays after it
    dsl::Graph g;
    const int a = g.add_input({{3, 8}, DType::Float32}), b = g.add_input({{8, 5}, DType::Float32});
    const int y = g.add("matmul", {g.add("exp", {a}), b});
    g.mark_output(g.add("relu", {g.add("reshape", {y}, {{"shape", I{15}}})}));
    auto exe = check(g, {x_t, w_t}, "exp -> matmul -> reshape -> relu");
    EXPECT_EQ(exe->num_library_calls(), 1);
    EXPECT_EQ(exe->num_kernels(), 2);
  }
}

TEST(LibraryOps, UnfusedPlanMatches) {
  REQUIRE_BACKENDS();
  auto rng = test::rng(21);
  dsl::Graph g;
  const int x = g.add_input({{1, 2, 5, 5}, DType::Float32}), w = g.add_input({{3, 2, 3, 3}, DType::Float32});
  g.mark_output(g.add("relu", {g.add("conv2d", {x, w})}));
  jit::CompileOptions opt;
  opt.fuse = false;
  const std::vector<jit::Tensor> ts{random_tensor({1, 2, 5, 5}, rng), random_tensor({3, 2, 3, 3}, rng)};
  auto exe = jit::compile(g, {}, opt);
  EXPECT_EQ(exe->num_library_calls(), 1);
  EXPECT_EQ(exe->num_kernels(), 1);
  const auto out = exe->run(ts).at(0);
  const auto ref = dsl::interpret_graph(g, {host_of(ts[0]), host_of(ts[1])}, true).at(0);
  for (int64_t i = 0; i < out.numel(); ++i) ASSERT_NEAR(get(out, i), ref.data[i], 1e-4);
}

TEST(LibraryOps, EagerOpsAndPrimitiveCache) {
  REQUIRE_BACKENDS();
  auto rng = test::rng(22);
  const jit::Tensor x = random_tensor({2, 3, 7, 7}, rng), w = random_tensor({4, 3, 3, 3}, rng);
  const auto before = runtime::onednn::stats();
  for (int rep = 0; rep < 3; ++rep) {
    const jit::Tensor y = jit::eager_op("conv2d", {x, w}, {{"stride", int64_t{2}}}).at(0);
    ASSERT_EQ(y.sizes, (Shape{2, 4, 3, 3}));
    const auto ref =
        dsl::interpret_graph(
            [&] {
              dsl::Graph g;
              g.mark_output(g.add("conv2d",
                                  {g.add_input({x.sizes, DType::Float32}), g.add_input({w.sizes, DType::Float32})},
                                  {{"stride", int64_t{2}}}));
              return g;
            }(),
            {host_of(x), host_of(w)}, true)
            .at(0);
    for (int64_t i = 0; i < y.numel(); ++i) ASSERT_NEAR(get(y, i), ref.data[i], 1e-4);
  }
  const auto after = runtime::onednn::stats();
  EXPECT_GE(after.executions - before.executions, 3u);
  EXPECT_GE(after.cache_hits - before.cache_hits, 2u);  // one primitive for the three calls
  // Eager matmul with a transposed (non-contiguous) operand.
  const jit::Tensor a = permuted_tensor({5, 6}, {1, 0}, rng), b = random_tensor({6, 2}, rng);
  const jit::Tensor m = jit::eager_op("matmul", {a, b}, {}).at(0);
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t j = 0; j < 2; ++j) {
      double r = 0;
      for (int64_t k = 0; k < 6; ++k) r += get(a, i * 6 + k) * get(b, k * 2 + j);
      ASSERT_NEAR(get(m, i * 2 + j), r, 1e-4);
    }
}

TEST(LibraryOps, FallbackPostOpLoopMatchesFormulas) {
  // The runtime's post-op loop (used when oneDNN refuses a chain) against direct formulas.
  namespace od = runtime::onednn;
  std::vector<float> dst{-2.f, -0.5f, 0.f, 0.75f, 3.f, 8.f}, other{1.f, 2.f};
  const std::vector<float> orig = dst;
  od::apply_post_ops(
      {dst.data(), {3, 2}, {}},
      {od::PostOp::eltwise_op(od::Eltwise::Hardswish),
       od::PostOp::binary_op(od::Binary::Mul, {other.data(), {1, 2}, {}}),
       od::PostOp::eltwise_op(od::Eltwise::Clip, -1.f, 5.f), od::PostOp::eltwise_op(od::Eltwise::Linear, 2.f, 1.f)},
      nullptr);
  for (size_t i = 0; i < dst.size(); ++i) {
    const float x = orig[i];
    const float hs = x * std::min(std::max(x + 3.f, 0.f), 6.f) / 6.f;
    const float want = 2.f * std::min(5.f, std::max(-1.f, hs * other[i % 2])) + 1.f;
    EXPECT_NEAR(dst[i], want, 1e-6) << i;
  }
}

TEST(LibraryOps, RandomPostOpChainsMatchTheLoop) {
  REQUIRE_BACKENDS();
  // oneDNN's fused post-ops against the runtime's plain loop, over random chains on a matmul and a
  // convolution (binary operands full, per-row/per-channel, and an odd broadcast).
  namespace od = runtime::onednn;
  auto rng = test::rng(23);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  auto fill = [&](std::vector<float>& v, float shift = 0) {
    for (float& x : v) x = u(rng) + shift;
  };
  const int64_t M = 5, K = 7, N = 6;
  std::vector<float> a(M * K), b(K * N), full(M * N), row(N);
  fill(a), fill(b), fill(full), fill(row, 3.f);
  const int64_t C = 3, OC = 4, H = 6, W = 5;
  std::vector<float> x(2 * C * H * W), w(OC * C * 3 * 3), cfull(2 * OC * H * W), chan(OC), odd(2 * H);
  fill(x), fill(w), fill(cfull), fill(chan, 3.f), fill(odd, 3.f);
  for (int trial = 0; trial < 120; ++trial) {
    const bool conv = trial % 2 == 1;
    std::vector<od::PostOp> chain;
    std::string desc;
    const int len = static_cast<int>(rnd(rng, 1, 4));
    for (int i = 0; i < len; ++i) {
      const int k = static_cast<int>(rnd(rng, 0, 11));
      if (k < 9) {
        const auto e = static_cast<od::Eltwise>(k);
        const float lo = -0.5f + 0.4f * u(rng), hi = 0.5f + 0.4f * u(rng);
        const float al = e == od::Eltwise::Swish    ? 1.f
                         : e == od::Eltwise::Clip   ? lo
                         : e == od::Eltwise::Linear ? u(rng)
                                                    : 0.f;
        const float be = e == od::Eltwise::Clip ? hi : e == od::Eltwise::Linear ? u(rng) : 0.f;
        chain.push_back(od::PostOp::eltwise_op(e, al, be));
        desc += std::string(od::eltwise_name(e)) + " ";
      } else if (k == 9) {
        chain.push_back(od::PostOp::binary_op(od::Binary::Add, conv ? od::TensorArg{cfull.data(), {2, OC, H, W}, {}}
                                                                    : od::TensorArg{full.data(), {M, N}, {}}));
        desc += "add_full ";
      } else if (k == 10) {
        chain.push_back(od::PostOp::binary_op(od::Binary::Div, conv ? od::TensorArg{chan.data(), {1, OC, 1, 1}, {}}
                                                                    : od::TensorArg{row.data(), {1, N}, {}}));
        desc += "div_channel ";
      } else {
        chain.push_back(od::PostOp::binary_op(od::Binary::Sub, conv ? od::TensorArg{odd.data(), {2, 1, H, 1}, {}}
                                                                    : od::TensorArg{row.data(), {1, N}, {}}));
        desc += "sub_odd ";
      }
    }
    std::vector<float> got, want;
    if (!conv) {
      got.resize(M * N);
      want.assign(M * N, 0.f);
      od::matmul({a.data(), {M, K}, {}}, {b.data(), {K, N}, {}}, nullptr, {got.data(), {M, N}, {}}, chain);
      od::matmul({a.data(), {M, K}, {}}, {b.data(), {K, N}, {}}, nullptr, {want.data(), {M, N}, {}}, {});
      od::apply_post_ops({want.data(), {M, N}, {}}, chain, nullptr);
    } else {
      od::ConvParams p;
      p.pad_begin[0] = p.pad_begin[1] = p.pad_end[0] = p.pad_end[1] = 1;
      got.resize(cfull.size());
      want.resize(cfull.size());
      od::convolution(p, {x.data(), {2, C, H, W}, {}}, {w.data(), {OC, C, 3, 3}, {}}, nullptr,
                      {got.data(), {2, OC, H, W}, {}}, chain);
      od::convolution(p, {x.data(), {2, C, H, W}, {}}, {w.data(), {OC, C, 3, 3}, {}}, nullptr,
                      {want.data(), {2, OC, H, W}, {}}, {});
      od::apply_post_ops({want.data(), {2, OC, H, W}, {}}, chain, nullptr);
    }
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], want[i], 1e-4 * (1 + std::fabs(want[i])))
          << (conv ? "conv: " : "matmul: ") << desc << " at " << i;
  }
}

TEST(LibraryOps, SumPostOpAccumulatesIntoDst) {
  REQUIRE_BACKENDS();
  namespace od = runtime::onednn;
  auto rng = test::rng(24);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  const int64_t M = 4, K = 9, N = 5;
  std::vector<float> a(M * K), b(K * N), dst(M * N), prod(M * N);
  for (float& x : a) x = u(rng);
  for (float& x : b) x = u(rng);
  for (float& x : dst) x = u(rng);
  const std::vector<float> residual = dst;
  od::matmul({a.data(), {M, K}, {}}, {b.data(), {K, N}, {}}, nullptr, {prod.data(), {M, N}, {}}, {});
  od::matmul({a.data(), {M, K}, {}}, {b.data(), {K, N}, {}}, nullptr, {dst.data(), {M, N}, {}},
             {od::PostOp::sum_op(0.5f), od::PostOp::eltwise_op(od::Eltwise::Relu)});
  for (size_t i = 0; i < dst.size(); ++i) EXPECT_NEAR(dst[i], std::max(0.f, prod[i] + 0.5f * residual[i]), 1e-5) << i;
}

TEST(LibraryOps, SharedWeightsBatchCollapseKeepsBroadcasts) {
  REQUIRE_BACKENDS();
  // x[3, 4, 7] @ w[7, 6] runs as one [12, 7] GEMM when every operand collapses; operands that
  // broadcast over only some of the rows keep the batched form. Both must match.
  auto rng = test::rng(25);
  for (const Shape& os : {Shape{6}, Shape{4, 6}, Shape{3, 1, 6}, Shape{3, 4, 1}, Shape{3, 4, 6}, Shape{1, 1, 1}}) {
    for (bool permuted : {false, true}) {
      dsl::Graph g;
      const int a = g.add_input({{3, 4, 7}, DType::Float32}), b = g.add_input({{7, 6}, DType::Float32});
      const int o = g.add_input({os, DType::Float32});
      g.mark_output(g.add("sub", {g.add("matmul", {a, b}), o}));
      const jit::Tensor at = permuted ? permuted_tensor({3, 4, 7}, {1, 0, 2}, rng) : random_tensor({3, 4, 7}, rng);
      auto exe = check(g, {at, random_tensor({7, 6}, rng), random_tensor(os, rng)},
                       "matmul - " + dsl::shape_str(os) + (permuted ? " (permuted x)" : ""));
      EXPECT_EQ(exe->plan().groups.size(), 1u);
    }
  }
  dsl::Graph g;  // linear with a [seq, out]-shaped bias (binary post-op) over a 3-D input
  const int x = g.add_input({{2, 5, 7}, DType::Float32}), w = g.add_input({{3, 7}, DType::Float32});
  const int b = g.add_input({{5, 3}, DType::Float32});
  g.mark_output(g.add("linear", {x, w, b}));
  check(g, {random_tensor({2, 5, 7}, rng), random_tensor({3, 7}, rng), random_tensor({5, 3}, rng)},
        "linear with a [5, 3] bias");
}

// Batched matmul whose operands are expanded (stride-0 batch dims) writes every batch element; an
// empty contraction (K = 0) gives zeros. (Both once left parts of the output unwritten.)
TEST(LibraryOps, MatmulExpandedBatchAndEmptyK) {
  REQUIRE_BACKENDS();
  auto rng = test::rng(91);
  for (const bool expand_b : {false, true}) {
    jit::Tensor a = random_tensor({1, 3, 4}, rng);
    a.sizes = {5, 3, 4};
    a.strides = {0, 4, 1};
    jit::Tensor b = random_tensor({expand_b ? 1 : 5, 4, 2}, rng);
    if (expand_b) {
      b.sizes = {5, 4, 2};
      b.strides = {0, 2, 1};
    }
    dsl::Graph g;
    const int x = g.add_input({{5, 3, 4}, DType::Float32});
    const int y = g.add_input({{5, 4, 2}, DType::Float32});
    g.mark_output(g.add("matmul", {x, y}));
    check(g, {a, b}, expand_b ? "both operands expanded" : "a expanded");
  }
  dsl::Graph g;
  const int x = g.add_input({{3, 0}, DType::Float32});
  const int y = g.add_input({{0, 2}, DType::Float32});
  g.mark_output(g.add("matmul", {x, y}));
  check(g, {random_tensor({3, 0}, rng), random_tensor({0, 2}, rng)}, "K = 0");
}

// ---- frozen parameters: batch-norm folding, cached parameter-only work, reordered weights ----------

namespace {

// conv2d(x, w) -> eval batch norm (running stats, affine) -> relu; inputs x, w, mean, var, gamma, beta.
dsl::Graph conv_bn_relu(int64_t n, int64_t c, int64_t oc, int64_t hw, int64_t k) {
  dsl::Graph g;
  const int x = g.add_input({{n, c, hw, hw}, DType::Float32}, "x");
  const int w = g.add_input({{oc, c, k, k}, DType::Float32}, "w");
  std::vector<int> stats;
  for (const char* name : {"mean", "var", "gamma", "beta"}) stats.push_back(g.add_input({{oc}, DType::Float32}, name));
  const int y = g.add("conv2d", {x, w}, {{"padding", int64_t{k / 2}}});
  const int bn = g.add("batch_norm", {y, stats[0], stats[1], stats[2], stats[3]},
                       {{"eps", 1e-5}, {"training", false}, {"has_running_stats", true}});
  g.mark_output(g.add("relu", {bn}));
  return g;
}

std::vector<jit::Tensor> conv_bn_inputs(const dsl::Graph& g, std::mt19937_64& rng) {
  std::vector<jit::Tensor> in;
  for (int v : g.inputs()) in.push_back(random_tensor(g.value(v).type.shape, rng));
  // A positive variance.
  float* var = static_cast<float*>(in[3].data());
  for (int64_t i = 0; i < in[3].numel(); ++i) var[i] = std::fabs(var[i]) + 0.5f;
  return in;
}

jit::CompileOptions frozen_all_but_first(const dsl::Graph& g) {
  jit::CompileOptions opt;
  opt.frozen_inputs.assign(g.inputs().size(), true);
  opt.frozen_inputs[0] = false;
  return opt;
}

}  // namespace

TEST(FrozenParameters, BatchNormFoldsIntoTheConvolution) {
  REQUIRE_BACKENDS();
  auto rng = test::rng(41);
  for (int64_t k : {1, 3}) {
    const dsl::Graph g = conv_bn_relu(2, 5, 7, 9, k);
    const auto in = conv_bn_inputs(g, rng);
    auto exe = check(g, in, "conv + eval batch norm + relu, folded", 1e-4, frozen_all_but_first(g));
    EXPECT_EQ(exe->num_folded(), 1) << exe->explain(false);
    // The activation pass is gone: one library call (relu as its post-op), no per-call kernel.
    EXPECT_EQ(exe->num_library_calls(), 1);
    for (size_t k2 = 0; k2 < exe->kernels().size(); ++k2)
      EXPECT_TRUE(exe->group_cached(exe->kernel_group(k2))) << exe->explain(false);
    const std::string ex = exe->explain(false);
    EXPECT_NE(ex.find("1 convolution(s) absorbed"), std::string::npos) << ex;
    // Without frozen inputs nothing folds, and the result is the same.
    auto plain = check(g, in, "conv + eval batch norm + relu, unfolded");
    EXPECT_EQ(plain->num_folded(), 0);
    EXPECT_EQ(plain->num_cached_groups(), 0);
  }
}

TEST(FrozenParameters, MixedPrecisionBatchNormFoldsIntoTheHalfConvolution) {
  // Under autocast the conv runs in half and its batch norm in float32 between two casts
  // (scheduler/fold_scale.h): the scale and shift still fold, into the float32 weights.
  REQUIRE_BACKENDS();
  auto rng = test::rng(53);
  for (const DType half : {DType::Float16, DType::BFloat16}) {
    dsl::Graph g;
    g.set_autocast(dsl::AutocastPolicy{half, dsl::AutocastDevice::CUDA});
    const int x = g.add_input({{2, 5, 9, 9}, DType::Float32}, "x");
    const int w = g.add_input({{7, 5, 3, 3}, DType::Float32}, "w");
    std::vector<int> stats;
    for (const char* name : {"mean", "var", "gamma", "beta"}) stats.push_back(g.add_input({{7}, DType::Float32}, name));
    const int y = g.add("conv2d", {x, w}, {{"padding", int64_t{1}}});
    ASSERT_EQ(g.value(y).type.dtype, half);
    const int bn = g.add("batch_norm", {y, stats[0], stats[1], stats[2], stats[3]},
                         {{"eps", 1e-5}, {"training", false}, {"has_running_stats", true}});
    const int r = g.add("relu", {bn});
    g.set_autocast(std::nullopt);
    g.mark_output(g.add("cast", {r}, {{"dtype", std::string("float32")}}));
    const auto in = conv_bn_inputs(g, rng);
    // The folded graph rounds once where the unfolded one (the reference) rounds twice.
    const double tol = half == DType::Float16 ? 4e-3 : 3e-2;
    auto exe = check(g, in, std::string("half conv + float32 batch norm, folded: ") + dsl::dtype_name(half), tol,
                     frozen_all_but_first(g));
    EXPECT_EQ(exe->num_folded(), 1) << exe->explain(false);
    EXPECT_EQ(exe->num_library_calls(), 1);
    // Per call: the input's cast, the conv, and one kernel for relu and the output cast; the weight
    // work is cached.
    int per_call = 0;
    for (size_t k = 0; k < exe->kernels().size(); ++k) per_call += exe->group_cached(exe->kernel_group(k)) ? 0 : 1;
    EXPECT_EQ(per_call, 2) << exe->explain(false);
    // Without frozen parameters nothing folds; same values within the same tolerance.
    EXPECT_EQ(check(g, in, "unfolded", tol)->num_folded(), 0);
  }
}

TEST(FrozenParameters, OnlyPerChannelFrozenScalesFold) {
  REQUIRE_BACKENDS();
  auto rng = test::rng(43);
  const int64_t n = 2, c = 3, oc = 4, hw = 6;
  struct Case {
    const char* what;
    Shape scale_shape;
    bool scale_frozen, conv_read_twice, conv_is_output;
    int folded;
  };
  const Case cases[] = {
      {"per-channel [C,1,1]", {oc, 1, 1}, true, false, false, 1},
      {"per-channel [1,C,1,1]", {1, oc, 1, 1}, true, false, false, 1},
      {"one value [1]", {1}, true, false, false, 1},
      {"per-column [W]: not per channel", {hw}, true, false, false, 0},
      {"per-sample [N,1,1,1]", {n, 1, 1, 1}, true, false, false, 0},
      {"scale is a per-call argument", {oc, 1, 1}, false, false, false, 0},
      {"conv output read twice", {oc, 1, 1}, true, true, false, 0},
      {"conv output is a graph output", {oc, 1, 1}, true, false, true, 0},
  };
  for (const Case& cs : cases) {
    dsl::Graph g;
    const int x = g.add_input({{n, c, hw, hw}, DType::Float32});
    const int w = g.add_input({{oc, c, 3, 3}, DType::Float32});
    const int s = g.add_input({cs.scale_shape, DType::Float32});
    const int y = g.add("conv2d", {x, w}, {{"padding", int64_t{1}}});
    int z = g.add("mul", {s, y});  // scale on the left: both operand orders fold
    if (cs.conv_read_twice) z = g.add("add", {z, y});
    g.mark_output(g.add("sigmoid", {z}));
    if (cs.conv_is_output) g.mark_output(y);
    jit::CompileOptions opt;
    opt.frozen_inputs = {false, true, cs.scale_frozen};
    std::vector<jit::Tensor> in{random_tensor({n, c, hw, hw}, rng), random_tensor({oc, c, 3, 3}, rng),
                                random_tensor(cs.scale_shape, rng)};
    auto exe = check(g, in, cs.what, 1e-4, opt);
    EXPECT_EQ(exe->num_folded(), cs.folded) << cs.what << "\n" << exe->explain(false);
  }
}

TEST(FrozenParameters, CachedWorkIsRecomputedWhenAFrozenInputChanges) {
  REQUIRE_BACKENDS();
  auto rng = test::rng(47);
  const dsl::Graph g = conv_bn_relu(2, 4, 6, 8, 3);
  auto in = conv_bn_inputs(g, rng);
  auto exe = check(g, in, "first run", 1e-4, frozen_all_but_first(g));
  ASSERT_GT(exe->num_cached_groups(), 0);
  jit::reset_total_launches();
  exe->run(in);
  EXPECT_EQ(jit::total_launches(), 0u) << "the parameter-only kernels ran again:\n" << exe->explain(false);
  const auto before = runtime::onednn::stats();

  // A new input (per call) reuses everything.
  in[0] = random_tensor(in[0].sizes, rng);
  check(g, in, "new activation, same parameters", 1e-4, {}, exe);
  EXPECT_EQ(jit::total_launches(), 0u);

  // Writing a parameter in place and bumping its version recomputes the folded weights.
  float* gamma = static_cast<float*>(in[4].data());
  for (int64_t i = 0; i < in[4].numel(); ++i) gamma[i] *= -3.0f;
  in[4].storage->bump_version();
  check(g, in, "gamma written in place", 1e-4, {}, exe);
  EXPECT_GT(jit::total_launches(), 0u);

  // Replacing a parameter by another tensor (another storage) recomputes too.
  jit::reset_total_launches();
  in[1] = random_tensor(in[1].sizes, rng);
  check(g, in, "weights replaced", 1e-4, {}, exe);
  EXPECT_GT(jit::total_launches(), 0u);

  // The convolution's weights were reordered once per parameter state, not once per run.
  const auto after = runtime::onednn::stats();
  EXPECT_LE(after.weight_reorders - before.weight_reorders, 2u);
  EXPECT_GE(after.weight_cache_hits, before.weight_cache_hits + 1);
}

TEST(FrozenParameters, HooksSeeEveryKernelUnlessAskedForTheCache) {
  REQUIRE_BACKENDS();
  auto rng = test::rng(53);
  const dsl::Graph g = conv_bn_relu(1, 3, 4, 5, 3);
  const auto in = conv_bn_inputs(g, rng);
  auto exe = jit::compile(g, strides_of(in), frozen_all_but_first(g));
  exe->run(in);
  size_t seen = 0;
  exe->run_with_hook(in, [&](size_t, const std::vector<const jit::Tensor*>&) { ++seen; });
  EXPECT_EQ(seen, exe->kernels().size());
  seen = 0;
  exe->run_with_hook(
      in, [&](size_t, const std::vector<const jit::Tensor*>&) { ++seen; }, nullptr, true);
  EXPECT_EQ(seen, 0u);
}

TEST(FrozenParameters, TheTunerSkipsParameterOnlyWork) {
  REQUIRE_BACKENDS();
  auto rng = test::rng(59);
  // conv + eval batch norm + sigmoid: the folded weights are parameter-only, the sigmoid is per call.
  dsl::Graph g;
  const int x = g.add_input({{1, 3, 6, 6}, DType::Float32}, "x");
  const int w = g.add_input({{4, 3, 3, 3}, DType::Float32}, "w");
  const int s = g.add_input({{4, 1, 1}, DType::Float32}, "s");
  g.mark_output(g.add("sigmoid", {g.add("mul", {g.add("conv2d", {x, w}, {{"padding", int64_t{1}}}), s})}));
  const std::vector<jit::Tensor> in{random_tensor({1, 3, 6, 6}, rng), random_tensor({4, 3, 3, 3}, rng),
                                    random_tensor({4, 1, 1}, rng)};
  jit::CompileOptions opt;
  opt.frozen_inputs = {false, true, true};
  auto exe = jit::compile(g, strides_of(in), opt);
  ASSERT_EQ(exe->num_folded(), 1);
  ASSERT_GT(exe->num_cached_groups(), 0);
  autotune::TuneOptions to;
  to.budget_seconds = 5;
  const auto results = autotune::tune_executable(*exe, in, to, nullptr, nullptr);
  for (const auto& r : results) {
    if (r.scheduler == "oneDNN") continue;
    EXPECT_FALSE(exe->group_cached(exe->kernel_group(r.kernel))) << r.name << " is parameter-only";
  }
  EXPECT_FALSE(results.empty());
  check(g, in, "after tuning", 1e-4, {}, exe);
}

TEST(FoldPad, ZeroSpatialPadsBecomeConvolutionPadding) {
  REQUIRE_BACKENDS();
  auto rng = test::rng(61);
  struct Case {
    const char* what;
    std::vector<int64_t> pads;
    double value;
    bool pad_also_output, conv_padding;
    int folded;
  };
  const Case cases[] = {
      {"asymmetric [1, 2, 0, 3]", {1, 2, 0, 3}, 0.0, false, false, 1},
      {"on top of the conv's own padding", {1, 1, 2, 2}, 0.0, false, true, 1},
      {"last dim only", {2, 1}, 0.0, false, false, 1},
      {"pad also returned", {1, 1, 1, 1}, 0.0, true, false, 1},
      {"nonzero value", {1, 1, 1, 1}, 0.5, false, false, 0},
      {"a crop (negative)", {1, -1, 0, 0}, 0.0, false, false, 0},
      {"channel dim padded", {0, 0, 0, 0, 1, 0}, 0.0, false, false, 0},
  };
  for (const Case& cs : cases) {
    dsl::Graph g;
    const int x = g.add_input({{2, 3, 7, 6}, DType::Float32});
    const int p = g.add("pad", {x}, {{"pads", cs.pads}, {"value", cs.value}});
    const int64_t cin = g.value(p).type.shape[1];
    const int w = g.add_input({{4, cin, 3, 3}, DType::Float32});
    dsl::Attrs ca{{"stride", int64_t{2}}};
    if (cs.conv_padding) ca["padding"] = int64_t{1};
    g.mark_output(g.add("sigmoid", {g.add("conv2d", {p, w}, ca)}));
    if (cs.pad_also_output) g.mark_output(p);
    const std::vector<jit::Tensor> in{random_tensor({2, 3, 7, 6}, rng), random_tensor({4, cin, 3, 3}, rng)};
    auto exe = check(g, in, cs.what);
    EXPECT_EQ(exe->num_folded_pads(), cs.folded) << cs.what << "\n" << exe->explain(false);
    bool pad_kernel = false;
    for (const auto& k : exe->kernels())
      pad_kernel = pad_kernel || k->scheduled.func.name.find("pad") != std::string::npos;
    EXPECT_EQ(pad_kernel, cs.folded == 0 || cs.pad_also_output) << cs.what << "\n" << exe->explain(false);
  }
}

TEST(FoldPad, ThroughAnAutocastCastAndSymmetricOnlyOnCuda) {
  REQUIRE_BACKENDS();
  auto rng = test::rng(67);
  // Under autocast the conv reads cast(pad(x)): the pad still folds, the conv reads cast(x).
  for (const DType half : {DType::BFloat16, DType::Float16}) {
    dsl::Graph g;
    g.set_autocast(dsl::AutocastPolicy{half, dsl::AutocastDevice::CPU});
    const int x = g.add_input({{2, 3, 7, 6}, DType::Float32}, "x");
    const int w = g.add_input({{4, 3, 3, 3}, DType::Float32}, "w");
    const int p = g.add("pad", {x}, {{"pads", std::vector<int64_t>{1, 1, 1, 1}}, {"value", 0.0}});
    const int y = g.add("conv2d", {p, w});
    g.set_autocast(std::nullopt);
    g.mark_output(g.add("cast", {y}, {{"dtype", std::string("float32")}}));
    const std::vector<jit::Tensor> in{random_tensor({2, 3, 7, 6}, rng), random_tensor({4, 3, 3, 3}, rng)};
    auto exe = check(g, in, std::string("pad -> cast -> conv, ") + dsl::dtype_name(half), 3e-2);
    EXPECT_EQ(exe->num_folded_pads(), 1) << exe->explain(false);
    for (const auto& k : exe->kernels())
      EXPECT_EQ(k->scheduled.func.name.find("pad"), std::string::npos) << exe->explain(false);
  }
  // cuDNN pads symmetrically: on CUDA an asymmetric pad stays a pad, a symmetric one folds.
  for (const bool symmetric : {true, false}) {
    dsl::Graph g;
    const int x = g.add_input({{1, 3, 8, 8}, DType::Float16}, "x");
    const int w = g.add_input({{4, 3, 3, 3}, DType::Float16}, "w");
    const std::vector<int64_t> pads = symmetric ? std::vector<int64_t>{1, 1, 2, 2} : std::vector<int64_t>{0, 1, 0, 1};
    g.mark_output(g.add("conv2d", {g.add("pad", {x}, {{"pads", pads}, {"value", 0.0}}), w}));
    EXPECT_EQ(sched::fold_pad_into_conv(g, dsl::Target::CUDA).folded, symmetric ? 1 : 0);
    EXPECT_EQ(sched::fold_pad_into_conv(g, dsl::Target::CPU).folded, 1);
  }
}

// Half-precision convolutions and GEMMs on the CPU take oneDNN's half primitives or the float32
// route (jit::CpuHalfPolicy); both must match the reference, and the float32 route must keep the
// operands' layouts (a channels-last activation widened to NCHW against an NHWC destination leaves
// oneDNN only its reference implementation, about 1000x slower) and widen frozen weights once.
TEST(HalfLibraryOps, NativeAndFloat32RoutesMatchAndKeepFastLayouts) {
  REQUIRE_BACKENDS();
  struct Restore {
    jit::CpuHalfPolicy was = jit::cpu_half_policy();
    ~Restore() { jit::set_cpu_half_policy(was); }
  } restore;
  auto rng = test::rng(57);
  for (const DType half : {DType::BFloat16, DType::Float16}) {
    dsl::Graph g;
    g.set_autocast(dsl::AutocastPolicy{half, dsl::AutocastDevice::CPU});
    const int x = g.add_input({{2, 16, 12, 12}, DType::Float32}, "x");
    const int w1 = g.add_input({{32, 16, 3, 3}, DType::Float32}, "w1");
    const int w2 = g.add_input({{32, 32, 1, 1}, DType::Float32}, "w2");
    const int lw = g.add_input({{10, 32}, DType::Float32}, "lw");
    int h = g.add("relu", {g.add("conv2d", {x, w1}, {{"padding", int64_t{1}}})});
    h = g.add("relu", {g.add("conv2d", {h, w2})});
    const int pooled = g.add("mean", {h}, {{"dims", std::vector<int64_t>{2, 3}}, {"keepdim", false}});
    g.mark_output(g.add("cast", {g.add("linear", {pooled, lw})}, {{"dtype", std::string("float32")}}));
    std::vector<jit::Tensor> in;
    for (int v : g.inputs()) in.push_back(random_tensor(g.value(v).type.shape, rng));
    // Against exact (float64) math: every intermediate is rounded to the half type, bfloat16 keeping
    // 8 bits; through two convolutions, a mean and a product some seeds reach 7% on bfloat16 (seed
    // 37235952556533: 0.071), so its bound is 10%.
    const double tol = half == DType::Float16 ? 1e-2 : 1e-1;
    for (const jit::CpuHalfPolicy policy : {jit::CpuHalfPolicy::Native, jit::CpuHalfPolicy::Float32}) {
      jit::set_cpu_half_policy(policy);
      const std::string what = std::string(dsl::dtype_name(half)) +
                               (policy == jit::CpuHalfPolicy::Native ? ", native primitives" : ", float32 route");
      auto exe = check(g, in, what, tol, frozen_all_but_first(g));
      ASSERT_EQ(exe->num_library_calls(), 3) << what;
      // Each call as the tuner runs it, with the implementation oneDNN picked.
      std::vector<std::string> chosen;
      exe->run_with_hook(in, nullptr, [&](size_t i, const std::vector<const jit::Tensor*>& values) {
        runtime::onednn::ImplInfo info;
        jit::run_library_group(exe->graph(), exe->library_steps()[i], values, &info);
        chosen.push_back(info.chosen);
      });
      ASSERT_EQ(chosen.size(), 3u) << what;
      if (policy == jit::CpuHalfPolicy::Float32) {
        for (const std::string& impl : chosen) EXPECT_EQ(impl.find("ref:"), std::string::npos) << what << ": " << impl;
      }
      // A second run reuses the widened frozen weights: same results.
      check(g, in, what + ", second run", tol, {}, exe);
    }
  }
}

// embedding_bag's CPU executor against its reference (dsl/library_reference.cpp): every mode, with
// padding_idx and per-sample weights, an empty bag and a strided weight; and the same torch
// message from both for bad offsets and indices.
TEST(LibraryOps, EmbeddingBagMatchesReference) {
  REQUIRE_BACKENDS();
  auto rng = test::rng(91);
  std::vector<int64_t> idx(30);
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>((i * 7 + 3) % 20);
  const jit::Tensor indices = int64_tensor(idx), offsets = int64_tensor({0, 4, 4, 11, 30});
  for (const bool strided : {false, true}) {
    const jit::Tensor weight = strided ? strided_tensor({20, 9}, rng) : random_tensor({20, 9}, rng);
    for (const char* mode : {"sum", "mean", "max"})
      for (const bool psw : {false, true}) {
        if (psw && std::string(mode) != "sum") continue;
        dsl::Graph g;
        std::vector<int> in = {g.add_input({{30}, DType::Int64}), g.add_input({{20, 9}, DType::Float32}),
                               g.add_input({{5}, DType::Int64})};
        if (psw) in.push_back(g.add_input({{30}, DType::Float32}));
        g.mark_output(g.add("embedding_bag", in, {{"mode", std::string(mode)}, {"padding_idx", int64_t{-17}}}));
        std::vector<jit::Tensor> inputs = {indices, weight, offsets};
        if (psw) inputs.push_back(random_tensor({30}, rng));
        check(g, inputs, std::string(mode) + (psw ? " weighted" : "") + (strided ? " strided" : ""), 1e-6);
      }
  }
  dsl::Graph g;
  const int i = g.add_input({{3}, DType::Int64}), w = g.add_input({{4, 2}, DType::Float32});
  const int o = g.add_input({{2}, DType::Int64});
  g.mark_output(g.add("embedding_bag", {i, w, o}, {{"mode", std::string("sum")}}));
  const auto exe = jit::compile(g, {}, {});
  const jit::Tensor weight = random_tensor({4, 2}, rng);
  for (const auto& [ix, off, message] :
       std::vector<std::tuple<std::vector<int64_t>, std::vector<int64_t>, std::string>>{
           {{0, 1, 2}, {1, 3}, "offsets[0] has to be 0"},
           {{0, 1, 2}, {0, 4}, "offsets[1] can not be greater than input's length 3"},
           {{0, 9, 2}, {0, 3}, "Index 1 of input takes value 9 which is not in the valid range [0, 4)"}}) {
    const std::vector<jit::Tensor> inputs = {int64_tensor(ix), weight, int64_tensor(off)};
    const std::string ran = op_error([&] { exe->run(inputs); });
    const std::string interpreted = op_error([&] {
      dsl::interpret_graph(g, {host_of(inputs[0]), host_of(inputs[1]), host_of(inputs[2])}, true);
    });
    EXPECT_NE(ran.find(message), std::string::npos) << ran;
    EXPECT_EQ(ran, interpreted);
  }
}

// A plain (1x1, stride 1) convolution whose source and destination differ in layout (an NCHW
// concatenation read by a channels-last convolution, as in DenseNet) reorders its source first:
// oneDNN 2.6 has only its reference implementation for mixed layouts, ~1000x slower.
TEST(OnednnConv, MixedSourceAndDestinationLayoutsAvoidTheReferenceImplementation) {
  if (!runtime::onednn::available()) GTEST_SKIP() << "built without oneDNN";
  auto rng = test::rng(91);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  // 1 x 1 spatially: a squeeze-and-excitation vector, whose unit dims' strides oneDNN reads as a
  // layout too.
  for (const auto& [H, W] : {std::pair<int64_t, int64_t>{5, 7}, std::pair<int64_t, int64_t>{1, 1}}) {
    const int64_t N = 2, C = 24, K = 16;
    std::vector<float> src(N * C * H * W), w(K * C), dst(N * K * H * W), want(N * K * H * W, 0.0f);
    for (float& v : src) v = u(rng);
    for (float& v : w) v = u(rng);
    const std::vector<int64_t> nchw_src{C * H * W, H * W, W, 1}, nhwc_src{H * W * C, 1, W * C, C};
    const std::vector<int64_t> nchw_dst{K * H * W, H * W, W, 1}, nhwc_dst{H * W * K, 1, W * K, K};
    // A 1x1 stride-1 transposed convolution computes the same sum over its weights' transpose.
    std::vector<float> wt(C * K);
    for (int64_t k = 0; k < K; ++k)
      for (int64_t c = 0; c < C; ++c) wt[c * K + k] = w[k * C + c];
    // (source, destination) layouts: mixed both ways, and NHWC to NHWC, which oneDNN 2.6's
    // brgconv_1x1 computed wrongly for a 1 x 1 image.
    using Layouts = std::pair<std::vector<int64_t>, std::vector<int64_t>>;
    for (const auto& [ss, ds] :
         {Layouts{nhwc_src, nchw_dst}, Layouts{nchw_src, nhwc_dst}, Layouts{nhwc_src, nhwc_dst}}) {
      const bool src_nhwc = ss == nhwc_src, dst_nhwc = ds == nhwc_dst;
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k)
          for (int64_t y = 0; y < H; ++y)
            for (int64_t x = 0; x < W; ++x) {
              double acc = 0;
              for (int64_t c = 0; c < C; ++c)
                acc += double(w[k * C + c]) * src[n * ss[0] + c * ss[1] + y * ss[2] + x * ss[3]];
              want[n * ds[0] + k * ds[1] + y * ds[2] + x * ds[3]] = static_cast<float>(acc);
            }
      for (const bool transposed : {false, true}) {
        runtime::onednn::ConvParams p;
        p.transposed = transposed;
        runtime::onednn::ImplInfo info;
        std::fill(dst.begin(), dst.end(), std::nanf(""));
        const runtime::onednn::TensorArg weights = transposed ? runtime::onednn::TensorArg{wt.data(), {C, K, 1, 1}, {}}
                                                              : runtime::onednn::TensorArg{w.data(), {K, C, 1, 1}, {}};
        runtime::onednn::convolution(p, {src.data(), {N, C, H, W}, ss}, weights, nullptr,
                                     {dst.data(), {N, K, H, W}, ds}, {}, "", &info);
        const std::string what = std::string(transposed ? "transposed, " : "") + (src_nhwc ? "NHWC" : "NCHW") +
                                 " source, " + (dst_nhwc ? "NHWC" : "NCHW") + " destination, " + std::to_string(H) +
                                 "x" + std::to_string(W);
        EXPECT_EQ(info.chosen.find("ref"), std::string::npos) << what << ": " << info.chosen;
        for (size_t i = 0; i < dst.size(); ++i) ASSERT_NEAR(dst[i], want[i], 1e-4) << what << " at " << i;
      }
    }
  }
}
