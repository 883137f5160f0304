#include "scheduler/unswitch.h"

#include <set>
#include <string>

#include "dsl/ir_visitor.h"

namespace flow::sched {
namespace {

using namespace flow::dsl;

// What an expression does besides computing: memory reads, index checks (a side effect).
struct Effects : IRVisitor {
  bool loads = false, checks_index = false;
  explicit Effects(const Expr& e) { visit(e); }
  void visit_Load(const Load*) override { loads = true; }
  void visit_Call(const Call* op) override {
    checks_index = checks_index || op->func == Intrinsic::CheckIndex;
    IRVisitor::visit_Call(op);
  }
};

// A select choosing between two reads at an index it computes without side effects (cat).
bool choice_between_reads(const Select* op) {
  const Effects cond(op->cond);
  return Effects(op->true_value).loads && Effects(op->false_value).loads && !cond.loads && !cond.checks_index;
}

std::set<std::string> free_vars(const Expr& e) {
  struct Collect : IRVisitor {
    std::set<std::string> names;
    void visit_Var(const Var* op) override { names.insert(op->name); }
  } c;
  c.visit(e);
  return c.names;
}

// The first select condition (in program order, outer selects first) that is the same for every
// iteration of `loops`: no variable bound inside `loops`, no memory read; both arms read memory.
Expr first_invariant_choice(const Stmt& loops) {
  struct Search : IRVisitor {
    std::set<std::string> bound;  // every name bound anywhere inside `loops` (conservative)
    Expr found;
    void visit_Select(const Select* op) override {
      if (!found.defined() && choice_between_reads(op)) {
        bool invariant = true;
        for (const std::string& v : free_vars(op->cond)) invariant = invariant && bound.count(v) == 0;
        if (invariant) found = op->cond;
      }
      IRVisitor::visit_Select(op);
    }
  };
  struct Binders : IRVisitor {
    std::set<std::string> names;
    void visit_For(const For* op) override {
      names.insert(op->var);
      IRVisitor::visit_For(op);
    }
    void visit_LetStmt(const LetStmt* op) override {
      names.insert(op->name);
      IRVisitor::visit_LetStmt(op);
    }
  } binders;
  binders.visit(loops);
  Search s;
  s.bound = std::move(binders.names);
  s.visit(loops);
  return s.found;
}

// `s` with every select on `cond` replaced by its arm for `value`.
Stmt choose(const Stmt& s, const Expr& cond, bool value) {
  struct Choose : IRMutator {
    const Expr& cond;
    const bool value;
    Choose(const Expr& c, bool v) : cond(c), value(v) {}
    Expr mutate_Select(const Select* op, const Expr& self) override {
      if (equal(op->cond, cond)) return mutate(value ? op->true_value : op->false_value);
      return IRMutator::mutate_Select(op, self);
    }
  } m(cond, value);
  return m.mutate(s);
}

Stmt unswitch(const Stmt& loops, int& splits_left) {
  if (splits_left <= 0) return loops;
  const Expr cond = first_invariant_choice(loops);
  if (!cond.defined()) return loops;
  --splits_left;
  const Stmt then_case = unswitch(choose(loops, cond, true), splits_left);
  const Stmt else_case = unswitch(choose(loops, cond, false), splits_left);
  return make_if(cond, then_case, else_case);
}

// The bound b of a condition `index < b`, or nullptr.
const int64_t* bound_of(const Expr& cond, const Expr& index) {
  const LT* lt = cond.as<LT>();
  return lt && equal(lt->a, index) ? as_const_int(lt->b) : nullptr;
}

}  // namespace

std::vector<int64_t> read_choice_bounds(const Stmt& body, const Expr& index) {
  struct Collect : IRVisitor {
    const Expr& index;
    std::set<int64_t> bounds;
    explicit Collect(const Expr& i) : index(i) {}
    void visit_Select(const Select* op) override {
      if (choice_between_reads(op))
        if (const int64_t* b = bound_of(op->cond, index)) bounds.insert(*b);
      IRVisitor::visit_Select(op);
    }
  } c(index);
  c.visit(body);
  return std::vector<int64_t>(c.bounds.begin(), c.bounds.end());
}

Stmt resolve_read_choices(const Stmt& body, const Expr& index, int64_t lo, int64_t hi) {
  struct Resolve : IRMutator {
    const Expr& index;
    const int64_t lo, hi;
    Resolve(const Expr& i, int64_t l, int64_t h) : index(i), lo(l), hi(h) {}
    Expr mutate_Select(const Select* op, const Expr& self) override {
      if (choice_between_reads(op)) {
        if (const int64_t* b = bound_of(op->cond, index)) {
          if (hi <= *b) return mutate(op->true_value);  // index < hi <= b
          if (lo >= *b) return mutate(op->false_value);
        }
      }
      return IRMutator::mutate_Select(op, self);
    }
  } m(index, lo, hi);
  return m.mutate(body);
}

Stmt unswitch_invariant_selects(const Stmt& loops, int max_versions) {
  int splits_left = max_versions - 1;
  return unswitch(loops, splits_left);
}

}  // namespace flow::sched
