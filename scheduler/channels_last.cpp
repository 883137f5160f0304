#include "scheduler/channels_last.h"

#include <algorithm>
#include <vector>

#include "dsl/graph_replay.h"
#include "dsl/op_table.h"
#include "scheduler/library_patterns.h"

namespace flow::sched {
namespace {

const std::vector<int64_t> kToNchw{0, 3, 1, 2};  // permute dims: NHWC value -> NCHW view
const std::vector<int64_t> kToNhwc{0, 2, 3, 1};  // permute dims: NCHW value -> NHWC view
constexpr int64_t kNhwcPos[4] = {0, 3, 1, 2};    // where NCHW dim d sits in NHWC order

// CPU: float32 and half convolutions (oneDNN's brgconv; bf16 on AVX-512/AMX). CUDA: half-precision
// ones (cuDNN's tensor-core kernels want NHWC; its float32 kernels run NCHW as fast, so those stay),
// transposed ones included (cuDNN's backward data), so that a U-Net decoder's upsampling between
// NHWC convolutions needs no transposes. Transposed convolutions stay NCHW on the CPU, where
// oneDNN 2.6's NHWC deconvolution was not measured.
bool convertible_conv(const dsl::Graph& g, const dsl::Node& n, dsl::Target target) {
  if (dsl::conv_spatial_rank(n.op) != 2 || dsl::attr_find(n.attrs, "channels_last")) return false;
  if (dsl::is_transposed_conv(n.op) && target != dsl::Target::CUDA) return false;
  const dsl::TensorType& x = g.value(n.inputs[0]).type;
  if (x.shape.size() != 4) return false;
  return target == dsl::Target::CUDA ? dsl::is_half(x.dtype) : x.dtype == dsl::DType::Float32 || dsl::is_half(x.dtype);
}

// An operand smaller than the output (a per-channel bias, a scalar): read in NHWC order through a
// permuted view, which costs nothing. A full-size NCHW operand would be a transposing read.
bool broadcast_operand(const dsl::Graph& g, int v, const dsl::Shape& out) {
  const dsl::Shape& s = g.value(v).type.shape;
  return s.size() <= 4 && dsl::numel(s) < dsl::numel(out);
}

// Whether every reader of `v` is a convolution allowed to go NHWC, reading it as its input, and `v`
// is not a graph output.
bool feeds_only_nhwc_convs(const dsl::Graph& g, int v, const std::vector<bool>& allowed) {
  if (std::find(g.outputs().begin(), g.outputs().end(), v) != g.outputs().end()) return false;
  const std::vector<int> readers = g.consumers(v);
  if (readers.empty()) return false;
  for (int c : readers) {
    const dsl::Node& n = g.node(c);
    if (!allowed[c] || n.inputs[0] != v || std::count(n.inputs.begin(), n.inputs.end(), v) != 1) return false;
  }
  return true;
}

// Whether view `n` of an NHWC value's NCHW view is better served by NCHW data: a reshape that the
// NHWC buffer cannot alias (it would copy the value back to NCHW order, a transposing read), or one
// that splits the channels into groups (group norm's [N, G, C/G, H*W]: its reductions would then
// read each group's 4-16 channels strided across the image; UNet-style blocks ran 3x slower).
bool view_prefers_nchw(const dsl::Graph& g, const dsl::Node& n, int v) {
  if (n.op != "reshape" && n.op != "view") return false;
  const dsl::OpDef& def = dsl::lookup_op(n.op);
  const dsl::Shape& s = g.value(v).type.shape;  // [N, C, H, W] of a [N, H, W, C] buffer
  const dsl::Layout nhwc_view{s, {s[1] * s[2] * s[3], 1, s[3] * s[1], s[1]}, 0};
  if (!def.view(nhwc_view, n.attrs).has_value()) return true;
  int64_t prefix = 1;
  for (int64_t d : g.value(n.outputs[0]).type.shape) {
    prefix *= d;
    if (prefix > s[0] && prefix < s[0] * s[1] && (s[0] * s[1]) % prefix == 0) return true;  // inside C
  }
  return false;
}

// A channels-last permute: an NCHW view of an [N, H, W, C] value.
bool nchw_view_of_nhwc(const dsl::Graph& g, const dsl::Node& n) {
  return n.op == "permute" && g.value(n.inputs[0]).type.shape.size() == 4 &&
         dsl::attr_ints(n.attrs, "dims", "permute") == kToNchw;
}

// Which nodes run on NHWC values, given the convolutions allowed to and the graph inputs that are
// NHWC buffers: a forward pass over the graph.
std::vector<bool> plan(const dsl::Graph& g, const std::vector<bool>& allowed, const std::vector<bool>& nhwc_inputs,
                       const std::vector<bool>& seed_nodes) {
  std::vector<bool> node_nhwc(g.nodes().size(), false), value_nhwc(g.values().size(), false);
  for (size_t i = 0; i < nhwc_inputs.size(); ++i) value_nhwc[g.inputs()[i]] = nhwc_inputs[i];
  for (const dsl::Node& n : g.nodes()) {
    if (n.outputs.size() != 1) continue;
    const int v = n.outputs[0];
    const dsl::Shape& shape = g.value(v).type.shape;
    bool ok = false;
    if (allowed[n.id] || seed_nodes[n.id]) {
      ok = true;
    } else if (shape.size() == 4 && !n.inputs.empty() && value_nhwc[n.inputs[0]] &&
               (n.op == "slice" || n.op == "index_select" || (n.op == "pad" && n.inputs.size() == 1))) {
      // index_select along H or W: nearest and bilinear resizing's row and column taps.
      ok = true;
    } else if (shape.size() == 4 && n.op == "cat") {
      // A concatenation of NHWC values (DenseNet's feature maps): its other inputs are read
      // through an NHWC view, a transposing read.
      ok = std::any_of(n.inputs.begin(), n.inputs.end(), [&](int i) { return value_nhwc[i]; });
    } else if (n.op == "cast" && shape.size() == 4 && feeds_only_nhwc_convs(g, v, allowed)) {
      // autocast's cast of an NCHW input read only by NHWC convolutions: it writes NHWC (a
      // transposing read), so the convolution needs no copy of its input into its layout.
      ok = true;
    } else if (shape.size() == 4 && dsl::lookup_op(n.op).pattern == dsl::OpPattern::Elementwise) {
      bool any = false;
      ok = true;
      for (int i : n.inputs) {
        if (value_nhwc[i] && g.value(i).type.shape == shape) {
          any = true;
        } else if (!broadcast_operand(g, i, shape)) {
          ok = false;
        }
      }
      ok = ok && any;
    }
    node_nhwc[n.id] = ok;
    value_nhwc[v] = ok;
  }
  return node_nhwc;
}

}  // namespace

ChannelsLastResult to_channels_last(const dsl::Graph& g, dsl::Target target, std::vector<bool> nhwc_inputs,
                                    bool convolutions) {
  ChannelsLastResult r;
  nhwc_inputs.resize(g.inputs().size(), false);
  std::vector<bool> seed_nodes(g.nodes().size(), false);
  for (const dsl::Node& n : g.nodes()) seed_nodes[n.id] = nchw_view_of_nhwc(g, n);
  // as_strided addresses the buffer at the root of its input's views, as it was when traced: a
  // seed it reaches through views (or directly) stays as it is, with the views after it.
  for (const dsl::Node& n : g.nodes()) {
    if (n.op != "as_strided") continue;
    for (int v = n.inputs[0];;) {
      const dsl::Value& val = g.value(v);
      if (val.kind == dsl::ValueKind::Input) {
        for (size_t i = 0; i < nhwc_inputs.size(); ++i)
          if (g.inputs()[i] == v) nhwc_inputs[i] = false;
        break;
      }
      if (val.kind != dsl::ValueKind::OpResult) break;
      const dsl::Node& p = g.node(val.producer);
      if (dsl::lookup_op(p.op).pattern != dsl::OpPattern::View) break;
      seed_nodes[p.id] = false;
      v = p.inputs[0];
    }
  }
  const bool seeded = std::find(nhwc_inputs.begin(), nhwc_inputs.end(), true) != nhwc_inputs.end() ||
                      std::find(seed_nodes.begin(), seed_nodes.end(), true) != seed_nodes.end();
  // Convert every eligible convolution, then drop those whose NHWC result (or a value computed
  // from it in NHWC) an elementwise op would still read in NCHW: that op would lose the post-op
  // fusion and read its input transposed. Repeat until nothing changes.
  std::vector<bool> allowed(g.nodes().size(), false);
  for (const dsl::Node& n : g.nodes()) allowed[n.id] = convolutions && convertible_conv(g, n, target);
  std::vector<bool> nhwc_node;
  for (;;) {
    nhwc_node = plan(g, allowed, nhwc_inputs, seed_nodes);
    // The convolutions an NHWC value comes from, through NHWC nodes (each node visited once).
    std::vector<bool> visited(g.nodes().size(), false);
    auto disallow_sources = [&](int v, auto&& self) -> bool {
      if (g.value(v).kind != dsl::ValueKind::OpResult) return false;
      const dsl::Node& p = g.node(g.value(v).producer);
      if (!nhwc_node[p.id] || visited[p.id]) return false;
      visited[p.id] = true;
      bool changed = false;
      if (allowed[p.id]) {
        allowed[p.id] = false;
        changed = true;
      }
      if (!is_convolution(p.op))
        for (int i : p.inputs) changed = self(i, self) || changed;
      return changed;
    };
    bool changed = false;
    for (const dsl::Node& n : g.nodes()) {
      if (nhwc_node[n.id]) continue;
      const bool elementwise = dsl::lookup_op(n.op).pattern == dsl::OpPattern::Elementwise;
      for (int i : n.inputs)
        if (elementwise || (g.value(i).type.shape.size() == 4 && view_prefers_nchw(g, n, i)))
          changed = disallow_sources(i, disallow_sources) || changed;
      if (n.op == "as_strided") {
        // as_strided addresses the buffer at the root of its input's views: reached through a view
        // (a slice, a transpose, a reshape), that buffer must stay NCHW. Read directly, an NHWC
        // value is copied to NCHW instead (below).
        int v = n.inputs[0];
        bool through_view = false;
        while (g.value(v).kind == dsl::ValueKind::OpResult &&
               dsl::lookup_op(g.node(g.value(v).producer).op).pattern == dsl::OpPattern::View) {
          changed = disallow_sources(v, disallow_sources) || changed;
          v = g.node(g.value(v).producer).inputs[0];
          through_view = true;
        }
        if (through_view) changed = disallow_sources(v, disallow_sources) || changed;
      }
    }
    if (!changed) break;
  }
  if (!seeded && std::find(allowed.begin(), allowed.end(), true) == allowed.end()) return r;

  dsl::GraphReplay replay(g);
  dsl::Graph& out = replay.out();
  std::vector<int> nhwc(g.values().size(), -1);           // old value -> new id of its NHWC form
  std::vector<bool> view_made(g.values().size(), false);  // its NCHW view exists in `out`
  // Readers of an NHWC value's NCHW form get a permute view, made on first use only (an unused
  // view would count as a second reader of a convolution and stop its post-op fusion).
  auto nchw = [&](int v) {
    if (nhwc[v] >= 0 && !view_made[v]) {
      replay.set(v, out.add("permute", {nhwc[v]}, {{"dims", kToNchw}}));
      view_made[v] = true;
    }
    return replay[v];
  };
  // as_strided addresses its input's memory, not its logical order: it was traced on a contiguous
  // NCHW value, so an NHWC value reaches it as a contiguous NCHW copy, not as the permute view
  // (an NHWC value behind views never reaches it: the plan keeps those NCHW).
  std::vector<int> dense(g.values().size(), -1);
  // An NHWC graph input's NHWC form is a permute view of it (its readers in NCHW read the input).
  for (size_t i = 0; i < nhwc_inputs.size(); ++i) {
    if (!nhwc_inputs[i]) continue;
    const int v = g.inputs()[i];
    nhwc[v] = out.add("permute", {replay[v]}, {{"dims", kToNhwc}});
    view_made[v] = true;
  }
  auto nchw_dense = [&](int v) {
    if (nhwc[v] < 0) return replay[v];
    if (dense[v] < 0) {
      const int view = out.add("permute", {nhwc[v]}, {{"dims", kToNchw}});
      dense[v] = out.add("cast", {view}, {{"dtype", std::string(dsl::dtype_name(g.value(v).type.dtype))}});
    }
    return dense[v];
  };
  for (const dsl::Node& n : g.nodes()) {
    if (!nhwc_node[n.id]) {
      if (n.op == "as_strided") {
        replay.set(n.outputs[0], out.add("as_strided", {nchw_dense(n.inputs[0])}, n.attrs));
        continue;
      }
      for (int i : n.inputs) nchw(i);
      replay.copy(n);
      continue;
    }
    const int v = n.outputs[0];
    const dsl::Shape& shape = g.value(v).type.shape;
    int made = -1;
    if (seed_nodes[n.id]) {
      made = nchw(n.inputs[0]);  // the [N, H, W, C] value this view permutes
    } else if (is_convolution(n.op)) {
      std::vector<int> ins;
      for (int i : n.inputs) ins.push_back(nchw(i));  // an NHWC input: its view, read as NHWC strides
      dsl::Attrs a = n.attrs;
      a["channels_last"] = int64_t{1};
      made = out.add(n.op, ins, a);
      ++r.convolutions;
    } else if (n.op == "pad") {
      // torch's pads run from the last dim: [W, H, C, N] pairs for NCHW, [C, W, H, N] for NHWC.
      std::vector<int64_t> p = dsl::attr_ints(n.attrs, "pads", "pad");
      p.resize(8, 0);
      dsl::Attrs a = n.attrs;
      a["pads"] = std::vector<int64_t>{p[4], p[5], p[0], p[1], p[2], p[3], p[6], p[7]};
      made = out.add("pad", {nhwc[n.inputs[0]]}, a);
      ++r.ops;
    } else if (n.op == "cat") {
      std::vector<int> ins;
      for (int i : n.inputs) ins.push_back(nhwc[i] >= 0 ? nhwc[i] : out.add("permute", {nchw(i)}, {{"dims", kToNhwc}}));
      dsl::Attrs a = n.attrs;
      int64_t d = dsl::attr_int(n.attrs, "dim", "cat");
      if (d < 0) d += 4;
      a["dim"] = kNhwcPos[d];
      made = out.add("cat", ins, a);
      ++r.ops;
    } else if (n.op == "slice" || n.op == "index_select") {
      dsl::Attrs a = n.attrs;
      int64_t d = dsl::attr_int(n.attrs, "dim", n.op);
      if (d < 0) d += 4;
      a["dim"] = kNhwcPos[d];
      std::vector<int> ins{nhwc[n.inputs[0]]};
      for (size_t k = 1; k < n.inputs.size(); ++k) ins.push_back(nchw(n.inputs[k]));  // the index
      made = out.add(n.op, ins, a);
      ++r.ops;
    } else {  // elementwise
      std::vector<int> ins;
      for (int i : n.inputs) {
        if (nhwc[i] >= 0 && g.value(i).type.shape == shape) {
          ins.push_back(nhwc[i]);
          continue;
        }
        // A smaller operand, right-aligned to 4-D, then permuted like the output.
        const dsl::Shape& s = g.value(i).type.shape;
        int o = nchw(i);
        if (dsl::numel(s) > 1) {
          if (s.size() < 4) {
            dsl::Shape s4(4 - s.size(), 1);
            s4.insert(s4.end(), s.begin(), s.end());
            o = out.add("reshape", {o}, {{"shape", std::vector<int64_t>(s4.begin(), s4.end())}});
          }
          o = out.add("permute", {o}, {{"dims", kToNhwc}});
        }
        ins.push_back(o);
      }
      made = out.add(n.op, ins, n.attrs);
      ++r.ops;
    }
    nhwc[v] = made;
  }
  for (int o : g.outputs()) nchw(o);
  r.graph = replay.finish();
  return r;
}

}  // namespace flow::sched
