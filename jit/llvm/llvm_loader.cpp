// Note: CpuKernelLoader (llvm_codegen.h). One ORC LLJIT per process, created on first load under a
// mutex (loads are serialized; running loaded kernels needs no lock). Each object goes into a fresh
// JITDylib "flow_kernel_<n>" so identical kernel names from different objects (or the same object
// loaded twice) never clash. A JITDylib resolves, in order: its own object, the absolute symbols
// flow_parallel_for and flow_report_index_error (registered by address, so they work from a static
// library without -rdynamic), then everything else (libm, memset, ...) from the current process. Every object's
// sections are placed in one CodeRegion (jit/llvm/code_region.h), so its 32-bit displacements always reach.
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/RTDyldObjectLinkingLayer.h>
#include <llvm/ExecutionEngine/SectionMemoryManager.h>
#include <llvm/Support/Error.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>

#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>

#include "jit/llvm/code_region.h"
#include "jit/llvm/llvm_codegen.h"
#include "runtime/device_error.h"
#include "runtime/parallel_abi.h"

namespace flow::jit::llvm_backend {
namespace {

[[noreturn]] void fail(const std::string& msg) {
  throw std::runtime_error("llvm backend: " + msg);
}

std::string message(llvm::Error e) {
  return llvm::toString(std::move(e));
}

struct JitState {
  std::mutex mu;
  CodeRegions regions;  // before jit: its memory managers use the regions until they go
  std::unique_ptr<llvm::orc::LLJIT> jit;
  uint64_t dylibs = 0;
};

JitState& state() {
  static JitState s;
  return s;
}

llvm::orc::LLJIT& jit_locked(JitState& s) {
  if (s.jit) return *s.jit;
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb) fail("cannot detect the host for the JIT: " + message(jtmb.takeError()));
  // RuntimeDyld with one SectionMemoryManager per object, as LLJIT's default, but drawing its
  // memory from a CodeRegion (the default maps every memory group wherever the kernel likes).
  auto layer = [&s](llvm::orc::ExecutionSession& es,
                    const llvm::Triple&) -> llvm::Expected<std::unique_ptr<llvm::orc::ObjectLayer>> {
    return std::make_unique<llvm::orc::RTDyldObjectLinkingLayer>(
        es, [&s] { return std::make_unique<llvm::SectionMemoryManager>(&s.regions.current()); });
  };
  auto jit = llvm::orc::LLJITBuilder()
                 .setJITTargetMachineBuilder(std::move(*jtmb))
                 .setObjectLinkingLayerCreator(std::move(layer))
                 .create();
  if (!jit) fail("cannot create the LLJIT: " + message(jit.takeError()));
  s.jit = std::move(*jit);
  return *s.jit;
}

}  // namespace

CpuKernelFn CpuKernelLoader::load(const std::string& object_bytes, const std::string& symbol) {
  JitState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (object_bytes.size() > CodeRegions::kMaxObjectFileBytes)  // (RuntimeDyld would end in a fatal error)
    fail("the object for '" + symbol + "' is " + std::to_string(object_bytes.size() >> 20) +
         " MiB; CPU kernel objects are limited to " + std::to_string(CodeRegions::kMaxObjectFileBytes >> 20) + " MiB");
  llvm::orc::LLJIT& jit = jit_locked(s);
  s.regions.make_room_for_object();
  const std::string dylib_name = "flow_kernel_" + std::to_string(++s.dylibs);
  auto jd = jit.createJITDylib(dylib_name);
  if (!jd) fail("cannot create JITDylib " + dylib_name + ": " + message(jd.takeError()));

  llvm::orc::SymbolMap runtime;
  runtime[jit.mangleAndIntern("flow_parallel_for")] =
      llvm::JITEvaluatedSymbol(llvm::pointerToJITTargetAddress(&flow_parallel_for),
                               llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable);
  runtime[jit.mangleAndIntern("flow_report_index_error")] =
      llvm::JITEvaluatedSymbol(llvm::pointerToJITTargetAddress(&flow_report_index_error),
                               llvm::JITSymbolFlags::Exported | llvm::JITSymbolFlags::Callable);
  if (auto err = jd->define(llvm::orc::absoluteSymbols(std::move(runtime)))) {
    fail("cannot define flow's runtime symbols: " + message(std::move(err)));
  }
  auto process = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(jit.getDataLayout().getGlobalPrefix());
  if (!process) fail("cannot search the process for symbols: " + message(process.takeError()));
  jd->addGenerator(std::move(*process));

  if (auto err = jit.addObjectFile(*jd, llvm::MemoryBuffer::getMemBufferCopy(object_bytes, dylib_name))) {
    fail("cannot add the object for '" + symbol + "': " + message(std::move(err)));
  }
  auto sym = jit.lookup(*jd, symbol);
  if (!sym) fail("cannot resolve kernel '" + symbol + "': " + message(sym.takeError()));
  return reinterpret_cast<CpuKernelFn>(static_cast<uintptr_t>(sym->getAddress()));
}

bool CpuKernelLoader::holds(const void* p) {
  return state().regions.contains(p);
}

size_t CpuKernelLoader::code_regions() {
  return state().regions.count();
}

}  // namespace flow::jit::llvm_backend
