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

PadFoldResult fold_pad_into_conv(const dsl::Graph& g, dsl::Target target) {
  PadFoldResult r;
  // The pad a conv's input comes from, directly or through one cast (autocast's, dsl/autocast.h:
  // pad -> cast -> conv; a cast of zero is zero), and that cast node (-1 when direct).
  auto source = [&](const dsl::Node& n, int64_t amount[4], int& cast) -> const dsl::Node* {
    cast = -1;
    if (n.op != "conv2d" || n.inputs.empty() || g.value(n.inputs[0]).kind != dsl::ValueKind::OpResult) return nullptr;
    const dsl::Node* p = &g.node(g.value(n.inputs[0]).producer);
    if (p->op == "cast" && g.value(p->inputs[0]).kind == dsl::ValueKind::OpResult) {
      cast = p->id;
      p = &g.node(g.value(p->inputs[0]).producer);
    }
    return spatial_zero_pad(g, *p, amount) ? p : nullptr;
  };
  // Which convolutions fold their input pad. cuDNN's convolution pads symmetrically, so on CUDA
  // only a fold that keeps the padding symmetric is made.
  auto folds = [&](const dsl::Node& n, int64_t amount[4]) {
    int cast = -1;
    if (!source(n, amount, cast)) return false;
    if (target != dsl::Target::CUDA) return true;
    const std::vector<int64_t> pad = dsl::attr_ints(n.attrs, "padding", "conv2d");
    const std::vector<int64_t> end =
        dsl::attr_find(n.attrs, "padding_end") ? dsl::attr_ints(n.attrs, "padding_end", "conv2d") : pad;
    return pad[0] + amount[0] == end[0] + amount[2] && pad[1] + amount[1] == end[1] + amount[3];
  };
  std::vector<bool> folding(g.nodes().size(), false);
  for (const dsl::Node& n : g.nodes()) {
    int64_t amount[4];
    folding[n.id] = folds(n, amount);
  }
  if (std::find(folding.begin(), folding.end(), true) == folding.end()) return r;
  auto is_output = [&](int v) { return std::find(g.outputs().begin(), g.outputs().end(), v) != g.outputs().end(); };
  // A value every reader of which folds it (as its conv input, once), and that is not an output.
  auto all_fold = [&](int v) {
    bool all = !is_output(v);
    for (int c : g.consumers(v)) {
      const dsl::Node& cn = g.node(c);
      all = all && folding[c] && cn.inputs[0] == v && std::count(cn.inputs.begin(), cn.inputs.end(), v) == 1;
    }
    return all;
  };
  // Dead after the rewrite: a cast between a pad and folding convs whose every reader folds, and a
  // pad whose every reader folds or is such a cast.
  std::vector<bool> dead(g.nodes().size(), false);
  for (const dsl::Node& n : g.nodes()) {
    if (n.op != "cast" || g.value(n.inputs[0]).kind != dsl::ValueKind::OpResult) continue;
    int64_t amount[4];
    if (spatial_zero_pad(g, g.node(g.value(n.inputs[0]).producer), amount)) dead[n.id] = all_fold(n.outputs[0]);
  }
  for (const dsl::Node& n : g.nodes()) {
    int64_t amount[4];
    if (!spatial_zero_pad(g, n, amount)) continue;
    const int v = n.outputs[0];
    bool all = !is_output(v);
    for (int c : g.consumers(v)) {
      const dsl::Node& cn = g.node(c);
      const bool folded_here =
          folding[c] && cn.inputs[0] == v && std::count(cn.inputs.begin(), cn.inputs.end(), v) == 1;
      all = all && (folded_here || dead[c]);
    }
    dead[n.id] = all;
  }
  dsl::GraphReplay replay(g);
  for (const dsl::Node& n : g.nodes()) {
    if (dead[n.id]) continue;
    int64_t amount[4];
    int cast = -1;
    if (!folding[n.id] || !folds(n, amount)) {
      replay.copy(n);
      continue;
    }
    const dsl::Node& pad_node = *source(n, amount, cast);
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
    ins[0] = replay[pad_node.inputs[0]];
    if (cast >= 0) ins[0] = replay.out().add("cast", {ins[0]}, g.node(cast).attrs);  // the cast, before the pad
    replay.set(n.outputs[0], replay.out().add("conv2d", ins, a));
    ++r.folded;
  }
  r.graph = replay.finish();
  return r;
}

}  // namespace flow::sched
