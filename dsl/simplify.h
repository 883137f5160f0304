// Note: the IR simplifier: constant folding, algebraic identities and index arithmetic for
// expressions, dead-loop / trivial-loop / constant-branch removal for statements. It never changes
// a floating result (no reassociation, no x + 0.0 -> x, transcendental calls are not folded
// because the device library may round them differently), and integer constants fold with the
// wrap-around of their dtype.
//
// Assumptions (the index-math contract of the schedulers):
//  - Integer index arithmetic does not overflow, so integer +, -, * are reassociated freely.
//  - A free integer Var (a kernel scalar parameter or a loop variable bound outside the simplified
//    tree) is non-negative. Vars bound inside the tree (For, LetStmt) get the bounds of their
//    range / value instead. Rewrites that need a non-negative operand for truncating division,
//    such as (x*c + y) / c -> x + y/c, use these bounds and are skipped when they are unknown.
#pragma once
#include "dsl/expr.h"
#include "dsl/stmt.h"

namespace flow::dsl {

Expr simplify(const Expr& e);
// Never returns an undefined statement: a body that simplifies away becomes an empty Block.
Stmt simplify(const Stmt& s);

}  // namespace flow::dsl
