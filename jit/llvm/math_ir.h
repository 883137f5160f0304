// Note: float32 transcendental functions emitted as inline, branch-free LLVM IR (Cephes-style range
// reduction plus minimax polynomials, special values handled with selects), so a loop calling them
// vectorizes like any arithmetic. Each works on a float or a vector of floats. Accuracy over all
// float32 inputs (checked exhaustively on a 1/97 sample against double libm): exp 1.0 ulp (also for
// denormal results), log 0.8 ulp (denormal inputs included), tanh 1.4e-7 relative, erf 3.5e-7
// absolute (Eigen's rational approximation on [-4, 4]). The polynomials use llvm.fmuladd, so the
// last bit may differ between hosts with and without FMA.
// Internal to jit/llvm: LLVM types are only forward-declared so the header stays light.
#pragma once

namespace llvm {
class IRBuilderBase;
class Value;
}  // namespace llvm

namespace flow::jit::llvm_backend::ir {

llvm::Value* exp_f32(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* log_f32(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* tanh_f32(llvm::IRBuilderBase& b, llvm::Value* x);
llvm::Value* erf_f32(llvm::IRBuilderBase& b, llvm::Value* x);

}  // namespace flow::jit::llvm_backend::ir
