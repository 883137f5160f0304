// The ops added for ResNet-50 / ViT / the Tensor API (dsl/ops/elementwise_more.cpp,
// reduction_more.cpp, norms.cpp): each against a direct C++ formula through the graph interpreter,
// and the same graph through the jit (LLVM) and the GPU schedules (loop interpreter + NVRTC), over
// random shapes including empty, size-1 and odd ones, NaN/inf edge values, kernel counts of the
// composites, dtypes and error messages.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "dsl/op_table.h"
#include "jit/eager.h"
#include "ops_more_harness.h"
#include "test_util.h"

using namespace flow;
using dsl::DType;
using dsl::Shape;
using test::check_graph;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

dsl::HostTensor host(const Shape& s, DType t, std::vector<double> d) {
  return dsl::HostTensor{{s, t}, std::move(d)};
}

dsl::HostTensor random_host(std::mt19937_64& rng, const Shape& s, DType t = DType::Float32, double lo = -3,
                            double hi = 3, const std::vector<double>& specials = {}) {
  // Values rounded to the dtype, so formulas evaluated in double see what the kernels see.
  dsl::HostTensor h = host(s, t, test::random_values(rng, s, t, lo, hi, specials));
  for (double& v : h.data) v = dsl::round_to_dtype(t, v);
  return h;
}

// Flat input indices of each output element (keepdim=false order) of a reduction over `dims`, each
// row in row-major order of the reduced dims.
std::vector<std::vector<int64_t>> rows_of(const Shape& s, const std::vector<int64_t>& dims) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  std::vector<int64_t> kept, red;
  for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d)
    (std::find(dims.begin(), dims.end(), d) != dims.end() ? red : kept).push_back(d);
  auto enumerate = [&](const std::vector<int64_t>& ds) {
    std::vector<int64_t> offs{0};
    for (int64_t d : ds) {
      std::vector<int64_t> next;
      for (int64_t o : offs)
        for (int64_t i = 0; i < s[d]; ++i) next.push_back(o + i * st[d]);
      offs = next;
    }
    return offs;
  };
  std::vector<std::vector<int64_t>> out;
  for (int64_t k : enumerate(kept)) {
    std::vector<int64_t> row;
    for (int64_t r : enumerate(red)) row.push_back(k + r);
    out.push_back(row);
  }
  return out;
}

template <class Fn>
dsl::OpError expect_op_error(Fn&& f) {
  try {
    f();
  } catch (const dsl::OpError& e) {
    return e;
  }
  ADD_FAILURE() << "expected an OpError";
  return dsl::OpError(dsl::OpError::Kind::Value, "");
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_TRUE(test::near(got[i], want[i], tol)) << what << " [" << i << "]: got " << got[i] << ", want " << want[i];
}

// ---- normalizations -------------------------------------------------------------------------------

// Reference layer norm over the last `k` dims (biased variance), with optional weight and bias.
std::vector<double> layer_norm_ref(const dsl::HostTensor& x, size_t k, const std::vector<double>* w,
                                   const std::vector<double>* b, double eps) {
  std::vector<int64_t> dims;
  for (size_t d = x.type.shape.size() - k; d < x.type.shape.size(); ++d) dims.push_back(static_cast<int64_t>(d));
  std::vector<double> out(x.data.size());
  for (const auto& row : rows_of(x.type.shape, dims)) {
    double mean = 0, var = 0;
    for (int64_t i : row) mean += x.data[i];
    mean /= static_cast<double>(row.size());
    for (int64_t i : row) var += (x.data[i] - mean) * (x.data[i] - mean);
    var /= static_cast<double>(row.size());
    for (size_t j = 0; j < row.size(); ++j) {
      double y = (x.data[row[j]] - mean) / std::sqrt(var + eps);
      if (w) y *= (*w)[j];
      if (b) y += (*b)[j];
      out[row[j]] = y;
    }
  }
  return out;
}

TEST(Norms, LayerNormIsOneKernelAndMatchesFormula) {
  auto rng = test::rng(101);
  const std::vector<std::pair<Shape, size_t>> cases = {{{4, 7}, 1}, {{3, 5, 16}, 1}, {{3, 5, 6}, 2}, {{1, 1}, 1},
                                                       {{5, 1}, 1}, {{0, 8}, 1},     {{2, 33}, 1},   {{9}, 1}};
  for (const auto& [shape, k] : cases) {
    for (int affine = 0; affine < 3; ++affine) {
      const Shape ns(shape.end() - static_cast<std::ptrdiff_t>(k), shape.end());
      dsl::Graph g;
      const int x = g.add_input({shape, DType::Float32});
      std::vector<int> in{x};
      std::vector<dsl::HostTensor> data{random_host(rng, shape)};
      for (int p = 0; p < affine; ++p) {
        in.push_back(g.add_input({ns, DType::Float32}));
        data.push_back(random_host(rng, ns));
      }
      g.mark_output(g.add("layer_norm", in, {{"normalized_shape", ns}, {"eps", 1e-5}}));
      const auto out = check_graph(g, data, 2e-5, 1);
      const auto want = layer_norm_ref(data[0], k, affine >= 1 ? &data[1].data : nullptr,
                                       affine >= 2 ? &data[2].data : nullptr, 1e-5);
      expect_close(out[0].data, want, 2e-5, "layer_norm " + dsl::shape_str(shape));
    }
  }
}

TEST(Norms, LayerNormBiasOnlyAndErrors) {
  auto rng = test::rng(102);
  dsl::Graph g;
  const int x = g.add_input({{3, 4}, DType::Float32});
  const int b = g.add_input({{4}, DType::Float32});
  g.mark_output(g.add("layer_norm", {x, b}, {{"normalized_shape", Shape{4}}, {"has_weight", false}}));
  const std::vector<dsl::HostTensor> data{random_host(rng, {3, 4}), random_host(rng, {4})};
  const auto out = check_graph(g, data, 2e-5, 1);
  expect_close(out[0].data, layer_norm_ref(data[0], 1, nullptr, &data[1].data, 1e-5), 2e-5, "bias only");

  EXPECT_EQ(std::string(expect_op_error([&] {
                          g.add("layer_norm", {x}, {{"normalized_shape", Shape{3}}});
                        }).what()),
            "Given normalized_shape=[3], expected input with shape [*, 3], but got input of size[3, 4]");
  const int w5 = g.add_input({{5}, DType::Float32});
  EXPECT_EQ(std::string(expect_op_error([&] {
                          g.add("layer_norm", {x, w5}, {{"normalized_shape", Shape{4}}});
                        }).what()),
            "Expected weight to be of same shape as normalized_shape, but got weight of shape [5] and "
            "normalized_shape = [4]");
  const int xi = g.add_input({{3, 4}, DType::Int64});
  EXPECT_EQ(std::string(expect_op_error([&] {
                          g.add("layer_norm", {xi}, {{"normalized_shape", Shape{4}}});
                        }).what()),
            "\"layer_norm\" not implemented for 'Long'");
}

TEST(Norms, RmsNorm) {
  auto rng = test::rng(103);
  dsl::Graph g;
  const int x = g.add_input({{6, 10}, DType::Float32});
  const int w = g.add_input({{10}, DType::Float32});
  g.mark_output(g.add("rms_norm", {x, w}, {{"normalized_shape", Shape{10}}}));
  const std::vector<dsl::HostTensor> data{random_host(rng, {6, 10}), random_host(rng, {10})};
  const auto out = check_graph(g, data, 2e-5, 1);
  std::vector<double> want(60);
  const double eps = std::numeric_limits<float>::epsilon();
  for (int r = 0; r < 6; ++r) {
    double ms = 0;
    for (int j = 0; j < 10; ++j) ms += data[0].data[r * 10 + j] * data[0].data[r * 10 + j];
    for (int j = 0; j < 10; ++j)
      want[r * 10 + j] = data[0].data[r * 10 + j] / std::sqrt(ms / 10 + eps) * data[1].data[j];
  }
  expect_close(out[0].data, want, 2e-5, "rms_norm");
}

TEST(Norms, GroupNormIsOneKernel) {
  auto rng = test::rng(104);
  const std::vector<std::pair<Shape, int64_t>> cases = {
      {{2, 6, 5, 3}, 3}, {{3, 4}, 2}, {{1, 8, 7}, 8}, {{2, 4, 1, 1}, 1}};
  for (const auto& [shape, G] : cases) {
    const int64_t C = shape[1];
    dsl::Graph g;
    const int x = g.add_input({shape, DType::Float32});
    const int w = g.add_input({{C}, DType::Float32});
    const int b = g.add_input({{C}, DType::Float32});
    g.mark_output(g.add("group_norm", {x, w, b}, {{"num_groups", G}, {"eps", 1e-5}}));
    const std::vector<dsl::HostTensor> data{random_host(rng, shape), random_host(rng, {C}), random_host(rng, {C})};
    const auto out = check_graph(g, data, 2e-5, 1);
    const int64_t N = shape[0], per = dsl::numel(shape) / (N * G), hw = per / (C / G);
    std::vector<double> want(data[0].data.size());
    for (int64_t n = 0; n < N; ++n)
      for (int64_t gi = 0; gi < G; ++gi) {
        const int64_t base = (n * G + gi) * per;
        double mean = 0, var = 0;
        for (int64_t j = 0; j < per; ++j) mean += data[0].data[base + j];
        mean /= static_cast<double>(per);
        for (int64_t j = 0; j < per; ++j) var += std::pow(data[0].data[base + j] - mean, 2);
        var /= static_cast<double>(per);
        for (int64_t j = 0; j < per; ++j) {
          const int64_t c = gi * (C / G) + j / hw;
          want[base + j] = (data[0].data[base + j] - mean) / std::sqrt(var + 1e-5) * data[1].data[c] + data[2].data[c];
        }
      }
    expect_close(out[0].data, want, 2e-5, "group_norm " + dsl::shape_str(shape));
  }
  dsl::Graph g;
  const int x = g.add_input({{2, 6, 4}, DType::Float32});
  EXPECT_EQ(std::string(expect_op_error([&] {
                          g.add("group_norm", {x}, {{"num_groups", int64_t{4}}});
                        }).what()),
            "Expected number of channels in input to be divisible by num_groups, but got input of shape [2, 6, 4] and "
            "num_groups=4");
}

TEST(Norms, BatchNormEvalIsOnePointwiseKernel) {
  auto rng = test::rng(105);
  for (const Shape& shape : {Shape{2, 3, 4, 5}, Shape{4, 3}, Shape{1, 5, 7}}) {
    const int64_t C = shape[1];
    dsl::Graph g;
    const int x = g.add_input({shape, DType::Float32});
    std::vector<int> in{x};
    for (int p = 0; p < 4; ++p) in.push_back(g.add_input({{C}, DType::Float32}));
    g.mark_output(g.add("batch_norm", in, {{"eps", 1e-3}}));
    std::vector<dsl::HostTensor> data{random_host(rng, shape), random_host(rng, {C}),
                                      random_host(rng, {C}, DType::Float32, 0.1, 2), random_host(rng, {C}),
                                      random_host(rng, {C})};
    // Two kernels: the per-channel scale/shift (C elements), then x * scale + shift.
    const auto out = check_graph(g, data, 2e-5, 2);
    const int64_t inner = dsl::numel(shape) / (shape[0] * C);
    std::vector<double> want(data[0].data.size());
    for (size_t i = 0; i < want.size(); ++i) {
      const int64_t c = (static_cast<int64_t>(i) / inner) % C;
      want[i] =
          (data[0].data[i] - data[1].data[c]) / std::sqrt(data[2].data[c] + 1e-3) * data[3].data[c] + data[4].data[c];
    }
    expect_close(out[0].data, want, 2e-5, "batch_norm eval");
  }
}

TEST(Norms, BatchNormTrainReturnsBatchStatsInOneKernel) {
  auto rng = test::rng(106);
  const Shape shape{3, 4, 5, 2};
  const int64_t C = 4;
  dsl::Graph g;
  const int x = g.add_input({shape, DType::Float32});
  const int w = g.add_input({{C}, DType::Float32});
  const int b = g.add_input({{C}, DType::Float32});
  const auto outs = g.add_op("batch_norm", {x, w, b}, {{"training", true}, {"has_running_stats", false}});
  ASSERT_EQ(outs.size(), 3u);
  for (int o : outs) g.mark_output(o);
  EXPECT_EQ(g.value(outs[1]).type.shape, (Shape{C}));
  const std::vector<dsl::HostTensor> data{random_host(rng, shape), random_host(rng, {C}), random_host(rng, {C})};
  const auto out = check_graph(g, data, 2e-5, 1);
  const auto rows = rows_of(shape, {0, 2, 3});
  std::vector<double> y(data[0].data.size()), mean(C), var(C);
  for (int64_t c = 0; c < C; ++c) {
    double m = 0, v = 0;
    for (int64_t i : rows[c]) m += data[0].data[i];
    m /= static_cast<double>(rows[c].size());
    for (int64_t i : rows[c]) v += std::pow(data[0].data[i] - m, 2);
    const double n = static_cast<double>(rows[c].size());
    for (int64_t i : rows[c])
      y[i] = (data[0].data[i] - m) / std::sqrt(v / n + 1e-5) * data[1].data[c] + data[2].data[c];
    mean[c] = m;
    var[c] = v / (n - 1);
  }
  expect_close(out[0].data, y, 2e-5, "y");
  expect_close(out[1].data, mean, 2e-5, "batch mean");
  expect_close(out[2].data, var, 2e-5, "batch var (unbiased)");

  dsl::Graph g2;
  const int x1 = g2.add_input({{1, 4}, DType::Float32});
  EXPECT_EQ(std::string(expect_op_error([&] {
                          g2.add_op("batch_norm", {x1}, {{"training", true}, {"has_running_stats", false}});
                        }).what()),
            "Expected more than 1 value per channel when training, got input size [1, 4]");
  EXPECT_EQ(std::string(expect_op_error([&] {
                          g2.add_op("batch_norm", {x1}, {{"has_running_stats", false}});
                        }).what()),
            "running_mean and running_var must be defined in evaluation mode");
}

TEST(Norms, SoftmaxLikeCompositesAreOneKernel) {
  for (const char* op : {"softmax", "log_softmax"}) {
    dsl::Graph g;
    const int x = g.add_input({{4, 9}, DType::Float32});
    g.mark_output(g.add(op, {x}, {{"dim", int64_t{-1}}}));
    EXPECT_EQ(test::planned_kernels(g), 1) << op;
  }
  for (const char* op : {"logsumexp", "var", "std"}) {
    dsl::Graph g;
    const int x = g.add_input({{4, 9}, DType::Float32});
    g.mark_output(g.add(op, {x}, {{"dims", std::vector<int64_t>{1}}}));
    EXPECT_EQ(test::planned_kernels(g), 1) << op;
  }
}

}  // namespace

// ---- elementwise ----------------------------------------------------------------------------------

namespace {

const std::vector<double> kSpecials = {kNaN, kInf, -kInf, 0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 1e-8, -1.0, 30.0};
const std::vector<Shape> kShapes = {{0}, {1}, {7}, {3, 5}, {2, 3, 33}};

// op(x) through every path, and the interpreter's result against formula(x) (computed in double,
// rounded to the output dtype) within tol (exact for integer and bool outputs).
void check_unary(const std::string& op, const dsl::Attrs& attrs, DType in_t, DType out_t,
                 const std::function<double(double)>& formula, double tol = 2e-6) {
  auto rng = test::rng(std::hash<std::string>()(op) % 1000);
  for (const Shape& s : kShapes) {
    dsl::Graph g;
    const int x = g.add_input({s, in_t});
    const int y = g.add(op, {x}, attrs);
    ASSERT_EQ(g.value(y).type.dtype, out_t) << op;
    g.mark_output(y);
    const bool fl = dsl::is_floating(in_t);
    const auto data = random_host(rng, s, in_t, fl ? -4 : -50, fl ? 4 : 50, fl ? kSpecials : std::vector<double>{});
    const auto out = check_graph(g, {data}, 1e-5, s[0] == 0 ? -1 : 1);
    for (size_t i = 0; i < data.data.size(); ++i) {
      const double want = dsl::round_to_dtype(out_t, formula(data.data[i]));
      const double got = out[0].data[i];
      if (dsl::is_floating(out_t)) {
        ASSERT_TRUE(test::near(got, want, tol)) << op << "(" << data.data[i] << ") = " << got << ", want " << want;
        if (want == 0 && !std::isnan(got)) {
          ASSERT_EQ(std::signbit(got), std::signbit(want)) << op << "(" << data.data[i] << ")";
        }
      } else {
        ASSERT_EQ(got, want) << op << "(" << data.data[i] << ")";
      }
    }
  }
}

double sign_of(double x) {
  return static_cast<double>((0 < x) - (x < 0));
}
// Clamp keeping NaN; a zero result is +0 (the IR's max(-0, +0) = +0, as torch's vectorized clamp).
double clamp_nan(double x, double lo, double hi) {
  if (std::isnan(x)) return x;
  const double r = std::min(std::max(x, lo), hi);
  return r == 0 && lo == 0 ? 0.0 : r;
}

}  // namespace

TEST(Elementwise, FloatUnaryMath) {
  const DType F = DType::Float32;
  check_unary("erf", {}, F, F, [](double x) { return std::erf(x); });
  check_unary(
      "log1p", {}, F, F, [](double x) { return std::log1p(x); }, 4e-6);
  check_unary(
      "expm1", {}, F, F, [](double x) { return std::expm1(x); }, 4e-6);
  check_unary("sin", {}, F, F, [](double x) { return std::sin(x); });
  check_unary("cos", {}, F, F, [](double x) { return std::cos(x); });
  check_unary(
      "floor", {}, F, F, [](double x) { return std::floor(x); }, 0);
  check_unary(
      "ceil", {}, F, F, [](double x) { return std::ceil(x); }, 0);
  check_unary(
      "round", {}, F, F, [](double x) { return std::nearbyint(x); }, 0);
  check_unary(
      "trunc", {}, F, F, [](double x) { return std::trunc(x); }, 0);
  check_unary("round", {{"decimals", int64_t{1}}}, F, F,
              [](double x) { return static_cast<double>(std::nearbyint(static_cast<float>(x * 10.0f)) / 10.0f); });
  check_unary("sign", {}, F, F, sign_of, 0);
  check_unary("reciprocal", {}, F, F, [](double x) { return 1 / x; });
  check_unary("square", {}, F, F, [](double x) { return x * x; });
  check_unary("isnan", {}, F, DType::Bool, [](double x) { return std::isnan(x) ? 1.0 : 0.0; });
  check_unary("isinf", {}, F, DType::Bool, [](double x) { return std::isinf(x) ? 1.0 : 0.0; });
  check_unary("isfinite", {}, F, DType::Bool, [](double x) { return std::isfinite(x) ? 1.0 : 0.0; });
  check_unary("logical_not", {}, F, DType::Bool, [](double x) { return x == 0 ? 1.0 : 0.0; });
  check_unary("nan_to_num", {{"nan", 1.5}, {"neginf", -7.0}}, F, F, [](double x) {
    if (std::isnan(x)) return 1.5;
    if (x == kInf) return static_cast<double>(std::numeric_limits<float>::max());
    return x == -kInf ? -7.0 : x;
  });
  check_unary(
      "sin", {}, DType::Float64, DType::Float64, [](double x) { return std::sin(x); }, 1e-12);
  check_unary(
      "log1p", {}, DType::Float64, DType::Float64, [](double x) { return std::log1p(x); }, 1e-12);
  check_unary(
      "expm1", {}, DType::Float64, DType::Float64, [](double x) { return std::expm1(x); }, 1e-12);
}

TEST(Elementwise, Activations) {
  const DType F = DType::Float32;
  check_unary("leaky_relu", {{"negative_slope", 0.2}}, F, F, [](double x) { return x > 0 ? x : x * 0.2; });
  check_unary("leaky_relu", {}, F, F, [](double x) { return x > 0 ? x : x * 0.01; });
  check_unary(
      "elu", {{"alpha", 1.5}}, F, F, [](double x) { return x > 0 ? x : 1.5 * std::expm1(x); }, 4e-6);
  check_unary(
      "hardtanh", {{"min_val", -0.5}, {"max_val", 2.0}}, F, F, [](double x) { return clamp_nan(x, -0.5, 2); }, 0);
  check_unary(
      "relu6", {}, F, F, [](double x) { return clamp_nan(x, 0, 6); }, 0);
  check_unary("hardswish", {}, F, F, [](double x) { return x * clamp_nan(x + 3, 0, 6) / 6; });
  check_unary("hardsigmoid", {}, F, F, [](double x) { return clamp_nan(x + 3, 0, 6) / 6; });
  check_unary(
      "softplus", {{"beta", 2.0}, {"threshold", 5.0}}, F, F,
      [](double x) { return x * 2 > 5 ? x : std::log1p(std::exp(2 * x)) / 2; }, 4e-6);
  check_unary(
      "mish", {}, F, F, [](double x) { return x * std::tanh(std::log1p(std::exp(x))); }, 4e-6);
}

TEST(Elementwise, IntegerAndBoolUnary) {
  const DType L = DType::Int64, I = DType::Int32, B = DType::Bool;
  check_unary("floor", {}, L, L, [](double x) { return x; });
  check_unary("round", {}, I, I, [](double x) { return x; });
  check_unary("trunc", {}, L, L, [](double x) { return x; });
  check_unary("sign", {}, I, I, sign_of);
  check_unary("square", {}, L, L, [](double x) { return x * x; });
  check_unary("square", {}, B, L, [](double x) { return x; });
  check_unary("reciprocal", {}, L, DType::Float32, [](double x) { return 1 / x; });
  check_unary("erf", {}, L, DType::Float32, [](double x) { return std::erf(x); });
  check_unary("bitwise_not", {}, L, L, [](double x) { return -x - 1; });
  check_unary("bitwise_not", {}, B, B, [](double x) { return x == 0 ? 1.0 : 0.0; });
  check_unary("relu6", {}, L, L, [](double x) { return std::min(std::max(x, 0.0), 6.0); });
  check_unary("isnan", {}, L, B, [](double) { return 0.0; });
  check_unary("isfinite", {}, L, B, [](double) { return 1.0; });
  check_unary("logical_not", {}, L, B, [](double x) { return x == 0 ? 1.0 : 0.0; });
}

namespace {

// torch's div_floor_floating and Python remainder, in float32 arithmetic.
float floor_div_f(float a, float b) {
  if (b == 0) return a / b;
  const float mod = std::fmod(a, b);
  float div = (a - mod) / b;
  if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;
  if (div == 0) return std::copysign(0.0f, a / b);
  float fl = std::floor(div);
  if (div - fl > 0.5f) fl += 1;
  return fl;
}
float remainder_f(float a, float b) {
  float m = std::fmod(a, b);
  if (m != 0 && (b < 0) != (m < 0)) m += b;
  return m;
}
int64_t floor_div_i(int64_t a, int64_t b) {
  const int64_t q = a / b, r = a % b;
  return r != 0 && ((r < 0) != (b < 0)) ? q - 1 : q;
}
int64_t remainder_i(int64_t a, int64_t b) {
  const int64_t r = a % b;
  return r != 0 && ((r < 0) != (b < 0)) ? r + b : r;
}

void check_binary(const std::string& op, DType t, DType out_t, const std::function<double(double, double)>& formula,
                  bool nonzero_b) {
  auto rng = test::rng(std::hash<std::string>()(op) % 1000 + 7);
  for (const auto& [sa, sb] :
       std::vector<std::pair<Shape, Shape>>{{{0}, {1}}, {{7}, {7}}, {{3, 5}, {5}}, {{4, 1}, {1, 9}}}) {
    dsl::Graph g;
    const int a = g.add_input({sa, t});
    const int b = g.add_input({sb, t});
    const int y = g.add(op, {a, b});
    ASSERT_EQ(g.value(y).type.dtype, out_t);
    g.mark_output(y);
    const bool fl = dsl::is_floating(t);
    auto da = random_host(rng, sa, t, fl ? -9 : -30, fl ? 9 : 30, fl ? kSpecials : std::vector<double>{});
    auto db = random_host(rng, sb, t, fl ? -4 : -7, fl ? 4 : 7, fl ? kSpecials : std::vector<double>{});
    if (nonzero_b)
      for (double& v : db.data) v = v == 0 ? 3 : v;
    const auto out = check_graph(g, {da, db}, 1e-6, sa[0] == 0 ? -1 : 1);
    const Shape os = g.value(y).type.shape;
    for (int64_t i = 0; i < dsl::numel(os); ++i) {
      // Broadcast indices (2-d at most here).
      const int64_t r = os.size() == 2 ? i / os[1] : 0, c = os.size() == 2 ? i % os[1] : i;
      auto at = [&](const dsl::HostTensor& h) {
        const Shape& s = h.type.shape;
        if (s.size() == 1) return h.data[s[0] == 1 ? 0 : c];
        return h.data[(s[0] == 1 ? 0 : r) * s[1] + (s[1] == 1 ? 0 : c)];
      };
      const double want = dsl::round_to_dtype(out_t, formula(at(da), at(db)));
      ASSERT_TRUE(test::near(out[0].data[i], want, 0))
          << op << "(" << at(da) << ", " << at(db) << ") = " << out[0].data[i] << ", want " << want;
      if (want == 0) {
        ASSERT_EQ(std::signbit(out[0].data[i]), std::signbit(want)) << op << "(" << at(da) << ", " << at(db) << ")";
      }
    }
  }
}

}  // namespace

TEST(Elementwise, DivisionFamily) {
  const DType F = DType::Float32, L = DType::Int64;
  auto f = [](float (*fn)(float, float)) {
    return [fn](double a, double b) { return static_cast<double>(fn(static_cast<float>(a), static_cast<float>(b))); };
  };
  check_binary("floor_divide", F, F, f(floor_div_f), false);
  check_binary("remainder", F, F, f(remainder_f), false);
  check_binary(
      "fmod", F, F, [](double a, double b) { return std::fmod(a, b); }, false);
  check_binary(
      "floor_divide", L, L, [](double a, double b) { return double(floor_div_i(int64_t(a), int64_t(b))); }, true);
  check_binary(
      "remainder", L, L, [](double a, double b) { return double(remainder_i(int64_t(a), int64_t(b))); }, true);
  check_binary(
      "fmod", L, L, [](double a, double b) { return double(int64_t(a) % int64_t(b)); }, true);
  check_binary(
      "logical_and", F, DType::Bool, [](double a, double b) { return (a != 0 && b != 0) ? 1.0 : 0.0; }, false);
  check_binary(
      "logical_or", L, DType::Bool, [](double a, double b) { return (a != 0 || b != 0) ? 1.0 : 0.0; }, false);
  check_binary(
      "logical_xor", F, DType::Bool, [](double a, double b) { return ((a != 0) != (b != 0)) ? 1.0 : 0.0; }, false);
}

TEST(Elementwise, DtypesAndErrors) {
  dsl::Graph g;
  const int f = g.add_input({{3}, DType::Float32});
  const int l = g.add_input({{3}, DType::Int64});
  const int b = g.add_input({{3}, DType::Bool});
  EXPECT_EQ(g.value(g.add("floor_divide", {l, g.add_constant(2.5, DType::Float64, true)})).type.dtype, DType::Float32);
  EXPECT_EQ(g.value(g.add("remainder", {l, g.add_constant(3, DType::Int64, true)})).type.dtype, DType::Int64);
  EXPECT_EQ(g.value(g.add("logical_and", {f, l})).type.dtype, DType::Bool);
  EXPECT_EQ(g.value(g.add("sign", {b})).type.dtype, DType::Bool);
  auto msg = [&](const std::string& op, int x, const dsl::Attrs& a = {}) {
    return std::string(expect_op_error([&] { g.add(op, {x}, a); }).what());
  };
  EXPECT_EQ(msg("leaky_relu", l), "\"leaky_relu\" not implemented for 'Long'");
  EXPECT_EQ(msg("hardswish", l), "\"hardswish\" not implemented for 'Long'");
  EXPECT_EQ(msg("bitwise_not", f), "\"bitwise_not_cpu\" not implemented for 'Float'");
  EXPECT_EQ(msg("floor", b), "\"floor\" not implemented for 'Bool'");
  EXPECT_EQ(msg("hardtanh", f, {{"min_val", 2.0}, {"max_val", 1.0}}), "min_val cannot be greater than max_val");
  EXPECT_EQ(msg("elu", f, {{"alpah", 1.0}}), "elu(): unexpected attribute 'alpah'");
  EXPECT_EQ(std::string(expect_op_error([&] {
                          g.add("floor_divide", {b, b});
                        }).what()),
            "\"div_floor_cpu\" not implemented for 'Bool'");
  const int f4 = g.add_input({{4}, DType::Float32});
  EXPECT_EQ(std::string(expect_op_error([&] {
                          g.add("remainder", {f, f4});
                        }).what()),
            "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 0");
}

// ---- reductions -----------------------------------------------------------------------------------

namespace {

using RowFn = std::function<std::vector<double>(const std::vector<double>& row)>;

// op(x; attrs) over `dims` of random x (with `specials` mixed in): every output k against
// formula(row)[k], row by row (the reduced elements in row-major order), and through every path.
void check_reduction(const std::string& op, dsl::Attrs attrs, const Shape& shape, const std::vector<int64_t>& dims,
                     DType t, const RowFn& formula, double tol, const std::vector<double>& specials = {},
                     int kernels = 1) {
  auto rng = test::rng(std::hash<std::string>()(op + dsl::shape_str(shape)) % 1000 + 11);
  dsl::Graph g;
  const int x = g.add_input({shape, t});
  const auto outs = g.add_op(op, {x}, attrs);
  for (int o : outs) g.mark_output(o);
  const bool fl = dsl::is_floating(t);
  const auto data = random_host(rng, shape, t, fl ? -2 : -3, fl ? 2 : 3, specials);
  const auto got = check_graph(g, {data}, tol, kernels);
  const auto rows = rows_of(shape, dims);
  for (size_t r = 0; r < rows.size(); ++r) {
    std::vector<double> row;
    for (int64_t i : rows[r]) row.push_back(data.data[i]);
    const std::vector<double> want = formula(row);
    for (size_t k = 0; k < outs.size(); ++k) {
      ASSERT_TRUE(test::near(got[k].data.at(r), want.at(k), tol))
          << op << dsl::shape_str(shape) << " output " << k << " row " << r << ": got " << got[k].data[r] << ", want "
          << want[k];
    }
  }
}

dsl::Attrs dims_attr(std::vector<int64_t> dims, bool keepdim = false) {
  return {{"dims", std::move(dims)}, {"keepdim", keepdim}};
}

std::vector<double> arg_ref(const std::vector<double>& row, bool is_max) {
  size_t best = 0;
  for (size_t j = 1; j < row.size(); ++j) {
    if (std::isnan(row[best])) break;
    if (std::isnan(row[j]) || (is_max ? row[j] > row[best] : row[j] < row[best])) best = j;
  }
  return {row[best], static_cast<double>(best)};
}

const std::vector<std::pair<Shape, std::vector<int64_t>>> kReduceCases = {
    {{5, 7}, {1}}, {{5, 7}, {0}}, {{3, 4, 33}, {2}}, {{3, 4, 5}, {0, 2}}, {{1, 1}, {1}}, {{6}, {0}}, {{2, 300}, {1}}};

}  // namespace

TEST(Reductions, ProdAnyAll) {
  for (const auto& [shape, dims] : kReduceCases) {
    check_reduction(
        "prod", dims_attr(dims), shape, dims, DType::Float32,
        [](const std::vector<double>& r) {
          double p = 1;
          for (double v : r) p *= v;
          return std::vector<double>{p};
        },
        1e-4);
    check_reduction(
        "prod", dims_attr(dims, true), shape, dims, DType::Int64,
        [](const std::vector<double>& r) {
          double p = 1;
          for (double v : r) p *= v;
          return std::vector<double>{p};
        },
        0);
    for (const bool any : {true, false}) {
      check_reduction(any ? "any" : "all", dims_attr(dims), shape, dims, DType::Float32,
                      [any](const std::vector<double>& r) {
                        bool acc = !any;
                        for (double v : r) acc = any ? (acc || v != 0) : (acc && v != 0);
                        return std::vector<double>{acc ? 1.0 : 0.0};
                      },
                      0, {0.0, kNaN, -0.0});
    }
  }
  // Empty reductions: prod 1, any False, all True.
  dsl::Graph g;
  const int x = g.add_input({{3, 0}, DType::Float32});
  g.mark_output(g.add("prod", {x}, dims_attr({1})));
  g.mark_output(g.add("any", {x}, dims_attr({1})));
  g.mark_output(g.add("all", {x}, dims_attr({1})));
  EXPECT_EQ(g.value(g.outputs()[1]).type.dtype, DType::Bool);
  const auto out = check_graph(g, {host({3, 0}, DType::Float32, {})});
  EXPECT_EQ(out[0].data, (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(out[1].data, (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(out[2].data, (std::vector<double>{1, 1, 1}));
}

TEST(Reductions, VarStdNormLogsumexp) {
  for (const auto& [shape, dims] : kReduceCases) {
    for (const double corr : {1.0, 0.0}) {
      auto var = [corr](const std::vector<double>& r) {
        double m = 0, s = 0;
        for (double v : r) m += v;
        m /= static_cast<double>(r.size());
        for (double v : r) s += (v - m) * (v - m);
        return std::vector<double>{s / std::max(static_cast<double>(r.size()) - corr, 0.0), m};
      };
      dsl::Attrs a = dims_attr(dims);
      a["correction"] = corr;
      check_reduction("var_mean", a, shape, dims, DType::Float32, var, 1e-4);
      check_reduction(
          "std", a, shape, dims, DType::Float32,
          [var](const std::vector<double>& r) { return std::vector<double>{std::sqrt(var(r)[0])}; }, 1e-4);
    }
    for (const double p : {2.0, 1.0, kInf, -kInf, 0.0, 3.0}) {
      dsl::Attrs a = dims_attr(dims, true);
      a["p"] = p;
      check_reduction(
          "norm", a, shape, dims, DType::Float32,
          [p](const std::vector<double>& r) {
            double acc = std::isinf(p) && p < 0 ? kInf : 0;
            for (double v : r) {
              const double av = std::fabs(v);
              if (std::isinf(p)) {
                acc = p > 0 ? std::max(acc, av) : std::min(acc, av);
              } else {
                acc += p == 0 ? (v != 0) : std::pow(av, p);
              }
            }
            return std::vector<double>{std::isinf(p) || p == 0 ? acc : std::pow(acc, 1 / p)};
          },
          1e-4);
    }
    check_reduction("logsumexp", dims_attr(dims), shape, dims, DType::Float32,
                    [](const std::vector<double>& r) {
                      double m = -kInf;
                      for (double v : r) m = std::max(m, v);
                      if (std::isinf(m)) m = 0;
                      double s = 0;
                      for (double v : r) s += std::exp(v - m);
                      return std::vector<double>{std::log(s) + m};
                    },
                    1e-5, {-kInf, 50.0});
  }
  dsl::Graph g;
  const int xi = g.add_input({{3}, DType::Int64});
  EXPECT_EQ(std::string(expect_op_error([&] { g.add("var", {xi}); }).what()),
            "std and var only support floating point and complex dtypes");
  EXPECT_EQ(g.value(g.add("logsumexp", {xi}, dims_attr({0}))).type.dtype, DType::Float32);
  const int x0 = g.add_input({{2, 0}, DType::Float32});
  const int lse = g.add("logsumexp", {x0}, dims_attr({1}));
  g.mark_output(lse);
  g.mark_output(g.add("var", {x0}, dims_attr({1})));
  const auto out = check_graph(g, {host({3}, DType::Int64, {1, 2, 3}), host({2, 0}, DType::Float32, {})});
  EXPECT_EQ(out[0].data, (std::vector<double>{-kInf, -kInf}));
  EXPECT_TRUE(std::isnan(out[1].data[0]));
}

TEST(Reductions, ArgmaxAndMaxWithIndices) {
  const std::vector<double> specials = {kNaN, 1.0, 1.0, -kInf, kInf, 0.0};
  for (const auto& [shape, dims] : kReduceCases) {
    if (dims.size() != 1) continue;
    for (const bool is_max : {true, false}) {
      const std::string pair_op = is_max ? "max_dim" : "min_dim", arg_op = is_max ? "argmax" : "argmin";
      dsl::Attrs a{{"dim", dims[0]}, {"keepdim", false}};
      check_reduction(
          pair_op, a, shape, dims, DType::Float32,
          [is_max](const std::vector<double>& r) { return arg_ref(r, is_max); }, 0, specials);
      check_reduction(
          arg_op, a, shape, dims, DType::Float32,
          [is_max](const std::vector<double>& r) { return std::vector<double>{arg_ref(r, is_max)[1]}; }, 0, specials);
      check_reduction(
          arg_op, a, shape, dims, DType::Int64,  // many ties: the first index wins
          [is_max](const std::vector<double>& r) { return std::vector<double>{arg_ref(r, is_max)[1]}; }, 0);
    }
  }
  // argmax without dim: the flat index.
  std::vector<int64_t> all{0, 1, 2};
  check_reduction("argmax", {}, {3, 4, 5}, all, DType::Float32,
                  [](const std::vector<double>& r) { return std::vector<double>{arg_ref(r, true)[1]}; }, 0,
                  {kNaN, 2.0});
  // A consumer of the indices fuses into the same kernel.
  dsl::Graph g;
  const int x = g.add_input({{4, 9}, DType::Float32});
  const auto mv = g.add_op("max_dim", {x}, {{"dim", int64_t{1}}, {"keepdim", true}});
  g.mark_output(g.add("sub", {x, mv[0]}));
  g.mark_output(g.add("mul", {mv[1], g.add_constant(2, DType::Int64, true)}));
  auto rng = test::rng(301);
  check_graph(g, {random_host(rng, {4, 9})}, 1e-6, 1);
  EXPECT_EQ(std::string(expect_op_error([&] {
                          g.add("argmax", {g.add_input({{2, 0}, DType::Float32})}, {{"dim", int64_t{1}}});
                        }).what()),
            "argmax(): Expected reduction dim 1 to have non-zero size.");
  EXPECT_EQ(std::string(expect_op_error([&] {
                          g.add_op("max_dim", {x}, {{"dim", int64_t{2}}});
                        }).what()),
            "Dimension out of range (expected to be in range of [-2, 1], but got 2)");
}

TEST(Reductions, CumsumCumprod) {
  for (const auto& [shape, dim] : std::vector<std::pair<Shape, int64_t>>{
           {{5, 7}, 1}, {{5, 7}, 0}, {{3, 4, 33}, 1}, {{1}, 0}, {{0, 3}, 1}, {{2, 0}, 1}, {{300}, 0}}) {
    for (const std::string op : {"cumsum", "cumprod"}) {
      for (const DType t : {DType::Float32, DType::Int64}) {
        auto rng = test::rng(std::hash<std::string>()(op + dsl::shape_str(shape)) % 1000 + 13);
        dsl::Graph g;
        const int x = g.add_input({shape, t});
        const int y = g.add(op, {x}, {{"dim", dim}});
        EXPECT_EQ(g.value(y).type, (dsl::TensorType{shape, t}));
        g.mark_output(g.add("neg", {y}));  // a consumer: its own kernel
        const auto data = random_host(rng, shape, t, op == "cumprod" ? 0.5 : -2, op == "cumprod" ? 1.5 : 2,
                                      t == DType::Float32 ? std::vector<double>{kNaN, kInf} : std::vector<double>{});
        const auto out = check_graph(g, {data}, 1e-5, dsl::numel(shape) == 0 ? -1 : 2);
        std::vector<int64_t> rd{dim};
        for (const auto& line : rows_of(shape, rd)) {
          double acc = op == "cumsum" ? 0 : 1;
          for (int64_t i : line) {
            acc = op == "cumsum" ? acc + data.data[i] : acc * data.data[i];
            ASSERT_TRUE(test::near(out[0].data[i], -acc, 1e-5)) << op << dsl::shape_str(shape) << " at " << i;
          }
        }
      }
    }
  }
  dsl::Graph g;
  const int b = g.add_input({{4}, DType::Bool});
  EXPECT_EQ(g.value(g.add("cumsum", {b}, {{"dim", int64_t{0}}})).type.dtype, DType::Int64);
  EXPECT_EQ(std::string(expect_op_error([&] { g.add("cumsum", {b}); }).what()),
            "cumsum(): missing required attribute 'dim'");
}

TEST(Norms, HalfInputsComputeInFloat32InOneKernel) {
  auto rng = test::rng(107);
  dsl::Graph g;
  const int x = g.add_input({{4, 16}, DType::Float16});
  const int w = g.add_input({{16}, DType::Float16});
  const int y = g.add("layer_norm", {x, w}, {{"normalized_shape", Shape{16}}});
  EXPECT_EQ(g.value(y).type.dtype, DType::Float16);
  g.mark_output(y);
  EXPECT_EQ(test::planned_kernels(g), 1) << sched::fuse(g).to_string(g);
  const std::vector<dsl::HostTensor> data{random_host(rng, {4, 16}, DType::Float16),
                                          random_host(rng, {16}, DType::Float16)};
  const auto out = dsl::interpret_graph(g, data);
  expect_close(out[0].data, layer_norm_ref(data[0], 1, &data[1].data, nullptr, 1e-5), 2e-3, "layer_norm f16");
}

#ifdef FLOW_HAS_LLVM
TEST(Eager, MultiOutputOpsAndComposites) {
  auto rng = test::rng(401);
  const auto xh = random_host(rng, {3, 5}, DType::Float32, -2, 2, {kNaN});
  const jit::Tensor x = test::to_tensor(xh);
  const auto mv = jit::eager_op("max_dim", {x}, {{"dim", int64_t{1}}});
  ASSERT_EQ(mv.size(), 2u);
  EXPECT_EQ(mv[1].dtype, DType::Int64);
  const auto rows = rows_of({3, 5}, {1});
  const auto vals = test::values_of(mv[0]), idx = test::values_of(mv[1]);
  for (size_t r = 0; r < rows.size(); ++r) {
    std::vector<double> row;
    for (int64_t i : rows[r]) row.push_back(xh.data[i]);
    const auto want = arg_ref(row, true);
    EXPECT_TRUE(test::near(vals[r], want[0], 0)) << r;
    EXPECT_EQ(idx[r], want[1]) << r;
  }
  const auto y = jit::eager_op("gelu", {jit::eager_op("hardswish", {x}, {}).at(0)}, {});
  EXPECT_EQ(y.at(0).sizes, (Shape{3, 5}));
  const auto c = jit::eager_op("cumsum", {x}, {{"dim", int64_t{0}}});
  EXPECT_EQ(c.at(0).sizes, (Shape{3, 5}));
}
#endif
