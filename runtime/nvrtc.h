// Note: NVRTC (CUDA C++ -> PTX/cubin at run time) through dlopen, so no CUDA library is linked and
// the compiler runs on machines without a GPU. One compile for a real architecture ("sm_90") yields
// both the cubin and the PTX (NVRTC keeps the PTX it generated on the way); a virtual architecture
// ("compute_90") yields PTX only. On failure the source is saved to disk for inspection and an
// NvrtcError carries the NVRTC log and that path. Thread-safe: each call owns its nvrtcProgram.
#pragma once
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace flow::runtime {

struct NvrtcResult {
  std::string ptx;    // always filled on success
  std::string cubin;  // empty when `arch` is a virtual architecture (compute_XX)
  std::string log;    // the compiler's log (warnings), possibly empty
};

class NvrtcError : public std::runtime_error {
 public:
  NvrtcError(const std::string& what, std::string log, std::string source_path)
      : std::runtime_error(what), log_(std::move(log)), source_path_(std::move(source_path)) {}
  const std::string& log() const { return log_; }
  // Where the failing source was saved; empty if it could not be written.
  const std::string& source_path() const { return source_path_; }

 private:
  std::string log_;
  std::string source_path_;
};

// Compiles `source` (a translation unit named `name`, used in diagnostics and the dump file name) for
// `arch` ("sm_90", "sm_90a", or "compute_90" for PTX only). `extra_options` are passed to NVRTC
// verbatim after the architecture flag. `headers` are (include name, contents) pairs that the source
// may #include by that name. Throws NvrtcError on a compile error (what() holds the log and the path
// of the saved source: $FLOW_DUMP_DIR/flow_nvrtc_<name>_<pid>.cu, or the same in the system temp
// directory), std::runtime_error if NVRTC cannot be loaded or fails otherwise.
NvrtcResult nvrtc_compile(const std::string& source, const std::string& name, const std::string& arch,
                          const std::vector<std::string>& extra_options,
                          const std::vector<std::pair<std::string, std::string>>& headers);

// "nvrtc-<major>.<minor>", e.g. "nvrtc-13.0" (part of the kernel-cache compiler identity).
// Throws std::runtime_error if NVRTC cannot be loaded.
std::string nvrtc_version();

}  // namespace flow::runtime
