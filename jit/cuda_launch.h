// Note: launching a CUDA kernel of the pipeline. The launch ABI is the CUDA printer's (see
// jit/cuda/cuda_printer.h): kernel parameters in LoweredFunc::params order, each passed as a
// pointer to its 8-byte dsl::ArgValue slot (a buffer's device pointer, an int64 or a double). The
// grid and block are the LoweredFunc's expressions evaluated with the scalar arguments of this
// launch (a cached kernel serves many shapes); a zero grid or block dimension means there is
// nothing to do and nothing is launched (no driver call at all).
//
// Binaries: a kernel's cubin is loaded once per device and cache key (CompiledKernel::key_hex)
// and its entry point looked up once; later launches are a map lookup. A CompiledKernel without a
// cubin (a build where the NVRTC backend does not keep it) is compiled here for the current
// device's architecture on first launch.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "dsl/stmt.h"
#include "jit/compile.h"
#include "jit/tensor.h"
#include "scheduler/scheduler.h"

namespace flow::jit {

struct CudaLaunchShape {
  std::array<int64_t, 3> grid{1, 1, 1};
  std::array<int64_t, 3> block{1, 1, 1};
  bool empty() const;  // some dimension is 0
};

// Evaluates `f`'s grid and block (an undefined dimension is 1) with the scalar values of `args`
// (one per f.params, as sched::ScheduledKernel::args). Throws std::invalid_argument naming the
// kernel when the arguments do not match the params, a dimension is negative or not an integer,
// or exceeds the CUDA limits (grid x < 2^31, y and z < 65536; block dims <= 1024).
CudaLaunchShape cuda_launch_shape(const dsl::LoweredFunc& f, const std::vector<sched::KernelArg>& args);

// Runs a CUDA kernel on the current device's current stream (asynchronously) with the launch
// arguments of one specialization: buffer args from `values` (indexed by graph value id), which
// must be CUDA tensors on the current device. Throws std::invalid_argument for bad arguments,
// runtime::cuda::CudaError for driver failures (CUDA unavailable, module load, launch).
void launch_cuda(const CompiledKernel& k, const std::vector<sched::KernelArg>& args,
                 const std::vector<const Tensor*>& values);

// The same for a kernel given by its loop nest and binary: `image` is a cubin or PTX for the
// current device (empty: compile `f` with NVRTC for the device's architecture); `key` identifies
// the binary in the module cache (one load per device and key).
void launch_cuda_func(const dsl::LoweredFunc& f, const std::string& key, const std::string& image,
                      const std::vector<sched::KernelArg>& args, const std::vector<const Tensor*>& values);

// Kernels loaded by this process so far (all devices).
size_t loaded_cuda_kernels();

}  // namespace flow::jit
