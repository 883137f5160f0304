#include "dsl/canonical_names.h"

#include <map>
#include <set>
#include <stdexcept>
#include <string>

#include "dsl/ir_visitor.h"

namespace flow::dsl {
namespace {

// Let-bound names and allocation names, each kind numbered in order of first binding (a pre-order
// walk). A name bound twice (the same buffer allocated in both arms of an if) maps to one name.
// A let, loop variable or allocation named as a kernel parameter would hide the parameter inside
// its scope (a scheduler's "k0" over the size parameter k0 miscompiles silently), so it is refused.
class CollectBoundNames : public IRVisitor {
 public:
  explicit CollectBoundNames(const LoweredFunc& f) : f_(f) {
    for (const Param& p : f.params) params_.insert(p.name);
  }

  std::map<std::string, std::string> names;    // let-bound values
  std::map<std::string, std::string> buffers;  // Local and Shared allocations

 protected:
  void visit_LetStmt(const LetStmt* op) override {
    refuse_parameter(op->name, "let");
    if (names.count(op->name) == 0) names.emplace(op->name, "val" + std::to_string(names.size()));
    IRVisitor::visit_LetStmt(op);
  }
  void visit_For(const For* op) override {
    refuse_parameter(op->var, "loop variable");
    IRVisitor::visit_For(op);
  }
  void visit_Allocate(const Allocate* op) override {
    refuse_parameter(op->name, "allocation");
    if (buffers.count(op->name) == 0) buffers.emplace(op->name, "loc" + std::to_string(buffers.size()));
    IRVisitor::visit_Allocate(op);
  }

 private:
  void refuse_parameter(const std::string& name, const char* what) const {
    if (params_.count(name))
      throw std::logic_error("kernel '" + f_.name + "': " + what + " '" + name + "' rebinds a kernel parameter");
  }

  const LoweredFunc& f_;
  std::set<std::string> params_;
};

class RenameBoundNames : public IRMutator {
 public:
  RenameBoundNames(const std::map<std::string, std::string>& names, const std::map<std::string, std::string>& buffers)
      : names_(names), buffers_(buffers) {}

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
  Expr mutate_Load(const Load* op, const Expr& self) override {
    const Expr index = mutate(op->index);
    const std::string& buffer = buffer_name(op->buffer);
    if (index.same_as(op->index) && buffer == op->buffer) return self;
    return load(op->type, buffer, index);
  }
  Stmt mutate_Store(const Store* op, const Stmt& self) override {
    const Expr index = mutate(op->index);
    const Expr value = mutate(op->value);
    const std::string& buffer = buffer_name(op->buffer);
    if (index.same_as(op->index) && value.same_as(op->value) && buffer == op->buffer) return self;
    return make_store(buffer, index, value);
  }
  Stmt mutate_Allocate(const Allocate* op, const Stmt& self) override {
    const Stmt body = mutate(op->body);
    const std::string& name = buffer_name(op->name);
    if (body.same_as(op->body) && name == op->name) return self;
    return make_allocate(name, op->dtype, op->size, op->scope, body);
  }
  Stmt mutate_BlockReduce(const BlockReduce* op, const Stmt& self) override {
    const std::string& buffer = buffer_name(op->buffer);
    return buffer == op->buffer ? self : make_block_reduce(op->op, buffer, op->dtype);
  }

 private:
  // Parameters (kernel arguments) are not allocated and keep their names.
  const std::string& buffer_name(const std::string& name) const {
    auto it = buffers_.find(name);
    return it == buffers_.end() ? name : it->second;
  }

  const std::map<std::string, std::string>& names_;
  const std::map<std::string, std::string>& buffers_;
};

}  // namespace

LoweredFunc canonical_value_names(const LoweredFunc& f) {
  CollectBoundNames collect(f);
  collect.visit(f.body);
  if (collect.names.empty() && collect.buffers.empty()) return f;
  RenameBoundNames rename(collect.names, collect.buffers);
  LoweredFunc out = f;
  out.body = rename.mutate(f.body);
  for (int d = 0; d < 3; ++d) {
    if (out.grid[d].defined()) out.grid[d] = rename.mutate(f.grid[d]);
    if (out.block[d].defined()) out.block[d] = rename.mutate(f.block[d]);
  }
  return out;
}

}  // namespace flow::dsl
