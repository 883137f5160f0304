#include "dsl/autocast.h"

#include <set>
#include <stdexcept>

#include "dsl/graph.h"

namespace flow::dsl {

AutocastDevice autocast_device_from_name(const std::string& name) {
  if (name == "cpu") return AutocastDevice::CPU;
  if (name == "cuda") return AutocastDevice::CUDA;
  throw std::invalid_argument("autocast: unknown device type '" + name + "' (expected 'cpu' or 'cuda')");
}

const char* autocast_class_name(AutocastClass c) {
  switch (c) {
    case AutocastClass::LowerPrecision:
      return "lower_precision_fp";
    case AutocastClass::Float32:
      return "fp32";
    case AutocastClass::Promote:
      return "promote";
    case AutocastClass::None:
      return "none";
  }
  return "?";
}

AutocastClass autocast_class(const std::string& op, AutocastDevice device) {
  // Names are graph ops (conv2d, matmul, softmax, ...) and the torch functions flow writes in Python
  // over them (mm, addmm, mse_loss, ...: python/flow/amp.py's autocast_op gives those their own
  // class, as torch's dispatcher does). Checked against torch 2.15: the CUDA lists are
  // AT_FORALL_LOWER_PRECISION_FP, AT_FORALL_FP32, AT_FORALL_FP32_SET_OPT_DTYPE and AT_FORALL_PROMOTE;
  // the CPU lists were read off torch.autocast("cpu") op by op.
  static const std::set<std::string> lower = {
      "conv2d", "conv_transpose2d", "conv3d", "conv_transpose3d", "matmul", "linear", "mm", "bmm", "addmm", "baddbmm"};
  static const std::set<std::string> lower_cuda = {"mv", "addmv"};  // CPU: not on torch's list
  static const std::set<std::string> fp32_cuda = {
      "exp", "expm1", "log", "log1p", "reciprocal", "rsqrt", "pow", "softplus", "layer_norm", "rms_norm", "group_norm",
      "norm", "logsumexp", "prod", "cumprod", "cumsum", "sum", "softmax", "log_softmax", "mse_loss", "l1_loss",
      "nll_loss", "cross_entropy",
      // the losses of python/flow/nn/_loss_functional.py on torch's list
      "binary_cross_entropy_with_logits", "kl_div", "huber_loss", "smooth_l1_loss", "soft_margin_loss",
      "margin_ranking_loss", "cosine_embedding_loss", "triplet_margin_loss", "poisson_nll_loss", "hinge_embedding_loss",
      "multi_margin_loss", "multilabel_margin_loss"};
  // CPU: torch's fp32 list is mostly losses, linear algebra and some pads; softmax, layer_norm, exp
  // and sum stay in the lower type.
  static const std::set<std::string> fp32_cpu = {
      "prod", "mse_loss", "l1_loss", "nll_loss", "cross_entropy", "pad_reflect", "pad_replicate",
      // and the other losses (binary_cross_entropy: CPU only;
      // torch refuses it under CUDA autocast)
      "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div", "huber_loss", "smooth_l1_loss",
      "soft_margin_loss", "margin_ranking_loss", "cosine_embedding_loss", "triplet_margin_loss", "poisson_nll_loss",
      "hinge_embedding_loss", "multi_margin_loss", "multilabel_margin_loss"};
  static const std::set<std::string> promote_cuda = {"dot"};
  const bool cuda = device == AutocastDevice::CUDA;
  if (lower.count(op) || (cuda && lower_cuda.count(op))) return AutocastClass::LowerPrecision;
  if ((cuda ? fp32_cuda : fp32_cpu).count(op)) return AutocastClass::Float32;
  if (cuda && promote_cuda.count(op)) return AutocastClass::Promote;
  return AutocastClass::None;
}

std::vector<int> autocast_inputs(Graph& g, const std::string& op, const std::vector<int>& inputs,
                                 const AutocastPolicy& policy) {
  const AutocastClass cls = autocast_class(op, policy.device);
  if (cls == AutocastClass::None) return inputs;
  // Promote: the widest floating type among the tensor inputs (float16 with bfloat16: float32).
  bool f16 = false, bf16 = false, f32 = false;
  for (int v : inputs) {
    if (g.value(v).kind == ValueKind::Constant) continue;
    const DType t = g.value(v).type.dtype;
    f16 = f16 || t == DType::Float16;
    bf16 = bf16 || t == DType::BFloat16;
    f32 = f32 || t == DType::Float32;
  }
  const DType widest = f32 || (f16 && bf16) ? DType::Float32 : bf16 ? DType::BFloat16 : DType::Float16;
  std::vector<int> out = inputs;
  for (int& v : out) {
    const DType t = g.value(v).type.dtype;
    if (!is_floating(t) || t == DType::Float64) continue;
    DType want = t;
    if (cls == AutocastClass::LowerPrecision) want = policy.dtype;
    if (cls == AutocastClass::Float32 && is_half(t)) want = DType::Float32;
    if (cls == AutocastClass::Promote && g.value(v).kind != ValueKind::Constant) want = widest;
    if (want != t) v = g.autocast_cast(v, want);
  }
  return out;
}

}  // namespace flow::dsl
