// The descriptions flow hands cuBLASLt and cuDNN (jit/cuda_library_ops.h), checked without a GPU:
// each library step of a graph compiled for CUDA is planned over CPU tensors (transposed, strided,
// broadcast, NHWC), and the planned call is then evaluated by a reference that reads memory exactly
// as the library is told to (the strides, batch strides, filter layout and epilogue of the problem).
// Its result must match the graph interpreter's. A wrong stride, a swapped operand or a bias taken
// for a residual fails here long before a GPU sees it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "conv_reference.h"
#include "dsl/graph_interpreter.h"
#include "jit/compile.h"
#include "jit/cuda_library_ops.h"
#include "test_util.h"

using namespace flow;
using dsl::DType;
using dsl::Shape;
namespace rc = flow::runtime::cuda;

// Contiguous copies and permuted filters of CPU tensors are generated CPU kernels.
#if defined(FLOW_HAS_LLVM)
#define REQUIRE_CPU_CODEGEN()
#else
#define REQUIRE_CPU_CODEGEN() GTEST_SKIP() << "needs the CPU code generator (LLVM) for the copies it plans"
#endif

namespace {

jit::Tensor random_tensor(const Shape& s, std::mt19937_64& rng) {
  jit::Tensor t = jit::Tensor::empty(s, DType::Float32);
  std::normal_distribution<float> d(0.f, 1.f);
  float* p = static_cast<float*>(t.data());
  for (int64_t i = 0; i < t.numel(); ++i) p[i] = d(rng);
  return t;
}

// `t`'s elements seen through a permutation of its dims (a strided view, no copy).
jit::Tensor permuted(const jit::Tensor& t, const std::vector<size_t>& perm) {
  jit::Tensor v = t;
  for (size_t i = 0; i < perm.size(); ++i) {
    v.sizes[i] = t.sizes[perm[i]];
    v.strides[i] = t.strides[perm[i]];
  }
  return v;
}

double at(const jit::Tensor& t, int64_t flat) {  // row-major element `flat` of a strided float tensor
  int64_t off = 0;
  for (size_t d = t.sizes.size(); d-- > 0;) {
    off += (flat % t.sizes[d]) * t.strides[d];
    flat /= t.sizes[d];
  }
  return static_cast<const float*>(t.data())[off];
}

dsl::HostTensor host_of(const jit::Tensor& t) {
  dsl::HostTensor h{{t.sizes, t.dtype}, {}};
  for (int64_t i = 0; i < t.numel(); ++i) h.data.push_back(at(t, i));
  return h;
}

double activate(double v, rc::cublaslt::Activation a) {
  if (a == rc::cublaslt::Activation::Relu) return v > 0 ? v : 0;
  if (a == rc::cublaslt::Activation::GeluTanh)
    return 0.5 * v * (1 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)));
  return v;
}

// What cuBLASLt computes for `c` (runtime/cublaslt.h's contract), float32 data.
void reference_gemm(const jit::GemmCall& c) {
  const auto& p = c.problem;
  const float* a = static_cast<const float*>(c.a);
  const float* b = static_cast<const float*>(c.b);
  const float* bias = static_cast<const float*>(c.bias);
  const float* res = static_cast<const float*>(c.residual);
  float* out = static_cast<float*>(c.out);
  for (int64_t bt = 0; bt < p.batch; ++bt)
    for (int64_t i = 0; i < p.m; ++i)
      for (int64_t j = 0; j < p.n; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < p.k; ++k)
          acc += double(a[bt * p.a_batch + i * p.a_row + k * p.a_col]) * b[bt * p.b_batch + k * p.b_row + j * p.b_col];
        const int64_t o = bt * p.out_batch + i * p.out_row + j;
        if (p.bias) acc += bias[j];
        if (p.residual) acc += res[o];
        out[o] = static_cast<float>(activate(acc, p.activation));
      }
}

// What cuDNN computes for `c` (runtime/cudnn.h's contract), float32 data, 2-D or 3-D.
void reference_conv(const jit::ConvCall& c) {
  const auto& p = c.problem;
  const float* x = static_cast<const float*>(c.x);
  const float* w = static_cast<const float*>(c.w);
  const float* bias = static_cast<const float*>(c.bias);
  const float* z = static_cast<const float*>(c.z);
  float* y = static_cast<float*>(c.y);
  const int64_t cg = p.c / p.groups, kg = p.k / p.groups;
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t k = 0; k < p.k; ++k)
      for (int64_t oz = 0; oz < p.out_d; ++oz)
        for (int64_t oh = 0; oh < p.out_h; ++oh)
          for (int64_t ow = 0; ow < p.out_w; ++ow) {
            double acc = 0;
            const int64_t g = k / kg;
            test::for_each_conv_tap(p, oz, oh, ow,
                                    [&](int64_t t, int64_t r, int64_t s, int64_t iz, int64_t ih, int64_t iw) {
                                      for (int64_t ci = 0; ci < cg; ++ci)
                                        acc += double(x[test::conv_offset(p.x_strides, n, g * cg + ci, iz, ih, iw)]) *
                                               w[test::conv_filter_offset(p, k, ci, t, r, s)];
                                    });
            const int64_t o = test::conv_offset(p.y_strides, n, k, oz, oh, ow);
            if (p.bias) acc += bias[k];
            if (p.residual) acc += z[o];
            y[o] = static_cast<float>(p.relu && acc < 0 ? 0 : acc);
          }
}

// What cuDNN's backward data computes for a transposed `c` (runtime/cudnn.h: the caller's input has
// the forward output's dims and y_strides, its output the forward input's and x_strides), float32:
// each input element spread over the output positions its forward window read.
void reference_conv_transpose(const jit::ConvCall& c) {
  const auto& p = c.problem;
  const float* in = static_cast<const float*>(c.x);
  const float* w = static_cast<const float*>(c.w);
  const float* bias = static_cast<const float*>(c.bias);
  const float* z = static_cast<const float*>(c.z);
  float* out = static_cast<float*>(c.y);
  const int64_t cg = p.c / p.groups, kg = p.k / p.groups;
  auto at = [&](int64_t n, int64_t ch, int64_t iz, int64_t ih, int64_t iw) {  // [n][c][d][h][w]
    return static_cast<size_t>((((n * p.c + ch) * p.d + iz) * p.h + ih) * p.w + iw);
  };
  std::vector<double> acc(static_cast<size_t>(p.n * p.c * p.d * p.h * p.w), 0.0);
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t k = 0; k < p.k; ++k)
      for (int64_t oz = 0; oz < p.out_d; ++oz)
        for (int64_t oh = 0; oh < p.out_h; ++oh)
          for (int64_t ow = 0; ow < p.out_w; ++ow) {
            const double v = in[test::conv_offset(p.y_strides, n, k, oz, oh, ow)];
            test::for_each_conv_tap(
                p, oz, oh, ow, [&](int64_t t, int64_t r, int64_t s, int64_t iz, int64_t ih, int64_t iw) {
                  for (int64_t ci = 0; ci < cg; ++ci)
                    acc[at(n, k / kg * cg + ci, iz, ih, iw)] += v * w[test::conv_filter_offset(p, k, ci, t, r, s)];
                });
          }
  for (int64_t n = 0; n < p.n; ++n)
    for (int64_t ch = 0; ch < p.c; ++ch)
      for (int64_t iz = 0; iz < p.d; ++iz)
        for (int64_t ih = 0; ih < p.h; ++ih)
          for (int64_t iw = 0; iw < p.w; ++iw) {
            const int64_t o = test::conv_offset(p.x_strides, n, ch, iz, ih, iw);
            double v = acc[at(n, ch, iz, ih, iw)];
            if (p.bias) v += bias[ch];
            if (p.residual) v += z[o];
            out[o] = static_cast<float>(p.relu && v < 0 ? 0 : v);
          }
}

// Compiles `g` for CUDA (NVRTC only; nothing runs), plans its only library step over `inputs`
// (bound to the graph inputs, any strides), evaluates the plan with the references and compares the
// graph's output with the interpreter's.
template <typename Plan, typename Reference>
void check_plan(const dsl::Graph& g, const std::vector<jit::Tensor>& inputs, const std::string& what, Plan plan,
                Reference reference,
                const std::function<void(const decltype(plan(jit::LibraryStep{}, {}))&)>& inspect = {}) {
  jit::CompileOptions opt;
  opt.target = dsl::Target::CUDA;
  const auto exe = jit::compile(g, {}, opt);
  ASSERT_EQ(exe->num_library_calls(), 1) << what << "\n" << exe->explain(false);
  ASSERT_EQ(exe->num_kernels(), 0) << what << ": the epilogue should be in the library call\n" << exe->explain(false);
  const jit::LibraryStep& step = exe->library_steps()[0];
  const dsl::Graph& cg = exe->graph();
  std::vector<jit::Tensor> slots(cg.values().size());
  std::vector<const jit::Tensor*> values(cg.values().size(), nullptr);
  for (size_t i = 0; i < inputs.size(); ++i) {
    slots[cg.inputs()[i]] = inputs[i];
    values[cg.inputs()[i]] = &slots[cg.inputs()[i]];
  }
  const int out = cg.outputs().at(0);
  slots[out] = jit::Tensor::empty(cg.value(out).type.shape, DType::Float32);
  std::fill_n(static_cast<float*>(slots[out].data()), slots[out].numel(), NAN);  // unwritten elements fail
  values[out] = &slots[out];
  const auto call = plan(step, values);
  if (inspect) inspect(call);
  reference(call);
  std::vector<dsl::HostTensor> hin;
  for (const auto& t : inputs) hin.push_back(host_of(t));
  const dsl::HostTensor want = dsl::interpret_graph(g, hin, /*float64_math=*/true).at(0);
  // The graph output may be a view of the library output (channels_last): compare element-wise
  // through the original graph's output shape, reading the library's buffer row-major.
  ASSERT_EQ(want.data.size(), static_cast<size_t>(slots[out].numel())) << what;
  double worst = 0;
  for (int64_t i = 0; i < slots[out].numel(); ++i) {
    const double got = at(slots[out], i), r = want.data[static_cast<size_t>(i)];
    const double err = std::fabs(got - r) / (1 + std::fabs(r));
    if (!(err <= worst)) worst = err;
  }
  EXPECT_LE(worst, 1e-4) << what << "\n" << exe->explain(false);
}

auto plan_gemm = [](const jit::LibraryStep& s, const std::vector<const jit::Tensor*>& v) {
  return jit::plan_gemm_call(s, v);
};
auto plan_conv = [](const jit::LibraryStep& s, const std::vector<const jit::Tensor*>& v) {
  return jit::plan_conv_call(s, v);
};

}  // namespace

TEST(CudaLibraryPlan, MatmulStridesBatchesAndVectors) {
  REQUIRE_CPU_CODEGEN();
  auto rng = test::rng(71);
  struct Case {
    Shape a, b;
    bool transpose_a, transpose_b;
  };
  const Case cases[] = {
      {{7, 5}, {5, 3}, false, false},         {{7, 5}, {5, 3}, true, false},     {{7, 5}, {5, 3}, false, true},
      {{7, 5}, {5, 3}, true, true},           {{4, 7, 5}, {5, 3}, false, false}, {{4, 7, 5}, {4, 5, 3}, false, true},
      {{2, 1, 7, 5}, {3, 5, 6}, true, false}, {{5}, {5, 3}, false, false},       {{4, 7, 5}, {5}, false, false},
      {{6, 5}, {2, 5, 4}, false, false},
  };
  for (const Case& cs : cases) {
    // Transposed operands: stored [.., n, m] and viewed as [.., m, n] (a stride-1 row dim).
    auto make = [&](const Shape& s, bool t) {
      if (!t || s.size() < 2) return random_tensor(s, rng);
      Shape stored = s;
      std::swap(stored[s.size() - 1], stored[s.size() - 2]);
      std::vector<size_t> perm(s.size());
      for (size_t i = 0; i < s.size(); ++i) perm[i] = i;
      std::swap(perm[s.size() - 1], perm[s.size() - 2]);
      return permuted(random_tensor(stored, rng), perm);
    };
    const jit::Tensor a = make(cs.a, cs.transpose_a), b = make(cs.b, cs.transpose_b);
    dsl::Graph g;
    const int ia = g.add_input({cs.a, DType::Float32}, "a");
    const int ib = g.add_input({cs.b, DType::Float32}, "b");
    g.mark_output(g.add("matmul", {ia, ib}));
    const std::string what = "matmul " + dsl::shape_str(cs.a) + (cs.transpose_a ? "^T" : "") + " @ " +
                             dsl::shape_str(cs.b) + (cs.transpose_b ? "^T" : "");
    check_plan(g, {a, b}, what, plan_gemm, reference_gemm, [&](const jit::GemmCall& c) {
      std::string why;
      EXPECT_TRUE(rc::cublaslt::supported(c.problem, &why)) << what << ": " << why;
    });
  }
}

TEST(CudaLibraryPlan, OverlappingOperandIsCopiedAndEmptyReductionKeepsTheBias) {
  REQUIRE_CPU_CODEGEN();
  auto rng = test::rng(75);
  // Rows overlapping in memory (row stride 1 < the 4 columns, column stride 1), as unfold makes.
  jit::Tensor a = random_tensor({11}, rng);
  a.sizes = {8, 4};
  a.strides = {1, 1};
  dsl::Graph g;
  const int ia = g.add_input({{8, 4}, DType::Float32}, "a");
  const int ib = g.add_input({{4, 3}, DType::Float32}, "b");
  g.mark_output(g.add("matmul", {ia, ib}));
  check_plan(g, {a, random_tensor({4, 3}, rng)}, "matmul of an overlapping view", plan_gemm, reference_gemm,
             [&](const jit::GemmCall& c) {
               std::string why;
               EXPECT_TRUE(rc::cublaslt::supported(c.problem, &why)) << why;
             });
  // linear with K = 0: the output is the bias broadcast over 5 rows, not an empty problem.
  dsl::Graph l;
  const int x = l.add_input({{5, 0}, DType::Float32}, "x");
  const int w = l.add_input({{3, 0}, DType::Float32}, "w");
  const int b = l.add_input({{3}, DType::Float32}, "b");
  l.mark_output(l.add("linear", {x, w, b}));
  check_plan(l, {random_tensor({5, 0}, rng), random_tensor({3, 0}, rng), random_tensor({3}, rng)}, "linear, K = 0",
             plan_gemm, reference_gemm, [&](const jit::GemmCall& c) {
               EXPECT_EQ(c.problem.m, 5);
               EXPECT_EQ(c.problem.n, 3);
               EXPECT_EQ(c.problem.k, 0);
             });
}

TEST(CudaLibraryPlan, LinearWithBiasResidualAndActivationEpilogues) {
  REQUIRE_CPU_CODEGEN();
  auto rng = test::rng(73);
  for (const char* act : {"relu", "gelu_tanh", "none"}) {
    dsl::Graph g;
    const int x = g.add_input({{3, 4, 8}, DType::Float32}, "x");
    const int w = g.add_input({{6, 8}, DType::Float32}, "w");
    const int b = g.add_input({{6}, DType::Float32}, "b");
    const int r = g.add_input({{3, 4, 6}, DType::Float32}, "r");
    int y = g.add("add", {g.add("linear", {x, w}), b});  // a bias from an add
    y = g.add("add", {r, y});                            // a residual, on the left
    if (std::string(act) == "relu") y = g.add("relu", {y});
    if (std::string(act) == "gelu_tanh") y = g.add("gelu", {y}, {{"approximate", std::string("tanh")}});
    g.mark_output(y);
    // The weight transposed in memory: B = W^T is then read with a unit row stride.
    const jit::Tensor wt = permuted(random_tensor({8, 6}, rng), {1, 0});
    check_plan(g, {random_tensor({3, 4, 8}, rng), wt, random_tensor({6}, rng), random_tensor({3, 4, 6}, rng)},
               std::string("linear + bias + residual + ") + act, plan_gemm, reference_gemm,
               [&](const jit::GemmCall& c) {
                 EXPECT_TRUE(c.problem.bias && c.problem.residual);
                 EXPECT_EQ(c.problem.m, 12);
               });
  }
}

// What a convolution case shares, conv2d/3d or conv_transpose2d/3d: shapes, the input's storage
// order, the output's layout and the epilogue.
struct ConvCase {
  Shape x, w;
  dsl::Attrs attrs;
  int64_t bias_len = 0;  // 0: no bias operand
  bool x_nhwc = false, channels_last = false, residual = false, relu = false;
};

// Builds `op` over the case's input (an x_nhwc one stored channels-last, [N, spatial..., C], viewed
// as [N, C, spatial...]), filter and bias, then its residual add and relu, and checks the plan cuDNN
// would get against `reference`.
template <typename Reference>
void check_conv_case(const std::string& op, const ConvCase& cs, Reference reference, std::mt19937_64& rng) {
  Shape stored = {cs.x[0]};
  std::vector<size_t> to_nchw = {0, cs.x.size() - 1};
  for (size_t i = 2; i < cs.x.size(); ++i) {
    stored.push_back(cs.x[i]);
    to_nchw.push_back(i - 1);
  }
  stored.push_back(cs.x[1]);
  const jit::Tensor x = cs.x_nhwc ? permuted(random_tensor(stored, rng), to_nchw) : random_tensor(cs.x, rng);
  dsl::Graph g;
  const int ix = g.add_input({cs.x, DType::Float32}, "x");
  const int iw = g.add_input({cs.w, DType::Float32}, "w");
  std::vector<jit::Tensor> in{x, random_tensor(cs.w, rng)};
  std::vector<int> ops{ix, iw};
  if (cs.bias_len > 0) {
    ops.push_back(g.add_input({{cs.bias_len}, DType::Float32}, "b"));
    in.push_back(random_tensor({cs.bias_len}, rng));
  }
  dsl::Attrs a = cs.attrs;
  if (cs.channels_last) a["channels_last"] = int64_t{1};
  int y = g.add(op, ops, a);
  if (cs.residual) {
    const Shape ys = g.value(y).type.shape;
    const int r = g.add_input(dsl::TensorType{ys, DType::Float32}, "r");
    in.push_back(random_tensor(ys, rng));
    y = g.add("add", {y, r});
  }
  if (cs.relu) y = g.add("relu", {y});
  g.mark_output(y);
  const std::string what = op + " " + dsl::shape_str(cs.x) + (cs.x_nhwc ? " NHWC" : "") + " * " + dsl::shape_str(cs.w) +
                           (cs.channels_last ? " -> NHWC" : "");
  check_plan(g, in, what, plan_conv, reference, [&](const jit::ConvCall& c) {
    std::string why;
    EXPECT_EQ(c.problem.transposed, dsl::is_transposed_conv(op)) << what;
    EXPECT_EQ(c.problem.spatial, static_cast<int>(dsl::conv_spatial_rank(op))) << what;
    EXPECT_TRUE(rc::cudnn::supported(c.problem, &why)) << what << ": " << why;
    EXPECT_EQ(c.problem.w_nhwc, cs.channels_last) << what;  // the output's layout decides
    EXPECT_EQ(c.problem.bias, cs.bias_len > 0) << what;
    EXPECT_EQ(c.problem.residual, cs.residual) << what;
    EXPECT_EQ(c.problem.relu, cs.relu) << what;
  });
}

dsl::Attrs conv_attrs(int64_t stride, int64_t pad, int64_t dil, int64_t groups) {
  return {{"stride", stride}, {"padding", pad}, {"dilation", dil}, {"groups", groups}};
}

TEST(CudaLibraryPlan, ConvLayoutsGroupsAndEpilogues) {
  REQUIRE_CPU_CODEGEN();
  auto rng = test::rng(79);
  const ConvCase cases[] = {
      // x, w, attrs (stride, pad, dilation, groups), bias, x_nhwc, channels_last, residual, relu
      {{2, 4, 7, 6}, {6, 4, 3, 3}, conv_attrs(1, 1, 1, 1), 6, false, false, false, true},
      {{2, 4, 7, 6}, {6, 4, 3, 3}, conv_attrs(1, 1, 1, 1), 6, true, false, true, true},
      {{2, 4, 7, 6}, {6, 4, 3, 3}, conv_attrs(2, 1, 1, 1), 0, true, true, false, true},
      {{1, 6, 9, 9}, {6, 2, 3, 3}, conv_attrs(1, 2, 2, 3), 6, false, true, true, false},
      {{3, 8, 5, 5}, {8, 1, 3, 3}, conv_attrs(1, 1, 1, 8), 8, true, true, false, false},
      {{2, 4, 6, 6}, {5, 4, 1, 1}, conv_attrs(2, 0, 1, 1), 0, false, false, true, true},
  };
  for (const ConvCase& cs : cases) check_conv_case("conv2d", cs, reference_conv, rng);
}

TEST(CudaLibraryPlan, TransposedConvLayoutsGroupsAndEpilogues) {
  REQUIRE_CPU_CODEGEN();
  auto rng = test::rng(83);
  auto attrs = [](int64_t stride, int64_t pad, int64_t out_pad, int64_t dil, int64_t groups) {
    dsl::Attrs a = conv_attrs(stride, pad, dil, groups);
    a["output_padding"] = out_pad;
    return a;
  };
  const ConvCase cases[] = {
      // x [N, C_in, H, W], w [C_in, C_out / groups, R, S], attrs (stride, pad, output_padding,
      // dilation, groups), bias (C_out values), x_nhwc, channels_last, residual, relu
      {{2, 4, 5, 6}, {4, 3, 3, 3}, attrs(2, 1, 1, 1, 1), 3, false, false, false, true},
      {{2, 4, 5, 6}, {4, 3, 2, 2}, attrs(2, 0, 0, 1, 1), 3, true, true, true, true},
      {{1, 6, 4, 4}, {6, 2, 3, 3}, attrs(1, 2, 0, 2, 3), 0, false, true, true, false},
      {{3, 8, 3, 3}, {8, 1, 3, 3}, attrs(3, 1, 2, 1, 8), 8, true, false, false, false},
  };
  for (const ConvCase& cs : cases) check_conv_case("conv_transpose2d", cs, reference_conv_transpose, rng);
}

// conv3d and conv_transpose3d: cuDNN's N-d problems, NCDHW (an NDHWC-stored input is repacked), with
// depth parameters unlike the other axes' so that a swapped axis shows.
TEST(CudaLibraryPlan, VolumetricConvsAndEpilogues) {
  REQUIRE_CPU_CODEGEN();
  auto rng = test::rng(89);
  using V = std::vector<int64_t>;
  auto attrs = [](V stride, V pad, V dil, int64_t groups) {
    return dsl::Attrs{{"stride", stride}, {"padding", pad}, {"dilation", dil}, {"groups", groups}};
  };
  const ConvCase convs[] = {
      // x, w, attrs (stride, pad, dilation, groups), bias, x_nhwc, channels_last, residual, relu
      {{2, 4, 5, 6, 7}, {6, 4, 3, 3, 3}, attrs({1, 1, 1}, {1, 1, 1}, {1, 1, 1}, 1), 6, false, false, true, true},
      {{1, 6, 7, 5, 6}, {4, 3, 2, 3, 1}, attrs({2, 1, 2}, {2, 0, 1}, {2, 1, 1}, 2), 4, true, false, false, true},
      {{3, 6, 4, 5},
       {5, 3, 3, 1, 2},
       attrs({1, 2, 1}, {0, 1, 0}, {1, 1, 2}, 1),
       0,
       false,
       false,
       true,
       false},  // unbatched
  };
  for (const ConvCase& cs : convs) check_conv_case("conv3d", cs, reference_conv, rng);
  auto t_attrs = [&](V stride, V pad, V out_pad, V dil, int64_t groups) {
    dsl::Attrs a = attrs(stride, pad, dil, groups);
    a["output_padding"] = out_pad;
    return a;
  };
  const ConvCase transposed[] = {
      // x [N, C_in, D, H, W], w [C_in, C_out / groups, T, R, S]
      {{2, 4, 3, 4, 5},
       {4, 3, 2, 3, 2},
       t_attrs({2, 1, 2}, {0, 1, 0}, {1, 0, 1}, {1, 1, 1}, 1),
       3,
       false,
       false,
       true,
       true},
      {{1, 6, 4, 3, 3},
       {6, 2, 3, 2, 2},
       t_attrs({1, 2, 1}, {1, 0, 1}, {0, 1, 0}, {2, 1, 1}, 3),
       0,
       true,
       false,
       false,
       false},
  };
  for (const ConvCase& cs : transposed) check_conv_case("conv_transpose3d", cs, reference_conv_transpose, rng);
}
