#include "jit/embedding_bag_op.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "dsl/graph.h"
#include "dsl/interpreter.h"
#include "dsl/library_reference.h"
#include "runtime/cuda_stream.h"
#include "runtime/embedding_bag_kernel.h"
#include "runtime/parallel.h"

namespace flow::jit {

namespace rc = runtime::cuda;

namespace {

rc::EmbeddingBagShape shape_of(const LibraryStep& step, const Tensor& indices, const Tensor& weight,
                               const Tensor& offsets, bool per_sample_weights) {
  rc::EmbeddingBagShape s;
  const std::string mode = dsl::attr_str(step.attrs, "mode", "embedding_bag");
  s.mode = mode == "sum"    ? rc::EmbeddingBagMode::Sum
           : mode == "mean" ? rc::EmbeddingBagMode::Mean
                            : rc::EmbeddingBagMode::Max;
  s.padding_idx =
      dsl::attr_find(step.attrs, "padding_idx") ? dsl::attr_int(step.attrs, "padding_idx", "embedding_bag") : -1;
  s.bags = offsets.sizes.at(0) - 1;
  s.dim = weight.sizes.at(1);
  s.rows = weight.sizes.at(0);
  s.positions = indices.sizes.at(0);
  s.per_sample_weights = per_sample_weights;
  return s;
}

constexpr int64_t kPrefetchDistance = 16;

// The row loops, compiled for AVX-512, AVX2 and the baseline, picked at load time (the build
// targets the baseline x86-64). Blocks of 16 with a constant trip count: GCC's -O2 cost model
// vectorizes only loops whose count is a multiple of the vector width.
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define FLOW_ROW_LOOP __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define FLOW_ROW_LOOP
#endif
constexpr int64_t kBlock = 16;

#define FLOW_DEFINE_ROW_LOOPS(A)                                                                  \
  FLOW_ROW_LOOP void row_add(A* __restrict a, const A* __restrict w, int64_t n) {                 \
    int64_t c = 0;                                                                                \
    for (; c + kBlock <= n; c += kBlock)                                                          \
      for (int64_t k = 0; k < kBlock; ++k) a[c + k] += w[c + k];                                  \
    for (; c < n; ++c) a[c] += w[c];                                                              \
  }                                                                                               \
  FLOW_ROW_LOOP void row_add_scaled(A* __restrict a, A scale, const A* __restrict w, int64_t n) { \
    int64_t c = 0;                                                                                \
    for (; c + kBlock <= n; c += kBlock)                                                          \
      for (int64_t k = 0; k < kBlock; ++k) a[c + k] += scale * w[c + k];                          \
    for (; c < n; ++c) a[c] += scale * w[c];                                                      \
  }                                                                                               \
  /* torch's order: a value replaces the maximum only when greater (a later NaN never wins) */    \
  FLOW_ROW_LOOP void row_max(A* __restrict a, const A* __restrict w, int64_t n) {                 \
    int64_t c = 0;                                                                                \
    for (; c + kBlock <= n; c += kBlock)                                                          \
      for (int64_t k = 0; k < kBlock; ++k) a[c + k] = w[c + k] > a[c + k] ? w[c + k] : a[c + k];  \
    for (; c < n; ++c) a[c] = w[c] > a[c] ? w[c] : a[c];                                          \
  }
FLOW_DEFINE_ROW_LOOPS(float)
FLOW_DEFINE_ROW_LOOPS(double)
#undef FLOW_DEFINE_ROW_LOOPS

// T: the stored element; A: the accumulator (T itself for float32 and float64, float for the
// half types, whose rows are widened into a scratch row first); load/store convert between them.
template <class T, class A, class Load, class Store>
void embedding_bag_cpu(const rc::EmbeddingBagShape& s, T* out, const int64_t* indices, const T* weight,
                       const int64_t* offsets, const T* psw, Load load, Store store) {
  const int64_t dim = s.dim;
  const int64_t row_bytes = dim * static_cast<int64_t>(sizeof(T));
  // The first position with an index out of range, over all threads (as the serial loop would
  // report it): each thread stops its range there.
  std::atomic<int64_t> bad_position{INT64_MAX};
  runtime::parallel_for(s.bags, [&](int64_t begin, int64_t end) {
    std::vector<A> acc(static_cast<size_t>(dim)), widened;
    if constexpr (!std::is_same_v<T, A>) widened.resize(static_cast<size_t>(dim));
    A* const a = acc.data();
    const auto row = [&](int64_t ix) -> const A* {
      const T* w = weight + ix * dim;
      if constexpr (std::is_same_v<T, A>) {
        return w;
      } else {
        for (int64_t c = 0; c < dim; ++c) widened[static_cast<size_t>(c)] = load(w[c]);
        return widened.data();
      }
    };
    for (int64_t b = begin; b < end; ++b) {
      std::fill(acc.begin(), acc.end(), A(0));
      int64_t counted = 0;
      for (int64_t i = offsets[b]; i < offsets[b + 1]; ++i) {
        // The rows are random reads: ask for the row kPrefetchDistance positions ahead (of this bag
        // or the next ones: the positions are contiguous) while this one is summed.
        if (i + kPrefetchDistance < s.positions) {
          const uint64_t ahead = static_cast<uint64_t>(indices[i + kPrefetchDistance]);
          if (ahead < static_cast<uint64_t>(s.rows)) {
            const char* p = reinterpret_cast<const char*>(weight + static_cast<int64_t>(ahead) * dim);
            for (int64_t byte = 0; byte < row_bytes; byte += 64) __builtin_prefetch(p + byte, 0, 3);
          }
        }
        const int64_t ix = indices[i];
        if (static_cast<uint64_t>(ix) >= static_cast<uint64_t>(s.rows)) {
          int64_t seen = bad_position.load();
          while (i < seen && !bad_position.compare_exchange_weak(seen, i)) {
          }
          return;  // (a later bag of this range cannot hold an earlier position)
        }
        if (ix == s.padding_idx) continue;
        const A* w = row(ix);
        if (s.mode == rc::EmbeddingBagMode::Max) {
          if (counted == 0)
            std::copy(w, w + dim, a);
          else
            row_max(a, w, dim);
        } else if (psw != nullptr) {
          row_add_scaled(a, static_cast<A>(load(psw[i])), w, dim);
        } else {
          row_add(a, w, dim);
        }
        ++counted;
      }
      if (s.mode == rc::EmbeddingBagMode::Mean && counted > 0) {
        const A n = static_cast<A>(counted);
        for (int64_t c = 0; c < dim; ++c) a[c] /= n;
      }
      T* o = out + b * dim;
      for (int64_t c = 0; c < dim; ++c) o[c] = store(a[c]);
    }
  });
  if (const int64_t i = bad_position.load(); i != INT64_MAX) dsl::throw_embedding_bag_index(i, indices[i], s.rows);
}

}  // namespace

void run_embedding_bag_step(const LibraryStep& step, const std::vector<const Tensor*>& values) {
  const Tensor& out = bound_value(values, step.output);
  HeldTensors held;
  const Tensor& indices = held.contiguous(bound_value(values, step.operands.at(0)));
  const Tensor& weight = held.contiguous(bound_value(values, step.operands.at(1)));
  const Tensor& offsets = held.contiguous(bound_value(values, step.operands.at(2)));
  const Tensor* psw = step.operands.size() > 3 ? &held.contiguous(bound_value(values, step.operands.at(3))) : nullptr;
  const rc::EmbeddingBagShape s = shape_of(step, indices, weight, offsets, psw != nullptr);
  const auto* ix = static_cast<const int64_t*>(indices.data());
  const auto* off = static_cast<const int64_t*>(offsets.data());
  if (out.device() == runtime::DeviceType::CUDA)
    return rc::embedding_bag(fixed_kernel_type(out.dtype), out.data(), ix, weight.data(), off,
                             psw ? psw->data() : nullptr, s, rc::current_stream());
  dsl::check_embedding_bag_offsets([off](int64_t b) { return off[b]; }, s.bags, s.positions);
  const auto same = [](auto v) { return v; };
  switch (out.dtype) {
    case dsl::DType::Float32: {
      const auto* p = psw ? static_cast<const float*>(psw->data()) : nullptr;
      return embedding_bag_cpu<float, float>(s, static_cast<float*>(out.data()), ix,
                                             static_cast<const float*>(weight.data()), off, p, same, same);
    }
    case dsl::DType::Float64: {
      const auto* p = psw ? static_cast<const double*>(psw->data()) : nullptr;
      return embedding_bag_cpu<double, double>(s, static_cast<double*>(out.data()), ix,
                                               static_cast<const double*>(weight.data()), off, p, same, same);
    }
    case dsl::DType::Float16: {
      const auto* p = psw ? static_cast<const uint16_t*>(psw->data()) : nullptr;
      return embedding_bag_cpu<uint16_t, float>(
          s, static_cast<uint16_t*>(out.data()), ix, static_cast<const uint16_t*>(weight.data()), off, p,
          [](uint16_t h) { return dsl::half_bits_to_float(h); }, [](float f) { return dsl::float_to_half_bits(f); });
    }
    case dsl::DType::BFloat16: {
      const auto* p = psw ? static_cast<const uint16_t*>(psw->data()) : nullptr;
      return embedding_bag_cpu<uint16_t, float>(
          s, static_cast<uint16_t*>(out.data()), ix, static_cast<const uint16_t*>(weight.data()), off, p,
          [](uint16_t h) { return dsl::bf16_bits_to_float(h); }, [](float f) { return dsl::float_to_bf16_bits(f); });
    }
    default:
      break;
  }
  throw std::logic_error("embedding_bag: a non-floating weight reaches the library call");
}

}  // namespace flow::jit
