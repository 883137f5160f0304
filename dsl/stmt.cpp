// Note: statement builders, checked like the expression builders. Decisions the header leaves open:
//  - For: min/extent must be integers; Int32 ones are cast to Int64 (the loop var is Int64).
//    Vectorized and Unrolled loops need a constant extent; GPU loops need axis 0..2, others axis 0.
//  - make_block returns the single statement itself when only one remains, and an empty Block
//    (a defined no-op) when none does.
//  - reduce_identity/reduce_combine of a half type: identity is Cast(half, float32 identity);
//    combining is rejected (accumulate in float32). Max/Min of floats propagate NaN as torch:
//    max(a, b) = (a > b || is_nan(a)) ? a : b, which is NaN when either operand is.
#include "dsl/stmt.h"

#include <limits>
#include <stdexcept>

namespace flow::dsl {

const char* stmt_kind_name(StmtKind k) {
  switch (k) {
#define FLOW_X(name)   \
  case StmtKind::name: \
    return #name;
    FLOW_FOR_EACH_STMT(FLOW_X)
#undef FLOW_X
  }
  return "<invalid stmt kind>";
}

const char* for_kind_name(ForKind k) {
  switch (k) {
    case ForKind::Serial:
      return "serial";
    case ForKind::Parallel:
      return "parallel";
    case ForKind::Vectorized:
      return "vectorized";
    case ForKind::Unrolled:
      return "unrolled";
    case ForKind::GPUBlock:
      return "gpu_block";
    case ForKind::GPUThread:
      return "gpu_thread";
  }
  return "<invalid for kind>";
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return "sum";
    case ReduceOp::Max:
      return "max";
    case ReduceOp::Min:
      return "min";
    case ReduceOp::Prod:
      return "prod";
  }
  return "<invalid reduce op>";
}

const char* target_name(Target t) {
  switch (t) {
    case Target::CPU:
      return "cpu";
    case Target::CUDA:
      return "cuda";
  }
  return "<invalid target>";
}

namespace {

void need(bool ok, const std::string& msg) {
  if (!ok) throw std::invalid_argument(msg);
}

Expr index_expr(const char* what, const std::string& who, Expr e) {
  need(e.defined(), std::string(what) + " of '" + who + "' is undefined");
  need(is_integral(e.type()),
       std::string(what) + " of '" + who + "' has type " + dtype_name(e.type()) + ", expected int32 or int64");
  return e.type() == DType::Int64 ? e : cast(DType::Int64, std::move(e));
}

void flatten_into(std::vector<Stmt>& out, Stmt s) {
  if (!s.defined()) return;
  if (const Block* b = s.as<Block>()) {
    for (const Stmt& c : b->stmts) flatten_into(out, c);
  } else {
    out.push_back(std::move(s));
  }
}

}  // namespace

Stmt make_for(const std::string& var, Expr min, Expr extent, ForKind kind, Stmt body, int axis) {
  need(!var.empty(), "make_for: empty loop variable name");
  min = index_expr("loop min", var, std::move(min));
  extent = index_expr("loop extent", var, std::move(extent));
  need(body.defined(), "make_for: loop '" + var + "' has an undefined body");
  if (kind == ForKind::GPUBlock || kind == ForKind::GPUThread) {
    need(axis >= 0 && axis <= 2, "make_for: GPU loop '" + var + "' axis must be 0, 1 or 2");
  } else {
    need(axis == 0, "make_for: axis is only meaningful for GPU loops ('" + var + "')");
  }
  if (kind == ForKind::Vectorized || kind == ForKind::Unrolled) {
    need(as_const_int(extent) != nullptr,
         std::string("make_for: ") + for_kind_name(kind) + " loop '" + var + "' needs a constant extent");
  }
  return Stmt(std::make_shared<const For>(var, std::move(min), std::move(extent), kind, axis, std::move(body)));
}

Stmt make_store(const std::string& buffer, Expr index, Expr value) {
  need(!buffer.empty(), "make_store: empty buffer name");
  need(index.defined() && is_integral(index.type()), "make_store: index into '" + buffer + "' must be int32 or int64");
  need(value.defined(), "make_store: undefined value stored to '" + buffer + "'");
  return Stmt(std::make_shared<const Store>(buffer, std::move(index), std::move(value)));
}

Stmt make_let(const std::string& name, Expr value, Stmt body) {
  need(!name.empty(), "make_let: empty name");
  need(value.defined(), "make_let: undefined value for '" + name + "'");
  need(body.defined(), "make_let: undefined body for '" + name + "'");
  return Stmt(std::make_shared<const LetStmt>(name, std::move(value), std::move(body)));
}

Stmt make_if(Expr cond, Stmt then_case, Stmt else_case) {
  need(cond.defined() && cond.type() == DType::Bool, "make_if: condition must be a bool expression");
  need(then_case.defined(), "make_if: undefined then-case");
  return Stmt(std::make_shared<const IfThenElse>(std::move(cond), std::move(then_case), std::move(else_case)));
}

Stmt make_allocate(const std::string& name, DType t, int64_t size, MemoryScope scope, Stmt body) {
  need(!name.empty(), "make_allocate: empty name");
  need(size >= 1, "make_allocate: '" + name + "' needs a positive size, got " + std::to_string(size));
  need(body.defined(), "make_allocate: undefined body for '" + name + "'");
  return Stmt(std::make_shared<const Allocate>(name, t, size, scope, std::move(body)));
}

Stmt make_barrier() {
  return Stmt(std::make_shared<const Barrier>());
}

Stmt make_block_reduce(ReduceOp op, const std::string& buffer, DType t) {
  need(!buffer.empty(), "make_block_reduce: empty buffer name");
  return Stmt(std::make_shared<const BlockReduce>(op, buffer, t));
}

Stmt make_block(std::vector<Stmt> stmts) {
  std::vector<Stmt> flat;
  flat.reserve(stmts.size());
  for (Stmt& s : stmts) flatten_into(flat, std::move(s));
  if (flat.size() == 1) return flat[0];
  return Stmt(std::make_shared<const Block>(std::move(flat)));
}

Expr reduce_identity(ReduceOp op, DType t) {
  if (is_half(t)) return cast(t, reduce_identity(op, DType::Float32));
  if (is_small_int(t) && (op == ReduceOp::Max || op == ReduceOp::Min)) {
    return cast(t, make_int(op == ReduceOp::Max ? integer_min(t) : integer_max(t), DType::Int32));
  }
  switch (op) {
    case ReduceOp::Sum:
      return make_zero(t);
    case ReduceOp::Prod:
      return make_one(t);
    case ReduceOp::Max:
    case ReduceOp::Min: {
      const bool lowest = op == ReduceOp::Max;
      switch (t) {
        case DType::Bool:
          return make_bool(!lowest);
        case DType::Int32:
          return make_int(lowest ? std::numeric_limits<int32_t>::min() : std::numeric_limits<int32_t>::max(), t);
        case DType::Int64:
          return make_int(lowest ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max(), t);
        default: {
          const double inf = std::numeric_limits<double>::infinity();
          return make_float(lowest ? -inf : inf, t);
        }
      }
    }
  }
  throw std::invalid_argument("reduce_identity: invalid reduce op");
}

Expr reduce_combine(ReduceOp op, Expr a, Expr b) {
  need(a.defined() && b.defined(), "reduce_combine: undefined operand");
  need(!is_storage_only(a.type()) && !is_storage_only(b.type()),
       "reduce_combine: half types accumulate in float32 and small ints in int32; cast first");
  switch (op) {
    case ReduceOp::Sum:
      if (a.type() == DType::Bool && b.type() == DType::Bool) return a || b;
      return a + b;
    case ReduceOp::Prod:
      if (a.type() == DType::Bool && b.type() == DType::Bool) return a && b;
      return a * b;
    case ReduceOp::Max:
    case ReduceOp::Min: {
      const bool is_max = op == ReduceOp::Max;
      if (!is_floating(a.type()) || !is_floating(b.type())) return is_max ? max(a, b) : min(a, b);
      Expr pick_a = (is_max ? a > b : a < b) || call(Intrinsic::IsNan, {a});
      return select(std::move(pick_a), a, b);
    }
  }
  throw std::invalid_argument("reduce_combine: invalid reduce op");
}

}  // namespace flow::dsl
