// Note: eager execution is the same pipeline with a one-op graph. Each call builds the op's graph
// over the argument types, specializes it to the arguments' layouts, and fetches the kernel by the
// hash of its loop nest, so the first call with a new *signature* (op, dtypes, rank after
// coalescing, stride classes, attributes) compiles and every later call of any size reuses it.
// Scalars are kernel parameters here (not inlined), so `x * 2` and `x * 3` share one kernel.
#pragma once
#include <string>
#include <variant>
#include <vector>

#include "dsl/graph.h"
#include "jit/tensor.h"

namespace flow::jit {

// A Python scalar argument: its value and whether it is a bool, int or float.
struct ScalarArg {
  double value = 0;
  dsl::DType dtype = dsl::DType::Float64;  // Bool, Int64 or Float64: the Python type
};
using EagerArg = std::variant<Tensor, ScalarArg>;

// Runs `op` on the arguments; throws dsl::OpError for bad input.
std::vector<Tensor> eager_op(const std::string& op, const std::vector<EagerArg>& args, const dsl::Attrs& attrs);

// Runs a view op (reshape, permute, expand, slice, select, as_strided): a zero-copy alias of
// `src`, except a reshape/view of a layout strides cannot express, which copies first (torch's
// reshape; `view` raises torch's error instead).
Tensor eager_view(const std::string& op, const Tensor& src, const dsl::Attrs& attrs);

// Copies `src` into a new contiguous tensor of dtype `dtype` (a generated cast kernel).
Tensor eager_contiguous(const Tensor& src, dsl::DType dtype);

// Counts of kernel launches by eager mode and by executables (for tests of kernel counts).
struct LaunchCounters {
  uint64_t kernel_launches = 0;
};
LaunchCounters launch_counters();
void reset_launch_counters();

}  // namespace flow::jit
