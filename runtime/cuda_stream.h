// Note: streams. Each device has one default flow stream, created non-blocking on first use and
// never destroyed (kernels and copies enqueued by static destructors must still find it); it does
// not synchronize with the legacy NULL stream, so other libraries' work on stream 0 does not
// serialize flow's. A thread may redirect its work on a device to another stream with a
// StreamGuard. Everything flow enqueues (launches, copies, memsets) goes to current_stream(), so
// work issued by one thread is ordered, and the caching allocator may hand a freed block to the
// next allocation on the same stream without waiting.
#pragma once
#include "runtime/cuda_driver.h"

namespace flow::runtime::cuda {

// The default flow stream of `device` (created on first use).
Stream default_stream(int device);
// The calling thread's stream on the current device: its StreamGuard's, else the default stream.
Stream current_stream();
// Waits for everything enqueued on current_stream().
void synchronize();

// An owned non-blocking stream on the current device.
class CudaStream {
 public:
  CudaStream();
  ~CudaStream();
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  Stream get() const { return stream_; }
  int device() const { return device_; }
  void synchronize() const;

 private:
  Stream stream_ = nullptr;
  int device_ = 0;
};

// Makes `s` the calling thread's current stream on the current device for a scope.
class StreamGuard {
 public:
  explicit StreamGuard(Stream s);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  int device_;
  bool had_previous_;
  Stream previous_;
};

// Times GPU work between start() and stop() with a pair of events recorded on a stream (default:
// the current one). elapsed_ms() waits for the stop event.
class EventTimer {
 public:
  EventTimer();
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void start();
  void start(Stream s);
  void stop();
  void stop(Stream s);
  // Milliseconds between the two events; throws std::logic_error unless start() and stop() ran.
  double elapsed_ms();

 private:
  Event start_ = nullptr;
  Event stop_ = nullptr;
  bool started_ = false;
  bool stopped_ = false;
};

}  // namespace flow::runtime::cuda
