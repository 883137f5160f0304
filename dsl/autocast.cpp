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
    case AutocastClass::None:
      return "none";
  }
  return "?";
}

AutocastClass autocast_class(const std::string& op, AutocastDevice device) {
  // torch's AT_FORALL_LOWER_PRECISION_FP (both devices), restricted to flow's ops.
  static const std::set<std::string> lower = {"conv2d", "conv_transpose2d", "matmul", "linear"};
  // CUDA: torch's AT_FORALL_FP32 and AT_FORALL_FP32_SET_OPT_DTYPE lists, restricted to flow's ops.
  static const std::set<std::string> fp32_cuda = {
      "exp",        "expm1", "log",       "log1p", "reciprocal", "rsqrt",  "pow", "softplus", "layer_norm", "rms_norm",
      "group_norm", "norm",  "logsumexp", "prod",  "cumprod",    "cumsum", "sum", "softmax",  "log_softmax"};
  // CPU: torch's CPU fp32 list is mostly losses and linear algebra; of flow's ops only prod is on it
  // (checked against torch 2.15: softmax, layer_norm, exp and sum stay in the lower type).
  static const std::set<std::string> fp32_cpu = {"prod"};
  if (lower.count(op)) return AutocastClass::LowerPrecision;
  const auto& fp32 = device == AutocastDevice::CUDA ? fp32_cuda : fp32_cpu;
  if (fp32.count(op)) return AutocastClass::Float32;
  return AutocastClass::None;
}

std::vector<int> autocast_inputs(Graph& g, const std::string& op, const std::vector<int>& inputs,
                                 const AutocastPolicy& policy) {
  const AutocastClass cls = autocast_class(op, policy.device);
  if (cls == AutocastClass::None) return inputs;
  std::vector<int> out = inputs;
  for (int& v : out) {
    const DType t = g.value(v).type.dtype;
    DType want = t;
    if (cls == AutocastClass::LowerPrecision && is_floating(t) && t != DType::Float64) want = policy.dtype;
    if (cls == AutocastClass::Float32 && is_half(t)) want = DType::Float32;
    if (want != t) v = g.add("cast", {v}, {{"dtype", std::string(dtype_name(want))}});
  }
  return out;
}

}  // namespace flow::dsl
