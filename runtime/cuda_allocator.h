// Note: a caching device allocator, like PyTorch's: cuMemAlloc is slow and synchronizes the
// device, so freed blocks go to free lists keyed by (stream, rounded size) and the next allocation
// of the same size class on the same stream reuses one without any driver call. Reuse on the same
// stream is safe without waiting: work on a stream runs in order, so whatever used the block before
// finishes before whatever uses it next. Blocks never move between streams (a block freed after use
// on stream A is not handed to stream B) and are never split or merged.
//
// Size classes: at least 512 bytes; multiples of 512 up to 1 MiB; above that 8 classes per power
// of two (at most 12.5% waste). When cuMemAlloc runs out of memory the allocator synchronizes the
// device, returns every cached block to the driver and tries once more; a second failure throws a
// CudaError (CUDA_ERROR_OUT_OF_MEMORY) that reports the allocator's state. Cached blocks stay until
// empty_cache(). One allocator per device, for the life of the process.
//
// CUDA-graph capture (runtime/cuda_graph.h): nothing runs while a stream captures, and a device
// synchronize would invalidate the capture, so an out-of-memory during a capture throws at once (no
// retry) with a CudaError that says so. A cache hit needs no driver call; a miss calls cuMemAlloc
// in relaxed capture mode (driver::mem_alloc; the graph only sees the address). A block freed on a
// stream between begin_capture(s) and end_capture(s) is held instead of cached: every replay of the
// graph still writes it, so it must not be handed to anyone else; the graph gives the held blocks
// back with release_held() when it is destroyed. Within the capture, a later allocation of the same
// size class on s may take a held block again if it was also allocated during the capture, as
// torch's private graph pools allow: the graph records the last read of the old tensor and the
// first write of the new one in s's order, and replays them in that order. (A block allocated
// before the capture holds data the graph may read on every replay; it is held, never reused.) A captured run that
// frees intermediates after their last use then holds its largest working set, not the sum of its intermediates.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "runtime/cuda_driver.h"

namespace flow::runtime::cuda {

struct AllocatorStats {
  size_t allocated = 0;        // bytes in live blocks (rounded sizes)
  size_t requested = 0;        // bytes callers asked for, live blocks
  size_t cached = 0;           // bytes in the free lists
  size_t reserved = 0;         // allocated + cached: what the allocator holds from the driver
  size_t peak = 0;             // largest `allocated` since creation or reset_peak()
  uint64_t device_allocs = 0;  // cuMemAlloc calls
  uint64_t cache_hits = 0;     // allocations served from a free list
  uint64_t frees = 0;          // blocks returned by callers
};

class CudaCachingAllocator {
 public:
  explicit CudaCachingAllocator(int device) : device_(device) {}
  CudaCachingAllocator(const CudaCachingAllocator&) = delete;
  CudaCachingAllocator& operator=(const CudaCachingAllocator&) = delete;

  // A block of at least `bytes` (non-null, 512-byte aligned, also for 0 bytes) for use on the
  // calling thread's current stream of this device. Throws CudaError.
  void* allocate(size_t bytes);
  // Returns a block to its free list. Never throws (called from Buffer deleters); an unknown
  // pointer is reported on stderr and ignored.
  void free(void* p) noexcept;
  // Synchronizes the device and returns every cached block to the driver; the bytes released.
  // While a graph capture is in progress on this device it does nothing (returns 0): the
  // synchronize would invalidate the capture.
  size_t empty_cache();
  AllocatorStats stats() const;
  void reset_peak();
  // Held frees for a graph captured on `s` (see the note at the top). begin_capture throws
  // std::logic_error if `s` is already in a capture; end_capture returns the held blocks (still
  // counted as allocated), release_held puts them on their free lists.
  void begin_capture(Stream s);
  std::vector<void*> end_capture(Stream s);
  void release_held(const std::vector<void*>& blocks) noexcept;
  int device() const { return device_; }
  bool capturing() const;  // a capture is in progress on one of this device's streams

  static size_t round_size(size_t bytes);

 private:
  struct Block {
    size_t size = 0;  // rounded
    size_t requested = 0;
    Stream stream = nullptr;
  };
  void* allocate_locked(size_t size, size_t bytes, Stream stream);  // caller holds mu_
  size_t release_cached_locked();                                   // caller holds mu_ and has synchronized
  void cache_locked(void* p) noexcept;  // moves a live block to its free list; caller holds mu_

  const int device_;
  mutable std::mutex mu_;
  std::map<std::pair<Stream, size_t>, std::vector<void*>> free_;
  std::unordered_map<void*, Block> live_;
  std::unordered_map<void*, Block> cached_blocks_;
  // A capture in progress on a stream: the blocks freed on it since begin_capture (live, held for
  // the graph) and the same blocks by size, which allocations on that stream during the same capture
  // may take again (the graph replays the free and the reuse in the same stream order).
  struct Capture {
    std::vector<void*> held;
    std::map<size_t, std::vector<void*>> reusable;
    std::unordered_set<void*> born;  // allocated on the stream during this capture
  };
  std::map<Stream, Capture> capturing_;
  AllocatorStats stats_;
};

// The allocator of `device` (created on first use; never destroyed).
CudaCachingAllocator& device_allocator(int device);
// The allocator of current_device().
CudaCachingAllocator& current_allocator();
// empty_cache() on every device that has an allocator; the bytes released. Does nothing while a
// capture is in progress on any device.
size_t empty_cache();

}  // namespace flow::runtime::cuda
