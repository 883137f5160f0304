#include "scheduler/library_patterns.h"

#include <cmath>
#include <cstdlib>
#include <functional>
#include <limits>
#include <map>

#include "dsl/op_table.h"

namespace flow::sched {

using dsl::Graph;
using dsl::Node;

const char* post_op_alg_name(PostOpAlg a) {
  switch (a) {
    case PostOpAlg::Relu:
      return "relu";
    case PostOpAlg::GeluErf:
      return "gelu_erf";
    case PostOpAlg::GeluTanh:
      return "gelu_tanh";
    case PostOpAlg::Swish:
      return "swish";
    case PostOpAlg::Logistic:
      return "logistic";
    case PostOpAlg::Tanh:
      return "tanh";
    case PostOpAlg::Clip:
      return "clip";
    case PostOpAlg::Hardswish:
      return "hardswish";
    case PostOpAlg::Linear:
      return "linear";
    case PostOpAlg::Add:
      return "add";
    case PostOpAlg::Sub:
      return "sub";
    case PostOpAlg::Mul:
      return "mul";
    case PostOpAlg::Div:
      return "div";
  }
  return "?";
}

bool is_binary_alg(PostOpAlg a) {
  return a == PostOpAlg::Add || a == PostOpAlg::Sub || a == PostOpAlg::Mul || a == PostOpAlg::Div;
}

bool is_exact_post_op(PostOpAlg alg, const std::string& op) {
  switch (alg) {
    case PostOpAlg::Relu:
    case PostOpAlg::Clip:
    case PostOpAlg::Logistic:
    case PostOpAlg::GeluErf:
    case PostOpAlg::Hardswish:
      return false;
    case PostOpAlg::Linear:
      return op != "div";
    default:
      return true;
  }
}

namespace {

const std::vector<std::string> kOneDnnEpilogues = {"relu",      "gelu", "silu", "sigmoid", "tanh", "clamp",
                                                   "hardswish", "add",  "sub",  "mul",     "div"};

using Steps = std::vector<EpilogueStep>;
// Translates node n (reading chain) into steps, or sets why.
using Translate = std::function<Steps(const Graph& g, const Node& n, int chain, std::string& why)>;

EpilogueStep step(const Node& n, PostOpAlg alg, double alpha = 0, double beta = 0, int operand = -1) {
  EpilogueStep s;
  s.node = n.id;
  s.alg = alg;
  s.alpha = alpha;
  s.beta = beta;
  s.operand = operand;
  return s;
}

Translate unary(PostOpAlg alg, double alpha = 0, double beta = 0) {
  return [=](const Graph&, const Node& n, int, std::string&) { return Steps{step(n, alg, alpha, beta)}; };
}

double bound_of(const dsl::AttrValue& v) {
  if (const bool* b = std::get_if<bool>(&v)) return *b ? 1 : 0;
  if (const int64_t* i = std::get_if<int64_t>(&v)) return static_cast<double>(*i);
  return std::get<double>(v);
}

// chain (op) c, or c (op) chain when !chain_first, as eltwise linear (alpha * x + beta).
Steps scalar_steps(const Node& n, PostOpAlg alg, bool chain_first, double alpha, double c, std::string& why) {
  switch (alg) {
    case PostOpAlg::Add:
      return chain_first ? Steps{step(n, PostOpAlg::Linear, 1, alpha * c)}
                         : Steps{step(n, PostOpAlg::Linear, alpha, c)};
    case PostOpAlg::Sub:
      return chain_first ? Steps{step(n, PostOpAlg::Linear, 1, -alpha * c)}
                         : Steps{step(n, PostOpAlg::Linear, -alpha, c)};
    case PostOpAlg::Mul:
      return {step(n, PostOpAlg::Linear, c, 0)};
    case PostOpAlg::Div:
      if (!chain_first) return why = "division by the library output", Steps{};
      return {step(n, PostOpAlg::Linear, 1.0 / c, 0)};
    default:
      break;
  }
  return why = "unsupported binary epilogue", Steps{};
}

// add/sub/mul/div: a constant scalar becomes eltwise linear, a tensor a binary post-op.
Translate binary(PostOpAlg alg) {
  return [alg](const Graph& g, const Node& n, int chain, std::string& why) -> Steps {
    if (n.inputs.size() != 2) return why = "not a binary op", Steps{};
    if (n.inputs[0] == chain && n.inputs[1] == chain) return why = "epilogue reads the library output twice", Steps{};
    const bool chain_first = n.inputs[0] == chain;
    const int other = chain_first ? n.inputs[1] : n.inputs[0];
    double alpha = 1;
    if (const dsl::AttrValue* a = dsl::attr_find(n.attrs, "alpha")) alpha = bound_of(*a);
    const dsl::Value& ov = g.value(other);
    if (ov.kind == dsl::ValueKind::Constant) {  // a scalar: x op c (or c op x)
      Steps s = scalar_steps(n, alg, chain_first, alpha, ov.scalar, why);
      for (EpilogueStep& e : s) e.scalar = other;
      return s;
    }
    if (ov.type.dtype != dsl::DType::Float32) return why = "binary operand is not float32", Steps{};
    if (alpha != 1) return why = "alpha != 1 with a tensor operand", Steps{};
    if (chain_first) return {step(n, alg, 0, 0, other)};
    switch (alg) {
      case PostOpAlg::Add:
      case PostOpAlg::Mul:
        return {step(n, alg, 0, 0, other)};
      case PostOpAlg::Sub:
        return {step(n, PostOpAlg::Sub, 0, 0, other), step(n, PostOpAlg::Linear, -1, 0)};
      default:
        break;
    }
    return why = "division by the library output", Steps{};
  };
}

const std::map<std::string, Translate>& epilogue_table() {
  static const std::map<std::string, Translate> t = {
      {"relu", unary(PostOpAlg::Relu)},
      {"gelu",
       [](const Graph&, const Node& n, int, std::string&) {
         const dsl::AttrValue* a = dsl::attr_find(n.attrs, "approximate");
         const bool tanh = a && std::get<std::string>(*a) == "tanh";
         return Steps{step(n, tanh ? PostOpAlg::GeluTanh : PostOpAlg::GeluErf)};
       }},
      {"silu", unary(PostOpAlg::Swish, 1.0)},
      {"sigmoid", unary(PostOpAlg::Logistic)},
      {"tanh", unary(PostOpAlg::Tanh)},
      {"hardswish", unary(PostOpAlg::Hardswish)},
      {"clamp",
       [](const Graph&, const Node& n, int, std::string&) {
         const double inf = std::numeric_limits<double>::infinity();
         const dsl::AttrValue* lo = dsl::attr_find(n.attrs, "min");
         const dsl::AttrValue* hi = dsl::attr_find(n.attrs, "max");
         return Steps{step(n, PostOpAlg::Clip, lo ? bound_of(*lo) : -inf, hi ? bound_of(*hi) : inf)};
       }},
      {"add", binary(PostOpAlg::Add)},
      {"sub", binary(PostOpAlg::Sub)},
      {"mul", binary(PostOpAlg::Mul)},
      {"div", binary(PostOpAlg::Div)},
  };
  return t;
}

// ---- CUDA: cuDNN and cuBLASLt epilogues ------------------------------------------------------------

// The dim of the library output that a bias runs along: the channel dim of a convolution (last
// under channels_last), the last dim of a matrix product.
size_t bias_dim(const Node& lib, size_t rank) {
  if (is_convolution(lib.op)) {
    const dsl::AttrValue* cl = dsl::attr_find(lib.attrs, "channels_last");
    const int64_t* v = cl ? std::get_if<int64_t>(cl) : nullptr;
    if (v && *v != 0) return rank - 1;
    return rank == dsl::conv_spatial_rank(lib.op) + 2 ? 1 : 0;  // [N, C, spatial...] or unbatched [C, spatial...]
  }
  return rank - 1;
}

bool library_has_bias(const Node& lib) {
  return (is_convolution(lib.op) || lib.op == "linear") && lib.inputs.size() > 2;
}

// The CUDA epilogue grammar: y = act(lib(x) [+ bias] [+ residual]), each at most once, the
// activation last. cuDNN (conv2d) takes relu; cuBLASLt (matmul, linear) relu and the tanh GELU.
Steps cuda_epilogue(const Graph& g, const Node& lib, int chain, const Node& n, const std::vector<EpilogueStep>& so_far,
                    std::string& why) {
  const bool gemm = !is_convolution(lib.op);
  bool has_bias = library_has_bias(lib), has_residual = false, has_activation = false;
  for (const EpilogueStep& e : so_far) {
    if (e.alg == PostOpAlg::Add && e.scalar < 0) {
      const dsl::Shape& s = g.value(e.operand).type.shape;
      const dsl::Shape& out = g.value(lib.outputs.at(0)).type.shape;
      (s == out ? has_residual : has_bias) = true;
    } else {
      has_activation = true;
    }
  }
  if (has_activation) return why = "nothing follows the activation of a cuDNN/cuBLASLt epilogue", Steps{};
  if (n.op == "relu") return {step(n, PostOpAlg::Relu)};
  if (n.op == "gelu") {
    const dsl::AttrValue* a = dsl::attr_find(n.attrs, "approximate");
    if (!gemm) return why = "cuDNN's fused convolution takes relu only", Steps{};
    if (!(a && std::get<std::string>(*a) == "tanh"))
      return why = "cuBLASLt's GELU epilogue is the tanh approximation (approximate='tanh')", Steps{};
    return {step(n, PostOpAlg::GeluTanh)};
  }
  // add: a bias (one value per output channel / column) or a residual (the output's shape).
  if (n.inputs.size() != 2 || n.inputs[0] == n.inputs[1]) return why = "not an add of another tensor", Steps{};
  if (const dsl::AttrValue* a = dsl::attr_find(n.attrs, "alpha"); a && bound_of(*a) != 1)
    return why = "alpha != 1", Steps{};
  const int other = n.inputs[0] == chain ? n.inputs[1] : n.inputs[0];
  const dsl::Value& ov = g.value(other);
  const dsl::TensorType& out = g.value(lib.outputs.at(0)).type;
  if (ov.kind == dsl::ValueKind::Constant) return why = "a scalar add is not a cuDNN/cuBLASLt epilogue", Steps{};
  if (ov.type.dtype != out.dtype) return why = "the added tensor's dtype differs from the library output's", Steps{};
  if (ov.type.shape == out.shape) {
    if (has_residual) return why = "a second residual add", Steps{};
    return {step(n, PostOpAlg::Add, 0, 0, other)};
  }
  const dsl::Shape& s = ov.type.shape;
  const size_t bd = bias_dim(lib, out.shape.size());
  bool vector = s.size() <= out.shape.size();
  for (size_t i = 0; vector && i < s.size(); ++i) {
    const size_t d = out.shape.size() - s.size() + i;
    vector = d == bd ? s[i] == out.shape[d] : s[i] == 1;
  }
  if (!vector || s.empty() || out.shape[bd] != dsl::numel(s))
    return why = "the added tensor is neither a bias along dim " + std::to_string(bd) + " nor the output's shape",
           Steps{};
  if (has_bias) return why = "a second bias", Steps{};
  return {step(n, PostOpAlg::Add, 0, 0, other)};
}

const std::vector<std::string> kCudnnEpilogues = {"add", "relu"};
const std::vector<std::string> kCublasLtEpilogues = {"add", "relu", "gelu"};

}  // namespace

const std::vector<LibraryPattern>& library_patterns() {
  static const std::vector<LibraryPattern> table = {
      {"conv2d", dsl::Target::CPU, "oneDNN", kOneDnnEpilogues},
      {"conv_transpose2d", dsl::Target::CPU, "oneDNN", kOneDnnEpilogues},
      {"conv3d", dsl::Target::CPU, "oneDNN", kOneDnnEpilogues},
      {"conv_transpose3d", dsl::Target::CPU, "oneDNN", kOneDnnEpilogues},
      {"matmul", dsl::Target::CPU, "oneDNN", kOneDnnEpilogues},
      {"linear", dsl::Target::CPU, "oneDNN", kOneDnnEpilogues},
      {"conv2d", dsl::Target::CUDA, "cuDNN", kCudnnEpilogues},
      {"conv_transpose2d", dsl::Target::CUDA, "cuDNN", kCudnnEpilogues},
      {"conv3d", dsl::Target::CUDA, "cuDNN", kCudnnEpilogues},
      {"conv_transpose3d", dsl::Target::CUDA, "cuDNN", kCudnnEpilogues},
      {"matmul", dsl::Target::CUDA, "cuBLASLt", kCublasLtEpilogues},
      {"linear", dsl::Target::CUDA, "cuBLASLt", kCublasLtEpilogues},
      // flow's own sorts (dsl/ops/sort.cpp): nothing to absorb, the gather of the values is a
      // kernel of its own.
      {"argsort", dsl::Target::CPU, "flow sort", {}, /*flow_own=*/true},
      {"argsort", dsl::Target::CUDA, "flow sort", {}, /*flow_own=*/true},
      {"scatter", dsl::Target::CPU, "flow scatter", {}, /*flow_own=*/true},
      {"scatter", dsl::Target::CUDA, "flow scatter", {}, /*flow_own=*/true},
      {"embedding_bag", dsl::Target::CPU, "flow embedding_bag", {}, /*flow_own=*/true},
      {"embedding_bag", dsl::Target::CUDA, "flow embedding_bag", {}, /*flow_own=*/true},
  };
  return table;
}

bool is_convolution(const std::string& op) {
  return dsl::conv_spatial_rank(op) > 0;
}

const LibraryPattern* find_library_pattern(const std::string& op, dsl::Target target) {
  for (const LibraryPattern& p : library_patterns())
    if (p.op == op && p.target == target) return &p;
  return nullptr;
}

std::vector<EpilogueStep> match_epilogue(const Graph& g, const Node& lib, int chain, const Node& n, dsl::Target target,
                                         const std::vector<EpilogueStep>& so_far, std::string& why) {
  const LibraryPattern* pat = find_library_pattern(lib.op, target);
  if (!pat) {
    why = "no library epilogues for " + lib.op + " on " + dsl::target_name(target);
    return {};
  }

  bool listed = false;
  for (const std::string& op : pat->epilogue_ops) listed = listed || op == n.op;
  const auto& table = epilogue_table();
  const auto it = table.find(n.op);
  if (!listed || it == table.end()) {
    why = "'" + n.op + "' is not a " + pat->library + " post-op of " + lib.op;
    return {};
  }
  const dsl::TensorType& lib_t = g.value(lib.outputs.at(0)).type;
  const dsl::TensorType& out_t = g.value(n.outputs.at(0)).type;
  if (target == dsl::Target::CUDA) {
    if (out_t.dtype != lib_t.dtype || out_t.shape != lib_t.shape) {
      why = "the epilogue's output " + out_t.str() + " differs from the library output " + lib_t.str();
      return {};
    }
    if (lib_t.dtype == dsl::DType::Float64) {
      why = "float64 library calls take no epilogue";
      return {};
    }
    return cuda_epilogue(g, lib, chain, n, so_far, why);
  }
  if (lib_t.dtype != dsl::DType::Float32) {
    why = "library output is " + std::string(dsl::dtype_name(lib_t.dtype)) + ", post-ops need float32";
    return {};
  }
  if (out_t.dtype != dsl::DType::Float32) {
    why = "epilogue output is " + std::string(dsl::dtype_name(out_t.dtype)) + ", not float32";
    return {};
  }
  if (out_t.shape != lib_t.shape) {
    why = "epilogue shape " + dsl::shape_str(out_t.shape) + " differs from the library output " +
          dsl::shape_str(lib_t.shape);
    return {};
  }
  for (int in : n.inputs) {
    if (in == chain) continue;
    const dsl::Value& v = g.value(in);
    if (v.kind == dsl::ValueKind::Constant) continue;
    // A tensor operand: it must broadcast to the output (right-aligned, dims equal or 1).
    const dsl::Shape& s = v.type.shape;
    bool ok = s.size() <= out_t.shape.size();
    for (size_t i = 0; ok && i < s.size(); ++i) {
      const int64_t d = s[s.size() - 1 - i];
      ok = d == 1 || d == out_t.shape[out_t.shape.size() - 1 - i];
    }
    if (!ok) {
      why = "operand " + dsl::shape_str(s) + " does not broadcast to the output " + dsl::shape_str(out_t.shape);
      return {};
    }
  }
  std::vector<EpilogueStep> steps = it->second(g, n, chain, why);
  return steps;
}

}  // namespace flow::sched
