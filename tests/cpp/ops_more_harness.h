// Test harness for tests/cpp/test_ops_more.cpp: runs a graph through the graph interpreter, the jit
// (LLVM, when built) and every group's GPU schedule (run by the loop interpreter and compiled by
// NVRTC), and compares each with the interpreter. Tensors of float32/float64/int32/int64/bool.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "dsl/graph_interpreter.h"
#include "dsl/interpreter.h"
#include "jit/compile.h"
#include "jit/cuda/cuda_compile.h"
#include "jit/cuda_launch.h"
#include "jit/layouts.h"
#include "runtime/buffer.h"
#include "runtime/cuda_copy.h"
#include "runtime/cuda_driver.h"
#include "scheduler/fusion.h"
#include "scheduler/scheduler.h"
#include "simt/cuda_kernel_check.h"

namespace flow::test {

using dsl::DType;

inline double read_elem(const jit::Tensor& t, int64_t off) {
  const char* p = static_cast<const char*>(t.storage ? t.data() : nullptr);
  switch (t.dtype) {
    case DType::Float32: {
      float v;
      std::memcpy(&v, p + off * 4, 4);
      return v;
    }
    case DType::Float64: {
      double v;
      std::memcpy(&v, p + off * 8, 8);
      return v;
    }
    case DType::Int32: {
      int32_t v;
      std::memcpy(&v, p + off * 4, 4);
      return v;
    }
    case DType::Int64: {
      int64_t v;
      std::memcpy(&v, p + off * 8, 8);
      return static_cast<double>(v);
    }
    case DType::Bool:
      return p[off] != 0 ? 1.0 : 0.0;
    default:
      ADD_FAILURE() << "unsupported test dtype";
      return 0;
  }
}

inline jit::Tensor to_tensor(const dsl::HostTensor& h) {
  jit::Tensor t = jit::Tensor::empty(h.type.shape, h.type.dtype);
  char* p = static_cast<char*>(t.data());
  for (size_t i = 0; i < h.data.size(); ++i) {
    const double v = h.data[i];
    switch (h.type.dtype) {
      case DType::Float32: {
        const float f = static_cast<float>(v);
        std::memcpy(p + i * 4, &f, 4);
        break;
      }
      case DType::Float64:
        std::memcpy(p + i * 8, &v, 8);
        break;
      case DType::Int32: {
        const auto x = static_cast<int32_t>(v);
        std::memcpy(p + i * 4, &x, 4);
        break;
      }
      case DType::Int64: {
        const auto x = static_cast<int64_t>(v);
        std::memcpy(p + i * 8, &x, 8);
        break;
      }
      case DType::Bool:
        p[i] = v != 0;
        break;
      default:
        ADD_FAILURE() << "unsupported test dtype";
    }
  }
  return t;
}

// Logical (row-major) values of a possibly strided tensor.
inline std::vector<double> values_of(const jit::Tensor& t) {
  std::vector<double> out(static_cast<size_t>(t.numel()));
  std::vector<int64_t> idx(t.sizes.size(), 0);
  for (size_t k = 0; k < out.size(); ++k) {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * t.strides[d];
    out[k] = read_elem(t, off);
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < t.sizes[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

inline bool near(double got, double want, double tol) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= tol * (1 + std::fabs(want));
}

inline void expect_values(const std::vector<double>& got, const dsl::HostTensor& want, double tol,
                          const std::string& what) {
  ASSERT_EQ(got.size(), want.data.size()) << what;
  const bool exact = !dsl::is_floating(want.type.dtype);
  for (size_t i = 0; i < got.size(); ++i) {
    if (exact) {
      ASSERT_EQ(got[i], want.data[i]) << what << " element " << i;
    } else {
      ASSERT_TRUE(near(got[i], want.data[i], tol))
          << what << " element " << i << ": got " << got[i] << ", want " << want.data[i];
    }
  }
}

// The number of generated kernels the fusion plan makes (views are free).
inline int planned_kernels(const dsl::Graph& g) {
  return static_cast<int>(sched::fuse(g).groups.size());
}

// Runs g through the jit and the GPU schedules and compares with the graph interpreter. Returns the
// interpreter's outputs.
inline std::vector<dsl::HostTensor> check_graph(const dsl::Graph& g, const std::vector<dsl::HostTensor>& inputs,
                                                double tol = 1e-5, int expected_kernels = -1) {
  const auto ref = dsl::interpret_graph(g, inputs);
  std::vector<jit::Tensor> ins;
  for (const auto& h : inputs) ins.push_back(to_tensor(h));
  if (expected_kernels >= 0) {
    EXPECT_EQ(planned_kernels(g), expected_kernels) << sched::fuse(g).to_string(g);
  }
#ifdef FLOW_HAS_LLVM
  {
    auto exe = jit::compile(g, {}, {});
    const auto outs = exe->run(ins);
    EXPECT_EQ(outs.size(), ref.size());
    for (size_t o = 0; o < outs.size() && o < ref.size(); ++o) {
      expect_values(values_of(outs[o]), ref[o], tol, "llvm output " + std::to_string(o));
    }
  }
#endif
  // GPU schedules, interpreted (and compiled by NVRTC).
  const dsl::Graph mg = jit::materialize_unviewable(g, {});
  const auto plan = sched::fuse(mg);
  const auto lay = jit::compute_layouts(mg, {});
  sched::GroupLayouts gl;
  for (size_t v = 0; v < mg.values().size(); ++v) gl[static_cast<int>(v)] = lay.layout[v].strides;
  std::vector<jit::Tensor> slots(mg.values().size());
  for (size_t i = 0; i < ins.size(); ++i) slots[mg.inputs()[i]] = ins[i];
  auto bind = [&](int v) { return test::bind_view(slots, lay, v); };
  for (const auto& grp : plan.groups) {
    const auto ki = sched::specialize(mg, grp, gl, true);
    for (int v : grp.outputs) slots[v] = jit::Tensor::empty(mg.value(v).type.shape, mg.value(v).type.dtype);
    const auto& s = sched::scheduler_for(ki, dsl::Target::CUDA);
    const auto sk = s.schedule(ki, s.heuristics(ki, dsl::Target::CUDA), dsl::Target::CUDA);
    const test::KernelCall call = test::kernel_call(sk.args, bind);
    const std::vector<dsl::ArgValue>& av = call.args;
    const std::vector<test::BufferSpan>& spans = call.spans;
    if (ki.rows() > 0) {
      dsl::interpret(sk.func, av);
      test::expect_cuda_text_matches_interpreter(sk.func, av, spans);
    }
    EXPECT_NO_THROW(jit::cuda::cuda_compile(sk.func, "sm_90")) << sk.func.name;
  }
  for (size_t o = 0; o < ref.size(); ++o) {
    expect_values(values_of(bind(mg.outputs()[o])), ref[o], tol, "gpu output " + std::to_string(o));
  }
  if (runtime::cuda::cuda_available()) {
    // The same kernels on the device (NVRTC for its architecture), outputs copied back.
    static int launches = 0;
    if (launches == 0) std::printf("[flow] also running the kernels on the CUDA device\n");
    auto bytes_of = [](const jit::Tensor& t) {
      return static_cast<size_t>(t.numel()) * static_cast<size_t>(dsl::dtype_size(t.dtype));
    };
    std::vector<jit::Tensor> dev(mg.values().size());
    for (size_t i = 0; i < ins.size(); ++i) {
      jit::Tensor d = ins[i];
      d.storage = runtime::Buffer::allocate(std::max<size_t>(bytes_of(ins[i]), 1), runtime::DeviceType::CUDA);
      if (bytes_of(ins[i])) runtime::cuda::copy_host_to_device(d.storage->data(), ins[i].data(), bytes_of(ins[i]));
      dev[mg.inputs()[i]] = d;
    }
    auto dbind = [&](int v) { return test::bind_view(dev, lay, v); };
    for (const auto& grp : plan.groups) {
      const auto ki = sched::specialize(mg, grp, gl, true);
      for (int v : grp.outputs) {
        jit::Tensor d;
        d.sizes = mg.value(v).type.shape;
        d.strides = jit::contiguous_strides_of(d.sizes);
        d.dtype = mg.value(v).type.dtype;
        d.storage = runtime::Buffer::allocate(std::max<size_t>(bytes_of(d), 1), runtime::DeviceType::CUDA);
        dev[v] = d;
      }
      if (ki.rows() == 0) continue;
      const auto& s = sched::scheduler_for(ki, dsl::Target::CUDA);
      const auto sk = s.schedule(ki, s.heuristics(ki, dsl::Target::CUDA), dsl::Target::CUDA);
      std::vector<jit::Tensor> views(mg.values().size());
      std::vector<const jit::Tensor*> values(mg.values().size(), nullptr);
      for (const auto& a : sk.args) {
        if (a.kind != sched::KernelArg::Kind::Buffer) continue;
        views[a.value] = dbind(a.value);
        values[a.value] = &views[a.value];
      }
      jit::launch_cuda_func(sk.func, "ops_more#" + std::to_string(launches++), "", sk.args, values);
    }
    runtime::cuda::synchronize_device();
    for (size_t o = 0; o < ref.size(); ++o) {
      const int v = mg.outputs()[o];
      const int root = lay.is_view[v] ? lay.root[v] : v;
      jit::Tensor h = jit::Tensor::empty(mg.value(root).type.shape, mg.value(root).type.dtype);
      if (bytes_of(h)) runtime::cuda::copy_device_to_host(h.data(), dev[root].data(), bytes_of(h));
      if (lay.is_view[v]) {
        h.sizes = lay.layout[v].sizes;
        h.strides = lay.layout[v].strides;
        h.offset += lay.layout[v].offset;
      }
      expect_values(values_of(h), ref[o], tol, "device output " + std::to_string(o));
    }
  }
  return ref;
}

// Random data of dtype t in [lo, hi] (integers: uniform integers), with `specials` mixed in.
inline std::vector<double> random_values(std::mt19937_64& rng, const dsl::Shape& s, DType t, double lo, double hi,
                                         const std::vector<double>& specials = {}) {
  std::vector<double> d(static_cast<size_t>(dsl::numel(s)));
  std::uniform_real_distribution<double> real(lo, hi);
  std::uniform_int_distribution<int64_t> integer(static_cast<int64_t>(lo), static_cast<int64_t>(hi));
  std::uniform_int_distribution<size_t> pick(0, specials.empty() ? 0 : specials.size() - 1);
  std::uniform_int_distribution<int> coin(0, 4);
  for (double& x : d) {
    if (t == DType::Bool) {
      x = static_cast<double>(rng() & 1);
    } else if (!specials.empty() && coin(rng) == 0) {
      x = specials[pick(rng)];
    } else {
      x = dsl::round_to_dtype(t, dsl::is_floating(t) ? real(rng) : static_cast<double>(integer(rng)));
    }
  }
  return d;
}

}  // namespace flow::test
