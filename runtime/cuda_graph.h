// Note: CUDA graphs. CudaGraph::capture records the work a function enqueues on a stream (kernel
// launches, copies, memsets) into a graph without running it, and instantiates it; replay() then
// launches the whole recording with one driver call, on any stream of the same device. The work
// reads and writes the very addresses it used while capturing, so whoever replays keeps those
// buffers alive and puts new inputs into them (jit/cuda_graph_runner.h does this for an Executable).
//
// Capture is in CU_STREAM_CAPTURE_MODE_THREAD_LOCAL mode: other threads may keep using the driver,
// but the capturing thread must not call anything that synchronizes (stream or device synchronize,
// a blocking copy, cuMemFree): the driver refuses it and invalidates the capture, and capture()
// then throws. A block the caching allocator frees on the capture stream during the capture (a
// temporary of the captured work) is held by the CudaGraph until it is destroyed, since every
// replay writes it again (runtime/cuda_allocator.h). The work must enqueue on `s`: everything flow
// enqueues goes to current_stream(), so the work usually runs under a StreamGuard(s).
//
// Destroying a CudaGraph while a replay is still running is allowed by the driver (the launch
// completes); the held blocks go back to the free list of the capture stream, so the owner waits for
// replays on other streams first.
#pragma once
#include <functional>
#include <vector>

#include "runtime/cuda_driver.h"

namespace flow::runtime::cuda {

// Whether `s` is capturing a graph (also when the capture was invalidated and not yet ended).
// Throws CudaError if CUDA is unavailable.
bool is_capturing(Stream s);

class CudaGraph {
 public:
  // Begins a capture on `s` (current device), runs `work`, ends the capture and instantiates the
  // graph. If `work` throws, the capture is ended and the partial graph destroyed before the
  // exception is rethrown; `s` is usable afterwards. A capture that the driver invalidated (e.g. a
  // synchronize inside `work`) throws CudaError. Throws CudaError if CUDA is unavailable.
  static CudaGraph capture(Stream s, const std::function<void()>& work);

  CudaGraph(CudaGraph&& other) noexcept;
  CudaGraph& operator=(CudaGraph&& other) noexcept;
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;
  ~CudaGraph();

  // Launches the graph on `s` (asynchronously, ordered after the work enqueued on `s` before it).
  void replay(Stream s) const;
  int device() const { return device_; }
  // Allocator blocks freed during the capture and held for the graph's replays.
  size_t held_blocks() const { return held_.size(); }

 private:
  CudaGraph() = default;
  void reset() noexcept;

  GraphHandle graph_ = nullptr;
  GraphExecHandle exec_ = nullptr;
  int device_ = 0;
  std::vector<void*> held_;
};

}  // namespace flow::runtime::cuda
