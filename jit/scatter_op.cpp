#include "jit/scatter_op.h"

#include <algorithm>
#include <atomic>
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

[[noreturn]] void throw_out_of_range(int64_t v, int64_t size, int dim) {
  dsl::throw_index_out_of_bounds(v, size, dim, dsl::OpError::Kind::Value);
}

// The general path: every line (positions differing only along dim) walked in order, the lines in
// parallel (a 1-d scatter is one line: serial, as torch's CPU kernel is).
template <class T, rc::ScatterReduce R>
void scatter_lines(const rc::ScatterShape& s, T* out, const int64_t* index, const T* src) {
  int64_t count = 1, inner = 1;
  for (int d = 0; d < s.rank; ++d) {
    count *= s.sizes[d];
    if (d > s.dim) inner *= s.sizes[d];
  }
  const int64_t n = s.sizes[s.dim];
  const int64_t lines = n == 0 ? 0 : count / n;
  const bool reset = !s.include_self && R != rc::ScatterReduce::None;
  // An out-of-range index stops its line and is reported after the loop (a worker thread cannot
  // throw); the output is then discarded, so what the other lines wrote does not matter. Checked
  // in the loop (a never-taken branch), not in a separate pass over the index.
  const auto size = static_cast<uint64_t>(s.out_dim_size);
  std::atomic<bool> bad{false};
  std::atomic<int64_t> bad_value{0};
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
      const auto valid = [&](int64_t v) {
        if (static_cast<uint64_t>(v) < size) return true;
        bad_value.store(v);
        bad.store(true);
        return false;
      };
      bool line_ok = true;
      if (reset) {
        for (int64_t j = 0; j < n && line_ok; ++j) {
          const int64_t v = index[first + j * inner];
          if ((line_ok = valid(v))) out[out_base + v * out_step] = identity_of<T>(R);
        }
      }
      for (int64_t j = 0; j < n && line_ok; ++j) {
        const int64_t v = index[first + j * inner];
        if (!(line_ok = valid(v))) break;
        T& o = out[out_base + v * out_step];
        o = combine(o, src[src_base + j * src_step], R);
      }
    }
  });
  if (bad.load()) throw_out_of_range(bad_value.load(), s.out_dim_size, s.dim);
}

// Row mode: the index is the same across the dims after `dim` (index_add, index_put, embedding_bag
// write whole rows), which span as many elements in out and src as in the index. Each position
// (o, j) then combines a contiguous row of `inner` elements, in order of j (deterministic), and the
// inner loop vectorizes. `index` is read through its own strides (its broadcast is never
// materialized).
struct RowShape {
  std::vector<int64_t> outer_sizes, index_outer_strides, out_outer_strides, src_outer_strides;
  int64_t n = 0, inner = 1, index_step = 0, out_step = 0, src_step = 0, out_dim_size = 0;
  int dim = 0;
  bool include_self = true;
};

template <class T, rc::ScatterReduce R>
void scatter_rows(const RowShape& rs, T* out, const int64_t* index, const T* src) {
  int64_t outer = 1;
  for (int64_t v : rs.outer_sizes) outer *= v;
  const auto offsets = [&](int64_t o, int64_t& io, int64_t& oo, int64_t& so) {
    io = oo = so = 0;
    for (size_t d = rs.outer_sizes.size(); d-- > 0;) {
      const int64_t c = o % rs.outer_sizes[d];
      o /= rs.outer_sizes[d];
      io += c * rs.index_outer_strides[d];
      oo += c * rs.out_outer_strides[d];
      so += c * rs.src_outer_strides[d];
    }
  };
  for (int64_t o = 0; o < outer; ++o) {  // the range check, before any thread writes
    int64_t io, oo, so;
    offsets(o, io, oo, so);
    for (int64_t j = 0; j < rs.n; ++j) {
      const int64_t v = index[io + j * rs.index_step];
      if (v < 0 || v >= rs.out_dim_size) throw_out_of_range(v, rs.out_dim_size, rs.dim);
    }
  }
  // Owner computes: the destination rows are cut into parts, one task each; a task scans every
  // position and combines the rows that land in its part (whole rows: one thread touches a row, so
  // rows stay in its cache, and the inner loop vectorizes).
  const bool reset = !rs.include_self && R != rc::ScatterReduce::None;
  const int64_t parts = std::max<int64_t>(1, std::min<int64_t>(rs.out_dim_size, runtime::num_threads()));
  runtime::parallel_for(parts, [&](int64_t begin, int64_t end) {
    const int64_t lo = begin * rs.out_dim_size / parts, hi = end * rs.out_dim_size / parts;
    for (int64_t o = 0; o < outer; ++o) {
      int64_t io, oo, so;
      offsets(o, io, oo, so);
      if (reset) {
        for (int64_t j = 0; j < rs.n; ++j) {
          const int64_t v = index[io + j * rs.index_step];
          if (v < lo || v >= hi) continue;
          T* row = out + oo + v * rs.out_step;
          for (int64_t c = 0; c < rs.inner; ++c) row[c] = identity_of<T>(R);
        }
      }
      for (int64_t j = 0; j < rs.n; ++j) {
        const int64_t v = index[io + j * rs.index_step];
        if (v < lo || v >= hi) continue;
        T* row = out + oo + v * rs.out_step;
        const T* from = src + so + j * rs.src_step;
        for (int64_t c = 0; c < rs.inner; ++c) row[c] = combine(row[c], from[c], R);
      }
    }
  });
}

// Row mode applies when the index's strides are 0 after `dim`, and the index, out and src have the
// same sizes there (so rows are contiguous in the contiguous out and src).
bool row_shape(const rc::ScatterShape& s, const Tensor& index, const Tensor& out, const Tensor& src, RowShape& rs) {
  const auto rank = static_cast<size_t>(s.rank);
  if (index.sizes.size() != rank || out.sizes.size() != rank || src.sizes.size() != rank) return false;
  const auto d0 = static_cast<size_t>(s.dim);
  for (size_t d = d0 + 1; d < rank; ++d) {
    if (index.strides[d] != 0 && index.sizes[d] != 1) return false;
    if (index.sizes[d] != out.sizes[d] || index.sizes[d] != src.sizes[d]) return false;
    rs.inner *= index.sizes[d];
  }
  if (rs.inner < 8) return false;  // narrow rows: the line path
  for (size_t d = 0; d < d0; ++d) {
    rs.outer_sizes.push_back(index.sizes[d]);
    rs.index_outer_strides.push_back(index.strides[d]);
    rs.out_outer_strides.push_back(s.out_strides[d]);
    rs.src_outer_strides.push_back(s.src_strides[d]);
  }
  rs.n = index.sizes[d0];
  rs.index_step = index.strides[d0];
  rs.out_step = s.out_strides[d0];
  rs.src_step = s.src_strides[d0];
  rs.out_dim_size = s.out_dim_size;
  rs.dim = s.dim;
  rs.include_self = s.include_self;
  return true;
}

template <class T, rc::ScatterReduce R>
void scatter_cpu_as(const rc::ScatterShape& s, const Tensor& index_view, const Tensor& out, const Tensor& src,
                    HeldTensors& held) {
  RowShape rs;
  auto* o = static_cast<T*>(out.data());
  const auto* from = static_cast<const T*>(src.data());
  if (row_shape(s, index_view, out, src, rs))
    return scatter_rows<T, R>(rs, o, static_cast<const int64_t*>(index_view.data()), from);
  const Tensor& index = held.contiguous(index_view);
  scatter_lines<T, R>(s, o, static_cast<const int64_t*>(index.data()), from);
}

template <class T>
void scatter_cpu(const rc::ScatterShape& s, const Tensor& index, const Tensor& out, const Tensor& src,
                 HeldTensors& held) {
  switch (s.reduce) {  // the reduction a compile-time constant of the loops
    case rc::ScatterReduce::None:
      return scatter_cpu_as<T, rc::ScatterReduce::None>(s, index, out, src, held);
    case rc::ScatterReduce::Sum:
      return scatter_cpu_as<T, rc::ScatterReduce::Sum>(s, index, out, src, held);
    case rc::ScatterReduce::Prod:
      return scatter_cpu_as<T, rc::ScatterReduce::Prod>(s, index, out, src, held);
    case rc::ScatterReduce::Amax:
      return scatter_cpu_as<T, rc::ScatterReduce::Amax>(s, index, out, src, held);
    case rc::ScatterReduce::Amin:
      return scatter_cpu_as<T, rc::ScatterReduce::Amin>(s, index, out, src, held);
  }
}

}  // namespace

void run_scatter_step(const LibraryStep& step, const std::vector<const Tensor*>& values) {
  const Tensor& out = bound_value(values, step.output);
  HeldTensors held;
  const Tensor& self = held.contiguous(bound_value(values, step.operands.at(0)));
  const Tensor& index_view = bound_value(values, step.operands.at(1));
  const Tensor& src = held.contiguous(bound_value(values, step.operands.at(2)));
  const rc::ScatterShape s = scatter_shape(step, out, index_view, src);
  const size_t bytes = static_cast<size_t>(out.numel()) * dsl::dtype_size(out.dtype);
  if (out.device() == runtime::DeviceType::CUDA) {
    const Tensor& index = held.contiguous(index_view);
    const rc::Stream stream = rc::current_stream();
    if (bytes > 0) rc::driver::memcpy_dtod(out.data(), self.data(), bytes, stream);  // stream-ordered: capturable
    return rc::scatter(fixed_kernel_type(out.dtype), out.data(), static_cast<const int64_t*>(index.data()), src.data(),
                       s, stream);
  }
  std::memcpy(out.data(), self.data(), bytes);
  switch (out.dtype) {
    case dsl::DType::Float32:
      return scatter_cpu<float>(s, index_view, out, src, held);
    case dsl::DType::Float64:
      return scatter_cpu<double>(s, index_view, out, src, held);
    case dsl::DType::Int32:
      return scatter_cpu<int32_t>(s, index_view, out, src, held);
    case dsl::DType::Int64:
      return scatter_cpu<int64_t>(s, index_view, out, src, held);
    case dsl::DType::Bool:
      return scatter_cpu<bool>(s, index_view, out, src, held);
    case dsl::DType::Float16:
    case dsl::DType::BFloat16:
    case dsl::DType::UInt8:
    case dsl::DType::Int8:
    case dsl::DType::Int16:
      break;
  }
  throw std::logic_error("scatter: half-precision or small integer operands reach the library call");
}

}  // namespace flow::jit
