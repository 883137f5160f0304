#include "jit/layouts.h"

#include <stdexcept>

#include "dsl/graph_replay.h"

namespace flow::jit {

using dsl::Graph;
using dsl::Layout;

namespace {

Layout input_layout(const Graph& g, size_t i, const std::vector<std::vector<int64_t>>& input_strides) {
  const auto& shape = g.value(g.inputs()[i]).type.shape;
  Layout l = dsl::contiguous_layout(shape);
  if (i < input_strides.size() && !input_strides[i].empty()) l.strides = input_strides[i];
  return l;
}

}  // namespace

Graph materialize_unviewable(const Graph& g, const std::vector<std::vector<int64_t>>& input_strides) {
  // Fast path: is every view viewable?
  bool all_ok = true;
  {
    std::vector<Layout> lay(g.values().size());
    for (size_t i = 0; i < g.inputs().size(); ++i) lay[g.inputs()[i]] = input_layout(g, i, input_strides);
    for (const auto& n : g.nodes()) {
      const auto& def = dsl::lookup_op(n.op);
      for (int o : n.outputs) lay[o] = dsl::contiguous_layout(g.value(o).type.shape);
      if (def.pattern != dsl::OpPattern::View) continue;
      auto l = def.view(lay[n.inputs[0]], n.attrs);
      if (!l) {
        all_ok = false;
        break;
      }
      lay[n.outputs[0]] = *l;
    }
  }
  if (all_ok) return g;

  dsl::GraphReplay replay(g);  // inputs and constants; every node re-added through add_op below
  Graph& out = replay.out();
  std::vector<Layout> lay(out.values().size());
  for (size_t i = 0; i < g.inputs().size(); ++i) lay[replay[g.inputs()[i]]] = input_layout(g, i, input_strides);
  for (const auto& n : g.nodes()) {
    std::vector<int> ins;
    for (int i : n.inputs) ins.push_back(replay[i]);
    const auto& def = dsl::lookup_op(n.op);
    if (def.pattern == dsl::OpPattern::View && ins.size() == 1 &&
        !def.view(lay.size() > static_cast<size_t>(ins[0]) ? lay[ins[0]] : Layout{}, n.attrs)) {
      ins[0] = out.add("cast", {ins[0]}, {{"dtype", std::string(dsl::dtype_name(out.value(ins[0]).type.dtype))}});
      lay.resize(out.values().size());
      lay[ins[0]] = dsl::contiguous_layout(out.value(ins[0]).type.shape);
    }
    const auto outs = out.add_op(n.op, ins, n.attrs);
    lay.resize(out.values().size());
    for (size_t k = 0; k < outs.size(); ++k) {
      replay.set(n.outputs[k], outs[k]);
      lay[outs[k]] = def.pattern == dsl::OpPattern::View ? *def.view(lay[ins[0]], n.attrs)
                                                         : dsl::contiguous_layout(out.value(outs[k]).type.shape);
    }
  }
  return replay.finish();
}

ValueLayouts compute_layouts(const Graph& g, const std::vector<std::vector<int64_t>>& input_strides) {
  ValueLayouts vl;
  const size_t n = g.values().size();
  vl.root.resize(n);
  vl.layout.resize(n);
  vl.is_view.assign(n, false);
  for (size_t v = 0; v < n; ++v) {
    vl.root[v] = static_cast<int>(v);
    vl.layout[v] = dsl::contiguous_layout(g.value(static_cast<int>(v)).type.shape);
  }
  for (size_t i = 0; i < g.inputs().size(); ++i) vl.layout[g.inputs()[i]] = input_layout(g, i, input_strides);
  for (const auto& node : g.nodes()) {
    const auto& def = dsl::lookup_op(node.op);
    if (def.pattern != dsl::OpPattern::View) continue;
    const int src = node.inputs.at(0);
    auto l = def.view(vl.layout[src], node.attrs);
    if (!l) throw std::logic_error("view '" + node.op + "' of a non-viewable layout (materialize_unviewable first)");
    const int o = node.outputs.at(0);
    vl.layout[o] = *l;
    vl.root[o] = vl.root[src];
    vl.is_view[o] = true;
  }
  return vl;
}

}  // namespace flow::jit
