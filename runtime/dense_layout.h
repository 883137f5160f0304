// Note: whether [N, C, H, W] dims with element strides address one dense NCHW or NHWC block (a
// dim of size 1 may have any stride). One definition for the oneDNN wrapper's choice of the layout
// a convolution reads (runtime/onednn.cpp) and the jit's check of which sources it may pass
// without a copy (jit/library_ops.cpp).
#pragma once
#include <cstdint>
#include <vector>

namespace flow::runtime {

namespace detail {
inline bool stride_is(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides, size_t i, int64_t v) {
  return dims[i] == 1 || strides[i] == v;
}
}  // namespace detail

inline bool dense_nchw(const std::vector<int64_t>& d, const std::vector<int64_t>& s) {
  using detail::stride_is;
  return stride_is(d, s, 3, 1) && stride_is(d, s, 2, d[3]) && stride_is(d, s, 1, d[2] * d[3]) &&
         stride_is(d, s, 0, d[1] * d[2] * d[3]);
}

inline bool dense_nhwc(const std::vector<int64_t>& d, const std::vector<int64_t>& s) {
  using detail::stride_is;
  return stride_is(d, s, 1, 1) && stride_is(d, s, 3, d[1]) && stride_is(d, s, 2, d[1] * d[3]) &&
         stride_is(d, s, 0, d[1] * d[2] * d[3]);
}

}  // namespace flow::runtime
