// Note: the runtime's fixed CUDA kernels (the library epilogue, runtime/epilogue_kernel.h; the sort,
// runtime/sort_kernel.h) are small CUDA C++ sources that need no headers, so they compile for any
// sm_XX. They share a prelude (the 16-bit float types and their conversions, written with PTX cvt
// instructions and integer rounding, with C++ twins for the tests' host SIMT emulator), and each is
// compiled by NVRTC once per architecture per process (CudaModule::get then loads it once per
// device).
#pragma once
#include <string>

namespace flow::runtime::cuda {

// The element types the fixed kernels read and write (runtime/ knows no dsl types; jit maps them).
enum class FixedKernelType { Float32, Float16, BFloat16, Float64, Int32, Int64, Bool };

// The entry-name suffix of `t`: "f32", "f16", "bf16", "f64", "i32", "i64", "b8".
const char* fixed_kernel_suffix(FixedKernelType t);

// flow_f16 / flow_bf16 (16-bit storage structs), flow_to_float(float | flow_f16 | flow_bf16) and
// flow_store(float* | flow_f16* | flow_bf16*, float) (round to nearest even; NaN stays NaN), and
// flow_report_error(word, code, a, b, c), a kernel's report into the device's error word
// (runtime/device_error.h).
const std::string& fixed_kernel_prelude();

// The cubin of `source` (named `name` in NVRTC's diagnostics) for `arch`, compiled on the first call
// for that (name, arch) and kept for the process. Throws NvrtcError naming what failed.
const std::string& fixed_kernel_cubin(const std::string& name, const std::string& source, const std::string& arch);

}  // namespace flow::runtime::cuda
