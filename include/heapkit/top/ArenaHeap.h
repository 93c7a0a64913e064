// ArenaHeap: the top heap of the DMM allocators, in the simulator and for real alike.
//
// A ReservedArena reserves one large range of address space (MAP_NORESERVE: no memory
// until a page is touched) and carves it into extents at 64 KiB granules, lowest address
// first. Because the simulator and the real allocator carve the same range the same way,
// every address an allocator sees is the same offset from the base in both, so
// address-ordered lists and buddy computations decide identically ("policies once,
// memory twice", docs/simulator.md). The arena counts the bytes held (whole pages) and
// their high-water mark: the footprint. A released extent's pages go back to the kernel
// (MADV_DONTNEED) and its granules are reused first fit. A layer may also give back pages
// of an extent it keeps (purge), which count out of the resident bytes.
//
// The Memory parameter says what the arena stands for:
//  - RealMemory: a shipped allocator; nothing is counted;
//  - CountedMemory: real memory, with work and metadata accesses counted (tests compare
//    those counts with the simulator's);
//  - SimulatedMemory: the simulator's; counted, and the application's data is never
//    written (layers that would copy it, as realloc does, skip the copy), so only the
//    pages holding allocator metadata are ever touched.
//
// Each ArenaHeap is one allocator's view of a shared arena: it tags the granules of its
// extents with an owner number, so a DMM can tell which of its allocators owns a pointer.
#pragma once

#include <sys/mman.h>

#include <concepts>
#include <cstddef>
#include <type_traits>
#include <cstdint>
#include <cstring>

#include "heapkit/core/Counting.h"
#include "heapkit/core/Footprint.h"
#include "heapkit/core/HeapContract.h"
#include "heapkit/core/SizeWord.h"

namespace heapkit {

struct RealMemory {
  static constexpr bool kCounts = false;
  static constexpr bool kSimulatesData = false;
};
struct CountedMemory {
  static constexpr bool kCounts = true;
  static constexpr bool kSimulatesData = false;
};
struct SimulatedMemory {
  static constexpr bool kCounts = true;
  static constexpr bool kSimulatesData = true;
};

inline constexpr std::size_t kArenaPageBytes = 4096;
struct NoWorkCounts {};

template <class Memory>
class ReservedArena {
 public:
  using MemoryKind = Memory;
  static constexpr std::size_t kGranuleBytes = 64 * 1024;
  static constexpr std::size_t kDefaultReserveBytes = std::size_t{64} << 30;
  static constexpr std::uint8_t kNoOwner = 0;

  // The smallest range tried when the address space is limited (below).
  static constexpr std::size_t kMinReserveBytes = std::size_t{256} << 20;

  // Where the address space cannot take reserveBytes (a `ulimit -v`; valgrind, which
  // allows less than 64 GiB), the largest half, quarter... of it that fits, down to
  // kMinReserveBytes: the allocators then hold at most that much, rather than failing
  // their first request. Smaller, the range hands out the same offsets until it is full.
  explicit ReservedArena(std::size_t reserveBytes = kDefaultReserveBytes) {
    for (std::size_t bytes = reserveBytes; !reserveRange(bytes) && bytes / 2 >= kMinReserveBytes;) bytes /= 2;
  }
  ReservedArena(const ReservedArena&) = delete;
  ReservedArena& operator=(const ReservedArena&) = delete;
  ~ReservedArena() { unmapAll(alignUp((granules_ / 2 + 1) * sizeof(Run), kArenaPageBytes)); }

  // An extent of at least `bytes` (rounded up to whole pages, which `bytes` is set to),
  // starting on a granule, or nullptr when the reserved range has no room.
  void* obtain(std::size_t& bytes, std::uint8_t owner) {
    if (bytes == 0 || bytes > granules_ * kGranuleBytes) return fail();
    bytes = alignUp(bytes, kArenaPageBytes);
    std::size_t wanted = alignUp(bytes, kGranuleBytes) / kGranuleBytes;
    std::size_t first = takeFromRuns(wanted);
    if (first == kNone) {
      if (wanted > granules_ - bump_) return fail();
      first = bump_;
      bump_ += wanted;
    }
    std::memset(owners_ + first, owner, wanted);
    footprint_.add(bytes);
    if constexpr (Memory::kCounts) ++counts_.steps;
    return base_ + first * kGranuleBytes;
  }

  void release(void* extent, std::size_t bytes) {
    std::size_t first = static_cast<std::size_t>(static_cast<char*>(extent) - base_) / kGranuleBytes;
    std::size_t count = alignUp(bytes, kGranuleBytes) / kGranuleBytes;
    madvise(extent, bytes, MADV_DONTNEED);
    std::memset(owners_ + first, kNoOwner, count);
    footprint_.remove(bytes);
    giveBack(first, count);
    if constexpr (Memory::kCounts) {
      ++counts_.steps;
      counts_.pagesReleased(extent, bytes);
    }
  }

  // The top-heap contract's purge (core/HeapContract.h, PurgingHeap): the pages go back
  // to the kernel, the granules stay the owner's. One step: a request to the OS.
  void purge(void* pages, std::size_t bytes) {
    madvise(pages, bytes, MADV_DONTNEED);
    footprint_.purge(bytes);
    if constexpr (Memory::kCounts) {
      ++counts_.steps;
      counts_.pagesReleased(pages, bytes);
    }
  }
  void reuse(void* /*pages*/, std::size_t bytes) { footprint_.reuse(bytes); }
  // purge, of pages of the extent obtained last that were never touched (core/Footprint.h).
  void purgeUntouched(void* pages, std::size_t bytes) {
    madvise(pages, bytes, MADV_DONTNEED);
    footprint_.purgeUntouched(bytes);
    if constexpr (Memory::kCounts) ++counts_.steps;
  }
  // Purged pages of an extent about to be released (core/Footprint.h).
  void forgetPurged(std::size_t bytes) { footprint_.forgetPurged(bytes); }
  std::size_t residentBytes() const { return footprint_.resident(); }
  std::size_t peakResidentBytes() const { return footprint_.peakResident(); }

  bool contains(const void* ptr) const {
    return static_cast<std::size_t>(static_cast<const char*>(ptr) - base_) < granules_ * kGranuleBytes;
  }
  // The owner tag of the extent holding ptr (kNoOwner outside every extent).
  std::uint8_t ownerOf(const void* ptr) const {
    Uncounted none;
    return ownerOf(none, ptr);
  }
  // The same, as part of `heap`'s work: the owner table is metadata, its byte counted.
  template <class H>
  std::uint8_t ownerOf(H& heap, const void* ptr) const {
    return contains(ptr) ? loadMetadata(heap, owners_[static_cast<std::size_t>(static_cast<const char*>(ptr) - base_) / kGranuleBytes])
                         : kNoOwner;
  }

  char* base() const { return base_; }
  std::size_t reservedBytes() const { return granules_ * kGranuleBytes; }
  std::size_t bytesHeld() const { return footprint_.held(); }
  std::size_t peakBytesHeld() const { return footprint_.peak(); }
  // True once a request failed for want of address space (not of memory): the reserved
  // range was too small for the workload.
  bool exhausted() const { return exhausted_; }

  WorkCounts& workCounts()
    requires Memory::kCounts
  {
    return counts_;
  }

 private:
  struct Run {
    std::size_t first;
    std::size_t count;
  };
  static constexpr std::size_t kNone = SIZE_MAX;

  // The base is aligned to kBaseAlignment, so an address's low 32 bits (which a layer may
  // hash, as the size tree does for its priorities) are the same in every arena.
  static constexpr std::size_t kBaseAlignment = std::size_t{1} << 32;
  // The range and its owner and run tables, or nothing (every request then fails cleanly).
  bool reserveRange(std::size_t bytes) {
    granules_ = alignUp(bytes, kGranuleBytes) / kGranuleBytes;
    std::size_t runBytes = alignUp((granules_ / 2 + 1) * sizeof(Run), kArenaPageBytes);
    base_ = reserveAligned(granules_ * kGranuleBytes);
    owners_ = static_cast<std::uint8_t*>(reserve(alignUp(granules_, kArenaPageBytes)));
    runs_ = static_cast<Run*>(reserve(runBytes));
    if (base_ != nullptr && owners_ != nullptr && runs_ != nullptr) return true;
    unmapAll(runBytes);
    granules_ = 0;
    return false;
  }
  static char* reserveAligned(std::size_t bytes) {
    auto* raw = static_cast<char*>(reserve(bytes + kBaseAlignment));
    if (raw == nullptr) return nullptr;
    char* base = reinterpret_cast<char*>(alignUp(reinterpret_cast<std::uintptr_t>(raw), kBaseAlignment));
    if (base != raw) munmap(raw, static_cast<std::size_t>(base - raw));
    std::size_t after = static_cast<std::size_t>(raw + bytes + kBaseAlignment - (base + bytes));
    if (after != 0) munmap(base + bytes, after);
    return base;
  }
  static void* reserve(std::size_t bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
  }
  void unmapAll(std::size_t runBytes) {
    if (base_ != nullptr) munmap(base_, granules_ * kGranuleBytes);
    if (owners_ != nullptr) munmap(owners_, alignUp(granules_, kArenaPageBytes));
    if (runs_ != nullptr) munmap(runs_, runBytes);
    base_ = nullptr;
    owners_ = nullptr;
    runs_ = nullptr;
  }

  void* fail() {
    exhausted_ = true;
    return nullptr;
  }

  // First fit over the free runs, lowest address first.
  std::size_t takeFromRuns(std::size_t wanted) {
    for (std::size_t i = 0; i < runCount_; ++i) {
      if (runs_[i].count < wanted) continue;
      std::size_t first = runs_[i].first;
      runs_[i].first += wanted;
      runs_[i].count -= wanted;
      if (runs_[i].count == 0) {
        std::memmove(runs_ + i, runs_ + i + 1, (runCount_ - i - 1) * sizeof(Run));
        --runCount_;
      }
      return first;
    }
    return kNone;
  }

  // Inserts [first, first+count) into the sorted runs, merging neighbours; a run that
  // reaches the bump pointer lowers it instead.
  void giveBack(std::size_t first, std::size_t count) {
    std::size_t i = 0;
    while (i < runCount_ && runs_[i].first < first) ++i;
    bool mergesBefore = i > 0 && runs_[i - 1].first + runs_[i - 1].count == first;
    bool mergesAfter = i < runCount_ && first + count == runs_[i].first;
    if (mergesBefore && mergesAfter) {
      runs_[i - 1].count += count + runs_[i].count;
      std::memmove(runs_ + i, runs_ + i + 1, (runCount_ - i - 1) * sizeof(Run));
      --runCount_;
      --i;
    } else if (mergesBefore) {
      runs_[--i].count += count;
    } else if (mergesAfter) {
      runs_[i].first = first;
      runs_[i].count += count;
    } else {
      std::memmove(runs_ + i + 1, runs_ + i, (runCount_ - i) * sizeof(Run));
      runs_[i] = {first, count};
      ++runCount_;
    }
    if (i + 1 == runCount_ && runs_[i].first + runs_[i].count == bump_) {
      bump_ = runs_[i].first;
      --runCount_;
    }
  }

  char* base_ = nullptr;
  std::uint8_t* owners_ = nullptr;
  Run* runs_ = nullptr;
  std::size_t granules_ = 0;
  std::size_t bump_ = 0;
  std::size_t runCount_ = 0;
  bool exhausted_ = false;
  Footprint footprint_;
  [[no_unique_address]] std::conditional_t<Memory::kCounts, WorkCounts, NoWorkCounts> counts_;
};

// One allocator's top heap over a shared arena. Each request is an extent of its own with
// a 16-byte header (the extent's bytes, then the usable size as the size word), as the
// other top heaps lay out their blocks.
template <class Arena>
class ArenaHeap {
  struct alignas(16) Header {
    std::size_t extentBytes;
    std::size_t sizeWord;
  };

 public:
  static constexpr std::size_t Alignment = kMinAlignment;
  static constexpr bool KeepsSizeWord = true;
  static constexpr bool SimulatesData = Arena::MemoryKind::kSimulatesData;
  // Reserved pages are fresh, and released extents and purged pages go back with
  // MADV_DONTNEED.
  static constexpr bool PagesReadZero = true;

  ArenaHeap(Arena& arena, std::uint8_t owner) : arena_(&arena), owner_(owner) {}
  ArenaHeap(const ArenaHeap&) = delete;
  ArenaHeap& operator=(const ArenaHeap&) = delete;

  void* malloc(std::size_t size) {
    if (!fitsAfterAlignUp(size, sizeof(Header) + kArenaPageBytes, kMinAlignment)) return nullptr;
    std::size_t bytes = usableBytesFor(size) + sizeof(Header);
    auto* header = static_cast<Header*>(arena_->obtain(bytes, owner_));
    if (header == nullptr) return nullptr;
    storeMetadata(*this, header->extentBytes, bytes);
    storeMetadata(*this, header->sizeWord, (bytes - sizeof(Header)) & ~sizeword::kFlagMask);
    footprint_.add(bytes);
    return header + 1;
  }

  void free(void* object) {
    if (object == nullptr) return;
    Header* header = static_cast<Header*>(object) - 1;
    std::size_t bytes = loadMetadata(*this, header->extentBytes);
    footprint_.remove(bytes);
    arena_->release(header, bytes);
  }

  std::size_t getSize(void* object) const { return sizeword::size(object); }

  // What this allocator holds; the arena's figures are the whole DMM's.
  std::size_t bytesHeld() const { return footprint_.held(); }
  std::size_t peakBytesHeld() const { return footprint_.peak(); }

  // The top-heap contract's purge and reuse, counted here and in the arena.
  void purge(void* pages, std::size_t bytes) {
    footprint_.purge(bytes);
    arena_->purge(pages, bytes);
  }
  void reuse(void* pages, std::size_t bytes) {
    footprint_.reuse(bytes);
    arena_->reuse(pages, bytes);
  }
  // Pages of the block obtained last, never touched: out of the resident count without
  // having raised its high-water mark (a new segment's; core/Footprint.h).
  void purgeUntouched(void* pages, std::size_t bytes) {
    footprint_.purgeUntouched(bytes);
    arena_->purgeUntouched(pages, bytes);
  }
  // Purged pages of a block about to be freed: they go back with it, never resident again
  // (instead of reuse before free, which would raise the resident high-water mark).
  void forgetPurged(void* /*pages*/, std::size_t bytes) {
    footprint_.forgetPurged(bytes);
    arena_->forgetPurged(bytes);
  }
  std::size_t residentBytes() const { return footprint_.resident(); }
  std::size_t peakResidentBytes() const { return footprint_.peakResident(); }

  Arena& arena() const { return *arena_; }
  std::uint8_t owner() const { return owner_; }

  WorkCounts& workCounts()
    requires Arena::MemoryKind::kCounts
  {
    return arena_->workCounts();
  }

 private:
  Arena* arena_;
  std::uint8_t owner_;
  Footprint footprint_;
};

// A top heap that is one allocator's view of a ReservedArena.
template <class H>
concept ArenaTopHeap = requires(const H& heap) {
  heap.arena();
  { heap.owner() } -> std::same_as<std::uint8_t>;
};

}  // namespace heapkit
