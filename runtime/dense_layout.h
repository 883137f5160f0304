// Note: whether [N, C, spatial...] dims with element strides address one dense NCHW or NHWC block (a
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

// Dense in the dim order `order`, innermost last.
inline bool dense_in_order(const std::vector<int64_t>& d, const std::vector<int64_t>& s,
                           const std::vector<size_t>& order) {
  int64_t acc = 1;
  for (size_t k = order.size(); k-- > 0;) {
    if (!detail::stride_is(d, s, order[k], acc)) return false;
    acc *= d[order[k]];
  }
  return true;
}
}  // namespace detail

// [N, C, spatial...] (any rank >= 3; NCHW for 4-D, NCDHW for 5-D) stored row-major.
inline bool dense_nchw(const std::vector<int64_t>& d, const std::vector<int64_t>& s) {
  std::vector<size_t> order(d.size());
  for (size_t i = 0; i < d.size(); ++i) order[i] = i;
  return detail::dense_in_order(d, s, order);
}

// [N, C, spatial...] stored channels-last (NHWC for 4-D, NDHWC for 5-D).
inline bool dense_nhwc(const std::vector<int64_t>& d, const std::vector<int64_t>& s) {
  std::vector<size_t> order{0};
  for (size_t i = 2; i < d.size(); ++i) order.push_back(i);
  order.push_back(1);
  return detail::dense_in_order(d, s, order);
}

}  // namespace flow::runtime
