#include "runtime/cuda_allocator.h"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "runtime/cuda_stream.h"

namespace flow::runtime::cuda {

size_t CudaCachingAllocator::round_size(size_t bytes) {
  constexpr size_t kMin = 512;
  constexpr size_t kSmall = size_t{1} << 20;
  if (bytes <= kMin) return kMin;
  if (bytes <= kSmall) return (bytes + kMin - 1) / kMin * kMin;
  size_t top = kSmall;  // the largest power of two <= bytes
  while (top <= bytes / 2) top *= 2;
  const size_t step = top / 8;
  if (bytes > SIZE_MAX - step) return bytes;  // absurd sizes: let the driver refuse them
  return (bytes + step - 1) / step * step;
}

void* CudaCachingAllocator::allocate(size_t bytes) {
  const size_t size = round_size(bytes);
  DeviceGuard guard(device_);
  const Stream stream = current_stream();
  std::lock_guard<std::mutex> lock(mu_);
  if (!capturing_.empty()) {
    // A block freed earlier in the same capture on this stream (see the note in the header).
    auto c = capturing_.find(stream);
    if (c != capturing_.end()) {
      auto r = c->second.reusable.find(size);
      if (r != c->second.reusable.end() && !r->second.empty()) {
        void* p = r->second.back();
        r->second.pop_back();
        std::vector<void*>& held = c->second.held;
        const auto h = std::find(held.begin(), held.end(), p);
        if (h != held.end()) held.erase(h);
        Block& b = live_.at(p);  // held blocks stay live (and counted as allocated)
        stats_.requested += bytes;
        stats_.requested -= b.requested;
        b.requested = bytes;
        ++stats_.cache_hits;
        return p;
      }
    }
  }
  void* const p = allocate_locked(size, bytes, stream);
  if (!capturing_.empty()) {
    auto c = capturing_.find(stream);
    if (c != capturing_.end()) {
      try {
        c->second.born.insert(p);
      } catch (...) {
        // Out of host memory: the block will be held, not reused, if freed during the capture.
      }
    }
  }
  return p;
}

// A block from the stream's free list or the driver (caller holds mu_).
void* CudaCachingAllocator::allocate_locked(size_t size, size_t bytes, Stream stream) {
  void* p = nullptr;
  auto it = free_.find({stream, size});
  if (it != free_.end() && !it->second.empty()) {
    p = it->second.back();
    it->second.pop_back();
    cached_blocks_.erase(p);
    stats_.cached -= size;
    ++stats_.cache_hits;
  } else {
    try {
      p = driver::mem_alloc(size);
    } catch (const CudaError& e) {
      if (e.code() != driver::kErrorOutOfMemory) throw;
      // Emptying the cache synchronizes the device, which is an error while any of its streams
      // captures (the capture would be invalidated), not only this one.
      if (!capturing_.empty() || driver::stream_is_capturing(stream))
        throw CudaError(std::string(e.what()) + " (flow's allocator on device " + std::to_string(device_) +
                            ": out of memory while a stream captures a CUDA graph; the cache cannot be "
                            "emptied during a capture: requested " +
                            std::to_string(bytes) + " bytes, " + std::to_string(stats_.allocated) +
                            " bytes allocated, " + std::to_string(stats_.cached) + " bytes cached)",
                        e.code());
      synchronize_device();
      release_cached_locked();
      try {
        p = driver::mem_alloc(size);
      } catch (const CudaError& e2) {
        throw CudaError(std::string(e2.what()) + " (flow's allocator on device " + std::to_string(device_) +
                            ": requested " + std::to_string(bytes) + " bytes, " + std::to_string(stats_.allocated) +
                            " bytes allocated, cache emptied)",
                        e2.code());
      }
    }
    ++stats_.device_allocs;
    stats_.reserved += size;
  }
  live_.emplace(p, Block{size, bytes, stream});
  stats_.allocated += size;
  stats_.requested += bytes;
  if (stats_.allocated > stats_.peak) stats_.peak = stats_.allocated;
  return p;
}

void CudaCachingAllocator::free(void* p) noexcept {
  if (p == nullptr) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = live_.find(p);
  if (it == live_.end()) {
    std::fprintf(stderr, "flow: CudaCachingAllocator(device %d): free of unknown pointer %p ignored\n", device_, p);
    return;
  }
  if (!capturing_.empty()) {
    auto c = capturing_.find(it->second.stream);
    if (c != capturing_.end()) {
      try {
        c->second.held.push_back(p);  // held for the graph: stays live until release_held
        try {
          if (c->second.born.count(p) > 0) c->second.reusable[it->second.size].push_back(p);
        } catch (...) {
          // Out of host memory: held but not reusable within the capture (still correct).
        }
      } catch (...) {
        // Out of host memory: the block stays live and is never handed out again (a leak, not a race).
      }
      return;
    }
  }
  cache_locked(p);
}

void CudaCachingAllocator::cache_locked(void* p) noexcept {
  auto it = live_.find(p);
  if (it == live_.end()) return;
  const Block b = it->second;
  live_.erase(it);
  stats_.allocated -= b.size;
  stats_.requested -= b.requested;
  stats_.cached += b.size;
  ++stats_.frees;
  try {
    free_[{b.stream, b.size}].push_back(p);
    cached_blocks_.emplace(p, b);
  } catch (...) {
    // Out of host memory while caching: drop the block (leaks device memory, never crashes).
    stats_.cached -= b.size;
  }
}

void CudaCachingAllocator::begin_capture(Stream s) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!capturing_.emplace(s, Capture()).second)
    throw std::logic_error("flow: CudaCachingAllocator::begin_capture: the stream is already capturing");
}

std::vector<void*> CudaCachingAllocator::end_capture(Stream s) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = capturing_.find(s);
  if (it == capturing_.end()) return {};
  std::vector<void*> held = std::move(it->second.held);
  capturing_.erase(it);
  return held;
}

void CudaCachingAllocator::release_held(const std::vector<void*>& blocks) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  for (void* p : blocks) cache_locked(p);
}

size_t CudaCachingAllocator::release_cached_locked() {
  size_t released = 0;
  for (auto& kv : cached_blocks_) {
    try {
      driver::mem_free(kv.first);
    } catch (const CudaError& e) {
      std::fprintf(stderr, "flow: %s (ignored while emptying the cache)\n", e.what());
    }
    released += kv.second.size;
  }
  cached_blocks_.clear();
  free_.clear();
  stats_.cached -= released;
  stats_.reserved -= released;
  return released;
}

size_t CudaCachingAllocator::empty_cache() {
  DeviceGuard guard(device_);
  std::lock_guard<std::mutex> lock(mu_);
  // A device synchronize would invalidate a capture in progress on any stream: keep the cache.
  if (cached_blocks_.empty() || !capturing_.empty()) return 0;
  synchronize_device();
  return release_cached_locked();
}

bool CudaCachingAllocator::capturing() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !capturing_.empty();
}

AllocatorStats CudaCachingAllocator::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

void CudaCachingAllocator::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  stats_.peak = stats_.allocated;
}

namespace {

struct Allocators {
  std::mutex mu;
  std::map<int, std::unique_ptr<CudaCachingAllocator>> by_device;
};

Allocators& allocators() {
  static auto* a = new Allocators();  // never destroyed: buffers may be freed by static destructors
  return *a;
}

}  // namespace

CudaCachingAllocator& device_allocator(int device) {
  require_cuda();
  if (device < 0 || device >= device_count())
    throw CudaError("flow: CUDA device index " + std::to_string(device) + " is out of range (" +
                        std::to_string(device_count()) + " device(s))",
                    -1);
  Allocators& a = allocators();
  std::lock_guard<std::mutex> lock(a.mu);
  auto& slot = a.by_device[device];
  if (!slot) slot = std::make_unique<CudaCachingAllocator>(device);
  return *slot;
}

CudaCachingAllocator& current_allocator() {
  return device_allocator(current_device());
}

size_t empty_cache() {
  std::vector<CudaCachingAllocator*> all;
  {
    Allocators& a = allocators();
    std::lock_guard<std::mutex> lock(a.mu);
    for (auto& kv : a.by_device) all.push_back(kv.second.get());
  }
  // A capture on any device may be invalidated by another device's synchronize (thread-local
  // capture mode forbids it on the capturing thread): then nothing is emptied.
  for (auto* alloc : all)
    if (alloc->capturing()) return 0;
  size_t released = 0;
  for (auto* alloc : all) released += alloc->empty_cache();
  return released;
}

}  // namespace flow::runtime::cuda
