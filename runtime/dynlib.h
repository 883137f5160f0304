// Note: dynamic loading of the CUDA libraries, so that flow builds and imports on a machine with no
// GPU and no CUDA driver: nothing links libcuda, libnvrtc, libcudnn or libcublasLt; each is
// dlopen'ed on first use and stays loaded for the life of the process (RTLD_NODELETE: the CUDA
// libraries do not survive being unloaded while other code still holds their handles).
//
// Search order for a library: each soname in turn through the normal dynamic-linker search
// (LD_LIBRARY_PATH, the ld.so cache), then each soname under $CUDA_HOME/lib64 and
// /usr/local/cuda/lib64. The driver (libcuda.so.1) is searched by soname only: the toolkit
// directories hold a link-time stub of it that must never be loaded at run time. A failure throws
// std::runtime_error naming the library, every name tried and what dlerror() said for each.
#pragma once
#include <string>
#include <vector>

namespace flow::runtime {

class DynamicLibrary {
 public:
  // dlopen(path, RTLD_NOW | RTLD_LOCAL [| RTLD_NODELETE]); throws std::runtime_error with dlerror().
  explicit DynamicLibrary(const std::string& path, bool keep_loaded = false);
  // Tries each candidate in order; the first that loads wins. `what` names the library in errors.
  static DynamicLibrary open_first(const std::string& what, const std::vector<std::string>& candidates,
                                   bool keep_loaded = false);

  ~DynamicLibrary();
  DynamicLibrary(DynamicLibrary&& other) noexcept;
  DynamicLibrary& operator=(DynamicLibrary&& other) noexcept;
  DynamicLibrary(const DynamicLibrary&) = delete;
  DynamicLibrary& operator=(const DynamicLibrary&) = delete;

  // The address of `name`; throws std::runtime_error naming the symbol and the library if missing.
  void* symbol(const char* name) const;
  // nullptr if missing.
  void* find_symbol(const char* name) const noexcept;
  // symbol() cast to a function pointer type: lib.function<decltype(&nvrtcVersion)>("nvrtcVersion").
  template <typename Fn>
  Fn function(const char* name) const {
    return reinterpret_cast<Fn>(symbol(name));
  }

  // The name it was opened by (one of the candidates).
  const std::string& path() const { return path_; }

 private:
  DynamicLibrary() = default;
  void* handle_ = nullptr;
  std::string path_;
};

enum class CudaLib { Driver, Nvrtc, Cudnn, CublasLt };
const char* cuda_lib_name(CudaLib which);  // "CUDA driver (libcuda)", ...
// The names load_cuda_library tries, in order (depends on $CUDA_HOME).
std::vector<std::string> cuda_library_candidates(CudaLib which);
// Loaded once per process, thread-safe; a failed load throws and is retried on the next call.
const DynamicLibrary& load_cuda_library(CudaLib which);

}  // namespace flow::runtime
