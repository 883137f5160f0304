// Note: moving tensors between devices. A copy is always of a contiguous tensor: a strided one is
// first made contiguous on its own device by a generated kernel, then its bytes move in one copy.
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

}  // namespace flow::jit
