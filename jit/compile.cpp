#include "jit/compile.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <unordered_map>

#include "dsl/interpreter.h"
#include "dsl/ir_visitor.h"
#include "dsl/serialize.h"
#include "jit/backend.h"
#include "jit/cuda_graph_runner.h"
#include "jit/cuda_launch.h"
#include "jit/kernel_cache.h"
#include "jit/layouts.h"
#include "jit/library_ops.h"
#include "jit/log.h"
#include "runtime/cuda_driver.h"
#include "runtime/cuda_stream.h"
#include "runtime/dense_layout.h"
#include "runtime/onednn.h"
#include "scheduler/channels_last.h"
#include "scheduler/fold_pad.h"
#include "scheduler/fold_scale.h"
#include "scheduler/frozen.h"
#include "scheduler/split_reduction.h"
#include "scheduler/workload_key.h"

namespace flow::jit {

using dsl::Graph;

namespace {

// FLOW_CHANNELS_LAST=0 keeps every activation NCHW (scheduler/channels_last.h).
bool channels_last_enabled() {
  const char* e = std::getenv("FLOW_CHANNELS_LAST");
  return !(e && std::string(e) == "0");
}

bool split_reductions_enabled() {
  const char* e = std::getenv("FLOW_SPLIT_REDUCTIONS");
  return !(e && std::string(e) == "0");
}

std::atomic<uint64_t>& launches() {
  static std::atomic<uint64_t> n{0};
  return n;
}

struct KeyHasher {
  size_t operator()(const dsl::Hash128& k) const { return static_cast<size_t>(k.lo ^ (k.hi * 0x9E3779B97F4A7C15ULL)); }
};

// Loaded kernels of this process, by cache key: a hit skips even the object load.
std::mutex& loaded_mutex() {
  static std::mutex m;
  return m;
}
std::unordered_map<dsl::Hash128, std::shared_ptr<const CompiledKernel>, KeyHasher>& loaded() {
  static std::unordered_map<dsl::Hash128, std::shared_ptr<const CompiledKernel>, KeyHasher> m;
  return m;
}

// FLOW_DUMP_DIR: every kernel compiled in this process is written there as its loop nest and
// its backend source (LLVM IR or CUDA C++), named after the kernel and its cache key.
void dump_kernel(const Backend& backend, const sched::ScheduledKernel& sk, const std::string& key_hex) {
  const char* dir = std::getenv("FLOW_DUMP_DIR");
  if (!dir || !*dir) return;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string base = std::string(dir) + "/" + sk.func.name + "_" + key_hex.substr(0, 12);
  std::ofstream(base + ".loops.txt") << dsl::to_string(sk.func) << "\n";
  std::ofstream(base + (sk.func.target == dsl::Target::CUDA ? ".cu" : ".ll")) << backend.source(sk.func);
}

}  // namespace

std::string default_cuda_arch() {
  if (runtime::cuda::cuda_available()) return runtime::cuda::device_props(runtime::cuda::current_device()).arch;
  return "sm_90";
}

uint64_t total_launches() {
  return launches().load();
}
void reset_total_launches() {
  launches().store(0);
}

namespace {

// A kernel's identity in the caches: its serialized loop nest and Params, and their hash with the
// backend, target and compiler.
struct KernelKey {
  std::string canonical;
  std::string params_json;
  std::string target;
  dsl::Hash128 hash;
};

KernelKey kernel_key(const sched::ScheduledKernel& sk, const CompileOptions& opt) {
  const Backend& backend = backend_for(opt.target);
  KernelKey k;
  dsl::serialize(sk.func, k.canonical);
  k.params_json = sched::params_to_json(sk.params);
  k.target = opt.target == dsl::Target::CUDA ? opt.cuda_arch : backend.host_target();
  k.hash = kernel_cache_key(k.canonical, k.params_json, backend.name(), k.target,
                            backend.compiler_id() + "/codegen-" + codegen_source_hash(), backend.flags());
  return k;
}

std::shared_ptr<const CompiledKernel> load_kernel(const sched::ScheduledKernel& sk, const KernelKey& kk,
                                                  const CompileOptions& opt, bool* compiled_now) {
  if (compiled_now) *compiled_now = false;
  const Backend& backend = backend_for(opt.target);
  const std::string& canonical = kk.canonical;
  const std::string& params_json = kk.params_json;
  const std::string& target = kk.target;
  const dsl::Hash128& key = kk.hash;
  {
    std::lock_guard<std::mutex> lock(loaded_mutex());
    auto it = loaded().find(key);
    if (it != loaded().end()) return it->second;
  }
  auto k = std::make_shared<CompiledKernel>();
  k->scheduled = sk;
  k->key_hex = key.hex();
  k->checks_indices = dsl::calls_intrinsic(sk.func.body, dsl::Intrinsic::CheckIndex);
  KernelCache& cache = global_kernel_cache();
  std::optional<CacheEntry> entry = cache.lookup(key, canonical);
  if (entry) {
    k->cache_hit = true;
  } else {
    const auto t0 = std::chrono::steady_clock::now();
    CacheEntry fresh;
    fresh.canonical_source = canonical;
    fresh.params_json = params_json;
    fresh.binary = backend.compile(sk.func, opt);
    fresh.compile_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    k->compile_seconds = fresh.compile_seconds;
    if (compiled_now) *compiled_now = true;
    dump_kernel(backend, sk, k->key_hex);
    cache.record_compile(fresh.compile_seconds);
    cache.store(key, fresh);
    if (log_enabled("codegen")) {
      std::ostringstream os;
      os << "compiled " << sk.func.name << " (" << sk.scheduler << ", " << params_json << ") for " << backend.name()
         << "/" << target << " in " << fresh.compile_seconds * 1e3 << " ms, key " << k->key_hex;
      log_line("codegen", os.str());
    }
    entry = std::move(fresh);
  }
  backend.load(*k, entry->binary, opt);
  std::lock_guard<std::mutex> lock(loaded_mutex());
  auto [it, inserted] = loaded().emplace(key, k);
  return it->second;
}

}  // namespace

std::shared_ptr<const CompiledKernel> get_kernel(const sched::ScheduledKernel& sk, const CompileOptions& opt,
                                                 bool* compiled_now) {
  return load_kernel(sk, kernel_key(sk, opt), opt, compiled_now);
}

void launch_cpu(const CompiledKernel& k, const std::vector<sched::KernelArg>& args,
                const std::vector<const Tensor*>& values) {
  if (!k.entry && !k.interpreted) throw std::logic_error("kernel " + k.scheduled.func.name + " has no CPU entry point");
  std::vector<dsl::ArgValue> av(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    switch (args[i].kind) {
      case sched::KernelArg::Kind::Buffer: {
        const Tensor* t = values.at(args[i].value);
        if (!t)
          throw std::logic_error("kernel " + k.scheduled.func.name + ": value %" + std::to_string(args[i].value) +
                                 " is not bound");
        av[i].ptr = t->data();
        break;
      }
      case sched::KernelArg::Kind::Int:
        av[i].i64 = args[i].i;
        break;
      case sched::KernelArg::Kind::Float:
        av[i].f64 = args[i].f;
        break;
    }
  }
  if (k.interpreted) {  // (the interpreter raises an index out of range itself)
    dsl::interpret(k.scheduled.func, av);
    ++launches();
    return;
  }
  // The kernel's index checks report into this word (runtime/device_error.h); raised after the run.
  std::array<long long, 4> error_word{};
  if (k.checks_indices) av.emplace_back().ptr = error_word.data();
  reinterpret_cast<void (*)(const dsl::ArgValue*)>(k.entry)(av.data());
  ++launches();
  if (error_word[0] != 0) dsl::throw_check_index_report(error_word[1], error_word[2], error_word[3]);
}

// ---- Executable --------------------------------------------------------------------------------

// Groups computed from frozen inputs only keep their results between runs, unless a result (or a
// view of it) is a graph output: the caller could write into it.
void Executable::mark_cached_groups(const std::vector<bool>& frozen) {
  group_cached_.assign(plan_.groups.size(), false);
  cached_values_.clear();
  std::vector<bool> escapes(graph_.values().size(), false);
  for (int o : graph_.outputs()) escapes[layouts_.root[o]] = true;
  for (size_t gi = 0; gi < plan_.groups.size(); ++gi) {
    const sched::FusionGroup& grp = plan_.groups[gi];
    bool cached = !grp.outputs.empty();
    for (int n : grp.nodes)
      for (int o : graph_.node(n).outputs) cached = cached && frozen[o];
    for (int o : grp.outputs) cached = cached && !escapes[o];
    if (!cached) continue;
    group_cached_[gi] = true;
    cached_values_.insert(cached_values_.end(), grp.outputs.begin(), grp.outputs.end());
  }
}

// Note: a CPU run drops each intermediate right after the group that uses it last, as eager torch
// frees a tensor when its last reference goes, instead of holding every intermediate until the run
// ends. The host block cache (runtime/buffer.h) then hands the block, still in cache, to the next
// output of a similar size: the encoder's forward had touched ~1 GB of distinct buffers per call,
// each kernel writing memory last touched a whole forward earlier. A view keeps its root alive until
// the view's last use (views bind lazily from the root). Graph inputs and outputs, and the results
// of cached groups (kept between runs), are never dropped. Groups run in plan order (library steps
// between the kernels, all ascending), so "after group gi" is well defined.
//
// CUDA runs drop intermediates the same way although their kernels are still in flight: every block
// a run allocates comes from the caching allocator's free list of the current stream, and all of
// the run's kernels and library calls are enqueued on that stream, so the next user of a dropped
// block is ordered after its last reader (runtime/cuda_allocator.h). A run's peak device memory is
// then its largest working set, as in eager torch, not the sum of its intermediates. Under a CUDA
// graph capture the allocator holds what is dropped for the graph instead of reusing it.
void Executable::plan_releases() {
  const size_t nv = graph_.values().size();
  const std::vector<int>& root = layouts_.root;  // a value's own id unless it is a view
  std::vector<int> last(nv, -1);
  for (size_t gi = 0; gi < plan_.groups.size(); ++gi)
    for (int v : plan_.groups[gi].inputs) {
      last[v] = std::max(last[v], static_cast<int>(gi));
      last[root[v]] = std::max(last[root[v]], static_cast<int>(gi));
    }
  std::vector<bool> keep(nv, false);
  for (int v : graph_.inputs()) keep[v] = true;
  for (int v : graph_.outputs()) keep[v] = keep[root[v]] = true;
  for (int v : cached_values_) keep[v] = true;
  release_after_.assign(plan_.groups.size(), {});
  for (size_t v = 0; v < nv; ++v)
    if (last[v] >= 0 && !keep[v] && !keep[root[v]])
      release_after_[static_cast<size_t>(last[v])].push_back(static_cast<int>(v));
}

Executable::~Executable() = default;

int Executable::num_cached_groups() const {
  return static_cast<int>(std::count(group_cached_.begin(), group_cached_.end(), true));
}

std::vector<uint64_t> Executable::frozen_key(const std::vector<Tensor>& inputs) const {
  std::vector<uint64_t> key;
  for (size_t i = 0; i < opt_.frozen_inputs.size() && i < inputs.size(); ++i) {
    if (!opt_.frozen_inputs[i]) continue;
    const Tensor& t = inputs[i];
    key.push_back(t.storage ? t.storage->uid() : 0);
    key.push_back(t.storage ? t.storage->version() : 0);
    key.push_back(static_cast<uint64_t>(t.offset));
  }
  return key;
}

// Note: a compile schedules every kernel first (in plan order), then loads or compiles them on up
// to FLOW_COMPILE_THREADS threads (default: the machine's cores, at most 16): a cold compile of
// ResNet-50 is ~200 independent LLVM or NVRTC compiles, and get_kernel is thread-safe (each LLVM
// compile has its own context, each NVRTC compile its own program; the kernel cache and the CPU
// loader lock what they share). Identical kernels (same loop nest and Params) compile once. Errors
// are reported for the first failing kernel in plan order, as a serial compile would.
namespace {

struct PendingKernel {
  sched::ScheduledKernel sk;
  std::string origin;  // where the Params came from: "heuristic", "record"
  int group = 0;
};

struct LoadedKernels {
  std::vector<std::shared_ptr<const CompiledKernel>> kernels;
  std::vector<bool> compiled_now;
};

size_t compile_threads() {
  if (const char* e = std::getenv("FLOW_COMPILE_THREADS"); e && *e) {
    const long n = std::strtol(e, nullptr, 10);
    return n > 0 ? static_cast<size_t>(n) : 1;
  }
  return std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 16);
}

LoadedKernels load_kernels(const std::vector<PendingKernel>& pending, const CompileOptions& opt) {
  const size_t n = pending.size();
  LoadedKernels out;
  out.kernels.resize(n);
  out.compiled_now.assign(n, false);
  // The first of each set of identical kernels loads; the others take its CompiledKernel.
  std::vector<KernelKey> keys;
  keys.reserve(n);
  std::vector<size_t> firsts;
  std::vector<size_t> first_of(n);
  {
    std::map<std::pair<uint64_t, uint64_t>, size_t> seen;
    for (size_t k = 0; k < n; ++k) {
      keys.push_back(kernel_key(pending[k].sk, opt));
      const auto [it, inserted] = seen.emplace(std::make_pair(keys[k].hash.lo, keys[k].hash.hi), k);
      if (inserted) firsts.push_back(k);
      first_of[k] = it->second;
    }
  }
  std::vector<std::exception_ptr> errors(n);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t f = next.fetch_add(1); f < firsts.size(); f = next.fetch_add(1)) {
      const size_t k = firsts[f];
      try {
        bool now = false;
        out.kernels[k] = load_kernel(pending[k].sk, keys[k], opt, &now);
        out.compiled_now[k] = now;
      } catch (...) {
        errors[k] = std::current_exception();
      }
    }
  };
  const size_t threads = std::min(compile_threads(), firsts.size());
  std::vector<std::thread> helpers;
  for (size_t t = 1; t < threads; ++t) helpers.emplace_back(work);
  work();
  for (std::thread& t : helpers) t.join();
  for (size_t k = 0; k < n; ++k) {
    if (errors[k]) std::rethrow_exception(errors[k]);
    if (!out.kernels[k]) out.kernels[k] = out.kernels[first_of[k]];  // a repeat of an earlier kernel
  }
  return out;
}

}  // namespace

std::shared_ptr<Executable> compile(const Graph& g_in, const std::vector<std::vector<int64_t>>& input_strides,
                                    const CompileOptions& opt) {
  auto exe = std::shared_ptr<Executable>(new Executable());
  CompileOptions options = opt;
  if (const char* e = std::getenv("FLOW_FREEZE"); e && std::string(e) == "0") options.frozen_inputs.clear();
  // The folds rebuild the graph (value ids change), so not when constants are parameters addressed
  // by value id (eager). They run before materialize_unviewable: they add reshapes, which it may copy.
  if (!options.inline_constants) options.frozen_inputs.clear();
  const Graph* g = &g_in;
  sched::PadFoldResult pads;  // a zero pad read by a convolution becomes its padding
  if (options.fuse && options.inline_constants) {
    pads = sched::fold_pad_into_conv(*g, options.target);
    exe->num_folded_pads_ = pads.folded;
    if (pads.folded > 0) g = &pads.graph;
  }
  sched::FoldResult scales;  // frozen per-channel scale/shift after a convolution (batch norm)
  const std::vector<bool> frozen_before = sched::frozen_values(*g, options.frozen_inputs);
  if (std::find(frozen_before.begin(), frozen_before.end(), true) != frozen_before.end()) {
    scales = sched::fold_scale_into_conv(*g, frozen_before);
    exe->num_folded_ = scales.folded;
    if (scales.folded > 0) {
      g = &scales.graph;
      if (log_enabled("fusion"))
        log_line("fusion", "folded " + std::to_string(scales.folded) + " per-channel scale/shift(s) into convolutions");
    }
  }
  // Activations stay NHWC between oneDNN convolutions (float32, CPU) or cuDNN's tensor-core ones
  // (half precision, CUDA), and after channels-last inputs.
  sched::ChannelsLastResult nhwc;
  const bool nhwc_library = options.target == dsl::Target::CUDA || runtime::onednn::available();
  if (options.fuse && options.inline_constants && channels_last_enabled()) {
    // Inputs that are dense NHWC buffers (and not also dense NCHW ones) seed the pass.
    std::vector<bool> nhwc_inputs(g->inputs().size(), false);
    for (size_t i = 0; i < nhwc_inputs.size() && i < input_strides.size(); ++i) {
      const dsl::Shape& shape = g->value(g->inputs()[i]).type.shape;
      const std::vector<int64_t>& st = input_strides[i];
      nhwc_inputs[i] =
          shape.size() == 4 && st.size() == 4 && runtime::dense_nhwc(shape, st) && !runtime::dense_nchw(shape, st);
    }
    nhwc = sched::to_channels_last(*g, options.target, std::move(nhwc_inputs), nhwc_library);
    exe->num_channels_last_ = nhwc.convolutions;
    exe->num_channels_last_ops_ = nhwc.ops;
    if (nhwc.convolutions > 0 || nhwc.ops > 0) {
      g = &nhwc.graph;
      if (log_enabled("fusion"))
        log_line("fusion", "channels-last: " + std::to_string(nhwc.convolutions) + " convolution(s) and " +
                               std::to_string(nhwc.ops) + " op(s) run on NHWC values");
    }
  }
  // A few long reduction rows become two reductions, so a row is not left to one GPU block. Eager
  // graphs too (x.sum() is an eager op as often as a jitted one), where their ids survive.
  sched::SplitReductionResult splits;
  if (options.fuse && options.target == dsl::Target::CUDA && split_reductions_enabled()) {
    sched::SplitReductionOptions so;
    so.keep_leaf_ids = !options.inline_constants;
    splits = sched::split_long_reductions(*g, input_strides, so);
    exe->split_reductions_ = splits.notes;
    if (splits.split() > 0) {
      g = &splits.graph;
      if (log_enabled("fusion"))
        for (const std::string& note : splits.notes) log_line("fusion", "split reduction: " + note);
    }
  }
  exe->graph_ = materialize_unviewable(*g, input_strides);
  const std::vector<bool> frozen = sched::frozen_values(exe->graph_, options.frozen_inputs);
  exe->opt_ = options;
  exe->layouts_ = compute_layouts(exe->graph_, input_strides);
  sched::FusionOptions fo;
  fo.enable = opt.fuse;
  fo.target = opt.target;
  fo.frozen = frozen;
  exe->plan_ = sched::fuse(exe->graph_, fo);
  exe->mark_cached_groups(frozen);
  exe->plan_releases();
  if (log_enabled("fusion")) log_line("fusion", "\n" + exe->plan_.to_string(exe->graph_));

  // Each kernel reads its inputs with their layouts (views included); it writes contiguously.
  sched::GroupLayouts layouts;
  for (size_t v = 0; v < exe->graph_.values().size(); ++v)
    layouts[static_cast<int>(v)] = exe->layouts_.layout[v].strides;

  exe->instances_.reserve(exe->plan_.groups.size());
  std::vector<PendingKernel> pending;               // scheduled here, loaded or compiled below
  std::vector<std::vector<int64_t>> value_strides;  // per graph value (library workload keys)
  for (size_t gi = 0; gi < exe->plan_.groups.size(); ++gi) {
    const auto& grp = exe->plan_.groups[gi];
    if (grp.kind == sched::GroupKind::Library) {  // no kernel: a library call (jit/library_ops.h)
      LibraryStep step = make_library_step(exe->graph_, grp, static_cast<int>(gi), opt.target);
      step.exhaustive_search = opt.conv_search == "exhaustive";
      if (value_strides.empty()) {  // once per compile, for the library workload keys
        value_strides.resize(exe->graph_.values().size());
        for (size_t v = 0; v < value_strides.size(); ++v) value_strides[v] = exe->layouts_.layout[v].strides;
      }
      step.workload = library_workload_key(exe->graph_, step, value_strides);
      step.weights_frozen = step.operands.size() > 1 && frozen[step.operands[1]];
      if (opt.tuning) {
        const autotune::TuningRecord* rec = opt.tuning->best(step.workload, target_id(opt));
        if (rec && rec->scheduler == step.library) {
          try {
            step.impl = autotune::Json::parse(rec->params_json).at("impl").as_string();
            step.impl_origin = "record";
          } catch (const std::exception& e) {
            log_line("tuning", "ignoring the record of library workload " + step.workload + ": " + e.what());
          }
        }
      }
      exe->library_steps_.push_back(std::move(step));
      continue;
    }
    if (grp.kind == sched::GroupKind::Opaque)
      throw dsl::OpError(dsl::OpError::Kind::NotImplemented,
                         "op '" + exe->graph_.node(grp.nodes[0]).op + "' has no code generator yet");
    exe->instances_.push_back(sched::specialize(exe->graph_, grp, layouts, opt.inline_constants));
    const sched::KernelInstance& ki = exe->instances_.back();
    const sched::Scheduler& s = sched::scheduler_for(ki, opt.target);
    sched::Params params = s.heuristics(ki, opt.target);
    std::string origin = "heuristic";
    if (opt.tuning) {
      const std::string workload = sched::workload_key(ki, opt.target);
      const autotune::TuningRecord* rec = opt.tuning->best(workload, target_id(opt));
      if (rec && rec->scheduler == s.name()) {
        try {
          const sched::Params recorded = sched::params_from_json(rec->params_json);
          const std::string problem = sched::params_problem(recorded);
          if (!problem.empty()) throw std::invalid_argument(problem + ": " + rec->params_json);
          params = recorded;
          origin = "record";
        } catch (const std::exception& e) {
          log_line("tuning", "ignoring the record of workload " + workload + ": " + e.what());
        }
      }
      if (log_enabled("tuning"))
        log_line("tuning", std::string(rec ? "record" : "no record") + " for workload " + workload + " (group " +
                               std::to_string(gi) + ")");
    }
    pending.push_back({s.schedule(ki, params, opt.target), origin, static_cast<int>(gi)});
  }
  const LoadedKernels loaded_kernels = load_kernels(pending, opt);
  for (size_t k = 0; k < pending.size(); ++k) {
    exe->kernels_.push_back(loaded_kernels.kernels[k]);
    exe->num_compiled_ += loaded_kernels.compiled_now[k] ? 1 : 0;
    exe->kernel_compiled_.push_back(loaded_kernels.compiled_now[k]);
    exe->kernel_origin_.push_back(pending[k].origin);
    exe->kernel_args_.push_back(pending[k].sk.args);
    exe->kernel_group_.push_back(pending[k].group);
  }
  if (options.cuda_graphs && options.target == dsl::Target::CUDA)
    exe->graph_runner_ = std::make_unique<CudaGraphRunner>(*exe);
  return exe;
}

std::vector<Tensor> Executable::run(const std::vector<Tensor>& inputs) const {
  if (graph_runner_) return graph_runner_->run(inputs);
  return run_impl(inputs, {}, nullptr, nullptr, true);
}

std::vector<Tensor> Executable::run_checked(const std::vector<Tensor>& inputs) const {
  if (graph_runner_) return graph_runner_->run(inputs);
  return run_impl(inputs, {}, nullptr, nullptr, true, nullptr, /*check_inputs=*/false);
}

std::string Executable::input_mismatch(size_t i, const Tensor& t) const {
  const Graph& g = graph_;
  if (i >= g.inputs().size()) return "does not exist: the graph has " + std::to_string(g.inputs().size()) + " inputs";
  const dsl::TensorType& want = g.value(g.inputs()[i]).type;
  if (!t.storage) return "has no storage";
  if (t.sizes != want.shape || t.dtype != want.dtype)
    return std::string("is ") + dsl::dtype_name(t.dtype) + dsl::shape_str(t.sizes) +
           " but the graph was compiled for " + want.str();
  const auto device = opt_.target == dsl::Target::CUDA ? runtime::DeviceType::CUDA : runtime::DeviceType::CPU;
  if (t.device() != device)
    return std::string("is on ") + runtime::device_type_name(t.device()) + ", the graph was compiled for " +
           runtime::device_type_name(device);
  const std::vector<int64_t>& st = layouts_.layout[g.inputs()[i]].strides;
  bool fits = t.strides.size() == t.sizes.size();
  if (fits && t.numel() != 0)
    for (size_t d = 0; d < st.size(); ++d) fits = fits && (t.sizes[d] == 1 || t.strides[d] == st[d]);
  if (!fits)
    return "has strides " + dsl::shape_str(t.strides) + " but the graph was compiled for strides " + dsl::shape_str(st);
  return {};
}

void Executable::check_input(size_t i, const Tensor& t) const {
  if (std::string why = input_mismatch(i, t); !why.empty())
    throw std::invalid_argument("input " + std::to_string(i) + " " + why);
}

bool Executable::graph_captured() const {
  return graph_runner_ && graph_runner_->captured();
}

int64_t Executable::num_graph_replays() const {
  return graph_runner_ ? graph_runner_->num_replays() : 0;
}

bool Executable::frozen_cache_current(const std::vector<Tensor>& inputs) const {
  if (cached_values_.empty()) return true;
  const std::vector<uint64_t> key = frozen_key(inputs);
  std::lock_guard<std::mutex> lock(frozen_results_->mu);
  return frozen_results_->valid && frozen_results_->key == key;
}

std::vector<Tensor> Executable::run(const std::vector<Tensor>& inputs,
                                    const std::vector<std::pair<int, double>>& constants) const {
  return run_impl(inputs, constants, nullptr, nullptr, true);
}

std::vector<Tensor> Executable::run_with_hook(const std::vector<Tensor>& inputs, const KernelHook& hook,
                                              const LibraryHook& library_hook, bool use_frozen_cache) const {
  return run_impl(inputs, {}, hook ? &hook : nullptr, library_hook ? &library_hook : nullptr, use_frozen_cache);
}

void Executable::set_library_impl(size_t i, const std::string& impl, const std::string& origin) {
  LibraryStep& step = library_steps_.at(i);
  step.impl = impl;
  step.impl_origin = origin;
  if (graph_runner_) graph_runner_->reset();  // a captured graph would keep the old choice
}

void Executable::replace_kernel(size_t k, std::shared_ptr<const CompiledKernel> kernel,
                                std::vector<sched::KernelArg> args, const std::string& origin) {
  if (k >= kernels_.size() || !kernel) throw std::out_of_range("Executable::replace_kernel: bad kernel index");
  kernels_[k] = std::move(kernel);
  kernel_args_[k] = std::move(args);
  kernel_origin_[k] = origin;
  if (graph_runner_) graph_runner_->reset();  // a captured graph would launch the old kernel
}

std::string target_id(const CompileOptions& opt) {
  const Backend& backend = backend_for(opt.target);
  return std::string(backend.name()) + "/" + (opt.target == dsl::Target::CUDA ? opt.cuda_arch : backend.host_target());
}

std::vector<Tensor> Executable::run_impl(const std::vector<Tensor>& inputs,
                                         const std::vector<std::pair<int, double>>& constants, const KernelHook* hook,
                                         const LibraryHook* library_hook, bool use_frozen_cache,
                                         std::vector<Tensor>* keep_alive, bool check_inputs) const {
  const bool gpu = opt_.target == dsl::Target::CUDA;
  const auto dev = gpu ? runtime::DeviceType::CUDA : runtime::DeviceType::CPU;
  const Graph& g = graph_;
  if (inputs.size() != g.inputs().size())
    throw std::invalid_argument("expected " + std::to_string(g.inputs().size()) + " inputs, got " +
                                std::to_string(inputs.size()));
  // Values computed or re-viewed by this run; inputs are bound where the caller holds them (a
  // copy each would be two allocations per weight per call).
  std::vector<Tensor> slots(g.values().size());
  std::vector<const Tensor*> bound(g.values().size(), nullptr);
  for (size_t i = 0; i < inputs.size(); ++i) {
    bound[g.inputs()[i]] = &inputs[i];
    if (check_inputs) check_input(i, inputs[i]);
  }
  // Parameter-only groups: reuse their results while the frozen inputs are the ones they came from.
  const bool caching = !cached_values_.empty() && constants.empty();
  std::vector<uint64_t> key;
  bool reuse = false;
  if (caching) {
    key = frozen_key(inputs);
    if (use_frozen_cache) {
      std::lock_guard<std::mutex> lock(frozen_results_->mu);
      if (frozen_results_->valid && frozen_results_->key == key) {
        reuse = true;
        for (size_t i = 0; i < cached_values_.size(); ++i) slots[cached_values_[i]] = frozen_results_->values[i];
      }
    }
    if (reuse)
      for (int v : cached_values_) bound[v] = &slots[v];
  }
  // A graph capture must not fill the cache below: the fill synchronizes, which ends a capture.
  if (keep_alive && caching && !reuse)
    throw std::logic_error("a CUDA graph capture needs the frozen-results cache filled by an earlier run");
  auto skip_group = [&](int gi) { return reuse && group_cached_[gi]; };
  auto release_after = [&](int gi) {
    for (int v : release_after_[static_cast<size_t>(gi)]) {
      slots[v] = Tensor();
      bound[v] = nullptr;
    }
  };
  // A view is its root's storage seen through the layout computed at compile time.
  auto bind_view = [&](int v) {
    if (bound[v] || !layouts_.is_view[v]) return;
    const Tensor* root = bound[layouts_.root[v]];
    if (!root) throw std::logic_error("view %" + std::to_string(v) + " of an unbound value");
    const dsl::Layout& l = layouts_.layout[v];
    slots[v] = *root;
    slots[v].sizes = l.sizes;
    slots[v].strides = l.strides;
    slots[v].offset = root->offset + l.offset;
    bound[v] = &slots[v];
  };
  auto bind_group = [&](const sched::FusionGroup& grp) {
    for (int v : grp.inputs) bind_view(v);
    for (int v : grp.outputs) {
      if (bound[v]) continue;
      slots[v] = Tensor::empty(g.value(v).type.shape, g.value(v).type.dtype, dev);
      bound[v] = &slots[v];
    }
  };
  // Library groups run in plan order between the kernels (run_library_group, jit/library_ops.h).
  size_t next_library = 0;
  auto run_library_before = [&](int group) {
    for (; next_library < library_steps_.size() && library_steps_[next_library].group < group; ++next_library) {
      const LibraryStep& step = library_steps_[next_library];
      for (const auto& e : step.epilogue)
        for (const auto& c : constants)
          if (e.scalar >= 0 && e.scalar == c.first)
            throw dsl::OpError(dsl::OpError::Kind::NotImplemented,
                               "a library post-op built from a constant cannot take a new constant value");
      if (!skip_group(step.group)) {
        bind_group(plan_.groups[step.group]);
        if (library_hook) (*library_hook)(next_library, bound);
        run_library_group(g, step, bound);
      }
      release_after(step.group);
    }
  };
  auto run_kernel = [&](size_t k) {
    const auto& grp = plan_.groups[kernel_group_[k]];
    bind_group(grp);
    bool empty = false;
    for (int64_t s : instances_[k].kept) empty = empty || s == 0;
    if (empty) return;
    if (hook) (*hook)(k, bound);
    std::vector<sched::KernelArg> with_constants;
    if (!constants.empty()) {
      with_constants = kernel_args_[k];
      for (auto& a : with_constants) {
        if (a.kind == sched::KernelArg::Kind::Buffer || a.value < 0) continue;
        for (const auto& [v, x] : constants)
          if (v == a.value) {
            a.f = x;
            a.i = static_cast<int64_t>(x);
          }
      }
    }
    const std::vector<sched::KernelArg>& args = constants.empty() ? kernel_args_[k] : with_constants;
    if (gpu) {
      launch_cuda(*kernels_[k], args, bound);
      ++launches();
    } else {
      launch_cpu(*kernels_[k], args, bound);
    }
  };
  for (size_t k = 0; k < kernels_.size(); ++k) {
    run_library_before(kernel_group_[k]);
    if (!skip_group(kernel_group_[k])) run_kernel(k);
    release_after(kernel_group_[k]);
  }
  run_library_before(static_cast<int>(plan_.groups.size()));
  if (caching && !reuse) {
    std::vector<Tensor> values;
    values.reserve(cached_values_.size());
    bool complete = true;
    for (int v : cached_values_) {
      complete = complete && bound[v];
      if (bound[v]) values.push_back(*bound[v]);
    }
    if (complete) {
      // On a GPU the kernels that wrote them may still run: a run on another stream must not read
      // them before they are done (a cache fill happens once per parameter state).
      if (gpu) runtime::cuda::synchronize();
      std::lock_guard<std::mutex> lock(frozen_results_->mu);
      frozen_results_->key = std::move(key);
      frozen_results_->values = std::move(values);
      frozen_results_->valid = true;
    }
  }
  std::vector<Tensor> outs;
  for (int v : g.outputs()) {
    bind_view(v);
    if (!bound[v]) {
      const auto& val = g.value(v);
      if (val.kind != dsl::ValueKind::Constant)
        throw std::logic_error("graph output %" + std::to_string(v) + " was not computed");
      // A constant output: materialize it with a one-element fill.
      throw dsl::OpError(dsl::OpError::Kind::NotImplemented, "returning a constant from a compiled function");
    }
    outs.push_back(*bound[v]);
  }
  if (keep_alive) {
    for (const Tensor& t : inputs)
      if (t.storage) keep_alive->push_back(t);
    for (const Tensor& t : slots)
      if (t.storage) keep_alive->push_back(t);
  }
  return outs;
}

std::string Executable::explain(bool with_source) const {
  std::ostringstream os;
  os << "== graph ==\n" << graph_.to_string() << "\n";
  os << "== fusion: " << plan_.groups.size() << " group(s) ==\n" << plan_.to_string(graph_) << "\n";
  os << "== kernels: " << kernels_.size() << " generated, " << library_steps_.size() << " library calls ("
     << dsl::target_name(opt_.target) << ") ==\n";
  if (num_folded_pads_ > 0) os << "folded " << num_folded_pads_ << " zero pad(s) into convolution padding\n";
  for (const std::string& note : split_reductions_)
    os << "split reduction (FLOW_SPLIT_REDUCTIONS=0 turns this off): " << note << "\n";
  if (num_channels_last_ > 0 || num_channels_last_ops_ > 0)
    os << "channels-last: " << num_channels_last_ << " convolution(s) produce NHWC, and " << num_channels_last_ops_
       << " elementwise, pad, slice, index_select and cat op(s) after them or after channels-last inputs run on NHWC "
          "(FLOW_CHANNELS_LAST=0 turns this off)\n";
  if (opt_.cuda_graphs)
    os << "CUDA graph: " << (graph_runner_ ? graph_runner_->status() : std::string("off (the target is the CPU)"))
       << "\n";
  if (!opt_.frozen_inputs.empty())
    os << "parameter-only work: " << num_cached_groups() << " group(s) computed once and cached between calls; "
       << num_folded_ << " convolution(s) absorbed a per-channel scale/shift (batch norm)\n";
  for (const LibraryStep& step : library_steps_)
    os << "group " << step.group << ": library call: " << step.describe() << "  (implementation: " << step.impl_origin
       << ")" << (group_cached(step.group) ? "  [cached: parameters only]" : "")
       << (step.weights_frozen ? "  [frozen weights]" : "") << "\n";
  for (size_t k = 0; k < kernels_.size(); ++k) {
    const auto& ck = *kernels_[k];
    const auto& sk = ck.scheduled;
    os << "kernel " << k << ": " << sk.func.name
       << (group_cached(kernel_group_[k]) ? "  [cached: parameters only]" : "") << "  scheduler=" << sk.scheduler
       << "  params=" << sched::params_to_json(sk.params) << "\n  key=" << ck.key_hex
       << (kernel_compiled_[k] ? "  (compiled in " + std::to_string(ck.compile_seconds * 1e3) + " ms)"
                               : "  (from cache)")
       << "  params from " << kernel_origin_[k] << "\n  coalesced domain: kept " << dsl::shape_str(instances_[k].kept)
       << " reduced " << dsl::shape_str(instances_[k].reduced) << "\n";
    os << "-- loop nest --\n" << dsl::to_string(sk.func) << "\n";
    if (with_source) {
      const auto& ki = instances_[k];
      const sched::Scheduler& s = sched::scheduler_for(ki, dsl::Target::CUDA);
      const sched::ScheduledKernel gpu = s.schedule(ki, s.heuristics(ki, dsl::Target::CUDA), dsl::Target::CUDA);
      os << "-- CUDA C++ (" << opt_.cuda_arch << ") --\n" << backend_for(dsl::Target::CUDA).source(gpu.func) << "\n";
    }
  }
  return os.str();
}

}  // namespace flow::jit
