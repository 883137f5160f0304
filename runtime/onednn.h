// Note: a thin wrapper over oneDNN (CPU) for the library ops: batched matmul, linear (matmul
// with a transposed-weight view, which is oneDNN's inner product without the weight reorder an
// inner_product primitive wants on every call), 2-D and 3-D convolution and transposed convolution, each
// with a chain of post-ops. Plain types only (float pointers, dims, element strides): runtime/
// knows nothing of the IR.
//
// Primitives are expensive to create, so they are cached in a process-wide, thread-safe LRU map
// keyed by a canonical string of (kind, dims, strides, op parameters, post-op signature); post-op
// *data* (the second operand of a binary post-op) is bound at execution, so one primitive serves
// every call with the same signature. The cache holds FLOW_ONEDNN_CACHE_CAPACITY (default 512)
// entries.
//
// Execution: one CPU engine for the process; each calling thread has its own stream and its own
// scratchpad (primitives use scratchpad_mode::user), so the same cached primitive may run on
// several threads at once. oneDNN parallelizes with its own OpenMP threads (the Debian build is
// OpenMP); flow's pool is idle while a primitive runs, so the two never run at once. When
// FLOW_NUM_THREADS is set (and OMP_NUM_THREADS is not), each calling thread's OpenMP team size is set
// to it, so oneDNN uses no more cores than flow does.
//
// Convolution layouts: with plain NCHW activations oneDNN has only im2col + GEMM (and reference)
// implementations; letting it choose the layouts (format "any") enables its direct and brgemm
// convolutions on blocked layouts (nChw16c), at the cost of reordering src in and dst out. On this
// project's 2-core AVX-512 host that is ~1.5x faster for 3x3 and 7x7 convolutions and ~1.8x slower
// for 1x1 stride-1 ones (plain GEMM, no reorders), so the default is plain for 1x1 stride-1 and
// blocked otherwise. Convolution implementation names carry the layout, "plain/x64:gemm:jit" or
// "blocked/brgconv:avx512_core", and the autotuner searches both. Chains with a Sum post-op (which
// reads dst in place) stay plain; FLOW_ONEDNN_PLAIN_CONV=1 forces plain everywhere (comparisons).
//
// A post-op chain oneDNN refuses for a shape (an unsupported broadcast of a binary operand, say)
// is not an error: the primitive runs without post-ops and the chain is applied after it by a
// plain loop over dst (correct, slower; counted in stats().fallback_epilogues).
//
// Implementations: oneDNN may offer several implementations of one primitive (its primitive
// descriptor iterates them; impl_info_str() names them, e.g. "brg:avx512_core", "jit:avx2",
// "gemm:jit"). `impl` "" takes oneDNN's first choice (its heuristic); a name selects that
// implementation when oneDNN offers it for this call, else the first choice. `info` (optional)
// receives the implementation that ran and every one offered: the autotuner's search space.
//
// Without oneDNN (FLOW_HAVE_ONEDNN undefined) available() is false and every call throws
// std::runtime_error naming oneDNN.
#pragma once
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/data_type.h"

namespace flow::runtime::onednn {

bool available();
std::string version();  // "2.6.3", or "" without oneDNN
// Whether oneDNN's bfloat16/float16 primitives should run half-precision convolutions and GEMMs on
// this CPU: only when it has AMX tiles (oneDNN's effective ISA is avx512_core_amx or above). With
// AVX-512-BF16 alone they measured 1.5-1.8x slower than float32 primitives on the same operands
// (a bf16 linear 1024x768x3072: 31.6 against 20.0 ms; ResNet-50 b1: 69.7 against 38.9 ms), and
// without it they do not exist. False without oneDNN.
bool half_primitives_preferred();

// Element types (runtime/data_type.h): float32, and bfloat16 / float16 where the CPU and this oneDNN
// have primitives for them (a primitive that does not exist throws Unsupported; jit/library_ops.cpp
// then computes in float32).
using runtime::DataType;

// oneDNN has no implementation for a problem as described (a data type, layout or post-op chain
// this CPU or version does not run): the caller may compute it another way.
class Unsupported : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A tensor: data, dims and element strides (same rank), and its element type. Dims of size 1 may
// have any stride.
struct TensorArg {
  const void* data = nullptr;
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;  // empty: contiguous (row-major)
  // Weights (a convolution's, or the 2-D b of a matmul): when `content_id` is non-empty the caller
  // guarantees that the same (content_id, content_version) means the same contents (jit: the
  // storage's uid and the view's offset, and the storage's version). The weights reordered to the
  // primitive's layout are then cached per (primitive, content_id), holding the latest version
  // only, instead of being reordered on every call; the cache holds FLOW_ONEDNN_WEIGHT_CACHE_MB
  // (default 1024) MiB, least recently used first out.
  std::string content_id = {};
  uint64_t content_version = 0;
  DataType dtype = DataType::Float32;
};
// The output: written, never read (except by a Sum post-op, which reads its previous contents).
struct OutArg {
  void* data = nullptr;
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;  // empty: contiguous
  DataType dtype = DataType::Float32;
};

struct ImplInfo {
  std::string chosen;
  std::vector<std::string> available;  // in oneDNN's order of preference, no duplicates
};

enum class Eltwise { Relu, GeluErf, GeluTanh, Swish, Logistic, Tanh, Clip, Hardswish, Linear };
enum class Binary { Add, Sub, Mul, Div, Max, Min };
const char* eltwise_name(Eltwise e);
const char* binary_name(Binary b);

struct PostOp {
  enum class Kind { Eltwise, Binary, Sum };
  Kind kind = Kind::Eltwise;
  // Eltwise: dst = f(dst; alpha, beta) with oneDNN's meaning of alpha/beta: Relu alpha = negative
  // slope; Swish alpha = 1 (silu); Clip: min alpha, max beta; Linear: alpha * x + beta.
  Eltwise eltwise = Eltwise::Relu;
  float alpha = 0, beta = 0;
  // Binary: dst = dst (op) src1, src1 broadcast to dst (its dims equal dst's or are 1, same rank).
  Binary binary = Binary::Add;
  TensorArg src1;
  // Sum: dst = scale * (previous dst contents) + dst.
  float scale = 1;

  static PostOp eltwise_op(Eltwise e, float alpha = 0, float beta = 0);
  static PostOp binary_op(Binary b, TensorArg src1);
  static PostOp sum_op(float scale = 1);
};

// dst[..., M, N] = a[..., M, K] @ b[..., K, N] (+ bias) then post-ops. All four have the rank of
// dst; batch dims of a, b and bias are dst's or 1 (broadcast). bias: nullptr or dims [1.., 1, N]
// (or broadcastable the same way). K == 0 gives zeros (then bias and post-ops).
void matmul(const TensorArg& a, const TensorArg& b, const TensorArg* bias, const OutArg& dst,
            const std::vector<PostOp>& post, const std::string& impl = "", ImplInfo* info = nullptr);

// dst[M, N] = x[M, K] @ w[N, K]^T + bias[N], then post-ops (dst, x 2-D; bias nullptr or 1-D).
void linear(const TensorArg& x, const TensorArg& w, const TensorArg* bias, const OutArg& dst,
            const std::vector<PostOp>& post, const std::string& impl = "", ImplInfo* info = nullptr);

// Per spatial dim, outermost first: (H, W) of a 2-d convolution, (D, H, W) of a 3-d one; entries
// past the convolution's spatial rank are unused.
struct ConvParams {
  int64_t stride[3] = {1, 1, 1};
  int64_t dilation[3] = {1, 1, 1};  // torch's meaning (1 = dense); oneDNN's is this minus 1
  int64_t pad_begin[3] = {0, 0, 0};
  int64_t pad_end[3] = {0, 0, 0};
  int64_t groups = 1;
  bool transposed = false;  // deconvolution; weights are then [IC, OC/groups, K...] (torch)
};

// 2-d or 3-d convolution: src [N, C, H, W] or [N, C, D, H, W] (plain strides: channels-first or
// channels-last dense), weights [OC, C/groups, K...] of src's rank (any plain strides; reordered to
// oneDNN's choice), bias nullptr or [OC], dst [N, OC, spatial...]. Transposed: see ConvParams.
void convolution(const ConvParams& p, const TensorArg& src, const TensorArg& weights, const TensorArg* bias,
                 const OutArg& dst, const std::vector<PostOp>& post, const std::string& impl = "",
                 ImplInfo* info = nullptr);

// Applies a post-op chain to dst by plain loops (the fallback path; exposed for tests). float32
// dst and operands only (throws std::invalid_argument otherwise).
void apply_post_ops(const OutArg& dst, const std::vector<PostOp>& post, const float* prev_dst);

struct Stats {
  uint64_t cache_hits = 0;
  uint64_t cache_misses = 0;
  uint64_t cache_size = 0;
  uint64_t fallback_epilogues = 0;  // post-op chains applied by loops after the primitive
  uint64_t executions = 0;
  uint64_t weight_reorders = 0;    // convolution weights reordered (not found in the weight cache)
  uint64_t weight_cache_hits = 0;  // reordered weights reused (TensorArg::content_id)
  uint64_t weight_cache_bytes = 0;
};
Stats stats();
void clear_primitive_cache();  // and the reordered-weight cache

}  // namespace flow::runtime::onednn
