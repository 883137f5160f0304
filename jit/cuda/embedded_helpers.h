// Note: the device helper headers (jit/cuda/*.cuh), embedded into the library at build time by
// jit/cuda/embed.cmake (the definition is generated into the build directory). Generated kernels
// #include them by file name; cuda_compile hands them to NVRTC as in-memory headers.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace flow::jit::cuda {

// (file name, contents) of every embedded helper, sorted by name; e.g. {"flow_helpers.cuh", ...}.
const std::vector<std::pair<std::string, std::string>>& embedded_helpers();

}  // namespace flow::jit::cuda
