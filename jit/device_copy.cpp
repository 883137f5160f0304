// Note: moving tensors between devices. A copy is always of one run of storage: a contiguous
// tensor's, a dense one's (to_device_keeping_layout), or a strided one first made contiguous on its
// own device by a generated kernel; then its bytes move in one copy.
// In-place writes into a dense tensor (write_dense) are the same: the source is permuted into the
// destination's memory order first, so the bytes line up.
#include <algorithm>
#include <stdexcept>

#include "jit/eager.h"
#include "jit/tensor.h"
#include "runtime/cuda_copy.h"

namespace flow::jit {

Tensor to_device(const Tensor& t, runtime::DeviceType device) {
  if (t.device() == device && t.is_contiguous()) return t;
  const Tensor src = t.is_contiguous() ? t : eager_contiguous(t, t.dtype);
  if (src.device() == device) return src;
  Tensor out = Tensor::empty(src.sizes, src.dtype, device);
  runtime::copy_bytes(out.data(), device, src.data(), src.device(),
                      static_cast<size_t>(src.numel()) * dsl::dtype_size(src.dtype));
  return out;
}

Tensor to_device_keeping_layout(const Tensor& t, runtime::DeviceType device) {
  if (t.device() == device) return t;
  if (t.is_contiguous() || !is_dense(t)) return to_device(t, device);
  // A dense tensor's elements fill one run of storage from its first element (strides are
  // positive): the run moves in one copy and keeps its strides.
  Tensor out = Tensor::empty({t.numel()}, t.dtype, device);
  runtime::copy_bytes(out.data(), device, t.data(), t.device(),
                      static_cast<size_t>(t.numel()) * dsl::dtype_size(t.dtype));
  out.sizes = t.sizes;
  out.strides = t.strides;
  return out;
}

namespace {

// The dims of `t` with more than one element, outermost in memory first (largest stride).
std::vector<size_t> memory_order(const Tensor& t) {
  std::vector<size_t> order;
  for (size_t d = 0; d < t.sizes.size(); ++d)
    if (t.sizes[d] != 1) order.push_back(d);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return t.strides[a] > t.strides[b]; });
  return order;
}

}  // namespace

bool is_dense(const Tensor& t) {
  const std::vector<size_t> order = memory_order(t);
  int64_t expect = 1;
  for (size_t k = order.size(); k-- > 0;) {
    if (t.strides[order[k]] != expect) return false;
    expect *= t.sizes[order[k]];
  }
  return true;
}

void write_dense(const Tensor& dst, const Tensor& src) {
  if (dst.sizes != src.sizes || dst.dtype != src.dtype)
    throw std::invalid_argument("write_dense: the source differs from the destination in shape or dtype");
  if (dst.numel() == 0) return;
  if (!is_dense(dst)) throw std::invalid_argument("write_dense: the destination is not dense");
  // src viewed with its dims in dst's memory order (size-1 dims dropped): its contiguous copy has
  // dst's byte order.
  Tensor ordered = src;
  ordered.sizes.clear();
  ordered.strides.clear();
  for (size_t d : memory_order(dst)) {
    ordered.sizes.push_back(src.sizes[d]);
    ordered.strides.push_back(src.strides[d]);
  }
  const Tensor bytes = to_device(ordered, dst.device());
  runtime::copy_bytes(dst.data(), dst.device(), bytes.data(), bytes.device(),
                      static_cast<size_t>(dst.numel()) * dsl::dtype_size(dst.dtype));
}

}  // namespace flow::jit
