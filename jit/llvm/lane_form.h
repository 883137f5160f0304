// Note: how an integer index varies across the lanes of an explicit vector loop, when that is known
// at compile time. A single stride does not describe every index a vector loop meets: the pointwise
// scheduler's flat loops index a short innermost dim as `lane % 3` and the dim above it as
// `start / 3 + lane / 3`, and a flip reads at `n - 1 - i`. Yet each lane's offset from lane 0 is a
// constant there, so a load can read the span its lanes cover with one vector load and a shuffle
// instead of gathering lane by lane (jit/llvm/codegen_ir.cpp, emit_load).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "dsl/expr.h"

namespace flow::jit::llvm_backend::ir {

struct LaneForm {
  bool absolute = false;   // v holds each lane's value; otherwise each lane's difference from lane 0
  std::vector<int64_t> v;  // one entry per lane

  LaneForm relative() const;  // the differences from lane 0
  bool uniform() const;       // every lane has the same value
};

// The vector loop being emitted: its lane variable, the loop's constant start (when it has one:
// then the lane variable's value in each lane is known), its width, and the forms of the Let-bound
// variables in scope inside it (nullopt: not known at compile time).
struct LaneScope {
  std::string lane_var;
  std::optional<int64_t> lane_min;
  int64_t width = 0;
  std::map<std::string, std::optional<LaneForm>> lets;
};

// The form of `e` in `scope`, or nullopt when lanes differ by amounts known only at run time.
// Variables bound outside the loop are uniform. Integer arithmetic follows the IR's (truncating
// division; by zero gives 0).
std::optional<LaneForm> lane_form(const dsl::Expr& e, const LaneScope& scope);

}  // namespace flow::jit::llvm_backend::ir
