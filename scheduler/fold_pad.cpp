#include "scheduler/fold_pad.h"

#include <algorithm>
#include <vector>

#include "dsl/graph_replay.h"

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
  std::vector<bool> folding(g.nodes().size(), false);
  for (const dsl::Node& n : g.nodes()) {
    int64_t amount[4];
    folding[n.id] = folds(n, amount);
  }
  if (std::find(folding.begin(), folding.end(), true) == folding.end()) return r;
  std::vector<bool> dead(g.nodes().size(), false);
  for (const dsl::Node& n : g.nodes()) {
    int64_t amount[4];
    if (!spatial_zero_pad(g, n, amount)) continue;
    const int v = n.outputs[0];
    bool all = std::find(g.outputs().begin(), g.outputs().end(), v) == g.outputs().end();
    for (int c : g.consumers(v)) {
      const dsl::Node& cn = g.node(c);
      all = all && folding[c] && cn.inputs[0] == v && std::count(cn.inputs.begin(), cn.inputs.end(), v) == 1;
    }
    dead[n.id] = all;
  }
  dsl::GraphReplay replay(g);
  for (const dsl::Node& n : g.nodes()) {
    if (dead[n.id]) continue;
    int64_t amount[4];
    if (!folding[n.id] || !folds(n, amount)) {
      replay.copy(n);
      continue;
    }
    const std::vector<int64_t> pad = dsl::attr_ints(n.attrs, "padding", "conv2d");
    const std::vector<int64_t> end =
        dsl::attr_find(n.attrs, "padding_end") ? dsl::attr_ints(n.attrs, "padding_end", "conv2d") : pad;
    dsl::Attrs a = n.attrs;
    const std::vector<int64_t> begin{pad[0] + amount[0], pad[1] + amount[1]};
    const std::vector<int64_t> finish{end[0] + amount[2], end[1] + amount[3]};
    a["padding"] = begin;
    a.erase("padding_end");
    if (finish != begin) a["padding_end"] = finish;
    std::vector<int> ins;
    for (int i : n.inputs) ins.push_back(replay[i]);
    ins[0] = replay[g.node(g.value(n.inputs[0]).producer).inputs[0]];
    replay.set(n.outputs[0], replay.out().add("conv2d", ins, a));
    ++r.folded;
  }
  r.graph = replay.finish();
  return r;
}

}  // namespace flow::sched
