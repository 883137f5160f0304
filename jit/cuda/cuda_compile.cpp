#include "jit/cuda/cuda_compile.h"

#include <utility>

#include "dsl/serialize.h"
#include "jit/cuda/embedded_helpers.h"
#include "runtime/nvrtc.h"

namespace flow::jit::cuda {

const std::vector<std::string>& cuda_compile_options() {
  static const std::vector<std::string> options = {"-std=c++17", "--fmad=true", "--ftz=false", "--prec-div=true",
                                                   "--prec-sqrt=true"};
  return options;
}

CudaCompiled cuda_compile_source(const std::string& name, const std::string& source, const std::string& arch) {
  CudaCompiled out;
  out.kernel.name = name;
  out.kernel.source = source;
  out.arch = arch;
  runtime::NvrtcResult r;
  try {
    r = runtime::nvrtc_compile(source, name, arch, cuda_compile_options(), embedded_helpers());
  } catch (const runtime::NvrtcError& e) {
    throw runtime::NvrtcError("cuda_compile: kernel '" + name + "' for " + arch + ": " + e.what(), e.log(),
                              e.source_path());
  }
  out.ptx = std::move(r.ptx);
  out.cubin = std::move(r.cubin);
  out.log = std::move(r.log);
  return out;
}

CudaCompiled cuda_compile(const dsl::LoweredFunc& f, const std::string& arch) {
  CudaSource printed = print_cuda_source(f);
  CudaCompiled out = cuda_compile_source(printed.name, printed.source, arch);
  out.kernel = std::move(printed);
  return out;
}

std::string cuda_compiler_id() {
  std::string id = runtime::nvrtc_version() + ";";
  for (size_t i = 0; i < cuda_compile_options().size(); ++i) id += (i ? " " : "") + cuda_compile_options()[i];
  std::string helpers;
  for (const auto& [file, contents] : embedded_helpers()) {
    helpers += std::to_string(file.size()) + ":" + file + std::to_string(contents.size()) + ":" + contents;
  }
  return id + ";helpers-xxh3=" + dsl::xxh3_128(helpers).hex();
}

}  // namespace flow::jit::cuda
