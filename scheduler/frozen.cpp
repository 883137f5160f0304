#include "scheduler/frozen.h"

#include <stdexcept>

namespace flow::sched {

std::vector<bool> frozen_values(const dsl::Graph& g, const std::vector<bool>& frozen_inputs) {
  std::vector<bool> frozen(g.values().size(), false);
  if (frozen_inputs.empty()) return frozen;
  if (frozen_inputs.size() != g.inputs().size())
    throw std::invalid_argument("frozen_values: " + std::to_string(frozen_inputs.size()) + " flags for " +
                                std::to_string(g.inputs().size()) + " graph inputs");
  bool any = false;
  for (size_t i = 0; i < frozen_inputs.size(); ++i) {
    frozen[g.inputs()[i]] = frozen_inputs[i];
    any = any || frozen_inputs[i];
  }
  if (!any) return frozen;
  for (const auto& v : g.values())
    if (v.kind == dsl::ValueKind::Constant) frozen[v.id] = true;
  for (const auto& n : g.nodes()) {
    bool all = true;
    for (int in : n.inputs) all = all && frozen[in];
    for (int o : n.outputs) frozen[o] = all;
  }
  return frozen;
}

}  // namespace flow::sched
