#include "dsl/graph_replay.h"

#include <utility>

namespace flow::dsl {

GraphReplay::GraphReplay(const Graph& from) : from_(from), map_(from.values().size(), -1) {
  for (int in : from.inputs()) map_[in] = out_.add_input(from.value(in).type, from.value(in).name);
  for (const Value& v : from.values())
    if (v.kind == ValueKind::Constant) map_[v.id] = out_.add_constant(v.scalar, v.type.dtype, v.wrapped_number);
}

void GraphReplay::copy(const Node& n) {
  std::vector<int> ins;
  ins.reserve(n.inputs.size());
  for (int i : n.inputs) ins.push_back(map_.at(i));
  std::vector<TensorType> types;
  for (int o : n.outputs) types.push_back(from_.value(o).type);
  const int id = out_.append_node(n.op, ins, types, n.attrs);
  for (size_t k = 0; k < n.outputs.size(); ++k) map_[n.outputs[k]] = out_.node(id).outputs[k];
}

Graph GraphReplay::finish() {
  for (int o : from_.outputs()) out_.mark_output(map_.at(o));
  return std::move(out_);
}

}  // namespace flow::dsl
