#include "scheduler/fold_pad.h"

#include <algorithm>
#include <vector>

#include "dsl/graph_replay.h"
#include "dsl/op_table.h"

namespace flow::sched {
namespace {

// The forward convolutions a pad folds into, and their spatial rank (0: not one).
size_t forward_conv_rank(const std::string& op) {
  return dsl::is_transposed_conv(op) ? 0 : dsl::conv_spatial_rank(op);
}

// Per spatial dim (outermost first), the low and high amounts of a zero pad of `nsp` spatial dims
// that folds, or false. torch's pads run from the last dim: [w_lo, w_hi, h_lo, h_hi, d_lo, d_hi,
// ...]; a pad of a channel or batch dim, a crop (a negative amount) or a nonzero value does not.
bool spatial_zero_pad(const dsl::Graph& g, const dsl::Node& pad, size_t nsp, std::vector<int64_t>& lo,
                      std::vector<int64_t>& hi) {
  if (pad.op != "pad" || pad.inputs.size() != 1) return false;
  const dsl::AttrValue* v = dsl::attr_find(pad.attrs, "value");
  if (v && !(std::holds_alternative<double>(*v) && std::get<double>(*v) == 0.0)) return false;
  const std::vector<int64_t> pads = dsl::attr_ints(pad.attrs, "pads", "pad");
  if (g.value(pad.inputs[0]).type.shape.size() < nsp + 1) return false;
  for (size_t i = 2 * nsp; i < pads.size(); ++i)
    if (pads[i] != 0) return false;
  lo.assign(nsp, 0);
  hi.assign(nsp, 0);
  for (size_t i = 0; i < pads.size() && i < 2 * nsp; ++i) {
    if (pads[i] < 0) return false;
    (i % 2 == 0 ? lo : hi)[nsp - 1 - i / 2] = pads[i];
  }
  return true;
}

}  // namespace

PadFoldResult fold_pad_into_conv(const dsl::Graph& g, dsl::Target target) {
  PadFoldResult r;
  // The pad a conv's input comes from, directly or through one cast (autocast's, dsl/autocast.h:
  // pad -> cast -> conv; a cast of zero is zero), and that cast node (-1 when direct).
  auto source = [&](const dsl::Node& n, std::vector<int64_t>& lo, std::vector<int64_t>& hi,
                    int& cast) -> const dsl::Node* {
    cast = -1;
    const size_t nsp = forward_conv_rank(n.op);
    if (nsp == 0 || n.inputs.empty() || g.value(n.inputs[0]).kind != dsl::ValueKind::OpResult) return nullptr;
    const dsl::Node* p = &g.node(g.value(n.inputs[0]).producer);
    if (p->op == "cast" && g.value(p->inputs[0]).kind == dsl::ValueKind::OpResult) {
      cast = p->id;
      p = &g.node(g.value(p->inputs[0]).producer);
    }
    return spatial_zero_pad(g, *p, nsp, lo, hi) ? p : nullptr;
  };
  // A convolution's fold: the pad it reads (null when it does not fold), the cast in between (-1
  // when none), and its padding after the fold (begin, end). cuDNN's convolution pads
  // symmetrically, so on CUDA only a fold that keeps the padding symmetric is made.
  struct Fold {
    const dsl::Node* pad = nullptr;
    int cast = -1;
    std::vector<int64_t> begin, end;
  };
  auto plan_fold = [&](const dsl::Node& n) {
    Fold f;
    std::vector<int64_t> lo, hi;
    const dsl::Node* pad = source(n, lo, hi, f.cast);
    if (pad == nullptr) return f;
    f.begin = dsl::attr_ints(n.attrs, "padding", n.op);
    f.end = dsl::attr_find(n.attrs, "padding_end") ? dsl::attr_ints(n.attrs, "padding_end", n.op) : f.begin;
    for (size_t d = 0; d < f.begin.size(); ++d) {
      f.begin[d] += lo[d];
      f.end[d] += hi[d];
    }
    if (target != dsl::Target::CUDA || f.begin == f.end) f.pad = pad;
    return f;
  };
  std::vector<Fold> folds(g.nodes().size());
  std::vector<bool> folding(g.nodes().size(), false);
  for (const dsl::Node& n : g.nodes()) {
    folds[n.id] = plan_fold(n);
    folding[n.id] = folds[n.id].pad != nullptr;
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
  // Whether node `n` is a pad that some convolution folds (of its own spatial rank, or any).
  auto foldable_pad = [&](const dsl::Node& n) {
    std::vector<int64_t> lo, hi;
    return spatial_zero_pad(g, n, 2, lo, hi) || spatial_zero_pad(g, n, 3, lo, hi);
  };
  // Dead after the rewrite: a cast between a pad and folding convs whose every reader folds, and a
  // pad whose every reader folds or is such a cast.
  std::vector<bool> dead(g.nodes().size(), false);
  for (const dsl::Node& n : g.nodes()) {
    if (n.op != "cast" || g.value(n.inputs[0]).kind != dsl::ValueKind::OpResult) continue;
    if (foldable_pad(g.node(g.value(n.inputs[0]).producer))) dead[n.id] = all_fold(n.outputs[0]);
  }
  for (const dsl::Node& n : g.nodes()) {
    if (!foldable_pad(n)) continue;
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
    if (!folding[n.id]) {
      replay.copy(n);
      continue;
    }
    const Fold& f = folds[n.id];
    dsl::Attrs a = n.attrs;
    a["padding"] = f.begin;
    a.erase("padding_end");
    if (f.end != f.begin) a["padding_end"] = f.end;
    std::vector<int> ins;
    for (int i : n.inputs) ins.push_back(replay[i]);
    ins[0] = replay[f.pad->inputs[0]];
    if (f.cast >= 0) ins[0] = replay.out().add("cast", {ins[0]}, g.node(f.cast).attrs);  // the cast, before the pad
    replay.set(n.outputs[0], replay.out().add(n.op, ins, a));
    ++r.folded;
  }
  r.graph = replay.finish();
  return r;
}

}  // namespace flow::sched
