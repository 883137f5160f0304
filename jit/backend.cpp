// Note: the backends. The CPU backend compiles with LLVM in builds that have it (FLOW_HAS_LLVM).
// Without LLVM (the GPU machines' build), or with FLOW_CPU_BACKEND=interpreter, CPU kernels run on
// the reference interpreter (dsl/interpreter.h): correct and slow, so that the CPU work a GPU
// program still does (a model's initialization, say `randn(...) * 0.02`, before it moves to the
// device) runs instead of failing; a warning says so once. (The environment switch lets the
// builds with LLVM test that path.) The CUDA backend compiles with NVRTC (loaded with dlopen) to a
// cubin, which jit/cuda_launch.cpp loads through the driver API when the kernel first runs on a
// device.
#include "jit/backend.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>

#include "dsl/ir_visitor.h"
#include "jit/cuda/cuda_compile.h"
#include "jit/cuda/cuda_printer.h"
#ifdef FLOW_HAS_LLVM
#include "jit/llvm/llvm_codegen.h"
#endif

namespace flow::jit {

namespace {

#ifdef FLOW_HAS_LLVM
class LlvmBackend final : public Backend {
 public:
  const char* name() const override { return "llvm"; }
  std::string host_target() const override { return llvm_backend::llvm_compiler_id(); }
  std::string compiler_id() const override { return llvm_backend::llvm_compiler_id(); }
  std::string flags() const override { return llvm_backend::CpuCompileOptions{}.key(); }
  std::string compile(const dsl::LoweredFunc& f, const CompileOptions&) const override {
    return llvm_backend::compile_to_object(f, llvm_backend::CpuCompileOptions{});
  }
  void load(CompiledKernel& k, const std::string& binary, const CompileOptions&) const override {
    static llvm_backend::CpuKernelLoader loader;
    k.entry = reinterpret_cast<void*>(loader.load(binary, k.scheduled.func.name));
  }
  std::string source(const dsl::LoweredFunc& f) const override { return llvm_backend::emit_llvm_ir(f); }
};
#endif

// FLOW_CPU_BACKEND=interpreter (read once).
bool interpreter_requested() {
  static const bool requested = [] {
    const char* e = std::getenv("FLOW_CPU_BACKEND");
    return e != nullptr && std::strcmp(e, "interpreter") == 0;
  }();
  return requested;
}

// The "binary" is a marker naming the kernel: the loop nest itself (CompiledKernel::scheduled.func)
// is what runs (launch_cpu).
class InterpreterBackend final : public Backend {
 public:
  const char* name() const override { return "interpreter"; }
  std::string host_target() const override { return "interpreter"; }
  std::string compiler_id() const override { return "flow-interpreter"; }
  std::string flags() const override { return "default"; }
  std::string compile(const dsl::LoweredFunc& f, const CompileOptions&) const override { return kMarker + f.name; }
  void load(CompiledKernel& k, const std::string& binary, const CompileOptions&) const override {
    if (binary.rfind(kMarker, 0) != 0)
      throw std::runtime_error("kernel " + k.scheduled.func.name + ": the cached entry is not an interpreter kernel");
    static std::once_flag warned;
    std::call_once(warned, [] {
      std::fprintf(stderr, "[flow] warning: %s: CPU kernels run on the reference interpreter, correct but slow\n",
                   interpreter_requested() ? "FLOW_CPU_BACKEND=interpreter"
                                           : "this build of flow has no CPU code generator (LLVM 14 was not "
                                             "found at configure time)");
    });
    k.interpreted = true;
  }
  std::string source(const dsl::LoweredFunc& f) const override { return dsl::to_string(f.body); }

 private:
  static constexpr const char* kMarker = "flow-interpreter-kernel:";
};

class NvrtcBackend final : public Backend {
 public:
  const char* name() const override { return "nvrtc"; }
  std::string host_target() const override { return "cuda"; }
  std::string compiler_id() const override { return cuda::cuda_compiler_id(); }
  std::string flags() const override { return "default"; }
  std::string compile(const dsl::LoweredFunc& f, const CompileOptions& opt) const override {
    return cuda::cuda_compile(f, opt.cuda_arch).cubin;
  }
  void load(CompiledKernel& k, const std::string& binary, const CompileOptions&) const override {
    k.cubin = binary;  // loaded into a module on first launch, per device (jit/cuda_launch.cpp)
    k.cuda_source = cuda::print_cuda(k.scheduled.func);
  }
  std::string source(const dsl::LoweredFunc& f) const override { return cuda::print_cuda(f); }
};

}  // namespace

const Backend& backend_for(dsl::Target t) {
  if (t == dsl::Target::CUDA) {
    static const NvrtcBackend cuda;
    return cuda;
  }
#ifdef FLOW_HAS_LLVM
  if (!interpreter_requested()) {
    static const LlvmBackend cpu;
    return cpu;
  }
#endif
  static const InterpreterBackend interpreter;
  return interpreter;
}

}  // namespace flow::jit
