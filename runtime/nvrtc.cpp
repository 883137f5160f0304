#include "runtime/nvrtc.h"

#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#include "runtime/dynlib.h"

#if defined(FLOW_HAVE_CUDA_HEADERS)
#include <nvrtc.h>
#else
// Without the CUDA headers, declare the part of the NVRTC C API we use (stable since CUDA 11.1).
// The prototypes are never called directly: they only give decltype() the function types.
extern "C" {
typedef int nvrtcResult;  // an enum in nvrtc.h; same ABI
typedef struct _nvrtcProgram* nvrtcProgram;
const char* nvrtcGetErrorString(nvrtcResult result);
nvrtcResult nvrtcVersion(int* major, int* minor);
nvrtcResult nvrtcCreateProgram(nvrtcProgram* prog, const char* src, const char* name, int numHeaders,
                               const char* const* headers, const char* const* includeNames);
nvrtcResult nvrtcDestroyProgram(nvrtcProgram* prog);
nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int numOptions, const char* const* options);
nvrtcResult nvrtcGetPTXSize(nvrtcProgram prog, size_t* ptxSizeRet);
nvrtcResult nvrtcGetPTX(nvrtcProgram prog, char* ptx);
nvrtcResult nvrtcGetCUBINSize(nvrtcProgram prog, size_t* cubinSizeRet);
nvrtcResult nvrtcGetCUBIN(nvrtcProgram prog, char* cubin);
nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram prog, size_t* logSizeRet);
nvrtcResult nvrtcGetProgramLog(nvrtcProgram prog, char* log);
}
#define NVRTC_SUCCESS 0
#endif

namespace flow::runtime {
namespace {

struct NvrtcApi {
  decltype(&nvrtcGetErrorString) GetErrorString;
  decltype(&nvrtcVersion) Version;
  decltype(&nvrtcCreateProgram) CreateProgram;
  decltype(&nvrtcDestroyProgram) DestroyProgram;
  decltype(&nvrtcCompileProgram) CompileProgram;
  decltype(&nvrtcGetPTXSize) GetPTXSize;
  decltype(&nvrtcGetPTX) GetPTX;
  decltype(&nvrtcGetCUBINSize) GetCUBINSize;
  decltype(&nvrtcGetCUBIN) GetCUBIN;
  decltype(&nvrtcGetProgramLogSize) GetProgramLogSize;
  decltype(&nvrtcGetProgramLog) GetProgramLog;

  explicit NvrtcApi(const DynamicLibrary& lib)
      : GetErrorString(lib.function<decltype(GetErrorString)>("nvrtcGetErrorString")),
        Version(lib.function<decltype(Version)>("nvrtcVersion")),
        CreateProgram(lib.function<decltype(CreateProgram)>("nvrtcCreateProgram")),
        DestroyProgram(lib.function<decltype(DestroyProgram)>("nvrtcDestroyProgram")),
        CompileProgram(lib.function<decltype(CompileProgram)>("nvrtcCompileProgram")),
        GetPTXSize(lib.function<decltype(GetPTXSize)>("nvrtcGetPTXSize")),
        GetPTX(lib.function<decltype(GetPTX)>("nvrtcGetPTX")),
        GetCUBINSize(lib.function<decltype(GetCUBINSize)>("nvrtcGetCUBINSize")),
        GetCUBIN(lib.function<decltype(GetCUBIN)>("nvrtcGetCUBIN")),
        GetProgramLogSize(lib.function<decltype(GetProgramLogSize)>("nvrtcGetProgramLogSize")),
        GetProgramLog(lib.function<decltype(GetProgramLog)>("nvrtcGetProgramLog")) {}

  std::string error_string(nvrtcResult r) const {
    const char* s = GetErrorString(r);
    return s != nullptr ? s : "NVRTC error " + std::to_string(static_cast<int>(r));
  }
  void check(nvrtcResult r, const char* call, const std::string& name) const {
    if (r != NVRTC_SUCCESS) {
      throw std::runtime_error(std::string("flow: ") + call + " failed for " + name + ": " + error_string(r));
    }
  }
};

const NvrtcApi& api() {
  // A failed load throws out of the initializer and is retried by the next call.
  static const NvrtcApi instance(load_cuda_library(CudaLib::Nvrtc));
  return instance;
}

class Program {
 public:
  Program(const NvrtcApi& a, const std::string& source, const std::string& name,
          const std::vector<std::pair<std::string, std::string>>& headers)
      : api_(a) {
    std::vector<const char*> contents;
    std::vector<const char*> names;
    for (const auto& [include_name, text] : headers) {
      names.push_back(include_name.c_str());
      contents.push_back(text.c_str());
    }
    api_.check(api_.CreateProgram(&prog_, source.c_str(), name.c_str(), static_cast<int>(headers.size()),
                                  contents.data(), names.data()),
               "nvrtcCreateProgram", name);
  }
  ~Program() {
    if (prog_ != nullptr) api_.DestroyProgram(&prog_);
  }
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;

  nvrtcProgram get() const { return prog_; }

  std::string log() const {
    size_t size = 0;
    if (api_.GetProgramLogSize(prog_, &size) != NVRTC_SUCCESS || size <= 1) return {};
    std::string log(size, '\0');
    if (api_.GetProgramLog(prog_, log.data()) != NVRTC_SUCCESS) return {};
    log.resize(std::strlen(log.c_str()));
    return log;
  }

 private:
  const NvrtcApi& api_;
  nvrtcProgram prog_ = nullptr;
};

std::string sanitize(const std::string& name) {
  std::string out;
  for (const char c : name) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    out += ok ? c : '_';
  }
  return out.empty() ? "kernel" : out.substr(0, 100);
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : " ") + x;
  return s;
}

// Saves a failing source; returns its path, or "" (and a reason in `why`) if it cannot be written.
std::string save_failing_source(const std::string& source, const std::string& name,
                                const std::vector<std::string>& options,
                                const std::vector<std::pair<std::string, std::string>>& headers, std::string& why) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path dir;
  if (const char* d = std::getenv("FLOW_DUMP_DIR"); d != nullptr && *d != '\0') {
    dir = d;
    fs::create_directories(dir, ec);
  } else {
    dir = fs::temp_directory_path(ec);
    if (ec) dir = "/tmp";
  }
  const fs::path path = dir / ("flow_nvrtc_" + sanitize(name) + "_" + std::to_string(::getpid()) + ".cu");
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << source;
  // Appended, so line numbers in the log still match the file.
  f << "\n// flow: nvrtc options: " << join(options) << "\n";
  for (const auto& h : headers) f << "// flow: header given to nvrtc: " << h.first << "\n";
  f.close();
  if (!f) {
    why = std::string("could not write ") + path.string() + ": " + std::strerror(errno);
    return {};
  }
  return path.string();
}

bool starts_with(const std::string& s, const char* prefix) {
  return s.rfind(prefix, 0) == 0;
}

std::string get_ptx(const NvrtcApi& a, const Program& p) {
  size_t size = 0;
  if (a.GetPTXSize(p.get(), &size) != NVRTC_SUCCESS || size <= 1) return {};
  std::string ptx(size, '\0');
  if (a.GetPTX(p.get(), ptx.data()) != NVRTC_SUCCESS) return {};
  ptx.resize(std::strlen(ptx.c_str()));  // drop the terminating NUL
  return ptx;
}

}  // namespace

NvrtcResult nvrtc_compile(const std::string& source, const std::string& name, const std::string& arch,
                          const std::vector<std::string>& extra_options,
                          const std::vector<std::pair<std::string, std::string>>& headers) {
  const bool real = starts_with(arch, "sm_");
  if (!real && !starts_with(arch, "compute_")) {
    throw std::invalid_argument("flow: nvrtc_compile(" + name + "): architecture must be sm_XX or compute_XX, got '" +
                                arch + "'");
  }
  const NvrtcApi& a = api();

  auto compile = [&](const std::string& arch_option, NvrtcResult& out) {
    std::vector<std::string> options = {arch_option};
    options.insert(options.end(), extra_options.begin(), extra_options.end());
    std::vector<const char*> argv;
    for (const std::string& o : options) argv.push_back(o.c_str());
    auto prog = std::make_unique<Program>(a, source, name, headers);
    const nvrtcResult r = a.CompileProgram(prog->get(), static_cast<int>(argv.size()), argv.data());
    out.log = prog->log();
    if (r != NVRTC_SUCCESS) {
      std::string why;
      const std::string path = save_failing_source(source, name, options, headers, why);
      throw NvrtcError("flow: NVRTC failed to compile '" + name + "' for " + arch + " (" + a.error_string(r) +
                           "); source saved to " + (path.empty() ? "(nowhere: " + why + ")" : path) +
                           "\noptions: " + join(options) + "\n" + out.log,
                       out.log, path);
    }
    return prog;
  };

  NvrtcResult out;
  if (real) {
    const auto prog = compile("-arch=" + arch, out);
    size_t size = 0;
    a.check(a.GetCUBINSize(prog->get(), &size), "nvrtcGetCUBINSize", name);
    out.cubin.assign(size, '\0');
    a.check(a.GetCUBIN(prog->get(), out.cubin.data()), "nvrtcGetCUBIN", name);
    out.ptx = get_ptx(a, *prog);
  }
  if (out.ptx.empty()) {
    // A virtual architecture, or an NVRTC that keeps no PTX for a real one: compile for compute_XX.
    const std::string virt = real ? "compute_" + arch.substr(3) : arch;
    NvrtcResult ptx_only;
    const auto prog = compile("--gpu-architecture=" + virt, ptx_only);
    out.ptx = get_ptx(a, *prog);
    if (out.ptx.empty()) throw std::runtime_error("flow: NVRTC produced no PTX for '" + name + "' (" + virt + ")");
    if (!real) out.log = ptx_only.log;
  }
  return out;
}

std::string nvrtc_version() {
  int major = 0;
  int minor = 0;
  const NvrtcApi& a = api();
  a.check(a.Version(&major, &minor), "nvrtcVersion", "version query");
  return "nvrtc-" + std::to_string(major) + "." + std::to_string(minor);
}

}  // namespace flow::runtime
