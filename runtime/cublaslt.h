// Note: matrix products on the GPU through cuBLASLt, loaded with dlopen (runtime/dynlib.h) on first
// use, so flow builds and imports without it.
//
// Row-major in, column-major library: cuBLASLt is column-major, flow's tensors are row-major. A
// row-major m x n matrix is the column-major n x m matrix of its transpose with the same leading
// dimension, so out = A B is computed as out^T = B^T A^T: cuBLASLt's A is our B, its B is our A,
// its m is our n and its n our m, and no data moves. A transposed operand (row stride 1) is the
// other orientation of the same trick (CUBLAS_OP_T with the column stride as leading dimension).
// A bias of n values (one per column of out) is then one value per row of the column-major D,
// which is what CUBLASLT_EPILOGUE_BIAS adds. A residual is cuBLASLt's C with beta = 1 (C and D
// share a layout; C == D runs in place), so one call computes
//   out = act(A B + bias + residual)
// with the activation last, as the epilogue applies it (relu, or GELU: cuBLASLt's GELU epilogue is
// the tanh approximation, torch's gelu(approximate="tanh")).
//
// Precision: compute type CUBLAS_COMPUTE_32F with float scale for every data type. For float32
// data this is strict FP32 (never TF32; torch's default `torch.backends.cuda.matmul.allow_tf32 =
// False` is the oracle the tests use); float16/bfloat16 inputs accumulate in float32. The
// environment can still override it (NVIDIA_TF32_OVERRIDE=1 forces TF32 in every CUDA library).
//
// State: one cuBLASLt handle per device (created on first use, never destroyed: matmuls may run
// from static destructors), one 32 MiB workspace per (device, stream) from the device's caching
// allocator (kept for the process), and one plan per (problem, operand alignments, device): the
// matrix layouts, the matmul descriptor and the first algorithm of cublasLtMatmulAlgoGetHeuristic,
// made on the problem's first matmul and kept for the process, so that a repeated matmul sets the
// bias pointer (when it has one) and launches: no descriptor made, no string formatted. Thread-safe
// (a plan's lock covers its bias pointer from setting to launch).
//
// Fallback: an epilogue the heuristic has no algorithm for is split off (see split_epilogue_runs).
//
// k == 0 (an empty reduction: out = act(bias + residual), or zeros) is run by cuBLASLt itself as a
// k = 1 product of two broadcast zero operands, so the epilogue is the library's in every case.
// Empty outputs (batch, m or n == 0) return without touching the library.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/cuda_driver.h"
#include "runtime/data_type.h"

namespace flow::runtime::cuda::cublaslt {

enum class Activation { None, Relu, GeluTanh };  // cuBLASLt's GELU epilogue is the tanh approximation

// Row-major batched GEMM: out[b] (m x n) = A[b] (m x k) * B[b] (k x n) [+ bias (n values, one per
// column)] [+ residual[b] (m x n)], then activation.
struct MatmulProblem {
  int64_t batch = 1, m = 0, n = 0, k = 0;
  DataType in_type = DataType::Float32;   // A and B
  DataType out_type = DataType::Float32;  // out, residual and bias
  // Element strides of A (a_row, a_col) and B; one of each pair must be 1 (the other >= the dim it
  // spans); batch stride 0 = broadcast. A stride of a dimension of size 1 is ignored.
  int64_t a_row = 0, a_col = 1, a_batch = 0;
  int64_t b_row = 0, b_col = 1, b_batch = 0;
  int64_t out_row = 0, out_batch = 0;  // out has column stride 1; residual has out's strides
  bool bias = false;
  bool residual = false;
  Activation activation = Activation::None;
};

const char* activation_name(Activation a);  // "none", "relu", "gelu_tanh"
// A one-line description for errors: "batch 2, m 64, n 32, k 16,
// float16 -> float32, A(row 16, col 1) batch 1024, B(row 32, col 1) batch 512, out row 32 batch
// 2048, bias, relu".
std::string describe(const MatmulProblem& p);

// Whether cuBLASLt can run it as described; `why` (may be null) names the first reason not. Pure:
// no library call, works without a GPU. Accepted input/output types: equal, or float16/bfloat16 in
// with float32 out. Empty problems are accepted (matmul does nothing); so is k == 0 (see the note).
bool supported(const MatmulProblem& p, std::string* why);

// Runs on `stream` of the current device. `bias` is read when p.bias, `residual` when p.residual
// (it may equal `out`: in place, or be a different buffer with out's strides). Throws
// std::invalid_argument when !supported(p) or a needed pointer is null, std::runtime_error naming
// the call, the cublasStatus and the problem when cuBLASLt fails ("flow: cuBLASLt error in
// cublasLtMatmul (batch 1, m 8, ...): CUBLAS_STATUS_NOT_SUPPORTED: the functionality requested is
// not supported"), CudaError when CUDA is unavailable.
void matmul(const MatmulProblem& p, const void* a, const void* b, const void* bias, const void* residual, void* out,
            Stream stream);

// The split epilogue (runtime/epilogue_kernel.h): when cuBLASLt's heuristic offers no algorithm
// for a fused bias / activation epilogue, matmul() runs the product with the default epilogue and
// applies bias and activation with a small NVRTC kernel; the choice is cached with the algorithm.
// force_split_epilogue(true), or FLOW_CUBLASLT_SPLIT_EPILOGUE=1 in the environment (read once),
// makes every matmul with a bias or activation take that path: for tests and for comparing the two.
// force_split_epilogue(false) returns to the default (the environment decides).
void force_split_epilogue(bool on);
// Matmuls run with the split epilogue since the process started.
int64_t split_epilogue_runs();
// Plans (descriptors and heuristic query, see the note) made and kept since the process started.
int64_t plans_made();

// Every cuBLASLt entry point flow resolves (the same list with or without the headers).
std::vector<std::string> symbol_names();
// dlopens cuBLASLt (load_cuda_library(CudaLib::CublasLt)) and resolves every symbol; throws
// std::runtime_error naming the library (or, in a build without cublasLt.h, saying so). Needs no GPU.
void load();
// "cuBLASLt 13.0.2" style version of the loaded library (cublasLtGetVersion); loads it.
std::string version();

}  // namespace flow::runtime::cuda::cublaslt
