// The emulated device's libnvrtc (see emulated_driver.cpp): every call goes to the real NVRTC, so
// each kernel still compiles for the device exactly as on a GPU machine (errors, logs and PTX are
// NVRTC's own), but the "cubin" it hands back is an emulated image (emulated_image.h) that carries
// the source and headers, which the emulated driver builds for the host and runs.
// The real library: $FLOW_REAL_NVRTC, else the toolkit's that the build found (FLOW_REAL_NVRTC_DEFAULT).
#include <dlfcn.h>
#include <nvrtc.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>

#include "simt/emulated_image.h"

#ifndef FLOW_REAL_NVRTC_DEFAULT
#error "FLOW_REAL_NVRTC_DEFAULT (the real libnvrtc's path) must be defined by the build"
#endif

namespace {

struct Real {
  decltype(&nvrtcGetErrorString) GetErrorString = nullptr;
  decltype(&nvrtcVersion) Version = nullptr;
  decltype(&nvrtcCreateProgram) CreateProgram = nullptr;
  decltype(&nvrtcDestroyProgram) DestroyProgram = nullptr;
  decltype(&nvrtcCompileProgram) CompileProgram = nullptr;
  decltype(&nvrtcGetPTXSize) GetPTXSize = nullptr;
  decltype(&nvrtcGetPTX) GetPTX = nullptr;
  decltype(&nvrtcGetProgramLogSize) GetProgramLogSize = nullptr;
  decltype(&nvrtcGetProgramLog) GetProgramLog = nullptr;
  bool ok = false;
};

const Real& real() {
  static const Real r = [] {
    Real x;
    const char* env = std::getenv("FLOW_REAL_NVRTC");
    const std::string path = env && *env ? env : FLOW_REAL_NVRTC_DEFAULT;
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      std::fprintf(stderr, "[emulated nvrtc] cannot load the real NVRTC %s: %s\n", path.c_str(), dlerror());
      return x;
    }
#define FLOW_REAL(fn) x.fn = reinterpret_cast<decltype(x.fn)>(dlsym(h, "nvrtc" #fn));
    FLOW_REAL(GetErrorString)
    FLOW_REAL(Version)
    FLOW_REAL(CreateProgram)
    FLOW_REAL(DestroyProgram)
    FLOW_REAL(CompileProgram)
    FLOW_REAL(GetPTXSize)
    FLOW_REAL(GetPTX)
    FLOW_REAL(GetProgramLogSize)
    FLOW_REAL(GetProgramLog)
#undef FLOW_REAL
    x.ok = x.GetErrorString && x.Version && x.CreateProgram && x.DestroyProgram && x.CompileProgram && x.GetPTXSize &&
           x.GetPTX && x.GetProgramLogSize && x.GetProgramLog;
    return x;
  }();
  return r;
}

// What an nvrtcProgram handle of this library points at.
struct Program {
  nvrtcProgram real = nullptr;
  std::string image;
};

Program* as_program(nvrtcProgram p) {
  return reinterpret_cast<Program*>(p);
}

}  // namespace

extern "C" {

const char* nvrtcGetErrorString(nvrtcResult result) {
  return real().ok ? real().GetErrorString(result) : "the real NVRTC could not be loaded";
}

nvrtcResult nvrtcVersion(int* major, int* minor) {
  if (!real().ok) return NVRTC_ERROR_INTERNAL_ERROR;
  return real().Version(major, minor);
}

nvrtcResult nvrtcCreateProgram(nvrtcProgram* prog, const char* src, const char* name, int numHeaders,
                               const char* const* headers, const char* const* includeNames) {
  if (!real().ok) return NVRTC_ERROR_INTERNAL_ERROR;
  auto p = std::make_unique<Program>();
  const nvrtcResult r = real().CreateProgram(&p->real, src, name, numHeaders, headers, includeNames);
  if (r != NVRTC_SUCCESS) return r;
  flow::test::simt::EmulatedImage image;
  image.source = src;
  for (int i = 0; i < numHeaders; ++i) image.headers.emplace_back(includeNames[i], headers[i]);
  p->image = flow::test::simt::serialize_emulated_image(image);
  *prog = reinterpret_cast<nvrtcProgram>(p.release());
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcDestroyProgram(nvrtcProgram* prog) {
  if (!prog || !*prog) return NVRTC_ERROR_INVALID_PROGRAM;
  std::unique_ptr<Program> p(as_program(*prog));
  *prog = nullptr;
  return real().DestroyProgram(&p->real);
}

nvrtcResult nvrtcCompileProgram(nvrtcProgram prog, int numOptions, const char* const* options) {
  return real().CompileProgram(as_program(prog)->real, numOptions, options);
}

nvrtcResult nvrtcGetPTXSize(nvrtcProgram prog, size_t* size) {
  return real().GetPTXSize(as_program(prog)->real, size);
}

nvrtcResult nvrtcGetPTX(nvrtcProgram prog, char* ptx) {
  return real().GetPTX(as_program(prog)->real, ptx);
}

// The image includes its terminating NUL, as a real cubin's size covers all its bytes.
nvrtcResult nvrtcGetCUBINSize(nvrtcProgram prog, size_t* size) {
  *size = as_program(prog)->image.size() + 1;
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetCUBIN(nvrtcProgram prog, char* cubin) {
  const std::string& image = as_program(prog)->image;
  std::memcpy(cubin, image.c_str(), image.size() + 1);
  return NVRTC_SUCCESS;
}

nvrtcResult nvrtcGetProgramLogSize(nvrtcProgram prog, size_t* size) {
  return real().GetProgramLogSize(as_program(prog)->real, size);
}

nvrtcResult nvrtcGetProgramLog(nvrtcProgram prog, char* log) {
  return real().GetProgramLog(as_program(prog)->real, log);
}

}  // extern "C"
