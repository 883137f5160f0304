#include "jit/eager_layout.h"

#include <numeric>

#include "dsl/op_table.h"

namespace flow::jit {

namespace {

// Input strides aligned to the output's dims: 0 where the input broadcasts or lacks the dim.
std::vector<int64_t> aligned_strides(const Tensor& t, const dsl::Shape& out) {
  std::vector<int64_t> s(out.size(), 0);
  const size_t lead = out.size() - t.sizes.size();
  for (size_t d = 0; d < t.sizes.size(); ++d)
    if (t.sizes[d] == out[lead + d]) s[lead + d] = t.strides[d];
  return s;
}

// The output's dims from outermost to innermost in memory, for an op whose output has shape `out`
// and whose tensor inputs are `inputs` (in argument order); nullopt when that is plain row-major
// order (the output is contiguous).
std::optional<std::vector<int>> eager_output_order(const std::vector<const Tensor*>& inputs, const dsl::Shape& out) {
  const int n = static_cast<int>(out.size());
  if (n < 2 || dsl::numel(out) == 0) return std::nullopt;
  std::vector<std::vector<int64_t>> strides;
  for (const Tensor* t : inputs)
    if (!t->sizes.empty() && t->sizes.size() <= out.size()) strides.push_back(aligned_strides(*t, out));
  // > 0: dim a goes outside dim b; < 0: inside; 0: no input tells.
  auto compare = [&](int a, int b) {
    for (const auto& s : strides) {
      if (s[a] == 0 || s[b] == 0) continue;
      if (s[a] != s[b]) return s[a] < s[b] ? -1 : 1;
      if (out[a] > out[b]) return 1;
    }
    return 0;
  };
  // Innermost first, starting from row-major order; an insertion sort that stops at the first dim
  // known to go inside (ambiguous pairs keep their order), as torch's.
  std::vector<int> inner_first(n);
  std::iota(inner_first.rbegin(), inner_first.rend(), 0);
  for (int i = 1; i < n; ++i) {
    int at = i;
    for (int j = i - 1; j >= 0; --j) {
      const int c = compare(inner_first[j], inner_first[at]);
      if (c > 0) {
        std::swap(inner_first[j], inner_first[at]);
        at = j;
      } else if (c < 0) {
        break;
      }
    }
  }
  std::vector<int> order(inner_first.rbegin(), inner_first.rend());
  // Row-major apart from size-1 dims (which take any stride) is contiguous.
  int last = -1;
  bool row_major = true;
  for (int d : order) {
    if (out[d] == 1) continue;
    row_major = row_major && d > last;
    last = d;
  }
  if (row_major) return std::nullopt;
  return order;
}

// `t` aligned to `rank` dims (leading size-1 dims) and its dims listed in `order`: a view.
Tensor permuted_view(const Tensor& t, size_t rank, const std::vector<int>& order) {
  const size_t lead = rank - t.sizes.size();
  Tensor v = t;
  v.sizes.assign(rank, 1);
  v.strides.assign(rank, 0);
  for (size_t i = 0; i < rank; ++i) {
    const auto d = static_cast<size_t>(order[i]);
    if (d < lead) continue;  // a leading dim t lacks: size 1
    v.sizes[i] = t.sizes[d - lead];
    v.strides[i] = t.strides[d - lead];
  }
  return v;
}

// The attrs of `op` for its input viewed with dims listed in `order`, for the injective ops that
// keep their input's memory order as torch's do: flip's `dims`, and pad's `pads` for a
// channels-last input (torch's constant pad keeps no other order). nullopt otherwise.
std::optional<dsl::Attrs> permuted_dim_attrs(const std::string& op, const dsl::Attrs& attrs, size_t rank,
                                             const std::vector<int>& order) {
  const char* name = op == "pad" ? "pads" : op == "flip" ? "dims" : nullptr;
  const auto it = name ? attrs.find(name) : attrs.end();
  const auto* list = it == attrs.end() ? nullptr : std::get_if<std::vector<int64_t>>(&it->second);
  if (!list) return std::nullopt;
  std::vector<int64_t> out;
  if (op == "pad") {  // [last_lo, last_hi, second-to-last_lo, ...], trailing dims only
    // torch's constant pad keeps channels-last (suggest_memory_format) and nothing else.
    const bool channels_last = order == std::vector<int>{0, 2, 3, 1} || order == std::vector<int>{0, 2, 3, 4, 1};
    if (!channels_last || list->size() % 2 != 0 || list->size() > 2 * rank) return std::nullopt;
    std::vector<int64_t> lo(rank, 0), hi(rank, 0);
    for (size_t p = 0; 2 * p < list->size(); ++p) {
      lo[rank - 1 - p] = (*list)[2 * p];
      hi[rank - 1 - p] = (*list)[2 * p + 1];
    }
    for (size_t p = 0; p < rank; ++p) {
      const auto d = static_cast<size_t>(order[rank - 1 - p]);
      out.push_back(lo[d]);
      out.push_back(hi[d]);
    }
  } else {  // flip: the positions of the flipped dims in the view
    const auto r = static_cast<int64_t>(rank);
    for (size_t i = 0; i < rank; ++i)
      for (int64_t d : *list)
        if ((d % r + r) % r == order[i]) out.push_back(static_cast<int64_t>(i));
  }
  dsl::Attrs permuted = attrs;
  permuted[name] = out;
  return permuted;
}

// The output shape of an elementwise op over `args`' tensors; nullopt where they do not broadcast
// (the op itself reports that, with torch's message).
std::optional<dsl::Shape> broadcast_shape(const std::vector<EagerArg>& args) {
  dsl::Shape out;
  try {
    for (const auto& a : args)
      if (const auto* t = std::get_if<Tensor>(&a)) out = dsl::broadcast_shapes(out, t->sizes);
  } catch (const dsl::OpError&) {
    return std::nullopt;
  }
  return out;
}

}  // namespace

std::optional<PermutedCall> permuted_call(const std::string& op, const std::vector<EagerArg>& args,
                                          const dsl::Attrs& attrs) {
  const dsl::OpDef* def = dsl::find_op(op);
  if (def && def->pattern == dsl::OpPattern::Elementwise) {
    const std::optional<dsl::Shape> out = broadcast_shape(args);
    if (!out) return std::nullopt;
    std::vector<const Tensor*> inputs;
    for (const auto& a : args)
      if (const auto* t = std::get_if<Tensor>(&a)) inputs.push_back(t);
    const auto order = eager_output_order(inputs, *out);
    if (!order) return std::nullopt;
    PermutedCall call{{}, attrs, *order};
    for (const auto& a : args) {
      const auto* t = std::get_if<Tensor>(&a);  // (0-dim tensors stay 0-dim: they promote as scalars)
      call.args.push_back(t && !t->sizes.empty() ? EagerArg(permuted_view(*t, out->size(), *order)) : a);
    }
    return call;
  }
  if ((op == "pad" || op == "flip") && args.size() == 1 && std::holds_alternative<Tensor>(args[0])) {
    const Tensor& t = std::get<Tensor>(args[0]);
    const auto order = eager_output_order({&t}, t.sizes);
    if (!order) return std::nullopt;
    auto permuted = permuted_dim_attrs(op, attrs, t.sizes.size(), *order);
    if (!permuted) return std::nullopt;
    return PermutedCall{{permuted_view(t, t.sizes.size(), *order)}, std::move(*permuted), *order};
  }
  return std::nullopt;
}

Tensor unpermuted_view(const Tensor& t, const std::vector<int>& order) {
  Tensor v = t;
  for (size_t i = 0; i < order.size(); ++i) {
    v.sizes[static_cast<size_t>(order[i])] = t.sizes[i];
    v.strides[static_cast<size_t>(order[i])] = t.strides[i];
  }
  return v;
}

}  // namespace flow::jit
