// Note: the library-offload patterns, in one table: for each library op (conv2d, matmul, ...) and
// target, which library runs it and which elementwise consumers it absorbs as post-ops, and how
// each absorbed op translates into a post-op. The fuser (scheduler/fusion.cpp) asks match_epilogue
// whether a node may extend a library group's epilogue chain; the executor (jit/library_ops.h)
// turns the resulting EpilogueSteps into oneDNN post-ops. Adding a fusable epilogue is one row of
// the epilogue table in library_patterns.cpp.
//
// Table (CPU, oneDNN; conv2d/3d, conv_transpose2d/3d, matmul, linear, float32 only):
//   relu -> eltwise relu          gelu -> gelu_erf / gelu_tanh (approximate="tanh")
//   silu -> swish (alpha 1)       sigmoid -> logistic      tanh -> tanh
//   clamp(min, max) -> clip       hardswish -> hardswish
//   add/sub/mul/div with a tensor broadcasting to the output -> binary add/sub/mul/div
//     (other - chain: binary sub then linear(-1); other / chain is refused; alpha != 1 refused)
//   add/sub/mul/div with a constant scalar -> eltwise linear (alpha * x + beta)
//
// Table (CUDA; float32, float16, bfloat16; float32 accumulation, no TF32):
//   conv2d -> cuDNN: y = relu(conv(x) + bias + residual), each part optional (bias: one value
//     per output channel, from the conv's own bias operand or one add; residual: an add of a
//     tensor of the output's shape; relu last). cudnnConvolutionBiasActivationForward when it
//     applies, else the convolution then cuDNN's add and activation (runtime/cudnn.h).
//   matmul, linear -> cuBLASLt: y = act(a @ b + bias + residual), act relu or tanh-GELU
//     (cuBLASLt's GELU is the tanh form, so exact GELU stays a generated kernel); bias along the
//     last dim.
//   conv_transpose2d -> cuDNN's backward data: y = relu(conv_transpose(x) + bias + residual), the
//     same epilogue grammar as conv2d, run as the library call (residual as its beta = 1 operand)
//     then flow's epilogue kernel for bias and relu. flow.nn.functional sends only what cuDNN can
//     express here (output_padding below the stride); the rest it writes as a conv2d over the
//     zero-stuffed input (_conv_transpose2d_as_conv2d).
//   conv3d, conv_transpose3d -> cuDNN through its N-d descriptors, as their 2-d namesakes (NCDHW).
//
// argsort (CPU and CUDA): "flow sort", flow's own sort (jit/sort_op.h), no epilogues.
// scatter (CPU and CUDA): "flow scatter", flow's own (jit/scatter_op.h), no epilogues.
// embedding_bag (CPU and CUDA): "flow embedding_bag", flow's own (jit/embedding_bag_op.h), no epilogues.
// On CUDA the oneDNN-specific gates (FLOW_LIBRARY_EPILOGUES's exact/binary modes) do not apply.
#pragma once
#include <string>
#include <vector>

#include "dsl/graph.h"
#include "dsl/stmt.h"

namespace flow::sched {

enum class PostOpAlg { Relu, GeluErf, GeluTanh, Swish, Logistic, Tanh, Clip, Hardswish, Linear, Add, Sub, Mul, Div };
const char* post_op_alg_name(PostOpAlg a);
bool is_binary_alg(PostOpAlg a);
// Whether the library computes post-op `alg` (implementing node op `op`) exactly as torch computes
// the op, NaN and +-inf included. Measured on oneDNN 2.6 (tests/python/test_frozen.py): its relu
// gives NaN for -inf on convolutions and 0 for NaN on GEMMs, clip and logistic drop NaN, gelu_erf
// and hardswish give NaN for +inf, and a division by a scalar becomes a multiply by its rounded
// reciprocal (x / 1e-39 overflows). silu, tanh, tanh-gelu and scalar multiply/add are exact.
bool is_exact_post_op(PostOpAlg alg, const std::string& op);

// One post-op of a library group's epilogue.
struct EpilogueStep {
  int node = -1;  // the graph node it implements (two steps may share one: other - chain)
  PostOpAlg alg = PostOpAlg::Relu;
  double alpha = 0, beta = 0;  // eltwise parameters (oneDNN's meaning; clip: min, max)
  int operand = -1;            // binary: the graph value of the second operand
  int scalar = -1;             // eltwise linear from a constant: that constant's value id
  bool operator==(const EpilogueStep& o) const {
    return node == o.node && alg == o.alg && alpha == o.alpha && beta == o.beta && operand == o.operand &&
           scalar == o.scalar;
  }
};

struct LibraryPattern {
  std::string op;
  dsl::Target target;
  std::string library;                    // "oneDNN"
  std::vector<std::string> epilogue_ops;  // elementwise ops absorbed as post-ops
  // flow's own implementation (argsort, scatter, embedding_bag): it checks the dtypes it takes itself and offers no
  // implementations to choose between (nothing to tune).
  bool flow_own = false;
};

// The whole table, and the row for (op, target) or nullptr.
const std::vector<LibraryPattern>& library_patterns();
const LibraryPattern* find_library_pattern(const std::string& op, dsl::Target target);

// conv2d, conv_transpose2d, conv3d or conv_transpose3d: the library ops with a channel dim and a
// per-channel bias (the layout pass converts the 2-d ones only).
bool is_convolution(const std::string& op);

// May elementwise node `n`, which reads `chain` (the current output of a library group whose
// library node is `lib` and whose epilogue so far is `so_far`), join that group's epilogue? Checks rules (b) and (c):
// the op is in the table, its other operand is a constant scalar or a float32 tensor broadcasting to the output, and
// its output has the library output's shape and float32 dtype. Returns the steps `n` becomes, or
// an empty vector with `why` set to the named reason. Rule (a) (graph structure, cycles) is the
// fuser's.
std::vector<EpilogueStep> match_epilogue(const dsl::Graph& g, const dsl::Node& lib, int chain, const dsl::Node& n,
                                         dsl::Target target, const std::vector<EpilogueStep>& so_far, std::string& why);

}  // namespace flow::sched
