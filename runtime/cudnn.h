// Note: 2-D and 3-D convolutions on the GPU through cuDNN 9, loaded with dlopen (runtime/dynlib.h) on first
// use, so flow builds and imports without it.
//
// Why the legacy API (cudnnConvolutionForward and friends, marked deprecated in cuDNN 9 but exported
// by every libcudnn.so.9): PyTorch's conv was built on it for years, so its algorithms and numerics
// are well known against torch's; it covers flow's whole need (forward conv with groups, dilation,
// NCHW/NHWC, float32/float16/bfloat16, the fused conv + bias + z + relu of
// cudnnConvolutionBiasActivationForward, and conv_transpose2d/3d as cudnnConvolutionBackwardData) in a
// few dozen host calls with no graph building; and an
// algorithm is a small enum that flow can store in tuning records and ship by name. The graph
// (backend) API would add operation graphs, engine configs and plan caches for no gain in this
// scope; it is the way forward should cuDNN ever drop these entry points.
//
// Numerics: float32 runs with CUDNN_FMA_MATH (strict FP32, never TF32: the tests compare against
// torch with `torch.backends.cudnn.allow_tf32 = False`), and algorithm results that report a
// tensor-op math type are skipped for it. float16/bfloat16 run with CUDNN_TENSOR_OP_MATH and a
// float32 convolution compute type (cuDNN's PSEUDO_HALF / PSEUDO_BFLOAT16 configurations), as torch.
//
// Epilogue: y = relu(conv(x, w) + bias + z). With relu and a bias the fused
// cudnnConvolutionBiasActivationForward runs first (without a residual z is y with alpha2 = 0, as
// torch does); when cuDNN refuses the configuration (any status but success or a failed execution),
// forward falls back to cudnnConvolutionForward (beta = 1 over z, copied into y first unless z is y)
// followed by one pass of flow's epilogue kernel for the bias and the relu
// (runtime/epilogue_kernel.h; NaN and -0 pass through the relu, as in torch.relu), and remembers
// per problem which path worked. Otherwise (no bias, or no relu) the unfused sequence runs directly
// (no zero-bias block: persistent memory initialized by a memset could be recorded, never run, by a
// CUDA graph capture).
//
// State: one cuDNN handle per device (created on first use, never destroyed; cudnnSetStream per
// call, under the handle's lock), a workspace per (device, stream) from the caching allocator that
// grows to the largest an algorithm needed (an outgrown one is kept, not freed: a CUDA graph may
// have recorded it), the chosen algorithms cached in-process per
// (problem_key, device architecture, search), and per (device, problem_key, algorithm) the
// descriptors, workspace size and fused-call verdict that forward() made on its first call, so a
// later call only sets the stream and enqueues. Thread-safe.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/cuda_driver.h"
#include "runtime/data_type.h"

namespace flow::runtime::cuda::cudnn {

// A convolution, described in its forward terms: input x (n, c, h, w), filter (k, c / groups, r, s),
// output y (n, k, out_h, out_w). With `transposed`, the problem is that convolution's transpose
// (conv_transpose2d, cuDNN's backward data): the caller's input has y's dims and strides and its
// output x's, the filter is the same (k, c / groups, r, s) tensor (torch's conv_transpose2d weight
// [C_in, C_out / groups, R, S]), and bias (c values), residual z (x's shape) and relu apply to
// that output. torch's output_padding is implicit in h and w (it must be below the stride: the
// convolution of the output has to give back the input's size).
// A 3-D problem (spatial = 3: conv3d, conv_transpose3d) adds a depth axis before h and w: input
// (n, c, d, h, w), filter (k, c / groups, t, r, s), output (n, k, out_d, out_h, out_w), with its own
// pad_d, stride_d and dil_d; cuDNN's N-d descriptors describe it. A 2-D problem ignores the depth
// fields (their defaults make it the 3-D problem of depth 1).
struct ConvProblem {
  int spatial = 2;                     // 2: (h, w); 3: (d, h, w)
  int64_t n = 0, c = 0, h = 0, w = 0;  // input (transposed: output)
  int64_t k = 0, r = 0, s = 0;         // filter: k outputs, c/groups inputs per group, r x s
  int64_t groups = 1, pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
  int64_t out_h = 0, out_w = 0;
  int64_t d = 1, t = 1, pad_d = 0, stride_d = 1, dil_d = 1, out_d = 1;  // depth (spatial = 3)
  DataType dtype = DataType::Float32;                                   // x, w, y, z and bias
  // Element strides in (n, c, [d,] h, w) order, spatial + 2 of them: NCHW- or NHWC-dense (NCDHW or
  // NDHWC for 3-D).
  std::vector<int64_t> x_strides, y_strides;
  bool w_nhwc = false;  // filter packed as KRSC (true; KTRSC for 3-D) or KCRS (KCTRS)
  bool bias = false;
  bool residual = false;
  bool relu = false;  // y = relu(conv(x) + bias + z)
  bool transposed = false;
};

enum class Search { Heuristic, Exhaustive };
// ms: measured time (exhaustive), -1 otherwise.
struct Algo {
  int id = -1;
  std::string name;
  size_t workspace = 0;
  double ms = -1;
};

// The CUDNN_CONVOLUTION_FWD_ALGO_* names without the prefix, in enum order: "IMPLICIT_GEMM",
// "IMPLICIT_PRECOMP_GEMM", "GEMM", "DIRECT", "FFT", "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED";
// for transposed problems the CUDNN_CONVOLUTION_BWD_DATA_ALGO_* ones: "ALGO_0", "ALGO_1", "FFT",
// "FFT_TILING", "WINOGRAD", "WINOGRAD_NONFUSED".
std::vector<std::string> algo_names(bool transposed = false);
// The enum value of a name of algo_names(transposed); -1 when unknown.
int algo_id(const std::string& name, bool transposed = false);

// The output size of the convolution formula: (in + 2 pad - dil (f - 1) - 1) / stride + 1; <= 0
// when the dilated filter does not fit the padded input.
int64_t conv_out_size(int64_t in, int64_t pad, int64_t dil, int64_t f, int64_t stride);

// Whether cuDNN can run p as described; `why` (may be null) names the first reason not. Pure (no
// library call): sizes positive and within int, one image of x and of y and the filter of at most
// 2^31-1 elements (FLOW_CUDNN_MAX_TENSOR_ELEMENTS lowers that, for tests; a batch whose tensors
// exceed it runs in chunks of images in choose() and forward(), as torch does), groups divide
// c and k, out_h/out_w match the formula, x and y dense in the filter's layout (NCHW for KCRS,
// NHWC for KRSC; NCDHW for 3-D, which does not take NDHWC; strides of size-1 dimensions are ignored). An empty batch (n
// == 0) or k == 0 is supported (forward does nothing); c == 0 is not (the output would be bias + z only), nor is a
// transposed problem with k == 0 (likewise).
bool supported(const ConvProblem& p, std::string* why);

// A stable text key of every field of the problem (for the caller's caches and records), e.g.
// "n8c64h56w56_k64r3s3_g1_p1x1_s1x1_d1x1_o56x56_float16_x[...]_y[...]_KRSC_bias_res_relu".
std::string problem_key(const ConvProblem& p);

// The algorithm for p on the current device. Heuristic: the first
// cudnnGetConvolutionForwardAlgorithm_v7 (transposed: BackwardData) result that succeeds with a
// workspace <= 1 GiB. Exhaustive: cudnnFindConvolutionForwardAlgorithmEx (BackwardData) timed on
// the given buffers, x the caller's input and y its output (y is overwritten; they are only read
// for Heuristic, and may be null then). Cached in-process per (problem_key,
// device architecture, search). Throws std::invalid_argument when !supported(p),
// std::runtime_error ("flow: cuDNN error in <call> (<problem>): CUDNN_STATUS_...: <message>") when
// cuDNN fails or offers no algorithm. Runs on current_stream().
Algo choose(const ConvProblem& p, Search search, const void* x, const void* w, void* y);

// y = [relu](conv(x, w) + bias + z) on `stream` of the current device, with `algo` from choose()
// (or from a record: only algo.id is used). `bias` (k values; c for p.transposed) is read when p.bias, `z` (y's shape
// and strides; may be y itself) when p.residual. Throws as choose() does. For p.transposed, x is
// the caller's input and y its output: y = [relu](conv_transpose(x, w) + bias + z), one
// cudnnConvolutionBackwardData (beta = 1 over z for a residual) and, for a bias or relu, flow's
// epilogue kernel.
void forward(const ConvProblem& p, const Algo& algo, const void* x, const void* w, const void* bias, const void* z,
             void* y, Stream stream);

// How forward() has run since the process started, for diagnosing a device: `fused` calls of
// cudnnConvolutionBiasActivationForward, `unfused` ones (the convolution, then the epilogue kernel
// for whatever bias and relu there is), `refused` problems whose fused call cuDNN turned down, and
// the latest refusal ("<problem key>: <status>", "" when none); `z_probes` fused problems without a
// residual probed for whether cuDNN reads z at alpha2 = 0, and `z_read` those where it did (so y is
// zeroed before their calls).
struct Counters {
  int64_t fused = 0, unfused = 0, refused = 0;
  int64_t z_probes = 0, z_read = 0;
  std::string last_refusal;
};
Counters counters();

// Every cuDNN entry point flow resolves (the same list with or without the headers).
std::vector<std::string> symbol_names();
// dlopens cuDNN (load_cuda_library(CudaLib::Cudnn)) and resolves every symbol; throws
// std::runtime_error naming the library, or "flow was built without cuDNN headers (cudnn.h)".
// Needs no GPU.
void load();
// The loaded library's version, "cuDNN 9.10.2" (cudnnGetVersion); loads it.
std::string version();

// Host-side only (cuDNN descriptor functions, no handle, no GPU): the output dims {n, k, [d,] h, w}
// cuDNN computes for p (cudnnGetConvolution2dForwardOutputDim; the Nd one for 3-D). Throws like
// choose().
std::vector<int> output_dims(const ConvProblem& p);

}  // namespace flow::runtime::cuda::cudnn
