// Note: the element types that flow's GPU library calls (runtime/cudnn.h, runtime/cublaslt.h)
// take. runtime/ knows nothing of dsl::DType (DESIGN.md section 2), so the library wrappers have
// their own small enum; jit/ maps between the two. Only the types cuDNN and cuBLASLt run for flow
// are here: float32, and the two 16-bit float types (computed in float32 by both libraries).
#pragma once
#include <cstddef>

namespace flow::runtime::cuda {

enum class DataType { Float32, Float16, BFloat16 };

// "float32", "float16", "bfloat16" (torch's spelling).
inline const char* data_type_name(DataType t) {
  switch (t) {
    case DataType::Float32:
      return "float32";
    case DataType::Float16:
      return "float16";
    case DataType::BFloat16:
      return "bfloat16";
  }
  return "unknown";
}

// Bytes per element.
inline size_t data_type_size(DataType t) {
  return t == DataType::Float32 ? 4 : 2;
}

}  // namespace flow::runtime::cuda
