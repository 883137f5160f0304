// Note: the one epilogue kernel of the GPU library calls, for the cases the library cannot fuse:
//   out = act(out + bias)   in place, bias broadcast along rows or along columns.
// - cuBLASLt (runtime/cublaslt.h): when the heuristic offers no algorithm for a fused bias /
//   activation epilogue, the product runs with the default epilogue (the residual stays fused: it
//   is C with beta = 1, which every algorithm takes) and this kernel applies the rest; the bias is
//   one value per column of the row-major output.
// - cuDNN (runtime/cudnn.h): when the fused convolution-bias-activation call is refused, or there
//   is no activation to fuse, the convolution (with the residual as beta = 1) is followed by this
//   kernel instead of cuDNN's separate add and activation calls (one pass over the output instead
//   of two); the bias is per channel: per column in NHWC, per row of each image in NCHW.
// The arithmetic is float, as in the libraries' own epilogues; a half output is rounded twice
// (after the library call and after the epilogue) instead of once, within the type's tolerance.
//
// It is memory-bound, so it reads and writes 16-byte vectors along a row where the shape and
// alignment allow, and indexes in 32 bits where every offset fits (64-bit integer division costs
// more than the memory traffic).
//
// The kernel is one of the runtime's fixed CUDA C++ sources (runtime/fixed_kernel.h: no headers, the
// shared half/bfloat16 prelude, compiled by NVRTC once per architecture on first use).
#pragma once
#include <cstdint>
#include <string>

#include "runtime/cuda_driver.h"
#include "runtime/data_type.h"

namespace flow::runtime::cuda {

enum class EpilogueActivation { None, Relu, GeluTanh };  // relu keeps NaN and -0, as torch's does

// `batch` matrices of `rows` x `cols` elements: element (b, r, c) at
// b * batch_stride + r * row_stride + c.
struct EpilogueShape {
  int64_t batch = 1, rows = 0, cols = 0;
  int64_t row_stride = 0, batch_stride = 0;
  bool bias_per_row = false;  // bias[r] (NCHW channels) instead of bias[c] (GEMM columns, NHWC)
};

// The CUDA C++ of the kernels (per element type: float32, float16, bfloat16; each one element at a
// time, or in 16-byte vectors along a row), with extern "C" entry points named by
// epilogue_kernel_name().
const std::string& epilogue_kernel_source();
const char* epilogue_kernel_name(DataType type, bool vector);
// The elements per access apply_bias_activation uses: 16 bytes' worth when the row length and
// strides are multiples of it and out (and a per-column bias) are 16-byte aligned, else 1.
int epilogue_vector_width(DataType type, const void* bias, const void* out, const EpilogueShape& shape);

// How apply_bias_activation launches the kernel, decided on the host alone (so the tests can run
// the very same launch on the host SIMT emulator). `entry` is null when there is nothing to do.
struct EpilogueLaunch {
  const char* entry = nullptr;
  unsigned blocks = 0, threads = 0;
  // The kernel's scalar arguments, in its parameter order after (out, bias).
  int act = 0, bias_per_row = 0, narrow = 0;  // narrow: 32-bit indexing
  long long batch = 0, rows = 0, cols = 0, row_stride = 0, batch_stride = 0;
};
EpilogueLaunch plan_epilogue_launch(DataType type, EpilogueActivation activation, const void* bias, const void* out,
                                    const EpilogueShape& shape, int sm_count);

// Applies `bias` (of `type`; null for none) and `activation` in place to `out` (of `type`, laid out
// as `shape`), on `stream` of the current device; nothing to do returns at once. Compiles and loads
// the kernel the first time. Throws CudaError or NvrtcError naming what failed.
void apply_bias_activation(DataType type, EpilogueActivation activation, const void* bias, void* out,
                           const EpilogueShape& shape, Stream stream);

}  // namespace flow::runtime::cuda
