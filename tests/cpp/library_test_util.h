// Helpers shared by the tests of library calls and of the layout passes around them
// (test_library_ops.cpp, test_channels_last.cpp): random and permuted tensors, element access in
// logical order, and `check`, which compiles a graph and compares every output with the reference
// interpreter in float64.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "dsl/graph_interpreter.h"
#include "jit/compile.h"
#include "runtime/onednn.h"

namespace flow::libtest {

using dsl::DType;
using dsl::Shape;

inline jit::Tensor random_tensor(const Shape& shape, std::mt19937_64& rng, DType dt = DType::Float32) {
  jit::Tensor t = jit::Tensor::empty(shape, dt);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  for (int64_t i = 0; i < t.numel(); ++i) {
    if (dt == DType::Float64) {
      static_cast<double*>(t.data())[i] = dist(rng);
    } else {
      static_cast<float*>(t.data())[i] = static_cast<float>(dist(rng));
    }
  }
  return t;
}

// A logical tensor of `shape` stored permuted: storage has dims in `perm` order (a non-contiguous view).
inline jit::Tensor permuted_tensor(const Shape& shape, const std::vector<size_t>& perm, std::mt19937_64& rng) {
  Shape storage_shape;
  for (size_t p : perm) storage_shape.push_back(shape[p]);
  jit::Tensor base = random_tensor(storage_shape, rng);
  jit::Tensor t = base;
  t.sizes = shape;
  t.strides.assign(shape.size(), 0);
  for (size_t k = 0; k < perm.size(); ++k) t.strides[perm[k]] = base.strides[k];
  return t;
}

inline double get(const jit::Tensor& t, int64_t flat) {
  int64_t off = 0;
  for (size_t d = t.sizes.size(); d-- > 0;) {
    off += (flat % t.sizes[d]) * t.strides[d];
    flat /= t.sizes[d];
  }
  if (t.dtype == DType::Int64) return static_cast<double>(static_cast<const int64_t*>(t.data())[off]);
  return t.dtype == DType::Float64 ? static_cast<const double*>(t.data())[off]
                                   : static_cast<const float*>(t.data())[off];
}

inline dsl::HostTensor host_of(const jit::Tensor& t) {
  dsl::HostTensor h{{t.sizes, t.dtype}, {}};
  for (int64_t i = 0; i < t.numel(); ++i) h.data.push_back(get(t, i));
  return h;
}

inline std::vector<std::vector<int64_t>> strides_of(const std::vector<jit::Tensor>& ts) {
  std::vector<std::vector<int64_t>> s;
  for (const auto& t : ts) s.push_back(t.strides);
  return s;
}

// Compiles and runs `g`, compares every output with the reference interpreter (float64 math).
inline std::shared_ptr<jit::Executable> check(const dsl::Graph& g, const std::vector<jit::Tensor>& inputs,
                                              const std::string& what, double tol = 1e-4,
                                              const jit::CompileOptions& opt = {},
                                              std::shared_ptr<jit::Executable> exe = nullptr) {
  if (!exe) exe = jit::compile(g, strides_of(inputs), opt);
  const auto outs = exe->run(inputs);
  std::vector<dsl::HostTensor> hin;
  for (const auto& t : inputs) hin.push_back(host_of(t));
  const auto ref = dsl::interpret_graph(g, hin, /*float64_math=*/true);
  EXPECT_EQ(outs.size(), ref.size());
  for (size_t o = 0; o < outs.size() && o < ref.size(); ++o) {
    EXPECT_EQ(outs[o].sizes, ref[o].type.shape) << what;
    if (outs[o].sizes != ref[o].type.shape) continue;
    double worst = 0;
    int64_t at = -1;
    for (int64_t i = 0; i < outs[o].numel(); ++i) {
      const double r = ref[o].data[static_cast<size_t>(i)];
      const double err = std::fabs(get(outs[o], i) - r) / (1.0 + std::fabs(r));
      if (!(err <= worst)) {
        worst = err;
        at = i;
      }
    }
    EXPECT_LE(worst, tol) << what << ": output " << o << " element " << at << " got "
                          << (at >= 0 ? get(outs[o], at) : 0) << " want " << (at >= 0 ? ref[o].data[at] : 0) << "\n"
                          << exe->explain(false);
  }
  return exe;
}

inline jit::Tensor int64_tensor(const std::vector<int64_t>& values) {
  jit::Tensor t = jit::Tensor::empty({static_cast<int64_t>(values.size())}, DType::Int64);
  std::copy(values.begin(), values.end(), static_cast<int64_t*>(t.data()));
  return t;
}

}  // namespace flow::libtest

// Tests that execute float32 library ops need oneDNN; those with generated kernels need LLVM.
#ifdef FLOW_HAS_LLVM
#define REQUIRE_BACKENDS() \
  if (!runtime::onednn::available()) GTEST_SKIP() << "built without oneDNN"
#else
#define REQUIRE_BACKENDS() GTEST_SKIP() << "built without LLVM"
#endif
