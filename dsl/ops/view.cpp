// Note: view ops. The output aliases input 0: each entry says how the output's layout follows from
// the input's (ViewFn), so eager mode makes zero-copy views, the jit binds views as strided kernel
// arguments, and the graph interpreter gathers through the same function. Only reshape/view of a
// layout that cannot be expressed with strides (torch's computeStride fails) needs a copy first.
#include <algorithm>
#include <numeric>

#include "dsl/ops/op_util.h"

namespace flow::dsl {

Layout contiguous_layout(const Shape& sizes) {
  Layout l;
  l.sizes = sizes;
  l.strides.assign(sizes.size(), 1);
  int64_t acc = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    l.strides[i] = acc;
    acc *= std::max<int64_t>(sizes[i], 1);
  }
  return l;
}

namespace {

// torch's infer_size: one -1 allowed, numel must match.
Shape infer_reshape(const std::string& op, const Shape& in, std::vector<int64_t> shape) {
  const int64_t n = numel(in);
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer_at >= 0) throw OpError(OpError::Kind::Value, "only one dimension can be inferred");
      infer_at = static_cast<int64_t>(i);
    } else if (shape[i] < 0) {
      throw OpError(OpError::Kind::Value, "invalid shape dimension " + std::to_string(shape[i]));
    } else {
      known *= shape[i];
    }
  }
  auto invalid = [&] {
    return OpError(OpError::Kind::Value,
                   "shape '" + shape_str(shape) + "' is invalid for input of size " + std::to_string(n));
  };
  if (infer_at >= 0) {
    if (known == 0 || n % known != 0) throw invalid();
    shape[infer_at] = n / known;
  } else if (known != n) {
    throw invalid();
  }
  (void)op;
  return shape;
}

// torch's computeStride: strides for viewing `in` as `shape`, if any exist.
std::optional<std::vector<int64_t>> compute_view_strides(const Layout& in, const Shape& shape) {
  if (in.sizes.empty() || numel(in.sizes) == 0) return contiguous_layout(shape).strides;
  std::vector<int64_t> st(shape.size(), 1);
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_base_stride = in.strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(in.sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= in.sizes[d];
    if (d == 0 || (in.sizes[d - 1] != 1 && in.strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        st[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = in.strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return st;
}

void add_view(const std::string& name, int num_inputs,
              std::function<Shape(const std::string&, const Shape&, const Attrs&)> shape_fn, ViewFn view,
              std::initializer_list<const char*> allowed) {
  OpDef d;
  d.name = name;
  d.pattern = OpPattern::View;
  d.num_inputs = num_inputs;
  std::vector<std::string> keys(allowed.begin(), allowed.end());
  d.infer = [name, shape_fn, keys](const Graph& g, const std::vector<int>& in, const Attrs& a) {
    for (const auto& kv : a)
      if (std::find(keys.begin(), keys.end(), kv.first) == keys.end())
        throw OpError(OpError::Kind::Type, name + "(): unexpected attribute '" + kv.first + "'");
    const TensorType& t = g.value(in.at(0)).type;
    return std::vector<TensorType>{{shape_fn(name, t.shape, a), t.dtype}};
  };
  d.view = std::move(view);
  register_builtin(std::move(d));
}

}  // namespace

void register_view_ops() {
  // reshape / view: attr "shape" (one -1 allowed).
  for (const char* name : {"reshape", "view"}) {
    add_view(
        name, 1,
        [](const std::string& op, const Shape& in, const Attrs& a) {
          return infer_reshape(op, in, attr_ints(a, "shape", op));
        },
        [name](const Layout& in, const Attrs& a) -> std::optional<Layout> {
          const Shape shape = infer_reshape(name, in.sizes, attr_ints(a, "shape", name));
          auto st = compute_view_strides(in, shape);
          if (!st) return std::nullopt;
          return Layout{shape, *st, in.offset};
        },
        {"shape"});
  }
  // permute: attr "dims", a permutation of the input dims.
  add_view(
      "permute", 1,
      [](const std::string& op, const Shape& in, const Attrs& a) {
        const auto dims = attr_ints(a, "dims", op);
        if (dims.size() != in.size())
          throw OpError(OpError::Kind::Value,
                        "permute(sparse_coo): number of dimensions in the tensor input does not match the length of "
                        "the desired ordering of dimensions i.e. input.dim() = " +
                            std::to_string(in.size()) + " is not equal to len(dims) = " + std::to_string(dims.size()));
        std::vector<bool> seen(in.size(), false);
        Shape out;
        for (int64_t d : dims) {
          const int64_t nd = normalize_dim(d, static_cast<int64_t>(in.size()));
          if (seen[nd]) throw OpError(OpError::Kind::Value, "permute(): duplicate dims are not allowed.");
          seen[nd] = true;
          out.push_back(in[nd]);
        }
        return out;
      },
      [](const Layout& in, const Attrs& a) -> std::optional<Layout> {
        Layout out;
        out.offset = in.offset;
        for (int64_t d : attr_ints(a, "dims", "permute")) {
          const int64_t nd = normalize_dim(d, static_cast<int64_t>(in.sizes.size()));
          out.sizes.push_back(in.sizes[nd]);
          out.strides.push_back(in.strides[nd]);
        }
        return out;
      },
      {"dims"});
  // expand: attr "shape"; -1 keeps a dim; new leading dims allowed; only size-1 dims grow.
  auto expand_shape = [](const std::string& op, const Shape& in, const Attrs& a) {
    const auto shape = attr_ints(a, "shape", op);
    if (shape.size() < in.size())
      throw OpError(OpError::Kind::Value, "expand(torch.FloatTensor{" + shape_str(in) + "}, size=" + shape_str(shape) +
                                              "): the number of sizes provided (" + std::to_string(shape.size()) +
                                              ") must be greater or equal to the number of dimensions in the tensor (" +
                                              std::to_string(in.size()) + ")");
    Shape out(shape.size());
    const size_t off = shape.size() - in.size();
    for (size_t i = 0; i < shape.size(); ++i) {
      const int64_t want = shape[i];
      if (i < off) {
        if (want < 0)
          throw OpError(OpError::Kind::Value,
                        "The expanded size of the tensor (-1) isn't allowed in a leading, non-existing dimension " +
                            std::to_string(i));
        out[i] = want;
        continue;
      }
      const int64_t have = in[i - off];
      if (want == -1 || want == have) {
        out[i] = have;
      } else if (have == 1) {
        out[i] = want;
      } else {
        throw OpError(OpError::Kind::Value,
                      "The expanded size of the tensor (" + std::to_string(want) + ") must match the existing size (" +
                          std::to_string(have) + ") at non-singleton dimension " + std::to_string(i) +
                          ".  Target sizes: " + shape_str(shape) + ".  Tensor sizes: " + shape_str(in));
      }
    }
    return out;
  };
  add_view(
      "expand", 1, expand_shape,
      [expand_shape](const Layout& in, const Attrs& a) -> std::optional<Layout> {
        Layout out;
        out.offset = in.offset;
        out.sizes = expand_shape("expand", in.sizes, a);
        const size_t off = out.sizes.size() - in.sizes.size();
        for (size_t i = 0; i < out.sizes.size(); ++i)
          out.strides.push_back(i < off || (in.sizes[i - off] == 1 && out.sizes[i] != 1) ? 0 : in.strides[i - off]);
        return out;
      },
      {"shape"});
  // slice: attrs dim, start, end, step (>0), clamped as Python slicing.
  auto slice_range = [](const Shape& in, const Attrs& a, int64_t* dim, int64_t* start, int64_t* len, int64_t* step) {
    *dim = normalize_dim(attr_int(a, "dim", "slice"), static_cast<int64_t>(in.size()));
    *step = attr_find(a, "step") ? attr_int(a, "step", "slice") : 1;
    if (*step <= 0) throw OpError(OpError::Kind::Value, "slice step must be positive");
    const int64_t n = in.at(*dim);
    int64_t s = attr_find(a, "start") ? attr_int(a, "start", "slice") : 0;
    int64_t e = attr_find(a, "end") ? attr_int(a, "end", "slice") : n;
    if (s < 0) s += n;
    if (e < 0) e += n;
    s = std::clamp<int64_t>(s, 0, n);
    e = std::clamp<int64_t>(e, s, n);
    *start = s;
    *len = (e - s + *step - 1) / *step;
  };
  add_view(
      "slice", 1,
      [slice_range](const std::string&, const Shape& in, const Attrs& a) {
        int64_t dim, start, len, step;
        slice_range(in, a, &dim, &start, &len, &step);
        Shape out = in;
        out[dim] = len;
        return out;
      },
      [slice_range](const Layout& in, const Attrs& a) -> std::optional<Layout> {
        int64_t dim, start, len, step;
        slice_range(in.sizes, a, &dim, &start, &len, &step);
        Layout out = in;
        out.offset += start * in.strides[dim];
        out.sizes[dim] = len;
        out.strides[dim] *= step;
        return out;
      },
      {"dim", "start", "end", "step"});
  // select: attrs dim, index; drops the dim.
  auto select_index = [](const Shape& in, const Attrs& a, int64_t* dim, int64_t* index) {
    if (in.empty()) throw OpError(OpError::Kind::Index, "select() cannot be applied to a 0-dim tensor.");
    *dim = normalize_dim(attr_int(a, "dim", "select"), static_cast<int64_t>(in.size()));
    const int64_t n = in[*dim];
    int64_t i = attr_int(a, "index", "select");
    if (i < -n || i >= n)
      throw OpError(OpError::Kind::Index, "select(): index " + std::to_string(i) + " out of range for tensor of size " +
                                              shape_str(in) + " at dimension " + std::to_string(*dim));
    *index = i < 0 ? i + n : i;
  };
  add_view(
      "select", 1,
      [select_index](const std::string&, const Shape& in, const Attrs& a) {
        int64_t dim, index;
        select_index(in, a, &dim, &index);
        Shape out = in;
        out.erase(out.begin() + dim);
        return out;
      },
      [select_index](const Layout& in, const Attrs& a) -> std::optional<Layout> {
        int64_t dim, index;
        select_index(in.sizes, a, &dim, &index);
        Layout out = in;
        out.offset += index * in.strides[dim];
        out.sizes.erase(out.sizes.begin() + dim);
        out.strides.erase(out.strides.begin() + dim);
        return out;
      },
      {"dim", "index"});
  // as_strided: attrs size, stride, storage_offset (relative to the input view's offset).
  add_view(
      "as_strided", 1,
      [](const std::string& op, const Shape&, const Attrs& a) {
        const auto size = attr_ints(a, "size", op);
        if (attr_ints(a, "stride", op).size() != size.size())
          throw OpError(OpError::Kind::Value, "mismatch in length of strides and shape");
        return size;
      },
      [](const Layout& in, const Attrs& a) -> std::optional<Layout> {
        Layout out;
        out.sizes = attr_ints(a, "size", "as_strided");
        out.strides = attr_ints(a, "stride", "as_strided");
        out.offset = in.offset + (attr_find(a, "storage_offset") ? attr_int(a, "storage_offset", "as_strided") : 0);
        return out;
      },
      {"size", "stride", "storage_offset"});
}

}  // namespace flow::dsl
