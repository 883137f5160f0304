#include "scheduler/lowering.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <set>
#include <stdexcept>

#include "dsl/interpreter.h"
#include "dsl/ir_visitor.h"
#include "dsl/op_table.h"

namespace flow::sched {

using namespace flow::dsl;

// ---- StmtList ----------------------------------------------------------------------------------

Stmt StmtList::build() const {
  // Fold from the back: a Let or Allocate scopes every item after it.
  Stmt tail;
  std::vector<Stmt> run;
  for (size_t k = items_.size(); k-- > 0;) {
    const Item& it = items_[k];
    if (it.kind == Item::Kind::Stmt) {
      run.insert(run.begin(), it.stmt);
      continue;
    }
    std::vector<Stmt> inner = run;
    if (tail.defined()) inner.push_back(tail);
    const Stmt body = make_block(std::move(inner));
    run.clear();
    tail = it.kind == Item::Kind::Let ? make_let(it.name, it.value, body)
                                      : make_allocate(it.name, it.dtype, it.size, it.scope, body);
  }
  if (tail.defined()) run.push_back(tail);
  return make_block(std::move(run));
}

// ---- KernelSignature ---------------------------------------------------------------------------

KernelSignature::KernelSignature(const KernelInstance& ki) : ki_(ki) {
  for (const auto& b : ki.buffers) {
    params_.push_back({b.name, ParamKind::Buffer, b.dtype, b.is_output});
    KernelArg a;
    a.kind = KernelArg::Kind::Buffer;
    a.value = b.value;
    args_.push_back(a);
  }
  auto add_int = [&](const std::string& name, int64_t v) {
    params_.push_back({name, ParamKind::Scalar, DType::Int64, false});
    KernelArg a;
    a.kind = KernelArg::Kind::Int;
    a.i = v;
    args_.push_back(a);
    vars_[name] = var(name, DType::Int64);
  };
  for (size_t d = 0; d < ki.kept.size(); ++d) add_int("k" + std::to_string(d), ki.kept[d]);
  for (size_t d = 0; d < ki.reduced.size(); ++d) add_int("r" + std::to_string(d), ki.reduced[d]);
  for (const auto& b : ki.buffers)
    for (size_t d = 0; d < b.classes.size(); ++d)
      if (b.classes[d] == StrideClass::Dynamic) add_int("s_" + b.name + "_" + std::to_string(d), b.strides[d]);
  // Own strides (injective inputs, read at computed indices) are constants, not parameters: a group
  // with an injective op is shape-specialized anyway (KernelInstance::shape_specialized). The
  // vector loop then knows where each lane reads: a unit stride is a contiguous read, and a flipped
  // row of RGB pixels one load and a shuffle (jit/llvm/lane_form.h), where a stride passed at run
  // time made every read a gather (and half types have no x86 gather instruction).
  for (int v : ki.scalar_constants) {
    const auto& val = ki.graph->value(v);
    const std::string name = "c" + std::to_string(v);
    KernelArg a;
    a.value = v;
    if (is_floating(val.type.dtype)) {
      params_.push_back({name, ParamKind::Scalar, DType::Float64, false});
      a.kind = KernelArg::Kind::Float;
      a.f = val.scalar;
      vars_[name] = var(name, DType::Float64);
    } else {
      params_.push_back({name, ParamKind::Scalar, DType::Int64, false});
      a.kind = KernelArg::Kind::Int;
      a.i = static_cast<int64_t>(val.scalar);
      vars_[name] = var(name, DType::Int64);
    }
    args_.push_back(a);
  }
}

Expr KernelSignature::kept_size(size_t d) const {
  return vars_.at("k" + std::to_string(d));
}
Expr KernelSignature::reduced_size(size_t d) const {
  return vars_.at("r" + std::to_string(d));
}

Expr KernelSignature::kept_total() const {
  Expr n = make_int(1);
  for (size_t d = 0; d < ki_.kept.size(); ++d) n = d == 0 ? kept_size(d) : n * kept_size(d);
  return n;
}

Expr KernelSignature::reduced_total() const {
  Expr n = make_int(1);
  for (size_t d = 0; d < ki_.reduced.size(); ++d) n = d == 0 ? reduced_size(d) : n * reduced_size(d);
  return n;
}

Expr KernelSignature::stride(const KernelBuffer& b, size_t d) const {
  switch (b.classes[d]) {
    case StrideClass::Zero:
      return make_int(0);
    case StrideClass::One:
      return make_int(1);
    case StrideClass::Dynamic:
      return vars_.at("s_" + b.name + "_" + std::to_string(d));
    case StrideClass::Small:
      return make_int(b.strides[d]);
  }
  return make_int(0);
}

Expr KernelSignature::own_stride(const KernelBuffer& b, size_t d) const {
  return make_int(b.own_strides[d]);
}

Expr KernelSignature::constant(int value) const {
  return vars_.at("c" + std::to_string(value));
}

// ---- GroupValues -------------------------------------------------------------------------------

GroupValues::GroupValues(const KernelInstance& ki, const KernelSignature& sig) : ki_(ki), sig_(sig) {}

void GroupValues::begin_body(StmtList* body) {
  body_ = body;
  body_values_.clear();
}

bool is_row_value(const KernelInstance& ki, int v) {
  const FusionGroup& grp = *ki.group;
  if (grp.kind != GroupKind::Reduction) return false;
  const auto& val = ki.graph->value(v);
  if (val.kind == ValueKind::OpResult && lookup_op(ki.graph->node(val.producer).op).pattern == OpPattern::Reduction)
    return true;
  if (val.type.shape == grp.domain) return false;
  return is_row_shape(grp, val.type.shape);
}

bool GroupValues::is_row_value(int v) const {
  return sched::is_row_value(ki_, v);
}

Expr GroupValues::index(const KernelBuffer& b) const {
  Expr idx;
  auto term = [&](const Expr& i, size_t d) {
    if (b.classes[d] == StrideClass::Zero) return;
    const Expr t = b.classes[d] == StrideClass::One ? i : i * sig_.stride(b, d);
    idx = idx.defined() ? idx + t : t;
  };
  const size_t K = ki_.kept.size();
  if (flat_inner.defined() && K >= 2 && b.classes[K - 1] == StrideClass::One && b.strides[K - 2] == ki_.kept[K - 1]) {
    for (size_t d = 0; d + 2 < K; ++d) term(kept_idx.at(d), d);
    term(flat_inner, K - 1);
    return idx;
  }
  for (size_t d = 0; d < ki_.kept.size(); ++d) term(kept_idx.at(d), d);
  for (size_t d = 0; d < ki_.reduced.size(); ++d)
    if (b.classes[ki_.kept.size() + d] != StrideClass::Zero) term(red_idx.at(d), ki_.kept.size() + d);
  return idx.defined() ? idx : make_int(0);
}

namespace {

// Whether `e` (in compute_dtype(half)) always holds a value that the storage type `half`
// represents exactly, so rounding it to `half` changes nothing: a value read from (or already
// rounded to) `half`, a constant it holds, and selections and min/max of such values; for the half
// types also negation, absolute value and integer rounding (not for small ints: -(-128) leaves
// int8). NaN counts as exact (rounding keeps it NaN). This lets chains of injective and selection
// ops (padding, max pooling's maxima, relu) skip a rounding per op.
bool exact_in(const Expr& e, DType half, const std::map<std::string, DType>& exact_vars) {
  if (const Cast* c = e.as<Cast>()) return c->value.type() == half;
  if (const IntImm* i = e.as<IntImm>())
    return is_small_int(half) && i->value >= integer_min(half) && i->value <= integer_max(half);
  if (is_small_int(half) && e.as<Call>()) return false;
  if (const Var* v = e.as<Var>()) {
    const auto it = exact_vars.find(v->name);
    return it != exact_vars.end() && it->second == half;
  }
  if (const FloatImm* f = e.as<FloatImm>()) {
    const auto x = static_cast<float>(f->value);
    if (std::isnan(x)) return true;
    const float back =
        half == DType::BFloat16 ? bf16_bits_to_float(float_to_bf16_bits(x)) : half_bits_to_float(float_to_half_bits(x));
    return back == x && static_cast<double>(x) == f->value;
  }
  if (const Select* s = e.as<Select>())
    return exact_in(s->true_value, half, exact_vars) && exact_in(s->false_value, half, exact_vars);
  if (const Min* m = e.as<Min>()) return exact_in(m->a, half, exact_vars) && exact_in(m->b, half, exact_vars);
  if (const Max* m = e.as<Max>()) return exact_in(m->a, half, exact_vars) && exact_in(m->b, half, exact_vars);
  if (const Call* c = e.as<Call>()) {
    switch (c->func) {
      case Intrinsic::Neg:
      case Intrinsic::Abs:
      case Intrinsic::Floor:
      case Intrinsic::Ceil:
      case Intrinsic::Trunc:
      case Intrinsic::Round:
        return exact_in(c->args[0], half, exact_vars);
      default:
        return false;
    }
  }
  return false;
}

// The range [lo, hi] of index expression `e` of an injective op, when index arithmetic shows it:
// constants, the op's output indices (each within its output dim), sums, differences, products by
// constants, min and max. Anything else (a loaded index, a division) has no range here.
std::optional<std::pair<int64_t, int64_t>> index_range(const Expr& e, const std::vector<Expr>& out_idx,
                                                       const Shape& out_shape) {
  using Range = std::optional<std::pair<int64_t, int64_t>>;
  if (const IntImm* c = e.as<IntImm>()) return std::make_pair(c->value, c->value);
  for (size_t j = 0; j < out_idx.size(); ++j)
    if (dsl::equal(e, out_idx[j])) return out_shape[j] > 0 ? Range({0, out_shape[j] - 1}) : std::nullopt;
  const auto* bin = static_cast<const BinaryNode*>(e.get());
  switch (e.kind()) {
    case ExprKind::Add:
    case ExprKind::Sub:
    case ExprKind::Min:
    case ExprKind::Max:
    case ExprKind::Mul:
      break;
    default:
      return std::nullopt;
  }
  const Range a = index_range(bin->a, out_idx, out_shape), b = index_range(bin->b, out_idx, out_shape);
  if (!a || !b) return std::nullopt;
  switch (e.kind()) {
    case ExprKind::Add:
      return std::make_pair(a->first + b->first, a->second + b->second);
    case ExprKind::Sub:
      return std::make_pair(a->first - b->second, a->second - b->first);
    case ExprKind::Min:
      return std::make_pair(std::min(a->first, b->first), std::min(a->second, b->second));
    case ExprKind::Max:
      return std::make_pair(std::max(a->first, b->first), std::max(a->second, b->second));
    default: {  // Mul: by a constant
      const bool ca = a->first == a->second, cb = b->first == b->second;
      if (!ca && !cb) return std::nullopt;
      const int64_t k = ca ? a->first : b->first;
      const auto& r = ca ? *b : *a;
      return k >= 0 ? std::make_pair(k * r.first, k * r.second) : std::make_pair(k * r.second, k * r.first);
    }
  }
}

// `e`, computed by node `n`, checked to be in its output's compute dtype.
Expr checked_compute_type(const Node& n, const OpContext& ctx, Expr e) {
  const DType out = ctx.outputs.at(0).dtype;
  if (e.type() != compute_dtype(out))
    throw std::logic_error("op '" + n.op + "' computed " + dtype_name(e.type()) + ", expected " +
                           dtype_name(compute_dtype(out)));
  return e;
}

// Elementwise node `n`'s compute expression over its operands' values `in` (not yet rounded to its
// storage dtype).
Expr elementwise_expr(const Graph& g, const Node& n, const std::vector<Expr>& in) {
  const OpContext ctx = make_op_context(g, n);
  return checked_compute_type(n, ctx, lookup_op(n.op).compute(in, ctx));
}

// Injective node `n`'s expression at output indices `idx`, reading its inputs through `loader`.
Expr injective_expr(const Graph& g, const Node& n, const std::vector<Expr>& idx, const InputLoader& loader) {
  const OpContext ctx = make_op_context(g, n);
  return checked_compute_type(n, ctx, lookup_op(n.op).injective(idx, loader, ctx));
}

}  // namespace

Expr GroupValues::round_to_storage(Expr e, DType storage) {
  if (!is_storage_only(storage) || exact_in(e, storage, {})) return e;
  return cast(compute_dtype(storage), cast(storage, std::move(e)));
}

Expr GroupValues::round_in_body(Expr e, DType storage) const {
  if (!is_storage_only(storage) || exact_in(e, storage, exact_vars_)) return e;
  return cast(compute_dtype(storage), cast(storage, std::move(e)));
}

Expr GroupValues::compute_node(int node) {
  const Node& n = ki_.graph->node(node);
  const OpDef& def = lookup_op(n.op);
  if (def.pattern == OpPattern::Injective && def.injective) {
    // Output indices are the domain indices (injective groups keep every dim of the domain).
    const size_t rank = ki_.graph->value(n.outputs.at(0)).type.shape.size();
    std::vector<Expr> out_idx(kept_idx.begin(), kept_idx.begin() + static_cast<std::ptrdiff_t>(rank));
    const Shape& out_shape = ki_.graph->value(n.outputs.at(0)).type.shape;
    int taps = 0;
    const InputLoader loader = [&](int k, const std::vector<Expr>& idx) {
      const int v = n.inputs.at(k);
      const Expr e = value_at(v, idx);
      // A load in range at every output index (pad's clamped taps, flip) is bound before the op's
      // expression: the code generators then read it unconditionally, where under a select arm
      // (pad's fill) they would guard it lane by lane and lose the vector loop.
      const Shape& in_shape = ki_.graph->value(v).type.shape;
      bool in_range = body_ != nullptr;
      for (size_t d = 0; d < idx.size() && in_range; ++d) {
        const auto r = index_range(idx[d], out_idx, out_shape);
        in_range = r && r->first >= 0 && r->second < in_shape[d];
      }
      if (!in_range) return e;
      // Named by node, input and tap: one name is one input's dtype in every body.
      return bind("t" + std::to_string(n.outputs.at(0)) + "_" + std::to_string(k) + "_" + std::to_string(taps++), e,
                  ki_.graph->value(v).type.dtype);
    };
    return round_in_body(injective_expr(*ki_.graph, n, out_idx, loader), ki_.graph->value(n.outputs.at(0)).type.dtype);
  }
  if (def.pattern != OpPattern::Elementwise || !def.compute)
    throw std::logic_error("op '" + n.op + "' has no elementwise definition");
  std::vector<Expr> in;
  for (int v : n.inputs) in.push_back(value(v));
  const DType out = ki_.graph->value(n.outputs.at(0)).type.dtype;
  return round_in_body(elementwise_expr(*ki_.graph, n, in), out);
}

bool GroupValues::is_inlined(int node) const {
  const auto& inl = ki_.group->inlined;
  return std::binary_search(inl.begin(), inl.end(), node);
}

Expr GroupValues::value_at(int v, const std::vector<Expr>& idx) {
  const auto& val = ki_.graph->value(v);
  if (val.kind == ValueKind::Constant) return value(v);
  if (val.kind == ValueKind::OpResult && is_inlined(val.producer)) {
    const Node& p = ki_.graph->node(val.producer);
    const OpDef& def = lookup_op(p.op);
    if (def.pattern == OpPattern::Injective && def.injective) {  // reads its inputs at remapped indices
      const InputLoader loader = [&](int k, const std::vector<Expr>& ui) { return value_at(p.inputs.at(k), ui); };
      return round_to_storage(injective_expr(*ki_.graph, p, idx, loader), val.type.dtype);
    }
    if (def.pattern != OpPattern::Elementwise || !def.compute)
      throw std::logic_error("op '" + p.op + "' cannot be computed where it is read");
    std::vector<Expr> in;
    for (int u : p.inputs) {
      // Right-aligned broadcasting: a size-1 dim of the operand reads its index 0.
      const Shape& us = ki_.graph->value(u).type.shape;
      const size_t off = idx.size() - us.size();
      std::vector<Expr> ui;
      for (size_t d = 0; d < us.size(); ++d) ui.push_back(us[d] == 1 ? make_int(0) : idx[off + d]);
      in.push_back(value_at(u, ui));
    }
    return round_to_storage(elementwise_expr(*ki_.graph, p, in), ki_.graph->value(v).type.dtype);
  }
  const KernelBuffer* b = ki_.buffer_for(v);
  if (!b || b->own_strides.size() != idx.size())
    throw std::logic_error("value %" + std::to_string(v) + " is not a buffer read at computed indices");
  Expr flat;
  for (size_t d = 0; d < idx.size(); ++d) {
    const Expr t = idx[d] * sig_.own_stride(*b, d);
    flat = flat.defined() ? flat + t : t;
  }
  return cast(compute_dtype(b->dtype), load(b->dtype, b->name, flat.defined() ? flat : make_int(0)));
}

Expr GroupValues::value(int v) {
  if (auto it = row_.find(v); it != row_.end()) return it->second;
  if (auto it = body_values_.find(v); it != body_values_.end()) return it->second;
  const auto& val = ki_.graph->value(v);
  const DType ct = compute_dtype(val.type.dtype);
  Expr e;
  if (val.kind == ValueKind::Constant) {
    if (ki_.inline_constants) {
      e = is_floating(val.type.dtype) ? make_float(val.scalar, ct) : make_int(static_cast<int64_t>(val.scalar), ct);
    } else {
      e = cast(ct, sig_.constant(v));
    }
    body_values_[v] = e;
    return e;
  }
  if (const KernelBuffer* b = ki_.buffer_for(v); b && !b->is_output) {
    e = cast(ct, load(b->dtype, b->name, index(*b)));
    if (body_) {
      // Bound where it is first needed, so the read happens whatever later selects: an input read
      // at the domain's indices is always in range, and a load left inside a select arm
      // (where(m, x, y)) is one the code generators may evaluate only on the chosen side, which
      // costs the CPU its SIMD and the GPU its vector loads.
      e = bind("v" + std::to_string(v), e, val.type.dtype);
    }
    body_values_[v] = e;
    return e;
  }
  if (val.kind != ValueKind::OpResult)
    throw std::logic_error("value %" + std::to_string(v) + " has no source in kernel");
  if (is_inlined(val.producer))
    throw std::logic_error("value %" + std::to_string(v) + " is computed only where an injective op reads it");
  if (!body_) throw std::logic_error("value %" + std::to_string(v) + " requested outside a loop body");
  // compute_node rounded it to its storage type (or it was exact there already).
  Expr bound = bind("v" + std::to_string(v), compute_node(val.producer), val.type.dtype);
  body_values_[v] = bound;
  return bound;
}

Expr GroupValues::bind(const std::string& name, const Expr& e, DType storage) {
  body_->let(name, e);
  if (is_storage_only(storage)) {
    exact_vars_[name] = storage;
  } else {
    exact_vars_.erase(name);
  }
  return var(name, e.type());
}

Expr GroupValues::stored_value(int v) {
  const DType st = ki_.graph->value(v).type.dtype;
  return cast(st, value(v));
}

int64_t register_lanes(const KernelInstance& ki) {
  int widest = 1;
  for (const auto& b : ki.buffers) widest = std::max(widest, dtype_size(b.dtype));
  return 32 / std::max(4, widest);
}

std::vector<Stmt> simd_remainder(const Expr& n, int64_t step, int64_t lanes,
                                 const std::function<Stmt(Expr index, bool simd)>& element) {
  std::vector<Stmt> loops;
  Expr scalar_from = n / make_int(step) * make_int(step);
  if (lanes < step && step % lanes == 0) {
    const Expr from = scalar_from / make_int(lanes);
    loops.push_back(make_for("cr", from, n / make_int(lanes) - from, ForKind::Serial,
                             make_for("l", make_int(0), make_int(lanes), ForKind::Vectorized,
                                      element(var("cr") * make_int(lanes) + var("l"), true))));
    scalar_from = n / make_int(lanes) * make_int(lanes);
  }
  loops.push_back(make_for("j", scalar_from, n - scalar_from, ForKind::Serial, element(var("j"), false)));
  return loops;
}

std::string kernel_name(const KernelInstance& ki, const char* kind) {
  std::string name = std::string("flow_") + kind;
  std::set<std::string> seen;
  int count = 0;
  for (int n : ki.group->nodes) {
    const std::string& op = ki.graph->node(n).op;
    if (!seen.insert(op).second) continue;
    if (++count > 6) {
      name += "_etc";
      break;
    }
    name += "_" + op;
  }
  return name;
}

std::vector<Expr> unravel(StmtList& body, Expr linear, const std::vector<Expr>& sizes, const std::string& prefix) {
  std::vector<Expr> idx(sizes.size());
  Expr rem = std::move(linear);
  for (size_t d = sizes.size(); d-- > 0;) {
    const std::string name = prefix + std::to_string(d);
    if (d == 0) {
      body.let(name, rem);
    } else {
      const std::string q = prefix + "q" + std::to_string(d);
      body.let(name, rem % sizes[d]);
      body.let(q, rem / sizes[d]);
      rem = var(q);
    }
    idx[d] = var(name);
  }
  return idx;
}

std::vector<Expr> kept_sizes(const KernelSignature& sig, size_t count) {
  std::vector<Expr> s;
  for (size_t d = 0; d < count; ++d) s.push_back(sig.kept_size(d));
  return s;
}

std::vector<Expr> reduced_sizes(const KernelSignature& sig, size_t count) {
  std::vector<Expr> s;
  for (size_t d = 0; d < count; ++d) s.push_back(sig.reduced_size(d));
  return s;
}

}  // namespace flow::sched
