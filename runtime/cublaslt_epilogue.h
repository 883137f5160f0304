// Note: the split epilogue of a cuBLASLt matmul. cuBLASLt fuses bias and activation into the
// product (CUBLASLT_EPILOGUE_*), but its heuristic may offer no algorithm for a given epilogue,
// data types and alignment. The matmul then runs with the default epilogue (the residual stays
// fused: it is C with beta = 1, which every algorithm takes) and this kernel applies the rest in
// place over the output:
//   out[b][i][j] = act(out[b][i][j] + bias[j])
// The arithmetic is float, as in cuBLASLt's own epilogue; a half output is rounded twice (after the
// product and after the epilogue) instead of once, which stays within the type's tolerance.
//
// The kernel is small fixed CUDA C++ compiled by NVRTC for the device's own architecture on first
// use and loaded once per device (CudaModule::get). It needs no headers: half and bfloat16 are
// converted with PTX cvt instructions and integer rounding, so it compiles for any sm_XX.
#pragma once
#include <cstdint>
#include <string>

#include "runtime/cublaslt.h"
#include "runtime/cuda_driver.h"
#include "runtime/data_type.h"

namespace flow::runtime::cuda::cublaslt {

// The CUDA C++ of the three kernels (one per output type: float32, float16, bfloat16), with
// extern "C" entry points named by split_epilogue_kernel_name().
const std::string& split_epilogue_source();
const char* split_epilogue_kernel_name(DataType out_type);

// Applies bias (n values of `out_type`, may be null) and `activation` in place to `out`: `batch`
// row-major m x n matrices with row stride `out_row` and batch stride `out_batch` (elements), on
// `stream` of the current device. Compiles and loads the kernel the first time. Throws CudaError
// or NvrtcError naming what failed.
void apply_split_epilogue(DataType out_type, Activation activation, const void* bias, void* out, int64_t batch,
                          int64_t m, int64_t n, int64_t out_row, int64_t out_batch, Stream stream);

}  // namespace flow::runtime::cuda::cublaslt
