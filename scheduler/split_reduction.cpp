#include "scheduler/split_reduction.h"

#include <algorithm>
#include <map>
#include <optional>

#include "dsl/graph_replay.h"
#include "dsl/op_table.h"

namespace flow::sched {

using namespace flow::dsl;

namespace {

// The ops split: each is its own combiner over partial results (sum of sums, max of maxima, ...).
// Value-and-index reductions and scans are not.
bool splittable_op(const std::string& op) {
  return op == "sum" || op == "mean" || op == "amax" || op == "amin" || op == "prod" || op == "any" || op == "all";
}

bool takes_dtype(const std::string& op) {
  return op == "sum" || op == "mean" || op == "prod";
}

// A reduction's input reshaped [pre..., N, post...] -> [pre..., S, N / S, post...], where the
// reduced dims are the consecutive run [a, b) of the input's dims and N their product.
struct SplitPlan {
  int64_t a = 0, b = 0;
  int64_t n = 0, s = 0, rows = 0;
  size_t rank = 0;
};

int64_t product(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t d = from; d < to; ++d) p *= s[d];
  return p;
}

// The first divisor of n met going from `from` to `to` (either direction, both included); 0 if none.
int64_t divisor_in(int64_t n, int64_t from, int64_t to) {
  const int64_t step = from <= to ? 1 : -1;
  for (int64_t s = from; step > 0 ? s <= to : s >= to; s += step)
    if (n % s == 0) return s;
  return 0;
}

std::optional<SplitPlan> plan_split(const Graph& g, const Node& node, const SplitReductionOptions& opt) {
  if (!splittable_op(node.op) || node.inputs.size() != 1) return std::nullopt;
  const Shape& x = g.value(node.inputs[0]).type.shape;
  const auto* dims_attr = std::get_if<std::vector<int64_t>>(&node.attrs.at("dims"));
  if (!dims_attr || dims_attr->empty()) return std::nullopt;
  const std::vector<int64_t>& dims = *dims_attr;
  if (dims.front() < 0 || dims.back() >= static_cast<int64_t>(x.size())) return std::nullopt;
  for (size_t i = 1; i < dims.size(); ++i)
    if (dims[i] != dims[i - 1] + 1) return std::nullopt;
  SplitPlan p;
  p.rank = x.size();
  p.a = dims.front();
  p.b = dims.back() + 1;
  p.n = product(x, static_cast<size_t>(p.a), static_cast<size_t>(p.b));
  if (p.n < opt.min_row || p.n < 1) return std::nullopt;
  p.rows = numel(x) / p.n;
  if (p.rows < 1 || p.rows >= opt.max_rows) return std::nullopt;
  // Kept dims after the run make each row strided (the GPU column form takes r1 when it has rows enough).
  const bool column = product(x, static_cast<size_t>(p.b), x.size()) > 1;
  const int64_t target = column ? opt.column_target_rows : opt.target_rows;
  const int64_t min_chunk = std::max<int64_t>(1, column ? opt.column_min_chunk : opt.min_chunk);
  const int64_t most = p.n / min_chunk;
  // Strided rows: the smallest S that gives r1 `target` rows (the GPU column form's threshold); else
  // the largest S with at most `target` rows.
  p.s = column ? divisor_in(p.n, std::max(opt.min_splits, (target + p.rows - 1) / p.rows), std::min(most, 4 * target))
               : 0;
  if (p.s == 0) p.s = divisor_in(p.n, std::min(std::max<int64_t>(1, target / p.rows), most), opt.min_splits);
  if (p.s == 0) return std::nullopt;
  return p;
}

Attrs reshape_attrs(const Shape& s) {
  return {{"shape", std::vector<int64_t>(s.begin(), s.end())}};
}

// Rewrites one reduction at a time: `reshaped(v)` is old value v (of the reduction input's rank or
// less, broadcast as elementwise ops broadcast) in the split shape, in the graph being built.
class Splitter {
 public:
  Splitter(const Graph& g, GraphReplay& replay, const std::vector<std::vector<int64_t>>& input_strides)
      : g_(g), replay_(replay), input_strides_(input_strides) {}

  void begin(const SplitPlan& p, const Shape& x) {
    plan_ = p;
    x_ = x;
    memo_.clear();
  }

  // -1 when v cannot be given the split shape without writing it out.
  int reshaped(int v) {
    if (auto it = memo_.find(v); it != memo_.end()) return it->second;
    const int r = reshape_value(v);
    memo_[v] = r;
    return r;
  }

 private:
  int reshape_value(int v) {
    const Shape& own = g_.value(v).type.shape;
    if (own.empty()) return replay_[v];  // 0-dim: broadcasts as it is (and keeps its promotion category)
    if (own.size() > plan_.rank) return -1;
    Shape s(plan_.rank - own.size(), 1);
    s.insert(s.end(), own.begin(), own.end());
    const auto a = static_cast<size_t>(plan_.a), b = static_cast<size_t>(plan_.b);
    bool ones = true, full = true;
    for (size_t d = a; d < b; ++d) {
      ones = ones && s[d] == 1;
      full = full && s[d] == x_[d];
    }
    Shape to(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(a));
    if (ones) {  // constant over the reduced dims: [..., 1, 1, ...]
      to.insert(to.end(), {1, 1});
    } else if (full) {
      to.insert(to.end(), {plan_.s, plan_.n / plan_.s});
    } else {
      return -1;  // broadcast over part of the reduced dims
    }
    to.insert(to.end(), s.begin() + static_cast<std::ptrdiff_t>(b), s.end());
    Graph& out = replay_.out();
    const Value& val = g_.value(v);
    if (!ones && val.kind == ValueKind::OpResult) {
      const Node& p = g_.node(val.producer);
      if (lookup_op(p.op).pattern == OpPattern::Elementwise && p.outputs.size() == 1) {
        std::vector<int> ins;
        for (int in : p.inputs) {
          const int r = reshaped(in);
          if (r < 0) return -1;
          ins.push_back(r);
        }
        // The node's attrs are canonical already (add_op would canonicalize them again, and alpha's
        // canonical double is refused for integer results): infer the new shape and append.
        const std::vector<TensorType> types = lookup_op(p.op).infer(out, ins, p.attrs);
        if (types.size() != 1 || types[0].dtype != val.type.dtype) return -1;
        return out.node(out.append_node(p.op, ins, types, p.attrs)).outputs[0];
      }
    }
    // Anything else is read from memory: split only where that reshape is a view of it.
    const std::optional<Layout> l = layout_of(v);
    if (!ones && (!l || !lookup_op("reshape").view(*l, reshape_attrs(to)))) return -1;
    return out.add("reshape", {replay_[v]}, reshape_attrs(to));
  }

  // The layout v is read with: graph inputs as given, op results contiguous, views through their op.
  std::optional<Layout> layout_of(int v) const {
    const Value& val = g_.value(v);
    if (val.kind == ValueKind::Input) {
      const auto& ins = g_.inputs();
      const size_t i = static_cast<size_t>(std::find(ins.begin(), ins.end(), v) - ins.begin());
      Layout l = contiguous_layout(val.type.shape);
      if (i < input_strides_.size() && !input_strides_[i].empty()) l.strides = input_strides_[i];
      return l;
    }
    if (val.kind == ValueKind::OpResult) {
      const Node& p = g_.node(val.producer);
      const OpDef& def = lookup_op(p.op);
      if (def.pattern == OpPattern::View) {
        const std::optional<Layout> src = layout_of(p.inputs.at(0));
        return src ? def.view(*src, p.attrs) : std::nullopt;
      }
    }
    return contiguous_layout(val.type.shape);
  }

  const Graph& g_;
  GraphReplay& replay_;
  const std::vector<std::vector<int64_t>>& input_strides_;
  SplitPlan plan_;
  Shape x_;
  std::map<int, int> memo_;
};

// r2(r1(x)) for `node`, with x already in the split shape; returns the value standing for the
// node's output (same shape and dtype).
int two_reductions(Graph& out, const Node& node, const TensorType& result, const SplitPlan& p, int x) {
  const DType partial = is_half(result.dtype) && takes_dtype(node.op) ? DType::Float32 : result.dtype;
  auto cast_to_result = [&](int v) { return out.add("cast", {v}, {{"dtype", std::string(dtype_name(result.dtype))}}); };
  // A reduction converts its input to its result dtype first (torch's dtype= semantics): with float32
  // partials, that conversion of another input dtype to half stays, as a cast r1 reads through.
  if (partial != result.dtype && out.value(x).type.dtype != result.dtype) x = cast_to_result(x);
  Attrs a1 = node.attrs;
  a1["dims"] = std::vector<int64_t>{p.a + 1};
  a1["keepdim"] = false;
  if (partial != result.dtype) a1["dtype"] = std::string(dtype_name(partial));
  const int r1 = out.add(node.op, {x}, a1);
  // keepdim as the node's: one reduced dim then needs no reshape after, which would keep the row ops
  // that follow out of r2's kernel.
  const bool keepdim = std::get<bool>(node.attrs.at("keepdim"));
  int r = out.add(node.op, {r1}, {{"dims", std::vector<int64_t>{p.a}}, {"keepdim", keepdim}});
  if (out.value(r).type.dtype != result.dtype) r = cast_to_result(r);
  if (out.value(r).type.shape != result.shape) r = out.add("reshape", {r}, reshape_attrs(result.shape));
  return r;
}

// The graph without the nodes the rewrite left unread (the split reductions' old inputs); nodes in
// `kept` stay, read or not (the graph's own unread nodes: an unread index_select still checks its
// indices).
Graph without_unread_nodes(const Graph& g, const std::vector<int>& kept) {
  std::vector<bool> live(g.values().size(), false);
  for (int o : g.outputs()) live[o] = true;
  std::vector<bool> keep(g.nodes().size(), false);
  for (int n : kept) keep[n] = true;
  for (auto it = g.nodes().rbegin(); it != g.nodes().rend(); ++it) {
    keep[it->id] = keep[it->id] || std::any_of(it->outputs.begin(), it->outputs.end(), [&](int o) { return live[o]; });
    if (keep[it->id])
      for (int in : it->inputs) live[in] = true;
  }
  GraphReplay replay(g);
  for (const Node& n : g.nodes())
    if (keep[n.id]) replay.copy(n);
  return replay.finish();
}

std::string describe(const Graph& g, const Node& node, const SplitPlan& p) {
  return node.op + " over " + std::to_string(p.n) + " elements of " + g.value(node.inputs[0]).type.str() + " into " +
         std::to_string(p.rows) + " row(s): " + std::to_string(p.s) + " chunks of " + std::to_string(p.n / p.s) +
         " per row, then a reduction of the " + std::to_string(p.s) + " partials";
}

}  // namespace

SplitReductionResult split_long_reductions(const Graph& g, const std::vector<std::vector<int64_t>>& input_strides,
                                           const SplitReductionOptions& opt) {
  SplitReductionResult res;
  GraphReplay replay(g);
  if (opt.keep_leaf_ids) {  // the leaves before the first op's result: eager's arguments
    for (const Value& v : g.values()) {
      if (v.kind == ValueKind::OpResult) break;
      if (replay[v.id] != v.id) return res;
    }
  }
  // Nodes nothing read before the rewrite (copied, and kept by without_unread_nodes).
  std::vector<bool> read(g.values().size(), false);
  for (int o : g.outputs()) read[o] = true;
  for (const Node& n : g.nodes())
    for (int in : n.inputs) read[in] = true;
  std::vector<int> unread_before;
  Splitter splitter(g, replay, input_strides);
  for (const Node& node : g.nodes()) {
    const std::optional<SplitPlan> plan = plan_split(g, node, opt);
    if (plan) {
      splitter.begin(*plan, g.value(node.inputs[0]).type.shape);
      const int x = splitter.reshaped(node.inputs[0]);
      if (x >= 0) {
        replay.set(node.outputs[0], two_reductions(replay.out(), node, g.value(node.outputs[0]).type, *plan, x));
        res.notes.push_back(describe(g, node, *plan));
        continue;
      }
    }
    replay.copy(node);
    if (std::none_of(node.outputs.begin(), node.outputs.end(), [&](int o) { return read[o]; }))
      unread_before.push_back(static_cast<int>(replay.out().nodes().size()) - 1);
  }
  if (res.split() == 0) return res;
  res.graph = without_unread_nodes(replay.finish(), unread_before);
  return res;
}

}  // namespace flow::sched
