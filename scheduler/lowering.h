// Note: shared lowering machinery for the schedulers: turning the ops of a fused group into
// expressions (through the op table's compute definitions) at the current loop indices, and
// building nested statements from a flat list of scopes. Values computed inside a loop body are
// bound to named Lets (v<id>) in topological order, which keeps generated code readable and
// avoids recomputing shared subexpressions.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "dsl/expr.h"
#include "dsl/stmt.h"
#include "scheduler/kernel_instance.h"
#include "scheduler/scheduler.h"

namespace flow::sched {

// A flat list of statements and scope openers (Let, Allocate) folded into a nested Stmt.
class StmtList {
 public:
  void add(dsl::Stmt s) {
    items_.push_back({Item::Kind::Stmt, std::move(s), "", dsl::Expr(), dsl::DType::Int64, 0, dsl::MemoryScope::Local});
  }
  void let(const std::string& name, dsl::Expr value) {
    items_.push_back(
        {Item::Kind::Let, dsl::Stmt(), name, std::move(value), dsl::DType::Int64, 0, dsl::MemoryScope::Local});
  }
  void allocate(const std::string& name, dsl::DType t, int64_t size, dsl::MemoryScope scope) {
    items_.push_back({Item::Kind::Alloc, dsl::Stmt(), name, dsl::Expr(), t, size, scope});
  }
  void append(const StmtList& o) { items_.insert(items_.end(), o.items_.begin(), o.items_.end()); }
  dsl::Stmt build() const;

 private:
  struct Item {
    enum class Kind { Stmt, Let, Alloc } kind;
    dsl::Stmt stmt;
    std::string name;
    dsl::Expr value;
    dsl::DType dtype;
    int64_t size;
    dsl::MemoryScope scope;
  };
  std::vector<Item> items_;
};

// Builds the kernel's parameter list and launch arguments (buffers first, then sizes, dynamic
// strides and scalar constants) and hands out the expressions for them.
class KernelSignature {
 public:
  explicit KernelSignature(const KernelInstance& ki);
  const std::vector<dsl::Param>& params() const { return params_; }
  const std::vector<KernelArg>& args() const { return args_; }
  dsl::Expr kept_size(size_t d) const;
  dsl::Expr reduced_size(size_t d) const;
  dsl::Expr kept_total() const;     // product of kept sizes
  dsl::Expr reduced_total() const;  // product of reduced sizes
  // Stride of buffer b along coalesced dim d (kept dims first): 0, 1 or a parameter.
  dsl::Expr stride(const KernelBuffer& b, size_t d) const;
  dsl::Expr constant(int value) const;  // a non-inlined constant's parameter
  // Actual stride of buffer b along its own dim d (inputs of injective ops).
  dsl::Expr own_stride(const KernelBuffer& b, size_t d) const;

 private:
  const KernelInstance& ki_;
  std::vector<dsl::Param> params_;
  std::vector<KernelArg> args_;
  std::map<std::string, dsl::Expr> vars_;
};

// Whether value `v` of a reduction group is per row (a reduction's result, or of the kept shape).
bool is_row_value(const KernelInstance& ki, int v);

// Evaluates group values at the current loop indices. `kept_idx`/`red_idx` hold the index
// expressions of each coalesced dim in the current loop context.
class GroupValues {
 public:
  GroupValues(const KernelInstance& ki, const KernelSignature& sig);
  std::vector<dsl::Expr> kept_idx, red_idx;
  // Set when the last two kept indices come from one flat index over both dims (the pointwise
  // scheduler's short innermost dims): a buffer laid out contiguously across the two is then read
  // and written at the flat index, a vector access, instead of at their two strided terms.
  dsl::Expr flat_inner;

  // Starts a new loop body: full-domain values are recomputed there; row values stay bound.
  void begin_body(StmtList* body);
  // The value of `v` in its compute dtype (halves are float32), binding Lets into the body.
  dsl::Expr value(int v);
  // The value of `v` converted to its storage dtype, ready to Store.
  dsl::Expr stored_value(int v);
  // Binds a row-level value (a reduction result, or a row op computed at row scope).
  void bind_row(int v, dsl::Expr e) { row_[v] = std::move(e); }
  // Binds a full-domain value for the current body only (e.g. reloaded from where an earlier pass
  // stored it), so that it is not recomputed there.
  void bind_body(int v, dsl::Expr e) { body_values_[v] = std::move(e); }
  bool is_row_value(int v) const;
  dsl::Expr index(const KernelBuffer& b) const;  // element offset at the current indices
  // The op compute expression of node `n` over its inputs' values (no binding).
  dsl::Expr compute_node(int node);
  // Whether node `n` is computed where an injective op reads it (FusionGroup::inlined).
  bool is_inlined(int node) const;
  // Rounds a compute-dtype value through its storage dtype, as eager torch would (unless the value
  // is already exact in it: see lowering.cpp).
  static dsl::Expr round_to_storage(dsl::Expr e, dsl::DType storage);

 private:
  // The same, also knowing which let-bound values of this body are half values (exact in their
  // storage type).
  dsl::Expr round_in_body(dsl::Expr e, dsl::DType storage) const;
  std::map<std::string, dsl::DType> exact_vars_;  // let name -> the half type its value is exact in
  // Value `v` at indices `idx` of its own shape: an inlined node's result computed there (its
  // operands broadcast to it), or a buffer read through its own strides; a pure expression.
  dsl::Expr value_at(int v, const std::vector<dsl::Expr>& idx);
  // Binds `e` (a value stored as `storage`, in its compute type, exact there) as Let `name` in the
  // current body, noting whether `name` holds a half value; returns the variable.
  dsl::Expr bind(const std::string& name, const dsl::Expr& e, dsl::DType storage);
  const KernelInstance& ki_;
  const KernelSignature& sig_;
  StmtList* body_ = nullptr;
  std::map<int, dsl::Expr> row_;
  std::map<int, dsl::Expr> body_values_;
};

std::string kernel_name(const KernelInstance& ki, const char* kind);

// Lanes of one 256-bit register for the kernel's widest buffer (8 for float32 and halves, which
// compute in float32; 4 for 8-byte types). CPU SIMD steps are wider (several registers per step);
// what is left of a row after them runs in steps of one register, then scalar.
int64_t register_lanes(const KernelInstance& ki);

// The loops for what a loop of wide SIMD steps over [0, n / step * step) leaves of [0, n): steps of
// one register, `element(cr * lanes + l, true)` under a vectorized l (when step is a multiple of
// lanes), then one element at a time, `element(j, false)`. `element` is called in that order.
std::vector<dsl::Stmt> simd_remainder(const dsl::Expr& n, int64_t step, int64_t lanes,
                                      const std::function<dsl::Stmt(dsl::Expr index, bool simd)>& element);

// Binds the digits of `linear` in the mixed radix `sizes` (outermost first) as Lets
// <prefix><d> (quotients <prefix>q<d>) in `body`; returns the index variables, outermost first.
std::vector<dsl::Expr> unravel(StmtList& body, dsl::Expr linear, const std::vector<dsl::Expr>& sizes,
                               const std::string& prefix);
// The kept (or reduced) sizes of the signature, in order.
std::vector<dsl::Expr> kept_sizes(const KernelSignature& sig, size_t count);
std::vector<dsl::Expr> reduced_sizes(const KernelSignature& sig, size_t count);

}  // namespace flow::sched
