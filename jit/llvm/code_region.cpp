#include "jit/llvm/code_region.h"

#include <llvm/Support/Memory.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <stdexcept>
#include <string>
#include <utility>

namespace flow::jit::llvm_backend {

namespace {

size_t page_size() {
  static const size_t p = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  return p;
}

uintptr_t round_up_to_page(uintptr_t n) {
  return (n + page_size() - 1) / page_size() * page_size();
}

int protection(unsigned flags) {
  int prot = PROT_NONE;
  if (flags & llvm::sys::Memory::MF_READ) prot |= PROT_READ;
  if (flags & llvm::sys::Memory::MF_WRITE) prot |= PROT_WRITE;
  if (flags & llvm::sys::Memory::MF_EXEC) prot |= PROT_EXEC;
  return prot;
}

// [start, end) widened to whole pages, as sys::Memory::protectMappedMemory does.
std::pair<uintptr_t, uintptr_t> page_span(const llvm::sys::MemoryBlock& block) {
  const auto start = reinterpret_cast<uintptr_t>(block.base());
  return {start / page_size() * page_size(), round_up_to_page(start + block.allocatedSize())};
}

}  // namespace

CodeRegion::CodeRegion(size_t bytes) : size_(round_up_to_page(bytes)) {
  void* p = ::mmap(nullptr, size_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED)
    throw std::runtime_error("llvm backend: cannot reserve " + std::to_string(size_ >> 20) +
                             " MiB of address space for CPU kernels (errno " + std::to_string(errno) + ")");
  base_ = static_cast<char*>(p);
}

CodeRegion::~CodeRegion() {
  if (base_ != nullptr) ::munmap(base_, size_);
}

llvm::sys::MemoryBlock CodeRegion::allocateMappedMemory(llvm::SectionMemoryManager::AllocationPurpose, size_t bytes,
                                                        const llvm::sys::MemoryBlock*, unsigned flags,
                                                        std::error_code& ec) {
  ec = {};
  const size_t rounded = round_up_to_page(bytes);
  std::lock_guard<std::mutex> lock(mu_);
  if (rounded == 0 || rounded > size_ - used_) {
    // SectionMemoryManager turns this into a failed allocation (RuntimeDyld then stops); the
    // loader checks for room before each object, so it is not reached in practice.
    ec = std::make_error_code(std::errc::not_enough_memory);
    return {};
  }
  char* p = base_ + used_;
  if (::mprotect(p, rounded, protection(flags)) != 0) {
    ec = std::error_code(errno, std::generic_category());
    return {};
  }
  used_ += rounded;
  return llvm::sys::MemoryBlock(p, rounded);
}

std::error_code CodeRegion::protectMappedMemory(const llvm::sys::MemoryBlock& block, unsigned flags) {
  if (block.base() == nullptr || block.allocatedSize() == 0) return std::make_error_code(std::errc::invalid_argument);
  const auto [start, end] = page_span(block);
  if (::mprotect(reinterpret_cast<void*>(start), end - start, protection(flags)) != 0)
    return std::error_code(errno, std::generic_category());
  if (flags & llvm::sys::Memory::MF_EXEC)
    llvm::sys::Memory::InvalidateInstructionCache(block.base(), block.allocatedSize());
  return {};
}

std::error_code CodeRegion::releaseMappedMemory(llvm::sys::MemoryBlock& block) {
  if (block.base() == nullptr || block.allocatedSize() == 0) return {};
  const auto [start, end] = page_span(block);
  // The pages go back to the system; the addresses stay reserved (never handed out again).
  ::madvise(reinterpret_cast<void*>(start), end - start, MADV_DONTNEED);
  ::mprotect(reinterpret_cast<void*>(start), end - start, PROT_NONE);
  block = llvm::sys::MemoryBlock();
  return {};
}

size_t CodeRegion::left() const {
  std::lock_guard<std::mutex> lock(mu_);
  return size_ - used_;
}

void CodeRegions::make_room_for_object() {
  std::lock_guard<std::mutex> lock(mu_);
  if (regions_.empty() || regions_.back().left() < kObjectBytes) regions_.emplace_back(kRegionBytes);
}

CodeRegion& CodeRegions::current() {
  std::lock_guard<std::mutex> lock(mu_);
  if (regions_.empty()) throw std::logic_error("CodeRegions::current() before make_room_for_object()");
  return regions_.back();
}

bool CodeRegions::contains(const void* p, size_t bytes) const {
  const auto a = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(mu_);
  for (const CodeRegion& r : regions_)
    if (a >= r.begin() && a + bytes <= r.end()) return true;
  return false;
}

size_t CodeRegions::count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return regions_.size();
}

}  // namespace flow::jit::llvm_backend
