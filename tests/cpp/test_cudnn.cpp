// cuDNN convolutions (runtime/cudnn.h). Without a GPU: every resolved entry point exists in the
// installed library, supported() accepts and rejects with named reasons, cuDNN's output dims agree
// with the formula, algorithm names round-trip and problem keys tell problems apart. With a GPU (the
// tests skip with "no CUDA device" otherwise; ctest also runs them on the emulated device):
// convolutions (2-D and 3-D) against plain CPU loops in double, for float32 (strict FP32), float16 and
// bfloat16, with every epilogue, NCHW and NHWC, heuristic and exhaustive algorithm choice, batches split in
// chunks, and outputs whose prior contents must not matter. Outputs start poisoned (NaN), so
// unwritten elements show.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "conv_reference.h"
#include "cuda_libs_test_util.h"
#include "cuda_test_util.h"
#include "runtime/buffer.h"
#include "runtime/cuda_copy.h"
#include "runtime/cuda_driver.h"
#include "runtime/cuda_stream.h"
#include "runtime/cudnn.h"
#include "runtime/data_type.h"
#include "runtime/dynlib.h"
#include "test_util.h"

using namespace flow;
using namespace flow::test;
namespace rc = flow::runtime::cuda;
namespace dnn = flow::runtime::cuda::cudnn;
using runtime::Buffer;
using runtime::CudaLib;
using runtime::DataType;
using runtime::DeviceType;

namespace {

// ---- conv harness ----------------------------------------------------------------------------------

struct ConvCase {
  int64_t n = 2, c = 8, h = 9, w = 10, k = 12, r = 3, s = 3;
  int64_t groups = 1, pad = 1, stride = 1, dil = 1;
  int64_t d = 0, t = 1, pad_d = 0, stride_d = 1, dil_d = 1;  // depth: d > 0 makes a 3-D case
  DataType dtype = DataType::Float32;
  bool nhwc = false;
  bool bias = false, residual = false, z_is_y = false, relu = false;
  dnn::Search search = dnn::Search::Heuristic;
};

std::string name_of(const ConvCase& c) {
  const std::string depth = c.d > 0 ? std::to_string(c.d) + "x" : "", taps = c.d > 0 ? std::to_string(c.t) + "x" : "";
  const std::string depth_params = c.d > 0 ? " depth pad " + std::to_string(c.pad_d) + " stride " +
                                                 std::to_string(c.stride_d) + " dil " + std::to_string(c.dil_d)
                                           : "";
  return "n" + std::to_string(c.n) + " c" + std::to_string(c.c) + " " + depth + std::to_string(c.h) + "x" +
         std::to_string(c.w) + " k" + std::to_string(c.k) + " " + taps + std::to_string(c.r) + "x" +
         std::to_string(c.s) + depth_params + " g" + std::to_string(c.groups) + " pad " + std::to_string(c.pad) +
         " stride " + std::to_string(c.stride) + " dil " + std::to_string(c.dil) + " " +
         runtime::data_type_name(c.dtype) + (c.nhwc ? " NHWC" : " NCHW") + (c.bias ? " bias" : "") +
         (c.residual ? (c.z_is_y ? " z=y" : " z") : "") + (c.relu ? " relu" : "") +
         (c.search == dnn::Search::Exhaustive ? " exhaustive" : " heuristic");
}

// Dense strides of (n, c, spatial...) dims, in that order: channels second or innermost.
std::vector<int64_t> strides_of(const std::vector<int64_t>& dims, bool nhwc) {
  std::vector<int64_t> st(dims.size());
  int64_t next = 1;
  if (nhwc) {
    st[1] = 1;
    next = dims[1];
  }
  for (size_t i = dims.size(); i-- > 0;) {
    if (nhwc && i == 1) continue;
    st[i] = next;
    next *= dims[i];
  }
  return st;
}
std::vector<int64_t> strides_of(int64_t n, int64_t c, int64_t h, int64_t w, bool nhwc) {
  return strides_of({n, c, h, w}, nhwc);
}

dnn::ConvProblem conv_problem(const ConvCase& c) {
  dnn::ConvProblem p;
  p.n = c.n;
  p.c = c.c;
  p.h = c.h;
  p.w = c.w;
  p.k = c.k;
  p.r = c.r;
  p.s = c.s;
  p.groups = c.groups;
  p.pad_h = p.pad_w = c.pad;
  p.stride_h = p.stride_w = c.stride;
  p.dil_h = p.dil_w = c.dil;
  p.out_h = dnn::conv_out_size(c.h, c.pad, c.dil, c.r, c.stride);
  p.out_w = dnn::conv_out_size(c.w, c.pad, c.dil, c.s, c.stride);
  p.dtype = c.dtype;
  if (c.d > 0) {
    p.spatial = 3;
    p.d = c.d;
    p.t = c.t;
    p.pad_d = c.pad_d;
    p.stride_d = c.stride_d;
    p.dil_d = c.dil_d;
    p.out_d = dnn::conv_out_size(c.d, c.pad_d, c.dil_d, c.t, c.stride_d);
    p.x_strides = strides_of({c.n, c.c, c.d, c.h, c.w}, c.nhwc);
    p.y_strides = strides_of({c.n, c.k, p.out_d, p.out_h, p.out_w}, c.nhwc);
  } else {
    p.x_strides = strides_of(c.n, c.c, c.h, c.w, c.nhwc);
    p.y_strides = strides_of(c.n, c.k, p.out_h, p.out_w, c.nhwc);
  }
  p.w_nhwc = c.nhwc;
  p.bias = c.bias;
  p.residual = c.residual;
  p.relu = c.relu;
  return p;
}

// A change to a case; the epilogues forward() runs: none, a bias or relu alone (the unfused
// convolution and epilogue kernel), bias + relu (the fused call), a residual with and without a
// relu, copied into y or in place (z is y).
using ConvVariant = std::function<void(ConvCase&)>;
const std::vector<ConvVariant>& conv_epilogues() {
  static const std::vector<ConvVariant> variants = {
      [](ConvCase&) {},
      [](ConvCase& c) { c.bias = true; },  // unfused: the convolution, then the epilogue kernel
      [](ConvCase& c) { c.relu = true; },  // unfused (no bias to fuse): the epilogue kernel's relu
      [](ConvCase& c) {
        c.bias = true;
        c.relu = true;
      },  // fused
      [](ConvCase& c) {
        c.bias = true;
        c.residual = true;
        c.relu = true;
      },
      [](ConvCase& c) {
        c.residual = true;
        c.z_is_y = true;
        c.relu = true;
      },
      [](ConvCase& c) {
        c.bias = true;
        c.residual = true;
      },  // unfused with a copy of z
      [](ConvCase& c) {
        c.residual = true;
        c.z_is_y = true;
      },  // unfused in place
  };
  return variants;
}

void run_conv_case(const ConvCase& c, uint64_t salt) {
  SCOPED_TRACE(name_of(c));
  std::mt19937_64 rng = test::rng(salt);
  const dnn::ConvProblem p = conv_problem(c);
  std::string why;
  ASSERT_TRUE(dnn::supported(p, &why)) << why;
  // A 2-D case is the 3-D one of depth 1 (and one depth tap).
  const int64_t cg = c.c / c.groups, kg = c.k / c.groups, od = p.out_d, oh = p.out_h, ow = p.out_w;
  const int64_t depth = c.d > 0 ? c.d : 1;
  const size_t x_count = static_cast<size_t>(c.n * c.c * depth * c.h * c.w);
  const size_t w_count = static_cast<size_t>(c.k * cg * c.t * c.r * c.s);
  const size_t y_count = static_cast<size_t>(c.n * c.k * od * oh * ow);
  const std::vector<float> x_host = random_values(x_count, c.dtype, rng);  // in storage order
  const std::vector<float> w_host = random_values(w_count, c.dtype, rng);
  const std::vector<float> bias_host = random_values(static_cast<size_t>(c.k), c.dtype, rng);
  const std::vector<float> z_host = random_values(y_count, c.dtype, rng);
  auto x_at = [&](int64_t ni, int64_t ci, int64_t zi, int64_t yi, int64_t xi) {
    return static_cast<double>(x_host[static_cast<size_t>(conv_offset(p.x_strides, ni, ci, zi, yi, xi))]);
  };
  auto w_at = [&](int64_t ki, int64_t ci, int64_t ti, int64_t ri, int64_t si) {
    return static_cast<double>(w_host[static_cast<size_t>(conv_filter_offset(p, ki, ci, ti, ri, si))]);
  };

  auto x_dev = upload(x_host, c.dtype);
  auto w_dev = upload(w_host, c.dtype);
  auto bias_dev = upload(bias_host, c.dtype);
  auto z_dev = upload(z_host, c.dtype);
  auto y_dev = Buffer::allocate(y_count * runtime::data_type_size(c.dtype), DeviceType::CUDA);

  const dnn::Algo algo = dnn::choose(p, c.search, x_dev->data(), w_dev->data(), y_dev->data());
  EXPECT_GE(algo.id, 0);
  EXPECT_EQ(algo.name, dnn::algo_names().at(static_cast<size_t>(algo.id)));
  if (c.search == dnn::Search::Exhaustive) {
    EXPECT_GE(algo.ms, 0.0);
  } else {
    EXPECT_EQ(algo.ms, -1.0);
  }
  const dnn::Algo again = dnn::choose(p, c.search, x_dev->data(), w_dev->data(), y_dev->data());
  EXPECT_EQ(again.id, algo.id);  // cached

  // y starts as NaN (or as z when z is y), so elements the call does not write show.
  if (c.residual && c.z_is_y) {
    const std::vector<uint8_t> bytes = encode(z_host, c.dtype);
    rc::copy_host_to_device(y_dev->data(), bytes.data(), bytes.size());
  } else {
    rc::memset_device(y_dev->data(), 0xFF, y_count * runtime::data_type_size(c.dtype));
  }
  const void* z_ptr = c.z_is_y ? y_dev->data() : z_dev->data();
  dnn::forward(p, algo, x_dev->data(), w_dev->data(), c.bias ? bias_dev->data() : nullptr, c.residual ? z_ptr : nullptr,
               y_dev->data(), rc::current_stream());
  const std::vector<float> got = download(*y_dev, y_count, c.dtype);

  // float32 gets a looser bound than matmul: cuDNN's FFT and Winograd algorithms are exact only to
  // a few ulps of the transformed values.
  const double rel = c.dtype == DataType::Float32 ? 5e-5 : rel_tolerance(c.dtype);
  int bad = 0;
  for (int64_t ni = 0; ni < c.n; ++ni)
    for (int64_t ki = 0; ki < c.k; ++ki)
      for (int64_t oz = 0; oz < od; ++oz)
        for (int64_t oy = 0; oy < oh; ++oy)
          for (int64_t ox = 0; ox < ow; ++ox) {
            const int64_t g = ki / kg;
            double acc = 0, absum = 0;
            for_each_conv_tap(p, oz, oy, ox,
                              [&](int64_t ti, int64_t ri, int64_t si, int64_t iz, int64_t iy, int64_t ix) {
                                for (int64_t ci = 0; ci < cg; ++ci) {
                                  const double t = x_at(ni, g * cg + ci, iz, iy, ix) * w_at(ki, ci, ti, ri, si);
                                  acc += t;
                                  absum += std::fabs(t);
                                }
                              });
            const size_t at = static_cast<size_t>(conv_offset(p.y_strides, ni, ki, oz, oy, ox));
            if (c.bias) {
              acc += bias_host[static_cast<size_t>(ki)];
              absum += std::fabs(bias_host[static_cast<size_t>(ki)]);
            }
            if (c.residual) {
              acc += z_host[at];
              absum += std::fabs(z_host[at]);
            }
            const double want = c.relu ? std::max(0.0, acc) : acc;
            const double tol = rel * (absum + std::fabs(acc)) + 1e-5;
            const double err = std::fabs(static_cast<double>(got[at]) - want);
            if (!(err <= tol) && ++bad <= 5)
              ADD_FAILURE() << "y[" << ni << "][" << ki << "][" << oz << "][" << oy << "][" << ox << "] = " << got[at]
                            << ", want " << want << " (tolerance " << tol << ", " << algo.name << ")";
          }
  EXPECT_EQ(bad, 0);
}

dnn::ConvProblem plain_conv(bool nhwc) {
  ConvCase c;
  c.nhwc = nhwc;
  return conv_problem(c);
}

// A 3-D case: input depth 5, three depth taps, depth padding 1 (an output depth of 5).
ConvCase volume_case() {
  ConvCase c;
  c.d = 5;
  c.t = 3;
  c.pad_d = 1;
  return c;
}

// A 3-D case whose depth parameters differ from each other and from the other axes' (so a swapped
// axis shows), grouped: depth 8, 2 taps, padding 2, stride 3, dilation 2 (an output depth of 4).
ConvCase uneven_volume_case() {
  ConvCase c;
  c.d = 8;
  c.t = 2;
  c.pad_d = 2;
  c.stride_d = 3;
  c.dil_d = 2;
  c.groups = 4;
  return c;
}

std::string dnn_verdict(const dnn::ConvProblem& p) {
  std::string why;
  return dnn::supported(p, &why) ? "ok" : why;
}

}  // namespace

// ---- without a GPU ---------------------------------------------------------------------------------

TEST(CudaLibs, CudnnSymbolsResolve) {
  const std::vector<std::string> names = dnn::symbol_names();
  EXPECT_GE(names.size(), 20u);
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
  FLOW_REQUIRE_CUDA_LIB([] { runtime::load_cuda_library(CudaLib::Cudnn); });
  const runtime::DynamicLibrary* lib = &runtime::load_cuda_library(CudaLib::Cudnn);
  for (const std::string& name : names) EXPECT_NE(lib->find_symbol(name.c_str()), nullptr) << name;
  FLOW_REQUIRE_LIB(dnn::load);
  EXPECT_TRUE(contains(dnn::version(), "cuDNN 9.")) << dnn::version();
  std::printf("[flow] %s from %s\n", dnn::version().c_str(), lib->path().c_str());
}

TEST(CudaLibs, ConvAlgoNamesRoundTrip) {
  const std::vector<std::string> names = dnn::algo_names();
  const std::vector<std::string> want = {
      "IMPLICIT_GEMM", "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"};
  EXPECT_EQ(names, want);
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(dnn::algo_id(names[i]), static_cast<int>(i)) << names[i];
  EXPECT_EQ(dnn::algo_id("nope"), -1);
  EXPECT_EQ(dnn::algo_id(""), -1);
  EXPECT_EQ(dnn::algo_id("implicit_gemm"), -1);  // exact names only
  // Transposed problems (backward data) have an enum of their own.
  const std::vector<std::string> bwd = dnn::algo_names(true);
  EXPECT_EQ(bwd, (std::vector<std::string>{"ALGO_0", "ALGO_1", "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED"}));
  for (size_t i = 0; i < bwd.size(); ++i) EXPECT_EQ(dnn::algo_id(bwd[i], true), static_cast<int>(i)) << bwd[i];
  EXPECT_EQ(dnn::algo_id("IMPLICIT_GEMM", true), -1);
  EXPECT_EQ(dnn::algo_id("ALGO_0"), -1);
}

TEST(CudaLibs, ConvSupported) {
  EXPECT_EQ(dnn_verdict(plain_conv(false)), "ok");
  EXPECT_EQ(dnn_verdict(plain_conv(true)), "ok");
  {
    // A transposed problem is checked in its forward terms; an input without channels (k == 0)
    // would leave the output to the bias alone, which the forward path's "nothing to run" would not
    // write.
    dnn::ConvProblem t = plain_conv(false);
    t.transposed = true;
    EXPECT_EQ(dnn_verdict(t), "ok");
    t.k = 0;
    EXPECT_TRUE(contains(dnn_verdict(t), "without channels")) << dnn_verdict(t);
    t = plain_conv(false);
    t.transposed = true;
    t.out_h += 1;  // an output_padding the convolution cannot give back
    EXPECT_TRUE(contains(dnn_verdict(t), "the convolution gives")) << dnn_verdict(t);
  }

  // x and y must be dense in the filter's layout.
  dnn::ConvProblem p = plain_conv(false);
  p.x_strides = strides_of(p.n, p.c, p.h, p.w, true);
  EXPECT_TRUE(contains(dnn_verdict(p), "x strides")) << dnn_verdict(p);
  EXPECT_TRUE(contains(dnn_verdict(p), "NCHW-dense")) << dnn_verdict(p);
  p = plain_conv(true);
  p.y_strides = strides_of(p.n, p.k, p.out_h, p.out_w, false);
  EXPECT_TRUE(contains(dnn_verdict(p), "y strides")) << dnn_verdict(p);
  p = plain_conv(false);
  p.x_strides[0] += 1;  // a gap between images
  EXPECT_TRUE(contains(dnn_verdict(p), "x strides")) << dnn_verdict(p);
  p = plain_conv(false);
  p.n = 1;
  p.x_strides[0] = 12345;  // the stride of a size-1 dimension does not matter
  p.y_strides[0] = 0;
  EXPECT_EQ(dnn_verdict(p), "ok");

  // Groups, sizes, the output formula.
  p = plain_conv(false);
  p.groups = 3;  // divides k = 12 but not c = 8
  EXPECT_TRUE(contains(dnn_verdict(p), "groups = 3 does not divide")) << dnn_verdict(p);
  p.groups = 4;
  EXPECT_EQ(dnn_verdict(p), "ok");
  p = plain_conv(false);
  p.out_h += 1;
  EXPECT_TRUE(contains(dnn_verdict(p), "but the convolution gives")) << dnn_verdict(p);
  p = plain_conv(false);
  p.pad_h = 0;
  p.dil_h = 5;  // 11 rows of filter over 9 rows of input
  EXPECT_TRUE(contains(dnn_verdict(p), "larger than the padded input")) << dnn_verdict(p);
  p = plain_conv(false);
  p.c = 0;
  EXPECT_TRUE(contains(dnn_verdict(p), "c = 0")) << dnn_verdict(p);
  p = plain_conv(false);
  p.pad_w = -1;
  EXPECT_TRUE(contains(dnn_verdict(p), "pad_w = -1")) << dnn_verdict(p);
  p = plain_conv(false);
  p.stride_h = 0;
  EXPECT_TRUE(contains(dnn_verdict(p), "stride_h = 0")) << dnn_verdict(p);
  p = plain_conv(false);
  p.n = int64_t{1} << 25;  // 2^25 * 8 * 9 * 10 elements: forward runs it in chunks of images
  p.x_strides = strides_of(p.n, p.c, p.h, p.w, false);
  p.y_strides = strides_of(p.n, p.k, p.out_h, p.out_w, false);
  EXPECT_TRUE(dnn::supported(p, nullptr)) << dnn_verdict(p);
  p.h = p.w = int64_t{1} << 14;  // one image of 8 * 2^28 elements does not fit
  p.out_h = dnn::conv_out_size(p.h, p.pad_h, p.dil_h, p.r, p.stride_h);
  p.out_w = dnn::conv_out_size(p.w, p.pad_w, p.dil_w, p.s, p.stride_w);
  p.x_strides = strides_of(p.n, p.c, p.h, p.w, false);
  p.y_strides = strides_of(p.n, p.k, p.out_h, p.out_w, false);
  EXPECT_TRUE(contains(dnn_verdict(p), "one image or the filter has more than 2147483647 elements")) << dnn_verdict(p);
  p = plain_conv(false);
  p.h = int64_t{1} << 31;
  EXPECT_TRUE(contains(dnn_verdict(p), "exceeds 2^31-1")) << dnn_verdict(p);

  // 3-D problems: the depth axis is checked as the others are, and x and y need five strides.
  p = conv_problem(volume_case());
  EXPECT_EQ(dnn_verdict(p), "ok");
  ConvCase channels_last = volume_case();
  channels_last.nhwc = true;
  EXPECT_TRUE(contains(dnn_verdict(conv_problem(channels_last)), "a 3-D convolution in NDHWC"))
      << dnn_verdict(conv_problem(channels_last));
  p = conv_problem(volume_case());
  p.out_d += 1;
  EXPECT_TRUE(contains(dnn_verdict(p), "out_d x out_h x out_w = 6 x 9 x 10, but the convolution gives 5 x 9 x 10"))
      << dnn_verdict(p);
  p = conv_problem(volume_case());
  p.pad_d = 0;
  p.dil_d = 3;  // 7 depths of filter over 5 of input
  p.out_d = 1;
  EXPECT_TRUE(contains(dnn_verdict(p), "the dilated filter (7 x 3 x 3) is larger than the padded input (5 x 11 x 12)"))
      << dnn_verdict(p);
  p = conv_problem(volume_case());
  p.stride_d = 0;
  EXPECT_TRUE(contains(dnn_verdict(p), "stride_d = 0")) << dnn_verdict(p);
  p = conv_problem(volume_case());
  p.x_strides = strides_of(p.n, p.c, p.h, p.w, false);  // four strides for five dims
  EXPECT_TRUE(contains(dnn_verdict(p), "x strides [720,90,10,1] are not NCDHW-dense")) << dnn_verdict(p);
  p = conv_problem(volume_case());
  p.spatial = 1;
  EXPECT_TRUE(contains(dnn_verdict(p), "spatial = 1")) << dnn_verdict(p);
  p = plain_conv(false);
  p.d = 0;  // depth fields are a 3-D problem's only
  p.stride_d = 0;
  EXPECT_EQ(dnn_verdict(p), "ok");

  // Empty batch: nothing to run, any strides.
  p = plain_conv(true);
  p.n = 0;
  p.x_strides = {};
  EXPECT_EQ(dnn_verdict(p), "ok");
  for (const DataType t : {DataType::Float16, DataType::BFloat16}) {
    p = plain_conv(true);
    p.dtype = t;
    EXPECT_EQ(dnn_verdict(p), "ok") << runtime::data_type_name(t);
  }
}

TEST(CudaLibs, ConvArgumentErrorsNeedNoGpu) {
  dnn::ConvProblem bad = plain_conv(false);
  bad.groups = 3;
  EXPECT_THROW(dnn::choose(bad, dnn::Search::Heuristic, nullptr, nullptr, nullptr), std::invalid_argument);
  int dummy = 0;
  try {
    dnn::forward(plain_conv(false), dnn::Algo{}, &dummy, &dummy, nullptr, nullptr, &dummy, nullptr);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(contains(e.what(), "unknown algorithm id -1")) << e.what();
  }
  dnn::ConvProblem with_bias = plain_conv(false);
  with_bias.bias = true;
  dnn::Algo algo;
  algo.id = 0;
  EXPECT_THROW(dnn::forward(with_bias, algo, &dummy, &dummy, nullptr, nullptr, &dummy, nullptr),
               std::invalid_argument);  // bias requested, none given
  EXPECT_THROW(dnn::choose(plain_conv(false), dnn::Search::Exhaustive, nullptr, nullptr, nullptr),
               std::invalid_argument);  // exhaustive search needs buffers
  // Empty batch: nothing runs, no GPU needed.
  dnn::ConvProblem empty = plain_conv(false);
  empty.n = 0;
  dnn::forward(empty, algo, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
  EXPECT_EQ(dnn::choose(empty, dnn::Search::Heuristic, nullptr, nullptr, nullptr).workspace, 0u);
}

TEST(CudaLibs, ConvOutputDimsMatchTheFormula) {
  FLOW_REQUIRE_LIB(dnn::load);
  struct Shape {
    int64_t n, c, h, w, k, r, s, groups, pad_h, pad_w, stride_h, stride_w, dil_h, dil_w;
  };
  const std::vector<Shape> shapes = {
      {2, 8, 9, 10, 12, 3, 3, 1, 1, 1, 1, 1, 1, 1},     // same padding
      {1, 3, 224, 224, 64, 7, 7, 1, 3, 3, 2, 2, 1, 1},  // ResNet stem
      {4, 16, 17, 13, 32, 3, 5, 4, 0, 2, 2, 3, 1, 1},   // groups, uneven stride and padding
      {2, 6, 20, 21, 6, 3, 3, 6, 2, 2, 1, 1, 2, 2},     // depthwise, dilation 2
      {1, 4, 31, 29, 8, 5, 3, 2, 1, 0, 3, 2, 3, 4},     // dilation and stride together
      {3, 5, 1, 40, 7, 1, 9, 1, 0, 4, 1, 1, 1, 1},      // 1-D along w
      {2, 8, 8, 8, 16, 1, 1, 1, 0, 0, 2, 2, 1, 1},      // strided 1x1 (downsample)
  };
  for (const Shape& sh : shapes) {
    for (const bool nhwc : {false, true}) {
      dnn::ConvProblem p;
      p.n = sh.n;
      p.c = sh.c;
      p.h = sh.h;
      p.w = sh.w;
      p.k = sh.k;
      p.r = sh.r;
      p.s = sh.s;
      p.groups = sh.groups;
      p.pad_h = sh.pad_h;
      p.pad_w = sh.pad_w;
      p.stride_h = sh.stride_h;
      p.stride_w = sh.stride_w;
      p.dil_h = sh.dil_h;
      p.dil_w = sh.dil_w;
      p.w_nhwc = nhwc;
      const std::vector<int> dims = dnn::output_dims(p);
      const int64_t oh = dnn::conv_out_size(sh.h, sh.pad_h, sh.dil_h, sh.r, sh.stride_h);
      const int64_t ow = dnn::conv_out_size(sh.w, sh.pad_w, sh.dil_w, sh.s, sh.stride_w);
      // The formula itself, written out once more: (h + 2p - d(r-1) - 1) / s + 1.
      EXPECT_EQ(oh, (sh.h + 2 * sh.pad_h - sh.dil_h * (sh.r - 1) - 1) / sh.stride_h + 1);
      const std::vector<int> want = {static_cast<int>(sh.n), static_cast<int>(sh.k), static_cast<int>(oh),
                                     static_cast<int>(ow)};
      EXPECT_EQ(dims, want) << dnn::problem_key(p);
      p.out_h = oh;
      p.out_w = ow;
      p.x_strides = strides_of(p.n, p.c, p.h, p.w, nhwc);
      p.y_strides = strides_of(p.n, p.k, oh, ow, nhwc);
      EXPECT_EQ(dnn_verdict(p), "ok");
    }
  }
  // 3-D, through the N-d descriptors: each axis its own padding, stride and dilation.
  {
    ConvCase c = uneven_volume_case();
    c.stride = 2;
    const dnn::ConvProblem volume = conv_problem(c);
    EXPECT_EQ(dnn::output_dims(volume), (std::vector<int>{2, 12, 4, 5, 5})) << dnn::problem_key(volume);
    EXPECT_EQ(volume.out_d, 4);  // (8 + 4 - 2 - 1) / 3 + 1
    EXPECT_EQ(dnn_verdict(volume), "ok");
  }
  // cuDNN's own check of a bad descriptor comes back as a named error.
  dnn::ConvProblem p = plain_conv(false);
  p.r = p.h + 5;
  p.pad_h = 0;
  try {
    dnn::output_dims(p);
    FAIL() << "expected a cuDNN error";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(contains(e.what(), "flow: cuDNN error in cudnn")) << e.what();
    EXPECT_TRUE(contains(e.what(), "CUDNN_STATUS_")) << e.what();
    std::printf("[flow] a cuDNN error reads: %s\n", e.what());
  }
}

TEST(CudaLibs, ConvProblemKeyNamesEveryField) {
  const dnn::ConvProblem base = plain_conv(false);
  EXPECT_EQ(dnn::problem_key(base), dnn::problem_key(plain_conv(false)));
  EXPECT_EQ(dnn::problem_key(base),
            "n2c8h9w10_k12r3s3_g1_p1x1_s1x1_d1x1_o9x10_float32_x[720,90,10,1]_y[1080,90,10,1]_KCRS");
  const std::vector<std::function<void(dnn::ConvProblem&)>> changes = {
      [](dnn::ConvProblem& p) { p.n += 1; },
      [](dnn::ConvProblem& p) { p.c += 1; },
      [](dnn::ConvProblem& p) { p.h += 1; },
      [](dnn::ConvProblem& p) { p.w += 1; },
      [](dnn::ConvProblem& p) { p.k += 1; },
      [](dnn::ConvProblem& p) { p.r += 1; },
      [](dnn::ConvProblem& p) { p.s += 1; },
      [](dnn::ConvProblem& p) { p.groups += 1; },
      [](dnn::ConvProblem& p) { p.pad_h += 1; },
      [](dnn::ConvProblem& p) { p.pad_w += 1; },
      [](dnn::ConvProblem& p) { p.stride_h += 1; },
      [](dnn::ConvProblem& p) { p.stride_w += 1; },
      [](dnn::ConvProblem& p) { p.dil_h += 1; },
      [](dnn::ConvProblem& p) { p.dil_w += 1; },
      [](dnn::ConvProblem& p) { p.out_h += 1; },
      [](dnn::ConvProblem& p) { p.out_w += 1; },
      [](dnn::ConvProblem& p) { p.dtype = DataType::Float16; },
      [](dnn::ConvProblem& p) { p.dtype = DataType::BFloat16; },
      [](dnn::ConvProblem& p) { p.x_strides[0] += 1; },
      [](dnn::ConvProblem& p) { p.x_strides[3] += 1; },
      [](dnn::ConvProblem& p) { p.y_strides[1] += 1; },
      [](dnn::ConvProblem& p) { p.y_strides[2] += 1; },
      [](dnn::ConvProblem& p) { p.w_nhwc = true; },
      [](dnn::ConvProblem& p) { p.bias = true; },
      [](dnn::ConvProblem& p) { p.residual = true; },
      [](dnn::ConvProblem& p) { p.relu = true; },
      [](dnn::ConvProblem& p) { p.transposed = true; },
  };
  std::set<std::string> keys = {dnn::problem_key(base)};
  for (size_t i = 0; i < changes.size(); ++i) {
    dnn::ConvProblem p = base;
    changes[i](p);
    EXPECT_TRUE(keys.insert(dnn::problem_key(p)).second) << "change " << i << ": " << dnn::problem_key(p);
  }
  // 3-D: the depth of every field; a 2-D key is the same whatever its (unused) depth fields hold.
  const dnn::ConvProblem volume = conv_problem(volume_case());
  EXPECT_EQ(dnn::problem_key(volume),
            "n2c8d5h9w10_k12t3r3s3_g1_p1x1x1_s1x1x1_d1x1x1_o5x9x10_float32_x[3600,450,90,10,1]_y[5400,450,90,10,1]_"
            "KCTRS");
  dnn::ConvProblem unused = base;
  unused.d = 7;
  unused.pad_d = 2;
  EXPECT_EQ(dnn::problem_key(unused), dnn::problem_key(base));
  const std::vector<std::function<void(dnn::ConvProblem&)>> depth_changes = {
      [](dnn::ConvProblem& p) { p.d += 1; },        [](dnn::ConvProblem& p) { p.t += 1; },
      [](dnn::ConvProblem& p) { p.pad_d += 1; },    [](dnn::ConvProblem& p) { p.stride_d += 1; },
      [](dnn::ConvProblem& p) { p.dil_d += 1; },    [](dnn::ConvProblem& p) { p.out_d += 1; },
      [](dnn::ConvProblem& p) { p.w_nhwc = true; }, [](dnn::ConvProblem& p) { p.x_strides[2] += 1; },
  };
  keys = {dnn::problem_key(volume)};
  for (size_t i = 0; i < depth_changes.size(); ++i) {
    dnn::ConvProblem p = volume;
    depth_changes[i](p);
    EXPECT_TRUE(keys.insert(dnn::problem_key(p)).second) << "depth change " << i << ": " << dnn::problem_key(p);
  }
}

// ---- with a GPU ------------------------------------------------------------------------------------

TEST(CudaLibsGpu, ConvFloat32) {
  FLOW_REQUIRE_GPU();
  FLOW_REQUIRE_LIB(dnn::load);
  uint64_t salt = 500;
  std::vector<ConvVariant> variants = conv_epilogues();
  const std::vector<ConvVariant> shapes = {
      [](ConvCase& c) {
        c.groups = 2;
        c.dil = 2;
        c.stride = 2;
        c.pad = 2;
        c.bias = true;
        c.relu = true;
      },
      [](ConvCase& c) {
        c.groups = 4;
        c.k = 8;
        c.r = 1;
        c.s = 1;
        c.pad = 0;
        c.stride = 2;
      },
      [](ConvCase& c) {
        c.c = 8;
        c.k = 8;
        c.groups = 8;
        c.relu = true;
      },  // depthwise
  };
  variants.insert(variants.end(), shapes.begin(), shapes.end());
  for (const bool nhwc : {false, true})
    for (const auto search : {dnn::Search::Heuristic, dnn::Search::Exhaustive})
      for (const auto& v : variants) {
        ConvCase c;
        c.nhwc = nhwc;
        c.search = search;
        v(c);
        run_conv_case(c, ++salt);
      }
}

TEST(CudaLibsGpu, ConvHalfAndBfloat16) {
  FLOW_REQUIRE_GPU();
  FLOW_REQUIRE_LIB(dnn::load);
  uint64_t salt = 600;
  for (const DataType t : {DataType::Float16, DataType::BFloat16})
    for (const bool nhwc : {false, true})
      for (const auto search : {dnn::Search::Heuristic, dnn::Search::Exhaustive}) {
        ConvCase c;
        c.dtype = t;
        c.nhwc = nhwc;
        c.search = search;
        c.c = 16;
        c.k = 16;
        run_conv_case(c, ++salt);
        c.bias = true;
        c.relu = true;
        c.residual = true;
        run_conv_case(c, ++salt);
        c.residual = false;
        c.relu = false;
        run_conv_case(c, ++salt);
        // The unfused epilogue kernel in 16-byte vectors: 16 channels (NHWC) or 8 x 8 outputs (NCHW)
        // per row; with a bias alone, and with a relu alone.
        c.h = 8;
        c.w = 8;
        run_conv_case(c, ++salt);
        c.bias = false;
        c.relu = true;
        run_conv_case(c, ++salt);
      }
}

// The fused conv + bias + relu without a residual hands cuDNN y as z, scaled by alpha2 = 0. What y
// held before (NaN bytes, zeros, large finite values) must not reach the result: not on the first
// call of a problem (where the runtime probes whether cuDNN reads z) nor on later ones. The emulated
// device runs both readings of a zero alpha2 (FLOW_EMULATED_CUDNN_SKIP_ZERO_ALPHA2; a real device
// has one of them and ignores the variable).
TEST(CudaLibsGpu, ConvFusedWithoutResidualIgnoresWhatTheOutputHeld) {
  FLOW_REQUIRE_GPU();
  FLOW_REQUIRE_LIB(dnn::load);
  int64_t h = 11;
  uint64_t salt = 650;
  for (const char* skip : {"0", "1"}) {
    const ScopedEnv env("FLOW_EMULATED_CUDNN_SKIP_ZERO_ALPHA2", skip);
    for (const DataType t : {DataType::Float32, DataType::Float16}) {
      ConvCase c;
      c.dtype = t;
      c.bias = true;
      c.relu = true;
      c.h = ++h;  // a problem of its own: its first call probes afresh
      SCOPED_TRACE(name_of(c) + " skip " + skip);
      const dnn::ConvProblem p = conv_problem(c);
      std::mt19937_64 rng = test::rng(++salt);
      auto x = upload(random_values(static_cast<size_t>(c.n * c.c * c.h * c.w), t, rng), t);
      auto w = upload(random_values(static_cast<size_t>(c.k * c.c * c.r * c.s), t, rng), t);
      auto bias = upload(random_values(static_cast<size_t>(c.k), t, rng), t);
      const size_t count = static_cast<size_t>(c.n * c.k * p.out_h * p.out_w);
      const size_t bytes = count * runtime::data_type_size(t);
      auto y = Buffer::allocate(bytes, DeviceType::CUDA);
      const dnn::Algo algo = dnn::choose(p, dnn::Search::Heuristic, nullptr, nullptr, nullptr);
      const dnn::Counters before = dnn::counters();
      std::vector<std::vector<uint8_t>> results;
      for (const unsigned char fill : {0xFF, 0x00, 0x7B, 0xFF}) {
        rc::memset_device(y->data(), fill, bytes);
        dnn::forward(p, algo, x->data(), w->data(), bias->data(), nullptr, y->data(), rc::current_stream());
        std::vector<uint8_t> got(bytes);
        rc::copy_device_to_host(got.data(), y->data(), bytes);
        results.push_back(std::move(got));
      }
      const dnn::Counters after = dnn::counters();
      if (emulated_device()) {  // the emulated cuDNN takes the fused call; a real one may refuse it
        EXPECT_EQ(after.refused, before.refused);
        EXPECT_EQ(after.z_read - before.z_read, std::strcmp(skip, "1") == 0 ? 0 : 1);
      }
      if (after.refused == before.refused) {
        EXPECT_EQ(after.fused - before.fused, 4);        // the fused call ran each time
        EXPECT_EQ(after.z_probes - before.z_probes, 1);  // on the first call
      } else {
        EXPECT_EQ(after.unfused - before.unfused, 4);
      }
      for (size_t i = 1; i < results.size(); ++i) EXPECT_TRUE(results[i] == results[0]) << "call " << i;
      for (const float v : decode(results.back(), t)) ASSERT_TRUE(std::isfinite(v));
    }
  }
}

// A batch whose tensors exceed cuDNN's per-tensor limit runs in chunks of images, as torch splits a
// large batch; here the limit is lowered so that 5 images go as 2 + 2 + 1 (3 cuDNN calls), with
// every epilogue path, both layouts and both searches.
TEST(CudaLibsGpu, ConvLargeBatchRunsInChunks) {
  FLOW_REQUIRE_GPU();
  FLOW_REQUIRE_LIB(dnn::load);
  const ScopedEnv limit("FLOW_CUDNN_MAX_TENSOR_ELEMENTS", "2160");  // two images of 12 x 9 x 10 outputs
  uint64_t salt = 680;
  for (const bool nhwc : {false, true})
    for (const auto search : {dnn::Search::Heuristic, dnn::Search::Exhaustive})
      for (const ConvVariant& v : conv_epilogues()) {
        ConvCase c;
        c.n = 5;
        c.h = 9;
        c.w = 10;
        c.nhwc = nhwc;
        c.search = search;
        v(c);
        const dnn::Counters before = dnn::counters();
        run_conv_case(c, ++salt);
        const dnn::Counters after = dnn::counters();
        EXPECT_EQ(after.fused + after.unfused - before.fused - before.unfused, 3) << name_of(c);
      }
}

// 3-D convolutions (conv3d) through the N-d descriptors, NCDHW: every epilogue, both searches,
// float32 and the half types, depth parameters unlike the others' (so a swapped axis shows), and a
// batch in chunks.
TEST(CudaLibsGpu, Conv3d) {
  FLOW_REQUIRE_GPU();
  FLOW_REQUIRE_LIB(dnn::load);
  uint64_t salt = 800;
  for (const auto search : {dnn::Search::Heuristic, dnn::Search::Exhaustive})
    for (const ConvVariant& v : conv_epilogues()) {
      ConvCase c = volume_case();
      c.h = 6;
      c.w = 7;
      c.search = search;
      v(c);
      run_conv_case(c, ++salt);
    }
  ConvCase c = uneven_volume_case();
  c.h = 7;
  c.w = 5;
  c.bias = true;
  c.relu = true;
  for (const DataType t : {DataType::Float32, DataType::Float16, DataType::BFloat16}) {
    c.dtype = t;
    run_conv_case(c, ++salt);
  }
  // Three images in chunks of one: the image size includes the depth.
  const dnn::ConvProblem p = conv_problem(c);
  const std::string one_image = std::to_string(std::max(p.c * p.d * p.h * p.w, p.k * p.out_d * p.out_h * p.out_w));
  const ScopedEnv limit("FLOW_CUDNN_MAX_TENSOR_ELEMENTS", one_image.c_str());
  c.n = 3;
  c.dtype = DataType::Float32;
  c.residual = true;
  const dnn::Counters before = dnn::counters();
  run_conv_case(c, ++salt);
  const dnn::Counters after = dnn::counters();
  EXPECT_EQ(after.fused + after.unfused - before.fused - before.unfused, 3);
}

TEST(CudaLibsGpu, ConvAlgorithmFromARecord) {
  FLOW_REQUIRE_GPU();
  FLOW_REQUIRE_LIB(dnn::load);
  // forward() takes any algorithm the problem supports, e.g. one read back from a tuning record by
  // name: IMPLICIT_GEMM runs every configuration.
  ConvCase c;
  c.bias = true;
  c.relu = true;
  const dnn::ConvProblem p = conv_problem(c);
  dnn::Algo algo;
  algo.id = dnn::algo_id("IMPLICIT_GEMM");
  algo.name = "IMPLICIT_GEMM";
  std::mt19937_64 rng = test::rng(700);
  auto x = upload(random_values(static_cast<size_t>(c.n * c.c * c.h * c.w), c.dtype, rng), c.dtype);
  auto w = upload(random_values(static_cast<size_t>(c.k * c.c * c.r * c.s), c.dtype, rng), c.dtype);
  auto bias = upload(random_values(static_cast<size_t>(c.k), c.dtype, rng), c.dtype);
  const size_t y_count = static_cast<size_t>(c.n * c.k * p.out_h * p.out_w);
  auto y = Buffer::allocate(y_count * 4, DeviceType::CUDA);
  rc::memset_device(y->data(), 0xFF, y_count * 4);
  dnn::forward(p, algo, x->data(), w->data(), bias->data(), nullptr, y->data(), rc::current_stream());
  for (const float v : download(*y, y_count, c.dtype)) {
    ASSERT_FALSE(std::isnan(v));
    ASSERT_GE(v, 0.0f);
  }
}
