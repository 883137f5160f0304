// Note: the runtime tensor: a view (sizes, element strides, element offset, dtype) over shared
// storage. Views share storage and never copy; kernels receive data pointers plus strides, so
// non-contiguous tensors run without a copy.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "dsl/types.h"
#include "runtime/buffer.h"

namespace flow::jit {

struct Tensor {
  std::shared_ptr<runtime::Buffer> storage;
  int64_t offset = 0;  // in elements
  dsl::Shape sizes;
  std::vector<int64_t> strides;  // in elements
  dsl::DType dtype = dsl::DType::Float32;

  // A new contiguous tensor with uninitialized contents.
  static Tensor empty(const dsl::Shape& sizes, dsl::DType dtype, runtime::DeviceType device = runtime::DeviceType::CPU);
  runtime::DeviceType device() const { return storage ? storage->device() : runtime::DeviceType::CPU; }
  int64_t numel() const { return dsl::numel(sizes); }
  bool is_contiguous() const;
  void* data() const;  // storage data + offset * element size
  int64_t dim() const { return static_cast<int64_t>(sizes.size()); }
};

std::vector<int64_t> contiguous_strides_of(const dsl::Shape& sizes);

// A contiguous copy of `t` on `device` (same dtype); `t` itself when already there and contiguous.
Tensor to_device(const Tensor& t, runtime::DeviceType device);

}  // namespace flow::jit
