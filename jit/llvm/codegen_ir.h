// Note: LoweredFunc -> LLVM module (internal to jit/llvm; LLVM types forward-declared). The module
// holds `void <name>(i8* args)` (the ArgValue ABI), which unpacks the params and calls an internal
// `<name>.body` whose buffer params are noalias; each outermost Parallel loop becomes an internal
// `<name>.parN` (same captured values as params, plus min/begin/end) behind a `<name>.parN.thunk(ctx,
// begin, end)` that flow_parallel_for calls with a ctx struct holding every value in scope.
#pragma once
#include <memory>
#include <string>

#include "dsl/stmt.h"

namespace llvm {
class LLVMContext;
class Module;
}  // namespace llvm

namespace flow::jit::llvm_backend::ir {

struct CodegenOptions {
  std::string cpu;       // "target-cpu" attribute of every function (empty: none)
  std::string features;  // "target-features" attribute
  bool noalias_buffers = true;
};

// Builds and verifies the (unoptimized) module. Throws std::runtime_error with context for IR the
// CPU backend does not support.
std::unique_ptr<llvm::Module> build_module(const dsl::LoweredFunc& f, llvm::LLVMContext& ctx,
                                           const CodegenOptions& opt);

}  // namespace flow::jit::llvm_backend::ir
