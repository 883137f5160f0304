// Note: traversal, substitution, structural equality and the printer. Dispatch is one switch per
// handle type generated from the X-macro lists; the per-kind defaults are written once each.
// The mutator rebuilds through the checked builders (so a rewrite that breaks typing throws) and
// only when a child changed. substitute respects shadowing: a For or LetStmt that rebinds the name
// hides it in its body. The printer prints binary operators with C precedence (minimal parens),
// Int32 constants as int32(5), casts as float32(x), and each scope (loop, let, if, allocate)
// with braces and two-space indentation.
#include "dsl/ir_visitor.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace flow::dsl {

// ---- IRVisitor ---------------------------------------------------------------------------------

void IRVisitor::visit(const Expr& e) {
  if (!e.defined()) return;
  switch (e.kind()) {
#define FLOW_X(name)                                 \
  case ExprKind::name:                               \
    visit_##name(static_cast<const name*>(e.get())); \
    return;
    FLOW_FOR_EACH_EXPR(FLOW_X)
#undef FLOW_X
  }
}

void IRVisitor::visit(const Stmt& s) {
  if (!s.defined()) return;
  switch (s.kind()) {
#define FLOW_X(name)                                 \
  case StmtKind::name:                               \
    visit_##name(static_cast<const name*>(s.get())); \
    return;
    FLOW_FOR_EACH_STMT(FLOW_X)
#undef FLOW_X
  }
}

void IRVisitor::visit_IntImm(const IntImm*) {}
void IRVisitor::visit_FloatImm(const FloatImm*) {}
void IRVisitor::visit_Var(const Var*) {}
void IRVisitor::visit_Cast(const Cast* op) {
  visit(op->value);
}
void IRVisitor::visit_Reinterpret(const Reinterpret* op) {
  visit(op->value);
}
#define FLOW_X(name)                             \
  void IRVisitor::visit_##name(const name* op) { \
    visit(op->a);                                \
    visit(op->b);                                \
  }
FLOW_FOR_EACH_BINARY(FLOW_X)
#undef FLOW_X
void IRVisitor::visit_Not(const Not* op) {
  visit(op->a);
}
void IRVisitor::visit_Select(const Select* op) {
  visit(op->cond);
  visit(op->true_value);
  visit(op->false_value);
}
void IRVisitor::visit_Load(const Load* op) {
  visit(op->index);
}
void IRVisitor::visit_Call(const Call* op) {
  for (const Expr& a : op->args) visit(a);
}

void IRVisitor::visit_For(const For* op) {
  visit(op->min);
  visit(op->extent);
  visit(op->body);
}
void IRVisitor::visit_Store(const Store* op) {
  visit(op->index);
  visit(op->value);
}
void IRVisitor::visit_LetStmt(const LetStmt* op) {
  visit(op->value);
  visit(op->body);
}
void IRVisitor::visit_IfThenElse(const IfThenElse* op) {
  visit(op->cond);
  visit(op->then_case);
  visit(op->else_case);
}
void IRVisitor::visit_Allocate(const Allocate* op) {
  visit(op->body);
}
void IRVisitor::visit_Barrier(const Barrier*) {}
void IRVisitor::visit_BlockReduce(const BlockReduce*) {}
void IRVisitor::visit_Block(const Block* op) {
  for (const Stmt& s : op->stmts) visit(s);
}

// ---- IRMutator ---------------------------------------------------------------------------------

Expr IRMutator::mutate(const Expr& e) {
  if (!e.defined()) return e;
  switch (e.kind()) {
#define FLOW_X(name)   \
  case ExprKind::name: \
    return mutate_##name(static_cast<const name*>(e.get()), e);
    FLOW_FOR_EACH_EXPR(FLOW_X)
#undef FLOW_X
  }
  return e;
}

Stmt IRMutator::mutate(const Stmt& s) {
  if (!s.defined()) return s;
  switch (s.kind()) {
#define FLOW_X(name)   \
  case StmtKind::name: \
    return mutate_##name(static_cast<const name*>(s.get()), s);
    FLOW_FOR_EACH_STMT(FLOW_X)
#undef FLOW_X
  }
  return s;
}

Expr IRMutator::mutate_IntImm(const IntImm*, const Expr& self) {
  return self;
}
Expr IRMutator::mutate_FloatImm(const FloatImm*, const Expr& self) {
  return self;
}
Expr IRMutator::mutate_Var(const Var*, const Expr& self) {
  return self;
}
Expr IRMutator::mutate_Cast(const Cast* op, const Expr& self) {
  Expr v = mutate(op->value);
  return v.same_as(op->value) ? self : cast(op->type, std::move(v));
}
Expr IRMutator::mutate_Reinterpret(const Reinterpret* op, const Expr& self) {
  Expr v = mutate(op->value);
  return v.same_as(op->value) ? self : reinterpret(op->type, std::move(v));
}
#define FLOW_X(name)                                                \
  Expr IRMutator::mutate_##name(const name* op, const Expr& self) { \
    Expr a = mutate(op->a);                                         \
    Expr b = mutate(op->b);                                         \
    if (a.same_as(op->a) && b.same_as(op->b)) return self;          \
    return make_binary(ExprKind::name, std::move(a), std::move(b)); \
  }
FLOW_FOR_EACH_BINARY(FLOW_X)
#undef FLOW_X
Expr IRMutator::mutate_Not(const Not* op, const Expr& self) {
  Expr a = mutate(op->a);
  return a.same_as(op->a) ? self : !std::move(a);
}
Expr IRMutator::mutate_Select(const Select* op, const Expr& self) {
  Expr c = mutate(op->cond);
  Expr t = mutate(op->true_value);
  Expr f = mutate(op->false_value);
  if (c.same_as(op->cond) && t.same_as(op->true_value) && f.same_as(op->false_value)) return self;
  return select(std::move(c), std::move(t), std::move(f));
}
Expr IRMutator::mutate_Load(const Load* op, const Expr& self) {
  Expr i = mutate(op->index);
  return i.same_as(op->index) ? self : load(op->type, op->buffer, std::move(i));
}
Expr IRMutator::mutate_Call(const Call* op, const Expr& self) {
  std::vector<Expr> args;
  args.reserve(op->args.size());
  bool changed = false;
  for (const Expr& a : op->args) {
    args.push_back(mutate(a));
    changed = changed || !args.back().same_as(a);
  }
  return changed ? call(op->func, std::move(args)) : self;
}

Stmt IRMutator::mutate_For(const For* op, const Stmt& self) {
  Expr mn = mutate(op->min);
  Expr ext = mutate(op->extent);
  Stmt body = mutate(op->body);
  if (mn.same_as(op->min) && ext.same_as(op->extent) && body.same_as(op->body)) return self;
  return make_for(op->var, std::move(mn), std::move(ext), op->kind, std::move(body), op->axis);
}
Stmt IRMutator::mutate_Store(const Store* op, const Stmt& self) {
  Expr i = mutate(op->index);
  Expr v = mutate(op->value);
  if (i.same_as(op->index) && v.same_as(op->value)) return self;
  return make_store(op->buffer, std::move(i), std::move(v));
}
Stmt IRMutator::mutate_LetStmt(const LetStmt* op, const Stmt& self) {
  Expr v = mutate(op->value);
  Stmt body = mutate(op->body);
  if (v.same_as(op->value) && body.same_as(op->body)) return self;
  return make_let(op->name, std::move(v), std::move(body));
}
Stmt IRMutator::mutate_IfThenElse(const IfThenElse* op, const Stmt& self) {
  Expr c = mutate(op->cond);
  Stmt t = mutate(op->then_case);
  Stmt e = mutate(op->else_case);
  if (c.same_as(op->cond) && t.same_as(op->then_case) && e.same_as(op->else_case)) return self;
  return make_if(std::move(c), std::move(t), std::move(e));
}
Stmt IRMutator::mutate_Allocate(const Allocate* op, const Stmt& self) {
  Stmt body = mutate(op->body);
  if (body.same_as(op->body)) return self;
  return make_allocate(op->name, op->dtype, op->size, op->scope, std::move(body));
}
Stmt IRMutator::mutate_Barrier(const Barrier*, const Stmt& self) {
  return self;
}
Stmt IRMutator::mutate_BlockReduce(const BlockReduce*, const Stmt& self) {
  return self;
}
Stmt IRMutator::mutate_Block(const Block* op, const Stmt& self) {
  std::vector<Stmt> stmts;
  stmts.reserve(op->stmts.size());
  bool changed = false;
  for (const Stmt& s : op->stmts) {
    stmts.push_back(mutate(s));
    changed = changed || !stmts.back().same_as(s);
  }
  return changed ? make_block(std::move(stmts)) : self;
}

// ---- substitute --------------------------------------------------------------------------------

namespace {

class Substituter : public IRMutator {
 public:
  Substituter(const std::string& name, const Expr& value) : name_(name), value_(value) {}

 protected:
  Expr mutate_Var(const Var* op, const Expr& self) override {
    if (op->name != name_) return self;
    if (op->type != value_.type()) {
      throw std::invalid_argument("substitute: variable '" + name_ + "' has type " + dtype_name(op->type) +
                                  " but the replacement has type " + dtype_name(value_.type()));
    }
    return value_;
  }
  Stmt mutate_For(const For* op, const Stmt& self) override {
    if (op->var != name_) return IRMutator::mutate_For(op, self);
    Expr mn = mutate(op->min);
    Expr ext = mutate(op->extent);
    if (mn.same_as(op->min) && ext.same_as(op->extent)) return self;
    return make_for(op->var, std::move(mn), std::move(ext), op->kind, op->body, op->axis);
  }
  Stmt mutate_LetStmt(const LetStmt* op, const Stmt& self) override {
    if (op->name != name_) return IRMutator::mutate_LetStmt(op, self);
    Expr v = mutate(op->value);
    return v.same_as(op->value) ? self : make_let(op->name, std::move(v), op->body);
  }

 private:
  const std::string& name_;
  const Expr& value_;
};

}  // namespace

Expr substitute(const Expr& e, const std::string& name, const Expr& value) {
  if (!value.defined()) throw std::invalid_argument("substitute: undefined replacement for '" + name + "'");
  return Substituter(name, value).mutate(e);
}

Stmt substitute(const Stmt& s, const std::string& name, const Expr& value) {
  if (!value.defined()) throw std::invalid_argument("substitute: undefined replacement for '" + name + "'");
  return Substituter(name, value).mutate(s);
}

namespace {

class IntrinsicFinder : public IRVisitor {
 public:
  explicit IntrinsicFinder(Intrinsic f) : f_(f) {}
  bool found = false;
  void visit_Call(const Call* op) override {
    found = found || op->func == f_;
    if (!found) IRVisitor::visit_Call(op);
  }

 private:
  const Intrinsic f_;
};

}  // namespace

bool calls_intrinsic(const Stmt& s, Intrinsic f) {
  if (!s.defined()) return false;
  IntrinsicFinder finder(f);
  finder.visit(s);
  return finder.found;
}

// ---- structural equality -----------------------------------------------------------------------

namespace {

bool list_equal(const std::vector<Expr>& a, const std::vector<Expr>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!equal(a[i], b[i])) return false;
  }
  return true;
}

// Both defined, same kind and type.
bool expr_fields_equal(const Expr& x, const Expr& y) {
  switch (x.kind()) {
    case ExprKind::IntImm:
      return x.as<IntImm>()->value == y.as<IntImm>()->value;
    case ExprKind::FloatImm: {  // by bits: NaN equals NaN, -0 differs from +0 (as the serializer)
      const double a = x.as<FloatImm>()->value, b = y.as<FloatImm>()->value;
      return std::memcmp(&a, &b, sizeof a) == 0;
    }
    case ExprKind::Var:
      return x.as<Var>()->name == y.as<Var>()->name;
    case ExprKind::Cast:
      return equal(x.as<Cast>()->value, y.as<Cast>()->value);
    case ExprKind::Reinterpret:
      return equal(x.as<Reinterpret>()->value, y.as<Reinterpret>()->value);
#define FLOW_X(name)                               \
  case ExprKind::name: {                           \
    const auto* p = x.as<name>();                  \
    const auto* q = y.as<name>();                  \
    return equal(p->a, q->a) && equal(p->b, q->b); \
  }
      FLOW_FOR_EACH_BINARY(FLOW_X)
#undef FLOW_X
    case ExprKind::Not:
      return equal(x.as<Not>()->a, y.as<Not>()->a);
    case ExprKind::Select: {
      const auto* p = x.as<Select>();
      const auto* q = y.as<Select>();
      return equal(p->cond, q->cond) && equal(p->true_value, q->true_value) && equal(p->false_value, q->false_value);
    }
    case ExprKind::Load: {
      const auto* p = x.as<Load>();
      const auto* q = y.as<Load>();
      return p->buffer == q->buffer && equal(p->index, q->index);
    }
    case ExprKind::Call: {
      const auto* p = x.as<Call>();
      const auto* q = y.as<Call>();
      return p->func == q->func && list_equal(p->args, q->args);
    }
  }
  return false;
}

}  // namespace

bool equal(const Expr& a, const Expr& b) {
  if (a.same_as(b)) return true;
  if (!a.defined() || !b.defined()) return false;
  if (a.kind() != b.kind() || a.type() != b.type()) return false;
  return expr_fields_equal(a, b);
}

bool equal(const Stmt& x, const Stmt& y) {
  if (x.same_as(y)) return true;
  if (!x.defined() || !y.defined() || x.kind() != y.kind()) return false;
  switch (x.kind()) {
    case StmtKind::For: {
      const auto* p = x.as<For>();
      const auto* q = y.as<For>();
      return p->var == q->var && p->kind == q->kind && p->axis == q->axis && equal(p->min, q->min) &&
             equal(p->extent, q->extent) && equal(p->body, q->body);
    }
    case StmtKind::Store: {
      const auto* p = x.as<Store>();
      const auto* q = y.as<Store>();
      return p->buffer == q->buffer && equal(p->index, q->index) && equal(p->value, q->value);
    }
    case StmtKind::LetStmt: {
      const auto* p = x.as<LetStmt>();
      const auto* q = y.as<LetStmt>();
      return p->name == q->name && equal(p->value, q->value) && equal(p->body, q->body);
    }
    case StmtKind::IfThenElse: {
      const auto* p = x.as<IfThenElse>();
      const auto* q = y.as<IfThenElse>();
      return equal(p->cond, q->cond) && equal(p->then_case, q->then_case) && equal(p->else_case, q->else_case);
    }
    case StmtKind::Allocate: {
      const auto* p = x.as<Allocate>();
      const auto* q = y.as<Allocate>();
      return p->name == q->name && p->dtype == q->dtype && p->size == q->size && p->scope == q->scope &&
             equal(p->body, q->body);
    }
    case StmtKind::Barrier:
      return true;
    case StmtKind::BlockReduce: {
      const auto* p = x.as<BlockReduce>();
      const auto* q = y.as<BlockReduce>();
      return p->op == q->op && p->buffer == q->buffer && p->dtype == q->dtype;
    }
    case StmtKind::Block: {
      const auto& p = x.as<Block>()->stmts;
      const auto& q = y.as<Block>()->stmts;
      if (p.size() != q.size()) return false;
      for (size_t i = 0; i < p.size(); ++i) {
        if (!equal(p[i], q[i])) return false;
      }
      return true;
    }
  }
  return false;
}

// ---- printer -----------------------------------------------------------------------------------

namespace {

// Shortest decimal that reads back to the same value (of float for Float32).
std::string format_float(double v, bool is_f32) {
  if (std::isnan(v)) return is_f32 ? "nanf" : "nan";
  if (std::isinf(v)) return std::string(v < 0 ? "-inf" : "inf") + (is_f32 ? "f" : "");
  char buf[64];
  for (int prec = 1; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof buf, "%.*g", prec, v);
    const double back = std::strtod(buf, nullptr);
    if (is_f32 ? static_cast<float>(back) == static_cast<float>(v) : back == v) break;
  }
  std::string s = buf;
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return is_f32 ? s + "f" : s;
}

// C precedence, higher binds tighter; atoms are 100.
int precedence(ExprKind k) {
  switch (k) {
    case ExprKind::Mul:
    case ExprKind::Div:
    case ExprKind::Mod:
      return 10;
    case ExprKind::Add:
    case ExprKind::Sub:
      return 9;
    case ExprKind::LT:
    case ExprKind::LE:
    case ExprKind::GT:
    case ExprKind::GE:
      return 7;
    case ExprKind::EQ:
    case ExprKind::NE:
      return 6;
    case ExprKind::And:
      return 3;
    case ExprKind::Or:
      return 2;
    default:
      return 100;
  }
}

const char* binary_op(ExprKind k) {
  switch (k) {
    case ExprKind::Add:
      return " + ";
    case ExprKind::Sub:
      return " - ";
    case ExprKind::Mul:
      return " * ";
    case ExprKind::Div:
      return " / ";
    case ExprKind::Mod:
      return " % ";
    case ExprKind::EQ:
      return " == ";
    case ExprKind::NE:
      return " != ";
    case ExprKind::LT:
      return " < ";
    case ExprKind::LE:
      return " <= ";
    case ExprKind::GT:
      return " > ";
    case ExprKind::GE:
      return " >= ";
    case ExprKind::And:
      return " && ";
    case ExprKind::Or:
      return " || ";
    default:
      return nullptr;
  }
}

class Printer {
 public:
  std::string out;

  void expr(const Expr& e) {
    if (!e.defined()) {
      out += "<undefined>";
      return;
    }
    switch (e.kind()) {
      case ExprKind::IntImm: {
        const auto* op = e.as<IntImm>();
        if (op->type == DType::Bool) {
          out += op->value ? "true" : "false";
        } else if (op->type == DType::Int32) {
          out += "int32(" + std::to_string(op->value) + ")";
        } else {
          out += std::to_string(op->value);
        }
        return;
      }
      case ExprKind::FloatImm:
        out += format_float(e.as<FloatImm>()->value, e.type() == DType::Float32);
        return;
      case ExprKind::Var:
        out += e.as<Var>()->name;
        return;
      case ExprKind::Cast:
        out += dtype_name(e.type());
        out += '(';
        expr(e.as<Cast>()->value);
        out += ')';
        return;
      case ExprKind::Reinterpret:
        out += "reinterpret<";
        out += dtype_name(e.type());
        out += ">(";
        expr(e.as<Reinterpret>()->value);
        out += ')';
        return;
      case ExprKind::Min:
      case ExprKind::Max: {
        const auto* op = static_cast<const BinaryNode*>(e.get());
        out += e.kind() == ExprKind::Min ? "min(" : "max(";
        expr(op->a);
        out += ", ";
        expr(op->b);
        out += ')';
        return;
      }
      case ExprKind::Not: {
        out += '!';
        child(e.as<Not>()->a, 100, false);
        return;
      }
      case ExprKind::Select: {
        const auto* op = e.as<Select>();
        out += "select(";
        expr(op->cond);
        out += ", ";
        expr(op->true_value);
        out += ", ";
        expr(op->false_value);
        out += ')';
        return;
      }
      case ExprKind::Load: {
        const auto* op = e.as<Load>();
        out += op->buffer;
        out += '[';
        expr(op->index);
        out += ']';
        return;
      }
      case ExprKind::Call: {
        const auto* op = e.as<Call>();
        out += intrinsic_name(op->func);
        out += '(';
        for (size_t i = 0; i < op->args.size(); ++i) {
          if (i) out += ", ";
          expr(op->args[i]);
        }
        out += ')';
        return;
      }
      default: {  // infix binary operators
        const auto* op = static_cast<const BinaryNode*>(e.get());
        const int p = precedence(e.kind());
        child(op->a, p, false);
        out += binary_op(e.kind());
        child(op->b, p, true);
        return;
      }
    }
  }

  void stmt(const Stmt& s, int indent) {
    if (!s.defined()) return;
    switch (s.kind()) {
      case StmtKind::For: {
        const auto* op = s.as<For>();
        pad(indent);
        if (op->kind == ForKind::GPUBlock || op->kind == ForKind::GPUThread) {
          out += op->kind == ForKind::GPUBlock ? "gpu_block." : "gpu_thread.";
          out += "xyz"[op->axis];
          out += ' ';
        } else if (op->kind != ForKind::Serial) {
          out += for_kind_name(op->kind);
          out += ' ';
        }
        out += "for (" + op->var + " = ";
        expr(op->min);
        out += "; " + op->var + " < ";
        if (!is_const_int(op->min, 0)) {
          child(op->min, 9, false);
          out += " + ";
          child(op->extent, 9, true);
        } else {
          child(op->extent, 7, true);
        }
        out += "; " + op->var + "++) {\n";
        stmt(op->body, indent + 1);
        close(indent);
        return;
      }
      case StmtKind::Store: {
        const auto* op = s.as<Store>();
        pad(indent);
        out += op->buffer + "[";
        expr(op->index);
        out += "] = ";
        expr(op->value);
        out += ";\n";
        return;
      }
      case StmtKind::LetStmt: {
        const auto* op = s.as<LetStmt>();
        pad(indent);
        out += "let " + op->name + " = ";
        expr(op->value);
        out += " {\n";
        stmt(op->body, indent + 1);
        close(indent);
        return;
      }
      case StmtKind::IfThenElse: {
        const auto* op = s.as<IfThenElse>();
        pad(indent);
        out += "if (";
        expr(op->cond);
        out += ") {\n";
        stmt(op->then_case, indent + 1);
        if (op->else_case.defined()) {
          pad(indent);
          out += "} else {\n";
          stmt(op->else_case, indent + 1);
        }
        close(indent);
        return;
      }
      case StmtKind::Allocate: {
        const auto* op = s.as<Allocate>();
        pad(indent);
        out += op->scope == MemoryScope::Shared ? "allocate shared " : "allocate local ";
        out += dtype_name(op->dtype);
        out += " " + op->name + "[" + std::to_string(op->size) + "] {\n";
        stmt(op->body, indent + 1);
        close(indent);
        return;
      }
      case StmtKind::Barrier:
        pad(indent);
        out += "barrier();\n";
        return;
      case StmtKind::BlockReduce: {
        const auto* op = s.as<BlockReduce>();
        pad(indent);
        out += std::string("block_reduce_") + reduce_op_name(op->op) + "<" + dtype_name(op->dtype) + ">(" + op->buffer +
               ");\n";
        return;
      }
      case StmtKind::Block:
        for (const Stmt& c : s.as<Block>()->stmts) stmt(c, indent);
        return;
    }
  }

  void func(const LoweredFunc& f) {
    out += std::string(target_name(f.target)) + " func " + f.name + "(";
    for (size_t i = 0; i < f.params.size(); ++i) {
      const Param& p = f.params[i];
      if (i) out += ", ";
      out += dtype_name(p.dtype);
      if (p.kind == ParamKind::Buffer)
        out += p.is_output ? "* " : " const* ";
      else
        out += ' ';
      out += p.name;
    }
    out += ") {\n";
    if (f.target == Target::CUDA) {
      out += "  // launch: grid(";
      triple(f.grid);
      out += "), block(";
      triple(f.block);
      out += "), shared_bytes " + std::to_string(f.shared_bytes) + "\n";
    }
    stmt(f.body, 1);
    out += "}\n";
  }

 private:
  void child(const Expr& e, int parent_prec, bool right) {
    const int p = e.defined() ? precedence(e.kind()) : 100;
    const bool parens = p < parent_prec || (right && p == parent_prec);
    if (parens) out += '(';
    expr(e);
    if (parens) out += ')';
  }
  void triple(const Expr (&v)[3]) {
    for (int i = 0; i < 3; ++i) {
      if (i) out += ", ";
      if (v[i].defined())
        expr(v[i]);
      else
        out += '_';
    }
  }
  void pad(int indent) { out.append(static_cast<size_t>(indent) * 2, ' '); }
  void close(int indent) {
    pad(indent);
    out += "}\n";
  }
};

}  // namespace

std::string to_string(const Expr& e) {
  Printer p;
  p.expr(e);
  return std::move(p.out);
}

std::string to_string(const Stmt& s) {
  Printer p;
  p.stmt(s, 0);
  return std::move(p.out);
}

std::string to_string(const LoweredFunc& f) {
  Printer p;
  p.func(f);
  return std::move(p.out);
}

}  // namespace flow::dsl
