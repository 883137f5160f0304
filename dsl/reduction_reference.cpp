// Note: see reduction_reference.h. Arg reductions compare stored values directly (no arithmetic,
// so no rounding question); scans evaluate the op table's reduce_combine with the interpreter's
// expression evaluator, so their rounding is the one every backend is held to.
#include "dsl/reduction_reference.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "dsl/interpreter.h"

namespace flow::dsl {

namespace {

// Flat input offsets per output row (kept dims row-major), each row row-major over `dims`.
std::vector<std::vector<int64_t>> rows_of(const Shape& s, const std::vector<int64_t>& dims) {
  std::vector<int64_t> st(s.size(), 1);
  for (size_t d = s.size(); d-- > 1;) st[d - 1] = st[d] * s[d];
  std::vector<int64_t> kept, red;
  for (int64_t d = 0; d < static_cast<int64_t>(s.size()); ++d)
    (std::find(dims.begin(), dims.end(), d) != dims.end() ? red : kept).push_back(d);
  auto enumerate = [&](const std::vector<int64_t>& ds) {
    std::vector<int64_t> offs{0};
    for (int64_t d : ds) {
      std::vector<int64_t> next;
      next.reserve(offs.size() * static_cast<size_t>(std::max<int64_t>(s[d], 0)));
      for (int64_t o : offs)
        for (int64_t i = 0; i < s[d]; ++i) next.push_back(o + i * st[d]);
      offs = std::move(next);
    }
    return offs;
  };
  std::vector<std::vector<int64_t>> out;
  const std::vector<int64_t> red_offs = enumerate(red);
  for (int64_t k : enumerate(kept)) {
    std::vector<int64_t> row;
    row.reserve(red_offs.size());
    for (int64_t r : red_offs) row.push_back(k + r);
    out.push_back(std::move(row));
  }
  return out;
}

Scalar to_scalar(DType t, double v) {
  Scalar s{t};
  if (is_floating(t)) {
    s.f = v;
  } else {
    s.i = static_cast<int64_t>(v);
  }
  return s;
}

}  // namespace

std::vector<HostTensor> run_arg_or_scan(const Graph& g, const Node& n, const OpDef& def, const HostTensor& x,
                                        bool float64_math) {
  const ReduceSpec& spec = *def.reduce;
  const std::vector<int64_t> dims = attr_ints(n.attrs, "dims", n.op);
  const auto rows = rows_of(x.type.shape, dims);
  if (spec.arg) {
    const bool is_max = spec.op == ReduceOp::Max;
    std::vector<HostTensor> outs;
    for (int v : n.outputs) outs.push_back(HostTensor{g.value(v).type, {}});
    HostTensor& idx = outs.back();
    for (const auto& row : rows) {
      if (row.empty()) throw std::runtime_error("interpret_graph: " + n.op + " of an empty row");
      int64_t best = 0;
      for (int64_t j = 1; j < static_cast<int64_t>(row.size()); ++j) {
        const double a = x.data[row[best]], b = x.data[row[j]];
        if (std::isnan(a)) break;  // the first NaN wins
        if (std::isnan(b) || (is_max ? b > a : b < a)) best = j;
      }
      if (outs.size() == 2) outs[0].data.push_back(x.data[row[best]]);
      idx.data.push_back(static_cast<double>(best));
    }
    return outs;
  }
  if (!spec.scan) throw std::logic_error("run_arg_or_scan: '" + n.op + "' is neither an arg reduction nor a scan");
  const InterpOptions opt{float64_math};
  const TensorType out_t = g.value(n.outputs.at(0)).type;
  const DType acc = spec.acc_dtype(out_t.dtype);
  const Expr xv = var("x", compute_dtype(x.type.dtype));
  const Expr a = var("a", acc);
  const Expr step = reduce_combine(spec.op, a, cast(acc, cast(out_t.dtype, xv)));
  const Expr out_e = cast(compute_dtype(out_t.dtype), cast(out_t.dtype, a));
  const Scalar identity = eval_expr(reduce_identity(spec.op, acc), nullptr, nullptr, opt);
  HostTensor out{out_t, std::vector<double>(x.data.size())};
  // A scan runs along one dim: each "row" of rows_of(dims) is one line of the scan.
  for (const auto& row : rows) {
    Scalar s = identity;
    for (int64_t off : row) {
      const Scalar xs = to_scalar(xv.type(), x.data[off]);
      s = eval_expr(
          step, [&](const std::string& name) { return name == "a" ? s : xs; }, nullptr, opt);
      const Scalar r = eval_expr(
          out_e, [&](const std::string&) { return s; }, nullptr, opt);
      out.data[off] = round_to_dtype(out_t.dtype, is_floating(r.type) ? r.f : static_cast<double>(r.i), float64_math);
    }
  }
  return {out};
}

}  // namespace flow::dsl
