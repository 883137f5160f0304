// Every point of the CUDA autotuning search space (autotune/search_space.h) is a correct kernel.
// The tuner times candidates on the device and keeps the fastest without comparing their outputs,
// so a schedule that is wrong for some block size or vector width would silently become a tuned
// model's kernel. Here each valid candidate of a pointwise or reduction kernel is interpreted and
// compared with the heuristic schedule's result, and its printed CUDA C++ runs on the host SIMT
// emulator against the interpreter (tests/cpp/simt).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "autotune/search_space.h"
#include "cuda_test_util.h"
#include "dsl/graph.h"
#include "dsl/graph_interpreter.h"
#include "dsl/interpreter.h"
#include "jit/layouts.h"
#include "jit/tensor.h"
#include "scheduler/fusion.h"
#include "scheduler/kernel_instance.h"
#include "scheduler/scheduler.h"
#include "simt/cuda_kernel_check.h"
#include "test_util.h"

namespace flow {
namespace {

using dsl::DType;
using dsl::Shape;

jit::Tensor random_tensor(const Shape& s, DType t, std::mt19937_64& rng) {
  jit::Tensor x = jit::Tensor::empty(s, t);
  const std::vector<unsigned char> bytes = test::random_bytes(t, x.numel(), rng, /*specials=*/false);
  if (x.numel() > 0) std::memcpy(x.data(), bytes.data(), static_cast<size_t>(x.numel() * dsl::dtype_size(t)));
  return x;
}

double element(const jit::Tensor& t, int64_t i) {
  const dsl::Scalar v = dsl::read_element(t.dtype, t.data(), i);
  return dsl::is_floating(t.dtype) ? v.f : static_cast<double>(v.i);
}

std::vector<double> values_of(const jit::Tensor& t) {
  std::vector<double> v;
  for (int64_t e = 0; e < t.numel(); ++e) v.push_back(element(t, e));
  return v;
}

// Schedules each group of `g` (contiguous inputs) for CUDA under every valid point of its search
// space; returns the number of candidates checked.
int check_search_space(const dsl::Graph& g, const std::vector<jit::Tensor>& ins, const std::string& what) {
  const dsl::Graph mg = jit::materialize_unviewable(g, {});
  const sched::FusionPlan plan = sched::fuse(mg);
  const jit::ValueLayouts lay = jit::compute_layouts(mg, {});
  sched::GroupLayouts gl;
  for (size_t v = 0; v < mg.values().size(); ++v) gl[static_cast<int>(v)] = lay.layout[v].strides;
  std::vector<jit::Tensor> slots(mg.values().size());
  for (size_t i = 0; i < ins.size(); ++i) slots[mg.inputs()[i]] = ins[i];
  auto bind = [&](const std::vector<jit::Tensor>& s, int v) { return test::bind_view(s, lay, v); };
  int checked = 0;
  for (const auto& grp : plan.groups) {
    if (grp.kind == sched::GroupKind::Library) {
      ADD_FAILURE() << what << ": a library group";
      return checked;
    }
    const sched::KernelInstance ki = sched::specialize(mg, grp, gl, true);
    const sched::Scheduler& s = sched::scheduler_for(ki, dsl::Target::CUDA);
    const sched::Params start = s.heuristics(ki, dsl::Target::CUDA);
    // Runs the schedule under `p` with the group's outputs in `out` (fresh tensors).
    auto run = [&](const sched::Params& p, std::vector<jit::Tensor>& out, bool emulate) {
      for (int v : grp.outputs) {
        EXPECT_FALSE(lay.is_view[v]) << what;
        out[v] = jit::Tensor::empty(mg.value(v).type.shape, mg.value(v).type.dtype);
      }
      const sched::ScheduledKernel sk = s.schedule(ki, p, dsl::Target::CUDA);
      const test::KernelCall call = test::kernel_call(sk.args, [&](int v) { return bind(out, v); });
      dsl::interpret(sk.func, call.args);
      if (emulate)
        test::expect_cuda_text_matches_interpreter(sk.func, call.args, call.spans,
                                                   what + ", " + sched::params_to_json(p));
    };
    run(start, slots, true);  // the heuristic: what later groups read
    const autotune::SearchSpace space = autotune::search_space(ki, start, dsl::Target::CUDA);
    for (size_t i = 0; i < space.size(); ++i) {
      const sched::Params p = space.at(space.unflatten(i));
      if (!space.is_valid(p) || sched::params_to_json(p) == sched::params_to_json(start)) continue;
      std::vector<jit::Tensor> cand = slots;
      run(p, cand, true);
      ++checked;
      for (int v : grp.outputs) {
        const double typical = test::median_magnitude(values_of(slots[v]));
        int bad = 0;
        for (int64_t e = 0; e < slots[v].numel(); ++e) {
          const double want = element(slots[v], e), got = element(cand[v], e);
          if (!(got == want || std::fabs(got - want) <= test::result_tolerance(slots[v].dtype, want, typical)) &&
              ++bad <= 3)
            ADD_FAILURE() << what << ", " << sched::params_to_json(p) << ": element " << e << " is " << got
                          << ", the heuristic schedule gives " << want;
        }
      }
    }
  }
  // The heuristic schedules against the graph interpreter.
  std::vector<dsl::HostTensor> host;
  for (const auto& t : ins) {
    dsl::HostTensor h{{t.sizes, t.dtype}, {}};
    for (int64_t e = 0; e < t.numel(); ++e) h.data.push_back(element(t, e));
    host.push_back(h);
  }
  const auto ref = dsl::interpret_graph(g, host);
  for (size_t o = 0; o < ref.size(); ++o) {
    const jit::Tensor out = bind(slots, mg.outputs()[o]);
    EXPECT_TRUE(out.is_contiguous()) << what;
    const double typical = test::median_magnitude(ref[o].data);
    int bad = 0;
    for (int64_t e = 0; e < out.numel(); ++e) {
      const double want = ref[o].data[static_cast<size_t>(e)];
      if (!(element(out, e) == want ||
            std::fabs(element(out, e) - want) <= test::result_tolerance(out.dtype, want, typical)) &&
          ++bad <= 3)
        ADD_FAILURE() << what << " output " << o << " element " << e << ": " << element(out, e) << ", want " << want;
    }
  }
  return checked;
}

TEST(CudaSearchSpace, EveryPointwiseCandidateIsCorrect) {
  FLOW_REQUIRE_NVRTC();
  auto rng = test::rng(91);
  {  // float32 with a broadcast row and column, odd sizes (vector tails)
    dsl::Graph g;
    const int a = g.add_input({{67, 257}, DType::Float32});
    const int b = g.add_input({{257}, DType::Float32});
    const int c = g.add_input({{67, 1}, DType::Float32});
    g.mark_output(g.add("mul", {g.add("gelu", {g.add("add", {a, b})}), c}));
    const int n =
        check_search_space(g,
                           {random_tensor({67, 257}, DType::Float32, rng), random_tensor({257}, DType::Float32, rng),
                            random_tensor({67, 1}, DType::Float32, rng)},
                           "broadcast gelu float32");
    EXPECT_GT(n, 20);
  }
  for (const DType t : {DType::Float16, DType::BFloat16}) {  // half storage: vectors of up to 8
    dsl::Graph g;
    const int x = g.add_input({{128, 96}, t});
    const int y = g.add_input({{128, 96}, t});
    g.mark_output(g.add("add", {g.add("exp", {x}), g.add("tanh", {y})}));
    EXPECT_GT(check_search_space(g, {random_tensor({128, 96}, t, rng), random_tensor({128, 96}, t, rng)},
                                 std::string("exp + tanh ") + dsl::dtype_name(t)),
              20);
  }
  {  // a transposed read (dynamic strides)
    dsl::Graph g;
    const int x = g.add_input({{96, 130}, DType::Float32});
    const int y = g.add_input({{130, 96}, DType::Float32});
    g.mark_output(g.add("relu", {g.add("add", {g.add("permute", {x}, {{"dims", std::vector<int64_t>{1, 0}}}), y})}));
    EXPECT_GT(check_search_space(
                  g, {random_tensor({96, 130}, DType::Float32, rng), random_tensor({130, 96}, DType::Float32, rng)},
                  "transposed add"),
              20);
  }
}

TEST(CudaSearchSpace, EveryReductionCandidateIsCorrect) {
  FLOW_REQUIRE_NVRTC();
  auto rng = test::rng(92);
  {
    dsl::Graph g;
    g.mark_output(g.add("softmax", {g.add_input({{37, 1000}, DType::Float32})}, {{"dim", int64_t{-1}}}));
    EXPECT_GT(check_search_space(g, {random_tensor({37, 1000}, DType::Float32, rng)}, "softmax"), 3);
  }
  {
    dsl::Graph g;
    const int x = g.add_input({{16, 768}, DType::Float16});
    const int w = g.add_input({{768}, DType::Float16});
    g.mark_output(g.add("layer_norm", {x, w}, {{"normalized_shape", Shape{768}}, {"eps", 1e-5}}));
    EXPECT_GT(check_search_space(
                  g, {random_tensor({16, 768}, DType::Float16, rng), random_tensor({768}, DType::Float16, rng)},
                  "layer_norm float16"),
              3);
  }
  {  // the reduced dim outermost
    dsl::Graph g;
    g.mark_output(g.add("sum", {g.add_input({{513, 70}, DType::Float32})},
                        {{"dims", std::vector<int64_t>{0}}, {"keepdim", false}}));
    EXPECT_GT(check_search_space(g, {random_tensor({513, 70}, DType::Float32, rng)}, "column sum"), 3);
  }
  {
    dsl::Graph g;
    g.mark_output(g.add("sum", {g.add_input({{20, 300}, DType::Int64})},
                        {{"dims", std::vector<int64_t>{1}}, {"keepdim", false}}));
    EXPECT_GT(check_search_space(g, {random_tensor({20, 300}, DType::Int64, rng)}, "int64 sum"), 3);
  }
}

}  // namespace
}  // namespace flow
