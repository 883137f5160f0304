// Note: see library_ops.h. Every op is normalized to oneDNN's view of it before the call: matmul
// and linear to a batched matmul of rank >= 2 (a 1-D operand becomes a row or column matrix; the
// weight of linear is w^T by strides), conv to rank 4 or 5 (an unbatched input gets N = 1). The output
// tensor is contiguous, so inserting those size-1 dims does not move any element; binary post-op
// operands are broadcast against the flow output shape first, then get the same size-1 dims.
#include "jit/library_ops.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>

#include "dsl/library_reference.h"
#include "dsl/op_table.h"
#include "jit/cuda_library_ops.h"
#include "jit/eager.h"
#include "jit/embedding_bag_op.h"
#include "jit/log.h"
#include "jit/scatter_op.h"
#include "jit/sort_op.h"
#include "runtime/dense_layout.h"
#include "runtime/onednn.h"
#include "scheduler/kernel_instance.h"

namespace flow::jit {

namespace onednn = runtime::onednn;
using dsl::numel;
using dsl::Shape;

std::string library_workload_key(const dsl::Graph& g, const LibraryStep& step,
                                 const std::vector<std::vector<int64_t>>& strides) {
  // A tiny graph holding just this call: the graph serializer is the canonical encoding of an op
  // and its attrs; operand shapes, dtypes and strides and the epilogue follow.
  std::string bytes = "flow.library-workload/1";
  bytes += '\0';
  bytes += step.op + '\0' + step.library + '\0';
  dsl::Graph one;
  std::vector<int> ins;
  for (int v : step.operands) ins.push_back(one.add_input(g.value(v).type));
  one.append_node(step.op, ins, {g.value(g.node(step.node).outputs.at(0)).type}, step.attrs);
  one.serialize(bytes);
  auto put = [&bytes](int64_t x) { bytes.append(reinterpret_cast<const char*>(&x), sizeof x); };
  for (int v : step.operands) {
    const auto& st = strides.at(static_cast<size_t>(v));
    put(static_cast<int64_t>(st.size()));
    for (int64_t x : st) put(x);
  }
  put(static_cast<int64_t>(step.epilogue.size()));
  for (const auto& e : step.epilogue) {
    put(static_cast<int64_t>(e.alg));
    int64_t ab[2];
    std::memcpy(ab, &e.alpha, sizeof ab[0]);
    std::memcpy(ab + 1, &e.beta, sizeof ab[1]);
    put(ab[0]);
    put(ab[1]);
    put(e.operand >= 0 ? 1 : 0);
    if (e.operand >= 0) {
      const auto& t = g.value(e.operand).type;
      put(static_cast<int64_t>(t.dtype));
      for (int64_t d : t.shape) put(d);
      for (int64_t x : strides.at(static_cast<size_t>(e.operand))) put(x);
    }
  }
  return dsl::xxh3_128(bytes).hex();
}

std::string LibraryStep::describe() const {
  std::string s = op + " (" + library + (impl.empty() ? "" : ", " + impl) + ")";
  if (!epilogue.empty()) {
    s += " + post-ops [";
    for (size_t k = 0; k < epilogue.size(); ++k)
      s += (k ? ", " : "") + std::string(sched::post_op_alg_name(epilogue[k].alg));
    s += "]";
  }
  return s;
}

LibraryStep make_library_step(const dsl::Graph& g, const sched::FusionGroup& grp, int group_index, dsl::Target target) {
  const dsl::Node& lib = g.node(grp.nodes.at(0));
  LibraryStep st;
  st.group = group_index;
  st.node = lib.id;
  st.op = lib.op;
  st.attrs = lib.attrs;
  st.operands = lib.inputs;
  st.output = g.node(grp.nodes.back()).outputs.at(0);
  st.epilogue = grp.epilogue;
  const sched::LibraryPattern* pat = sched::find_library_pattern(lib.op, target);
  if (!pat) {
    throw dsl::OpError(dsl::OpError::Kind::NotImplemented,
                       "op '" + lib.op + "' has no library implementation on " + dsl::target_name(target) + " yet");
  }
  if (pat->flow_own) {  // every dtype, nothing to choose (jit/sort_op.h)
    st.library = pat->library;
    st.has_choices = false;
    return st;
  }
  const dsl::DType dt = g.value(lib.outputs.at(0)).type.dtype;
  if (target == dsl::Target::CUDA) {
    if (dt == dsl::DType::Float64)
      throw dsl::OpError(dsl::OpError::Kind::NotImplemented,
                         "\"" + lib.op +
                             "\" not implemented for 'Double' on CUDA in flow (cuDNN/cuBLASLt calls take "
                             "float32, float16 and bfloat16)");
    st.library = pat->library;
    return st;
  }
  if (dt == dsl::DType::Float64) {
    st.library = "reference";
    st.has_choices = false;
    if (!st.epilogue.empty()) throw std::logic_error("library group: a float64 " + lib.op + " has post-ops");
  } else {
    st.library = pat->library;
    if (!onednn::available()) {
      throw dsl::OpError(dsl::OpError::Kind::NotImplemented,
                         lib.op + " on the CPU needs oneDNN (libdnnl), which this build of flow was compiled without");
    }
  }
  return st;
}

runtime::DataType library_data_type(dsl::DType t) {
  switch (t) {
    case dsl::DType::Float32:
      return runtime::DataType::Float32;
    case dsl::DType::Float16:
      return runtime::DataType::Float16;
    case dsl::DType::BFloat16:
      return runtime::DataType::BFloat16;
    default:
      break;
  }
  throw dsl::OpError(dsl::OpError::Kind::NotImplemented,
                     std::string("library calls take float32, float16 and bfloat16, not ") + dsl::dtype_name(t));
}

runtime::cuda::FixedKernelType fixed_kernel_type(dsl::DType t) {
  using runtime::cuda::FixedKernelType;
  switch (t) {
    case dsl::DType::Float32:
      return FixedKernelType::Float32;
    case dsl::DType::Float64:
      return FixedKernelType::Float64;
    case dsl::DType::Float16:
      return FixedKernelType::Float16;
    case dsl::DType::BFloat16:
      return FixedKernelType::BFloat16;
    case dsl::DType::Int32:
      return FixedKernelType::Int32;
    case dsl::DType::Int64:
      return FixedKernelType::Int64;
    case dsl::DType::Bool:
      return FixedKernelType::Bool;
    case dsl::DType::UInt8:
    case dsl::DType::Int8:
    case dsl::DType::Int16:
      break;
  }
  throw std::logic_error(std::string("no fixed CUDA kernel takes ") + dsl::dtype_name(t) +
                         " (the caller widens small integers)");
}

const Tensor& HeldTensors::keep(Tensor t) {
  items_.push_back(std::move(t));
  return items_.back();
}

const Tensor& HeldTensors::contiguous(const Tensor& t) {
  return t.is_contiguous() ? t : keep(eager_contiguous(t, t.dtype));
}

const Tensor& bound_value(const std::vector<const Tensor*>& values, int v) {
  const Tensor* t = values.at(v);
  if (!t) throw std::logic_error("library call: value %" + std::to_string(v) + " is not bound");
  return *t;
}

namespace {

struct Arg {  // dims/strides of an operand as passed to oneDNN
  const void* data = nullptr;
  std::vector<int64_t> dims, strides;
  runtime::DataType dtype = runtime::DataType::Float32;
  onednn::TensorArg tensor() const { return {data, dims, strides, {}, 0, dtype}; }
};

onednn::OutArg out_arg(const Tensor& out, std::vector<int64_t> dims, std::vector<int64_t> strides = {}) {
  return {out.data(), std::move(dims), std::move(strides), library_data_type(out.dtype)};
}

// Size-1 dims get the stride a dense layout would give them (oneDNN checks plain strides): the
// extent of every later dim, so the unit dim sits outside all of them whatever their order. (An
// NHWC tensor's N of one must get H*W*C, not C: oneDNN reads the latter as a "cdab" layout that
// only its reference convolution takes.)
void tidy_unit_strides(Arg& a) {
  for (size_t d = a.dims.size(); d-- > 0;) {
    if (a.dims[d] != 1) continue;
    int64_t s = 1;
    for (size_t k = d + 1; k < a.dims.size(); ++k) s = std::max(s, a.strides[k] * std::max<int64_t>(a.dims[k], 1));
    a.strides[d] = s;
  }
}

Arg arg_of(const Tensor& t) {
  Arg a;
  a.data = t.data();
  a.dtype = library_data_type(t.dtype);
  a.dims = t.sizes;
  a.strides = t.strides;
  return a;
}

void insert_unit(Arg& a, size_t pos) {
  a.dims.insert(a.dims.begin() + static_cast<std::ptrdiff_t>(pos), 1);
  a.strides.insert(a.strides.begin() + static_cast<std::ptrdiff_t>(pos), 0);
}

bool has_zero_stride(const Arg& a) {
  for (size_t d = 0; d < a.dims.size(); ++d)
    if (a.dims[d] > 1 && a.strides[d] == 0) return true;
  return false;
}

// A matmul operand of rank >= 2 (after normalization): its batch dims may broadcast (stride 0 ->
// size 1); its matrix dims need a unit stride in one of them and no zero stride.
bool matmul_operand_ok(Arg& a) {
  const size_t r = a.dims.size();
  for (size_t d = 0; d + 2 < r; ++d)
    if (a.dims[d] > 1 && a.strides[d] == 0) a.dims[d] = 1;
  for (size_t d = r - 2; d < r; ++d)
    if (a.dims[d] > 1 && a.strides[d] <= 0) return false;
  const bool row = a.dims[r - 1] == 1 || a.strides[r - 1] == 1;
  const bool col = a.dims[r - 2] == 1 || a.strides[r - 2] == 1;
  return row || col;
}

// A binary post-op operand: broadcast right-aligned against the flow output shape `out` (stride-0
// dims become size 1), then the normalization's unit dims inserted at `unit_pos` (ascending
// positions in the normalized rank).
Arg post_operand(const Tensor& t, const Shape& out, const std::vector<size_t>& unit_pos) {
  Arg a;
  a.data = t.data();
  a.dtype = library_data_type(t.dtype);
  a.dims.assign(out.size(), 1);
  a.strides.assign(out.size(), 0);
  const size_t off = out.size() - t.sizes.size();
  for (size_t d = 0; d < t.sizes.size(); ++d) {
    if (t.sizes[d] == 1 || t.strides[d] == 0) continue;
    a.dims[off + d] = t.sizes[d];
    a.strides[off + d] = t.strides[d];
  }
  for (size_t p : unit_pos) insert_unit(a, p);
  tidy_unit_strides(a);
  return a;
}

onednn::Eltwise eltwise_of(sched::PostOpAlg a) {
  switch (a) {
    case sched::PostOpAlg::Relu:
      return onednn::Eltwise::Relu;
    case sched::PostOpAlg::GeluErf:
      return onednn::Eltwise::GeluErf;
    case sched::PostOpAlg::GeluTanh:
      return onednn::Eltwise::GeluTanh;
    case sched::PostOpAlg::Swish:
      return onednn::Eltwise::Swish;
    case sched::PostOpAlg::Logistic:
      return onednn::Eltwise::Logistic;
    case sched::PostOpAlg::Tanh:
      return onednn::Eltwise::Tanh;
    case sched::PostOpAlg::Clip:
      return onednn::Eltwise::Clip;
    case sched::PostOpAlg::Hardswish:
      return onednn::Eltwise::Hardswish;
    case sched::PostOpAlg::Linear:
      return onednn::Eltwise::Linear;
    default:
      break;
  }
  throw std::logic_error("library epilogue: not an eltwise post-op");
}

onednn::Binary binary_of(sched::PostOpAlg a) {
  switch (a) {
    case sched::PostOpAlg::Add:
      return onednn::Binary::Add;
    case sched::PostOpAlg::Sub:
      return onednn::Binary::Sub;
    case sched::PostOpAlg::Mul:
      return onednn::Binary::Mul;
    case sched::PostOpAlg::Div:
      return onednn::Binary::Div;
    default:
      break;
  }
  throw std::logic_error("library epilogue: not a binary post-op");
}

std::vector<onednn::PostOp> post_ops(const LibraryStep& step, const std::vector<const Tensor*>& values,
                                     const Shape& out, const std::vector<size_t>& unit_pos, HeldTensors& copies) {
  std::vector<onednn::PostOp> post;
  for (const sched::EpilogueStep& e : step.epilogue) {
    if (!sched::is_binary_alg(e.alg)) {
      post.push_back(
          onednn::PostOp::eltwise_op(eltwise_of(e.alg), static_cast<float>(e.alpha), static_cast<float>(e.beta)));
      continue;
    }
    const Tensor* t = values.at(e.operand);
    if (!t) throw std::logic_error("library epilogue: operand %" + std::to_string(e.operand) + " is not bound");
    if (t->dtype != dsl::DType::Float32) t = &copies.contiguous(*t);
    post.push_back(onednn::PostOp::binary_op(binary_of(e.alg), post_operand(*t, out, unit_pos).tensor()));
  }
  return post;
}

// ---- float64: reference loops --------------------------------------------------------------------

dsl::HostTensor host_of(const Tensor& t) {
  dsl::HostTensor h{{t.sizes, t.dtype}, {}};
  const int64_t n = t.numel();
  h.data.resize(static_cast<size_t>(n));
  const double* p = static_cast<const double*>(t.data());
  std::vector<int64_t> idx(t.sizes.size(), 0);
  for (int64_t e = 0; e < n; ++e) {
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * t.strides[d];
    h.data[static_cast<size_t>(e)] = p[off];
    for (size_t d = idx.size(); d-- > 0;) {
      if (++idx[d] < t.sizes[d]) break;
      idx[d] = 0;
    }
  }
  return h;
}

void run_reference(const dsl::Graph& g, const LibraryStep& step, const std::vector<const Tensor*>& values,
                   const Tensor& out) {
  std::vector<dsl::HostTensor> hosts;
  for (int v : step.operands) {
    const Tensor& t = bound_value(values, v);
    if (t.dtype != dsl::DType::Float64) throw std::logic_error("library call: float64 op with a non-float64 operand");
    hosts.push_back(host_of(t));
  }
  std::vector<const dsl::HostTensor*> ptrs;
  for (const auto& h : hosts) ptrs.push_back(&h);
  const dsl::HostTensor r = dsl::run_library_reference(g, g.node(step.node), ptrs, /*float64_math=*/true);
  std::copy(r.data.begin(), r.data.end(), static_cast<double*>(out.data()));
}

// ---- float32: oneDNN ---------------------------------------------------------------------------

// Dims [0, last] of (dims, strides) as one dense run: its stride-collapsed size and inner stride, or
// false. Size-1 dims are skipped.
bool dense_run(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides, size_t last, int64_t& size,
               int64_t& stride) {
  size = 1;
  stride = strides[last];
  int64_t expected = 0;
  bool first = true;
  for (size_t d = last + 1; d-- > 0;) {
    if (dims[d] == 1) continue;
    if (first) {
      stride = strides[d];
      expected = strides[d] * dims[d];
      first = false;
    } else {
      if (strides[d] != expected) return false;
      expected *= dims[d];
    }
    size *= dims[d];
  }
  return true;
}

// When b (the weights) broadcasts over every batch dim, the batch dims and M collapse into the
// rows of one 2-D GEMM (a linear layer over [batch, seq, features]): oneDNN then runs one large
// GEMM instead of one per batch element. Applies only when a, dst, the bias and every binary
// post-op operand collapse the same way; otherwise leaves everything as is.
void collapse_batch_rows(Arg& a, Arg& b, Shape& dst, Arg* bias, std::vector<onednn::PostOp>& post) {
  const size_t r = dst.size();
  if (r < 3) return;
  for (size_t d = 0; d + 2 < r; ++d)
    if (b.dims[d] != 1) return;
  int64_t rows = 0, a_stride = 0;
  if (!dense_run(a.dims, a.strides, r - 2, rows, a_stride)) return;
  if (rows != numel(Shape(dst.begin(), dst.end() - 1))) return;
  if (bias)
    for (size_t d = 0; d + 1 < r; ++d)
      if (bias->dims[d] != 1) return;
  std::vector<std::pair<int64_t, int64_t>> operand_rows;  // (size, stride) of each binary operand
  for (const onednn::PostOp& p : post) {
    if (p.kind != onednn::PostOp::Kind::Binary) continue;
    const auto& od = p.src1.dims;
    bool all_one = true, all_full = true;
    for (size_t d = 0; d + 1 < r; ++d) {
      all_one = all_one && od[d] == 1;
      all_full = all_full && od[d] == dst[d];
    }
    int64_t size = 1, stride = 1;
    if (all_one) {
      stride = p.src1.strides[r - 1] * od[r - 1];
    } else if (!all_full || !dense_run(od, p.src1.strides, r - 2, size, stride)) {
      return;
    }
    operand_rows.emplace_back(size, stride);
  }
  a.dims = {rows, a.dims[r - 1]};
  a.strides = {rows == 1 ? a.strides[r - 1] * a.dims[1] : a_stride, a.strides[r - 1]};
  b.dims = {b.dims[r - 2], b.dims[r - 1]};
  b.strides = {b.strides[r - 2], b.strides[r - 1]};
  if (bias) {
    bias->dims = {1, bias->dims[r - 1]};
    bias->strides = {bias->strides[r - 1] * bias->dims[1], bias->strides[r - 1]};
  }
  size_t k = 0;
  for (onednn::PostOp& p : post) {
    if (p.kind != onednn::PostOp::Kind::Binary) continue;
    const int64_t n = p.src1.dims[r - 1], sn = p.src1.strides[r - 1];
    const auto [size, stride] = operand_rows[k++];
    p.src1.dims = {size, n};
    p.src1.strides = {size == 1 ? sn * std::max<int64_t>(n, 1) : stride, sn};
  }
  dst = {rows, dst[r - 1]};
}

// The weights operand (operand 1) for oneDNN, with its identity for the packed-weight cache
// (TensorArg::content_id) when it is frozen: the same storage (uids are never reused) at the same
// offset and version holds the same weights (dims and strides are part of the primitive's key).
onednn::TensorArg weights_arg(const LibraryStep& step, const std::vector<const Tensor*>& values, const Arg& w) {
  onednn::TensorArg arg = w.tensor();
  if (step.weights_frozen) {
    const Tensor& wt = bound_value(values, step.operands[1]);
    arg.content_id = std::to_string(wt.storage->uid()) + ":" + std::to_string(wt.offset);
    arg.content_version = wt.storage->version();
  }
  return arg;
}

void run_matmul(const LibraryStep& step, const std::vector<const Tensor*>& values, const Tensor& out,
                HeldTensors& copies, onednn::ImplInfo* info) {
  const Tensor* ta = &bound_value(values, step.operands[0]);
  const Tensor* tb = &bound_value(values, step.operands[1]);
  const bool a1 = ta->dim() == 1, b1 = tb->dim() == 1;
  // Normalized: a [..., M, K], b [..., K, N], dst [batch..., M, N], all of rank R.
  auto normalize = [&](const Tensor& t, bool is_a) {
    Arg x = arg_of(t);
    if (t.dim() == 1) insert_unit(x, is_a ? 0 : 1);
    return x;
  };
  Arg a = normalize(*ta, true), b = normalize(*tb, false);
  if (!matmul_operand_ok(a)) a = normalize(*(ta = &copies.contiguous(*ta)), true);
  if (!matmul_operand_ok(b)) b = normalize(*(tb = &copies.contiguous(*tb)), false);
  const size_t rank = std::max(a.dims.size(), b.dims.size());
  while (a.dims.size() < rank) insert_unit(a, 0);
  while (b.dims.size() < rank) insert_unit(b, 0);
  tidy_unit_strides(a);
  tidy_unit_strides(b);
  // Where the flow output shape lacks the normalized dims (a 1-D operand drops M or N).
  std::vector<size_t> unit_pos;
  if (a1) unit_pos.push_back(rank - 2);
  if (b1) unit_pos.push_back(rank - 1);
  // The destination's dims come from the output itself: an expanded (stride-0) batch dim of an
  // operand is passed as size 1 (oneDNN broadcasts it), so the operands alone understate the batch.
  Shape dst_dims = out.sizes;
  for (size_t p : unit_pos) dst_dims.insert(dst_dims.begin() + static_cast<std::ptrdiff_t>(p), 1);
  // oneDNN broadcasts a batch dim from one operand only: when both operands are size 1 (expanded)
  // where the output is not, materialize `a` so its batch dims are real.
  bool both_broadcast = false;
  for (size_t d = 0; d + 2 < rank; ++d)
    both_broadcast = both_broadcast || (a.dims[d] == 1 && b.dims[d] == 1 && dst_dims[d] > 1);
  if (both_broadcast) {
    Tensor dense = *ta;
    const size_t lead = rank - static_cast<size_t>(ta->dim()) - (a1 ? 1 : 0);
    for (size_t d = 0; d + 2 < rank && !a1; ++d)
      if (d >= lead && dense.sizes[d - lead] == 1 && dst_dims[d] > 1) {
        dense.sizes[d - lead] = dst_dims[d];
        dense.strides[d - lead] = 0;
      }
    ta = &copies.contiguous(dense);
    a = normalize(*ta, true);
    while (a.dims.size() < rank) insert_unit(a, 0);
    tidy_unit_strides(a);
  }
  std::vector<onednn::PostOp> post = post_ops(step, values, out.sizes, unit_pos, copies);
  if (a.dims[rank - 1] == 0 && post.empty()) {  // K = 0: an empty sum is zero
    std::memset(out.data(), 0, static_cast<size_t>(out.numel()) * dsl::dtype_size(out.dtype));  // 0.0 in every type
    return;
  }
  collapse_batch_rows(a, b, dst_dims, nullptr, post);
  onednn::matmul(a.tensor(), weights_arg(step, values, b), nullptr, out_arg(out, dst_dims), post, step.impl, info);
}

void run_linear(const LibraryStep& step, const std::vector<const Tensor*>& values, const Tensor& out,
                HeldTensors& copies, onednn::ImplInfo* info) {
  const Tensor* tx = &bound_value(values, step.operands[0]);
  const Tensor* tw = &bound_value(values, step.operands[1]);
  const bool x1 = tx->dim() == 1, w1 = tw->dim() == 1;
  auto norm_x = [&](const Tensor& t) {
    Arg x = arg_of(t);
    if (x1) insert_unit(x, 0);
    return x;
  };
  auto norm_w = [&](const Tensor& t) {  // w^T: [K, N] by strides
    Arg w = arg_of(t);
    if (w1) insert_unit(w, 0);
    std::swap(w.dims[0], w.dims[1]);
    std::swap(w.strides[0], w.strides[1]);
    return w;
  };
  Arg x = norm_x(*tx), w = norm_w(*tw);
  if (!matmul_operand_ok(x)) x = norm_x(*(tx = &copies.contiguous(*tx)));
  if (!matmul_operand_ok(w)) w = norm_w(*(tw = &copies.contiguous(*tw)));
  const size_t rank = x.dims.size();
  while (w.dims.size() < rank) insert_unit(w, 0);
  tidy_unit_strides(x);
  tidy_unit_strides(w);
  std::vector<size_t> unit_pos;
  if (x1) unit_pos.push_back(rank - 2);
  if (w1) unit_pos.push_back(rank - 1);
  Shape dst_dims(x.dims.begin(), x.dims.end() - 1);
  dst_dims.push_back(w.dims[rank - 1]);
  std::vector<onednn::PostOp> post = post_ops(step, values, out.sizes, unit_pos, copies);
  // The bias: oneDNN's own bias when it is [N]; otherwise a binary add ahead of the epilogue.
  Arg bias;
  bool native_bias = false;
  if (step.operands.size() > 2) {
    const Tensor& tb = bound_value(values, step.operands[2]);
    const int64_t n = dst_dims.back();
    if (tb.dim() == 1 && tb.sizes[0] == n && n > 0 && (n == 1 || tb.strides[0] > 0)) {
      bias = arg_of(tb);
      bias.dims.assign(rank, 1);
      bias.dims.back() = n;
      bias.strides.assign(rank, 0);
      bias.strides.back() = tb.strides[0];
      tidy_unit_strides(bias);
      native_bias = true;
    } else {
      post.insert(post.begin(),
                  onednn::PostOp::binary_op(onednn::Binary::Add, post_operand(tb, out.sizes, unit_pos).tensor()));
    }
  }
  collapse_batch_rows(x, w, dst_dims, native_bias ? &bias : nullptr, post);
  const onednn::TensorArg bias_arg = bias.tensor();
  onednn::matmul(x.tensor(), weights_arg(step, values, w), native_bias ? &bias_arg : nullptr, out_arg(out, dst_dims),
                 post, step.impl, info);
}

bool conv_src_ok(const Arg& a) {
  return runtime::dense_nchw(a.dims, a.strides) || runtime::dense_nhwc(a.dims, a.strides);
}

void run_conv(const LibraryStep& step, const std::vector<const Tensor*>& values, const Tensor& out, HeldTensors& copies,
              onednn::ImplInfo* info) {
  const bool transposed = dsl::is_transposed_conv(step.op);
  const size_t nsp = dsl::conv_spatial_rank(step.op);
  const Tensor* tx = &bound_value(values, step.operands[0]);
  const Tensor* tw = &bound_value(values, step.operands[1]);
  const bool unbatched = static_cast<size_t>(tx->dim()) == nsp + 1;
  auto norm_x = [&](const Tensor& t) {
    Arg x = arg_of(t);
    if (unbatched) insert_unit(x, 0);
    tidy_unit_strides(x);
    return x;
  };
  Arg x = norm_x(*tx);
  if (!conv_src_ok(x)) x = norm_x(*(tx = &copies.contiguous(*tx)));
  Arg w = arg_of(*tw);
  // (oneDNN takes dense OIHW or OHWI weights; a strided view, such as every other tap, is copied)
  if (!conv_src_ok(w)) w = arg_of(*(tw = &copies.contiguous(*tw)));
  tidy_unit_strides(w);
  const std::string& op = step.op;
  const std::vector<int64_t> stride = dsl::attr_ints(step.attrs, "stride", op),
                             pad = dsl::attr_ints(step.attrs, "padding", op),
                             dil = dsl::attr_ints(step.attrs, "dilation", op);
  onednn::ConvParams p;
  p.transposed = transposed;
  p.groups = dsl::attr_int(step.attrs, "groups", op);
  std::vector<int64_t> pad_end = pad;
  if (const dsl::AttrValue* pe = dsl::attr_find(step.attrs, "padding_end"))
    pad_end = std::get<std::vector<int64_t>>(*pe);
  // channels_last: the output buffer is [N, OH, OW, C]; oneDNN sees the NCHW dims with NHWC strides.
  const bool channels_last = dsl::attr_find(step.attrs, "channels_last") != nullptr;
  Shape dst_dims = out.sizes;
  if (unbatched) dst_dims.insert(dst_dims.begin(), 1);
  std::vector<int64_t> dst_strides;
  if (channels_last) {
    const Shape& o = out.sizes;
    dst_dims = {o[0], o[3], o[1], o[2]};
    dst_strides = {o[1] * o[2] * o[3], 1, o[2] * o[3], o[3]};
  }
  for (size_t d = 0; d < nsp; ++d) {
    p.stride[d] = stride[d];
    p.dilation[d] = dil[d];
    p.pad_begin[d] = pad[d];
    if (!transposed) {
      p.pad_end[d] = pad_end[d];  // oneDNN's output size rule is torch's (floor division)
    } else {
      // Deconvolution: OH = (IH - 1) * s + (K - 1) * d + 1 - pad_begin - pad_end.
      const int64_t k = dil[d] * (w.dims[2 + d] - 1) + 1;
      p.pad_end[d] = (x.dims[2 + d] - 1) * stride[d] + k - pad[d] - dst_dims[2 + d];
    }
  }
  Arg bias;
  bool has_bias = false;
  if (step.operands.size() > 2) {
    const Tensor* tb = &bound_value(values, step.operands[2]);
    if (has_zero_stride(arg_of(*tb))) tb = &copies.contiguous(*tb);
    bias = arg_of(*tb);
    tidy_unit_strides(bias);
    has_bias = true;
  }
  std::vector<size_t> unit_pos;
  if (unbatched) unit_pos.push_back(0);
  std::vector<onednn::PostOp> post = post_ops(step, values, out.sizes, unit_pos, copies);
  if (channels_last) {
    for (onednn::PostOp& op : post) {  // binary operands follow the NHWC output: to NCHW order
      if (op.kind != onednn::PostOp::Kind::Binary) continue;
      auto nchw = [](const std::vector<int64_t>& v) { return std::vector<int64_t>{v[0], v[3], v[1], v[2]}; };
      op.src1.strides = nchw(op.src1.strides.empty() ? sched::contiguous_strides(op.src1.dims) : op.src1.strides);
      op.src1.dims = nchw(op.src1.dims);
    }
  }
  const onednn::TensorArg bias_arg = bias.tensor();
  const onednn::TensorArg w_arg = weights_arg(step, values, w);
  onednn::convolution(p, x.tensor(), w_arg, has_bias ? &bias_arg : nullptr, out_arg(out, dst_dims, dst_strides), post,
                      step.impl, info);
}

void run_onednn(const LibraryStep& step, const std::vector<const Tensor*>& values, const Tensor& out,
                onednn::ImplInfo* info) {
  HeldTensors copies;
  if (step.op == "matmul") {
    run_matmul(step, values, out, copies, info);
  } else if (step.op == "linear") {
    run_linear(step, values, out, copies, info);
  } else if (sched::is_convolution(step.op)) {
    run_conv(step, values, out, copies, info);
  } else {
    throw std::logic_error("run_library_group: unknown library op '" + step.op + "'");
  }
}

// The library workloads (op, shapes, strides, dtypes: LibraryStep::workload) oneDNN has refused
// in a half type on this CPU: they run in float32 from then on, without asking again. Only
// onednn::Unsupported counts as a refusal (no primitive, an unfusable post-op on a half output, an
// empty reduction); any other error propagates. FLOW_ONEDNN_HALF=0 sends every half call to float32.
std::mutex& native_half_mutex() {
  static std::mutex m;
  return m;
}
std::set<std::string>& native_half_refused() {
  static std::set<std::string> s;
  return s;
}
std::atomic<int>& half_policy() {
  static std::atomic<int> p{[] {
    const char* e = std::getenv("FLOW_ONEDNN_HALF");
    if (e && std::string(e) == "0") return static_cast<int>(CpuHalfPolicy::Float32);
    if (e && std::string(e) == "1") return static_cast<int>(CpuHalfPolicy::Native);
    return static_cast<int>(CpuHalfPolicy::Auto);
  }()};
  return p;
}

// Whether oneDNN's half primitives run this half step (cpu_half_policy; a workload oneDNN refused
// once takes the float32 route from then on).
bool native_half_supported(const LibraryStep& step) {
  switch (cpu_half_policy()) {
    case CpuHalfPolicy::Float32:
      return false;
    case CpuHalfPolicy::Auto:
      if (!onednn::half_primitives_preferred()) return false;
      break;
    case CpuHalfPolicy::Native:
      break;
  }
  std::lock_guard<std::mutex> lock(native_half_mutex());
  return step.workload.empty() || native_half_refused().count(step.workload) == 0;
}
void mark_native_half_unsupported(const LibraryStep& step, dsl::DType t, const std::string& why) {
  if (!step.workload.empty()) {
    std::lock_guard<std::mutex> lock(native_half_mutex());
    if (!native_half_refused().insert(step.workload).second) return;
  }
  if (log_enabled("library"))
    log_line("library", std::string("oneDNN has no ") + dsl::dtype_name(t) + " " + step.op + " for this workload (" +
                            why + "); computing it in float32");
}

// `t` as `dtype` in the same memory order: a dense tensor is cast in its physical dim order and
// viewed back (a channels-last activation stays channels-last, so oneDNN keeps its fast
// implementations; a NCHW source with an NHWC destination has only the reference one, ~1000x
// slower); anything else becomes contiguous.
Tensor widen_keeping_layout(const Tensor& t, dsl::DType dtype) {
  const size_t r = t.sizes.size();
  std::vector<size_t> order(r);
  for (size_t d = 0; d < r; ++d) order[d] = d;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return t.strides[a] > t.strides[b]; });
  Tensor physical = t;
  for (size_t i = 0; i < r; ++i) {
    physical.sizes[i] = t.sizes[order[i]];
    physical.strides[i] = t.strides[order[i]];
  }
  if (!physical.is_contiguous()) return eager_contiguous(t, dtype);
  const Tensor wide = eager_contiguous(physical, dtype);
  Tensor back = wide;
  for (size_t i = 0; i < r; ++i) {
    back.sizes[order[i]] = wide.sizes[i];
    back.strides[order[i]] = wide.strides[i];
  }
  return back;
}

// Frozen weights widened once per (storage, view, version), not on every call, so the float32 step
// keeps its frozen identity and oneDNN's reordered-weight cache. An entry goes when its source
// storage is freed or another version of it is widened.
Tensor widened_frozen_weight(const Tensor& w, dsl::DType dtype) {
  struct Entry {
    std::weak_ptr<runtime::Buffer> source;
    uint64_t version = 0;
    Tensor wide;
  };
  static std::mutex mu;
  static auto* entries = new std::map<std::string, Entry>();  // never destroyed, like the caches it feeds
  std::string key = std::to_string(w.storage->uid()) + ":" + std::to_string(w.offset) + ":" + dsl::dtype_name(dtype);
  for (size_t d = 0; d < w.sizes.size(); ++d)
    key += ":" + std::to_string(w.sizes[d]) + "/" + std::to_string(w.strides[d]);
  std::lock_guard<std::mutex> lock(mu);
  auto it = entries->find(key);
  if (it != entries->end() && !it->second.source.expired() && it->second.version == w.storage->version())
    return it->second.wide;
  for (auto e = entries->begin(); e != entries->end();)
    e = e->second.source.expired() ? entries->erase(e) : std::next(e);
  Entry& e = (*entries)[key];
  e = Entry{w.storage, w.storage->version(), widen_keeping_layout(w, dtype)};
  return e.wide;
}

// float16/bfloat16 on the CPU without oneDNN half primitives for them (or where they are slower,
// native_half_supported): the half operands widened to float32 (exactly) in their own layouts, one
// float32 call, the result rounded once to the output dtype. That is what torch's CPU kernels
// compute (half inputs, float32 accumulation, one rounding); it is also what oneDNN's bf16
// primitives compute (float32 accumulation), up to the order of the sums.
void run_half_as_float32(const dsl::Graph& g, const LibraryStep& step, const std::vector<const Tensor*>& values,
                         const Tensor& out, onednn::ImplInfo* info) {
  std::vector<Tensor> held;
  held.reserve(step.operands.size() + 1);  // no reallocation: `wide` points into it
  std::vector<const Tensor*> wide = values;
  for (size_t i = 0; i < step.operands.size(); ++i) {
    const int v = step.operands[i];
    const Tensor& src = bound_value(values, v);
    const bool frozen_weight = i == 1 && step.weights_frozen;
    held.push_back(frozen_weight ? widened_frozen_weight(src, dsl::DType::Float32)
                                 : widen_keeping_layout(src, dsl::DType::Float32));
    wide[v] = &held.back();
  }
  held.push_back(Tensor::empty(out.sizes, dsl::DType::Float32));
  wide[step.output] = &held.back();
  run_library_group(g, step, wide, info);
  const Tensor narrow = eager_contiguous(held.back(), out.dtype);
  std::memcpy(out.data(), narrow.data(), static_cast<size_t>(out.numel()) * dsl::dtype_size(out.dtype));
}

}  // namespace

void set_cpu_half_policy(CpuHalfPolicy policy) {
  half_policy().store(static_cast<int>(policy));
}

CpuHalfPolicy cpu_half_policy() {
  return static_cast<CpuHalfPolicy>(half_policy().load());
}

void run_library_group(const dsl::Graph& g, const LibraryStep& step, const std::vector<const Tensor*>& values,
                       onednn::ImplInfo* info) {
  if (info) *info = onednn::ImplInfo{};
  const Tensor* out = values.at(step.output);
  if (!out) return;  // nothing reads the result
  if (out->numel() == 0) return;
  if (!out->is_contiguous()) throw std::logic_error("library call: output tensor is not contiguous");
  if (step.op == "argsort") return run_sort_step(step, values);
  if (step.op == "scatter") return run_scatter_step(step, values);
  if (step.op == "embedding_bag") return run_embedding_bag_step(step, values);
  if (out->device() == runtime::DeviceType::CUDA) return run_cuda_library_group(g, step, values, info);
  if (step.library == "reference") return run_reference(g, step, values, *out);
  for (int v : step.operands)
    if (bound_value(values, v).dtype != out->dtype)
      throw std::logic_error("library call: " + step.op + " with operands of another dtype than its output");
  if (dsl::is_half(out->dtype)) {
    // oneDNN's own half primitives (bf16 on AVX-512/AMX CPUs) where they exist, else float32.
    if (native_half_supported(step)) {
      try {
        run_onednn(step, values, *out, info);
        return;
      } catch (const onednn::Unsupported& e) {
        mark_native_half_unsupported(step, out->dtype, e.what());
      }
    }
    return run_half_as_float32(g, step, values, *out, info);
  }
  if (out->dtype != dsl::DType::Float32)
    throw std::logic_error("library call: " + step.op + " on " + dsl::dtype_name(out->dtype));
  run_onednn(step, values, *out, info);
}

}  // namespace flow::jit
