#include "jit/sort_op.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <type_traits>
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

// Unsigned keys whose ascending order is the order of dsl/ops/sort.cpp, ties included: floats by
// their IEEE bits made monotonic (-0 taken as +0, every NaN as one key above +inf), ints with the
// sign bit flipped; descending inverts every key. Sorting (key, position) pairs by key then
// position, or stably by key, is then the op's order.
// Branch-free (the key loops vectorize): flip = ~0 for descending, else 0.
inline uint32_t sort_key(float f, uint32_t flip) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint32_t mag = u & 0x7FFFFFFFu;
  u = mag == 0 ? 0 : u;  // -0 == +0
  const uint32_t k = u ^ (static_cast<uint32_t>(static_cast<int32_t>(u) >> 31) | 0x80000000u);
  return (mag > 0x7F800000u ? 0xFFFFFFFFu : k) ^ flip;  // NaN above +inf
}
inline uint64_t sort_key(double f, uint64_t flip) {
  uint64_t u;
  std::memcpy(&u, &f, 8);
  const uint64_t mag = u & ~(uint64_t{1} << 63);
  u = mag == 0 ? 0 : u;
  const uint64_t k = u ^ (static_cast<uint64_t>(static_cast<int64_t>(u) >> 63) | (uint64_t{1} << 63));
  return (mag > 0x7FF0000000000000ull ? ~uint64_t{0} : k) ^ flip;
}
inline uint32_t sort_key(int32_t v, uint32_t flip) {
  return (static_cast<uint32_t>(v) ^ 0x80000000u) ^ flip;
}
inline uint64_t sort_key(int64_t v, uint64_t flip) {
  return (static_cast<uint64_t>(v) ^ (uint64_t{1} << 63)) ^ flip;
}

// Sorts `items` (key, position) stably by key: an LSD radix sort, one pass per key byte, a pass
// skipped when every key has the same byte there. O(n) per byte, against n log n comparisons.
template <class U>
void radix_sort(std::vector<std::pair<U, int64_t>>& items, std::vector<std::pair<U, int64_t>>& tmp) {
  const size_t n = items.size();
  tmp.resize(n);
  std::array<size_t, 256> count{};
  for (size_t shift = 0; shift < 8 * sizeof(U); shift += 8) {
    count.fill(0);
    for (const auto& it : items) ++count[(it.first >> shift) & 0xFF];
    if (std::find(count.begin(), count.end(), n) != count.end()) continue;  // one bucket: nothing moves
    size_t sum = 0;
    for (size_t& c : count) {
      const size_t here = c;
      c = sum;
      sum += here;
    }
    for (const auto& it : items) tmp[count[(it.first >> shift) & 0xFF]++] = it;
    items.swap(tmp);
  }
}

// The first k of a line by (key, position), for k much smaller than the line (topk): one pass
// keeping the best k seen in a sorted buffer. Positions arrive in increasing order, so a key equal
// to the buffer's last never enters (it would come after it) and ties keep their positions.
template <class U>
void select_first_k(const std::vector<U>& keys, int64_t k, std::vector<std::pair<U, int64_t>>& best) {
  const auto by_key = [](U v, const std::pair<U, int64_t>& b) { return v < b.first; };
  best.clear();
  const auto len = static_cast<int64_t>(keys.size());
  int64_t p = 0;
  for (; p < len && static_cast<int64_t>(best.size()) < k; ++p) {
    const U key = keys[static_cast<size_t>(p)];
    best.insert(std::upper_bound(best.begin(), best.end(), key, by_key), {key, p});
  }
  U worst = best.empty() ? U{0} : best.back().first;
  for (; p < len; ++p) {
    const U key = keys[static_cast<size_t>(p)];
    if (key >= worst) continue;  // the common case: one compare
    best.pop_back();
    best.insert(std::upper_bound(best.begin(), best.end(), key, by_key), {key, p});
    worst = best.back().first;
  }
}

// Each line: the first k of its (key, position) pairs. Whole lines by radix sort (stable: ties keep
// their positions); a few (k <= 64 and under 1/16 of the line) by one selecting pass; other partial
// ones by std::partial_sort on (key, position).
template <class T, class Load>
void sort_lines_cpu(const rc::SortShape& s, const Load& load, int64_t* out) {
  using U = std::conditional_t<sizeof(T) == 8, uint64_t, uint32_t>;  // sort_key(T, U)
  const U flip = s.descending ? static_cast<U>(~U{0}) : U{0};
  const bool partial = s.k * 16 < s.len;
  const bool select = partial && s.k <= 64;
  runtime::parallel_for(s.outer * s.inner, [&](int64_t begin, int64_t end) {
    std::vector<U> keys(static_cast<size_t>(s.len));
    std::vector<std::pair<U, int64_t>> items(select ? 0 : static_cast<size_t>(s.len)), tmp;
    const int64_t len = s.len, inner = s.inner, k = s.k;
    for (int64_t line = begin; line < end; ++line) {
      const int64_t o = line / inner, i = line % inner;
      const int64_t first = o * len * inner + i;
      for (int64_t p = 0; p < len; ++p) keys[static_cast<size_t>(p)] = sort_key(load(first + p * inner), flip);
      if (select) {
        select_first_k(keys, k, tmp);
        for (int64_t j = 0; j < k; ++j) out[(o * k + j) * inner + i] = tmp[static_cast<size_t>(j)].second;
        continue;
      }
      for (int64_t p = 0; p < len; ++p) items[static_cast<size_t>(p)] = {keys[static_cast<size_t>(p)], p};
      if (partial) {
        std::partial_sort(items.begin(), items.begin() + k, items.end());  // pairs: key, then position
      } else if (len < 64) {
        std::sort(items.begin(), items.end());
      } else {
        radix_sort(items, tmp);
      }
      for (int64_t j = 0; j < k; ++j) out[(o * k + j) * inner + i] = items[static_cast<size_t>(j)].second;
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
      return sort_lines_cpu<int32_t>(
          s, [p](int64_t e) { return p[e]; }, out);
    }
    case dsl::DType::Int64: {
      const auto* p = static_cast<const int64_t*>(base);
      return sort_lines_cpu<int64_t>(
          s, [p](int64_t e) { return p[e]; }, out);
    }
    case dsl::DType::Bool: {
      const auto* p = static_cast<const uint8_t*>(base);
      return sort_lines_cpu<int32_t>(
          s, [p](int64_t e) { return static_cast<int32_t>(p[e] != 0); }, out);
    }
    case dsl::DType::UInt8:
    case dsl::DType::Int8:
    case dsl::DType::Int16:
      break;  // widened to int32 by the caller (dsl/ops/sort.cpp)
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
    case dsl::DType::UInt8:
    case dsl::DType::Int8:
    case dsl::DType::Int16:
      break;  // widened to int32 by the caller (dsl/ops/sort.cpp)
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
