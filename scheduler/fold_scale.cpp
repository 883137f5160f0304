#include "scheduler/fold_scale.h"

#include <algorithm>
#include <map>

#include "dsl/graph_replay.h"
#include "dsl/op_table.h"

namespace flow::sched {
namespace {

using dsl::Graph;
using dsl::Node;
using dsl::Shape;

// One conv2d or conv3d and the scale/shift nodes that fold into it.
struct Fold {
  int conv = -1;
  int scale = -1, shift = -1;            // values (frozen), -1 when absent
  int scale_node = -1, shift_node = -1;  // the mul / add nodes
  int last_node = -1;                    // where the folded conv is emitted
  int replaced = -1;                     // the value the folded conv's output stands for
  // Mixed precision (a half conv whose batch norm computes in float32, dsl/autocast.h): the casts
  // to float32 after the conv and back after the shift, and the float32 weight and bias the conv's
  // operands were cast from (-1: the operand is not such a cast).
  int widen_node = -1, narrow_node = -1;
  int weight32 = -1, bias32 = -1;
  int weight_cast_node = -1, bias_cast_node = -1;  // those casts, dropped when the conv was their only reader
};

bool is_graph_output(const Graph& g, int v) {
  return std::find(g.outputs().begin(), g.outputs().end(), v) != g.outputs().end();
}

// The only node reading `v`, or -1 (several readers, none, or a graph output).
int sole_consumer(const Graph& g, int v) {
  const std::vector<int> c = g.consumers(v);
  if (c.size() != 1 || is_graph_output(g, v)) return -1;
  const Node& n = g.node(c[0]);
  // A node reading v twice (v * v) is not a scale.
  if (std::count(n.inputs.begin(), n.inputs.end(), v) != 1) return -1;
  return c[0];
}

// Whether `o` (a frozen tensor, not a scalar constant) holds one value per channel of an
// [N, C, H, W] or [N, C, D, H, W] output, or a single value: every dim 1 except (right-aligned)
// the channel dim.
bool per_channel(const Graph& g, int o, const dsl::TensorType& out, bool frozen) {
  const dsl::Value& v = g.value(o);
  if (!frozen || v.kind == dsl::ValueKind::Constant || v.type.dtype != out.dtype) return false;
  const Shape& s = v.type.shape;
  if (s.size() > out.shape.size() || (out.shape.size() != 4 && out.shape.size() != 5)) return false;
  const size_t lead = out.shape.size() - s.size();
  for (size_t i = 0; i < s.size(); ++i) {
    const size_t d = lead + i;
    if (s[i] != 1 && !(d == 1 && s[i] == out.shape[1])) return false;
  }
  return true;
}

// The other operand of binary node `n` when it is `op` reading `chain` and a per-channel frozen
// value, else -1.
int channel_operand(const Graph& g, const Node& n, const char* op, int chain, const std::vector<bool>& frozen) {
  if (n.op != op || n.inputs.size() != 2 || n.outputs.size() != 1) return -1;
  if (const dsl::AttrValue* a = dsl::attr_find(n.attrs, "alpha")) {
    const double* alpha = std::get_if<double>(a);
    const int64_t* ialpha = std::get_if<int64_t>(a);
    if (!(alpha && *alpha == 1.0) && !(ialpha && *ialpha == 1)) return -1;
  }
  const int other = n.inputs[0] == chain ? n.inputs[1] : n.inputs[0];
  const dsl::TensorType& out = g.value(n.outputs[0]).type;
  if (!(out == g.value(chain).type)) return -1;
  return per_channel(g, other, out, frozen[other]) ? other : -1;
}

// Whether node `n` casts one value to `to`.
bool is_cast_to(const Node& n, dsl::DType to) {
  const dsl::AttrValue* a = n.op == "cast" ? dsl::attr_find(n.attrs, "dtype") : nullptr;
  const std::string* name = a ? std::get_if<std::string>(a) : nullptr;
  return name && *name == dsl::dtype_name(to) && n.inputs.size() == 1;
}

// The float32 value that half value `v` was cast from, or -1; `cast_node` is set to that cast when
// `v` has no other reader than `reader` (the cast can then be dropped).
int float32_source(const Graph& g, int v, int reader, int& cast_node) {
  cast_node = -1;
  const dsl::Value& val = g.value(v);
  if (val.kind != dsl::ValueKind::OpResult) return -1;
  const Node& n = g.node(val.producer);
  if (!is_cast_to(n, val.type.dtype) || g.value(n.inputs[0]).type.dtype != dsl::DType::Float32) return -1;
  const std::vector<int> readers = g.consumers(v);
  if (readers.size() == 1 && readers[0] == reader && !is_graph_output(g, v)) cast_node = n.id;
  return n.inputs[0];
}

std::vector<Fold> find_folds(const Graph& g, const std::vector<bool>& frozen) {
  std::vector<Fold> folds;
  for (const Node& c : g.nodes()) {
    if (dsl::conv_spatial_rank(c.op) == 0 || dsl::is_transposed_conv(c.op) || c.outputs.size() != 1 ||
        c.inputs.size() < 2)
      continue;
    const int y = c.outputs[0];
    const bool weights_frozen =
        frozen[c.inputs[1]] && (c.inputs.size() < 3 || frozen[c.inputs[2]]) && !frozen[c.inputs[0]];
    if (!weights_frozen) continue;
    Fold f;
    f.conv = c.id;
    int chain = y;
    int next = sole_consumer(g, chain);
    const dsl::DType conv_dtype = g.value(y).type.dtype;
    if (next >= 0 && dsl::is_half(conv_dtype) && is_cast_to(g.node(next), dsl::DType::Float32)) {
      f.widen_node = next;
      chain = g.node(next).outputs[0];
      next = sole_consumer(g, chain);
    }
    if (next >= 0) {
      const int s = channel_operand(g, g.node(next), "mul", chain, frozen);
      if (s >= 0) {
        f.scale = s;
        f.scale_node = next;
        chain = g.node(next).outputs[0];
        next = sole_consumer(g, chain);
      }
    }
    if (next >= 0) {
      const int t = channel_operand(g, g.node(next), "add", chain, frozen);
      if (t >= 0) {
        f.shift = t;
        f.shift_node = next;
        chain = g.node(next).outputs[0];
      }
    }
    if (f.scale < 0 && f.shift < 0) continue;
    f.last_node = f.shift_node >= 0 ? f.shift_node : f.scale_node;
    if (f.widen_node >= 0) {  // the float32 result must be cast straight back to the conv's dtype
      const int back = sole_consumer(g, chain);
      if (back < 0 || !is_cast_to(g.node(back), conv_dtype)) continue;
      f.narrow_node = f.last_node = back;
      chain = g.node(back).outputs[0];
      f.weight32 = float32_source(g, c.inputs[1], c.id, f.weight_cast_node);
      if (c.inputs.size() > 2) f.bias32 = float32_source(g, c.inputs[2], c.id, f.bias_cast_node);
    }
    f.replaced = chain;
    folds.push_back(f);
  }
  return folds;
}

}  // namespace

FoldResult fold_scale_into_conv(const Graph& g, const std::vector<bool>& frozen) {
  FoldResult r;
  const std::vector<Fold> folds = find_folds(g, frozen);
  if (folds.empty()) return r;
  std::map<int, const Fold*> skip;     // nodes not copied -> their fold
  std::map<int, const Fold*> emit_at;  // last node -> fold
  for (const Fold& f : folds) {
    skip[f.conv] = &f;
    if (f.scale_node >= 0) skip[f.scale_node] = &f;
    if (f.shift_node >= 0) skip[f.shift_node] = &f;
    for (int n : {f.widen_node, f.narrow_node, f.weight_cast_node, f.bias_cast_node})
      if (n >= 0) skip[n] = &f;
    emit_at[f.last_node] = &f;
  }
  dsl::GraphReplay map(g);
  Graph& out = map.out();
  for (const Node& n : g.nodes()) {
    if (skip.count(n.id)) {
      auto it = emit_at.find(n.id);
      if (it == emit_at.end()) continue;
      const Fold& f = *it->second;
      const Node& c = g.node(f.conv);
      const int64_t channels = g.value(c.inputs[1]).type.shape.at(0);
      // Mixed precision: the scale and shift apply to the float32 weight and bias (the ones the
      // half operands were cast from, else the half operands widened), and the results are cast
      // to the conv's dtype once.
      const bool mixed = f.widen_node >= 0;
      const dsl::DType conv_dtype = g.value(c.outputs[0]).type.dtype;
      auto widened = [&](int operand, int source32) {
        if (!mixed) return map[operand];
        if (source32 >= 0) return map[source32];
        return out.add("cast", {map[operand]}, {{"dtype", std::string("float32")}});
      };
      auto narrowed = [&](int v) {
        return mixed ? out.add("cast", {v}, {{"dtype", std::string(dsl::dtype_name(conv_dtype))}}) : v;
      };
      int w = widened(c.inputs[1], f.weight32);
      int b = c.inputs.size() > 2 ? widened(c.inputs[2], f.bias32) : -1;
      if (f.scale >= 0) {
        const int64_t k = dsl::numel(g.value(f.scale).type.shape);                   // 1 or channels
        std::vector<int64_t> per_filter(g.value(c.inputs[1]).type.shape.size(), 1);  // [k, 1, 1, 1(, 1)]
        per_filter[0] = k;
        w = out.add("mul", {w, out.add("reshape", {map[f.scale]}, {{"shape", per_filter}})});
        if (b >= 0) b = out.add("mul", {b, out.add("reshape", {map[f.scale]}, {{"shape", std::vector<int64_t>{k}}})});
      }
      if (f.shift >= 0) {
        const int64_t k = dsl::numel(g.value(f.shift).type.shape);
        int t = out.add("reshape", {map[f.shift]}, {{"shape", std::vector<int64_t>{k}}});
        if (b >= 0) {
          b = out.add("add", {b, t});
        } else {
          // The bias operand of a convolution is exactly [C]; a single shift value is broadcast (and
          // made contiguous, as a conv operand) first.
          if (k != channels)
            t = out.add("mul", {out.add("expand", {t}, {{"shape", std::vector<int64_t>{channels}}}),
                                out.add_constant(1.0, g.value(f.shift).type.dtype, true)});
          b = t;
        }
      }
      std::vector<int> ins{map[c.inputs[0]], narrowed(w)};
      if (b >= 0) ins.push_back(narrowed(b));
      map.set(f.replaced, out.add(c.op, ins, c.attrs));
      ++r.folded;
      continue;
    }
    map.copy(n);
  }
  r.graph = map.finish();
  return r;
}

}  // namespace flow::sched
