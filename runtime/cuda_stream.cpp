#include "runtime/cuda_stream.h"

#include <map>
#include <mutex>
#include <stdexcept>

#include "runtime/device_error.h"

namespace flow::runtime::cuda {

namespace {

// Per thread: device -> stream set by a StreamGuard.
thread_local std::map<int, Stream> tl_streams;

}  // namespace

Stream default_stream(int device) {
  static std::mutex mu;
  static auto* streams = new std::map<int, Stream>();  // never destroyed, see the note in the header
  std::lock_guard<std::mutex> lock(mu);
  auto it = streams->find(device);
  if (it != streams->end()) return it->second;
  DeviceGuard guard(device);
  const Stream s = driver::stream_create_non_blocking();
  streams->emplace(device, s);
  return s;
}

Stream current_stream() {
  const int device = current_device();
  auto it = tl_streams.find(device);
  return it != tl_streams.end() ? it->second : default_stream(device);
}

void synchronize() {
  driver::stream_synchronize(current_stream());
  raise_device_errors();  // what the kernels reported (runtime/device_error.h)
}

CudaStream::CudaStream() : device_(current_device()) {
  stream_ = driver::stream_create_non_blocking();
}

CudaStream::~CudaStream() {
  // Its work finishes first: per-stream state (the allocator's free lists, cuDNN and cuBLASLt
  // workspaces) is keyed by the handle, which a later cuStreamCreate may return again.
  try {
    DeviceGuard guard(device_);
    driver::stream_synchronize(stream_);
  } catch (const std::exception&) {  // a device error: the context is gone; destroy all the same
  }
  driver::stream_destroy(stream_);
}

void CudaStream::synchronize() const {
  DeviceGuard guard(device_);
  driver::stream_synchronize(stream_);
}

StreamGuard::StreamGuard(Stream s) : device_(current_device()) {
  auto it = tl_streams.find(device_);
  had_previous_ = it != tl_streams.end();
  previous_ = had_previous_ ? it->second : nullptr;
  tl_streams[device_] = s;
}

StreamGuard::~StreamGuard() {
  if (had_previous_) {
    tl_streams[device_] = previous_;
  } else {
    tl_streams.erase(device_);
  }
}

EventTimer::EventTimer() {
  start_ = driver::event_create();
  try {
    stop_ = driver::event_create();
  } catch (...) {
    driver::event_destroy(start_);
    throw;
  }
}

EventTimer::~EventTimer() {
  driver::event_destroy(start_);
  driver::event_destroy(stop_);
}

void EventTimer::start() {
  start(current_stream());
}
void EventTimer::start(Stream s) {
  driver::event_record(start_, s);
  started_ = true;
  stopped_ = false;
}

void EventTimer::stop() {
  stop(current_stream());
}
void EventTimer::stop(Stream s) {
  if (!started_) throw std::logic_error("flow: EventTimer::stop() before start()");
  driver::event_record(stop_, s);
  stopped_ = true;
}

double EventTimer::elapsed_ms() {
  if (!started_ || !stopped_) throw std::logic_error("flow: EventTimer::elapsed_ms() needs start() and stop()");
  driver::event_synchronize(stop_);
  return driver::event_elapsed_ms(start_, stop_);
}

}  // namespace flow::runtime::cuda
