#include "scheduler/fold_pad.h"

#include <algorithm>
#include <vector>

namespace flow::sched {
namespace {

// The (top, left, bottom, right) amounts of a foldable pad node, or false.
bool spatial_zero_pad(const dsl::Graph& g, const dsl::Node& pad, int64_t out[4]) {
  if (pad.op != "pad" || pad.inputs.size() != 1) return false;
  const dsl::AttrValue* v = dsl::attr_find(pad.attrs, "value");
  if (v && !(std::holds_alternative<double>(*v) && std::get<double>(*v) == 0.0)) return false;
  const std::vector<int64_t> pads = dsl::attr_ints(pad.attrs, "pads", "pad");
  if (g.value(pad.inputs[0]).type.shape.size() < 3) return false;
  for (size_t i = 4; i < pads.size(); ++i)
    if (pads[i] != 0) return false;  // a pad of the channel or batch dim
  int64_t p[4] = {0, 0, 0, 0};       // l, r, t, b
  for (size_t i = 0; i < pads.size() && i < 4; ++i) p[i] = pads[i];
  for (int64_t x : p)
    if (x < 0) return false;
  out[0] = p[2];
  out[1] = p[0];
  out[2] = p[3];
  out[3] = p[1];
  return true;
}

}  // namespace

PadFoldResult fold_pad_into_conv(const dsl::Graph& g) {
  PadFoldResult r;
  // Which convolutions fold their input pad, and which pads are then dead (every reader folded it).
  auto folds = [&](const dsl::Node& n, int64_t amount[4]) {
    if (n.op != "conv2d" || n.inputs.empty() || g.value(n.inputs[0]).kind != dsl::ValueKind::OpResult) return false;
    return spatial_zero_pad(g, g.node(g.value(n.inputs[0]).producer), amount);
  };
  std::vector<bool> dead(g.nodes().size(), false);
  for (const dsl::Node& n : g.nodes()) {
    int64_t amount[4];
    if (!spatial_zero_pad(g, n, amount)) continue;
    const int v = n.outputs[0];
    bool all = true;
    for (int o : g.outputs()) all = all && o != v;
    for (int c : g.consumers(v)) {
      const dsl::Node& cn = g.node(c);
      all = all && folds(cn, amount) && cn.inputs[0] == v && std::count(cn.inputs.begin(), cn.inputs.end(), v) == 1;
    }
    dead[n.id] = all;
  }
  dsl::Graph& out = r.graph;
  std::vector<int> map(g.values().size(), -1);
  for (int in : g.inputs()) map[in] = out.add_input(g.value(in).type, g.value(in).name);
  for (const auto& v : g.values())
    if (v.kind == dsl::ValueKind::Constant) map[v.id] = out.add_constant(v.scalar, v.type.dtype, v.wrapped_number);
  for (const dsl::Node& n : g.nodes()) {
    std::vector<int> ins;
    for (int i : n.inputs) ins.push_back(map[i]);
    if (dead[n.id]) continue;
    int64_t amount[4];
    if (folds(n, amount)) {
      const int producer = g.value(n.inputs[0]).producer;
      const std::vector<int64_t> pad = dsl::attr_ints(n.attrs, "padding", "conv2d");
      std::vector<int64_t> end = pad;
      if (dsl::attr_find(n.attrs, "padding_end")) end = dsl::attr_ints(n.attrs, "padding_end", "conv2d");
      dsl::Attrs a = n.attrs;
      const std::vector<int64_t> begin{pad[0] + amount[0], pad[1] + amount[1]};
      const std::vector<int64_t> finish{end[0] + amount[2], end[1] + amount[3]};
      a["padding"] = begin;
      a.erase("padding_end");
      if (finish != begin) a["padding_end"] = finish;
      ins[0] = map[g.node(producer).inputs[0]];
      map[n.outputs[0]] = out.add("conv2d", ins, a);
      ++r.folded;
      continue;
    }
    std::vector<dsl::TensorType> types;
    for (int o : n.outputs) types.push_back(g.value(o).type);
    const int id = out.append_node(n.op, ins, types, n.attrs);
    for (size_t k = 0; k < n.outputs.size(); ++k) map[n.outputs[k]] = out.node(id).outputs[k];
  }
  for (int o : g.outputs()) out.mark_output(map[o]);
  return r;
}

}  // namespace flow::sched
