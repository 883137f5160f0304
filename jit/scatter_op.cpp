#include "jit/scatter_op.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "dsl/graph.h"
#include "runtime/cuda_driver.h"
#include "runtime/cuda_stream.h"
#include "runtime/parallel.h"
#include "runtime/scatter_kernel.h"

namespace flow::jit {

namespace rc = runtime::cuda;

namespace {

rc::ScatterReduce reduce_of(const std::string& r) {
  if (r == "none") return rc::ScatterReduce::None;
  if (r == "sum") return rc::ScatterReduce::Sum;
  if (r == "prod") return rc::ScatterReduce::Prod;
  if (r == "amax") return rc::ScatterReduce::Amax;
  if (r == "amin") return rc::ScatterReduce::Amin;
  throw std::logic_error("scatter: unknown reduce " + r);
}

// Contiguous strides of `sizes` (a 0-dim shape counts as [1]).
std::vector<int64_t> contiguous_strides(const dsl::Shape& sizes, size_t rank) {
  std::vector<int64_t> st(rank, 1);
  for (size_t d = rank; d-- > 1;) st[d - 1] = st[d] * (sizes.empty() ? 1 : sizes[d]);
  return st;
}

rc::ScatterShape scatter_shape(const LibraryStep& step, const Tensor& out, const Tensor& index, const Tensor& src) {
  rc::ScatterShape s;
  const size_t rank = std::max<size_t>(index.sizes.size(), 1);
  if (rank > static_cast<size_t>(rc::kScatterMaxRank))
    throw dsl::OpError(dsl::OpError::Kind::NotImplemented,
                       "flow: scatter supports up to " + std::to_string(rc::kScatterMaxRank) + " dims");
  s.rank = static_cast<int>(rank);
  s.dim = static_cast<int>(dsl::attr_int(step.attrs, "dim", "scatter"));
  const std::vector<int64_t> src_st = contiguous_strides(src.sizes, rank);
  const std::vector<int64_t> out_st = contiguous_strides(out.sizes, rank);
  for (size_t d = 0; d < rank; ++d) {
    s.sizes[d] = index.sizes.empty() ? 1 : index.sizes[d];
    s.src_strides[d] = src_st[d];
    s.out_strides[d] = out_st[d];
  }
  s.out_dim_size = out.sizes.empty() ? 1 : out.sizes[static_cast<size_t>(s.dim)];
  s.reduce = reduce_of(dsl::attr_str(step.attrs, "reduce", "scatter"));
  s.include_self = dsl::attr_bool(step.attrs, "include_self", "scatter");
  return s;
}

// ---- CPU ------------------------------------------------------------------------------------------

template <class T>
T identity_of(rc::ScatterReduce r) {
  if constexpr (std::is_same_v<T, bool>) {
    return r == rc::ScatterReduce::Prod || r == rc::ScatterReduce::Amin;
  } else {
    switch (r) {
      case rc::ScatterReduce::Prod:
        return T{1};
      case rc::ScatterReduce::Amax:
        return std::is_floating_point_v<T> ? -std::numeric_limits<T>::infinity() : std::numeric_limits<T>::lowest();
      case rc::ScatterReduce::Amin:
        return std::is_floating_point_v<T> ? std::numeric_limits<T>::infinity() : std::numeric_limits<T>::max();
      default:
        return T{0};
    }
  }
}

template <class T>
T combine(T a, T b, rc::ScatterReduce r) {
  if constexpr (std::is_same_v<T, bool>) {
    switch (r) {
      case rc::ScatterReduce::Sum:
      case rc::ScatterReduce::Amax:
        return a || b;
      case rc::ScatterReduce::Prod:
      case rc::ScatterReduce::Amin:
        return a && b;
      default:
        return b;
    }
  } else {
    using U = std::make_unsigned_t<std::conditional_t<std::is_integral_v<T>, T, int>>;
    switch (r) {
      case rc::ScatterReduce::Sum:
        if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));  // wraps
        return a + b;
      case rc::ScatterReduce::Prod:
        if constexpr (std::is_integral_v<T>) return static_cast<T>(static_cast<U>(a) * static_cast<U>(b));
        return a * b;
      case rc::ScatterReduce::Amax:
      case rc::ScatterReduce::Amin:
        if constexpr (std::is_floating_point_v<T>) {
          if (std::isnan(a)) return a;
          if (std::isnan(b)) return b;
        }
        return r == rc::ScatterReduce::Amax ? std::max(a, b) : std::min(a, b);
      default:
        return b;
    }
  }
}

template <class T>
void scatter_cpu(const rc::ScatterShape& s, T* out, const int64_t* index, const T* src) {
  int64_t count = 1, inner = 1;
  for (int d = 0; d < s.rank; ++d) {
    count *= s.sizes[d];
    if (d > s.dim) inner *= s.sizes[d];
  }
  for (int64_t e = 0; e < count; ++e) {
    const int64_t v = index[e];
    if (v < 0 || v >= s.out_dim_size)
      throw dsl::OpError(dsl::OpError::Kind::Value, "index " + std::to_string(v) + " is out of bounds for dimension " +
                                                        std::to_string(s.dim) + " with size " +
                                                        std::to_string(s.out_dim_size));
  }
  const int64_t n = s.sizes[s.dim];
  const int64_t lines = n == 0 ? 0 : count / n;
  const rc::ScatterReduce r = s.reduce;
  const bool reset = !s.include_self && r != rc::ScatterReduce::None;
  runtime::parallel_for(lines, [&](int64_t begin, int64_t end) {
    for (int64_t line = begin; line < end; ++line) {
      // The line's offsets with coordinate `dim` at 0: decompose (o, i) over the other dims.
      int64_t rest = line, out_base = 0, src_base = 0;
      for (int d = s.rank - 1; d >= 0; --d) {
        if (d == s.dim) continue;
        const int64_t c = rest % s.sizes[d];
        rest /= s.sizes[d];
        out_base += c * s.out_strides[d];
        src_base += c * s.src_strides[d];
      }
      const int64_t first = (line / inner) * n * inner + line % inner;
      const int64_t out_step = s.out_strides[s.dim], src_step = s.src_strides[s.dim];
      if (reset)
        for (int64_t j = 0; j < n; ++j) out[out_base + index[first + j * inner] * out_step] = identity_of<T>(r);
      for (int64_t j = 0; j < n; ++j) {
        T& o = out[out_base + index[first + j * inner] * out_step];
        o = combine(o, src[src_base + j * src_step], r);
      }
    }
  });
}

rc::FixedKernelType kernel_type(dsl::DType t) {
  switch (t) {
    case dsl::DType::Float32:
      return rc::FixedKernelType::Float32;
    case dsl::DType::Float64:
      return rc::FixedKernelType::Float64;
    case dsl::DType::Int32:
      return rc::FixedKernelType::Int32;
    case dsl::DType::Int64:
      return rc::FixedKernelType::Int64;
    case dsl::DType::Bool:
      return rc::FixedKernelType::Bool;
    case dsl::DType::Float16:
    case dsl::DType::BFloat16:
      break;
  }
  throw std::logic_error("scatter: half-precision operands reach the library call");
}

}  // namespace

void run_scatter_step(const LibraryStep& step, const std::vector<const Tensor*>& values) {
  const Tensor& out = bound_value(values, step.output);
  HeldTensors held;
  const Tensor& self = held.contiguous(bound_value(values, step.operands.at(0)));
  const Tensor& index = held.contiguous(bound_value(values, step.operands.at(1)));
  const Tensor& src = held.contiguous(bound_value(values, step.operands.at(2)));
  const rc::ScatterShape s = scatter_shape(step, out, index, src);
  const size_t bytes = static_cast<size_t>(out.numel()) * dsl::dtype_size(out.dtype);
  const auto* idx = static_cast<const int64_t*>(index.data());
  if (out.device() == runtime::DeviceType::CUDA) {
    const rc::Stream stream = rc::current_stream();
    if (bytes > 0) rc::driver::memcpy_dtod(out.data(), self.data(), bytes, stream);  // stream-ordered: capturable
    return rc::scatter(kernel_type(out.dtype), out.data(), idx, src.data(), s, stream);
  }
  std::memcpy(out.data(), self.data(), bytes);
  switch (out.dtype) {
    case dsl::DType::Float32:
      return scatter_cpu(s, static_cast<float*>(out.data()), idx, static_cast<const float*>(src.data()));
    case dsl::DType::Float64:
      return scatter_cpu(s, static_cast<double*>(out.data()), idx, static_cast<const double*>(src.data()));
    case dsl::DType::Int32:
      return scatter_cpu(s, static_cast<int32_t*>(out.data()), idx, static_cast<const int32_t*>(src.data()));
    case dsl::DType::Int64:
      return scatter_cpu(s, static_cast<int64_t*>(out.data()), idx, static_cast<const int64_t*>(src.data()));
    case dsl::DType::Bool:
      return scatter_cpu(s, static_cast<bool*>(out.data()), idx, static_cast<const bool*>(src.data()));
    case dsl::DType::Float16:
    case dsl::DType::BFloat16:
      break;
  }
  throw std::logic_error("scatter: half-precision operands reach the library call");
}

}  // namespace flow::jit
