// Note: jit::compile turns a tensor-level graph into an Executable: fuse, specialize each group
// to the argument layouts, schedule (heuristic Params, or tuned ones later), generate code, and
// fetch each kernel from the kernel cache (memory -> disk -> compile). The Executable runs the
// kernels in order over buffers it allocates for intermediates and outputs.
#pragma once
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "autotune/records.h"
#include "dsl/graph.h"
#include "dsl/stmt.h"
#include "jit/layouts.h"
#include "jit/library_ops.h"
#include "jit/tensor.h"
#include "scheduler/fusion.h"
#include "scheduler/kernel_instance.h"
#include "scheduler/scheduler.h"

namespace flow::jit {

class CudaGraphRunner;

struct CompileOptions {
  dsl::Target target = dsl::Target::CPU;
  std::string cuda_arch = "sm_90";  // CUDA target: the architecture NVRTC compiles for (the
                                    // current device's when a GPU is present: see default_cuda_arch)
  bool fuse = true;                 // false: one kernel per op
  bool inline_constants = true;     // false: scalar constants become kernel parameters (eager)
  // Tuning records consulted when scheduling: a record for a kernel's workload on this target
  // replaces the heuristic Params (autotune/records.h). Null: heuristics only.
  std::shared_ptr<const autotune::TuningDatabase> tuning;
  // One flag per graph input (graph-input order), or empty: the input is a parameter or buffer that
  // keeps its value from call to call (scheduler/frozen.h). Then work on frozen inputs only runs once
  // and is cached by the Executable (recomputed when a frozen input's storage or version changes),
  // per-channel scales and shifts fold into convolution weights (scheduler/fold_scale.h), and
  // oneDNN keeps frozen convolution weights in its own layout between calls.
  std::vector<bool> frozen_inputs;
  // CUDA target only (like torch.compile's mode="reduce-overhead"): after a warm-up run, the second
  // run captures the whole Executable into one CUDA graph and later runs replay it: one driver call
  // instead of one launch per kernel, for launch-bound models with static shapes. Each run copies its
  // inputs into buffers the graph owns and returns copies of the graph's outputs (one extra device
  // copy per input and output); runs of the Executable are serialized. A failed capture falls back to
  // normal runs (FLOW_LOG=cuda says why). See jit/cuda_graph_runner.h.
  bool cuda_graphs = false;
  // CUDA convolutions: "heuristic" (cuDNN's ranking, nothing timed) or "exhaustive" (every cuDNN
  // algorithm timed on the first call's buffers). A tuning record's choice wins over both.
  std::string conv_search = "heuristic";
};

// The target a kernel is built for, as tuning records name it: backend and CPU model/features
// ("llvm/llvm-14.0.6/skylake-avx512/<feature hash>") or CUDA arch ("nvrtc/sm_90").
std::string target_id(const CompileOptions& opt);

// A kernel ready to run: its schedule, its code and how it was obtained.
struct CompiledKernel {
  sched::ScheduledKernel scheduled;
  std::string key_hex;
  bool cache_hit = false;      // found in the memory or disk cache (no compile)
  double compile_seconds = 0;  // 0 on a hit
  void* entry = nullptr;       // CPU: the function pointer
  std::string cubin;           // CUDA target: the cubin (loaded once per device by jit/cuda_launch.h)
  std::string cuda_source;     // CUDA target
  std::string ptx;
  bool checks_indices = false;  // the body calls CheckIndex: the kernel takes an error word last
  bool interpreted = false;     // CPU without LLVM: the reference interpreter runs scheduled.func
};

// The architecture of the current CUDA device ("sm_90"), or "sm_90" without a GPU.
std::string default_cuda_arch();

// Loads or compiles one scheduled kernel for a target (thread-safe; cached in memory by key).
// `compiled_now` (optional) is set when this call compiled the kernel (neither memory nor disk had it).
std::shared_ptr<const CompiledKernel> get_kernel(const sched::ScheduledKernel& sk, const CompileOptions& opt,
                                                 bool* compiled_now = nullptr);
// Runs a CPU kernel with the launch arguments of one specialization (a cached kernel serves many
// shapes, so its own `scheduled.args` are those of whichever instance compiled it first): buffer
// args from `values` (indexed by graph value id).
void launch_cpu(const CompiledKernel& k, const std::vector<sched::KernelArg>& args,
                const std::vector<const Tensor*>& values);

class Executable {
 public:
  ~Executable();
  // Runs the graph: inputs in graph-input order (any strides matching those compiled for);
  // returns the outputs in graph-output order (new contiguous tensors, or input aliases).
  std::vector<Tensor> run(const std::vector<Tensor>& inputs) const;
  // The same, with new values for the graph's constants passed as kernel parameters (compiled with
  // inline_constants=false): `constants` maps each constant value id to its new value. Eager mode
  // reuses one Executable per signature this way.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs,
                          const std::vector<std::pair<int, double>>& constants) const;
  // run() for inputs the caller has checked against the graph's inputs already (shapes, dtypes,
  // devices, the compiled strides): skips those checks. A jitted model's weights are graph inputs,
  // hundreds per call, and checked once each when a caller keeps them (python/py_executable.h).
  std::vector<Tensor> run_checked(const std::vector<Tensor>& inputs) const;
  // Why `t` cannot be graph input `i` ("is float32[4] but the graph was compiled for float32[5]",
  // "is on cpu, ...", "has strides ..."), or "" when it can: shape, dtype, device type and the
  // compiled strides (size-1 dims and empty tensors match any). The one definition of an input
  // check: run(), CUDA graph replays and the Python binding (which checks once per kept input).
  std::string input_mismatch(size_t i, const Tensor& t) const;
  // Throws std::invalid_argument ("input <i> " + input_mismatch) unless `t` can be graph input `i`.
  void check_input(size_t i, const Tensor& t) const;

  const dsl::Graph& graph() const { return graph_; }
  const sched::FusionPlan& plan() const { return plan_; }
  const std::vector<std::shared_ptr<const CompiledKernel>>& kernels() const { return kernels_; }
  int num_kernels() const { return static_cast<int>(kernels_.size()); }
  // Parameter-only work (CompileOptions::frozen_inputs): convolutions that absorbed a batch norm's
  // scale/shift, and whether plan group `gi` is computed once and cached.
  int num_folded() const { return num_folded_; }
  int num_folded_pads() const { return num_folded_pads_; }  // zero pads absorbed by convolutions
  // Reductions split in two (scheduler/split_reduction.h), one line each.
  const std::vector<std::string>& split_reductions() const { return split_reductions_; }
  int num_channels_last() const { return num_channels_last_; }  // convolutions producing NHWC
  bool group_cached(size_t gi) const { return gi < group_cached_.size() && group_cached_[gi]; }
  int num_cached_groups() const;
  // Library calls (conv, GEMM through oneDNN), in plan order; they are not kernels.
  const std::vector<LibraryStep>& library_steps() const { return library_steps_; }
  int num_library_calls() const { return static_cast<int>(library_steps_.size()); }
  int num_compiled() const { return num_compiled_; }  // kernels this compile produced (not cached)
  // CompileOptions::cuda_graphs: whether runs replay a captured CUDA graph now, and how many runs
  // did (the capturing run itself is not counted).
  bool graph_captured() const;
  int64_t num_graph_replays() const;
  // Graph, fusion groups, rejected merges, kernels with Params and cache status, loop nests and
  // (with_source) the generated CUDA C++ of each kernel for `cuda_arch`.
  std::string explain(bool with_source = true) const;

  // ---- for the autotuner (autotune/tuner.h) ----
  const CompileOptions& options() const { return opt_; }
  const sched::KernelInstance& instance(size_t k) const { return instances_.at(k); }
  // Where kernel k's Params came from: "heuristic", "record" (tuning records) or "tuned".
  const std::string& kernel_origin(size_t k) const { return kernel_origin_.at(k); }
  int kernel_group(size_t k) const { return kernel_group_.at(k); }  // kernel k's fusion group
  // Kernel k's launch arguments (kernels()[k]->scheduled.args are those of whichever instance
  // compiled the shared kernel first).
  const std::vector<sched::KernelArg>& kernel_args(size_t k) const { return kernel_args_.at(k); }
  // Swaps kernel k for another schedule of the same instance (its launch arguments `args`).
  void replace_kernel(size_t k, std::shared_ptr<const CompiledKernel> kernel, std::vector<sched::KernelArg> args,
                      const std::string& origin);
  // Called before each kernel launch with the kernel's index and every value bound so far (indexed
  // by graph value id; null for values not bound yet and for intermediates already released after
  // their last use), so a candidate kernel can be launched in its place on the real buffers.
  using KernelHook = std::function<void(size_t k, const std::vector<const Tensor*>& values)>;
  // The same before each library call (index into library_steps()), with its operands bound.
  using LibraryHook = std::function<void(size_t step, const std::vector<const Tensor*>& values)>;
  // Hooks see every kernel (parameter-only groups included) unless `use_frozen_cache`, which runs as
  // run() does: cached groups are skipped when their results are current.
  std::vector<Tensor> run_with_hook(const std::vector<Tensor>& inputs, const KernelHook& hook,
                                    const LibraryHook& library_hook = nullptr, bool use_frozen_cache = false) const;
  // Sets the library implementation of step i ("" = the library's first choice).
  void set_library_impl(size_t i, const std::string& impl, const std::string& origin);

 private:
  // `keep_alive` (a CUDA graph capture, jit/cuda_graph_runner.h): receives every tensor the run bound
  // (inputs, cached results, intermediates, outputs); the frozen-results cache must then be current.
  std::vector<Tensor> run_impl(const std::vector<Tensor>& inputs, const std::vector<std::pair<int, double>>& constants,
                               const KernelHook* hook, const LibraryHook* library_hook, bool use_frozen_cache,
                               std::vector<Tensor>* keep_alive = nullptr, bool check_inputs = true) const;
  // Whether the frozen-results cache holds the results for these inputs' frozen inputs (or there
  // is nothing to cache).
  bool frozen_cache_current(const std::vector<Tensor>& inputs) const;
  // The identity of the frozen inputs of a run: (storage uid, version, offset) of each.
  std::vector<uint64_t> frozen_key(const std::vector<Tensor>& inputs) const;
  // Sets group_cached_ and cached_values_ from the plan (`frozen` per graph value).
  void mark_cached_groups(const std::vector<bool>& frozen);
  // Sets release_after_ from the plan, the layouts and cached_values_.
  void plan_releases();
  friend std::shared_ptr<Executable> compile(const dsl::Graph&, const std::vector<std::vector<int64_t>>&,
                                             const CompileOptions&);
  friend class CudaGraphRunner;
  dsl::Graph graph_;
  CompileOptions opt_;
  ValueLayouts layouts_;
  sched::FusionPlan plan_;
  std::vector<sched::KernelInstance> instances_;
  std::vector<std::shared_ptr<const CompiledKernel>> kernels_;
  std::vector<std::vector<sched::KernelArg>> kernel_args_;  // launch arguments of each kernel
  std::vector<int> kernel_group_;                           // group index of each kernel
  std::vector<bool> kernel_compiled_;                       // whether this compile produced each kernel
  std::vector<std::string> kernel_origin_;                  // see kernel_origin()
  int num_compiled_ = 0;
  std::vector<LibraryStep> library_steps_;  // Library groups (jit/library_ops.h), ascending group
  int num_folded_ = 0;
  int num_folded_pads_ = 0;
  std::vector<std::string> split_reductions_;
  int num_channels_last_ = 0;
  int num_channels_last_ops_ = 0;   // ops moved to NHWC values (sched::ChannelsLastResult::ops)
  std::vector<bool> group_cached_;  // per plan group
  std::vector<int> cached_values_;  // the outputs of cached groups
  // Per plan group: the values a CPU run drops right after that group, their last use (see
  // plan_releases in jit/compile.cpp).
  std::vector<std::vector<int>> release_after_;
  // The results of cached groups from the last run that computed them, and the frozen inputs'
  // identity then (guarded by mu: runs may be concurrent).
  struct FrozenResults {
    std::mutex mu;
    std::vector<uint64_t> key;
    std::vector<Tensor> values;  // parallel to cached_values_
    bool valid = false;
  };
  std::unique_ptr<FrozenResults> frozen_results_ = std::make_unique<FrozenResults>();
  // CompileOptions::cuda_graphs on the CUDA target: runs go through it (null otherwise).
  std::unique_ptr<CudaGraphRunner> graph_runner_;
};

// Compiles `g` for inputs with the given element strides (one vector per graph input; empty
// vector = contiguous).
std::shared_ptr<Executable> compile(const dsl::Graph& g, const std::vector<std::vector<int64_t>>& input_strides,
                                    const CompileOptions& opt);

}  // namespace flow::jit
