// The GPU library layer: cuBLASLt matrix products and cuDNN convolutions (runtime/cublaslt.h,
// runtime/cudnn.h). Without a GPU: every resolved entry point exists in the installed libraries,
// supported() accepts and rejects with named reasons, cuDNN's output dims agree with the formula,
// algorithm names round-trip and problem keys tell problems apart. With a GPU (the tests skip with
// "no CUDA device" otherwise): products and convolutions against plain CPU loops in double, for
// float32 (strict FP32: the tolerances are below what TF32 would give for matmul), float16 and
// bfloat16, with every epilogue, both operand orientations, NCHW and NHWC, heuristic and exhaustive
// algorithm choice. Outputs start poisoned (NaN or a sentinel), so unwritten or over-written
// elements show.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "runtime/buffer.h"
#include "runtime/cublaslt.h"
#include "runtime/cuda_copy.h"
#include "runtime/cuda_driver.h"
#include "runtime/cuda_stream.h"
#include "runtime/cudnn.h"
#include "runtime/data_type.h"
#include "runtime/dynlib.h"
#include "runtime/epilogue_kernel.h"
#include "runtime/nvrtc.h"
#include "simt/simt_emulator.h"
#include "test_util.h"

using namespace flow;
namespace rc = flow::runtime::cuda;
namespace lt = flow::runtime::cuda::cublaslt;
namespace dnn = flow::runtime::cuda::cudnn;
using runtime::Buffer;
using runtime::CudaLib;
using runtime::DataType;
using runtime::DeviceType;

namespace {

using test::contains;

using test::load_error;

// A library wrapper for device-less tests. A build without the headers (cudnn.h, cublasLt.h) has no
// wrapper to test: a skip, but a failure where a GPU is present (the GPU script carries the
// headers). A library that does not load: FLOW_REQUIRE_CUDA_LIB's rule (tests/cpp/cuda_test_util.h).
#define FLOW_REQUIRE_LIB(load_fn)                                                                      \
  if (const std::string flow_lib_err = load_error(load_fn); contains(flow_lib_err, "built without")) { \
    if (rc::cuda_available()) FAIL() << flow_lib_err;                                                  \
    GTEST_SKIP() << flow_lib_err;                                                                      \
  }                                                                                                    \
  FLOW_REQUIRE_CUDA_LIB(load_fn)

// ---- 16-bit floats ---------------------------------------------------------------------------------

uint16_t float_to_half(float f) {
  uint32_t x = 0;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t fexp = (x >> 23) & 0xffu;
  uint32_t mant = x & 0x7fffffu;
  if (fexp == 0xffu) return static_cast<uint16_t>(sign | 0x7c00u | (mant != 0 ? 0x200u : 0u));
  const int32_t exp = static_cast<int32_t>(fexp) - 127 + 15;
  if (exp >= 31) return static_cast<uint16_t>(sign | 0x7c00u);
  if (exp <= 0) {  // subnormal half: m * 2^-24
    if (exp < -10) return static_cast<uint16_t>(sign);
    mant |= 0x800000u;
    const int shift = 14 - exp;
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (static_cast<uint32_t>(exp) << 10) | (mant >> 13);
  const uint32_t rem = mant & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry rounds up into the exponent
  return static_cast<uint16_t>(sign | h);
}

float half_to_float(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  if (exp == 0) {
    const float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  const uint32_t bits = exp == 31 ? (sign | 0x7f800000u | (mant << 13)) : (sign | ((exp + 112) << 23) | (mant << 13));
  float f = 0;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t float_to_bf16(float f) {
  uint32_t x = 0;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // NaN stays NaN
  x += 0x7fffu + ((x >> 16) & 1u);                                                       // round to nearest even
  return static_cast<uint16_t>(x >> 16);
}

float bf16_to_float(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f = 0;
  std::memcpy(&f, &bits, 4);
  return f;
}

float quantize(float f, DataType t) {
  switch (t) {
    case DataType::Float32:
      return f;
    case DataType::Float16:
      return half_to_float(float_to_half(f));
    case DataType::BFloat16:
      return bf16_to_float(float_to_bf16(f));
  }
  return f;
}

std::vector<uint8_t> encode(const std::vector<float>& v, DataType t) {
  const size_t size = runtime::data_type_size(t);
  std::vector<uint8_t> out(v.size() * size);
  for (size_t i = 0; i < v.size(); ++i) {
    if (t == DataType::Float32) {
      std::memcpy(&out[i * 4], &v[i], 4);
    } else {
      const uint16_t h = t == DataType::Float16 ? float_to_half(v[i]) : float_to_bf16(v[i]);
      std::memcpy(&out[i * 2], &h, 2);
    }
  }
  return out;
}

std::vector<float> decode(const std::vector<uint8_t>& bytes, DataType t) {
  const size_t size = runtime::data_type_size(t);
  std::vector<float> out(bytes.size() / size);
  for (size_t i = 0; i < out.size(); ++i) {
    if (t == DataType::Float32) {
      std::memcpy(&out[i], &bytes[i * 4], 4);
    } else {
      uint16_t h = 0;
      std::memcpy(&h, &bytes[i * 2], 2);
      out[i] = t == DataType::Float16 ? half_to_float(h) : bf16_to_float(h);
    }
  }
  return out;
}

// Random values already representable in `t` (so the reference sees exactly what the GPU reads).
std::vector<float> random_values(size_t n, DataType t, std::mt19937_64& rng, float lo = -1.f, float hi = 1.f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = quantize(dist(rng), t);
  return v;
}

std::shared_ptr<Buffer> upload(const std::vector<float>& host, DataType t) {
  const std::vector<uint8_t> bytes = encode(host, t);
  auto buf = Buffer::allocate(bytes.size(), DeviceType::CUDA);
  rc::copy_host_to_device(buf->data(), bytes.data(), bytes.size());
  return buf;
}

std::vector<float> download(const Buffer& buf, size_t count, DataType t) {
  std::vector<uint8_t> bytes(count * runtime::data_type_size(t));
  rc::copy_device_to_host(bytes.data(), buf.data(), bytes.size());
  return decode(bytes, t);
}

// Relative tolerance (of the sum of absolute terms) for results stored in `t`. float32: accumulation
// error only (strict FP32; TF32 inputs would be off by ~5e-4 per product); 16-bit: one or two
// roundings of the output.
double rel_tolerance(DataType t) {
  switch (t) {
    case DataType::Float32:
      return 2e-5;
    case DataType::Float16:
      return 2e-3;
    case DataType::BFloat16:
      return 1.6e-2;
  }
  return 0;
}

double gelu_tanh(double x) {
  const double kSqrt2OverPi = 0.7978845608028654;
  return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + 0.044715 * x * x * x)));
}

// ---- matmul harness --------------------------------------------------------------------------------

struct MatmulCase {
  int64_t batch = 1, m = 13, n = 11, k = 17;
  DataType in = DataType::Float32, out = DataType::Float32;
  bool trans_a = false, trans_b = false;  // stored column-major (row stride 1)
  bool broadcast_b = false;               // one B for every batch (batch stride 0)
  bool bias = false, residual = false, in_place = false;
  lt::Activation act = lt::Activation::None;
  int64_t out_pad = 0;   // extra elements per row of out (row stride n + out_pad)
  int64_t a_offset = 0;  // A starts this many elements into its buffer (misaligned views)
};

std::string name_of(const MatmulCase& c) {
  return "batch " + std::to_string(c.batch) + " m " + std::to_string(c.m) + " n " + std::to_string(c.n) + " k " +
         std::to_string(c.k) + " " + runtime::data_type_name(c.in) + "->" + runtime::data_type_name(c.out) +
         (c.trans_a ? " A^T" : "") + (c.trans_b ? " B^T" : "") + (c.broadcast_b ? " bcastB" : "") +
         (c.bias ? " bias" : "") + (c.residual ? (c.in_place ? " residual(in place)" : " residual") : "") + " " +
         lt::activation_name(c.act) + " pad " + std::to_string(c.out_pad) + " offset " + std::to_string(c.a_offset);
}

void run_matmul_case(const MatmulCase& c, uint64_t salt) {
  SCOPED_TRACE(name_of(c));
  std::mt19937_64 rng = test::rng(salt);
  lt::MatmulProblem p;
  p.batch = c.batch;
  p.m = c.m;
  p.n = c.n;
  p.k = c.k;
  p.in_type = c.in;
  p.out_type = c.out;
  p.a_row = c.trans_a ? 1 : c.k;
  p.a_col = c.trans_a ? c.m : 1;
  p.a_batch = c.m * c.k;
  p.b_row = c.trans_b ? 1 : c.n;
  p.b_col = c.trans_b ? c.k : 1;
  p.b_batch = c.broadcast_b ? 0 : c.k * c.n;
  p.out_row = c.n + c.out_pad;
  p.out_batch = c.m * p.out_row;
  p.bias = c.bias;
  p.residual = c.residual;
  p.activation = c.act;
  std::string why;
  ASSERT_TRUE(lt::supported(p, &why)) << why;

  const size_t a_count = static_cast<size_t>(c.batch * c.m * c.k + c.a_offset);
  const size_t b_count = static_cast<size_t>((c.broadcast_b ? 1 : c.batch) * c.k * c.n);
  const size_t out_count = static_cast<size_t>(c.batch * p.out_batch);
  const std::vector<float> a_host = random_values(a_count, c.in, rng);
  const std::vector<float> b_host = random_values(b_count, c.in, rng);
  const std::vector<float> bias_host = random_values(static_cast<size_t>(c.n), c.out, rng);
  const float sentinel = 768.0f;  // exact in every type
  std::vector<float> res_host = random_values(out_count, c.out, rng);
  std::vector<float> out_init(out_count, sentinel);
  if (c.residual && c.in_place) out_init = res_host;
  for (int64_t b = 0; b < c.batch; ++b)  // gaps of out (row padding) keep the sentinel
    for (int64_t i = 0; i < c.m; ++i)
      for (int64_t j = c.n; j < p.out_row; ++j)
        out_init[static_cast<size_t>(b * p.out_batch + i * p.out_row + j)] = sentinel;

  auto a_dev = upload(a_host, c.in);
  auto b_dev = upload(b_host, c.in);
  auto bias_dev = upload(bias_host, c.out);
  auto res_dev = upload(res_host, c.out);
  auto out_dev = upload(out_init, c.out);
  const void* a_ptr = static_cast<const uint8_t*>(a_dev->data()) + c.a_offset * runtime::data_type_size(c.in);
  const void* res_ptr = c.in_place ? out_dev->data() : res_dev->data();
  lt::matmul(p, a_ptr, b_dev->data(), c.bias ? bias_dev->data() : nullptr, c.residual ? res_ptr : nullptr,
             out_dev->data(), rc::current_stream());
  const std::vector<float> got = download(*out_dev, out_count, c.out);

  auto a_at = [&](int64_t b, int64_t i, int64_t kk) {
    return static_cast<double>(a_host[static_cast<size_t>(c.a_offset + b * p.a_batch + i * p.a_row + kk * p.a_col)]);
  };
  auto b_at = [&](int64_t b, int64_t kk, int64_t j) {
    return static_cast<double>(b_host[static_cast<size_t>(b * p.b_batch + kk * p.b_row + j * p.b_col)]);
  };
  int bad = 0;
  for (int64_t b = 0; b < c.batch; ++b) {
    for (int64_t i = 0; i < c.m; ++i) {
      for (int64_t j = 0; j < p.out_row; ++j) {
        const size_t at = static_cast<size_t>(b * p.out_batch + i * p.out_row + j);
        if (j >= c.n) {
          if (got[at] != sentinel && ++bad <= 5) ADD_FAILURE() << "padding of out written at " << at << ": " << got[at];
          continue;
        }
        double acc = 0, absum = 0;
        for (int64_t kk = 0; kk < c.k; ++kk) {
          const double t = a_at(b, i, kk) * b_at(b, kk, j);
          acc += t;
          absum += std::fabs(t);
        }
        if (c.bias) {
          acc += bias_host[static_cast<size_t>(j)];
          absum += std::fabs(bias_host[static_cast<size_t>(j)]);
        }
        if (c.residual) {
          acc += res_host[at];
          absum += std::fabs(res_host[at]);
        }
        double want = acc;
        double tol = rel_tolerance(c.out) * (absum + std::fabs(acc)) + 1e-6;
        if (c.act == lt::Activation::Relu) want = std::max(0.0, acc);
        if (c.act == lt::Activation::GeluTanh) {
          want = gelu_tanh(acc);
          tol += 2e-3 * (std::fabs(acc) + 1e-2);  // the epilogue may use a fast tanh
        }
        const double err = std::fabs(static_cast<double>(got[at]) - want);
        if (!(err <= tol) && ++bad <= 5)
          ADD_FAILURE() << "out[" << b << "][" << i << "][" << j << "] = " << got[at] << ", want " << want
                        << " (tolerance " << tol << ")";
      }
    }
  }
  EXPECT_EQ(bad, 0);
}

// ---- conv harness ----------------------------------------------------------------------------------

struct ConvCase {
  int64_t n = 2, c = 8, h = 9, w = 10, k = 12, r = 3, s = 3;
  int64_t groups = 1, pad = 1, stride = 1, dil = 1;
  DataType dtype = DataType::Float32;
  bool nhwc = false;
  bool bias = false, residual = false, z_is_y = false, relu = false;
  dnn::Search search = dnn::Search::Heuristic;
};

std::string name_of(const ConvCase& c) {
  return "n" + std::to_string(c.n) + " c" + std::to_string(c.c) + " " + std::to_string(c.h) + "x" +
         std::to_string(c.w) + " k" + std::to_string(c.k) + " " + std::to_string(c.r) + "x" + std::to_string(c.s) +
         " g" + std::to_string(c.groups) + " pad " + std::to_string(c.pad) + " stride " + std::to_string(c.stride) +
         " dil " + std::to_string(c.dil) + " " + runtime::data_type_name(c.dtype) + (c.nhwc ? " NHWC" : " NCHW") +
         (c.bias ? " bias" : "") + (c.residual ? (c.z_is_y ? " z=y" : " z") : "") + (c.relu ? " relu" : "") +
         (c.search == dnn::Search::Exhaustive ? " exhaustive" : " heuristic");
}

std::array<int64_t, 4> strides_of(int64_t n, int64_t c, int64_t h, int64_t w, bool nhwc) {
  if (nhwc) return {h * w * c, 1, w * c, c};
  return {c * h * w, h * w, w, 1};
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
  p.x_strides = strides_of(c.n, c.c, c.h, c.w, c.nhwc);
  p.y_strides = strides_of(c.n, c.k, p.out_h, p.out_w, c.nhwc);
  p.w_nhwc = c.nhwc;
  p.bias = c.bias;
  p.residual = c.residual;
  p.relu = c.relu;
  return p;
}

void run_conv_case(const ConvCase& c, uint64_t salt) {
  SCOPED_TRACE(name_of(c));
  std::mt19937_64 rng = test::rng(salt);
  const dnn::ConvProblem p = conv_problem(c);
  std::string why;
  ASSERT_TRUE(dnn::supported(p, &why)) << why;
  const int64_t cg = c.c / c.groups, kg = c.k / c.groups, oh = p.out_h, ow = p.out_w;
  const size_t x_count = static_cast<size_t>(c.n * c.c * c.h * c.w);
  const size_t w_count = static_cast<size_t>(c.k * cg * c.r * c.s);
  const size_t y_count = static_cast<size_t>(c.n * c.k * oh * ow);
  const std::vector<float> x_host = random_values(x_count, c.dtype, rng);  // in storage order
  const std::vector<float> w_host = random_values(w_count, c.dtype, rng);
  const std::vector<float> bias_host = random_values(static_cast<size_t>(c.k), c.dtype, rng);
  const std::vector<float> z_host = random_values(y_count, c.dtype, rng);
  const auto xs = p.x_strides, ys = p.y_strides;
  auto x_at = [&](int64_t ni, int64_t ci, int64_t hi, int64_t wi) {
    return static_cast<double>(x_host[static_cast<size_t>(ni * xs[0] + ci * xs[1] + hi * xs[2] + wi * xs[3])]);
  };
  auto w_at = [&](int64_t ki, int64_t ci, int64_t ri, int64_t si) {
    const int64_t at = c.nhwc ? ((ki * c.r + ri) * c.s + si) * cg + ci : ((ki * cg + ci) * c.r + ri) * c.s + si;
    return static_cast<double>(w_host[static_cast<size_t>(at)]);
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
      for (int64_t oy = 0; oy < oh; ++oy)
        for (int64_t ox = 0; ox < ow; ++ox) {
          const int64_t g = ki / kg;
          double acc = 0, absum = 0;
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t ri = 0; ri < c.r; ++ri)
              for (int64_t si = 0; si < c.s; ++si) {
                const int64_t iy = oy * c.stride - c.pad + ri * c.dil;
                const int64_t ix = ox * c.stride - c.pad + si * c.dil;
                if (iy < 0 || iy >= c.h || ix < 0 || ix >= c.w) continue;
                const double t = x_at(ni, g * cg + ci, iy, ix) * w_at(ki, ci, ri, si);
                acc += t;
                absum += std::fabs(t);
              }
          const size_t at = static_cast<size_t>(ni * ys[0] + ki * ys[1] + oy * ys[2] + ox * ys[3]);
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
            ADD_FAILURE() << "y[" << ni << "][" << ki << "][" << oy << "][" << ox << "] = " << got[at] << ", want "
                          << want << " (tolerance " << tol << ", " << algo.name << ")";
        }
  EXPECT_EQ(bad, 0);
}

}  // namespace

// ---- without a GPU ---------------------------------------------------------------------------------

TEST(CudaLibs, DataTypes) {
  EXPECT_STREQ(runtime::data_type_name(DataType::Float32), "float32");
  EXPECT_STREQ(runtime::data_type_name(DataType::Float16), "float16");
  EXPECT_STREQ(runtime::data_type_name(DataType::BFloat16), "bfloat16");
  EXPECT_EQ(runtime::data_type_size(DataType::Float32), 4u);
  EXPECT_EQ(runtime::data_type_size(DataType::Float16), 2u);
  EXPECT_EQ(runtime::data_type_size(DataType::BFloat16), 2u);
  // The test's own 16-bit conversions (the GPU tests depend on them).
  for (const float f : {0.0f, 1.0f, -2.5f, 65504.0f, 0.333333f, 6.1e-5f, 3e-7f}) {
    EXPECT_NEAR(half_to_float(float_to_half(f)), f, std::fabs(f) * 4.9e-4 + 6e-8) << f;
    EXPECT_NEAR(bf16_to_float(float_to_bf16(f)), f, std::fabs(f) * 3.9e-3) << f;
  }
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half(1.0f + 1.0f / 2048), 0x3c00);  // halfway: to even
  EXPECT_EQ(float_to_half(1.0f + 3.0f / 2048), 0x3c02);
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
}

TEST(CudaLibs, LibraryPathEnvironmentIsSearchedFirst) {
  const char* old = std::getenv("FLOW_CUDA_LIB_PATH");
  const std::string saved = old != nullptr ? old : "";
  setenv("FLOW_CUDA_LIB_PATH", "/opt/a::/opt/b", 1);
  const std::vector<std::string> c = runtime::cuda_library_candidates(CudaLib::Cudnn);
  const std::vector<std::string> d = runtime::cuda_library_candidates(CudaLib::Driver);
  if (old != nullptr) {
    setenv("FLOW_CUDA_LIB_PATH", saved.c_str(), 1);
  } else {
    unsetenv("FLOW_CUDA_LIB_PATH");
  }
  ASSERT_GE(c.size(), 3u);
  EXPECT_EQ(c[0], "/opt/a/libcudnn.so.9");
  EXPECT_EQ(c[1], "/opt/b/libcudnn.so.9");  // the empty entry is skipped
  EXPECT_EQ(c[2], "libcudnn.so.9");
  EXPECT_EQ(d, std::vector<std::string>{"libcuda.so.1"});  // never for the driver
}

TEST(CudaLibs, CublasLtSymbolsResolve) {
  const std::vector<std::string> names = lt::symbol_names();
  EXPECT_GE(names.size(), 10u);
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
  FLOW_REQUIRE_CUDA_LIB([] { runtime::load_cuda_library(CudaLib::CublasLt); });
  const runtime::DynamicLibrary* lib = &runtime::load_cuda_library(CudaLib::CublasLt);
  for (const std::string& name : names) EXPECT_NE(lib->find_symbol(name.c_str()), nullptr) << name;
  FLOW_REQUIRE_LIB(lt::load);
  EXPECT_TRUE(contains(lt::version(), "cuBLASLt ")) << lt::version();
  std::printf("[flow] %s from %s\n", lt::version().c_str(), lib->path().c_str());
}

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

// The epilogue kernel (cuBLASLt's split epilogue, cuDNN's unfused bias and relu) is NVRTC-compiled
// for the device's arch: it must compile for every architecture CUDA 13 targets, with every entry
// point, 16-byte vector accesses in the vector entries and no local memory.
TEST(CudaLibs, EpilogueKernelsCompileForEveryArch) {
  FLOW_REQUIRE_NVRTC();
  for (const char* arch : {"sm_75", "sm_80", "sm_90"}) {
    SCOPED_TRACE(arch);
    const runtime::NvrtcResult r =
        runtime::nvrtc_compile(rc::epilogue_kernel_source(), "flow_epilogue_test", arch, {}, {});
    EXPECT_FALSE(r.cubin.empty());
    for (const DataType t : {DataType::Float32, DataType::Float16, DataType::BFloat16})
      for (const bool vector : {false, true}) {
        const std::string name = rc::epilogue_kernel_name(t, vector);
        const size_t at = r.ptx.find(".entry " + name + "(");
        ASSERT_NE(at, std::string::npos) << name;
        const size_t end = r.ptx.find("\n}", at);
        const std::string body = r.ptx.substr(at, end - at);
        EXPECT_EQ(contains(body, "ld.global.v4"), vector) << name << ": 16-byte loads only in vector entries";
        EXPECT_EQ(contains(body, "st.global.v4"), vector) << name;
      }
    EXPECT_FALSE(contains(r.ptx, ".local")) << "local memory in the epilogue kernel";
  }
}

// Vector width: 16 bytes' worth when the shape and pointers allow it (pure host logic).
TEST(CudaLibs, EpilogueVectorWidth) {
  alignas(16) static char block[256];
  rc::EpilogueShape nhwc;
  nhwc.rows = 10;
  nhwc.cols = 64;
  nhwc.row_stride = 64;
  EXPECT_EQ(rc::epilogue_vector_width(DataType::Float16, block, block, nhwc), 8);
  EXPECT_EQ(rc::epilogue_vector_width(DataType::Float32, block, block, nhwc), 4);
  EXPECT_EQ(rc::epilogue_vector_width(DataType::Float16, block + 2, block, nhwc), 1) << "misaligned bias";
  EXPECT_EQ(rc::epilogue_vector_width(DataType::Float16, nullptr, block + 16, nhwc), 8);
  EXPECT_EQ(rc::epilogue_vector_width(DataType::Float16, nullptr, block + 8, nhwc), 1) << "misaligned out";
  rc::EpilogueShape odd = nhwc;
  odd.cols = 60;
  odd.row_stride = 60;
  EXPECT_EQ(rc::epilogue_vector_width(DataType::Float16, nullptr, block, odd), 1);
  EXPECT_EQ(rc::epilogue_vector_width(DataType::Float32, nullptr, block, odd), 4);
  rc::EpilogueShape nchw;  // per-row bias: its alignment does not matter
  nchw.batch = 2;
  nchw.rows = 3;
  nchw.cols = 56 * 56;
  nchw.row_stride = 56 * 56;
  nchw.batch_stride = 3 * 56 * 56;
  nchw.bias_per_row = true;
  EXPECT_EQ(rc::epilogue_vector_width(DataType::BFloat16, block + 2, block, nchw), 8);
  nchw.batch_stride = 3 * 56 * 56 + 1;
  EXPECT_EQ(rc::epilogue_vector_width(DataType::BFloat16, block + 2, block, nchw), 1) << "batch stride";
}

namespace {

lt::MatmulProblem plain_matmul(int64_t m, int64_t n, int64_t k) {
  lt::MatmulProblem p;
  p.m = m;
  p.n = n;
  p.k = k;
  p.a_row = k;
  p.a_col = 1;
  p.a_batch = m * k;
  p.b_row = n;
  p.b_col = 1;
  p.b_batch = k * n;
  p.out_row = n;
  p.out_batch = m * n;
  return p;
}

// supported(p) with its reason, for EXPECT messages.
std::string lt_verdict(const lt::MatmulProblem& p) {
  std::string why;
  return lt::supported(p, &why) ? "ok" : why;
}

}  // namespace

TEST(CudaLibs, MatmulSupported) {
  const lt::MatmulProblem base = plain_matmul(64, 32, 16);
  EXPECT_EQ(lt_verdict(base), "ok");
  EXPECT_TRUE(lt::supported(base, nullptr));

  // Transposed operands (row stride 1) are the other orientation, not a copy.
  lt::MatmulProblem p = base;
  p.a_row = 1;
  p.a_col = 64;
  p.b_row = 1;
  p.b_col = 16;
  EXPECT_EQ(lt_verdict(p), "ok");
  p.a_col = 63;  // column stride below m: columns overlap
  EXPECT_TRUE(contains(lt_verdict(p), "A strides")) << lt_verdict(p);

  // Broadcast batch (stride 0) of either operand; a batched out must not overlap itself.
  p = base;
  p.batch = 4;
  p.a_batch = 0;
  EXPECT_EQ(lt_verdict(p), "ok");
  p.b_batch = 0;
  EXPECT_EQ(lt_verdict(p), "ok");
  p.out_batch = 0;
  EXPECT_TRUE(contains(lt_verdict(p), "overlap")) << lt_verdict(p);
  p.out_batch = 64 * 32 - 1;
  EXPECT_TRUE(contains(lt_verdict(p), "overlap")) << lt_verdict(p);
  p.out_batch = 64 * 32;
  p.a_batch = -1;
  EXPECT_TRUE(contains(lt_verdict(p), "negative batch stride")) << lt_verdict(p);

  // Bad strides: neither row- nor column-major, a row stride short of the row, a padded out.
  p = base;
  p.a_row = 32;
  p.a_col = 2;
  EXPECT_TRUE(contains(lt_verdict(p), "A strides (row 32, col 2)")) << lt_verdict(p);
  p = base;
  p.b_row = 31;
  EXPECT_TRUE(contains(lt_verdict(p), "B strides")) << lt_verdict(p);
  p = base;
  p.out_row = 31;
  EXPECT_TRUE(contains(lt_verdict(p), "out row stride 31")) << lt_verdict(p);
  p.out_row = 40;  // padded rows are fine
  p.out_batch = 64 * 40;
  EXPECT_EQ(lt_verdict(p), "ok");

  // Strides of size-1 dimensions do not matter (torch reports anything there).
  p = plain_matmul(1, 32, 16);
  p.a_row = 0;
  EXPECT_EQ(lt_verdict(p), "ok");
  p = plain_matmul(64, 32, 1);
  p.a_col = 7;
  p.b_row = 0;
  EXPECT_EQ(lt_verdict(p), "ok");
  p = plain_matmul(64, 1, 16);
  p.b_col = 5;
  p.b_row = 1;
  EXPECT_EQ(lt_verdict(p), "ok");
  p.out_row = 0;  // out's rows would alias: a broadcast output is never fine
  EXPECT_TRUE(contains(lt_verdict(p), "out row stride 0")) << lt_verdict(p);

  // Empty problems run nothing; k == 0 needs no A or B strides.
  p = plain_matmul(0, 32, 16);
  EXPECT_EQ(lt_verdict(p), "ok");
  p = base;
  p.batch = 0;
  EXPECT_EQ(lt_verdict(p), "ok");
  p = base;
  p.k = 0;
  p.a_row = p.a_col = p.b_row = p.b_col = 0;
  EXPECT_EQ(lt_verdict(p), "ok");
  p = base;
  p.m = -1;
  EXPECT_TRUE(contains(lt_verdict(p), "negative size")) << lt_verdict(p);
  p = base;
  p.batch = int64_t{1} << 31;
  EXPECT_TRUE(contains(lt_verdict(p), "2^31-1")) << lt_verdict(p);

  // Type mixes: equal types, or 16-bit in with float32 out.
  p = base;
  for (const DataType in : {DataType::Float32, DataType::Float16, DataType::BFloat16})
    for (const DataType out : {DataType::Float32, DataType::Float16, DataType::BFloat16}) {
      p.in_type = in;
      p.out_type = out;
      const bool ok = in == out || (in != DataType::Float32 && out == DataType::Float32);
      EXPECT_EQ(lt::supported(p, nullptr), ok) << runtime::data_type_name(in) << " -> " << runtime::data_type_name(out);
      if (!ok) {
        EXPECT_TRUE(contains(lt_verdict(p), "is not a cuBLASLt configuration")) << lt_verdict(p);
      }
    }
}

TEST(CudaLibs, MatmulArgumentErrorsNeedNoGpu) {
  lt::MatmulProblem p = plain_matmul(8, 8, 8);
  p.a_row = 3;
  p.a_col = 3;
  try {
    lt::matmul(p, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
    FAIL() << "expected std::invalid_argument";
  } catch (const std::invalid_argument& e) {
    EXPECT_TRUE(contains(e.what(), "A strides")) << e.what();
  }
  // Empty: returns without touching CUDA or the library.
  lt::matmul(plain_matmul(0, 8, 8), nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
  lt::MatmulProblem empty = plain_matmul(8, 8, 8);
  empty.batch = 0;
  lt::matmul(empty, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
  const std::string d = lt::describe(p);
  EXPECT_TRUE(contains(d, "m 8, n 8, k 8")) << d;
  EXPECT_TRUE(contains(d, "float32 -> float32")) << d;
}

namespace {

dnn::ConvProblem plain_conv(bool nhwc) {
  ConvCase c;
  c.nhwc = nhwc;
  return conv_problem(c);
}

std::string dnn_verdict(const dnn::ConvProblem& p) {
  std::string why;
  return dnn::supported(p, &why) ? "ok" : why;
}

// Whether the device is the emulated one (tests/cpp/simt/emulated_driver.cpp names itself so).
bool emulated_device() {
  return rc::device_props(rc::current_device()).name.find("emulated") != std::string::npos;
}

// An environment variable set for a scope (unset after, whatever the test's exit).
struct ScopedEnv {
  ScopedEnv(const char* name, const char* value) : name_(name) { setenv(name, value, 1); }
  ~ScopedEnv() { unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

}  // namespace

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
      const std::array<int, 4> dims = dnn::output_dims(p);
      const int64_t oh = dnn::conv_out_size(sh.h, sh.pad_h, sh.dil_h, sh.r, sh.stride_h);
      const int64_t ow = dnn::conv_out_size(sh.w, sh.pad_w, sh.dil_w, sh.s, sh.stride_w);
      // The formula itself, written out once more: (h + 2p - d(r-1) - 1) / s + 1.
      EXPECT_EQ(oh, (sh.h + 2 * sh.pad_h - sh.dil_h * (sh.r - 1) - 1) / sh.stride_h + 1);
      const std::array<int, 4> want = {static_cast<int>(sh.n), static_cast<int>(sh.k), static_cast<int>(oh),
                                       static_cast<int>(ow)};
      EXPECT_EQ(dims, want) << dnn::problem_key(p);
      p.out_h = oh;
      p.out_w = ow;
      p.x_strides = strides_of(p.n, p.c, p.h, p.w, nhwc);
      p.y_strides = strides_of(p.n, p.k, oh, ow, nhwc);
      EXPECT_EQ(dnn_verdict(p), "ok");
    }
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
}

// ---- with a GPU ------------------------------------------------------------------------------------

TEST(CudaLibsGpu, MatmulFloat32Epilogues) {
  FLOW_REQUIRE_GPU();
  FLOW_REQUIRE_LIB(lt::load);
  uint64_t salt = 100;
  for (const bool trans_a : {false, true})
    for (const bool trans_b : {false, true}) {
      MatmulCase c;
      c.trans_a = trans_a;
      c.trans_b = trans_b;
      run_matmul_case(c, ++salt);
    }
  const std::vector<std::function<void(MatmulCase&)>> variants = {
      [](MatmulCase& c) { c.bias = true; },
      [](MatmulCase& c) { c.act = lt::Activation::Relu; },
      [](MatmulCase& c) { c.act = lt::Activation::GeluTanh; },
      [](MatmulCase& c) {
        c.bias = true;
        c.act = lt::Activation::Relu;
      },
      [](MatmulCase& c) {
        c.bias = true;
        c.act = lt::Activation::GeluTanh;
      },
      [](MatmulCase& c) { c.residual = true; },
      [](MatmulCase& c) {
        c.residual = true;
        c.in_place = true;
      },
      [](MatmulCase& c) {
        c.bias = true;
        c.residual = true;
        c.act = lt::Activation::Relu;
      },
      [](MatmulCase& c) {
        c.bias = true;
        c.residual = true;
        c.in_place = true;
        c.act = lt::Activation::GeluTanh;
      },
      [](MatmulCase& c) {
        c.out_pad = 5;
        c.bias = true;
      },
      [](MatmulCase& c) {
        c.a_offset = 1;
        c.trans_b = true;
      },  // A 4 bytes off alignment
      [](MatmulCase& c) {
        c.m = 1;
        c.n = 1;
        c.k = 1;
        c.bias = true;
      },
      [](MatmulCase& c) {
        c.m = 96;
        c.n = 80;
        c.k = 300;
      },  // a longer reduction, still strict FP32
  };
  for (const auto& v : variants) {
    MatmulCase c;
    v(c);
    run_matmul_case(c, ++salt);
  }
}

TEST(CudaLibsGpu, MatmulBatched) {
  FLOW_REQUIRE_GPU();
  FLOW_REQUIRE_LIB(lt::load);
  uint64_t salt = 200;
  for (const bool broadcast_b : {false, true}) {
    MatmulCase c;
    c.batch = 3;
    c.broadcast_b = broadcast_b;
    run_matmul_case(c, ++salt);
    c.bias = true;
    c.residual = true;
    c.act = lt::Activation::Relu;
    c.trans_a = true;
    c.out_pad = 3;
    run_matmul_case(c, ++salt);
  }
}

TEST(CudaLibsGpu, MatmulHalfAndBfloat16) {
  FLOW_REQUIRE_GPU();
  FLOW_REQUIRE_LIB(lt::load);
  uint64_t salt = 300;
  const std::vector<std::pair<DataType, DataType>> types = {{DataType::Float16, DataType::Float16},
                                                            {DataType::Float16, DataType::Float32},
                                                            {DataType::BFloat16, DataType::BFloat16},
                                                            {DataType::BFloat16, DataType::Float32}};
  for (const auto& [in, out] : types) {
    MatmulCase c;
    c.in = in;
    c.out = out;
    c.m = 40;
    c.n = 24;
    c.k = 64;
    run_matmul_case(c, ++salt);
    c.bias = true;
    c.residual = true;
    c.act = lt::Activation::GeluTanh;
    c.trans_b = true;
    run_matmul_case(c, ++salt);
    c.batch = 2;
    c.broadcast_b = true;
    c.act = lt::Activation::Relu;
    c.in_place = true;
    run_matmul_case(c, ++salt);
  }
}

TEST(CudaLibsGpu, MatmulEmptyReduction) {
  FLOW_REQUIRE_GPU();
  FLOW_REQUIRE_LIB(lt::load);
  uint64_t salt = 400;
  MatmulCase c;
  c.k = 0;
  run_matmul_case(c, ++salt);  // zeros over the sentinel
  c.bias = true;
  c.residual = true;
  c.act = lt::Activation::Relu;
  run_matmul_case(c, ++salt);
  c.batch = 2;
  c.in_place = true;
  c.act = lt::Activation::GeluTanh;
  c.in = c.out = DataType::Float16;
  run_matmul_case(c, ++salt);
}

// Runs the epilogue kernel in place on `out` (`count` elements of `t`, encoded), the first element
// at `start` (an element offset), with an encoded `bias` (empty: none).
using EpilogueRunner = std::function<void(DataType t, rc::EpilogueActivation act, const std::vector<uint8_t>& bias,
                                          std::vector<uint8_t>& out, int64_t start, const rc::EpilogueShape& shape)>;

// The epilogue kernel against a reference: every element type, bias per column and per row, relu
// and tanh-GELU, vector and scalar entries (odd widths, padded rows, misaligned starts, batch
// strides), special values (NaN and -0 pass through relu as in torch, inf), and padding between
// rows left untouched. `run` runs it on a device or on the host SIMT emulator.
void check_epilogue_kernel(const EpilogueRunner& run) {
  struct Case {
    int64_t batch, rows, cols, pad;  // pad: extra elements after each row
    bool bias, per_row;
    rc::EpilogueActivation act;
    int64_t offset;  // elements from the buffer's start (misaligns the vector path)
  };
  const std::vector<Case> cases = {
      {1, 37, 64, 0, true, false, rc::EpilogueActivation::None, 0},  // GEMM / NHWC, vectors
      {1, 37, 64, 0, true, false, rc::EpilogueActivation::Relu, 0},
      {3, 5, 48, 0, true, true, rc::EpilogueActivation::Relu, 0},       // NCHW, vectors
      {2, 7, 13, 3, true, false, rc::EpilogueActivation::GeluTanh, 0},  // odd width, padded rows
      {2, 7, 16, 0, false, false, rc::EpilogueActivation::Relu, 1},     // misaligned: scalar entry
      {1, 1, 5, 0, true, false, rc::EpilogueActivation::None, 0},
      {4, 3, 24, 8, false, true, rc::EpilogueActivation::GeluTanh, 0},
  };
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  uint64_t salt = 900;
  for (const DataType t : {DataType::Float32, DataType::Float16, DataType::BFloat16})
    for (const Case& c : cases) {
      const int64_t row_stride = c.cols + c.pad, batch_stride = c.rows * row_stride;
      SCOPED_TRACE(std::string(runtime::data_type_name(t)) + " batch " + std::to_string(c.batch) + " rows " +
                   std::to_string(c.rows) + " cols " + std::to_string(c.cols) + " pad " + std::to_string(c.pad) +
                   (c.bias ? (c.per_row ? " bias/row" : " bias/col") : "") + " act " +
                   std::to_string(static_cast<int>(c.act)) + " offset " + std::to_string(c.offset));
      std::mt19937_64 rng = test::rng(++salt);
      const size_t count = static_cast<size_t>(c.offset + c.batch * batch_stride);
      std::vector<float> host = random_values(count, t, rng, -3.f, 3.f);
      const float specials[] = {nan, -0.0f, inf, -inf, 0.0f};
      for (size_t i = 0; i < 5 && i < host.size(); ++i)
        host[static_cast<size_t>(c.offset) + i * 3 % c.cols] = specials[i];
      const std::vector<float> bias_host = random_values(static_cast<size_t>(c.per_row ? c.rows : c.cols), t, rng);
      std::vector<uint8_t> out = encode(host, t);
      const std::vector<uint8_t> bias = c.bias ? encode(bias_host, t) : std::vector<uint8_t>();
      rc::EpilogueShape shape;
      shape.batch = c.batch;
      shape.rows = c.rows;
      shape.cols = c.cols;
      shape.row_stride = row_stride;
      shape.batch_stride = batch_stride;
      shape.bias_per_row = c.per_row;
      run(t, c.act, bias, out, c.offset, shape);
      const std::vector<float> got = decode(out, t);
      int bad = 0;
      for (size_t i = 0; i < count; ++i) {
        const int64_t e = static_cast<int64_t>(i) - c.offset;
        const int64_t col = e >= 0 ? e % row_stride : -1;
        float want = host[i];
        if (e >= 0 && col < c.cols) {
          const int64_t row = e / row_stride % c.rows;
          double v = host[i];
          if (c.bias) v += bias_host[static_cast<size_t>(c.per_row ? row : col)];
          if (c.act == rc::EpilogueActivation::Relu) v = v < 0 ? 0.0 : v;   // torch: NaN and -0 pass
          if (c.act == rc::EpilogueActivation::GeluTanh) v = gelu_tanh(v);  // torch: -inf gives NaN
          want = quantize(static_cast<float>(v), t);
        }
        const float g = got[i];
        const bool same =
            (std::isnan(want) && std::isnan(g)) || (want == g && std::signbit(want) == std::signbit(g)) ||
            (std::isfinite(want) && std::fabs(g - want) <= rel_tolerance(t) * (std::fabs(want) + 1.0) +
                                                               2e-3 * (c.act == rc::EpilogueActivation::GeluTanh));
        if (!same && ++bad <= 5) ADD_FAILURE() << "element " << i << ": got " << g << ", want " << want;
      }
      EXPECT_EQ(bad, 0);
    }
}

// The epilogue kernel's text run on the host SIMT emulator (tests/cpp/simt), launched exactly as
// apply_bias_activation launches it (plan_epilogue_launch), with a small SM count so the
// grid-stride loop goes round several times.
TEST(CudaLibs, EpilogueKernelRunsOnTheSimtEmulator) {
  std::vector<std::string> entries;
  for (const DataType t : {DataType::Float32, DataType::Float16, DataType::BFloat16})
    for (const bool vector : {false, true}) entries.push_back(rc::epilogue_kernel_name(t, vector));
  const auto module = test::simt::module_for(rc::epilogue_kernel_source(), entries);
  int vector_runs = 0;
  check_epilogue_kernel([&](DataType t, rc::EpilogueActivation act, const std::vector<uint8_t>& bias,
                            std::vector<uint8_t>& out, int64_t offset, const rc::EpilogueShape& shape) {
    // 16-byte aligned copies, as device allocations are (with the test's element offset kept).
    std::vector<uint8_t> out_mem(out.size() + 16), bias_mem(bias.size() + 16);
    auto aligned = [](std::vector<uint8_t>& m) {
      return m.data() + (16 - reinterpret_cast<uintptr_t>(m.data()) % 16) % 16;
    };
    uint8_t* out_data = aligned(out_mem);
    uint8_t* bias_data = bias.empty() ? nullptr : aligned(bias_mem);
    std::memcpy(out_data, out.data(), out.size());
    if (bias_data) std::memcpy(bias_data, bias.data(), bias.size());
    void* start = out_data + offset * runtime::data_type_size(t);
    rc::EpilogueLaunch l = rc::plan_epilogue_launch(t, act, bias_data, start, shape, /*sm_count=*/1);
    if (!l.entry) return;
    vector_runs += std::string(l.entry).find("_v") != std::string::npos;
    const void* bias_arg = bias_data;
    void* params[10] = {&start,   &bias_arg, &l.act,  &l.bias_per_row, &l.narrow,
                        &l.batch, &l.rows,   &l.cols, &l.row_stride,   &l.batch_stride};
    ASSERT_NO_THROW(module->launch(l.entry, {l.blocks}, {l.threads}, params)) << module->source_path();
    std::memcpy(out.data(), out_data, out.size());
  });
  EXPECT_GT(vector_runs, 0);
}

TEST(CudaLibsGpu, EpilogueKernelMatchesAReference) {
  FLOW_REQUIRE_GPU();
  FLOW_REQUIRE_NVRTC();
  check_epilogue_kernel([](DataType t, rc::EpilogueActivation act, const std::vector<uint8_t>& bias_bytes,
                           std::vector<uint8_t>& out_bytes, int64_t offset, const rc::EpilogueShape& shape) {
    auto out = Buffer::allocate(out_bytes.size(), DeviceType::CUDA);
    rc::copy_host_to_device(out->data(), out_bytes.data(), out_bytes.size());
    std::shared_ptr<Buffer> bias;
    if (!bias_bytes.empty()) {
      bias = Buffer::allocate(bias_bytes.size(), DeviceType::CUDA);
      rc::copy_host_to_device(bias->data(), bias_bytes.data(), bias_bytes.size());
    }
    void* start = static_cast<uint8_t*>(out->data()) + offset * runtime::data_type_size(t);
    if (offset == 0 && shape.row_stride == shape.cols && shape.cols % 8 == 0) {
      EXPECT_GT(rc::epilogue_vector_width(t, bias ? bias->data() : nullptr, start, shape), 1);
    }
    rc::apply_bias_activation(t, act, bias ? bias->data() : nullptr, start, shape, rc::current_stream());
    rc::copy_device_to_host(out_bytes.data(), out->data(), out_bytes.size());
  });
}

// The fallback for an epilogue cuBLASLt has no algorithm for, forced on every problem: product
// with the default epilogue (residual still as C), then bias and activation by the NVRTC kernel.
TEST(CudaLibsGpu, MatmulSplitEpilogue) {
  FLOW_REQUIRE_GPU();
  FLOW_REQUIRE_LIB(lt::load);
  struct Restore {
    ~Restore() { lt::force_split_epilogue(false); }
  } restore;
  lt::force_split_epilogue(true);
  const int64_t before = lt::split_epilogue_runs();
  uint64_t salt = 450;
  int64_t with_epilogue = 0;
  auto run = [&](const MatmulCase& c) {
    run_matmul_case(c, ++salt);
    if (c.bias || c.act != lt::Activation::None) ++with_epilogue;
  };
  MatmulCase plain;  // no epilogue: nothing to split
  run(plain);
  const std::vector<std::pair<DataType, DataType>> types = {{DataType::Float32, DataType::Float32},
                                                            {DataType::Float16, DataType::Float16},
                                                            {DataType::BFloat16, DataType::BFloat16},
                                                            {DataType::Float16, DataType::Float32},
                                                            {DataType::BFloat16, DataType::Float32}};
  for (const auto& [in, out] : types) {
    MatmulCase c;
    c.in = in;
    c.out = out;
    c.m = 40;
    c.n = 24;
    c.k = 64;
    c.bias = true;
    run(c);
    c.act = lt::Activation::GeluTanh;
    c.trans_b = true;
    run(c);
    c.bias = false;
    c.act = lt::Activation::Relu;
    c.residual = true;
    c.out_pad = 3;
    run(c);
    c.batch = 3;
    c.broadcast_b = true;
    c.bias = true;
    c.in_place = true;
    c.act = lt::Activation::GeluTanh;
    run(c);
  }
  MatmulCase tiny;
  tiny.m = tiny.n = tiny.k = 1;
  tiny.bias = true;
  tiny.act = lt::Activation::Relu;
  run(tiny);
  MatmulCase empty;  // k == 0 goes through the same path
  empty.k = 0;
  empty.bias = true;
  empty.residual = true;
  empty.act = lt::Activation::Relu;
  run(empty);
  EXPECT_EQ(lt::split_epilogue_runs() - before, with_epilogue);
}

TEST(CudaLibsGpu, MatmulEmptyOutputTouchesNothing) {
  FLOW_REQUIRE_GPU();
  FLOW_REQUIRE_LIB(lt::load);
  auto out = Buffer::allocate(64, DeviceType::CUDA);
  rc::memset_device(out->data(), 0x7F, 64);
  lt::MatmulProblem p = plain_matmul(0, 4, 4);
  lt::matmul(p, out->data(), out->data(), nullptr, nullptr, out->data(), rc::current_stream());
  std::vector<uint8_t> host(64);
  rc::copy_device_to_host(host.data(), out->data(), host.size());
  for (const uint8_t b : host) EXPECT_EQ(b, 0x7F);
}

TEST(CudaLibsGpu, ConvFloat32) {
  FLOW_REQUIRE_GPU();
  FLOW_REQUIRE_LIB(dnn::load);
  uint64_t salt = 500;
  const std::vector<std::function<void(ConvCase&)>> variants = {
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
  const std::vector<std::function<void(ConvCase&)>> variants = {
      [](ConvCase&) {},
      [](ConvCase& c) {
        c.bias = true;
        c.relu = true;
      },
      [](ConvCase& c) {
        c.bias = true;
        c.residual = true;
        c.relu = true;
      },
      [](ConvCase& c) {
        c.residual = true;
        c.z_is_y = true;
      },
  };
  for (const bool nhwc : {false, true})
    for (const auto search : {dnn::Search::Heuristic, dnn::Search::Exhaustive})
      for (const auto& v : variants) {
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
