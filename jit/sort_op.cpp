#include "jit/sort_op.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <utility>

#include "dsl/interpreter.h"
#include "runtime/cuda_stream.h"
#include "runtime/parallel.h"
#include "runtime/sort_kernel.h"

namespace flow::jit {

namespace rc = runtime::cuda;

namespace {

rc::SortShape sort_shape(const LibraryStep& step, const Tensor& x) {
  rc::SortShape s;
  const int64_t dim = dsl::attr_int(step.attrs, "dim", "argsort");
  s.k = dsl::attr_int(step.attrs, "k", "argsort");
  s.descending = dsl::attr_bool(step.attrs, "descending", "argsort");
  s.len = x.sizes.empty() ? 1 : x.sizes[static_cast<size_t>(dim)];
  s.outer = 1;
  s.inner = 1;
  for (size_t d = 0; d < x.sizes.size(); ++d) {
    if (static_cast<int64_t>(d) < dim) s.outer *= x.sizes[d];
    if (static_cast<int64_t>(d) > dim) s.inner *= x.sizes[d];
  }
  return s;
}

// The order of dsl/ops/sort.cpp on (value, position) pairs.
template <class K>
bool sorts_before(const std::pair<K, int64_t>& a, const std::pair<K, int64_t>& b, bool descending) {
  const bool a_nan = a.first != a.first, b_nan = b.first != b.first;  // NOLINT: NaN test for any K
  if (a_nan || b_nan) return a_nan && b_nan ? a.second < b.second : (descending ? a_nan : b_nan);
  if (a.first != b.first) return descending ? a.first > b.first : a.first < b.first;
  return a.second < b.second;
}

template <class K, class Load>
void sort_lines_cpu(const rc::SortShape& s, const Load& load, int64_t* out) {
  runtime::parallel_for(s.outer * s.inner, [&](int64_t begin, int64_t end) {
    std::vector<std::pair<K, int64_t>> items(static_cast<size_t>(s.len));
    auto before = [&](const std::pair<K, int64_t>& a, const std::pair<K, int64_t>& b) {
      return sorts_before(a, b, s.descending);
    };
    for (int64_t line = begin; line < end; ++line) {
      const int64_t o = line / s.inner, i = line % s.inner;
      for (int64_t p = 0; p < s.len; ++p) items[static_cast<size_t>(p)] = {load((o * s.len + p) * s.inner + i), p};
      if (s.k < s.len) {
        std::partial_sort(items.begin(), items.begin() + s.k, items.end(), before);
      } else {
        std::sort(items.begin(), items.end(), before);
      }
      for (int64_t j = 0; j < s.k; ++j) out[(o * s.k + j) * s.inner + i] = items[static_cast<size_t>(j)].second;
    }
  });
}

void run_cpu(const rc::SortShape& s, const Tensor& x, int64_t* out) {
  const void* base = x.data();
  switch (x.dtype) {
    case dsl::DType::Float32: {
      const auto* p = static_cast<const float*>(base);
      return sort_lines_cpu<float>(
          s, [p](int64_t e) { return p[e]; }, out);
    }
    case dsl::DType::Float64: {
      const auto* p = static_cast<const double*>(base);
      return sort_lines_cpu<double>(
          s, [p](int64_t e) { return p[e]; }, out);
    }
    case dsl::DType::Float16: {
      const auto* p = static_cast<const uint16_t*>(base);
      return sort_lines_cpu<float>(
          s, [p](int64_t e) { return dsl::half_bits_to_float(p[e]); }, out);
    }
    case dsl::DType::BFloat16: {
      const auto* p = static_cast<const uint16_t*>(base);
      return sort_lines_cpu<float>(
          s, [p](int64_t e) { return dsl::bf16_bits_to_float(p[e]); }, out);
    }
    case dsl::DType::Int32: {
      const auto* p = static_cast<const int32_t*>(base);
      return sort_lines_cpu<int64_t>(
          s, [p](int64_t e) { return static_cast<int64_t>(p[e]); }, out);
    }
    case dsl::DType::Int64: {
      const auto* p = static_cast<const int64_t*>(base);
      return sort_lines_cpu<int64_t>(
          s, [p](int64_t e) { return p[e]; }, out);
    }
    case dsl::DType::Bool: {
      const auto* p = static_cast<const uint8_t*>(base);
      return sort_lines_cpu<int64_t>(
          s, [p](int64_t e) { return static_cast<int64_t>(p[e] != 0); }, out);
    }
  }
  throw std::logic_error("argsort: unknown dtype");
}

rc::SortKeyType sort_key_type(dsl::DType t) {
  switch (t) {
    case dsl::DType::Float32:
      return rc::SortKeyType::Float32;
    case dsl::DType::Float16:
      return rc::SortKeyType::Float16;
    case dsl::DType::BFloat16:
      return rc::SortKeyType::BFloat16;
    case dsl::DType::Float64:
      return rc::SortKeyType::Float64;
    case dsl::DType::Int32:
      return rc::SortKeyType::Int32;
    case dsl::DType::Int64:
      return rc::SortKeyType::Int64;
    case dsl::DType::Bool:
      return rc::SortKeyType::Bool;
  }
  throw std::logic_error("argsort: unknown dtype");
}

}  // namespace

void run_sort_step(const LibraryStep& step, const std::vector<const Tensor*>& values) {
  const Tensor& out = bound_value(values, step.output);
  HeldTensors held;
  const Tensor& x = held.contiguous(bound_value(values, step.operands.at(0)));
  const rc::SortShape s = sort_shape(step, x);
  auto* out_data = static_cast<int64_t*>(out.data());
  if (out.device() != runtime::DeviceType::CUDA) return run_cpu(s, x, out_data);
  const rc::SortKeyType type = sort_key_type(x.dtype);
  const int64_t scratch_elements = rc::plan_sort(type, s, 1).scratch_elements;
  int32_t* scratch = nullptr;
  if (scratch_elements > 0) {
    scratch = static_cast<int32_t*>(
        held.keep(Tensor::empty({scratch_elements}, dsl::DType::Int32, runtime::DeviceType::CUDA)).data());
  }
  rc::argsort_lines(type, x.data(), out_data, scratch, s, rc::current_stream());
}

}  // namespace flow::jit
