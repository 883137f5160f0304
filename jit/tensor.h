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
// torch's .to(device) (preserve_format): a dense tensor (contiguous, channels-last, transposed)
// keeps its strides, any other is copied contiguous; `t` itself when already there.
Tensor to_device_keeping_layout(const Tensor& t, runtime::DeviceType device);

// Whether `t`'s elements fill one gap-free run of its storage, in some order of its dims (a
// contiguous tensor, a permutation of one, with any size-1 dims): an in-place write into it is one
// copy of that run.
bool is_dense(const Tensor& t);
// Writes `src` (same shape and dtype, any device, any strides) into dense `dst` in place: `src` is
// permuted to `dst`'s memory order, made contiguous on `dst`'s device and copied over the run
// (stream-ordered on a GPU). Throws std::invalid_argument for a mismatch or a `dst` that is not dense.
void write_dense(const Tensor& dst, const Tensor& src);

}  // namespace flow::jit
