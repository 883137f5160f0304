// The opaque handles of the emulated libraries (cudnnTensorDescriptor_t, cublasLtMatmulDesc_t, ...):
// each points at an object of the emulation, made by make_handle and deleted by drop_handle.
#pragma once
#include <memory>

namespace flow::test::simt {

template <typename Object, typename Handle>
void make_handle(Handle* out) {
  *out = reinterpret_cast<Handle>(std::make_unique<Object>().release());
}

template <typename Object, typename Handle>
void drop_handle(Handle h) {
  std::unique_ptr<Object> owned(reinterpret_cast<Object*>(h));
}

}  // namespace flow::test::simt
