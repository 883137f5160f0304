// Note: see library_reference.h. Shapes are normalized first (1-D matmul operands become a row or
// column matrix, an unbatched conv input gets N = 1, a 1-D linear weight is one output row), so the
// loops are written once; the output's element order is unchanged by dropping those size-1 dims.
#include "dsl/library_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "dsl/op_table.h"

namespace flow::dsl {

namespace {

// Row-major strides of `in` seen from `out` (right-aligned; broadcast dims 0).
std::vector<int64_t> bstrides(const Shape& in, const Shape& out) {
  std::vector<int64_t> st(out.size(), 0);
  int64_t acc = 1;
  for (size_t k = 0; k < in.size(); ++k) {
    const size_t di = in.size() - 1 - k, d = out.size() - 1 - k;
    st[d] = in[di] == 1 ? 0 : acc;
    acc *= in[di];
  }
  return st;
}

int64_t offset_of(int64_t flat, const Shape& shape, const std::vector<int64_t>& st) {
  int64_t off = 0;
  for (size_t d = shape.size(); d-- > 0;) {
    off += (flat % shape[d]) * st[d];
    flat /= shape[d];
  }
  return off;
}

std::vector<double> matmul_ref(const HostTensor& a, const HostTensor& b) {
  const Shape a2 = a.type.shape.size() == 1 ? Shape{1, a.type.shape[0]} : a.type.shape;
  const Shape b2 = b.type.shape.size() == 1 ? Shape{b.type.shape[0], 1} : b.type.shape;
  const Shape ba(a2.begin(), a2.end() - 2), bb(b2.begin(), b2.end() - 2);
  const Shape batch = broadcast_shapes(ba, bb);
  const int64_t m = a2[a2.size() - 2], k = a2.back(), n = b2.back();
  const std::vector<int64_t> sa = bstrides(ba, batch), sb = bstrides(bb, batch);
  const int64_t nb = numel(batch);
  std::vector<double> out(static_cast<size_t>(nb * m * n), 0.0);
  for (int64_t bi = 0; bi < nb; ++bi) {
    const double* pa = a.data.data() + offset_of(bi, batch, sa) * m * k;
    const double* pb = b.data.data() + offset_of(bi, batch, sb) * k * n;
    double* po = out.data() + bi * m * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < k; ++p) acc += pa[i * k + p] * pb[p * n + j];
        po[i * n + j] = acc;
      }
  }
  return out;
}

std::vector<double> linear_ref(const HostTensor& x, const HostTensor& w, const HostTensor* bias, const Shape& out) {
  const int64_t in_f = x.type.shape.back();
  const int64_t rows_all = numel(Shape(x.type.shape.begin(), x.type.shape.end() - 1));
  const int64_t outs = w.type.shape.size() == 2 ? w.type.shape[0] : 1;
  std::vector<double> r(static_cast<size_t>(rows_all * outs), 0.0);
  for (int64_t i = 0; i < rows_all; ++i)
    for (int64_t o = 0; o < outs; ++o) {
      double acc = 0;
      for (int64_t p = 0; p < in_f; ++p) acc += x.data[i * in_f + p] * w.data[o * in_f + p];
      r[i * outs + o] = acc;
    }
  if (bias) {
    const std::vector<int64_t> st = bstrides(bias->type.shape, out);
    for (int64_t e = 0; e < static_cast<int64_t>(r.size()); ++e) r[e] += bias->data[offset_of(e, out, st)];
  }
  return r;
}

// Any spatial rank nsp (2 or 3), written once over three spatial dims: a 2-d convolution is a 3-d
// one of depth 1 (kernel depth 1, stride, dilation 1 and no padding along it).
std::vector<double> conv_ref(const Node& n, bool transposed, const HostTensor& x, const HostTensor& w,
                             const HostTensor* bias, const Shape& out_shape) {
  const size_t nsp = w.type.shape.size() - 2;
  auto to_3d = [nsp](Shape s, size_t rank_batched, int64_t unit) {
    if (s.size() + 1 == rank_batched) s.insert(s.begin(), 1);  // unbatched: N = 1
    if (nsp == 2) s.insert(s.begin() + 2, unit);
    return s;
  };
  auto spatial = [&](const char* key, int64_t unit) {
    std::vector<int64_t> v = attr_ints(n.attrs, key, n.op);
    if (nsp == 2) v.insert(v.begin(), unit);
    return v;
  };
  const Shape xs = to_3d(x.type.shape, nsp + 2, 1), os = to_3d(out_shape, nsp + 2, 1),
              ws = to_3d(w.type.shape, nsp + 2, 1);
  const std::vector<int64_t> stride = spatial("stride", 1), pad = spatial("padding", 0), dil = spatial("dilation", 1);
  const int64_t groups = attr_int(n.attrs, "groups", n.op);
  const int64_t N = xs[0], C = xs[1], OC = os[1];
  const int64_t in_sp[3] = {xs[2], xs[3], xs[4]}, out_sp[3] = {os[2], os[3], os[4]}, k[3] = {ws[2], ws[3], ws[4]};
  const int64_t icg = C / groups, ocg = OC / groups, taps = k[0] * k[1] * k[2];
  const int64_t in_img = in_sp[0] * in_sp[1] * in_sp[2], out_img = out_sp[0] * out_sp[1] * out_sp[2];
  std::vector<double> out(static_cast<size_t>(numel(os)), 0.0);
  // (ia, oa): an input and an output position along spatial dim d related by tap t:
  // forward o * s - p + t * d = i; transposed (every input scatters) i * s - p + t * d = o.
  for (int64_t b = 0; b < N; ++b)
    for (int64_t g = 0; g < groups; ++g)
      for (int64_t oc = 0; oc < ocg; ++oc)
        for (int64_t ic = 0; ic < icg; ++ic)
          for (int64_t t = 0; t < taps; ++t) {
            const int64_t tap[3] = {t / (k[1] * k[2]), t / k[2] % k[1], t % k[2]};
            // w [OC, IC/G, k...] forward, [IC, OC/G, k...] transposed
            const int64_t wi = transposed ? (g * icg + ic) * ocg + oc : (g * ocg + oc) * icg + ic;
            const double wv = w.data[static_cast<size_t>(wi * taps + t)];
            const double* X = &x.data[static_cast<size_t>((b * C + g * icg + ic) * in_img)];
            double* O = &out[static_cast<size_t>((b * OC + g * ocg + oc) * out_img)];
            const int64_t* from = transposed ? in_sp : out_sp;  // the loop runs over these positions
            const int64_t* to = transposed ? out_sp : in_sp;
            for (int64_t p0 = 0; p0 < from[0]; ++p0) {
              const int64_t q0 = p0 * stride[0] - pad[0] + tap[0] * dil[0];
              if (q0 < 0 || q0 >= to[0]) continue;
              for (int64_t p1 = 0; p1 < from[1]; ++p1) {
                const int64_t q1 = p1 * stride[1] - pad[1] + tap[1] * dil[1];
                if (q1 < 0 || q1 >= to[1]) continue;
                for (int64_t p2 = 0; p2 < from[2]; ++p2) {
                  const int64_t q2 = p2 * stride[2] - pad[2] + tap[2] * dil[2];
                  if (q2 < 0 || q2 >= to[2]) continue;
                  const int64_t at_from = (p0 * from[1] + p1) * from[2] + p2, at_to = (q0 * to[1] + q1) * to[2] + q2;
                  if (transposed) {
                    O[at_to] += wv * X[at_from];
                  } else {
                    O[at_from] += wv * X[at_to];
                  }
                }
              }
            }
          }
  if (bias) {
    for (int64_t b = 0; b < N; ++b)
      for (int64_t c = 0; c < OC; ++c)
        for (int64_t e = 0; e < out_img; ++e) out[static_cast<size_t>((b * OC + c) * out_img + e)] += bias->data[c];
  }
  return out;
}

// argsort (dsl/ops/sort.cpp): a stable sort of each line's positions, NaN above every number.
std::vector<double> argsort_ref(const Node& n, const HostTensor& x, const Shape& out_shape) {
  const int64_t dim = attr_int(n.attrs, "dim", "argsort");
  const int64_t k = attr_int(n.attrs, "k", "argsort");
  const bool descending = attr_bool(n.attrs, "descending", "argsort");
  const Shape& s = x.type.shape;
  const int64_t len = s.empty() ? 1 : s[static_cast<size_t>(dim)];
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(dim) + 1; d < s.size(); ++d) inner *= s[d];
  const int64_t outer = len * inner == 0 ? 0 : numel(s) / (len * inner);
  std::vector<double> out(static_cast<size_t>(numel(out_shape)));
  std::vector<int64_t> pos(static_cast<size_t>(len));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < inner; ++i) {
      auto key = [&](int64_t p) { return x.data[static_cast<size_t>((o * len + p) * inner + i)]; };
      for (int64_t p = 0; p < len; ++p) pos[static_cast<size_t>(p)] = p;
      std::stable_sort(pos.begin(), pos.end(), [&](int64_t a, int64_t b) {
        const double va = key(a), vb = key(b);
        if (std::isnan(va) || std::isnan(vb))
          return descending ? std::isnan(va) && !std::isnan(vb) : !std::isnan(va) && std::isnan(vb);
        return descending ? va > vb : va < vb;
      });
      for (int64_t j = 0; j < k; ++j)
        out[static_cast<size_t>((o * k + j) * inner + i)] = static_cast<double>(pos[static_cast<size_t>(j)]);
    }
  }
  return out;
}

// scatter (dsl/ops/scatter.cpp): positions of `index` in row-major order, each combined into the
// copy of self where it points (serially: duplicates apply in order, the last store wins).
std::vector<double> scatter_ref(const Node& n, const HostTensor& self, const HostTensor& index, const HostTensor& src) {
  const int64_t dim = attr_int(n.attrs, "dim", "scatter");
  const std::string reduce = attr_str(n.attrs, "reduce", "scatter");
  const bool include_self = attr_bool(n.attrs, "include_self", "scatter");
  const auto dims = [](const Shape& s) { return s.empty() ? Shape{1} : s; };
  const Shape is = dims(index.type.shape), ss = dims(src.type.shape), os = dims(self.type.shape);
  const size_t rank = is.size();
  std::vector<double> out = self.data;
  const int64_t count = numel(is);
  std::vector<int64_t> targets(static_cast<size_t>(count)), sources(static_cast<size_t>(count));
  for (int64_t e = 0; e < count; ++e) {
    int64_t rest = e, target = 0, source = 0, out_stride = 1, src_stride = 1;
    for (size_t d = rank; d-- > 0;) {
      const int64_t c = rest % is[d];
      rest /= is[d];
      int64_t oc = c;
      if (static_cast<int64_t>(d) == dim) {
        const auto v = static_cast<int64_t>(index.data[static_cast<size_t>(e)]);
        if (v < 0 || v >= os[d]) throw_index_out_of_bounds(v, os[d], dim, OpError::Kind::Value);
        oc = v;
      }
      target += oc * out_stride;
      source += c * src_stride;
      out_stride *= os[d];
      src_stride *= ss[d];
    }
    targets[static_cast<size_t>(e)] = target;
    sources[static_cast<size_t>(e)] = source;
  }
  const bool is_bool = self.type.dtype == DType::Bool;
  double identity = 0;
  if (reduce == "prod") identity = 1;
  if (reduce == "amax") identity = is_bool ? 0 : -std::numeric_limits<double>::infinity();
  if (reduce == "amin") identity = is_bool ? 1 : std::numeric_limits<double>::infinity();
  if (!include_self && reduce != "none")
    for (int64_t t : targets) out[static_cast<size_t>(t)] = identity;
  for (int64_t e = 0; e < count; ++e) {
    double& o = out[static_cast<size_t>(targets[static_cast<size_t>(e)])];
    const double v = src.data[static_cast<size_t>(sources[static_cast<size_t>(e)])];
    if (reduce == "none") {
      o = v;
    } else if (reduce == "sum") {
      o = is_bool ? double((o != 0) || (v != 0)) : o + v;
    } else if (reduce == "prod") {
      o = is_bool ? double((o != 0) && (v != 0)) : o * v;
    } else if (std::isnan(o) || std::isnan(v)) {
      o = std::numeric_limits<double>::quiet_NaN();
    } else {
      o = reduce == "amax" ? std::max(o, v) : std::min(o, v);
    }
  }
  return out;
}

// embedding_bag (dsl/ops/embedding_bag.cpp): each bag's positions in order; max as torch's kernels
// (the first counted row taken, a later value kept only when greater). Raises the CPU executor's
// messages for bad offsets and indices.
std::vector<double> embedding_bag_ref(const Node& n, const HostTensor& indices, const HostTensor& weight,
                                      const HostTensor& offsets, const HostTensor* per_sample_weights) {
  const std::string mode = attr_str(n.attrs, "mode", "embedding_bag");
  const int64_t padding_idx =
      attr_find(n.attrs, "padding_idx") ? attr_int(n.attrs, "padding_idx", "embedding_bag") : -1;
  const int64_t rows = weight.type.shape.at(0), dim = weight.type.shape.at(1);
  const auto positions = static_cast<int64_t>(indices.data.size());
  const int64_t bags = static_cast<int64_t>(offsets.data.size()) - 1;
  const auto offset = [&](int64_t b) { return static_cast<int64_t>(offsets.data[static_cast<size_t>(b)]); };
  std::vector<double> out(static_cast<size_t>(bags * dim), 0.0);
  if (out.empty()) return out;  // as the executor: an empty result reads no data
  check_embedding_bag_offsets(offset, bags, positions);
  for (int64_t b = 0; b < bags; ++b) {
    double* o = out.data() + b * dim;
    int64_t counted = 0;
    for (int64_t p = offset(b); p < offset(b + 1); ++p) {
      const auto ix = static_cast<int64_t>(indices.data[static_cast<size_t>(p)]);
      if (ix < 0 || ix >= rows) throw_embedding_bag_index(p, ix, rows);
      if (ix == padding_idx) continue;
      const double* w = weight.data.data() + ix * dim;
      const double scale = per_sample_weights ? per_sample_weights->data[static_cast<size_t>(p)] : 1.0;
      for (int64_t c = 0; c < dim; ++c) {
        if (mode != "max")
          o[c] += scale * w[c];
        else if (counted == 0 || w[c] > o[c])
          o[c] = w[c];
      }
      ++counted;
    }
    if (mode == "mean" && counted > 0)
      for (int64_t c = 0; c < dim; ++c) o[c] /= static_cast<double>(counted);
  }
  return out;
}
}  // namespace

void check_embedding_bag_offsets(const std::function<int64_t(int64_t)>& offset, int64_t bags, int64_t positions) {
  if (bags <= 0) return;
  const auto err = [](const std::string& m) { throw OpError(OpError::Kind::Value, m); };
  if (offset(0) != 0)
    err("offsets[0] has to be 0, i.e., the first sequence in the mini-batch has to start from position 0. However, "
        "got " +
        std::to_string(offset(0)));
  for (int64_t b = 1; b <= bags; ++b) {
    const int64_t o = offset(b), prev = offset(b - 1);
    if (o > positions)
      err("offsets[" + std::to_string(b) + "] can not be greater than input's length " + std::to_string(positions) +
          " but got offsets[" + std::to_string(b) + "] of " + std::to_string(o));
    if (o < prev)
      err("offsets must be non-decreasing, but got offsets[" + std::to_string(b) + "] of " + std::to_string(o) +
          " after offsets[" + std::to_string(b - 1) + "] of " + std::to_string(prev));
  }
}

void throw_embedding_bag_index(int64_t position, int64_t value, int64_t rows) {
  throw OpError(OpError::Kind::Value, "Index " + std::to_string(position) + " of input takes value " +
                                          std::to_string(value) + " which is not in the valid range [0, " +
                                          std::to_string(rows) + ")");
}

bool has_library_reference(const std::string& op) {
  return op == "matmul" || op == "linear" || conv_spatial_rank(op) > 0 || op == "argsort" || op == "scatter" ||
         op == "embedding_bag";
}

HostTensor run_library_reference(const Graph& g, const Node& n, const std::vector<const HostTensor*>& in,
                                 bool float64_math) {
  const TensorType out_t = g.value(n.outputs.at(0)).type;
  const HostTensor* bias = in.size() > 2 ? in[2] : nullptr;
  HostTensor out{out_t, {}};
  if (n.op == "argsort") {
    out.data = argsort_ref(n, *in.at(0), out_t.shape);
  } else if (n.op == "scatter") {
    out.data = scatter_ref(n, *in.at(0), *in.at(1), *in.at(2));
  } else if (n.op == "embedding_bag") {
    out.data = embedding_bag_ref(n, *in.at(0), *in.at(1), *in.at(2), in.size() > 3 ? in[3] : nullptr);
  } else if (n.op == "matmul") {
    out.data = matmul_ref(*in.at(0), *in.at(1));
  } else if (n.op == "linear") {
    out.data = linear_ref(*in.at(0), *in.at(1), bias, out_t.shape);
  } else if ((n.op == "conv2d" || n.op == "conv_transpose2d") && attr_find(n.attrs, "channels_last")) {
    // [N, OH, OW, C]: the NCHW result, permuted.
    const Shape& o = out_t.shape;
    const std::vector<double> nchw =
        conv_ref(n, n.op == "conv_transpose2d", *in.at(0), *in.at(1), bias, Shape{o[0], o[3], o[1], o[2]});
    out.data.resize(nchw.size());
    for (int64_t b = 0; b < o[0]; ++b)
      for (int64_t h = 0; h < o[1]; ++h)
        for (int64_t w = 0; w < o[2]; ++w)
          for (int64_t c = 0; c < o[3]; ++c)
            out.data[static_cast<size_t>(((b * o[1] + h) * o[2] + w) * o[3] + c)] =
                nchw[static_cast<size_t>(((b * o[3] + c) * o[1] + h) * o[2] + w)];
  } else if (conv_spatial_rank(n.op) > 0) {
    out.data = conv_ref(n, is_transposed_conv(n.op), *in.at(0), *in.at(1), bias, out_t.shape);
  } else {
    throw std::logic_error("run_library_reference: '" + n.op + "' is not a library op");
  }
  if (static_cast<int64_t>(out.data.size()) != numel(out_t.shape))
    throw std::logic_error("run_library_reference: " + n.op + " produced a wrong number of elements");
  for (double& v : out.data) v = round_to_dtype(out_t.dtype, v, float64_math);
  return out;
}

}  // namespace flow::dsl
