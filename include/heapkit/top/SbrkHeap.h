// SbrkHeap: a contiguous heap, as sbrk gives, emulated inside a reserved mapping so that
// it never fights the C library over the real program break. Pages are committed as the
// break rises and returned to the kernel when it falls by a whole commit step.
#pragma once

#include <sys/mman.h>

#include <algorithm>

#include "heapkit/core/ContiguousArena.h"
#include "heapkit/core/Footprint.h"
#include "heapkit/top/MmapHeap.h"

namespace heapkit {

class ReservedMapping {
 public:
  static constexpr std::size_t kCommitStep = 64 * 1024;

  explicit ReservedMapping(std::size_t reserveBytes = std::size_t{16} << 30)
      : capacity_(alignUp(reserveBytes, kCommitStep)) {
    void* region = mmap(nullptr, capacity_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (region == MAP_FAILED) {
      capacity_ = 0;  // every malloc will fail cleanly
    } else {
      base_ = static_cast<char*>(region);
    }
  }
  ReservedMapping(const ReservedMapping&) = delete;
  ReservedMapping& operator=(const ReservedMapping&) = delete;
  ~ReservedMapping() {
    if (base_) munmap(base_, capacity_);
  }

  char* base() const { return base_; }
  std::size_t capacity() const { return capacity_; }

  bool commit(std::size_t end) {
    if (end <= footprint_.held()) return true;
    std::size_t newCommitted = std::min(capacity_, alignUp(end, kCommitStep));
    if (mprotect(base_ + footprint_.held(), newCommitted - footprint_.held(), PROT_READ | PROT_WRITE) != 0)
      return false;
    footprint_.add(newCommitted - footprint_.held());
    return true;
  }

  void decommit(std::size_t end) {
    std::size_t keep = alignUp(end, kCommitStep);
    // Hysteresis: keep one spare step so a malloc/free pair at the break does not
    // make two system calls every time.
    if (keep + kCommitStep >= footprint_.held()) return;
    keep += kCommitStep;
    std::size_t drop = footprint_.held() - keep;
    madvise(base_ + keep, drop, MADV_DONTNEED);
    mprotect(base_ + keep, drop, PROT_NONE);
    footprint_.remove(drop);
  }

  std::size_t committedBytes() const { return footprint_.held(); }
  std::size_t peakCommittedBytes() const { return footprint_.peak(); }

 private:
  char* base_ = nullptr;
  std::size_t capacity_;
  Footprint footprint_;
};

// Reserves 16 GiB of address space by default (no memory until used); pass another size
// to the constructor.
class SbrkHeap : public ContiguousArena<ReservedMapping> {
 public:
  using ContiguousArena<ReservedMapping>::ContiguousArena;
};

}  // namespace heapkit
