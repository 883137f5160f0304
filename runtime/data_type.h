// Note: the element types flow's library calls take (oneDNN, runtime/onednn.h; cuDNN and cuBLASLt,
// runtime/cudnn.h, runtime/cublaslt.h). runtime/ knows nothing of dsl::DType (DESIGN.md section 2),
// so the wrappers share this small enum; jit/ maps dsl types onto it in one place
// (jit/library_ops.h, library_data_type). Only the types the libraries run for flow are here:
// float32, and the two 16-bit float types (accumulated in float32 by every library).
#pragma once
#include <cstddef>

namespace flow::runtime {

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

}  // namespace flow::runtime
