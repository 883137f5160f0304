#include "jit/llvm/lane_form.h"

#include <algorithm>

#include "dsl/ir_visitor.h"

namespace flow::jit::llvm_backend::ir {

LaneForm LaneForm::relative() const {
  LaneForm r{false, v};
  if (absolute && !r.v.empty()) {
    const int64_t base = v[0];
    for (int64_t& x : r.v) x -= base;
  }
  return r;
}

bool LaneForm::uniform() const {
  return std::all_of(v.begin(), v.end(), [&](int64_t x) { return x == v[0]; });
}

namespace {

// Whether any variable in `e` varies across lanes (the lane variable, or a Let-bound variable whose
// form is unknown or not uniform).
class LaneDependence : public dsl::IRVisitor {
 public:
  explicit LaneDependence(const LaneScope& scope) : scope_(scope) {}
  bool found = false;

 protected:
  void visit_Var(const dsl::Var* op) override {
    if (op->name == scope_.lane_var) {
      found = true;
      return;
    }
    const auto it = scope_.lets.find(op->name);
    if (it != scope_.lets.end() && (!it->second || !it->second->uniform())) found = true;
  }

 private:
  const LaneScope& scope_;
};

// The IR's integer arithmetic on known values (dsl/interpreter.cpp), with division and modulo by
// zero giving 0 as the generated code does.
std::optional<int64_t> apply(dsl::ExprKind k, int64_t x, int64_t y) {
  const auto ux = static_cast<uint64_t>(x), uy = static_cast<uint64_t>(y);
  switch (k) {
    case dsl::ExprKind::Add:
      return static_cast<int64_t>(ux + uy);
    case dsl::ExprKind::Sub:
      return static_cast<int64_t>(ux - uy);
    case dsl::ExprKind::Mul:
      return static_cast<int64_t>(ux * uy);
    case dsl::ExprKind::Div:
      return y == 0 ? 0 : y == -1 ? static_cast<int64_t>(0 - ux) : x / y;
    case dsl::ExprKind::Mod:
      return y == 0 || y == -1 ? 0 : x % y;
    case dsl::ExprKind::Min:
      return std::min(x, y);
    case dsl::ExprKind::Max:
      return std::max(x, y);
    default:
      return std::nullopt;
  }
}

}  // namespace

std::optional<LaneForm> lane_form(const dsl::Expr& e, const LaneScope& scope) {
  const auto W = static_cast<size_t>(scope.width);
  const LaneForm uniform{false, std::vector<int64_t>(W, 0)};
  auto depends = [&](const dsl::Expr& x) {
    LaneDependence d(scope);
    d.visit(x);
    return d.found;
  };
  switch (e.kind()) {
    case dsl::ExprKind::IntImm:
      return LaneForm{true, std::vector<int64_t>(W, e.as<dsl::IntImm>()->value)};
    case dsl::ExprKind::Var: {
      const std::string& name = e.as<dsl::Var>()->name;
      if (name == scope.lane_var) {
        LaneForm f{scope.lane_min.has_value(), std::vector<int64_t>(W)};
        for (size_t k = 0; k < W; ++k) f.v[k] = scope.lane_min.value_or(0) + static_cast<int64_t>(k);
        return f;
      }
      const auto it = scope.lets.find(name);
      return it == scope.lets.end() ? uniform : it->second;
    }
    case dsl::ExprKind::Cast: {
      const auto* op = e.as<dsl::Cast>();
      if (!depends(op->value)) return uniform;
      // Integer to integer keeps the form (indices are far from the narrower type's limits).
      if (!dsl::is_integral(op->value.type()) || !dsl::is_integral(e.type())) return std::nullopt;
      return lane_form(op->value, scope);
    }
    case dsl::ExprKind::Add:
    case dsl::ExprKind::Sub:
    case dsl::ExprKind::Mul:
    case dsl::ExprKind::Div:
    case dsl::ExprKind::Mod:
    case dsl::ExprKind::Min:
    case dsl::ExprKind::Max: {
      if (!dsl::is_integral(e.type())) return depends(e) ? std::nullopt : std::optional<LaneForm>(uniform);
      const auto* op = static_cast<const dsl::BinaryNode*>(e.get());
      const std::optional<LaneForm> a = lane_form(op->a, scope), b = lane_form(op->b, scope);
      LaneForm r{a && b && a->absolute && b->absolute, std::vector<int64_t>(W)};
      if (r.absolute) {  // both known in every lane: evaluate
        for (size_t k = 0; k < W; ++k) r.v[k] = *apply(e.kind(), a->v[k], b->v[k]);
        return r;
      }
      if (!depends(e)) return uniform;
      if (!a || !b) return std::nullopt;
      const bool add = e.kind() == dsl::ExprKind::Add || e.kind() == dsl::ExprKind::Sub;
      if (add) {  // uniform parts add up; the differences from lane 0 add (or subtract)
        const LaneForm ra = a->relative(), rb = b->relative();
        for (size_t k = 0; k < W; ++k) r.v[k] = *apply(e.kind(), ra.v[k], rb.v[k]);
        return r;
      }
      if (e.kind() == dsl::ExprKind::Mul) {  // by a constant: the differences scale
        const bool a_const = a->absolute && a->uniform(), b_const = b->absolute && b->uniform();
        if (!a_const && !b_const) return std::nullopt;
        const LaneForm& c = a_const ? *a : *b;
        const LaneForm x = (a_const ? *b : *a).relative();
        for (size_t k = 0; k < W; ++k) r.v[k] = *apply(dsl::ExprKind::Mul, x.v[k], c.v[0]);
        return r;
      }
      return std::nullopt;  // a lane-varying division, modulo, min or max of a run-time value
    }
    default:
      return depends(e) ? std::nullopt : std::optional<LaneForm>(uniform);
  }
}

}  // namespace flow::jit::llvm_backend::ir
