// Note: the cuBLASLt function table follows cuda_driver.cpp: an X-macro list of the entry points,
// resolved once from load_cuda_library(CudaLib::CublasLt), each typed by the real header's
// prototype (decltype(&::name)). The pure parts (supported(), describe(), symbol_names()) are
// compiled with or without the headers; the rest needs cublasLt.h (found next to cuda.h).
//
// Operand orientation: a row-major operand (column stride 1) of our product is a column-major
// operand of the transposed product with CUBLAS_OP_N; a column-major one (row stride 1) gets
// CUBLAS_OP_T. Strides of size-1 dimensions are ignored, so views torch reports with odd strides
// there still run.
//
// Alignment: cuBLASLt's heuristic assumes 256-byte aligned operands unless told otherwise
// (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES), and a kernel chosen under that assumption faults
// on a view that starts mid-buffer. The alignment of every pointer (and of each batch's offset)
// is passed in, and is part of the algorithm cache key; the bias pointer is set on the descriptor
// before the heuristic runs, which reads its alignment from it.
#include "runtime/cublaslt.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <climits>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <utility>

#include "runtime/cuda_allocator.h"
#include "runtime/cuda_stream.h"
#include "runtime/dynlib.h"
#include "runtime/epilogue_kernel.h"

#if defined(FLOW_HAVE_CUDA_HEADERS) && __has_include(<cublasLt.h>)
#include <cublasLt.h>
#define FLOW_HAVE_CUBLASLT 1
#endif

namespace flow::runtime::cuda::cublaslt {

#define FLOW_LT_STR2(x) #x
#define FLOW_LT_STR(x) FLOW_LT_STR2(x)

// Every cuBLASLt entry point flow uses (all exported by cuBLASLt 12 and 13).
#define FLOW_LT_FUNCTIONS(X)              \
  X(cublasLtGetVersion)                   \
  X(cublasLtGetStatusName)                \
  X(cublasLtGetStatusString)              \
  X(cublasLtCreate)                       \
  X(cublasLtMatmulDescCreate)             \
  X(cublasLtMatmulDescDestroy)            \
  X(cublasLtMatmulDescSetAttribute)       \
  X(cublasLtMatrixLayoutCreate)           \
  X(cublasLtMatrixLayoutDestroy)          \
  X(cublasLtMatrixLayoutSetAttribute)     \
  X(cublasLtMatmulPreferenceCreate)       \
  X(cublasLtMatmulPreferenceDestroy)      \
  X(cublasLtMatmulPreferenceSetAttribute) \
  X(cublasLtMatmulAlgoGetHeuristic)       \
  X(cublasLtMatmul)

namespace {

constexpr size_t kWorkspaceBytes = size_t{32} << 20;

// How one operand of our row-major product is stored: row-major (column stride 1) with leading
// dimension ld = the row stride, or column-major (row stride 1) with ld = the column stride.
struct Orientation {
  bool row_major = true;
  int64_t ld = 1;
};

std::string strides_text(int64_t row, int64_t col) {
  return "(row " + std::to_string(row) + ", col " + std::to_string(col) + ")";
}

// The orientation of a rows x cols operand with the given strides; false (with the reason) when it
// is neither layout. A stride of a size-1 dimension does not matter.
bool orient(const char* name, int64_t rows, int64_t cols, int64_t rs, int64_t cs, Orientation* out, std::string* why) {
  auto reject = [&](const std::string& reason) {
    if (why != nullptr) *why = reason;
    return false;
  };
  if (rows == 1 && cols == 1) {
    *out = {true, 1};
  } else if (cols == 1) {
    if (rs < 1) return reject(std::string(name) + " has row stride " + std::to_string(rs) + " (broadcast rows)");
    *out = {true, rs};
  } else if (rows == 1) {
    if (cs == 1) {
      *out = {true, cols};
    } else {
      if (cs < 1)
        return reject(std::string(name) + " has column stride " + std::to_string(cs) + " (broadcast columns)");
      *out = {false, cs};
    }
  } else if (cs == 1 && rs >= cols) {
    *out = {true, rs};
  } else if (rs == 1 && cs >= rows) {
    *out = {false, cs};
  } else {
    return reject(std::string(name) + " strides " + strides_text(rs, cs) +
                  " are neither row-major (col stride 1, row stride >= " + std::to_string(cols) +
                  ") nor column-major (row stride 1, col stride >= " + std::to_string(rows) + ")");
  }
  if (out->ld > INT_MAX)
    return reject(std::string(name) + " leading dimension " + std::to_string(out->ld) + " exceeds 2^31-1");
  return true;
}

bool is_16bit(DataType t) {
  return t == DataType::Float16 || t == DataType::BFloat16;
}

// The row stride cuBLASLt sees for out (and the residual): any value when m == 1.
int64_t out_ld(const MatmulProblem& p) {
  return p.m == 1 ? p.n : p.out_row;
}

// force_split_epilogue(): 1 forced, -1 not (then FLOW_CUBLASLT_SPLIT_EPILOGUE decides).
std::atomic<int>& split_setting() {
  static std::atomic<int> setting{-1};
  return setting;
}

bool split_forced() {
  const int s = split_setting().load(std::memory_order_relaxed);
  if (s >= 0) return s == 1;
  static const bool from_env = [] {
    const char* v = std::getenv("FLOW_CUBLASLT_SPLIT_EPILOGUE");
    return v != nullptr && std::string(v) == "1";
  }();
  return from_env;
}

std::atomic<int64_t>& split_runs() {
  static std::atomic<int64_t> runs{0};
  return runs;
}

}  // namespace

void force_split_epilogue(bool on) {
  split_setting().store(on ? 1 : -1, std::memory_order_relaxed);
}

int64_t split_epilogue_runs() {
  return split_runs().load(std::memory_order_relaxed);
}

const char* activation_name(Activation a) {
  switch (a) {
    case Activation::None:
      return "none";
    case Activation::Relu:
      return "relu";
    case Activation::GeluTanh:
      return "gelu_tanh";
  }
  return "unknown";
}

std::string describe(const MatmulProblem& p) {
  std::string s = "batch " + std::to_string(p.batch) + ", m " + std::to_string(p.m) + ", n " + std::to_string(p.n) +
                  ", k " + std::to_string(p.k) + ", " + data_type_name(p.in_type) + " -> " +
                  data_type_name(p.out_type) + ", A" + strides_text(p.a_row, p.a_col) + " batch " +
                  std::to_string(p.a_batch) + ", B" + strides_text(p.b_row, p.b_col) + " batch " +
                  std::to_string(p.b_batch) + ", out row " + std::to_string(p.out_row) + " batch " +
                  std::to_string(p.out_batch);
  if (p.bias) s += ", bias";
  if (p.residual) s += ", residual";
  if (p.activation != Activation::None) s += std::string(", ") + activation_name(p.activation);
  return s;
}

bool supported(const MatmulProblem& p, std::string* why) {
  auto reject = [&](const std::string& reason) {
    if (why != nullptr) *why = reason;
    return false;
  };
  if (p.batch < 0 || p.m < 0 || p.n < 0 || p.k < 0) return reject("negative size (" + describe(p) + ")");
  if (p.batch > INT_MAX || p.m > INT_MAX || p.n > INT_MAX || p.k > INT_MAX)
    return reject("a size exceeds 2^31-1 (" + describe(p) + ")");
  if (p.in_type != p.out_type && !(is_16bit(p.in_type) && p.out_type == DataType::Float32))
    return reject(std::string("in_type ") + data_type_name(p.in_type) + " with out_type " + data_type_name(p.out_type) +
                  " is not a cuBLASLt configuration (equal types, or float16/bfloat16 in with float32 out)");
  if (p.batch == 0 || p.m == 0 || p.n == 0) return true;  // empty output: nothing to run
  const int64_t ld = out_ld(p);
  if (ld < p.n || ld > INT_MAX)
    return reject("out row stride " + std::to_string(p.out_row) + " is not in [n = " + std::to_string(p.n) +
                  ", 2^31-1] (out has column stride 1)");
  if (p.batch > 1) {
    if (p.out_batch < 0) return reject("negative out batch stride " + std::to_string(p.out_batch));
    if (p.out_batch < (p.m - 1) * ld + p.n)
      return reject("out batch stride " + std::to_string(p.out_batch) + " makes the batches of out overlap (m " +
                    std::to_string(p.m) + ", row stride " + std::to_string(ld) + ")");
    if (p.k > 0 && (p.a_batch < 0 || p.b_batch < 0))
      return reject("negative batch stride (A " + std::to_string(p.a_batch) + ", B " + std::to_string(p.b_batch) + ")");
  }
  if (p.k == 0) return true;  // A and B are not read
  Orientation o;
  if (!orient("A", p.m, p.k, p.a_row, p.a_col, &o, why)) return false;
  if (!orient("B", p.k, p.n, p.b_row, p.b_col, &o, why)) return false;
  return true;
}

std::vector<std::string> symbol_names() {
  return {
#define FLOW_X(fn) FLOW_LT_STR(fn),
      FLOW_LT_FUNCTIONS(FLOW_X)
#undef FLOW_X
  };
}

#if defined(FLOW_HAVE_CUBLASLT)

namespace {

struct Api {
#define FLOW_X(fn) decltype(&::fn) fn = nullptr;
  FLOW_LT_FUNCTIONS(FLOW_X)
#undef FLOW_X
};

Api resolve(const DynamicLibrary& lib) {
  Api a;
#define FLOW_X(fn) a.fn = lib.function<decltype(&::fn)>(FLOW_LT_STR(fn));
  FLOW_LT_FUNCTIONS(FLOW_X)
#undef FLOW_X
  return a;
}

// A failed load throws out of the initializer and is retried by the next call.
const Api& api() {
  static const Api instance = resolve(load_cuda_library(CudaLib::CublasLt));
  return instance;
}

std::string status_text(cublasStatus_t s) {
  const Api& a = api();
  const char* name = a.cublasLtGetStatusName(s);
  const char* text = a.cublasLtGetStatusString(s);
  std::string out = name != nullptr ? name : "CUBLAS_STATUS " + std::to_string(static_cast<int>(s));
  if (text != nullptr && *text != '\0') out += std::string(": ") + text;
  return out;
}

[[noreturn]] void fail(cublasStatus_t s, const std::string& call, const std::string& context) {
  throw std::runtime_error("flow: cuBLASLt error in " + call + " (" + context + "): " + status_text(s));
}

// The problem is described only when a call fails: a matmul with a plan formats no string.
[[noreturn]] void fail(cublasStatus_t s, const std::string& call, const MatmulProblem& p) {
  fail(s, call, describe(p));
}

#define FLOW_LT_CHECK(expr, call, problem)                                    \
  do {                                                                        \
    const cublasStatus_t flow_lt_s_ = (expr);                                 \
    if (flow_lt_s_ != CUBLAS_STATUS_SUCCESS) fail(flow_lt_s_, call, problem); \
  } while (0)

struct Deleter {
  void operator()(cublasLtMatmulDescOpaque_t* d) const noexcept { api().cublasLtMatmulDescDestroy(d); }
  void operator()(cublasLtMatrixLayoutOpaque_t* d) const noexcept { api().cublasLtMatrixLayoutDestroy(d); }
  void operator()(cublasLtMatmulPreferenceOpaque_t* d) const noexcept { api().cublasLtMatmulPreferenceDestroy(d); }
};
using MatmulDesc = std::unique_ptr<cublasLtMatmulDescOpaque_t, Deleter>;
using Layout = std::unique_ptr<cublasLtMatrixLayoutOpaque_t, Deleter>;
using Preference = std::unique_ptr<cublasLtMatmulPreferenceOpaque_t, Deleter>;

cudaDataType_t cuda_type(DataType t) {
  switch (t) {
    case DataType::Float32:
      return CUDA_R_32F;
    case DataType::Float16:
      return CUDA_R_16F;
    case DataType::BFloat16:
      return CUDA_R_16BF;
  }
  throw std::logic_error("flow: cuBLASLt: unknown data type");
}

// The device's handle, created on first use and kept for the process (see the header's note).
cublasLtHandle_t handle(int device) {
  static std::mutex mu;
  static auto* handles = new std::map<int, cublasLtHandle_t>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = handles->find(device);
  if (it != handles->end()) return it->second;
  ensure_context(device);
  cublasLtHandle_t h = nullptr;
  FLOW_LT_CHECK(api().cublasLtCreate(&h), "cublasLtCreate", "device " + std::to_string(device));
  handles->emplace(device, h);
  return h;
}

// The 32 MiB workspace of (device, stream), allocated on that stream on first use and kept. Work
// on one stream runs in order, so every matmul on the stream may use the same workspace.
void* workspace(int device, Stream stream) {
  static std::mutex mu;
  static auto* blocks = new std::map<std::pair<int, Stream>, void*>();
  std::lock_guard<std::mutex> lock(mu);
  auto it = blocks->find({device, stream});
  if (it != blocks->end()) return it->second;
  DeviceGuard device_guard(device);
  StreamGuard stream_guard(stream);
  void* p = device_allocator(device).allocate(kWorkspaceBytes);
  blocks->emplace(std::make_pair(device, stream), p);
  return p;
}

// A temporary device block on `stream`, returned to the allocator (stream-ordered) when dropped.
class TempBlock {
 public:
  TempBlock(int device, Stream stream, size_t bytes) : device_(device) {
    StreamGuard guard(stream);
    p_ = device_allocator(device).allocate(bytes);
  }
  ~TempBlock() { device_allocator(device_).free(p_); }
  TempBlock(const TempBlock&) = delete;
  TempBlock& operator=(const TempBlock&) = delete;
  void* get() const { return p_; }

 private:
  int device_;
  void* p_ = nullptr;
};

// The largest power of two (<= 256) that divides the address and, for a strided batch, each
// batch's byte offset.
uint32_t alignment(const void* p, int64_t batch, int64_t batch_stride, DataType t) {
  uint64_t v = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p));
  if (batch > 1 && batch_stride != 0) v |= static_cast<uint64_t>(batch_stride) * data_type_size(t);
  uint32_t a = 256;
  while (a > 1 && v % a != 0) a /= 2;
  return a;
}

template <typename T>
void set_layout(const Layout& l, cublasLtMatrixLayoutAttribute_t attr, const T& value, const MatmulProblem& p) {
  FLOW_LT_CHECK(api().cublasLtMatrixLayoutSetAttribute(l.get(), attr, &value, sizeof(value)),
                "cublasLtMatrixLayoutSetAttribute(" + std::to_string(static_cast<int>(attr)) + ")", p);
}

template <typename T>
void set_desc(const MatmulDesc& d, cublasLtMatmulDescAttributes_t attr, const T& value, const MatmulProblem& p) {
  FLOW_LT_CHECK(api().cublasLtMatmulDescSetAttribute(d.get(), attr, &value, sizeof(value)),
                "cublasLtMatmulDescSetAttribute(" + std::to_string(static_cast<int>(attr)) + ")", p);
}

template <typename T>
void set_pref(const Preference& pr, cublasLtMatmulPreferenceAttributes_t attr, const T& value, const MatmulProblem& p) {
  FLOW_LT_CHECK(api().cublasLtMatmulPreferenceSetAttribute(pr.get(), attr, &value, sizeof(value)),
                "cublasLtMatmulPreferenceSetAttribute(" + std::to_string(static_cast<int>(attr)) + ")", p);
}

Layout make_layout(DataType t, int64_t rows, int64_t cols, int64_t ld, int64_t batch, int64_t batch_stride,
                   const MatmulProblem& p) {
  cublasLtMatrixLayout_t raw = nullptr;
  FLOW_LT_CHECK(api().cublasLtMatrixLayoutCreate(&raw, cuda_type(t), static_cast<uint64_t>(rows),
                                                 static_cast<uint64_t>(cols), ld),
                "cublasLtMatrixLayoutCreate", p);
  Layout l(raw);
  if (batch > 1) {
    set_layout(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, static_cast<int32_t>(batch), p);
    set_layout(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, batch_stride, p);
  }
  return l;
}

cublasLtEpilogue_t epilogue(const MatmulProblem& p) {
  switch (p.activation) {
    case Activation::None:
      return p.bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    case Activation::Relu:
      return p.bias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_RELU;
    case Activation::GeluTanh:
      return p.bias ? CUBLASLT_EPILOGUE_GELU_BIAS : CUBLASLT_EPILOGUE_GELU;
  }
  throw std::logic_error("flow: cuBLASLt: unknown activation");
}

// The operand alignments a plan was made for (see the file's note): cuBLASLt's A, B, C, D and the bias.
struct Alignments {
  uint32_t a = 0, b = 0, c = 0, d = 0, bias = 0;
};

// Everything a plan depends on: the problem, the alignments, the device and whether the split was
// forced. Compared as a flat array (a map key built without formatting a string).
using PlanKey = std::array<int64_t, 23>;

PlanKey plan_key(const MatmulProblem& p, const Alignments& al, int device, bool force_split) {
  return {p.batch,
          p.m,
          p.n,
          p.k,
          static_cast<int64_t>(p.in_type),
          static_cast<int64_t>(p.out_type),
          p.a_row,
          p.a_col,
          p.a_batch,
          p.b_row,
          p.b_col,
          p.b_batch,
          p.out_row,
          p.out_batch,
          p.bias,
          p.residual,
          static_cast<int64_t>(p.activation),
          al.a,
          al.b,
          al.c,
          al.d,
          al.bias,
          (static_cast<int64_t>(device) << 1) | (force_split ? 1 : 0)};
}

// One key's descriptors and algorithm, made on its first matmul and kept for the process: the
// matrix layouts, the matmul descriptor (epilogue set; the default one when split), and the
// heuristic's first algorithm. The bias pointer is the one attribute that changes between calls;
// `mu` holds it from its setting to the launch that reads it.
struct Plan {
  std::mutex mu;
  Layout la, lb, lc, ld;
  MatmulDesc desc;
  cublasLtMatmulAlgo_t algo{};
  bool split = false;  // the product alone, then bias and activation by runtime/epilogue_kernel.h
};

struct PlanCache {
  std::mutex mu;
  std::map<PlanKey, std::unique_ptr<Plan>> plans;
};
PlanCache& plan_cache() {
  static auto* cache = new PlanCache();  // never destroyed: matmuls may run from static destructors
  return *cache;
}

std::atomic<int64_t>& plans_made_count() {
  static std::atomic<int64_t> made{0};
  return made;
}

// A new plan for a supported, non-empty problem with k >= 1; `bias` is set on the descriptor before
// the heuristic runs (it reads the bias alignment from it).
std::unique_ptr<Plan> make_plan(const MatmulProblem& p, cublasLtHandle_t h, const void* bias, const Alignments& al,
                                bool force_split) {
  Orientation oa, ob;
  std::string why;
  if (!orient("A", p.m, p.k, p.a_row, p.a_col, &oa, &why) || !orient("B", p.k, p.n, p.b_row, p.b_col, &ob, &why))
    throw std::logic_error("flow: cuBLASLt: " + why);  // supported() checked this

  auto plan = std::make_unique<Plan>();
  // out^T (n x m, column-major) = B^T (n x k) * A^T (k x m): cuBLASLt's A is our B, its B our A.
  const cublasOperation_t trans_a = ob.row_major ? CUBLAS_OP_N : CUBLAS_OP_T;
  const cublasOperation_t trans_b = oa.row_major ? CUBLAS_OP_N : CUBLAS_OP_T;
  plan->la = ob.row_major ? make_layout(p.in_type, p.n, p.k, ob.ld, p.batch, p.b_batch, p)
                          : make_layout(p.in_type, p.k, p.n, ob.ld, p.batch, p.b_batch, p);
  plan->lb = oa.row_major ? make_layout(p.in_type, p.k, p.m, oa.ld, p.batch, p.a_batch, p)
                          : make_layout(p.in_type, p.m, p.k, oa.ld, p.batch, p.a_batch, p);
  plan->lc = make_layout(p.out_type, p.n, p.m, out_ld(p), p.batch, p.out_batch, p);
  plan->ld = make_layout(p.out_type, p.n, p.m, out_ld(p), p.batch, p.out_batch, p);

  cublasLtMatmulDesc_t raw_desc = nullptr;
  FLOW_LT_CHECK(api().cublasLtMatmulDescCreate(&raw_desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), "cublasLtMatmulDescCreate",
                p);
  plan->desc.reset(raw_desc);
  const MatmulDesc& desc = plan->desc;
  set_desc(desc, CUBLASLT_MATMUL_DESC_TRANSA, static_cast<int32_t>(trans_a), p);
  set_desc(desc, CUBLASLT_MATMUL_DESC_TRANSB, static_cast<int32_t>(trans_b), p);
  set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<uint32_t>(epilogue(p)), p);
  if (p.bias) {
    set_desc(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias, p);
    set_desc(desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, static_cast<int32_t>(cuda_type(p.out_type)), p);
  }

  cublasLtMatmulPreference_t raw_pref = nullptr;
  FLOW_LT_CHECK(api().cublasLtMatmulPreferenceCreate(&raw_pref), "cublasLtMatmulPreferenceCreate", p);
  const Preference pref(raw_pref);
  set_pref(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, static_cast<uint64_t>(kWorkspaceBytes), p);
  set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, al.a, p);
  set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, al.b, p);
  set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, al.c, p);
  set_pref(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, al.d, p);
  // The heuristic's first algorithm for `desc` as set now; false when it has none (for an epilogue
  // that the data types or alignments do not allow, it answers NOT_SUPPORTED or nothing). With
  // `any_failure`, every failed query counts as "none" (the fused query: the plain query that
  // follows it reports real errors).
  auto first_algorithm = [&](cublasLtMatmulAlgo_t* algo, bool any_failure) {
    cublasLtMatmulHeuristicResult_t result{};
    int returned = 0;
    const cublasStatus_t status =
        api().cublasLtMatmulAlgoGetHeuristic(h, desc.get(), plan->la.get(), plan->lb.get(), plan->lc.get(),
                                             plan->ld.get(), pref.get(), 1, &result, &returned);
    const bool none = status == CUBLAS_STATUS_NOT_SUPPORTED || (status == CUBLAS_STATUS_SUCCESS && returned < 1);
    if (none || (any_failure && (status != CUBLAS_STATUS_SUCCESS || result.state != CUBLAS_STATUS_SUCCESS)))
      return false;
    FLOW_LT_CHECK(status, "cublasLtMatmulAlgoGetHeuristic", p);
    if (result.state != CUBLAS_STATUS_SUCCESS) fail(result.state, "cublasLtMatmulAlgoGetHeuristic (result)", p);
    *algo = result.algo;
    return true;
  };
  const bool has_epilogue = p.bias || p.activation != Activation::None;
  const bool fused = !force_split && first_algorithm(&plan->algo, has_epilogue);
  if (!fused && !has_epilogue) fail(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmulAlgoGetHeuristic (no algorithm)", p);
  if (!fused) {
    // No algorithm with this epilogue: the product alone (residual included), then the kernel.
    set_desc(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, static_cast<uint32_t>(CUBLASLT_EPILOGUE_DEFAULT), p);
    if (!first_algorithm(&plan->algo, false))
      fail(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmulAlgoGetHeuristic (no algorithm, even without the epilogue)", p);
    plan->split = true;
  }
  return plan;
}

// The plan of `key`, made by make_plan on its first use. Two threads that miss together both make
// one; the first stored wins.
Plan& find_plan(const PlanKey& key, const MatmulProblem& p, cublasLtHandle_t h, const void* bias, const Alignments& al,
                bool force_split) {
  PlanCache& cache = plan_cache();
  {
    std::lock_guard<std::mutex> lock(cache.mu);
    auto it = cache.plans.find(key);
    if (it != cache.plans.end()) return *it->second;
  }
  std::unique_ptr<Plan> made = make_plan(p, h, bias, al, force_split);
  std::lock_guard<std::mutex> lock(cache.mu);
  const auto [it, stored] = cache.plans.emplace(key, std::move(made));
  if (stored) plans_made_count().fetch_add(1, std::memory_order_relaxed);  // the one kept, not the loser
  return *it->second;
}

// Runs a supported, non-empty problem with k >= 1.
void run(const MatmulProblem& p, const void* a, const void* b, const void* bias, const void* residual, void* out,
         Stream stream) {
  const int device = current_device();
  ensure_context(device);
  const cublasLtHandle_t h = handle(device);
  void* const ws = workspace(device, stream);

  const void* c = p.residual ? residual : out;
  Alignments al;
  al.a = alignment(b, p.batch, p.b_batch, p.in_type);  // cuBLASLt's A is our B
  al.b = alignment(a, p.batch, p.a_batch, p.in_type);
  al.c = alignment(c, p.batch, p.out_batch, p.out_type);
  al.d = alignment(out, p.batch, p.out_batch, p.out_type);
  al.bias = p.bias ? alignment(bias, 1, 0, p.out_type) : 0;
  const bool has_epilogue = p.bias || p.activation != Activation::None;
  const bool force_split = has_epilogue && split_forced();

  Plan& plan = find_plan(plan_key(p, al, device, force_split), p, h, bias, al, force_split);
  const float alpha = 1.0f;
  const float beta = p.residual ? 1.0f : 0.0f;
  {
    std::lock_guard<std::mutex> lock(plan.mu);
    if (p.bias && !plan.split) set_desc(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias, p);
    FLOW_LT_CHECK(api().cublasLtMatmul(h, plan.desc.get(), &alpha, b, plan.la.get(), a, plan.lb.get(), &beta, c,
                                       plan.lc.get(), out, plan.ld.get(), &plan.algo, ws, kWorkspaceBytes, stream),
                  "cublasLtMatmul", p);
  }
  if (plan.split) {
    EpilogueShape shape;
    shape.batch = p.batch;
    shape.rows = p.m;
    shape.cols = p.n;
    shape.row_stride = out_ld(p);
    shape.batch_stride = p.out_batch;
    const EpilogueActivation act = p.activation == Activation::Relu       ? EpilogueActivation::Relu
                                   : p.activation == Activation::GeluTanh ? EpilogueActivation::GeluTanh
                                                                          : EpilogueActivation::None;
    apply_bias_activation(p.out_type, act, p.bias ? bias : nullptr, out, shape, stream);
    split_runs().fetch_add(1, std::memory_order_relaxed);
  }
}

}  // namespace

void matmul(const MatmulProblem& p, const void* a, const void* b, const void* bias, const void* residual, void* out,
            Stream stream) {
  std::string why;
  if (!supported(p, &why)) throw std::invalid_argument("flow: cuBLASLt cannot run this matmul: " + why);
  if (p.batch == 0 || p.m == 0 || p.n == 0) return;
  auto need = [&](const void* ptr, const char* what) {
    if (ptr == nullptr)
      throw std::invalid_argument(std::string("flow: cuBLASLt matmul: ") + what + " is null (" + describe(p) + ")");
  };
  need(out, "out");
  if (p.bias) need(bias, "bias");
  if (p.residual) need(residual, "residual");
  require_cuda();
  (void)api();
  if (p.k > 0) {
    need(a, "A");
    need(b, "B");
    run(p, a, b, bias, residual, out, stream);
    return;
  }
  // k == 0: out = act(0 + bias + residual). Run it as a k = 1 product of broadcast zeros, so that the
  // epilogue (bias, residual, activation) is cuBLASLt's as for every other k.
  const int device = current_device();
  const TempBlock zeros(device, stream, static_cast<size_t>(std::max(p.m, p.n)) * data_type_size(p.in_type));
  driver::memset_d8(zeros.get(), 0, static_cast<size_t>(std::max(p.m, p.n)) * data_type_size(p.in_type), stream);
  MatmulProblem q = p;
  q.k = 1;
  q.a_row = 1;  // A: m x 1 zeros
  q.a_col = 1;
  q.a_batch = 0;
  q.b_row = p.n;  // B: 1 x n zeros
  q.b_col = 1;
  q.b_batch = 0;
  run(q, zeros.get(), zeros.get(), bias, residual, out, stream);
}

void load() {
  (void)api();
}

int64_t plans_made() {
  return plans_made_count().load(std::memory_order_relaxed);
}

std::string version() {
  const size_t v = api().cublasLtGetVersion();
  return "cuBLASLt " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

#else  // !FLOW_HAVE_CUBLASLT

namespace {
[[noreturn]] void no_headers() {
  throw std::runtime_error(
      "flow was built without the cuBLASLt header (cublasLt.h, next to cuda.h): GPU matrix products are unavailable");
}
}  // namespace

void matmul(const MatmulProblem& p, const void*, const void*, const void*, const void*, void*, Stream) {
  std::string why;
  if (!supported(p, &why)) throw std::invalid_argument("flow: cuBLASLt cannot run this matmul: " + why);
  if (p.batch == 0 || p.m == 0 || p.n == 0) return;
  no_headers();
}

void load() {
  no_headers();
}

int64_t plans_made() {
  return 0;
}

std::string version() {
  no_headers();
}

#endif  // FLOW_HAVE_CUBLASLT

}  // namespace flow::runtime::cuda::cublaslt
