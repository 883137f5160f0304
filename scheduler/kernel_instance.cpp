#include "scheduler/kernel_instance.h"

#include <algorithm>
#include <set>
#include <stdexcept>

#include "dsl/op_table.h"

namespace flow::sched {

using dsl::Shape;

std::vector<int64_t> contiguous_strides(const Shape& shape) {
  std::vector<int64_t> st(shape.size(), 1);
  int64_t acc = 1;
  for (size_t i = shape.size(); i-- > 0;) {
    st[i] = acc;
    acc *= std::max<int64_t>(shape[i], 1);
  }
  return st;
}

int64_t KernelInstance::rows() const {
  int64_t n = 1;
  for (int64_t s : kept) n *= s;
  return n;
}

int64_t KernelInstance::row_size() const {
  int64_t n = 1;
  for (int64_t s : reduced) n *= s;
  return n;
}

const KernelBuffer* KernelInstance::buffer_for(int value) const {
  for (const auto& b : buffers)
    if (b.value == value) return &b;
  return nullptr;
}

namespace {

// Strides of value `v` (shape `vs`, actual strides `st`) over every dim of the group domain.
// Inputs always broadcast against the full domain (right-aligned, as torch); only an output can be a
// keepdim=False row value, laid out over the kept dims. (Deciding by shape alone is ambiguous: a
// [C] weight beside a [C, C] domain has the reduced shape too.)
std::vector<int64_t> domain_strides(const FusionGroup& grp, const Shape& vs, const std::vector<int64_t>& st,
                                    bool is_output) {
  const Shape& dom = grp.domain;
  const size_t rank = dom.size();
  std::vector<int64_t> out(rank, 0);
  if (is_output && grp.kind == GroupKind::Reduction && vs == reduced_shape(grp) && vs != dom) {
    // A keepdim=False row value: its dims are the kept dims of the domain, in order.
    size_t k = 0;
    for (size_t d = 0; d < rank; ++d) {
      const bool red = std::binary_search(grp.reduce_dims.begin(), grp.reduce_dims.end(), static_cast<int64_t>(d));
      if (red) continue;
      out[d] = vs[k] == 1 ? 0 : st[k];
      ++k;
    }
    return out;
  }
  // Torch broadcasting: right-aligned; a size-1 dim repeats (stride 0).
  if (vs.size() > rank) throw std::invalid_argument("value rank exceeds the kernel domain rank");
  const size_t off = rank - vs.size();
  for (size_t d = off; d < rank; ++d) {
    const int64_t vd = vs[d - off];
    out[d] = (vd == 1 && dom[d] != 1) ? 0 : st[d - off];
  }
  return out;
}

}  // namespace

KernelInstance specialize(const dsl::Graph& g, const FusionGroup& grp, const GroupLayouts& layouts,
                          bool inline_constants) {
  KernelInstance ki;
  ki.graph = &g;
  ki.group = &grp;
  ki.inline_constants = inline_constants;

  // Buffers over the full domain.
  struct Raw {
    int value;
    bool is_output;
    std::vector<int64_t> st;
    std::vector<int64_t> own;  // actual strides, for inputs of injective ops
  };
  std::set<int> indexed;  // values read by injective ops
  bool injective = false;
  for (int n : grp.nodes)
    if (dsl::lookup_op(g.node(n).op).pattern == dsl::OpPattern::Injective) {
      injective = true;
      for (int in : g.node(n).inputs) indexed.insert(in);
    }
  // Inputs of nodes computed where an injective op reads them are read at its indices too.
  for (int n : grp.inlined)
    for (int in : g.node(n).inputs) indexed.insert(in);
  ki.shape_specialized = inline_constants || injective;
  std::vector<Raw> raws;
  auto add = [&](int v, bool out) {
    const auto& val = g.value(v);
    if (val.kind == dsl::ValueKind::Constant) {
      if (!inline_constants) ki.scalar_constants.push_back(v);
      return;
    }
    const auto it = layouts.find(v);
    std::vector<int64_t> st = it != layouts.end() ? it->second : contiguous_strides(val.type.shape);
    if (st.size() != val.type.shape.size())
      throw std::invalid_argument("layout of %" + std::to_string(v) + " has rank " + std::to_string(st.size()) +
                                  ", expected " + std::to_string(val.type.shape.size()));
    // A value only injective ops read (at indices they compute, through its own strides) may have
    // more dims than the domain: embedding's weight beside a 0-d index, index_select of a 0-d tensor.
    const bool only_indexed = indexed.count(v) && val.type.shape.size() > grp.domain.size();
    raws.push_back(
        {v, out,
         only_indexed ? std::vector<int64_t>(grp.domain.size(), 0) : domain_strides(grp, val.type.shape, st, out),
         indexed.count(v) ? st : std::vector<int64_t>{}});
  };
  for (int v : grp.inputs) add(v, false);
  for (int v : grp.outputs) add(v, true);

  // Dim order: kept dims, then reduced dims; drop size-1 dims; merge contiguous neighbours.
  struct Dim {
    int64_t size;
    bool reduced;
    std::vector<int64_t> st;  // per raw buffer
  };
  std::vector<Dim> dims;
  for (int pass = 0; pass < 2; ++pass) {
    for (size_t d = 0; d < grp.domain.size(); ++d) {
      const bool red = std::binary_search(grp.reduce_dims.begin(), grp.reduce_dims.end(), static_cast<int64_t>(d));
      if (red != (pass == 1)) continue;
      // Injective ops index the domain dims themselves: keep every dim as it is.
      if (grp.domain[d] == 1 && !grp.has_injective) continue;
      Dim dim{grp.domain[d], red, {}};
      for (const auto& r : raws) dim.st.push_back(r.st[d]);
      if (!dims.empty() && dims.back().reduced == red && !grp.has_injective) {
        Dim& prev = dims.back();
        bool mergeable = true;
        for (size_t b = 0; b < raws.size(); ++b) mergeable = mergeable && prev.st[b] == dim.st[b] * dim.size;
        if (mergeable) {
          prev.size *= dim.size;
          prev.st = dim.st;
          continue;
        }
      }
      dims.push_back(std::move(dim));
    }
  }
  bool has_kept = false, has_red = false;
  for (const auto& d : dims) (d.reduced ? has_red : has_kept) = true;
  if (!has_kept && grp.kind != GroupKind::Reduction)
    dims.insert(dims.begin(), Dim{1, false, std::vector<int64_t>(raws.size(), 0)});
  if (!has_red && grp.kind == GroupKind::Reduction) dims.push_back(Dim{1, true, std::vector<int64_t>(raws.size(), 0)});

  for (const auto& d : dims) (d.reduced ? ki.reduced : ki.kept).push_back(d.size);
  for (size_t b = 0; b < raws.size(); ++b) {
    KernelBuffer kb;
    kb.value = raws[b].value;
    kb.is_output = raws[b].is_output;
    kb.dtype = g.value(kb.value).type.dtype;
    kb.name = (kb.is_output ? "out" : "in") + std::to_string(b);
    kb.own_strides = raws[b].own;
    for (size_t k = 0; k < dims.size(); ++k) {
      const Dim& d = dims[k];
      const int64_t s = d.size == 1 && !grp.has_injective ? 0 : d.st[b];
      kb.strides.push_back(s);
      const bool innermost = k + 1 == dims.size() && grp.kind == GroupKind::Pointwise;
      kb.classes.push_back(s == 0                                                         ? StrideClass::Zero
                           : s == 1                                                       ? StrideClass::One
                           : innermost && !kb.is_output && s >= 2 && s <= kMaxSmallStride ? StrideClass::Small
                                                                                          : StrideClass::Dynamic);
    }
    ki.buffers.push_back(std::move(kb));
  }
  return ki;
}

}  // namespace flow::sched
