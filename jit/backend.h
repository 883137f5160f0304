// Note: a code generator + compiler pair behind one small interface, so get_kernel() treats the
// CPU (LLVM ORC) and CUDA (NVRTC) targets alike: compile a loop nest to a binary blob (what the
// kernel cache stores), load a blob into a runnable kernel, and print readable source.
#pragma once
#include <string>

#include "dsl/stmt.h"
#include "jit/compile.h"

namespace flow::jit {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;         // "llvm" or "nvrtc"
  virtual std::string host_target() const = 0;  // CPU name + features (CUDA: unused)
  virtual std::string compiler_id() const = 0;  // compiler version: part of the cache key
  virtual std::string flags() const = 0;        // codegen flags: part of the cache key
  virtual std::string compile(const dsl::LoweredFunc& f, const CompileOptions& opt) const = 0;
  virtual void load(CompiledKernel& k, const std::string& binary, const CompileOptions& opt) const = 0;
  virtual std::string source(const dsl::LoweredFunc& f) const = 0;
};

// Throws std::runtime_error naming what is missing (e.g. a build without LLVM).
const Backend& backend_for(dsl::Target t);

// SHA-256 prefix of the code generator sources of this build (generated at build time).
const char* codegen_source_hash();

uint64_t total_launches();
void reset_total_launches();

}  // namespace flow::jit
