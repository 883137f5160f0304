// Note: the CPU backend's public face. It has no LLVM types, so any translation unit may include it;
// the implementation (jit/llvm/*.cpp) is compiled only when LLVM 14 is found (FLOW_HAS_LLVM=1), so
// callers guard their use of it with `#ifdef FLOW_HAS_LLVM` (or check llvm_backend_available()).
//
// Pipeline: LoweredFunc -> LLVM IR (one module per kernel) -> O3 for the host CPU (its name and
// feature string, e.g. AVX-512) -> an ELF object file, whose bytes are what the kernel cache
// stores. CpuKernelLoader maps such objects into the process through one ORC LLJIT; every object
// gets its own JITDylib, so two kernels with the same symbol name never clash.
//
// Kernel ABI: `extern "C" void <f.name>(const flow::dsl::ArgValue* args)`, args in f.params order
// (buffers: data pointers; Bool/Int32/Int64 scalars in .i64; floating scalars in .f64).
//
// Semantics follow dsl/interpreter.h (bit for bit for arithmetic, comparisons, min/max, casts and
// integer div/mod; checked by tests/cpp/test_llvm_backend.cpp), with these documented differences:
//  - integer Div/Mod by zero yield 0 (the interpreter throws; generated code cannot);
//  - float32 exp/log/tanh/erf are inline branch-free polynomials (so loops calling them
//    vectorize), not correctly rounded: exp 1.0 ulp, log 0.8 ulp, tanh 1.4e-7 relative, erf 3.5e-7
//    absolute (max over an exhaustive 1/97 sample of all floats, FMA host). float32 pow calls libm
//    powf (exp(y*log(x)) loses accuracy for large results; pow is rarely hot); float64
//    exp/log/tanh/erf/pow call libm. float32 rsqrt is 1/sqrt in double, rounded once;
//  - int64 -> bfloat16 of |v| > 2^53 rounds twice (through float64): may differ in rare ties;
//  - buffer parameters are `noalias` (CpuCompileOptions::noalias_buffers): two buffer params may be
//    the same pointer only for an exact in-place update (every element read and written at the same
//    index by the same statement), which is all torch allows; partial overlap is undefined. Only
//    natural element alignment is assumed.
#pragma once
#include <cstddef>
#include <string>

#include "dsl/stmt.h"

namespace flow::jit::llvm_backend {

struct CpuCompileOptions {
  int opt_level = 3;            // 0..3, the LLVM optimization pipeline (and codegen) level
  bool dump_ir = false;         // print the optimized IR to stderr while compiling
  bool noalias_buffers = true;  // mark buffer params noalias (see the note above)

  // A canonical string of every option that changes the generated code (part of the cache key).
  std::string key() const;
};

// True when this build has the LLVM backend (the functions below then work).
bool llvm_backend_available();

// Textual LLVM IR before optimization (verified). Throws std::runtime_error for IR the CPU backend
// cannot compile (GPU loops, Shared memory, Barrier, BlockReduce: "CUDA-only statement in a CPU
// kernel").
std::string emit_llvm_ir(const dsl::LoweredFunc& f);
// Textual LLVM IR after the optimization pipeline for the host CPU (what compile_to_object emits).
std::string optimized_llvm_ir(const dsl::LoweredFunc& f, const CpuCompileOptions& opt = {});
// Host assembly of the optimized kernel (for inspection and explain()).
std::string emit_assembly(const dsl::LoweredFunc& f, const CpuCompileOptions& opt = {});
// The object file (ELF bytes) for the host CPU; load it with CpuKernelLoader.
std::string compile_to_object(const dsl::LoweredFunc& f, const CpuCompileOptions& opt = {});

// The compiler identity for the kernel cache key: "llvm-14.0.6/<host cpu>/<feature hash>".
std::string llvm_compiler_id();

using CpuKernelFn = void (*)(const dsl::ArgValue*);

// Maps compiled objects into the process. All instances share one process-wide LLJIT, created on
// first use; load() is thread-safe. Loaded code stays mapped until the process exits.
class CpuKernelLoader {
 public:
  // Adds the object in a fresh JITDylib (resolving flow_parallel_for and libc/libm symbols of the
  // process) and returns the address of `symbol` (normally the LoweredFunc's name). Throws
  // std::runtime_error with LLVM's message when the object is malformed or the symbol is missing.
  CpuKernelFn load(const std::string& object_bytes, const std::string& symbol);

  // Whether `p` lies in the memory loaded objects live in (jit/llvm/code_region.h), and how many
  // reserved regions that memory spans (for tests and diagnostics).
  static bool holds(const void* p);
  static size_t code_regions();
};

}  // namespace flow::jit::llvm_backend
