// Note: the capture is bracketed twice: by the driver (begin/end capture on the stream) and by the
// caching allocator of the current device (held frees, see runtime/cuda_allocator.h). Every exit
// from capture() closes both, so a failed capture leaves neither the stream nor the allocator in
// capture mode.
#include "runtime/cuda_graph.h"

#include <stdexcept>
#include <utility>

#include "runtime/cuda_allocator.h"

namespace flow::runtime::cuda {

bool is_capturing(Stream s) {
  return driver::stream_is_capturing(s);
}

CudaGraph CudaGraph::capture(Stream s, const std::function<void()>& work) {
  require_cuda();
  CudaGraph g;
  g.device_ = current_device();
  CudaCachingAllocator& alloc = device_allocator(g.device_);
  alloc.begin_capture(s);
  try {
    driver::stream_begin_capture(s);
  } catch (...) {
    alloc.release_held(alloc.end_capture(s));
    throw;
  }
  try {
    work();
  } catch (...) {
    // End the capture whatever state it is in (an invalidated capture ends with an error and no
    // graph), drop what was recorded, and give back the blocks freed meanwhile: nothing ran.
    GraphHandle partial = nullptr;
    try {
      partial = driver::stream_end_capture(s);
    } catch (...) {
    }
    driver::graph_destroy(partial);
    alloc.release_held(alloc.end_capture(s));
    throw;
  }
  try {
    g.graph_ = driver::stream_end_capture(s);
  } catch (...) {
    alloc.release_held(alloc.end_capture(s));
    throw;
  }
  g.held_ = alloc.end_capture(s);
  g.exec_ = driver::graph_instantiate(g.graph_);  // on failure, g's destructor frees graph and blocks
  return g;
}

CudaGraph::CudaGraph(CudaGraph&& other) noexcept
    : graph_(std::exchange(other.graph_, nullptr)),
      exec_(std::exchange(other.exec_, nullptr)),
      device_(other.device_),
      held_(std::move(other.held_)) {
  other.held_.clear();
}

CudaGraph& CudaGraph::operator=(CudaGraph&& other) noexcept {
  if (this != &other) {
    reset();
    graph_ = std::exchange(other.graph_, nullptr);
    exec_ = std::exchange(other.exec_, nullptr);
    device_ = other.device_;
    held_ = std::move(other.held_);
    other.held_.clear();
  }
  return *this;
}

CudaGraph::~CudaGraph() {
  reset();
}

void CudaGraph::reset() noexcept {
  if (exec_ || graph_) {
    try {
      ensure_context(device_);
    } catch (...) {
    }
    driver::graph_exec_destroy(exec_);
    driver::graph_destroy(graph_);
    exec_ = nullptr;
    graph_ = nullptr;
  }
  if (!held_.empty()) {
    try {
      device_allocator(device_).release_held(held_);
    } catch (...) {
    }
    held_.clear();
  }
}

void CudaGraph::replay(Stream s) const {
  if (!exec_) throw std::logic_error("flow: CudaGraph::replay on an empty (moved-from) graph");
  DeviceGuard guard(device_);
  driver::graph_launch(exec_, s);
}

}  // namespace flow::runtime::cuda
