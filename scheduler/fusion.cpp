#include "scheduler/fusion.h"

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "dsl/op_table.h"

namespace flow::sched {

using dsl::Graph;
using dsl::OpPattern;
using dsl::Shape;

const char* group_kind_name(GroupKind k) {
  switch (k) {
    case GroupKind::Pointwise:
      return "pointwise";
    case GroupKind::Reduction:
      return "reduction";
    case GroupKind::Opaque:
      return "opaque";
    case GroupKind::Library:
      return "library";
  }
  return "?";
}

Shape keepdim_shape(const FusionGroup& grp) {
  Shape s = grp.domain;
  for (int64_t d : grp.reduce_dims) s[d] = 1;
  return s;
}

Shape reduced_shape(const FusionGroup& grp) {
  Shape s;
  for (size_t d = 0; d < grp.domain.size(); ++d)
    if (!std::binary_search(grp.reduce_dims.begin(), grp.reduce_dims.end(), static_cast<int64_t>(d)))
      s.push_back(grp.domain[d]);
  return s;
}

bool is_row_shape(const FusionGroup& grp, const Shape& s) {
  return grp.kind == GroupKind::Reduction && (s == keepdim_shape(grp) || s == reduced_shape(grp));
}

namespace {

// Working state of the pass: groups may be merged, so node -> group goes through a union-find.
class Fuser {
 public:
  Fuser(const Graph& g, const FusionOptions& opt) : g_(g), opt_(opt), node_group_(g.nodes().size(), -1) {}

  FusionPlan run() {
    for (const auto& n : g_.nodes()) visit(n);
    return finish();
  }

 private:
  struct Work {
    GroupKind kind;
    std::vector<int> nodes;
    Shape domain;
    std::vector<int64_t> reduce_dims;
    bool alive = true;
    bool has_injective = false;
    std::vector<EpilogueStep> epilogue = {};  // Library groups
    std::vector<int> inlined = {};            // see FusionGroup::inlined
  };

  // The group computing `v`; a view's value belongs to the group computing what it aliases.
  int group_of_value(int v) const {
    const auto& val = g_.value(v);
    if (val.kind != dsl::ValueKind::OpResult) return -1;
    const dsl::Node& p = g_.node(val.producer);
    if (dsl::lookup_op(p.op).pattern == OpPattern::View) return group_of_value(p.inputs.at(0));
    return node_group_[val.producer];
  }

  // The group `v` could be fused from: none for a view (its consumers re-index the buffer).
  int fusible_group_of_value(int v) const {
    const auto& val = g_.value(v);
    if (val.kind != dsl::ValueKind::OpResult) return -1;
    return node_group_[val.producer];
  }

  void reject(int producer_group, int consumer, const std::string& why) {
    const auto& nodes = groups_[producer_group].nodes;
    rejected_.push_back({nodes.empty() ? -1 : nodes.back(), consumer, why});
  }

  // Does group `to` (transitively) read anything produced by group `from`?
  bool depends_on(int to, int from) const {
    std::set<int> seen;
    std::function<bool(int)> dfs = [&](int gi) {
      if (gi == from) return true;
      if (!seen.insert(gi).second) return false;
      for (int n : groups_[gi].nodes)
        for (int in : g_.node(n).inputs) {
          const int pg = group_of_value(in);
          if (pg >= 0 && pg != gi && dfs(pg)) return true;
        }
      return false;
    };
    for (int n : groups_[to].nodes)
      for (int in : g_.node(n).inputs) {
        const int pg = group_of_value(in);
        if (pg >= 0 && pg != to && dfs(pg)) return true;
      }
    return false;
  }

  // Would putting node `n` into group `gi` create a cycle through another group, or make the kernel
  // read (through a view) a buffer it writes itself?
  bool creates_cycle(int gi, const dsl::Node& n) const {
    for (int in : n.inputs)
      if (group_of_value(in) == gi && fusible_group_of_value(in) != gi) return true;
    for (int in : n.inputs) {
      const int pg = group_of_value(in);
      if (pg >= 0 && pg != gi && depends_on(pg, gi)) return true;
    }
    return false;
  }

  // Buffers (values read from outside, values produced) of a kernel holding `nodes`.
  int count_buffers(const std::vector<int>& nodes) const {
    std::set<int> produced, read;
    for (int m : nodes)
      for (int o : g_.node(m).outputs) produced.insert(o);
    for (int m : nodes)
      for (int in : g_.node(m).inputs)
        if (!produced.count(in)) read.insert(in);
    return static_cast<int>(read.size() + produced.size());
  }

  int count_buffers_if_merged(int gi, const dsl::Node& n) const {
    std::vector<int> nodes = groups_[gi].nodes;
    nodes.push_back(n.id);
    return count_buffers(nodes);
  }

  // Elementwise node `n` joining group `gi`: empty string if allowed, else the reason.
  static bool is_scan(const dsl::Node& n) {
    const dsl::OpDef& def = dsl::lookup_op(n.op);
    return def.reduce && def.reduce->scan;
  }
  bool has_scan(int gi) const {
    for (int m : groups_[gi].nodes)
      if (is_scan(g_.node(m))) return true;
    return false;
  }

  // Parameter-only work is computed once and cached (scheduler/frozen.h): it never shares a
  // kernel with per-call work.
  bool node_frozen(const dsl::Node& n) const {
    if (opt_.frozen.empty() || n.outputs.empty()) return false;
    return opt_.frozen.at(n.outputs[0]);
  }
  std::string frozen_mismatch(int gi, const dsl::Node& n) const {
    if (node_frozen(g_.node(groups_[gi].nodes.front())) == node_frozen(n)) return "";
    return "parameter-only work is computed once and cached, apart from per-call work";
  }

  std::string elementwise_fits(int gi, const dsl::Node& n) const {
    if (has_scan(gi)) return "a scan kernel takes no consumers";
    if (std::string why = frozen_mismatch(gi, n); !why.empty()) return why;
    const Work& w = groups_[gi];
    const Shape& out = g_.value(n.outputs[0]).type.shape;
    if (w.kind == GroupKind::Opaque) return "producer is an opaque op";
    if (w.kind == GroupKind::Library) return library_fits(gi, n, nullptr);
    if (w.kind == GroupKind::Pointwise) {
      if (out != w.domain) return "shape mismatch: group " + dsl::shape_str(w.domain) + " vs " + dsl::shape_str(out);
    } else {
      FusionGroup probe;
      probe.kind = GroupKind::Reduction;
      probe.domain = w.domain;
      probe.reduce_dims = w.reduce_dims;
      const bool full = out == w.domain;
      if (!full && !is_row_shape(probe, out))
        return "shape mismatch: reduction domain " + dsl::shape_str(w.domain) + " vs " + dsl::shape_str(out);
      if (!full && out == reduced_shape(probe) && out != keepdim_shape(probe)) {
        // A keepdim=False row value has fewer dims than the domain: an operand read from memory
        // broadcasts against it (right-aligned), which the domain's indexing cannot express.
        // (Even one of the same shape: a [C] tensor beside a [C, C] domain is ambiguous, so kernel
        // inputs always broadcast against the full domain; see kernel_instance.cpp.)
        for (int in : n.inputs)
          if (fusible_group_of_value(in) != gi && g_.value(in).kind != dsl::ValueKind::Constant)
            return "operand " + dsl::shape_str(g_.value(in).type.shape) + " read from memory by a reduced value";
      }
      if (full && reduced_shape(probe) != keepdim_shape(probe)) {
        // A reduced (keepdim=false) value broadcasts against the full domain by right alignment,
        // not per row: only keepdim row values may feed full-domain work in one kernel.
        for (int in : n.inputs)
          if (fusible_group_of_value(in) == gi && g_.value(in).type.shape == reduced_shape(probe) &&
              g_.value(in).type.shape != w.domain)
            return "reduced value (keepdim=False) broadcast against the full domain";
      }
    }
    if (creates_cycle(gi, n)) return "would create a cycle between kernels";
    if (count_buffers_if_merged(gi, n) > opt_.max_buffers) return "kernel argument cap";
    return "";
  }

  // Elementwise node `n` extending the epilogue of library group `gi` (rule (a) here; rules (b), (c)
  // in match_epilogue): it reads the chain's final value, which nothing else reads, and its other
  // operands come from outside the group without a cycle. On success `steps` (if given) receives
  // the post-ops `n` becomes.
  std::string library_fits(int gi, const dsl::Node& n, std::vector<EpilogueStep>* steps) const {
    const Work& w = groups_[gi];
    const dsl::Node& lib = g_.node(w.nodes.front());
    const int chain = g_.node(w.nodes.back()).outputs.at(0);
    bool reads_chain = false;
    for (int in : n.inputs) reads_chain = reads_chain || in == chain;
    if (!reads_chain) return "does not read the final value of the library call's epilogue";
    for (int in : n.inputs)
      if (in != chain && group_of_value(in) == gi) return "reads the library group's output through a view";
    if (g_.consumers(chain).size() != 1) return "library output has other consumers";
    for (int o : g_.outputs())
      if (o == chain) return "library output is a graph output";
    if (opt_.library_epilogues == LibraryEpilogues::None) return "library epilogues are off (FLOW_LIBRARY_EPILOGUES=0)";
    std::string why;
    std::vector<EpilogueStep> s = match_epilogue(g_, lib, chain, n, opt_.target, w.epilogue, why);
    if (s.empty()) return why;
    const bool onednn = opt_.target == dsl::Target::CPU;  // the gates below are oneDNN's measurements
    if (onednn && opt_.library_epilogues != LibraryEpilogues::All)
      for (const EpilogueStep& st : s)
        if (is_binary_alg(st.alg))
          return "binary post-ops are off (slow in this oneDNN; FLOW_LIBRARY_EPILOGUES=1 enables them)";
    if (onednn && opt_.library_epilogues == LibraryEpilogues::Exact)
      for (const EpilogueStep& st : s) {
        if (!is_exact_post_op(st.alg, n.op))
          return std::string("the ") + post_op_alg_name(st.alg) + " post-op" + (n.op == "div" ? " of a division" : "") +
                 " differs from torch on NaN/inf (FLOW_LIBRARY_EPILOGUES=eltwise fuses it anyway)";
      }
    if (creates_cycle(gi, n)) return "would create a cycle between kernels";
    if (steps) *steps = std::move(s);
    return "";
  }

  // Whether pointwise group `pg` can be computed inside the kernel `gi` of injective node `n`, at
  // the indices where `n` reads its value: nothing but `n` reads what `pg` computes (else it would
  // be computed twice), and either `n` reads each input element exactly once (cat, flip, roll, a
  // pad that crops nothing) or `pg` is data movement and cheap arithmetic (a read repeated by an
  // upsampling index_select then costs about what reading `pg`'s stored result would). An
  // index_select or gather in `pg` checks its indices where its value is read: only `n` itself may
  // read it, and only when `n` reads every element (a where in `pg`, a cropping pad or a gather
  // could skip a bad index).
  std::string inline_fits(int pg, int gi, const dsl::Node& n) const {
    static const std::set<std::string> once{"cat", "pad", "flip", "roll"};
    static const std::set<std::string> cheap{"relu", "neg",     "abs",     "cast",  "add",  "sub",
                                             "mul",  "maximum", "minimum", "clamp", "where"};
    const Work& w = groups_[pg];
    if (w.kind != GroupKind::Pointwise || !opt_.inline_producers) return "injective op reads its inputs from memory";
    bool reads_all = once.count(n.op) > 0;
    if (n.op == "pad")
      for (int64_t p : dsl::attr_ints(n.attrs, "pads", "pad")) reads_all = reads_all && p >= 0;
    if (std::string why = frozen_mismatch(pg, n); !why.empty()) return why;
    const auto& outs = g_.outputs();
    for (int m : w.nodes) {
      const dsl::Node& node = g_.node(m);
      const bool injective = dsl::lookup_op(node.op).pattern == OpPattern::Injective;
      if (!reads_all && !injective && !cheap.count(node.op))
        return "injective op reads its inputs repeatedly; " + node.op + " would be recomputed per read";
      const bool checks_indices = injective && node.inputs.size() > 1 && node.op != "cat";
      for (int o : node.outputs) {
        if (std::find(outs.begin(), outs.end(), o) != outs.end()) return "producer value is a graph output";
        for (int c : g_.consumers(o)) {
          if (c != n.id && node_group_[c] != pg) return "producer value has readers besides the injective op";
          if (checks_indices && (c != n.id || !reads_all))
            return "an index-checking producer must be read wholly by the injective op itself";
        }
      }
    }
    std::vector<int> nodes = groups_[gi].nodes;  // n and the producers inlined before this one
    nodes.insert(nodes.end(), w.nodes.begin(), w.nodes.end());
    if (count_buffers(nodes) > opt_.max_buffers) return "kernel argument cap";
    return "";
  }

  std::string reduction_fits(int gi, const dsl::Node& n, const std::vector<int64_t>& dims) const {
    if (has_scan(gi)) return "a scan kernel takes no consumers";
    if (std::string why = frozen_mismatch(gi, n); !why.empty()) return why;
    const Work& w = groups_[gi];
    const Shape& in = g_.value(n.inputs[0]).type.shape;
    if (w.kind == GroupKind::Opaque) return "producer is an opaque op";
    if (w.kind == GroupKind::Library) return "producer is a library call";
    if (w.domain != in)
      return "reduction input " + dsl::shape_str(in) + " is not the group domain " + dsl::shape_str(w.domain);
    if (w.has_injective) return "producer kernel holds an injective op";
    if (w.kind == GroupKind::Reduction && w.reduce_dims != dims) return "different reduction axes";
    if (creates_cycle(gi, n)) return "would create a cycle between kernels";
    if (count_buffers_if_merged(gi, n) > opt_.max_buffers) return "kernel argument cap";
    return "";
  }

  int new_group(const dsl::Node& n, GroupKind kind, Shape domain, std::vector<int64_t> dims) {
    groups_.push_back({kind, {n.id}, std::move(domain), std::move(dims)});
    node_group_[n.id] = static_cast<int>(groups_.size()) - 1;
    return node_group_[n.id];
  }

  void absorb(int into, int from) {
    if (into == from) return;
    for (int m : groups_[from].nodes) {
      groups_[into].nodes.push_back(m);
      node_group_[m] = into;
    }
    auto& inl = groups_[into].inlined;
    inl.insert(inl.end(), groups_[from].inlined.begin(), groups_[from].inlined.end());
    std::sort(inl.begin(), inl.end());
    groups_[from].nodes.clear();
    groups_[from].inlined.clear();
    groups_[from].alive = false;
    std::sort(groups_[into].nodes.begin(), groups_[into].nodes.end());
  }

  std::vector<int> producer_groups(const dsl::Node& n) const {
    std::vector<int> out;
    for (int in : n.inputs) {
      const int pg = fusible_group_of_value(in);
      if (pg >= 0 && std::find(out.begin(), out.end(), pg) == out.end()) out.push_back(pg);
    }
    return out;
  }

  void visit(const dsl::Node& n) {
    const dsl::OpDef& def = dsl::lookup_op(n.op);
    // Views are not kernels: consumers read the aliased buffer through the view's strides.
    if (def.pattern == OpPattern::View) return;
    // A library op (conv, GEMM) reads its operands from memory: it starts a Library group, which
    // its elementwise consumers may join as post-ops.
    if (def.pattern == OpPattern::OutEWiseFusable) {
      new_group(n, GroupKind::Library, n.outputs.empty() ? Shape{} : g_.value(n.outputs[0]).type.shape, {});
      return;
    }
    // An injective op reads its inputs from memory at remapped indices: it starts a pointwise
    // kernel that its elementwise consumers can join. A producer kernel of elementwise work that
    // only it reads is computed inside it instead, at those indices (inline_fits).
    if (def.pattern == OpPattern::Injective && opt_.enable) {
      const std::vector<int> producers = producer_groups(n);
      const int gi = new_group(n, GroupKind::Pointwise, g_.value(n.outputs[0]).type.shape, {});
      groups_[gi].has_injective = true;
      for (int pg : producers) {
        const std::string why = inline_fits(pg, gi, n);
        if (!why.empty()) {
          reject(pg, n.id, why);
          continue;
        }
        groups_[pg].inlined = groups_[pg].nodes;  // carried over by absorb
        absorb(gi, pg);
      }
      return;
    }
    // A scan (cumsum, cumprod) is a kernel of its own: producers and consumers stay separate.
    if (is_scan(n) && opt_.enable) {
      for (int pg : producer_groups(n)) reject(pg, n.id, "a scan kernel takes no producers");
      new_group(n, GroupKind::Reduction, g_.value(n.inputs[0]).type.shape, dsl::attr_ints(n.attrs, "dims", n.op));
      return;
    }
    if (!opt_.enable || (def.pattern != OpPattern::Elementwise && def.pattern != OpPattern::Reduction)) {
      const Shape dom = n.outputs.empty() ? Shape{} : g_.value(n.outputs[0]).type.shape;
      if (def.pattern == OpPattern::Reduction) {
        new_group(n, GroupKind::Reduction, g_.value(n.inputs[0]).type.shape, dsl::attr_ints(n.attrs, "dims", n.op));
      } else if (def.pattern == OpPattern::Elementwise || def.pattern == OpPattern::Injective) {
        const int gi = new_group(n, GroupKind::Pointwise, dom, {});
        groups_[gi].has_injective = def.pattern == OpPattern::Injective;
      } else {
        new_group(n, GroupKind::Opaque, dom, {});
      }
      return;
    }
    const auto producers = producer_groups(n);
    if (def.pattern == OpPattern::Elementwise) {
      // Decide against every producer group before touching any of them.
      std::vector<int> fits;
      for (int pg : producers) {
        const std::string why = elementwise_fits(pg, n);
        if (why.empty()) {
          fits.push_back(pg);
        } else {
          reject(pg, n.id, why);
        }
      }
      if (fits.empty()) {
        new_group(n, GroupKind::Pointwise, g_.value(n.outputs[0]).type.shape, {});
        return;
      }
      // A library group that takes `n` as a post-op wins; the other producers stay separate.
      for (int pg : fits) {
        if (groups_[pg].kind != GroupKind::Library) continue;
        std::vector<EpilogueStep> steps;
        library_fits(pg, n, &steps);
        for (int other : fits)
          if (other != pg) reject(other, n.id, "consumer joined a library call's epilogue");
        groups_[pg].epilogue.insert(groups_[pg].epilogue.end(), steps.begin(), steps.end());
        groups_[pg].nodes.push_back(n.id);
        node_group_[n.id] = pg;
        return;
      }
      // Prefer a reduction group as the target: a pointwise group of the same domain joins it.
      int target = fits[0];
      for (int pg : fits)
        if (groups_[pg].kind == GroupKind::Reduction) target = pg;
      for (int pg : fits) {
        if (pg == target) continue;
        const Work& a = groups_[target];
        const Work& b = groups_[pg];
        const bool same_domain =
            a.domain == b.domain && (b.kind == GroupKind::Pointwise || a.reduce_dims == b.reduce_dims);
        // Two pointwise kernels over one domain merge even when they hold injective ops (a dropout
        // mask and the activation it masks; the taps of a resize, each a gather along one axis,
        // summed): an injective op still reads its inputs from memory at its remapped indices,
        // and every op runs at the same output indices. (A kernel with an injective op keeps every
        // dim of its domain uncoalesced, so their index math stays valid together.)
        if ((a.has_injective || b.has_injective) && (a.kind != GroupKind::Pointwise || !same_domain)) {
          reject(pg, n.id, "an injective kernel merges only with a pointwise kernel of its domain");
        } else if (same_domain && !depends_on(pg, target) && !depends_on(target, pg)) {
          groups_[target].has_injective = a.has_injective || b.has_injective;
          absorb(target, pg);
        } else {
          reject(pg, n.id, "producer groups disagree on the iteration domain");
        }
      }
      node_group_[n.id] = target;
      groups_[target].nodes.push_back(n.id);
      return;
    }
    // Reduction
    const std::vector<int64_t> dims = dsl::attr_ints(n.attrs, "dims", n.op);
    const Shape& in_shape = g_.value(n.inputs[0]).type.shape;
    const int pg = fusible_group_of_value(n.inputs[0]);
    if (pg >= 0) {
      const std::string why = reduction_fits(pg, n, dims);
      if (why.empty()) {
        groups_[pg].kind = GroupKind::Reduction;
        groups_[pg].reduce_dims = dims;
        groups_[pg].nodes.push_back(n.id);
        node_group_[n.id] = pg;
        return;
      }
      reject(pg, n.id, why);
    }
    new_group(n, GroupKind::Reduction, in_shape, dims);
  }

  FusionPlan finish() {
    // Topological order of the surviving groups (Kahn over group dependencies, ties by first node).
    std::vector<int> alive;
    for (size_t i = 0; i < groups_.size(); ++i)
      if (groups_[i].alive && !groups_[i].nodes.empty()) alive.push_back(static_cast<int>(i));
    std::map<int, std::set<int>> deps;
    for (int gi : alive)
      for (int n : groups_[gi].nodes)
        for (int in : g_.node(n).inputs) {
          const int pg = group_of_value(in);
          if (pg >= 0 && pg != gi) deps[gi].insert(pg);
        }
    std::vector<int> order;
    std::set<int> done;
    while (order.size() < alive.size()) {
      bool progressed = false;
      for (int gi : alive) {
        if (done.count(gi)) continue;
        bool ready = true;
        for (int d : deps[gi]) ready = ready && done.count(d);
        if (!ready) continue;
        order.push_back(gi);
        done.insert(gi);
        progressed = true;
        break;
      }
      if (!progressed) throw std::logic_error("fusion produced a cyclic kernel graph");
    }

    FusionPlan plan;
    plan.rejected = rejected_;
    std::set<int> graph_outputs(g_.outputs().begin(), g_.outputs().end());
    for (int gi : order) {
      const Work& w = groups_[gi];
      FusionGroup grp;
      grp.id = static_cast<int>(plan.groups.size());
      grp.kind = w.kind;
      grp.nodes = w.nodes;
      grp.domain = w.domain;
      grp.reduce_dims = w.reduce_dims;
      grp.has_injective = w.has_injective;
      grp.epilogue = w.epilogue;
      grp.inlined = w.inlined;
      std::set<int> produced;
      for (int n : grp.nodes)
        for (int o : g_.node(n).outputs) produced.insert(o);
      for (int n : grp.nodes)
        for (int in : g_.node(n).inputs)
          if (!produced.count(in) && std::find(grp.inputs.begin(), grp.inputs.end(), in) == grp.inputs.end())
            grp.inputs.push_back(in);
      for (int n : grp.nodes)
        for (int o : g_.node(n).outputs) {
          bool used_outside = graph_outputs.count(o) > 0;
          for (int c : g_.consumers(o)) used_outside = used_outside || node_group_[c] != gi;
          if (used_outside) grp.outputs.push_back(o);
        }
      plan.groups.push_back(std::move(grp));
    }
    return plan;
  }

  const Graph& g_;
  const FusionOptions& opt_;
  std::vector<int> node_group_;
  std::vector<Work> groups_;
  std::vector<RejectedMerge> rejected_;
};

}  // namespace

LibraryEpilogues library_epilogues_default() {
  const char* e = std::getenv("FLOW_LIBRARY_EPILOGUES");
  const std::string v = e ? e : "";
  if (v == "1" || v == "all") return LibraryEpilogues::All;
  if (v == "0") return LibraryEpilogues::None;
  if (v == "eltwise") return LibraryEpilogues::Eltwise;
  return LibraryEpilogues::Exact;
}

bool inline_producers_default() {
  const char* e = std::getenv("FLOW_FUSE_INLINE");
  return !(e && std::string(e) == "0");
}

FusionPlan fuse(const Graph& g, const FusionOptions& opt) {
  return Fuser(g, opt).run();
}

std::string FusionPlan::to_string(const Graph& g) const {
  std::ostringstream os;
  for (const auto& grp : groups) {
    os << "group " << grp.id << " (" << group_kind_name(grp.kind) << ", domain " << dsl::shape_str(grp.domain);
    if (grp.kind == GroupKind::Reduction) os << ", reduce dims " << dsl::shape_str(grp.reduce_dims);
    os << "):";
    for (int n : grp.nodes) os << " " << g.node(n).op << "#" << n;
    if (!grp.inlined.empty()) {
      os << "  computed where read:";
      for (int n : grp.inlined) os << " " << g.node(n).op << "#" << n;
    }
    if (grp.kind == GroupKind::Library && !grp.epilogue.empty()) {
      os << "  post-ops [";
      for (size_t k = 0; k < grp.epilogue.size(); ++k) os << (k ? ", " : "") << post_op_alg_name(grp.epilogue[k].alg);
      os << "]";
    }
    os << "\n    inputs:";
    for (int v : grp.inputs) os << " %" << v;
    os << "  outputs:";
    for (int v : grp.outputs) os << " %" << v;
    os << "\n";
  }
  if (!rejected.empty()) {
    os << "rejected merges:\n";
    for (const auto& r : rejected) {
      os << "  ";
      if (r.producer_node >= 0) os << g.node(r.producer_node).op << "#" << r.producer_node;
      os << " -> " << g.node(r.consumer_node).op << "#" << r.consumer_node << ": " << r.reason << "\n";
    }
  }
  return os.str();
}

}  // namespace flow::sched
