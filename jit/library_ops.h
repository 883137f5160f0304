// Note: the executor side of library groups (conv2d, conv_transpose2d, matmul, linear with their
// fused epilogues). A Library group has no generated kernel: compile() records a LibraryStep
// (which op, its attrs, operands, output and epilogue post-ops) and Executable::run() calls
// run_library_group with the bound tensors, which calls oneDNN through runtime/onednn.h on the
// CPU, and cuDNN/cuBLASLt through jit/cuda_library_ops.h for tensors on a GPU.
//
// Operand layouts: a strided operand is passed to oneDNN with its strides where oneDNN takes them
// (matmul/linear operands whose last two dims have a unit stride in one of them; conv input
// NCHW- or NHWC-dense; conv weights, biases and binary post-op operands in any positive strides;
// an expanded (stride 0) batch or broadcast dim becomes a size-1 dim, which oneDNN broadcasts).
// Anything else is first copied to a contiguous tensor (jit::eager_contiguous).
//
// float64 library ops run the reference loops of dsl/library_reference.h (oneDNN has no f64
// matmul/conv on the CPU); the fuser gives them no epilogue (post-ops are float32 only).
#pragma once
#include <deque>
#include <string>
#include <vector>

#include "dsl/graph.h"
#include "dsl/stmt.h"
#include "jit/tensor.h"
#include "runtime/data_type.h"
#include "runtime/fixed_kernel.h"
#include "runtime/onednn.h"
#include "scheduler/fusion.h"

namespace flow::jit {

struct LibraryStep {
  int group = -1;  // index into the plan's groups
  int node = -1;   // the library node
  std::string op;
  dsl::Attrs attrs;
  std::vector<int> operands;  // the library node's inputs
  int output = -1;            // the value written: the last node of the epilogue chain
  std::vector<sched::EpilogueStep> epilogue;
  std::string library;  // "oneDNN", "cuDNN", "cuBLASLt", "flow sort" or "reference" (float64)
  // Whether the library offers implementations to choose between (the autotuner times them); not
  // the float64 reference loops nor flow's own implementations.
  bool has_choices = true;
  // The library implementation to use ("" = the library's own first choice); set from tuning
  // records or by the autotuner (runtime/onednn.h, ImplInfo).
  std::string impl;
  std::string impl_origin = "library default";  // or "record", "tuned"
  std::string workload;                         // library_workload_key (set by compile)
  // The weights operand is frozen (scheduler/frozen.h): where the library reorders weights (blocked
  // convolutions), the reordered copy is cached, keyed by the storage's uid and version
  // (runtime/onednn.h, TensorArg::content_id).
  bool weights_frozen = false;
  // CUDA convolutions without a recorded implementation: time every cuDNN algorithm on the first
  // call (CompileOptions::conv_search == "exhaustive") instead of taking cuDNN's heuristic choice.
  bool exhaustive_search = false;
  // "conv2d (oneDNN) + post-ops [add, relu]"
  std::string describe() const;
};

// Builds the step of Library group `grp` (index `group_index`) for `target`. Throws
// dsl::OpError(NotImplemented) when the target has no library for the op or oneDNN is missing.
LibraryStep make_library_step(const dsl::Graph& g, const sched::FusionGroup& grp, int group_index, dsl::Target target);

// Runs one library step: reads operands from `values` (indexed by graph value id; views already
// bound) and writes values[step.output], a contiguous tensor of the output's shape and dtype.
// `info` (optional) receives the implementation that ran and those the library offered (empty for
// the float64 reference loops and calls that need no library call, such as K = 0).
void run_library_group(const dsl::Graph& g, const LibraryStep& step, const std::vector<const Tensor*>& values,
                       runtime::onednn::ImplInfo* info = nullptr);

// How float16/bfloat16 library steps run on the CPU. Auto: oneDNN's half primitives where the CPU
// has AMX (runtime/onednn.h, half_primitives_preferred), else the operands widened to float32 in
// their own layouts (frozen weights once), one float32 call and one rounding of the result; Native:
// oneDNN's half primitives wherever oneDNN has them; Float32: always the float32 route. A primitive
// oneDNN refuses takes the float32 route either way. FLOW_ONEDNN_HALF=1 starts the process in
// Native, =0 in Float32.
enum class CpuHalfPolicy { Auto, Native, Float32 };
void set_cpu_half_policy(CpuHalfPolicy policy);
CpuHalfPolicy cpu_half_policy();

// Tensors made for one library call (contiguous copies, permuted filters), kept alive until it
// returns (on a GPU, until it is enqueued: the caching allocator orders any reuse on the stream).
class HeldTensors {
 public:
  const Tensor& keep(Tensor t);
  // `t` itself when contiguous, else a contiguous copy of it (same dtype) kept here.
  const Tensor& contiguous(const Tensor& t);

 private:
  std::deque<Tensor> items_;  // a deque: references handed out stay valid as more are kept
};

// The library element type of dtype `t` (runtime/data_type.h): float32, float16, bfloat16; other
// dtypes throw dsl::OpError(NotImplemented).
runtime::DataType library_data_type(dsl::DType t);
// The element type of the runtime's fixed CUDA kernels (runtime/fixed_kernel.h) for dtype `t`;
// throws std::logic_error for the small integer types (which no fixed kernel takes). Each kernel's
// plan refuses the types it does not take.
runtime::cuda::FixedKernelType fixed_kernel_type(dsl::DType t);
// values[v], which must be bound (a library call's operand or output); throws std::logic_error.
const Tensor& bound_value(const std::vector<const Tensor*>& values, int v);

// The workload key of a library step (what a tuning record of its implementation choice is about):
// XXH3-128 over the op, its attrs, the epilogue, and the shapes, dtypes and strides of its
// operands and output (`strides` per graph value, as compiled).
std::string library_workload_key(const dsl::Graph& g, const LibraryStep& step,
                                 const std::vector<std::vector<int64_t>>& strides);

}  // namespace flow::jit
