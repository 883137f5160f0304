#include "jit/eager_cat.h"

#include <algorithm>
#include <climits>
#include <cstring>

#include "jit/eager.h"
#include "runtime/cuda_copy.h"
#include "runtime/parallel.h"

namespace flow::jit {

std::optional<Tensor> cat_by_copies(const std::vector<Tensor>& inputs, const dsl::Attrs& attrs) {
  if (inputs.empty()) return std::nullopt;
  const runtime::DeviceType device = inputs.front().device();
  for (const Tensor& t : inputs)
    if (t.device() != device) return std::nullopt;  // the kernel path raises torch's device error
  // The op's type inference: its checks and messages, the promoted dtype and the output shape.
  dsl::Graph g;
  std::vector<int> ids;
  for (const Tensor& t : inputs) ids.push_back(g.add_input({t.sizes, t.dtype}));
  const int out_id = g.add_op("cat", ids, attrs).at(0);
  const dsl::TensorType out_type = g.value(out_id).type;
  const int64_t rank = static_cast<int64_t>(out_type.shape.size());
  int64_t dim = dsl::attr_int(g.node(g.value(out_id).producer).attrs, "dim", "cat");
  if (dim < 0) dim += rank;

  int64_t rows = 1, inner = 1;  // out = [rows, cat dim, inner], contiguous
  for (int64_t d = 0; d < dim; ++d) rows *= out_type.shape[d];
  for (int64_t d = dim + 1; d < rank; ++d) inner *= out_type.shape[d];
  const size_t elem = static_cast<size_t>(dsl::dtype_size(out_type.dtype));
  const int64_t out_row = out_type.shape[dim] * inner;
  const bool gpu = device == runtime::DeviceType::CUDA;
  // cuMemcpy2D's pitches are bounded (the device's maximum pitch is 2^31 - 1 bytes on every
  // current GPU); wider rows take the kernel.
  if (gpu && rows > 1 && static_cast<size_t>(out_row) * elem > static_cast<size_t>(INT_MAX)) return std::nullopt;

  Tensor out = Tensor::empty(out_type.shape, out_type.dtype, device);
  int64_t start = 0;
  for (const Tensor& given : inputs) {
    const int64_t n = given.sizes[dim];
    if (n == 0 || rows == 0 || inner == 0) continue;
    const Tensor in = given.is_contiguous() && given.dtype == out_type.dtype
                          ? given
                          : eager_contiguous(given, out_type.dtype);  // a cast kernel of any size
    const int64_t run = n * inner;
    const char* src = static_cast<const char*>(in.data());
    char* dst = static_cast<char*>(out.data()) + static_cast<size_t>(start * inner) * elem;
    start += n;
    if (gpu) {  // one stream-ordered 2-D copy per input, no kernel
      runtime::cuda::copy_rows_device_to_device(dst, static_cast<size_t>(out_row) * elem, src,
                                                static_cast<size_t>(run) * elem, static_cast<size_t>(run) * elem,
                                                static_cast<size_t>(rows));
      continue;
    }
    // Tasks of at least ~64 KiB; one long row (cat along dim 0) is split across tasks too.
    constexpr int64_t kTaskBytes = 64 << 10;
    const int64_t per_task = std::max<int64_t>(1, kTaskBytes / static_cast<int64_t>(elem));
    const int64_t chunks_per_row = (run + per_task - 1) / per_task;
    runtime::parallel_for(rows * chunks_per_row, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const int64_t r = i / chunks_per_row, c = (i % chunks_per_row) * per_task;
        const int64_t len = std::min(per_task, run - c);
        std::memcpy(dst + static_cast<size_t>(r * out_row + c) * elem, src + static_cast<size_t>(r * run + c) * elem,
                    static_cast<size_t>(len) * elem);
      }
    });
  }
  return out;
}

}  // namespace flow::jit
