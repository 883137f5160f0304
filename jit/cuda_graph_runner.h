// Note: CUDA-graph replay of a whole Executable (CompileOptions::cuda_graphs, like torch.compile's
// mode="reduce-overhead"; torch's CUDA graph trees are the model, simplified to one graph per
// Executable). The first run is a warm-up on the normal path: kernels are loaded, library choices
// made and the frozen-results cache filled. The second run runs once more, on the side stream the
// capture uses (warming it), then copies its inputs into static input tensors the runner owns,
// captures one run over them into a CudaGraph (runtime/cuda_graph.h) on that side stream, keeps
// every tensor that run bound (the graph addresses them), and launches the graph.
// Every later run copies its inputs into the static inputs, replays, and returns copies of the
// static outputs, so a returned tensor is never overwritten by a later replay: the cost is one
// device-to-device copy per input and per output, all asynchronous on the caller's current stream.
// Outputs are returned with the strides the normal path gives them, but never alias an input.
//
// Frozen inputs (CompileOptions::frozen_inputs: parameters) are not copied: the graph reads them
// where they are. When a frozen input's storage, version or offset changes (Executable::frozen_key),
// the graph is dropped, that run goes the normal path (refilling the frozen-results cache) and the
// next run captures again. A run whose inputs do not match the signature the graph was captured
// for, or that runs on another device, goes the normal path (which reports a wrong signature).
//
// Runs are serialized by a mutex. Graph runs of all Executables on a device are ordered: one on
// another stream than the previous graph run waits for that run first (graphs captured on a device
// share the capture stream's library workspaces, see the .cpp). Any failure of the capture or of its first launch is
// logged once (FLOW_LOG=cuda) with the reason, turns graphs off for this Executable (explain() shows the reason), and
// the run goes the normal path: the caller never sees it.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "jit/tensor.h"

namespace flow::jit {

class Executable;

class CudaGraphRunner {
 public:
  // `exe` owns the runner and outlives it. Nothing touches the driver until the first run.
  explicit CudaGraphRunner(const Executable& exe);
  ~CudaGraphRunner();  // waits for the last run's device work, then frees the graph and its buffers
  CudaGraphRunner(const CudaGraphRunner&) = delete;
  CudaGraphRunner& operator=(const CudaGraphRunner&) = delete;

  // Executable::run(inputs) with graphs (see the note at the top).
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);
  // Drops the graph (the Executable's kernels or library choices changed); the next run warms up
  // again and the one after captures.
  void reset();
  bool captured() const;
  // Runs served by replaying a graph captured by an earlier run.
  int64_t num_replays() const { return replays_.load(std::memory_order_relaxed); }
  // For explain(): "captured, N replays", "off (<reason>)" or "not captured yet (...)".
  std::string status() const;

 private:
  struct Captured;
  std::vector<Tensor> run_normally(const std::vector<Tensor>& inputs) const;
  // Whether `inputs` fit the compiled signature and layouts on the current device (the checks of
  // Executable::run_impl, which the replay path skips).
  bool fits_signature(const std::vector<Tensor>& inputs) const;
  std::vector<Tensor> capture_and_launch(const std::vector<Tensor>& inputs);   // caller holds mu_
  std::vector<Tensor> launch(const std::vector<Tensor>& inputs, bool replay);  // caller holds mu_
  void drop_locked() noexcept;
  void disable_locked(const std::string& reason);

  const Executable& exe_;
  mutable std::mutex mu_;
  std::atomic<bool> disabled_{false};
  std::string disabled_reason_;
  bool warmed_up_ = false;
  std::unique_ptr<Captured> captured_;
  std::atomic<int64_t> replays_{0};
};

}  // namespace flow::jit
