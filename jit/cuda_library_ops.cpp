#include "jit/cuda_library_ops.h"

#include <algorithm>
#include <deque>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>

#include "dsl/op_table.h"
#include "jit/eager.h"
#include "runtime/cublaslt.h"
#include "runtime/cuda_stream.h"
#include "runtime/cudnn.h"
#include "scheduler/library_patterns.h"

namespace flow::jit {

namespace rc = runtime::cuda;
using dsl::Shape;

namespace {

Tensor view_of(const Tensor& t, Shape sizes, std::vector<int64_t> strides) {
  Tensor v = t;
  v.sizes = std::move(sizes);
  v.strides = std::move(strides);
  return v;
}

// ---- epilogue ------------------------------------------------------------------------------------

struct Epilogue {
  const Tensor* bias = nullptr;      // contiguous, one value per output channel / column
  const Tensor* residual = nullptr;  // the output's shape, contiguous
  bool relu = false, gelu_tanh = false;
};

Epilogue epilogue_of(const LibraryStep& step, const std::vector<const Tensor*>& values, const Shape& out,
                     HeldTensors& held) {
  Epilogue e;
  for (const sched::EpilogueStep& s : step.epilogue) {
    switch (s.alg) {
      case sched::PostOpAlg::Relu:
        e.relu = true;
        break;
      case sched::PostOpAlg::GeluTanh:
        e.gelu_tanh = true;
        break;
      case sched::PostOpAlg::Add: {
        const Tensor& t = bound_value(values, s.operand);
        if (t.sizes == out) {
          e.residual = &held.contiguous(t);
        } else {
          const Tensor& c = held.contiguous(t);
          e.bias = &c;
        }
        break;
      }
      default:
        throw std::logic_error(std::string("CUDA library epilogue: unexpected post-op ") +
                               sched::post_op_alg_name(s.alg));
    }
  }
  return e;
}

// ---- matmul / linear: cuBLASLt -------------------------------------------------------------------

// Dims [0, n) of (sizes, strides) as one batch stride: each dim of size > 1 must step by the
// extent of the next inner one (all zero: a broadcast, stride 0). Size-1 dims are skipped.
bool collapse_batch(const Shape& sizes, const std::vector<int64_t>& strides, size_t n, int64_t& stride) {
  stride = 0;
  bool first = true;
  int64_t expect = 0;
  for (size_t d = n; d-- > 0;) {
    if (sizes[d] == 1) continue;
    if (first) {
      stride = strides[d];
      first = false;
    } else if (strides[d] != expect) {
      return false;
    }
    expect = strides[d] * sizes[d];
  }
  return true;
}

// An operand as [batch..., rows, cols] with the output's batch dims (broadcast by stride 0).
struct MatrixOperand {
  const Tensor* t = nullptr;
  int64_t row = 0, col = 0, batch = 0;
};

// `t` viewed as [batch dims of `out_batch`..., rows, cols]; `vec_as_row` says how a 1-D t is read.
Tensor as_batched_matrix(const Tensor& t, const Shape& out_batch, bool vec_as_row) {
  Shape s = t.sizes;
  std::vector<int64_t> st = t.strides;
  if (s.size() == 1) {
    if (vec_as_row) {
      s = {1, s[0]};
      st = {0, st[0]};
    } else {
      s = {s[0], 1};
      st = {st[0], 0};
    }
  }
  const size_t own_batch = s.size() - 2;
  Shape bs(out_batch.size(), 1);
  std::vector<int64_t> bst(out_batch.size(), 0);
  for (size_t i = 0; i < own_batch; ++i) {
    const size_t d = out_batch.size() - own_batch + i;
    bs[d] = out_batch[d];
    bst[d] = s[i] == 1 ? 0 : st[i];
  }
  for (size_t d = 0; d < out_batch.size(); ++d) bs[d] = out_batch[d];
  bs.push_back(s[own_batch]);
  bs.push_back(s[own_batch + 1]);
  bst.push_back(st[own_batch]);
  bst.push_back(st[own_batch + 1]);
  return view_of(t, bs, bst);
}

// Batch stride and matrix strides of a [batch..., r, c] view; copies it contiguous when the batch
// does not collapse or neither matrix stride is 1.
MatrixOperand matrix_operand(const Tensor& v, HeldTensors& held) {
  const size_t nb = v.sizes.size() - 2;
  MatrixOperand m;
  const Tensor* t = &v;
  int64_t bstride = 0;
  const int64_t r = v.sizes[nb], c = v.sizes[nb + 1];
  const int64_t rs = r == 1 ? c : v.strides[nb], cs = c == 1 ? 1 : v.strides[nb + 1];
  // cuBLASLt takes a row-major (unit column stride, rows at least a row apart) or column-major
  // matrix; anything else (overlapping rows as unfold makes, both strides 1) is copied.
  const bool layout_ok = (cs == 1 && rs >= c) || (rs == 1 && cs >= r);
  if (!collapse_batch(v.sizes, v.strides, nb, bstride) || !layout_ok) {
    t = &held.keep(eager_contiguous(v, v.dtype));
    collapse_batch(t->sizes, t->strides, nb, bstride);
    m.t = t;
    m.row = c;
    m.col = 1;
    m.batch = bstride;
    return m;
  }
  m.t = t;
  m.row = rs;
  m.col = cs;
  m.batch = bstride;
  return m;
}

}  // namespace

GemmCall plan_gemm_call(const LibraryStep& step, const std::vector<const Tensor*>& values) {
  GemmCall call;
  HeldTensors& held = call.held;
  const Tensor& out = bound_value(values, step.output);
  const Tensor& a0 = bound_value(values, step.operands.at(0));
  const Tensor& b0 = bound_value(values, step.operands.at(1));
  const bool linear = step.op == "linear";
  // Both as batched matrices over the output's batch dims.
  Tensor a, b;
  Shape batch;
  if (linear) {
    // x [..., K] -> rows; w [N, K] read as B = W^T (strides swapped).
    const Tensor& xc = a0.sizes.size() <= 2 ? a0 : held.contiguous(a0);
    const int64_t k = xc.sizes.back();
    const int64_t rows = dsl::numel(Shape(xc.sizes.begin(), xc.sizes.end() - 1));  // 1 for a vector; K may be 0
    const int64_t row_stride = xc.sizes.size() == 1 ? k : (xc.sizes.size() == 2 ? xc.strides[0] : k);
    a = view_of(xc, {1, rows, k}, {0, row_stride, xc.strides.back()});
    b = view_of(b0, {1, b0.sizes[1], b0.sizes[0]}, {0, b0.strides[1], b0.strides[0]});
    batch = {1};
  } else {
    const size_t ro = out.sizes.size();
    const bool a_vec = a0.sizes.size() == 1, b_vec = b0.sizes.size() == 1;
    // The output's batch dims: all but its matrix dims (a vector operand drops one of them).
    const size_t matrix_dims = (a_vec ? 0 : 1) + (b_vec ? 0 : 1);
    batch.assign(out.sizes.begin(), out.sizes.end() - static_cast<std::ptrdiff_t>(std::min(matrix_dims, ro)));
    a = as_batched_matrix(a0, batch, /*vec_as_row=*/true);
    b = as_batched_matrix(b0, batch, /*vec_as_row=*/false);
  }
  const MatrixOperand ma = matrix_operand(a, held), mb = matrix_operand(b, held);
  const size_t nb = a.sizes.size() - 2;
  rc::cublaslt::MatmulProblem p;
  p.batch = dsl::numel(Shape(a.sizes.begin(), a.sizes.begin() + static_cast<std::ptrdiff_t>(nb)));
  p.m = a.sizes[nb];
  p.k = a.sizes[nb + 1];
  p.n = b.sizes[nb + 1];
  p.in_type = library_data_type(a0.dtype);
  p.out_type = library_data_type(out.dtype);
  p.a_row = ma.row;
  p.a_col = ma.col;
  p.a_batch = ma.batch;
  p.b_row = mb.row;
  p.b_col = mb.col;
  p.b_batch = mb.batch;
  p.out_row = p.n;
  p.out_batch = p.m * p.n;
  const Epilogue e = epilogue_of(step, values, out.sizes, held);
  const Tensor* bias = e.bias;
  if (linear && step.operands.size() > 2) bias = &held.contiguous(bound_value(values, step.operands[2]));
  p.bias = bias != nullptr;
  p.residual = e.residual != nullptr;
  p.activation = e.relu        ? rc::cublaslt::Activation::Relu
                 : e.gelu_tanh ? rc::cublaslt::Activation::GeluTanh
                               : rc::cublaslt::Activation::None;
  call.problem = p;
  call.a = ma.t->data();
  call.b = mb.t->data();
  call.bias = bias ? bias->data() : nullptr;
  call.residual = e.residual ? e.residual->data() : nullptr;
  call.out = out.data();
  return call;
}

// ---- conv2d: cuDNN -------------------------------------------------------------------------------

namespace {

bool dense_as(const Tensor& t, const std::vector<int64_t>& dense) {
  for (size_t d = 0; d < dense.size(); ++d)
    if (t.sizes[d] != 1 && t.strides[d] != dense[d]) return false;
  return true;
}

// The (n, c, h, w)-order strides of a dense [N, H, W, C] buffer (NHWC convolutions are 2-D).
std::vector<int64_t> nhwc_strides(const Shape& s) {
  const std::vector<int64_t> d = contiguous_strides_of({s[0], s[2], s[3], s[1]});
  return {d[0], d[3], d[1], d[2]};
}

// KRSC copies of frozen KCRS weights, per (storage, offset, dtype, sizes, strides) and version: a
// model's filters are permuted once. Bounded: the oldest entries go first.
class FilterCache {
 public:
  Tensor get(const Tensor& w, bool frozen) {
    if (!frozen) return permuted(w);
    const Key key{w.storage->uid(), w.offset, static_cast<int>(w.dtype), w.sizes, w.strides};
    std::lock_guard<std::mutex> lock(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end() && it->second.first == w.storage->version()) return it->second.second;
    Tensor p = permuted(w);
    if (it == entries_.end()) {
      order_.push_back(key);
      if (order_.size() > kMaxEntries) {
        entries_.erase(order_.front());
        order_.pop_front();
      }
    }
    entries_[key] = {w.storage->version(), p};
    return p;
  }

 private:
  static Tensor permuted(const Tensor& w) {
    const Tensor v = view_of(w, {w.sizes[0], w.sizes[2], w.sizes[3], w.sizes[1]},
                             {w.strides[0], w.strides[2], w.strides[3], w.strides[1]});
    return eager_contiguous(v, w.dtype);
  }
  // Large enough that a model's filters are never evicted: a CUDA graph reads them by address.
  static constexpr size_t kMaxEntries = 8192;
  using Key = std::tuple<uint64_t, int64_t, int, Shape, std::vector<int64_t>>;
  std::mutex mu_;
  std::map<Key, std::pair<uint64_t, Tensor>> entries_;
  std::deque<Key> order_;
};

FilterCache& filter_cache() {
  static FilterCache* cache = new FilterCache();  // never destroyed: tensors may outlive statics
  return *cache;
}

// The bias operand and the fused epilogue of a convolution step into call and p.
void plan_conv_epilogue(const LibraryStep& step, const std::vector<const Tensor*>& values, const Tensor& out,
                        rc::cudnn::ConvProblem& p, ConvCall& call) {
  const Epilogue e = epilogue_of(step, values, out.sizes, call.held);
  const Tensor* bias = e.bias;
  if (step.operands.size() > 2) bias = &call.held.contiguous(bound_value(values, step.operands[2]));
  p.bias = bias != nullptr;
  p.residual = e.residual != nullptr;
  p.relu = e.relu;
  call.bias = bias ? bias->data() : nullptr;
  call.z = e.residual ? e.residual->data() : nullptr;
}

// An unbatched [C, spatial...] tensor (rank `spatial` + 1) as [1, C, spatial...]; batched ones as
// they are.
Tensor batched(const Tensor& t, size_t spatial) {
  if (t.sizes.size() != spatial + 1) return t;
  Shape sizes = t.sizes;
  std::vector<int64_t> strides = t.strides;
  sizes.insert(sizes.begin(), 1);
  strides.insert(strides.begin(), dsl::numel(t.sizes));
  return view_of(t, sizes, strides);
}

bool channels_last(const dsl::Attrs& at) {
  const dsl::AttrValue* cl = dsl::attr_find(at, "channels_last");
  return cl && std::get_if<int64_t>(cl) && std::get<int64_t>(*cl) != 0;
}

// A 4-D [N, C, H, W] tensor as its [N, H, W, C] view, and such a view back as [N, C, H, W] dims
// (the same memory either way).
Tensor nhwc_view(const Tensor& x) {
  const Shape& s = x.sizes;
  return view_of(x, {s[0], s[2], s[3], s[1]}, {x.strides[0], x.strides[2], x.strides[3], x.strides[1]});
}
Tensor nchw_view(const Tensor& v) {
  const Shape& s = v.sizes;
  return view_of(v, {s[0], s[3], s[1], s[2]}, {v.strides[0], v.strides[3], v.strides[1], v.strides[2]});
}

// An [N, C, H, W] input dense in the layout cuDNN will read (NHWC or NCHW), copied there first
// when it is not.
Tensor input_in_layout(const Tensor& x, bool nhwc, HeldTensors& held) {
  if (nhwc && !dense_as(x, nhwc_strides(x.sizes))) return nchw_view(held.keep(eager_contiguous(nhwc_view(x), x.dtype)));
  if (!nhwc && !dense_as(x, contiguous_strides_of(x.sizes))) return held.keep(eager_contiguous(x, x.dtype));
  return x;
}

// cuDNN pads both sides of a dim alike. Asymmetric padding (padding='same' with an even reach)
// keeps the smaller side for cuDNN (`pad` becomes it) and writes the rest as zeros around a copy of
// the input, as torch's CUDA convolution does. For an NHWC call the copy pads the [N, H, W, C] view,
// so it is NHWC-dense as a rule; input_in_layout repacks whatever is not (eager pad keeps an
// input's memory order).
Tensor padded_for_cudnn(const Tensor& x, std::vector<int64_t>& pad, const std::vector<int64_t>& end, bool nhwc,
                        HeldTensors& held) {
  if (end == pad) return x;
  std::vector<int64_t> pads;  // torch's order, from the innermost padded dim: [w_lo, w_hi, h_lo, h_hi]
  if (nhwc) pads = {0, 0};    // (channels innermost)
  for (size_t i = pad.size(); i-- > 0;) {
    const int64_t keep = std::min(pad[i], end[i]);
    pads.push_back(pad[i] - keep);
    pads.push_back(end[i] - keep);
    pad[i] = keep;
  }
  const dsl::Attrs attrs{{"pads", pads}, {"value", 0.0}};
  if (!nhwc) return held.keep(eager_op("pad", {x}, attrs).at(0));
  return nchw_view(held.keep(eager_op("pad", {nhwc_view(x)}, attrs).at(0)));
}

// The filter in the layout cuDNN will read: KRSC for NHWC (the tensor-core layout; the same
// permutation of a transposed convolution's [C_in, C_out / g, R, S]), else dense KCRS.
const Tensor& filter_in_layout(const LibraryStep& step, const Tensor& w0, bool nhwc, HeldTensors& held) {
  return nhwc ? held.keep(filter_cache().get(w0, step.weights_frozen)) : held.contiguous(w0);
}

// The output tensor as [N, C, spatial...] dims and strides (a channels-last output is [N, OH, OW, C]).
Tensor output_as_nchw(const Tensor& out, bool nhwc, size_t spatial) {
  return nhwc ? nchw_view(out) : batched(out, spatial);
}

}  // namespace

// conv2d and conv3d, and conv_transpose2d/3d as cuDNN's backward data of the convolution from its
// output's shape to its input's (runtime/cudnn.h, ConvProblem::transposed). Either is described in
// the forward convolution's terms: its input X (n, c, [d,] h, w) is the step's input, or a
// transposed step's output; its output Y (n, k, [out_d,] out_h, out_w) the other. x, y and the
// filter share one layout, the output's: NHWC when the layout pass made the step channels_last (2-D
// only), else NCHW (NCDHW).
ConvCall plan_conv_call(const LibraryStep& step, const std::vector<const Tensor*>& values) {
  ConvCall call;
  HeldTensors& held = call.held;
  const dsl::Attrs& at = step.attrs;
  const bool transposed = dsl::is_transposed_conv(step.op);
  const size_t spatial = dsl::conv_spatial_rank(step.op);
  const Tensor& w0 = bound_value(values, step.operands.at(1));
  if (w0.sizes.size() != spatial + 2)
    throw std::logic_error(step.op + " on CUDA: weights are not " + std::to_string(spatial + 2) + "-D");
  std::vector<int64_t> pad = dsl::attr_ints(at, "padding", step.op);
  const std::vector<int64_t> stride = dsl::attr_ints(at, "stride", step.op);
  const std::vector<int64_t> dil = dsl::attr_ints(at, "dilation", step.op);
  const bool nhwc = channels_last(at);
  if (nhwc && spatial != 2) throw std::logic_error(step.op + " on CUDA: channels_last is for 2-D convolutions");
  const Tensor& out0 = bound_value(values, step.output);
  const Tensor out = output_as_nchw(out0, nhwc, spatial);
  Tensor x = batched(bound_value(values, step.operands.at(0)), spatial);
  if (const dsl::AttrValue* pe = dsl::attr_find(at, "padding_end")) {
    if (transposed) throw std::logic_error(step.op + " on CUDA: a transposed convolution with end padding");
    x = padded_for_cudnn(x, pad, std::get<std::vector<int64_t>>(*pe), nhwc, held);
  }
  const Tensor in = input_in_layout(x, nhwc, held);
  const Tensor& fx = transposed ? out : in;  // the forward convolution's input
  const Tensor& fy = transposed ? in : out;  // and output
  auto layout_strides = [&](const Shape& s) { return nhwc ? nhwc_strides(s) : contiguous_strides_of(s); };
  rc::cudnn::ConvProblem p;
  p.transposed = transposed;
  p.spatial = static_cast<int>(spatial);
  p.n = fx.sizes[0];
  p.c = fx.sizes[1];
  p.k = w0.sizes[0];  // conv2d's [K, C/g, R, S]; conv_transpose2d's [C_in, C_out/g, R, S] (3-D: T, R, S)
  p.groups = dsl::attr_int(at, "groups", step.op);
  const size_t h = spatial - 2;  // the first of (h, w) among the spatial axes
  if (spatial == 3) {
    p.d = fx.sizes[2];
    p.t = w0.sizes[2];
    p.pad_d = pad[0];
    p.stride_d = stride[0];
    p.dil_d = dil[0];
    p.out_d = fy.sizes[2];
  }
  p.h = fx.sizes[2 + h];
  p.w = fx.sizes[3 + h];
  p.r = w0.sizes[2 + h];
  p.s = w0.sizes[3 + h];
  p.pad_h = pad[h];
  p.pad_w = pad[h + 1];
  p.stride_h = stride[h];
  p.stride_w = stride[h + 1];
  p.dil_h = dil[h];
  p.dil_w = dil[h + 1];
  p.out_h = fy.sizes[2 + h];
  p.out_w = fy.sizes[3 + h];
  p.dtype = library_data_type(out.dtype);
  p.x_strides = layout_strides(fx.sizes);
  p.y_strides = layout_strides(fy.sizes);
  p.w_nhwc = nhwc;
  plan_conv_epilogue(step, values, out0, p, call);
  call.problem = p;
  call.x = in.data();
  call.w = filter_in_layout(step, w0, nhwc, held).data();
  call.y = out.data();
  return call;
}

namespace {

void run_gemm(const LibraryStep& step, const std::vector<const Tensor*>& values) {
  const GemmCall c = plan_gemm_call(step, values);
  std::string why;
  if (!rc::cublaslt::supported(c.problem, &why))
    throw dsl::OpError(dsl::OpError::Kind::NotImplemented,
                       step.op + " on CUDA: cuBLASLt cannot run " + rc::cublaslt::describe(c.problem) + ": " + why);
  rc::cublaslt::matmul(c.problem, c.a, c.b, c.bias, c.residual, c.out, rc::current_stream());
}

void run_conv(const LibraryStep& step, const std::vector<const Tensor*>& values, runtime::onednn::ImplInfo* info) {
  const ConvCall c = plan_conv_call(step, values);
  std::string why;
  if (!rc::cudnn::supported(c.problem, &why))
    throw dsl::OpError(dsl::OpError::Kind::NotImplemented, step.op + " on CUDA: cuDNN cannot run it: " + why);
  const bool transposed = c.problem.transposed;
  rc::cudnn::Algo algo;
  if (!step.impl.empty()) {
    algo.id = rc::cudnn::algo_id(step.impl, transposed);
    algo.name = step.impl;
    if (algo.id < 0) throw std::invalid_argument(step.op + " on CUDA: unknown cuDNN algorithm '" + step.impl + "'");
  } else if (step.exhaustive_search) {
    // The timed search writes its output buffer: when that buffer is also the residual (in place,
    // which runtime/cudnn.h allows), it searches into a scratch block instead.
    void* search_out = c.y;
    Tensor scratch;
    if (c.problem.residual && c.z == c.y) {
      const Tensor& out = bound_value(values, step.output);
      scratch = Tensor::empty(out.sizes, out.dtype, out.device());
      search_out = scratch.data();
    }
    algo = rc::cudnn::choose(c.problem, rc::cudnn::Search::Exhaustive, c.x, c.w, search_out);
  } else {
    algo = rc::cudnn::choose(c.problem, rc::cudnn::Search::Heuristic, c.x, c.w, c.y);
  }
  rc::cudnn::forward(c.problem, algo, c.x, c.w, c.bias, c.z, c.y, rc::current_stream());
  if (info) {  // the autotuner's candidates: the choice made (its baseline) first, then the others
    info->chosen = algo.name;
    info->available = {algo.name};
    for (const std::string& name : rc::cudnn::algo_names(transposed))
      if (name != algo.name) info->available.push_back(name);
  }
}

}  // namespace

void run_cuda_library_group(const dsl::Graph& g, const LibraryStep& step, const std::vector<const Tensor*>& values,
                            runtime::onednn::ImplInfo* info) {
  (void)g;
  if (sched::is_convolution(step.op)) return run_conv(step, values, info);
  if (step.op == "matmul" || step.op == "linear") return run_gemm(step, values);
  throw dsl::OpError(dsl::OpError::Kind::NotImplemented, "op '" + step.op + "' has no CUDA library implementation");
}

}  // namespace flow::jit
