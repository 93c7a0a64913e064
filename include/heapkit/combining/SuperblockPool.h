// SuperblockPool: where superblocks (building/Superblock.h) go when they empty and come
// from when a size class needs one. It keeps the superblocks freed last with their pages
// (warm), so that a program that frees and rebuilds a structure (GCBench's trees) reuses
// resident pages instead of faulting in zeroed ones, and gives older ones back to the
// segments below (building/SegmentHeap.h) with their pages purged, so that peak RSS
// tracks live data:
//  - at most warmSuperblocks (64: 4 MiB) stay warm; beyond, the one freed longest ago is
//    purged and freed to the segments (the ones freed last are the likeliest to be needed
//    again), or, from a heap whose thread left, freed with its pages;
//  - a class takes its own warm superblock first; a class of objects up to
//    withoutPagesUpToBytes (1 KiB) takes another class's without its pages (it may need
//    only a few of the pages the other class filled, and would keep the rest resident for
//    nothing: half of espresso's takes change class); larger objects fill pages quickly,
//    and alloctest's big classes pass superblocks to each other thousands of times, where
//    giving their pages back cost 9,000 madvise calls and 0.2 s of page faults for no
//    gain in peak RSS;
//  - when the program grows into pages not resident while warm superblocks sit unused,
//    as many bytes of the oldest go back, so the resident set stays near what is in use
//    (espresso's peak RSS went from 560 to 150 KiB over glibc's with both this and the
//    previous rule; either alone gained nothing). GCBench, which takes its warm
//    superblocks back before it touches new pages, keeps them.
//  - otherwise a superblock is a span of one slice from the segments.
// Not thread-safe: ScalableHeap calls it under its pool lock (warmSuperblocks() excepted,
// a hint read without it).
//
// Counted (core/Counting.h): the warm list's links and the headers' words it reads and
// writes, one step per superblock visited.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "heapkit/building/Superblock.h"
#include "heapkit/core/Counting.h"
#include "heapkit/core/Hardening.h"
#include "heapkit/core/HeapContract.h"

namespace heapkit {

struct SuperblockPoolConfig {
  std::size_t warmSuperblocks = 64;
  std::size_t withoutPagesUpToBytes = 1024;
};

template <class Super>
class SuperblockPool : public Super {
  static constexpr bool kHardened = hardened<Super>();

 public:
  using Segment = typename Super::Segment;

  template <class... SuperArgs>
  explicit SuperblockPool(const SuperblockPoolConfig& config, SuperArgs&&... superArgs)
      : Super(std::forward<SuperArgs>(superArgs)...), config_(config) {}
  SuperblockPool() = default;

  // A superblock for objects of `objectBytes` of class `sizeClass`: its header in place,
  // residentEnd and its segment (`block`) set, the rest for the caller to format. Null
  // when the parent has no memory.
  Superblock* takeSuperblock(std::size_t sizeClass, std::size_t objectBytes) {
    Superblock* sb = takeWarm(sizeClass);
    if (sb == nullptr && (sb = takeWarm(kAnyClass)) != nullptr) {
      if (objectBytes <= config_.withoutPagesUpToBytes) giveBackPages(sb);
    }
    if (sb != nullptr) return sb;
    Segment* segment = nullptr;
    auto* span = static_cast<char*>(Super::allocSpan(1, segment));
    if (span == nullptr) return nullptr;
    // Its head is written only now (its header in its slot, whose page the segments made
    // resident): a segment's unused slices cost no pages.
    Super::makeResident(segment, span, span + superblock::kPageBytes);
    sb = Superblock::create<kHardened>(*this, reinterpret_cast<std::uintptr_t>(span));
    storeMetadata(*this, sb->block, static_cast<void*>(segment));
    storeMetadata(*this, sb->residentEnd, span + Super::residentPrefix(segment, span));
    return sb;
  }

  // An empty superblock no heap owns any more. From a heap a thread left (`leaving`),
  // those beyond the warm ones go back to the segments with their pages.
  void retire(Superblock* sb, bool leaving = false) {
    storeMetadata(*this, sb->prev, nullptr);
    storeMetadata(*this, sb->next, warm_);
    if (warm_ != nullptr) storeMetadata(*this, warm_->prev, sb);
    else warmTail_ = sb;
    warm_ = sb;
    if (warmCount_.fetch_add(1, std::memory_order_relaxed) + 1 > config_.warmSuperblocks) coolOldestWarm(!leaving);
  }

  // A superblock in use grew into the pages [from, to) (its bump pointer passed its
  // resident end): they count as resident, and warm superblocks may have to make room.
  void grew(Superblock* sb, char* from, char* to) {
    Super::makeResident(segmentOf(sb), from, to);
    if (warmCount_.load(std::memory_order_relaxed) != 0) offsetGrowth(static_cast<std::size_t>(to - from));
  }

  // Superblocks free to hand out: warm, and the free slices of the segments (tests).
  std::size_t pooledSuperblocks() const { return warmCount_.load(std::memory_order_relaxed) + Super::freeSlices(); }
  // Read without the lock by carving threads, as a hint.
  std::size_t warmSuperblocks() const { return warmCount_.load(std::memory_order_relaxed); }
  const SuperblockPoolConfig& poolConfig() const { return config_; }

 private:
  static constexpr std::size_t kAnyClass = SIZE_MAX;

  Segment* segmentOf(Superblock* sb) { return static_cast<Segment*>(loadMetadata(*this, sb->block)); }

  // The warm superblock freed last of the class (or of any class), unlinked; or null.
  // The scan is short (64 at most) and runs once per 64 KiB.
  Superblock* takeWarm(std::size_t sizeClass) {
    Superblock* sb = warm_;
    while (sb != nullptr && sizeClass != kAnyClass && loadMetadata(*this, sb->sizeClass) != sizeClass) {
      countStep(*this);
      sb = loadMetadata(*this, sb->next);
    }
    if (sb != nullptr) unlinkWarm(sb);
    return sb;
  }

  void unlinkWarm(Superblock* sb) {
    Superblock* prev = loadMetadata(*this, sb->prev);
    Superblock* next = loadMetadata(*this, sb->next);
    if (prev != nullptr) storeMetadata(*this, prev->next, next);
    else warm_ = next;
    if (next != nullptr) storeMetadata(*this, next->prev, prev);
    else warmTail_ = prev;
    warmCount_.fetch_sub(1, std::memory_order_relaxed);
  }

  // Keeps the head's page; gives the rest of the pages back.
  void giveBackPages(Superblock* sb) {
    char* base = reinterpret_cast<char*>(Superblock::baseOf(sb));
    if (loadMetadata(*this, sb->residentEnd) <= base + superblock::kPageBytes) return;
    Super::purgeSliceTail(segmentOf(sb), base + superblock::kPageBytes);
    storeMetadata(*this, sb->residentEnd, base + superblock::kPageBytes);
  }

  // The superblock freed longest ago goes back to the segments, its pages purged; or,
  // from a heap a thread left, with its pages, for the segments' delay and budget to
  // decide (a thread that exits with hundreds of empty superblocks would purge them one
  // system call each: prodcons' producer made 126 at its exit). GCBench frees trees and
  // builds them again: keeping the pages of its overflow, instead of purging them, raised
  // its peak RSS by 400 KiB.
  void coolOldestWarm(bool purge) {
    Superblock* oldest = warmTail_;
    unlinkWarm(oldest);
    Super::freeSpan(segmentOf(oldest), reinterpret_cast<void*>(Superblock::baseOf(oldest)), purge);
  }

  // The program grew into pages not resident while the pool holds resident superblocks
  // nobody took: the peak would count both. As many bytes of the oldest warm superblocks
  // as the program grew by go back to the OS.
  void offsetGrowth(std::size_t grown) {
    unoffsetGrowth_ += grown;
    while (warmCount_.load(std::memory_order_relaxed) != 0) {
      countStep(*this);
      Superblock* oldest = warmTail_;
      auto resident = static_cast<std::size_t>(loadMetadata(*this, oldest->residentEnd) -
                                               reinterpret_cast<char*>(Superblock::baseOf(oldest)));
      resident = resident > superblock::kPageBytes ? resident - superblock::kPageBytes : 0;  // less the head's page
      if (unoffsetGrowth_ < resident) return;
      unoffsetGrowth_ -= resident;
      coolOldestWarm(true);
    }
    unoffsetGrowth_ = 0;
  }

  SuperblockPoolConfig config_{};
  Superblock* warm_ = nullptr;  // freed superblocks with their pages, freed last first
  Superblock* warmTail_ = nullptr;
  std::atomic<std::size_t> warmCount_ = 0;  // changed under the lock, read without it as a hint
  std::size_t unoffsetGrowth_ = 0;  // bytes grown into while warm superblocks stayed resident
};

}  // namespace heapkit
