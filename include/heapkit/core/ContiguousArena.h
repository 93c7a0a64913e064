// A contiguous heap that grows and shrinks at one end, like sbrk: the shared body of
// SbrkHeap (inside a reserved mapping) and StaticHeap (inside a caller's buffer).
// Blocks carry a 16-byte header (previous block's bytes; usable size | freed flag), so a
// freed block at the end is given back, together with freed blocks just below it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "heapkit/core/HeapContract.h"
#include "heapkit/core/SizeWord.h"

namespace heapkit {

// Backing: char* base(); std::size_t capacity(); bool commit(std::size_t end) makes
// [base, base+end) usable; void decommit(std::size_t end) may drop pages above end;
// std::size_t committedBytes() and peakCommittedBytes() give the footprint.
template <class Backing>
class ContiguousArena {
 public:
  static constexpr std::size_t Alignment = kMinAlignment;
  static constexpr bool KeepsSizeWord = true;

  template <class... Args>
  explicit ContiguousArena(Args&&... args) : backing_(static_cast<Args&&>(args)...) {}
  ContiguousArena(const ContiguousArena&) = delete;
  ContiguousArena& operator=(const ContiguousArena&) = delete;

  void* malloc(std::size_t size) {
    if (!fitsAfterAlignUp(size, kHeader, kMinAlignment)) return nullptr;
    std::size_t bytes = usableBytesFor(size) + kHeader;
    if (bytes > backing_.capacity() - breakOffset_) return nullptr;
    if (!backing_.commit(breakOffset_ + bytes)) return nullptr;
    auto* header = reinterpret_cast<BlockHeader*>(backing_.base() + breakOffset_);
    header->previousBytes = lastBlockBytes_;
    header->sizeWord = bytes - kHeader;
    breakOffset_ += bytes;
    lastBlockBytes_ = bytes;
    return header + 1;
  }

  void free(void* object) {
    if (object == nullptr) return;
    auto* header = static_cast<BlockHeader*>(object) - 1;
    header->sizeWord |= kFreed;
    // Retract the break over every freed block at the top.
    while (lastBlockBytes_ != 0) {
      auto* last = reinterpret_cast<BlockHeader*>(backing_.base() + breakOffset_ - lastBlockBytes_);
      if ((last->sizeWord & kFreed) == 0) break;
      breakOffset_ -= lastBlockBytes_;
      lastBlockBytes_ = last->previousBytes;
    }
    backing_.decommit(breakOffset_);
  }

  std::size_t getSize(void* object) const { return sizeword::size(object); }

  std::size_t bytesHeld() const { return backing_.committedBytes(); }
  std::size_t peakBytesHeld() const { return backing_.peakCommittedBytes(); }

  // The current break, as an offset from the start: what sbrk(0) would tell.
  std::size_t breakOffset() const { return breakOffset_; }
  char* base() const { return backing_.base(); }

 protected:
  Backing& backing() { return backing_; }

 private:
  struct BlockHeader {
    std::size_t previousBytes;
    std::size_t sizeWord;
  };
  static constexpr std::size_t kHeader = sizeof(BlockHeader);
  static constexpr std::size_t kFreed = 1;

  Backing backing_;
  std::size_t breakOffset_ = 0;
  std::size_t lastBlockBytes_ = 0;
};

}  // namespace heapkit
