#include "jit/tensor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "runtime/cuda_copy.h"

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
  int64_t signed_bytes = 0;
  if (__builtin_mul_overflow(dsl::numel(sizes), static_cast<int64_t>(dsl::dtype_size(dtype)), &signed_bytes))
    throw std::runtime_error("Storage size calculation overflowed with sizes=" + dsl::shape_str(sizes));
  const auto bytes = static_cast<size_t>(signed_bytes);
  t.storage = runtime::Buffer::allocate(bytes, device);
  // FLOW_POISON_OUTPUTS=1 (tests): fresh tensors start as all-ones bytes (NaN for floats, -1 for
  // ints), so a kernel that leaves an element unwritten fails its comparison.
  static const bool poison = [] {
    const char* e = std::getenv("FLOW_POISON_OUTPUTS");
    return e && *e && *e != '0';
  }();
  if (poison && bytes > 0) {
    if (device == runtime::DeviceType::CPU) {
      std::memset(t.storage->data(), 0xFF, bytes);
    } else {
      runtime::cuda::memset_device(t.storage->data(), 0xFF, bytes);
    }
  }
  return t;
}

bool Tensor::is_contiguous() const {
  // As torch's: an empty tensor is contiguous whatever its strides.
  if (std::find(sizes.begin(), sizes.end(), int64_t{0}) != sizes.end()) return true;
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
