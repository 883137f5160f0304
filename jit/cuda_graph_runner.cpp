// Note: captures run on one side stream per device, shared by every runner and serialized by one
// mutex, never on the caller's stream: in thread-local capture mode another thread's work enqueued
// on the caller's stream would otherwise be recorded into (or invalidate) this graph. The graph is
// then launched on the caller's stream, ordered after the input copies enqueued there. Static
// inputs and returned outputs are allocated on the caller's stream; the captured run's own buffers
// come from the side stream's free lists and stay with the runner until it drops the graph, after
// waiting for the last run that used them.
//
// Before capturing, the runner runs once on the capture stream outside the capture (see
// capture_and_launch), so per-stream library state and cached blocks exist when the capture starts.
//
// Sharing one capture stream means sharing what libraries keep per stream (the cuBLASLt workspace,
// cuDNN scratch): every graph of a device may use the same workspace. That is safe while no two
// graph runs overlap on the device, so graph runs are ordered device-wide (ReplayOrder): a run on
// another stream than the previous graph run waits for it on the host first. Runs on one stream,
// the common case, never wait.
#include "jit/cuda_graph_runner.h"

#include <map>
#include <optional>
#include <stdexcept>

#include "jit/compile.h"
#include "jit/log.h"
#include "runtime/buffer.h"
#include "runtime/cuda_graph.h"
#include "runtime/cuda_stream.h"

namespace flow::jit {

namespace rc = runtime::cuda;

namespace {

std::mutex& capture_mutex() {
  static auto* m = new std::mutex();  // never destroyed, like the streams
  return *m;
}

// The capture stream of `device` (caller holds capture_mutex()); created on first use, never
// destroyed (blocks of the allocator stay keyed to it).
rc::Stream capture_stream(int device) {
  static auto* streams = new std::map<int, rc::Stream>();
  auto it = streams->find(device);
  if (it != streams->end()) return it->second;
  rc::DeviceGuard guard(device);
  const rc::Stream s = rc::driver::stream_create_non_blocking();
  streams->emplace(device, s);
  return s;
}

// The order of graph runs on a device: the stream of the last one and an event recorded after it
// (and its output copies). Everything a graph run enqueued before that one has completed or is on
// the same stream, before the event.
struct ReplayOrder {
  std::mutex mu;
  rc::Stream last = nullptr;
  rc::Event done = nullptr;
  bool pending = false;  // `done` was recorded and not waited for
};

ReplayOrder& replay_order(int device) {
  static std::mutex mu;
  static auto* orders = new std::map<int, ReplayOrder*>();  // never destroyed, like the events in it
  std::lock_guard<std::mutex> lock(mu);
  ReplayOrder*& o = (*orders)[device];
  if (!o) o = new ReplayOrder();
  return *o;
}

// The elements a strided tensor addresses, relative to its offset: [lo, hi]; empty when it has no
// elements.
struct Span {
  int64_t lo = 0, hi = -1;
  size_t bytes(dsl::DType dt) const { return hi < lo ? 0 : static_cast<size_t>(hi - lo + 1) * dsl::dtype_size(dt); }
};

Span span_of(const Tensor& t) {
  Span s;
  if (t.numel() == 0) return s;
  s.hi = 0;
  for (size_t d = 0; d < t.sizes.size(); ++d) {
    const int64_t reach = (t.sizes[d] - 1) * t.strides[d];
    (reach < 0 ? s.lo : s.hi) += reach;
  }
  return s;
}

// A new CUDA tensor (current device and stream) with t's sizes, strides and dtype, over just the
// elements they address.
Tensor like(const Tensor& t) {
  const Span s = span_of(t);
  Tensor r;
  r.sizes = t.sizes;
  r.strides = t.strides;
  r.dtype = t.dtype;
  r.offset = -s.lo;
  r.storage = runtime::Buffer::allocate(s.bytes(t.dtype), runtime::DeviceType::CUDA);
  return r;
}

// Copies the elements `src` addresses into `dst` (same sizes and, for dims of size > 1, strides),
// asynchronously on `stream`.
void copy_span(const Tensor& dst, const Tensor& src, rc::Stream stream) {
  const Span s = span_of(src);
  const size_t bytes = s.bytes(src.dtype);
  if (bytes == 0) return;
  const size_t es = dsl::dtype_size(src.dtype);
  char* to = static_cast<char*>(dst.storage->data()) + (dst.offset + s.lo) * static_cast<int64_t>(es);
  const char* from = static_cast<const char*>(src.storage->data()) + (src.offset + s.lo) * static_cast<int64_t>(es);
  rc::driver::memcpy_dtod(to, from, bytes, stream);
}

}  // namespace

// The graph and everything it addresses. `graph` is declared last, so it is destroyed first (it
// gives back the blocks it held) and the buffers after it.
struct CudaGraphRunner::Captured {
  int device = 0;
  std::vector<Tensor> static_inputs;  // graph-input order; a frozen input is the caller's tensor
  std::vector<bool> copy_in;          // per input: copied in before each launch (not frozen)
  std::vector<uint64_t> frozen_key;   // Executable::frozen_key of the capturing run's inputs
  std::vector<Tensor> keep_alive;     // every tensor the captured run bound
  std::vector<Tensor> outputs;        // the static outputs
  std::optional<rc::CudaGraph> graph;
};

CudaGraphRunner::CudaGraphRunner(const Executable& exe) : exe_(exe) {}

CudaGraphRunner::~CudaGraphRunner() {
  std::lock_guard<std::mutex> lock(mu_);
  drop_locked();
}

std::vector<Tensor> CudaGraphRunner::run_normally(const std::vector<Tensor>& inputs) const {
  return exe_.run_impl(inputs, {}, nullptr, nullptr, true);
}

bool CudaGraphRunner::fits_signature(const std::vector<Tensor>& inputs) const {
  if (inputs.size() != exe_.graph_.inputs().size()) return false;
  const int device = rc::current_device();
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!exe_.input_mismatch(i, inputs[i]).empty() || inputs[i].storage->device_index() != device) return false;
  return true;
}

std::vector<Tensor> CudaGraphRunner::run(const std::vector<Tensor>& inputs) {
  if (disabled_.load(std::memory_order_acquire)) return run_normally(inputs);
  std::lock_guard<std::mutex> lock(mu_);
  if (disabled_.load(std::memory_order_relaxed)) return run_normally(inputs);
  if (!fits_signature(inputs)) return run_normally(inputs);  // it throws for a wrong signature
  if (captured_) {
    if (captured_->device == rc::current_device() && captured_->frozen_key == exe_.frozen_key(inputs))
      return launch(inputs, true);
    // New parameters (or another device): this run refills the frozen cache, the next captures.
    drop_locked();
    return run_normally(inputs);
  }
  if (!warmed_up_) {
    warmed_up_ = true;
    return run_normally(inputs);
  }
  if (!exe_.frozen_cache_current(inputs)) return run_normally(inputs);  // it fills the cache
  try {
    return capture_and_launch(inputs);
  } catch (const std::exception& e) {
    disable_locked(e.what());
  } catch (...) {
    disable_locked("unknown exception");
  }
  return run_normally(inputs);
}

std::vector<Tensor> CudaGraphRunner::capture_and_launch(const std::vector<Tensor>& inputs) {
  captured_ = std::make_unique<Captured>();
  Captured& c = *captured_;
  c.device = rc::current_device();
  const std::vector<bool>& frozen = exe_.opt_.frozen_inputs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const bool is_frozen = i < frozen.size() && frozen[i];
    c.static_inputs.push_back(is_frozen ? inputs[i] : like(inputs[i]));
    c.copy_in.push_back(!is_frozen);
  }
  c.frozen_key = exe_.frozen_key(inputs);
  {
    std::lock_guard<std::mutex> capture_lock(capture_mutex());
    const rc::Stream side = capture_stream(c.device);
    // Warm the capture stream first with one run on it, outside any capture (as torch warms up on
    // a side stream before capturing): what libraries keep per stream (the cuBLASLt workspace,
    // cuDNN's scratch, grown to this run's needs) is allocated now, not during the capture. That
    // workspace is the one every graph of the device recorded, so the warm-up is ordered like a
    // graph run: after the last one (ReplayOrder), and finished before any other starts. The
    // inputs were written on the caller's stream: wait for it before reading them on `side`.
    ReplayOrder& order = replay_order(c.device);
    std::lock_guard<std::mutex> order_lock(order.mu);
    if (order.pending) {
      rc::driver::event_synchronize(order.done);
      order.pending = false;
    }
    rc::driver::stream_synchronize(rc::current_stream());
    {
      rc::StreamGuard guard(side);
      (void)exe_.run_impl(inputs, {}, nullptr, nullptr, true);
    }
    rc::driver::stream_synchronize(side);
    std::vector<Tensor> outs;
    c.graph.emplace(rc::CudaGraph::capture(side, [&] {
      rc::StreamGuard guard(side);
      outs = exe_.run_impl(c.static_inputs, {}, nullptr, nullptr, true, &c.keep_alive);
    }));
    c.outputs = std::move(outs);
  }
  if (log_enabled("cuda"))
    log_line("cuda", "captured a CUDA graph of " + std::to_string(exe_.num_kernels()) + " kernel(s) and " +
                         std::to_string(exe_.num_library_calls()) + " library call(s), " +
                         std::to_string(c.keep_alive.size()) + " bound tensor(s), " +
                         std::to_string(c.graph->held_blocks()) + " held block(s)");
  return launch(inputs, false);
}

std::vector<Tensor> CudaGraphRunner::launch(const std::vector<Tensor>& inputs, bool replay) {
  Captured& c = *captured_;
  const rc::Stream s = rc::current_stream();
  ReplayOrder& order = replay_order(c.device);
  std::lock_guard<std::mutex> order_lock(order.mu);
  if (order.pending && s != order.last) {
    // The previous graph run, on another stream, may still use the static buffers or a workspace.
    rc::driver::event_synchronize(order.done);
    order.pending = false;
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    if (c.copy_in[i]) copy_span(c.static_inputs[i], inputs[i], s);
  c.graph->replay(s);
  if (replay) replays_.fetch_add(1, std::memory_order_relaxed);
  std::vector<Tensor> outs;
  outs.reserve(c.outputs.size());
  for (const Tensor& o : c.outputs) {
    outs.push_back(like(o));
    copy_span(outs.back(), o, s);
  }
  if (!order.done) order.done = rc::driver::event_create();
  rc::driver::event_record(order.done, s);
  order.pending = true;
  order.last = s;
  return outs;
}

void CudaGraphRunner::drop_locked() noexcept {
  if (!captured_) return;
  // This runner's last run is before the device's last graph run (see ReplayOrder).
  ReplayOrder& order = replay_order(captured_->device);
  {
    std::lock_guard<std::mutex> order_lock(order.mu);
    if (order.pending) {
      try {
        rc::driver::event_synchronize(order.done);
      } catch (...) {
      }
      order.pending = false;
    }
  }
  captured_.reset();
}

void CudaGraphRunner::disable_locked(const std::string& reason) {
  // A failed first launch may have left work in flight that reads the buffers about to be freed.
  try {
    rc::synchronize();
  } catch (...) {
  }
  drop_locked();
  disabled_reason_ = reason;
  disabled_.store(true, std::memory_order_release);
  if (log_enabled("cuda"))
    log_line("cuda", "CUDA graph capture failed; this executable runs without CUDA graphs: " + reason);
}

void CudaGraphRunner::reset() {
  std::lock_guard<std::mutex> lock(mu_);
  drop_locked();
  warmed_up_ = false;
}

bool CudaGraphRunner::captured() const {
  std::lock_guard<std::mutex> lock(mu_);
  return captured_ != nullptr;
}

std::string CudaGraphRunner::status() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (disabled_.load(std::memory_order_relaxed)) return "off (" + disabled_reason_ + ")";
  if (captured_) return "captured, " + std::to_string(num_replays()) + " replays";
  return warmed_up_ ? "not captured yet (the next run captures)"
                    : "not captured yet (the first run warms up, the second captures)";
}

}  // namespace flow::jit
