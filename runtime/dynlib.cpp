#include "runtime/dynlib.h"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <utility>

namespace flow::runtime {
namespace {

std::string last_dlerror() {
  const char* e = dlerror();
  return e != nullptr ? std::string(e) : std::string("unknown error");
}

}  // namespace

DynamicLibrary::DynamicLibrary(const std::string& path, bool keep_loaded) : path_(path) {
  dlerror();  // clear
  handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | (keep_loaded ? RTLD_NODELETE : 0));
  if (handle_ == nullptr) throw std::runtime_error("flow: dlopen(\"" + path + "\") failed: " + last_dlerror());
}

DynamicLibrary DynamicLibrary::open_first(const std::string& what, const std::vector<std::string>& candidates,
                                          bool keep_loaded) {
  std::string tried;
  std::string errors;
  for (const std::string& name : candidates) {
    dlerror();
    if (void* h = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL | (keep_loaded ? RTLD_NODELETE : 0)); h != nullptr) {
      DynamicLibrary lib;
      lib.handle_ = h;
      lib.path_ = name;
      return lib;
    }
    tried += (tried.empty() ? "" : ", ") + name;
    errors += "\n  " + last_dlerror();
  }
  throw std::runtime_error("flow: could not load " + what + "; tried: " + (tried.empty() ? "(no names)" : tried) +
                           "; dlerror():" + (errors.empty() ? " (none)" : errors));
}

DynamicLibrary::~DynamicLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

DynamicLibrary::DynamicLibrary(DynamicLibrary&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)), path_(std::move(other.path_)) {}

DynamicLibrary& DynamicLibrary::operator=(DynamicLibrary&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) dlclose(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
    path_ = std::move(other.path_);
  }
  return *this;
}

void* DynamicLibrary::find_symbol(const char* name) const noexcept {
  return handle_ != nullptr ? dlsym(handle_, name) : nullptr;
}

void* DynamicLibrary::symbol(const char* name) const {
  if (handle_ == nullptr) throw std::runtime_error(std::string("flow: dlsym(\"") + name + "\") on a closed library");
  dlerror();
  void* p = dlsym(handle_, name);
  if (p == nullptr) {
    throw std::runtime_error(std::string("flow: symbol ") + name + " not found in " + path_ + ": " + last_dlerror());
  }
  return p;
}

const char* cuda_lib_name(CudaLib which) {
  switch (which) {
    case CudaLib::Driver:
      return "the CUDA driver (libcuda)";
    case CudaLib::Nvrtc:
      return "NVRTC (libnvrtc)";
    case CudaLib::Cudnn:
      return "cuDNN (libcudnn)";
    case CudaLib::CublasLt:
      return "cuBLASLt (libcublasLt)";
  }
  return "an unknown CUDA library";
}

// FLOW_CUDA_LIB_PATH: an optional colon-separated list of directories searched before everything
// else (each soname under each directory, in order), for libraries outside the linker's search
// path, e.g. the cuDNN and cuBLAS of PyTorch's pip packages (.../site-packages/nvidia/cudnn/lib). A
// Python process that imported torch first already has them loaded, and the plain soname finds that
// copy. Not used for the driver, which is only ever loaded by soname (see dynlib.h).
std::vector<std::string> cuda_library_candidates(CudaLib which) {
  std::vector<std::string> sonames;
  switch (which) {
    case CudaLib::Driver:
      return {"libcuda.so.1"};  // never the toolkit's stubs/libcuda.so
    case CudaLib::Nvrtc:
      sonames = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
      break;
    case CudaLib::Cudnn:
      sonames = {"libcudnn.so.9"};
      break;
    case CudaLib::CublasLt:
      sonames = {"libcublasLt.so.13", "libcublasLt.so.12"};
      break;
  }
  std::vector<std::string> out;
  if (const char* path = std::getenv("FLOW_CUDA_LIB_PATH"); path != nullptr) {
    const std::string list(path);
    size_t begin = 0;
    while (begin <= list.size()) {
      const size_t end = std::min(list.find(':', begin), list.size());
      const std::string dir = list.substr(begin, end - begin);
      if (!dir.empty())
        for (const std::string& s : sonames) out.push_back(dir + "/" + s);
      begin = end + 1;
    }
  }
  std::vector<std::string> dirs;
  if (const char* home = std::getenv("CUDA_HOME"); home != nullptr && *home != '\0') {
    dirs.push_back(std::string(home) + "/lib64");
  }
  if (dirs.empty() || dirs[0] != "/usr/local/cuda/lib64") dirs.push_back("/usr/local/cuda/lib64");
  out.insert(out.end(), sonames.begin(), sonames.end());
  for (const std::string& d : dirs)
    for (const std::string& s : sonames) out.push_back(d + "/" + s);
  return out;
}

const DynamicLibrary& load_cuda_library(CudaLib which) {
  constexpr size_t kCount = 4;
  static std::array<std::atomic<const DynamicLibrary*>, kCount> loaded{};
  static std::array<std::unique_ptr<DynamicLibrary>, kCount> storage;
  static std::mutex mutex;
  const size_t i = static_cast<size_t>(which);
  if (const DynamicLibrary* lib = loaded[i].load(std::memory_order_acquire)) return *lib;
  std::lock_guard<std::mutex> lock(mutex);
  if (!storage[i]) {
    storage[i] = std::make_unique<DynamicLibrary>(
        DynamicLibrary::open_first(cuda_lib_name(which), cuda_library_candidates(which), /*keep_loaded=*/true));
    loaded[i].store(storage[i].get(), std::memory_order_release);
  }
  return *storage[i];
}

}  // namespace flow::runtime
