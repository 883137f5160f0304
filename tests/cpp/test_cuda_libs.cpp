// The GPU library layer's matrix products: cuBLASLt (runtime/cublaslt.h) and the epilogue kernel it
// shares with cuDNN (runtime/epilogue_kernel.h); cuDNN's convolutions are test_cudnn.cpp's. Without
// a GPU: every resolved entry point exists in the installed library, supported() accepts and
// rejects with named reasons, the epilogue kernel compiles for every arch and runs on the SIMT
// emulator. With a GPU (the tests skip with "no CUDA device" otherwise; ctest also runs them on the
// emulated device): products against plain CPU loops in double, for float32 (strict FP32: the
// tolerances are below what TF32 would give), float16 and bfloat16, with every epilogue and both
// operand orientations. Outputs start poisoned (NaN or a sentinel), so unwritten or over-written
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

#include "cuda_libs_test_util.h"
#include "cuda_test_util.h"
#include "runtime/buffer.h"
#include "runtime/cublaslt.h"
#include "runtime/cuda_copy.h"
#include "runtime/cuda_driver.h"
#include "runtime/cuda_stream.h"
#include "runtime/data_type.h"
#include "runtime/dynlib.h"
#include "runtime/epilogue_kernel.h"
#include "runtime/nvrtc.h"
#include "simt/simt_emulator.h"
#include "test_util.h"

using namespace flow;
using namespace flow::test;
namespace rc = flow::runtime::cuda;
namespace lt = flow::runtime::cuda::cublaslt;
using runtime::Buffer;
using runtime::CudaLib;
using runtime::DataType;
using runtime::DeviceType;

namespace {

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
