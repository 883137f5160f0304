// Note: where loaded CPU kernels live. x86-64 objects in the small code model reach their own
// constants, GOT entries and call stubs with 32-bit PC-relative displacements, so every section of
// one object must lie within 2 GiB of the others. LLVM 14's SectionMemoryManager maps each of an
// object's memory groups (code, read-only data, read-write data) on its own, with no placement
// hint for the first block of a group, so the kernel is free to put the code in a small hole near
// the top of the address space and the GOT below a large reservation; RuntimeDyld then truncates
// the displacement without a word, and the kernel jumps through a wrong address. The emulated
// device's 16 GiB reservation made this happen in the test suite (a call stub read its GOT slot
// 16 GiB off, exactly 4 x 2^32).
//
// So all loaded code and data come from CodeRegions: ranges of address space reserved up front
// (PROT_NONE, no memory committed) and handed out page by page. Each object draws every block from
// one region (the loader makes sure the region has room for a whole object before each load), and a
// region is smaller than 2 GiB, so any displacement inside an object fits. Loaded code stays mapped
// until the process exits, as before; released blocks return their pages to the system but not
// their addresses.
#pragma once
#include <llvm/ExecutionEngine/SectionMemoryManager.h>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>

namespace flow::jit::llvm_backend {

// One reserved range; hands out page-aligned blocks from its start, in order.
class CodeRegion final : public llvm::SectionMemoryManager::MemoryMapper {
 public:
  explicit CodeRegion(size_t bytes);  // throws std::runtime_error when the range cannot be reserved
  ~CodeRegion() override;
  CodeRegion(const CodeRegion&) = delete;
  CodeRegion& operator=(const CodeRegion&) = delete;

  llvm::sys::MemoryBlock allocateMappedMemory(llvm::SectionMemoryManager::AllocationPurpose purpose, size_t bytes,
                                              const llvm::sys::MemoryBlock* near, unsigned flags,
                                              std::error_code& ec) override;
  std::error_code protectMappedMemory(const llvm::sys::MemoryBlock& block, unsigned flags) override;
  std::error_code releaseMappedMemory(llvm::sys::MemoryBlock& block) override;

  uintptr_t begin() const { return reinterpret_cast<uintptr_t>(base_); }
  uintptr_t end() const { return begin() + size_; }
  size_t left() const;  // bytes not yet handed out

 private:
  char* base_ = nullptr;
  size_t size_ = 0;
  size_t used_ = 0;
  mutable std::mutex mu_;
};

// The regions of a process. Regions are never unmapped before the CodeRegions object goes, so it
// must outlive every memory manager that uses them (declare it before the JIT that owns those).
class CodeRegions {
 public:
  // Regions of 1 GiB (well under the 2 GiB a displacement reaches); an object may take up to
  // 64 MiB (a kernel object is a few KiB).
  static constexpr size_t kRegionBytes = size_t{1} << 30;
  static constexpr size_t kObjectBytes = size_t{64} << 20;
  // The largest object file the loader takes: its sections (code, constants, GOT, stubs) must fit
  // the kObjectBytes a region keeps for it; a larger object is refused before LLVM sees it.
  static constexpr size_t kMaxObjectFileBytes = kObjectBytes / 2;

  // Makes sure the newest region has kObjectBytes left, reserving a new one if not (throws
  // std::runtime_error when the address space cannot be had). Called before each object is handed
  // to LLVM, so that no failure has to cross LLVM's frames.
  void make_room_for_object();
  // The region the next object's memory manager draws from (the newest; make_room_for_object first).
  // Objects load one at a time (the loader's lock), so an object never finds its region short.
  CodeRegion& current();
  // Whether [p, p + bytes) lies in one region.
  bool contains(const void* p, size_t bytes = 1) const;
  size_t count() const;

 private:
  std::deque<CodeRegion> regions_;
  mutable std::mutex mu_;
};

}  // namespace flow::jit::llvm_backend
