#include "jit/tensor.h"

namespace flow::jit {

std::vector<int64_t> contiguous_strides_of(const dsl::Shape& sizes) {
  std::vector<int64_t> st(sizes.size(), 1);
  int64_t acc = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    st[i] = acc;
    acc *= sizes[i] > 0 ? sizes[i] : 1;
  }
  return st;
}

Tensor Tensor::empty(const dsl::Shape& sizes, dsl::DType dtype, runtime::DeviceType device) {
  Tensor t;
  t.sizes = sizes;
  t.strides = contiguous_strides_of(sizes);
  t.dtype = dtype;
  t.storage = runtime::Buffer::allocate(static_cast<size_t>(dsl::numel(sizes)) * dsl::dtype_size(dtype), device);
  return t;
}

bool Tensor::is_contiguous() const {
  int64_t expected = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    if (sizes[i] == 1) continue;
    if (strides[i] != expected) return false;
    expected *= sizes[i];
  }
  return true;
}

void* Tensor::data() const {
  return static_cast<char*>(storage->data()) + offset * dsl::dtype_size(dtype);
}

}  // namespace flow::jit
