#include "dsl/canonical_names.h"

#include <map>
#include <string>

#include "dsl/ir_visitor.h"

namespace flow::dsl {
namespace {

// Let-bound names, numbered in order of first binding (a pre-order walk).
class CollectLetNames : public IRVisitor {
 public:
  std::map<std::string, std::string> names;

 protected:
  void visit_LetStmt(const LetStmt* op) override {
    if (names.count(op->name) == 0) names.emplace(op->name, "val" + std::to_string(names.size()));
    IRVisitor::visit_LetStmt(op);
  }
};

class RenameLetNames : public IRMutator {
 public:
  explicit RenameLetNames(const std::map<std::string, std::string>& names) : names_(names) {}

 protected:
  Expr mutate_Var(const Var* op, const Expr& self) override {
    auto it = names_.find(op->name);
    return it == names_.end() ? self : var(it->second, op->type);
  }
  Stmt mutate_LetStmt(const LetStmt* op, const Stmt& self) override {
    auto it = names_.find(op->name);
    const Expr value = mutate(op->value);
    const Stmt body = mutate(op->body);
    if (it == names_.end() && value.same_as(op->value) && body.same_as(op->body)) return self;
    return make_let(it == names_.end() ? op->name : it->second, value, body);
  }

 private:
  const std::map<std::string, std::string>& names_;
};

}  // namespace

LoweredFunc canonical_value_names(const LoweredFunc& f) {
  CollectLetNames collect;
  collect.visit(f.body);
  if (collect.names.empty()) return f;
  RenameLetNames rename(collect.names);
  LoweredFunc out = f;
  out.body = rename.mutate(f.body);
  for (int d = 0; d < 3; ++d) {
    if (out.grid[d].defined()) out.grid[d] = rename.mutate(f.grid[d]);
    if (out.block[d].defined()) out.block[d] = rename.mutate(f.block[d]);
  }
  return out;
}

}  // namespace flow::dsl
