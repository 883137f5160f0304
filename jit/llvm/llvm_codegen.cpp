// Note: the compile side of the public API (llvm_codegen.h): the host target (triple, CPU name and
// feature string from sys::getHostCPUName/getHostCPUFeatures, so AVX-512/AVX2 are used where
// present), the new-PM O3 pipeline with that TargetMachine (so the vectorizers see the real vector
// width), and object/assembly emission. Every call builds its own LLVMContext and TargetMachine, so
// compiles on several threads never share LLVM state.
#include "jit/llvm/llvm_codegen.h"

#include <cstdlib>
#include <llvm/ADT/StringMap.h>
#include <llvm/Analysis/CGSCCPassManager.h>
#include <llvm/Analysis/LoopAnalysisManager.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/DiagnosticPrinter.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/PassManager.h>
#include <llvm/MC/SubtargetFeature.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/Host.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "jit/llvm/codegen_ir.h"

namespace flow::jit::llvm_backend {
namespace {

[[noreturn]] void fail(const std::string& msg) {
  throw std::runtime_error("llvm backend: " + msg);
}

struct HostTarget {
  std::string triple, cpu, features;
  uint64_t feature_hash = 0;
};

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

const HostTarget& host() {
  static const HostTarget target = [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
    HostTarget t;
    t.triple = llvm::sys::getProcessTriple();
    t.cpu = llvm::sys::getHostCPUName().str();
    llvm::StringMap<bool> map;
    std::vector<std::string> names;
    // FLOW_CPU_TARGET=<LLVM cpu name> (e.g. x86-64-v2): build for that CPU model and its features
    // instead of this host's, e.g. to ship kernels to older machines. It is part of the target id,
    // so kernels and tuning records for it are kept apart.
    const char* forced = std::getenv("FLOW_CPU_TARGET");
    if (forced != nullptr && *forced != '\0') {
      t.cpu = forced;
    } else if (llvm::sys::getHostCPUFeatures(map)) {
      for (const auto& kv : map) names.push_back((kv.second ? "+" : "-") + kv.first().str());
    }
    std::sort(names.begin(), names.end());  // StringMap order is not canonical
    llvm::SubtargetFeatures sf;
    for (const std::string& n : names) sf.AddFeature(n);
    t.features = sf.getString();
    t.feature_hash = fnv1a(t.features);
    return t;
  }();
  return target;
}

llvm::CodeGenOpt::Level codegen_level(int level) {
  switch (level) {
    case 0:
      return llvm::CodeGenOpt::None;
    case 1:
      return llvm::CodeGenOpt::Less;
    case 2:
      return llvm::CodeGenOpt::Default;
    default:
      return llvm::CodeGenOpt::Aggressive;
  }
}

std::unique_ptr<llvm::TargetMachine> make_target_machine(int level) {
  const HostTarget& h = host();
  std::string err;
  const llvm::Target* target = llvm::TargetRegistry::lookupTarget(h.triple, err);
  if (!target) fail("no LLVM target for " + h.triple + ": " + err);
  llvm::TargetOptions options;  // IEEE semantics: no fast-math
  std::unique_ptr<llvm::TargetMachine> tm(target->createTargetMachine(
      h.triple, h.cpu, h.features, options, llvm::Reloc::PIC_, llvm::CodeModel::Small, codegen_level(level)));
  if (!tm) fail("cannot create a target machine for " + h.triple + " / " + h.cpu);
  return tm;
}

void check_level(const CpuCompileOptions& opt) {
  if (opt.opt_level < 0 || opt.opt_level > 3) fail("opt_level must be 0..3, got " + std::to_string(opt.opt_level));
}

// One compilation: context, module for the host, optionally optimized.
struct Compiled {
  Compiled() { ctx.setDiagnosticHandlerCallBack(&Compiled::diagnose, this); }
  // Remarks and warnings (e.g. "loop not vectorized") are dropped; errors are collected and thrown.
  static void diagnose(const llvm::DiagnosticInfo& di, void* self) {
    if (di.getSeverity() != llvm::DS_Error) return;
    std::string msg;
    llvm::raw_string_ostream os(msg);
    llvm::DiagnosticPrinterRawOStream printer(os);
    di.print(printer);
    os.flush();
    static_cast<Compiled*>(self)->errors += msg + "\n";
  }
  void check() const {
    if (!errors.empty()) fail("LLVM reported: " + errors);
  }
  std::string errors;
  llvm::LLVMContext ctx;
  std::unique_ptr<llvm::TargetMachine> tm;
  std::unique_ptr<llvm::Module> module;
};

std::unique_ptr<Compiled> build(const dsl::LoweredFunc& f, const CpuCompileOptions& opt, bool optimize) {
  check_level(opt);
  auto c = std::make_unique<Compiled>();
  c->tm = make_target_machine(opt.opt_level);
  ir::CodegenOptions cg;
  cg.cpu = host().cpu;
  cg.features = host().features;
  cg.noalias_buffers = opt.noalias_buffers;
  c->module = ir::build_module(f, c->ctx, cg);
  c->module->setDataLayout(c->tm->createDataLayout());
  c->module->setTargetTriple(host().triple);
  if (!optimize) return c;

  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PipelineTuningOptions pto;
  pto.LoopVectorization = opt.opt_level >= 2;
  pto.SLPVectorization = opt.opt_level >= 2;
  llvm::PassBuilder pb(c->tm.get(), pto);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  static const llvm::OptimizationLevel levels[] = {llvm::OptimizationLevel::O0, llvm::OptimizationLevel::O1,
                                                   llvm::OptimizationLevel::O2, llvm::OptimizationLevel::O3};
  llvm::ModulePassManager mpm = opt.opt_level == 0 ? pb.buildO0DefaultPipeline(levels[0])
                                                   : pb.buildPerModuleDefaultPipeline(levels[opt.opt_level]);
  mpm.run(*c->module, mam);
  c->check();
  if (opt.dump_ir) {
    llvm::errs() << "; flow: optimized LLVM IR of kernel '" << f.name << "'\n" << *c->module;
    llvm::errs().flush();
  }
  return c;
}

std::string print(const llvm::Module& m) {
  std::string s;
  llvm::raw_string_ostream os(s);
  os << m;
  os.flush();
  return s;
}

std::string emit_file(Compiled& c, llvm::CodeGenFileType type) {
  llvm::SmallVector<char, 0> buf;
  llvm::raw_svector_ostream os(buf);
  llvm::legacy::PassManager pm;
  if (c.tm->addPassesToEmitFile(pm, os, nullptr, type)) fail("the target cannot emit this file type");
  pm.run(*c.module);
  c.check();
  return std::string(buf.begin(), buf.end());
}

}  // namespace

std::string CpuCompileOptions::key() const {
  return "O" + std::to_string(opt_level) + (noalias_buffers ? "/noalias" : "/mayalias");
}

bool llvm_backend_available() {
  return true;
}

std::string emit_llvm_ir(const dsl::LoweredFunc& f) {
  return print(*build(f, {}, false)->module);
}

std::string optimized_llvm_ir(const dsl::LoweredFunc& f, const CpuCompileOptions& opt) {
  return print(*build(f, opt, true)->module);
}

std::string emit_assembly(const dsl::LoweredFunc& f, const CpuCompileOptions& opt) {
  auto c = build(f, opt, true);
  return emit_file(*c, llvm::CGFT_AssemblyFile);
}

std::string compile_to_object(const dsl::LoweredFunc& f, const CpuCompileOptions& opt) {
  auto c = build(f, opt, true);
  return emit_file(*c, llvm::CGFT_ObjectFile);
}

std::string llvm_compiler_id() {
  char hash[17];
  std::snprintf(hash, sizeof(hash), "%016llx", static_cast<unsigned long long>(host().feature_hash));
  return std::string("llvm-") + LLVM_VERSION_STRING + "/" + host().cpu + "/" + hash;
}

}  // namespace flow::jit::llvm_backend
