// Note: the CUDA side of library groups: conv2d/3d and conv_transpose2d/3d through cuDNN, matmul and linear through
// cuBLASLt (runtime/cudnn.h, runtime/cublaslt.h), with the epilogue the fuser gave the group
// (scheduler/library_patterns.h: bias, residual add, relu / tanh-GELU). This file turns flow's
// tensors into the libraries' problem descriptions:
//
// - matmul/linear become one strided-batched row-major GEMM: 1-D operands become a row or column
//   matrix, batch dims are broadcast to the output's and collapsed to one batch stride, linear's
//   weight [N, K] is read as B = W^T through its strides. An operand whose batch dims do not
//   collapse, or whose matrix strides cuBLASLt cannot take (no unit stride), is first copied to a
//   contiguous tensor (a generated kernel), as is a bias or residual that is not dense.
// - conv2d runs in one layout for x, y and the filter, as cuDNN's convolution wants: NHWC when the
//   layout pass marked the conv channels_last (its output is then [N, OH, OW, C]), else NCHW. An
//   input in the other layout (or not dense) is copied into it first; for NHWC the filter is given
//   as KRSC (the tensor-core layout), a permuted copy of the [K, C, R, S] weights cached per weight
//   storage and version when the weights are frozen, so a model's filters are permuted once.
// - conv_transpose2d is cuDNN's backward data of the convolution from its output's shape to its
//   input's (ConvProblem::transposed), NCHW, with conv2d's epilogue grammar.
// - conv3d and conv_transpose3d are the same with a depth axis, through cuDNN's N-d descriptors,
//   always NCDHW (the layout pass picks channels_last for 2-D convolutions only).
// - the algorithm: a tuning record's choice (LibraryStep::impl) when there is one, else cuDNN's
//   heuristic ranking, or an exhaustive timed search when compiled with conv_search="exhaustive";
//   runtime/cudnn.h caches the choice per (problem, layout, dtype, arch) for the process.
#pragma once
#include <vector>

#include "dsl/graph.h"
#include "jit/library_ops.h"
#include "jit/tensor.h"
#include "runtime/cublaslt.h"
#include "runtime/cudnn.h"
#include "runtime/onednn.h"

namespace flow::jit {

// The library calls a step becomes, with the tensors they read (contiguous copies, permuted
// filters) kept alive in `held`. Building them launches no library call, so the tests check the
// descriptions on CPU tensors against a reference that reads memory the way the library would.
struct GemmCall {
  runtime::cuda::cublaslt::MatmulProblem problem;
  const void* a = nullptr;
  const void* b = nullptr;
  const void* bias = nullptr;
  const void* residual = nullptr;
  void* out = nullptr;
  HeldTensors held;
};
struct ConvCall {
  runtime::cuda::cudnn::ConvProblem problem;
  const void* x = nullptr;
  const void* w = nullptr;
  const void* bias = nullptr;
  const void* z = nullptr;
  void* y = nullptr;
  HeldTensors held;
};
GemmCall plan_gemm_call(const LibraryStep& step, const std::vector<const Tensor*>& values);
ConvCall plan_conv_call(const LibraryStep& step, const std::vector<const Tensor*>& values);

// Runs one library step whose tensors live on the current CUDA device (see run_library_group).
// `info` (optional) receives the algorithm used and those cuDNN offers (convolutions).
void run_cuda_library_group(const dsl::Graph& g, const LibraryStep& step, const std::vector<const Tensor*>& values,
                            runtime::onednn::ImplInfo* info);

}  // namespace flow::jit
