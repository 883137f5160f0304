// Note: see onednn.h. Every public call builds a canonical key string, looks the primitive up in
// the LRU cache (creating it on a miss, outside the lock: two threads may both create the same
// primitive, and the second insert simply wins), then executes it with this thread's stream and
// scratchpad. Weights of a convolution are described with format_tag::any, and a reorder from the
// caller's plain layout into oneDNN's choice is part of the cached entry (run on every call: the
// weights are graph inputs, not constants, so they may change between calls).
#include "runtime/onednn.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "runtime/buffer.h"
#include "runtime/dense_layout.h"
#include "runtime/parallel.h"

#ifdef FLOW_HAVE_ONEDNN
#include <dlfcn.h>

#include <dnnl.hpp>
#endif

namespace flow::runtime::onednn {

const char* eltwise_name(Eltwise e) {
  switch (e) {
    case Eltwise::Relu:
      return "relu";
    case Eltwise::GeluErf:
      return "gelu_erf";
    case Eltwise::GeluTanh:
      return "gelu_tanh";
    case Eltwise::Swish:
      return "swish";
    case Eltwise::Logistic:
      return "logistic";
    case Eltwise::Tanh:
      return "tanh";
    case Eltwise::Clip:
      return "clip";
    case Eltwise::Hardswish:
      return "hardswish";
    case Eltwise::Linear:
      return "linear";
  }
  return "?";
}

const char* binary_name(Binary b) {
  switch (b) {
    case Binary::Add:
      return "add";
    case Binary::Sub:
      return "sub";
    case Binary::Mul:
      return "mul";
    case Binary::Div:
      return "div";
    case Binary::Max:
      return "max";
    case Binary::Min:
      return "min";
  }
  return "?";
}

PostOp PostOp::eltwise_op(Eltwise e, float alpha, float beta) {
  PostOp p;
  p.kind = Kind::Eltwise;
  p.eltwise = e;
  p.alpha = alpha;
  p.beta = beta;
  return p;
}

PostOp PostOp::binary_op(Binary b, TensorArg src1) {
  PostOp p;
  p.kind = Kind::Binary;
  p.binary = b;
  p.src1 = std::move(src1);
  return p;
}

PostOp PostOp::sum_op(float scale) {
  PostOp p;
  p.kind = Kind::Sum;
  p.scale = scale;
  return p;
}

namespace {

std::vector<int64_t> dense_strides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> st(dims.size(), 1);
  int64_t acc = 1;
  for (size_t i = dims.size(); i-- > 0;) {
    st[i] = acc;
    acc *= std::max<int64_t>(dims[i], 1);
  }
  return st;
}

std::vector<int64_t> strides_of(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  if (strides.empty()) return dense_strides(dims);
  if (strides.size() != dims.size()) throw std::invalid_argument("onednn: strides and dims differ in rank");
  return strides;
}

int64_t product(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

float eltwise_ref(Eltwise e, float x, float alpha, float beta) {
  switch (e) {
    case Eltwise::Relu:
      return x > 0 ? x : alpha * x;
    case Eltwise::GeluErf:
      return 0.5f * x * (1.f + std::erf(x * static_cast<float>(M_SQRT1_2)));
    case Eltwise::GeluTanh: {
      const float k = static_cast<float>(M_SQRT2 * M_2_SQRTPI * 0.5);
      return 0.5f * x * (1.f + std::tanh(k * (x + 0.044715f * x * x * x)));
    }
    case Eltwise::Swish:
      return x / (1.f + std::exp(-alpha * x));
    case Eltwise::Logistic:
      return 1.f / (1.f + std::exp(-x));
    case Eltwise::Tanh:
      return std::tanh(x);
    case Eltwise::Clip:
      return std::isnan(x) ? x : std::min(beta, std::max(alpha, x));
    case Eltwise::Hardswish:
      return x * std::min(std::max(x + 3.f, 0.f), 6.f) / 6.f;
    case Eltwise::Linear:
      return alpha * x + beta;
  }
  return x;
}

float binary_ref(Binary b, float x, float y) {
  switch (b) {
    case Binary::Add:
      return x + y;
    case Binary::Sub:
      return x - y;
    case Binary::Mul:
      return x * y;
    case Binary::Div:
      return x / y;
    case Binary::Max:
      return std::isnan(x) ? x : std::max(x, y);
    case Binary::Min:
      return std::isnan(x) ? x : std::min(x, y);
  }
  return x;
}

}  // namespace

void apply_post_ops(const OutArg& dst, const std::vector<PostOp>& post, const float* prev_dst) {
  if (post.empty()) return;
  if (dst.dtype != DataType::Float32)
    throw std::invalid_argument("onednn: post-ops by loops need a float32 output (oneDNN did not fuse them)");
  for (const PostOp& p : post)
    if (p.kind == PostOp::Kind::Binary && p.src1.dtype != DataType::Float32)
      throw std::invalid_argument("onednn: post-ops by loops need float32 operands");
  float* const out = static_cast<float*>(dst.data);
  const size_t rank = dst.dims.size();
  const std::vector<int64_t> dst_st = strides_of(dst.dims, dst.strides);
  // Element strides of every binary operand as seen from dst (broadcast dims: 0).
  std::vector<std::vector<int64_t>> src_st(post.size());
  for (size_t k = 0; k < post.size(); ++k) {
    if (post[k].kind != PostOp::Kind::Binary) continue;
    const TensorArg& s = post[k].src1;
    if (s.dims.size() != rank) throw std::invalid_argument("onednn: binary post-op operand rank differs from dst");
    const std::vector<int64_t> st = strides_of(s.dims, s.strides);
    src_st[k].resize(rank);
    for (size_t d = 0; d < rank; ++d) {
      if (s.dims[d] != dst.dims[d] && s.dims[d] != 1)
        throw std::invalid_argument("onednn: binary post-op operand does not broadcast to dst");
      src_st[k][d] = s.dims[d] == 1 ? 0 : st[d];
    }
  }
  const int64_t total = product(dst.dims);
  parallel_for(total, [&](int64_t begin, int64_t end) {
    std::vector<int64_t> idx(rank, 0);
    int64_t rem = begin;
    for (size_t d = rank; d-- > 0;) {
      idx[d] = dst.dims[d] ? rem % dst.dims[d] : 0;
      rem = dst.dims[d] ? rem / dst.dims[d] : 0;
    }
    for (int64_t e = begin; e < end; ++e) {
      int64_t off = 0;
      for (size_t d = 0; d < rank; ++d) off += idx[d] * dst_st[d];
      float v = out[off];
      for (size_t k = 0; k < post.size(); ++k) {
        const PostOp& p = post[k];
        switch (p.kind) {
          case PostOp::Kind::Eltwise:
            v = eltwise_ref(p.eltwise, v, p.alpha, p.beta);
            break;
          case PostOp::Kind::Sum:
            v += p.scale * (prev_dst ? prev_dst[off] : 0.f);
            break;
          case PostOp::Kind::Binary: {
            int64_t so = 0;
            for (size_t d = 0; d < rank; ++d) so += idx[d] * src_st[k][d];
            v = binary_ref(p.binary, v, static_cast<const float*>(p.src1.data)[so]);
            break;
          }
        }
      }
      out[off] = v;
      for (size_t d = rank; d-- > 0;) {
        if (++idx[d] < dst.dims[d]) break;
        idx[d] = 0;
      }
    }
  });
}

#ifndef FLOW_HAVE_ONEDNN

namespace {
[[noreturn]] void unavailable(const char* what) {
  throw std::runtime_error(std::string("flow: ") + what +
                           " needs oneDNN (libdnnl), which this build of flow was compiled without");
}
}  // namespace

bool available() {
  return false;
}
std::string version() {
  return "";
}
bool half_primitives_preferred() {
  return false;
}
void matmul(const TensorArg&, const TensorArg&, const TensorArg*, const OutArg&, const std::vector<PostOp>&,
            const std::string&, ImplInfo*) {
  unavailable("matmul");
}
void linear(const TensorArg&, const TensorArg&, const TensorArg*, const OutArg&, const std::vector<PostOp>&,
            const std::string&, ImplInfo*) {
  unavailable("linear");
}
void convolution(const ConvParams&, const TensorArg&, const TensorArg&, const TensorArg*, const OutArg&,
                 const std::vector<PostOp>&, const std::string&, ImplInfo*) {
  unavailable("convolution");
}
Stats stats() {
  return {};
}
void clear_primitive_cache() {}

#else  // FLOW_HAVE_ONEDNN

namespace {

using dnnl::memory;
using Dims = memory::dims;
using Tag = memory::format_tag;
memory::data_type dnnl_type(DataType t) {
  switch (t) {
    case DataType::BFloat16:
      return memory::data_type::bf16;
    case DataType::Float16:
      return memory::data_type::f16;
    case DataType::Float32:
      break;
  }
  return memory::data_type::f32;
}

dnnl::engine& engine() {
  static dnnl::engine e = [] {
    // flow caches every primitive it makes under its own exact key (the Cache below); oneDNN 2.6's
    // own cache, keyed by the problem, once handed back another implementation of an equal problem
    // (a 1x1 convolution whose single output channel makes NCHW and NHWC destinations equal) than
    // the one whose weights layout the entry was built for: the weights were read in the wrong
    // layout. Off, so a primitive is always the one its descriptor chose, and the entry's layouts
    // and implementation name (taken from the descriptor) are those of what runs.
    dnnl::set_primitive_cache_capacity(0);
    return dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return e;
}

// Once per calling thread: honour FLOW_NUM_THREADS for oneDNN's OpenMP team (see the header).
void set_thread_count_once() {
  thread_local bool done = false;
  if (done) return;
  done = true;
  if (!std::getenv("FLOW_NUM_THREADS") || std::getenv("OMP_NUM_THREADS")) return;
  using SetFn = void (*)(int);
  if (auto fn = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"))) fn(num_threads());
}

dnnl::stream& thread_stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

// Per-thread growable 64-byte aligned scratch buffers (slot 0: the primitive's scratchpad, slot 1:
// reordered weights, slot 2: saved dst for a fallback Sum, slots 3 and 4: src and dst in the
// primitive's own layout).
void* thread_scratch(int slot, size_t bytes) {
  thread_local std::shared_ptr<Buffer> bufs[5];
  std::shared_ptr<Buffer>& b = bufs[slot];
  if (!b || b->size() < bytes) b = Buffer::allocate(std::max<size_t>(bytes, 64));
  return b->data();
}

struct Entry {
  dnnl::primitive prim;
  std::string impl;                    // impl_info_str() of the implementation
  std::vector<std::string> available;  // every implementation oneDNN offered (when enumerated)
  bool enumerated = false;
  memory::desc scratch_md;
  bool fused_post_ops = true;  // false: run post-ops by loops after the primitive
  bool reorder_weights = false;
  dnnl::primitive weights_reorder;
  memory::desc weights_user_md, weights_prim_md;
  // Convolutions let oneDNN pick the activation layouts (blocked nChw16c and the like, which its
  // fast implementations need): src is reordered in and dst out around the primitive.
  bool reorder_src = false, reorder_dst = false;
  dnnl::primitive src_reorder, dst_reorder;
  memory::desc src_prim_md, dst_prim_md;
};

class Cache {
 public:
  std::shared_ptr<const Entry> get(const std::string& key) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end()) {
      ++misses_;
      return nullptr;
    }
    ++hits_;
    lru_.splice(lru_.begin(), lru_, it->second.second);
    return it->second.first;
  }
  void put(const std::string& key, std::shared_ptr<const Entry> e) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it != map_.end()) {
      it->second.first = std::move(e);
      return;
    }
    lru_.push_front(key);
    map_.emplace(key, std::make_pair(std::move(e), lru_.begin()));
    while (map_.size() > capacity()) {
      map_.erase(lru_.back());
      lru_.pop_back();
    }
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    map_.clear();
    lru_.clear();
  }
  Stats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    Stats s;
    s.cache_hits = hits_;
    s.cache_misses = misses_;
    s.cache_size = map_.size();
    return s;
  }

 private:
  static size_t capacity() {
    static const size_t cap = [] {
      const char* env = std::getenv("FLOW_ONEDNN_CACHE_CAPACITY");
      const long v = env ? std::strtol(env, nullptr, 10) : 512;
      return static_cast<size_t>(v > 0 ? v : 512);
    }();
    return cap;
  }
  std::mutex mu_;
  std::list<std::string> lru_;  // most recent first
  std::unordered_map<std::string, std::pair<std::shared_ptr<const Entry>, std::list<std::string>::iterator>> map_;
  uint64_t hits_ = 0, misses_ = 0;
};

Cache& cache() {
  static Cache c;
  return c;
}
std::atomic<uint64_t> g_fallbacks{0}, g_executions{0}, g_weight_reorders{0};

// Convolution weights in a primitive's layout, by (primitive key, TensorArg::content_id), each
// with the content version it was made from: a new version replaces the old copy. Least recently
// used entries go first when the bytes exceed the cap.
class PackedWeights {
 public:
  std::shared_ptr<Buffer> get(const std::string& key, uint64_t version) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if (it == map_.end() || it->second.version != version) return nullptr;
    ++hits_;
    lru_.splice(lru_.begin(), lru_, it->second.lru);
    return it->second.buffer;
  }
  void put(const std::string& key, uint64_t version, const std::shared_ptr<Buffer>& b) {
    std::lock_guard<std::mutex> lock(mu_);
    erase_locked(key);
    if (b->size() > cap_bytes()) return;
    lru_.push_front(key);
    bytes_ += b->size();
    map_.emplace(key, Slot{version, b, lru_.begin()});
    while (bytes_ > cap_bytes()) erase_locked(lru_.back());
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    map_.clear();
    lru_.clear();
    bytes_ = 0;
  }
  uint64_t hits() {
    std::lock_guard<std::mutex> lock(mu_);
    return hits_;
  }
  uint64_t bytes() {
    std::lock_guard<std::mutex> lock(mu_);
    return bytes_;
  }

 private:
  struct Slot {
    uint64_t version;
    std::shared_ptr<Buffer> buffer;
    std::list<std::string>::iterator lru;
  };
  static size_t cap_bytes() {
    static const size_t cap = [] {
      const char* env = std::getenv("FLOW_ONEDNN_WEIGHT_CACHE_MB");
      const long v = env ? std::strtol(env, nullptr, 10) : 1024;
      return static_cast<size_t>(v >= 0 ? v : 1024) << 20;
    }();
    return cap;
  }
  void erase_locked(const std::string& key) {
    auto it = map_.find(key);
    if (it == map_.end()) return;
    bytes_ -= it->second.buffer->size();
    lru_.erase(it->second.lru);
    map_.erase(it);
  }
  std::mutex mu_;
  std::list<std::string> lru_;  // most recent first
  std::unordered_map<std::string, Slot> map_;
  uint64_t bytes_ = 0, hits_ = 0;
};

PackedWeights& packed_weights() {
  static PackedWeights p;
  return p;
}

void key_dims(std::ostringstream& os, const char* name, const std::vector<int64_t>& dims,
              const std::vector<int64_t>& strides) {
  os << name << "[";
  for (int64_t d : dims) os << d << ",";
  os << "/";
  for (int64_t s : strides) os << s << ",";
  os << "]";
}

void key_post_ops(std::ostringstream& os, const std::vector<PostOp>& post) {
  for (const PostOp& p : post) {
    switch (p.kind) {
      case PostOp::Kind::Eltwise:
        os << "|e" << static_cast<int>(p.eltwise) << ":" << p.alpha << ":" << p.beta;
        break;
      case PostOp::Kind::Sum:
        os << "|s" << p.scale;
        break;
      case PostOp::Kind::Binary:
        os << "|b" << static_cast<int>(p.binary);
        key_dims(os, "", p.src1.dims, strides_of(p.src1.dims, p.src1.strides));
        break;
    }
  }
}

memory::desc md_of(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides, DataType t) {
  return memory::desc(Dims(dims.begin(), dims.end()), dnnl_type(t), Dims(strides.begin(), strides.end()));
}

memory::desc any_md(const std::vector<int64_t>& dims, DataType t) {
  return memory::desc(Dims(dims.begin(), dims.end()), dnnl_type(t), Tag::any);
}

dnnl::algorithm eltwise_alg(Eltwise e) {
  switch (e) {
    case Eltwise::Relu:
      return dnnl::algorithm::eltwise_relu;
    case Eltwise::GeluErf:
      return dnnl::algorithm::eltwise_gelu_erf;
    case Eltwise::GeluTanh:
      return dnnl::algorithm::eltwise_gelu_tanh;
    case Eltwise::Swish:
      return dnnl::algorithm::eltwise_swish;
    case Eltwise::Logistic:
      return dnnl::algorithm::eltwise_logistic;
    case Eltwise::Tanh:
      return dnnl::algorithm::eltwise_tanh;
    case Eltwise::Clip:
      return dnnl::algorithm::eltwise_clip;
    case Eltwise::Hardswish:
      return dnnl::algorithm::eltwise_hardswish;
    case Eltwise::Linear:
      return dnnl::algorithm::eltwise_linear;
  }
  return dnnl::algorithm::eltwise_linear;
}

dnnl::algorithm binary_alg(Binary b) {
  switch (b) {
    case Binary::Add:
      return dnnl::algorithm::binary_add;
    case Binary::Sub:
      return dnnl::algorithm::binary_sub;
    case Binary::Mul:
      return dnnl::algorithm::binary_mul;
    case Binary::Div:
      return dnnl::algorithm::binary_div;
    case Binary::Max:
      return dnnl::algorithm::binary_max;
    case Binary::Min:
      return dnnl::algorithm::binary_min;
  }
  return dnnl::algorithm::binary_add;
}

dnnl::primitive_attr make_attr(const std::vector<PostOp>& post, bool with_post_ops) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (!with_post_ops || post.empty()) return attr;
  dnnl::post_ops po;
  for (const PostOp& p : post) {
    switch (p.kind) {
      case PostOp::Kind::Eltwise:
        po.append_eltwise(1.f, eltwise_alg(p.eltwise), p.alpha, p.beta);
        break;
      case PostOp::Kind::Sum:
        po.append_sum(p.scale);
        break;
      case PostOp::Kind::Binary:
        po.append_binary(binary_alg(p.binary),
                         md_of(p.src1.dims, strides_of(p.src1.dims, p.src1.strides), p.src1.dtype));
        break;
    }
  }
  attr.set_post_ops(po);
  return attr;
}

// Creates a primitive descriptor with the post-ops fused, or (if oneDNN refuses that chain)
// without them; throws a runtime_error naming `what` if neither works.
template <class MakePd>
auto make_pd_first(const std::string& what, const std::vector<PostOp>& post, bool& fused, MakePd&& make,
                   bool try_fused) {
  fused = true;
  if (try_fused || post.empty()) {
    try {
      return make(make_attr(post, true));
    } catch (const dnnl::error& e) {
      if (post.empty()) throw Unsupported("flow: oneDNN " + what + ": " + e.what());
    }
  }
  fused = false;
  try {
    return make(make_attr(post, false));
  } catch (const dnnl::error& e) {
    throw Unsupported("flow: oneDNN " + what + ": " + e.what());
  }
}

// The same, positioned at implementation `impl` when oneDNN offers it (else its first choice);
// `entry.impl` gets the chosen name and, with `enumerate` (the autotuner asked), `entry.available`
// the names of all, which costs one more descriptor creation and walk; inference never pays it.
// `make` must build from an op descriptor that outlives the returned primitive_desc's iteration
// (oneDNN 2.6 keeps a pointer to it).
template <class MakePd>
auto make_pd(const std::string& what, const std::vector<PostOp>& post, Entry& entry, const std::string& impl,
             bool enumerate, MakePd&& make, bool try_fused = true) {
  entry.available.clear();
  entry.enumerated = enumerate;
  if (enumerate) {
    auto it = make_pd_first(what, post, entry.fused_post_ops, make, try_fused);
    do {
      const std::string name = it.impl_info_str();
      if (std::find(entry.available.begin(), entry.available.end(), name) == entry.available.end())
        entry.available.push_back(name);
    } while (it.next_impl());
  }
  auto pd = make_pd_first(what, post, entry.fused_post_ops, make, try_fused);
  if (!impl.empty()) {
    bool found = false;
    do {
      found = pd.impl_info_str() == impl;
    } while (!found && pd.next_impl());
    if (!found) pd = make_pd_first(what, post, entry.fused_post_ops, make, try_fused);  // not offered: the first choice
  }
  entry.impl = pd.impl_info_str();
  return pd;
}

// Whether oneDNN 2.6's convolutions compute every binary post-op of `post` right: operands that
// are a scalar, per output channel, or the whole destination. They accept others (per row, per
// [H, W] position, per [N, H]) and, with an NHWC destination, broadcast them wrongly (the 1x1 jit
// convolutions: 15-145% off); such chains run unfused, by the fallback loop after the primitive.
bool conv_binary_operands_supported(const std::vector<PostOp>& post, const std::vector<int64_t>& dst_dims) {
  for (const PostOp& p : post) {
    if (p.kind != PostOp::Kind::Binary || p.src1.dims.empty()) continue;
    const std::vector<int64_t>& d = p.src1.dims;
    if (d.size() != dst_dims.size()) return false;
    bool scalar = true, per_channel = true, whole = true;
    for (size_t i = 0; i < d.size(); ++i) {
      const bool varies = d[i] != 1 && dst_dims[i] != 1;
      scalar = scalar && !varies;
      per_channel = per_channel && (i == 1 || !varies);
      whole = whole && (d[i] == dst_dims[i]);
    }
    if (!scalar && !per_channel && !whole) return false;
  }
  return true;
}

bool has_sum_op(const std::vector<PostOp>& post) {
  return std::any_of(post.begin(), post.end(), [](const PostOp& p) { return p.kind == PostOp::Kind::Sum; });
}

bool plain_conv_forced() {
  static const bool forced = [] {
    const char* v = std::getenv("FLOW_ONEDNN_PLAIN_CONV");
    return v && std::string(v) == "1";
  }();
  return forced;
}

// Runs a cached entry: weights reorder (if any), the primitive, then the fallback epilogue.
void execute(const Entry& e, const OutArg& dst, const std::vector<PostOp>& post, std::unordered_map<int, memory> args,
             const void* weights_user, const std::string& weights_key = "", uint64_t weights_version = 0) {
  set_thread_count_once();
  dnnl::stream& s = thread_stream();
  dnnl::engine& eng = engine();
  const bool has_sum =
      std::any_of(post.begin(), post.end(), [](const PostOp& p) { return p.kind == PostOp::Kind::Sum; });
  const float* prev = nullptr;
  if (!e.fused_post_ops && !post.empty() && dst.dtype != DataType::Float32)
    throw Unsupported(
        "onednn: oneDNN did not fuse the post-ops of a half output, and the loops that would apply them take float32");
  if (!e.fused_post_ops && has_sum) {  // the fallback Sum reads dst as it was before the primitive
    const int64_t span = [&] {
      const std::vector<int64_t> st = strides_of(dst.dims, dst.strides);
      int64_t m = 0;
      for (size_t d = 0; d < st.size(); ++d) m += (dst.dims[d] - 1) * st[d];
      return m + 1;
    }();
    float* copy = static_cast<float*>(thread_scratch(2, static_cast<size_t>(span) * sizeof(float)));
    std::memcpy(copy, dst.data, static_cast<size_t>(span) * sizeof(float));
    prev = copy;
  }
  // The reordered weights from the cache (or just made for it): held until the primitive has run,
  // whatever the cache does meanwhile (evict, refuse, clear).
  std::shared_ptr<Buffer> packed;
  if (e.reorder_weights) {
    if (!weights_key.empty()) packed = packed_weights().get(weights_key, weights_version);
    if (packed) {
      args[DNNL_ARG_WEIGHTS] = memory(e.weights_prim_md, eng, packed->data());
    } else {
      if (!weights_key.empty()) packed = Buffer::allocate(e.weights_prim_md.get_size());
      memory user(e.weights_user_md, eng, const_cast<void*>(weights_user));
      memory prim(e.weights_prim_md, eng, packed ? packed->data() : thread_scratch(1, e.weights_prim_md.get_size()));
      e.weights_reorder.execute(s, {{DNNL_ARG_FROM, user}, {DNNL_ARG_TO, prim}});
      ++g_weight_reorders;
      args[DNNL_ARG_WEIGHTS] = prim;
      if (packed) {
        s.wait();  // complete before another thread can find it in the cache
        packed_weights().put(weights_key, weights_version, packed);
      }
    }
  }
  memory dst_user;
  if (e.reorder_src) {
    memory prim(e.src_prim_md, eng, thread_scratch(3, e.src_prim_md.get_size()));
    e.src_reorder.execute(s, {{DNNL_ARG_FROM, args.at(DNNL_ARG_SRC)}, {DNNL_ARG_TO, prim}});
    args[DNNL_ARG_SRC] = prim;
  }
  if (e.reorder_dst) {
    dst_user = args.at(DNNL_ARG_DST);
    args[DNNL_ARG_DST] = memory(e.dst_prim_md, eng, thread_scratch(4, e.dst_prim_md.get_size()));
  }
  args[DNNL_ARG_SCRATCHPAD] = memory(e.scratch_md, eng, thread_scratch(0, e.scratch_md.get_size()));
  if (e.fused_post_ops) {
    for (size_t k = 0; k < post.size(); ++k) {
      if (post[k].kind != PostOp::Kind::Binary) continue;
      const TensorArg& a = post[k].src1;
      args[DNNL_ARG_ATTR_MULTIPLE_POST_OP(static_cast<int>(k)) | DNNL_ARG_SRC_1] =
          memory(md_of(a.dims, strides_of(a.dims, a.strides), a.dtype), eng, const_cast<void*>(a.data));
    }
  }
  e.prim.execute(s, args);
  if (e.reorder_dst) e.dst_reorder.execute(s, {{DNNL_ARG_FROM, args.at(DNNL_ARG_DST)}, {DNNL_ARG_TO, dst_user}});
  s.wait();
  ++g_executions;
  if (!e.fused_post_ops) {
    ++g_fallbacks;
    apply_post_ops(dst, post, prev);
  }
}

memory mem(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides, const void* data, DataType t) {
  return memory(md_of(dims, strides, t), engine(), const_cast<void*>(data));
}

// K == 0 (or an empty reduction over input channels): dst = 0 (+ bias), then the post-ops.
void zero_then_post_ops(const OutArg& dst, const TensorArg* bias, const std::vector<PostOp>& post) {
  if (dst.dtype != DataType::Float32)
    throw Unsupported("onednn: an empty reduction (K = 0) is computed by loops, for float32");
  const std::vector<int64_t> st = strides_of(dst.dims, dst.strides);
  std::vector<PostOp> chain;
  if (bias) chain.push_back(PostOp::binary_op(Binary::Add, *bias));
  chain.insert(chain.end(), post.begin(), post.end());
  OutArg d = dst;
  d.strides = st;
  // Zero every element (stored, not computed: the memory is uninitialized and may hold NaN).
  float* const out = static_cast<float*>(d.data);
  const int64_t total = product(d.dims);
  std::vector<int64_t> idx(d.dims.size(), 0);
  for (int64_t e = 0; e < total; ++e) {
    int64_t off = 0;
    for (size_t k = 0; k < idx.size(); ++k) off += idx[k] * st[k];
    out[off] = 0.f;
    for (size_t k = idx.size(); k-- > 0;) {
      if (++idx[k] < d.dims[k]) break;
      idx[k] = 0;
    }
  }
  apply_post_ops(d, chain, nullptr);
}

// oneDNN 2.6 computes a chain holding two eltwise post-ops of the same algorithm with different
// parameters wrongly (two eltwise_linear or two eltwise_clip: the second one's alpha/beta are
// lost; found by the random chain test). So adjacent linears are merged into one, and a later
// linear or clip whose parameters differ from the first one's is rewritten as binary mul/add
// (max/min) post-ops with one-element operands held in `scalars` (capacity reserved up front,
// so the pointers stay valid). Scalars are data, not part of the cached primitive.
std::vector<PostOp> sanitize_chain(const std::vector<PostOp>& post, std::vector<float>& scalars) {
  std::vector<PostOp> merged;
  for (const PostOp& p : post) {
    const bool lin = p.kind == PostOp::Kind::Eltwise && p.eltwise == Eltwise::Linear;
    if (lin && !merged.empty() && merged.back().kind == PostOp::Kind::Eltwise &&
        merged.back().eltwise == Eltwise::Linear) {
      PostOp& q = merged.back();  // p(q(x)) = p.a * (q.a * x + q.b) + p.b
      q.beta = p.alpha * q.beta + p.beta;
      q.alpha = p.alpha * q.alpha;
      continue;
    }
    merged.push_back(p);
  }
  scalars.clear();
  scalars.reserve(2 * merged.size());
  std::vector<PostOp> out;
  std::vector<const PostOp*> first(16, nullptr);  // first eltwise of each algorithm
  auto scalar_op = [&](Binary b, float v) {
    scalars.push_back(v);
    out.push_back(PostOp::binary_op(b, TensorArg{&scalars.back(), {}, {}}));
  };
  for (const PostOp& p : merged) {
    if (p.kind != PostOp::Kind::Eltwise) {
      out.push_back(p);
      continue;
    }
    const PostOp*& f = first[static_cast<size_t>(p.eltwise)];
    if (!f || (f->alpha == p.alpha && f->beta == p.beta)) {
      if (!f) f = &p;
      out.push_back(p);
    } else if (p.eltwise == Eltwise::Linear) {
      if (p.alpha != 1) scalar_op(Binary::Mul, p.alpha);
      if (p.beta != 0) scalar_op(Binary::Add, p.beta);
    } else if (p.eltwise == Eltwise::Clip) {
      scalar_op(Binary::Max, p.alpha);
      scalar_op(Binary::Min, p.beta);
    } else {
      out.push_back(p);  // no other parameterized eltwise is used with varying parameters
    }
  }
  return out;
}

// One-element binary operands get the rank of dst (all dims 1).
void fix_scalar_ranks(std::vector<PostOp>& post, size_t rank) {
  for (PostOp& p : post)
    if (p.kind == PostOp::Kind::Binary && p.src1.dims.empty()) {
      p.src1.dims.assign(rank, 1);
      p.src1.strides.assign(rank, 1);
    }
}

// Whether a 4-D [N, C, H, W] tensor is dense with C innermost (NHWC memory); unit dims' strides
// are free, as in torch.
// A [N, C, 1, 1] tensor (squeeze-and-excitation's pooled vector and its 1x1 convolutions) is NCHW
// and NHWC at once, but oneDNN tells layouts apart by the strides of unit dims too: an "NCHW"
// source against an "NHWC" destination got its reference implementation (MobileNetV3's 16 such
// convolutions: 3.3 of 5.6 ms), and with both described NHWC, oneDNN 2.6's brgconv_1x1 computed
// them wrongly (8e-4 relative error). Dense ones are described as plain NCHW: a GEMM.
std::vector<int64_t> unit_spatial_strides(const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  if ((dims[1] != 1 && strides[1] != 1) || (dims[0] != 1 && strides[0] != dims[1])) return strides;
  std::vector<int64_t> s(dims.size(), 1);
  s[0] = dims[1];
  return s;
}

// The source a plain (non-blocked) convolution reads: in the destination's layout. oneDNN 2.6 has
// only its reference implementation for an NCHW source with an NHWC destination (or the reverse),
// ~1000x slower than one reorder of the source first (DenseNet's 1x1 convolutions reading a
// concatenation in NCHW: 1.7 s per forward at 64x64).
memory::desc plain_conv_src_md(const std::vector<int64_t>& src_dims, const std::vector<int64_t>& src_strides,
                               const std::vector<int64_t>& dst_dims, const std::vector<int64_t>& dst_strides,
                               DataType t) {
  const bool src_nhwc = dense_nhwc(src_dims, src_strides), dst_nhwc = dense_nhwc(dst_dims, dst_strides);
  if (src_nhwc == dst_nhwc) return md_of(src_dims, src_strides, t);
  const bool volumetric = src_dims.size() == 5;
  const Tag tag = dst_nhwc ? (volumetric ? Tag::ndhwc : Tag::nhwc) : (volumetric ? Tag::ncdhw : Tag::nchw);
  return memory::desc(Dims(src_dims.begin(), src_dims.end()), dnnl_type(t), tag);
}

void check_rank(const char* what, const std::vector<int64_t>& dims, const std::vector<int64_t>& strides) {
  if (!strides.empty() && strides.size() != dims.size())
    throw std::invalid_argument(std::string("onednn: ") + what + ": strides and dims differ in rank");
}

}  // namespace

bool available() {
  return true;
}

std::string version() {
  const dnnl_version_t* v = dnnl::version();
  return std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch);
}

bool half_primitives_preferred() {
  static const bool amx = [] {
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    const auto want = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_amx);  // a bit set containing AVX-512
    return (isa & want) == want;
  }();
  return amx;
}

void matmul(const TensorArg& a, const TensorArg& b, const TensorArg* bias, const OutArg& dst,
            const std::vector<PostOp>& post_in, const std::string& impl, ImplInfo* info) {
  std::vector<float> scalars;
  std::vector<PostOp> post = sanitize_chain(post_in, scalars);
  fix_scalar_ranks(post, dst.dims.size());
  const size_t rank = dst.dims.size();
  if (rank < 2 || a.dims.size() != rank || b.dims.size() != rank || (bias && bias->dims.size() != rank))
    throw std::invalid_argument("onednn::matmul: operands must have the rank of dst (>= 2)");
  check_rank("matmul a", a.dims, a.strides);
  check_rank("matmul b", b.dims, b.strides);
  if (product(dst.dims) == 0) return;
  if (a.dims[rank - 1] == 0) return zero_then_post_ops(dst, bias, post);  // no primitive: info untouched
  const std::vector<int64_t> as = strides_of(a.dims, a.strides), bs = strides_of(b.dims, b.strides),
                             ds = strides_of(dst.dims, dst.strides);
  const std::vector<int64_t> biass = bias ? strides_of(bias->dims, bias->strides) : std::vector<int64_t>{};
  std::ostringstream key;
  key << "matmul";
  key_dims(key, "a", a.dims, as);
  key_dims(key, "b", b.dims, bs);
  if (bias) key_dims(key, "bias", bias->dims, biass);
  key_dims(key, "d", dst.dims, ds);
  key << " dt" << static_cast<int>(a.dtype) << static_cast<int>(b.dtype) << static_cast<int>(dst.dtype)
      << (bias ? static_cast<int>(bias->dtype) : 9);
  // Frozen 2-D weights (a linear layer's) are described with format_tag::any, so the primitive picks
  // its packed layout; the packed copy is cached like a convolution's (measured on 2.6: the
  // encoder's GEMMs 2-7% faster than over the plain [N, K] weights).
  const bool pack_b = !b.content_id.empty() && rank == 2;
  key_post_ops(key, post);
  key << (pack_b ? " packed" : "") << " impl=" << impl;
  const std::string key_str = key.str();
  std::shared_ptr<const Entry> e = cache().get(key_str);
  if (!e || (info && !e->enumerated)) {
    auto fresh = std::make_shared<Entry>();
    const memory::desc bias_md = bias ? md_of(bias->dims, biass, bias->dtype) : memory::desc();
    const memory::desc b_md = md_of(b.dims, bs, b.dtype);
    const memory::desc b_prim_md = pack_b ? any_md(b.dims, b.dtype) : b_md;
    // The op descriptor outlives every primitive_desc made from it: oneDNN 2.6's implementation
    // iterator keeps a pointer to it and reads it again on next_impl().
    const dnnl::matmul::desc d(md_of(a.dims, as, a.dtype), b_prim_md, bias_md, md_of(dst.dims, ds, dst.dtype));
    const auto pd = make_pd("matmul", post, *fresh, impl, info != nullptr, [&](const dnnl::primitive_attr& attr) {
      return dnnl::matmul::primitive_desc(d, attr, engine());
    });
    fresh->prim = dnnl::matmul(pd);
    fresh->scratch_md = pd.scratchpad_desc();
    fresh->weights_user_md = b_md;
    fresh->weights_prim_md = pd.weights_desc();
    fresh->reorder_weights = !(fresh->weights_prim_md == b_md);
    if (fresh->reorder_weights)
      fresh->weights_reorder =
          dnnl::reorder(dnnl::reorder::primitive_desc(engine(), b_md, engine(), fresh->weights_prim_md));
    cache().put(key_str, fresh);
    e = fresh;
  }
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mem(a.dims, as, a.data, a.dtype)},
                                       {DNNL_ARG_DST, mem(dst.dims, ds, dst.data, dst.dtype)}};
  if (!e->reorder_weights) args[DNNL_ARG_WEIGHTS] = mem(b.dims, bs, b.data, b.dtype);
  if (bias) args[DNNL_ARG_BIAS] = mem(bias->dims, biass, bias->data, bias->dtype);
  if (info) *info = ImplInfo{e->impl, e->available};
  execute(*e, dst, post, std::move(args), b.data, pack_b ? key_str + " weights=" + b.content_id : std::string(),
          b.content_version);
}

void linear(const TensorArg& x, const TensorArg& w, const TensorArg* bias, const OutArg& dst,
            const std::vector<PostOp>& post, const std::string& impl, ImplInfo* info) {
  if (x.dims.size() != 2 || w.dims.size() != 2 || dst.dims.size() != 2 || (bias && bias->dims.size() != 1))
    throw std::invalid_argument("onednn::linear: x, w and dst must be 2-D and bias 1-D");
  const std::vector<int64_t> ws = strides_of(w.dims, w.strides);
  const TensorArg wt{w.data, {w.dims[1], w.dims[0]}, {ws[1], ws[0]}, w.content_id, w.content_version, w.dtype};  // w^T
  if (!bias) return matmul(x, wt, nullptr, dst, post, impl, info);
  const std::vector<int64_t> bs = strides_of(bias->dims, bias->strides);
  const TensorArg b2{bias->data, {1, bias->dims[0]}, {bias->dims[0] * bs[0], bs[0]}, {}, 0, bias->dtype};
  matmul(x, wt, &b2, dst, post, impl, info);
}

void convolution(const ConvParams& p, const TensorArg& src, const TensorArg& weights, const TensorArg* bias,
                 const OutArg& dst, const std::vector<PostOp>& post_in, const std::string& impl, ImplInfo* info) {
  std::vector<float> scalars;
  std::vector<PostOp> post = sanitize_chain(post_in, scalars);
  fix_scalar_ranks(post, dst.dims.size());
  const size_t rank = src.dims.size(), nsp = rank - 2;
  if ((rank != 4 && rank != 5) || weights.dims.size() != rank || dst.dims.size() != rank ||
      (bias && bias->dims.size() != 1))
    throw std::invalid_argument("onednn::convolution: src, weights and dst must be 4-D or 5-D alike and bias 1-D");
  check_rank("convolution src", src.dims, src.strides);
  check_rank("convolution weights", weights.dims, weights.strides);
  if (product(dst.dims) == 0) return;
  const int64_t g = p.groups;
  auto image = [](const std::vector<int64_t>& d) { return product(std::vector<int64_t>(d.begin() + 2, d.end())); };
  // Both images 1x1: source and destination described as plain NCHW together (unit_spatial_strides).
  const bool unit_spatial = image(src.dims) == 1 && image(dst.dims) == 1;
  auto strides_for = [&](const auto& t) {
    const std::vector<int64_t> s = strides_of(t.dims, t.strides);
    return unit_spatial ? unit_spatial_strides(t.dims, s) : s;
  };
  const std::vector<int64_t> ss = strides_for(src), ds = strides_for(dst);
  const std::vector<int64_t> ws0 = strides_of(weights.dims, weights.strides);
  // oneDNN's weights: [G,] OC/G, IC/G, K..., described over the caller's torch layout by strides.
  std::vector<int64_t> wd, wst;
  const std::vector<int64_t> taps(weights.dims.begin() + 2, weights.dims.end()),
      tap_strides(ws0.begin() + 2, ws0.end());
  const bool one_tap = std::all_of(taps.begin(), taps.end(), [](int64_t k) { return k == 1; });
  if (!p.transposed) {  // torch [OC, IC/G, K...]
    const int64_t ocg = weights.dims[0] / g, icg = weights.dims[1];
    if (icg == 0) return zero_then_post_ops(dst, bias, post);
    wd = {ocg, icg};
    wst = {ws0[0], ws0[1]};
    if (g > 1) {
      wd.insert(wd.begin(), g);
      wst.insert(wst.begin(), ocg * ws0[0]);
    }
  } else {  // torch [IC, OC/G, K...]
    const int64_t icg = weights.dims[0] / g, ocg = weights.dims[1];
    if (icg == 0) return zero_then_post_ops(dst, bias, post);
    wd = {ocg, icg};
    wst = {ws0[1], ws0[0]};
    if (g > 1) {
      wd.insert(wd.begin(), g);
      wst.insert(wst.begin(), icg * ws0[0]);
    }
  }
  wd.insert(wd.end(), taps.begin(), taps.end());
  wst.insert(wst.end(), tap_strides.begin(), tap_strides.end());
  // oneDNN 2.6's bfloat16 convolutions (AVX512-BF16 / AMX) multiply input channels in pairs. With
  // an odd count per group, the last channel's partner is the next pixel's channel 0 times a zero
  // weight, so an inf or NaN there makes NaN in an output whose window never reads it (a fuzzer
  // found it in 2-d and 3-d convolutions; torch's result is finite). Refused here, so the caller
  // computes them in float32 (jit/library_ops.cpp). Transposed ones reduce over input channels per
  // group the same way and are refused too (not observed there; a precaution).
  const int64_t in_per_group = wd[wd.size() - taps.size() - 1];
  if (src.dtype == DataType::BFloat16 && in_per_group % 2 == 1)
    throw Unsupported("bfloat16 convolution with an odd number of input channels per group (" +
                      std::to_string(in_per_group) + "): oneDNN's bf16 kernels would read a neighbour's channel");
  const std::vector<int64_t> bs = bias ? strides_of(bias->dims, bias->strides) : std::vector<int64_t>{};
  std::ostringstream key;
  key << (p.transposed ? "deconv" : "conv");
  for (const auto& [what, v] : {std::pair<const char*, const int64_t*>{" s", p.stride},
                                {" d", p.dilation},
                                {" p", p.pad_begin},
                                {" q", p.pad_end}}) {
    key << what;
    for (size_t i = 0; i < nsp; ++i) key << (i ? "," : "") << v[i];
  }
  key << " g" << g;
  key_dims(key, "src", src.dims, ss);
  key_dims(key, "w", wd, wst);
  if (bias) key_dims(key, "bias", bias->dims, bs);
  key_dims(key, "d", dst.dims, ds);
  key << " dt" << static_cast<int>(src.dtype) << static_cast<int>(weights.dtype) << static_cast<int>(dst.dtype)
      << (bias ? static_cast<int>(bias->dtype) : 9);
  key_post_ops(key, post);
  key << " impl=" << impl;
  const std::string key_str = key.str();
  std::shared_ptr<const Entry> e = cache().get(key_str);
  if (!e || (info && !e->enumerated)) {
    auto fresh = std::make_shared<Entry>();
    const bool fuse_ok = conv_binary_operands_supported(post, dst.dims);
    const memory::desc src_md = md_of(src.dims, ss, src.dtype), dst_md = md_of(dst.dims, ds, dst.dtype);
    const memory::desc w_any = any_md(wd, weights.dtype);
    const memory::desc bias_md = bias ? md_of(bias->dims, bs, bias->dtype) : memory::desc();
    Dims strides, dil, pl, pr;
    for (size_t i = 0; i < nsp; ++i) {
      strides.push_back(p.stride[i]);
      dil.push_back(p.dilation[i] - 1);
      pl.push_back(p.pad_begin[i]);
      pr.push_back(p.pad_end[i]);
    }
    const bool unit_strides = std::all_of(strides.begin(), strides.end(), [](int64_t s) { return s == 1; });
    memory::desc w_prim;
    if (!p.transposed) {
      // Layout: "blocked/<impl>" lets oneDNN pick the activation layouts, "plain/<impl>" keeps
      // NCHW. Default: plain for 1x1 stride-1 convolutions (a plain GEMM, no reorders), blocked
      // for the rest. A Sum post-op (reads dst in place) and FLOW_ONEDNN_PLAIN_CONV=1 force plain.
      const bool plain_only = has_sum_op(post) || plain_conv_forced();
      std::string name = impl;
      bool blocked = !(one_tap && unit_strides);
      if (name.rfind("plain/", 0) == 0) {
        blocked = false;
        name = name.substr(6);
      } else if (name.rfind("blocked/", 0) == 0) {
        blocked = true;
        name = name.substr(8);
      }
      if (plain_only) blocked = false;
      const memory::desc src_any = any_md(src.dims, src.dtype), dst_any = any_md(dst.dims, dst.dtype);
      // The op descriptors outlive every primitive_desc made from them (see matmul).
      const dnnl::convolution_forward::desc d_plain(
          dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_auto,
          plain_conv_src_md(src.dims, ss, dst.dims, ds, src.dtype), w_any, bias_md, dst_md, strides, dil, pl, pr);
      const dnnl::convolution_forward::desc d_any(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_auto,
                                                  src_any, w_any, bias_md, dst_any, strides, dil, pl, pr);
      auto make_for = [&](bool any) {
        const dnnl::convolution_forward::desc* d = any ? &d_any : &d_plain;
        return [d](const dnnl::primitive_attr& attr) {
          return dnnl::convolution_forward::primitive_desc(*d, attr, engine());
        };
      };
      const bool enumerate = info != nullptr;
      const auto pd = make_pd("convolution", post, *fresh, name, enumerate, make_for(blocked), fuse_ok);
      const char* chosen_prefix = blocked ? "blocked/" : "plain/";
      fresh->impl = chosen_prefix + fresh->impl;
      if (enumerate) {  // the search space: both layouts' implementations, prefixed
        std::vector<std::string> all;
        for (const auto& n : fresh->available) all.push_back(chosen_prefix + n);
        if (!plain_only) {
          Entry other;
          try {
            make_pd("convolution", post, other, "", true, make_for(!blocked), fuse_ok);
            for (const auto& n : other.available) all.push_back((blocked ? "plain/" : "blocked/") + n);
          } catch (const std::exception&) {
          }
        }
        fresh->available = all;
      }
      fresh->prim = dnnl::convolution_forward(pd);
      fresh->scratch_md = pd.scratchpad_desc();
      w_prim = pd.weights_desc();
      fresh->src_prim_md = pd.src_desc();
      fresh->dst_prim_md = pd.dst_desc();
      fresh->reorder_src = !(fresh->src_prim_md == src_md);
      fresh->reorder_dst = !(fresh->dst_prim_md == dst_md);
      if (fresh->reorder_src)
        fresh->src_reorder =
            dnnl::reorder(dnnl::reorder::primitive_desc(engine(), src_md, engine(), fresh->src_prim_md));
      if (fresh->reorder_dst)
        fresh->dst_reorder =
            dnnl::reorder(dnnl::reorder::primitive_desc(engine(), fresh->dst_prim_md, engine(), dst_md));
    } else {
      fresh->src_prim_md = plain_conv_src_md(src.dims, ss, dst.dims, ds, src.dtype);
      const dnnl::deconvolution_forward::desc d(dnnl::prop_kind::forward_inference,
                                                dnnl::algorithm::deconvolution_direct, fresh->src_prim_md, w_any,
                                                bias_md, dst_md, strides, dil, pl, pr);
      const auto pd = make_pd(
          "deconvolution", post, *fresh, impl, info != nullptr,
          [&](const dnnl::primitive_attr& attr) {
            return dnnl::deconvolution_forward::primitive_desc(d, attr, engine());
          },
          fuse_ok);
      fresh->prim = dnnl::deconvolution_forward(pd);
      fresh->scratch_md = pd.scratchpad_desc();
      w_prim = pd.weights_desc();
      fresh->reorder_src = !(fresh->src_prim_md == src_md);
      if (fresh->reorder_src)
        fresh->src_reorder =
            dnnl::reorder(dnnl::reorder::primitive_desc(engine(), src_md, engine(), fresh->src_prim_md));
    }
    fresh->weights_user_md = md_of(wd, wst, weights.dtype);
    fresh->weights_prim_md = w_prim;
    fresh->reorder_weights = !(w_prim == fresh->weights_user_md);
    if (fresh->reorder_weights)
      fresh->weights_reorder =
          dnnl::reorder(dnnl::reorder::primitive_desc(engine(), fresh->weights_user_md, engine(), w_prim));
    cache().put(key_str, fresh);
    e = fresh;
  }
  std::unordered_map<int, memory> args{{DNNL_ARG_SRC, mem(src.dims, ss, src.data, src.dtype)},
                                       {DNNL_ARG_DST, mem(dst.dims, ds, dst.data, dst.dtype)}};
  if (bias) args[DNNL_ARG_BIAS] = mem(bias->dims, bs, bias->data, bias->dtype);
  if (!e->reorder_weights)
    args[DNNL_ARG_WEIGHTS] = memory(e->weights_user_md, engine(), const_cast<void*>(weights.data));
  if (info) *info = ImplInfo{e->impl, e->available};
  execute(*e, dst, post, std::move(args), weights.data,
          weights.content_id.empty() ? std::string() : key_str + " weights=" + weights.content_id,
          weights.content_version);
}

Stats stats() {
  Stats s = cache().stats();
  s.fallback_epilogues = g_fallbacks.load();
  s.executions = g_executions.load();
  s.weight_reorders = g_weight_reorders.load();
  s.weight_cache_hits = packed_weights().hits();
  s.weight_cache_bytes = packed_weights().bytes();
  return s;
}

void clear_primitive_cache() {
  cache().clear();
  packed_weights().clear();
}

#endif  // FLOW_HAVE_ONEDNN

}  // namespace flow::runtime::onednn
