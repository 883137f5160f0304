// Note: the two backends. The CPU backend exists only in builds with LLVM (FLOW_HAS_LLVM); the
// CUDA backend compiles with NVRTC (loaded with dlopen) to a cubin, which jit/cuda_launch.cpp
// loads through the driver API when the kernel first runs on a device.
#include "jit/backend.h"

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
  static const LlvmBackend cpu;
  return cpu;
#else
  throw std::runtime_error("this build of flow has no CPU code generator (LLVM 14 was not found at configure time)");
#endif
}

}  // namespace flow::jit
