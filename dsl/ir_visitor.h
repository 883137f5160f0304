// Note: generic traversal. IRVisitor walks every child by default; IRMutator rebuilds a node only
// when a child changed (so unchanged subtrees stay shared). Both dispatch by switching on the kind
// tag; the switch is generated from the X-macro lists.
#pragma once
#include "dsl/expr.h"
#include "dsl/stmt.h"

namespace flow::dsl {

class IRVisitor {
 public:
  virtual ~IRVisitor() = default;
  virtual void visit(const Expr& e);
  virtual void visit(const Stmt& s);

 protected:
#define FLOW_X(name) virtual void visit_##name(const name* op);
  FLOW_FOR_EACH_EXPR(FLOW_X)
  FLOW_FOR_EACH_STMT(FLOW_X)
#undef FLOW_X
};

class IRMutator {
 public:
  virtual ~IRMutator() = default;
  virtual Expr mutate(const Expr& e);
  virtual Stmt mutate(const Stmt& s);

 protected:
  // Each receives the original handle too, so an unchanged node is returned as is.
#define FLOW_X(name) virtual Expr mutate_##name(const name* op, const Expr& self);
  FLOW_FOR_EACH_EXPR(FLOW_X)
#undef FLOW_X
#define FLOW_X(name) virtual Stmt mutate_##name(const name* op, const Stmt& self);
  FLOW_FOR_EACH_STMT(FLOW_X)
#undef FLOW_X
};

// Replaces Var nodes by name.
Expr substitute(const Expr& e, const std::string& name, const Expr& value);
Stmt substitute(const Stmt& s, const std::string& name, const Expr& value);

// Whether `s` calls intrinsic `f` anywhere (e.g. CheckIndex: the kernel then takes an error word).
bool calls_intrinsic(const Stmt& s, Intrinsic f);

// Structural equality and ordering-independent checks.
bool equal(const Expr& a, const Expr& b);
bool equal(const Stmt& a, const Stmt& b);

// Human-readable printing (C-like pseudo code).
std::string to_string(const Expr& e);
std::string to_string(const Stmt& s);
std::string to_string(const LoweredFunc& f);

}  // namespace flow::dsl
