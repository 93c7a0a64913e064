// OwnedSpanHeap: the medium blocks of one thread (ScalableHeap's, threads/ScalableHeap.h),
// spans of segments the thread owns, so that neither its mallocs nor its frees of them
// take a lock, and another thread's free of one takes none either (mimalloc's pages
// owned by a thread, with their thread-free list; snmalloc's remote queues).
//
//   LargeObjectHeap<           a block's header in its slice's slot, as every medium block's
//     SegmentHeap<             this thread's 4 MiB segments, spans of 64 KiB slices, delayed
//       LockedTopRef<Top>>>    purge within a budget; the shared top heap, under the pool lock
//
//  - A block's header names this heap (Superblock::owner; a shared block's is null). Its
//    owner's free gives the span back to the segments at once; another thread's pushes
//    the header on this heap's remote list (one compare-and-swap, no lock), which the
//    owner takes whole (one exchange) at its next medium malloc, before it looks for a
//    span. The free span's header is the link, so the list costs no memory.
//  - Only the top heap is shared: a new segment, a segment given back, and the pages the
//    segments purge or take into use again are counted there, under the pool lock, which
//    is held for a counter's update (the segments' own work is outside it).
//  - Objects up to kMaxBytes (a span of an ordinary segment: 4 MiB less a slice) and
//    LargeObjectConfig::spanMaxBytes, 16-aligned; larger or more aligned ones stay with
//    the shared layers. ScalableHeap gives it blocks up to 256 KiB
//    (ScalableCoreConfig::ownedSpanMaxBytes): with every span up to 4 MiB here, two
//    threads swapping 120-710 KiB blocks (bench-malloc's mixedstress x2) fragmented two
//    sets of segments where one had served both: 85 MiB peak RSS instead of 50, 66,653
//    page faults instead of 12,494, twice the time. At 256 KiB: 60 MiB (glibc 73), 16,500
//    faults, 0.8x the time; at 128 KiB, 52 MiB but buffers' 16-256 KiB half shared.
//  - A thread that exits leaves this heap to the next new thread (ThreadHeapRegistry),
//    with its segments; frees of its blocks meanwhile wait on the remote list.
// Not thread-safe except freeRemote: the owner thread calls the rest.
//
// Counted (core/Counting.h): the segments' and the headers' words, and the remote list's
// head and links.
#pragma once

#include <atomic>
#include <cstddef>

#include "heapkit/building/SegmentHeap.h"
#include "heapkit/building/Superblock.h"
#include "heapkit/combining/LargeObjectHeap.h"
#include "heapkit/core/Counting.h"
#include "heapkit/core/Hardening.h"
#include "heapkit/core/HeapContract.h"
#include "heapkit/threads/Locks.h"

namespace heapkit {

// A top heap shared by several heaps: every call goes to `top` under `lock` (bytes held
// and resident are counted there, once for all of them).
template <class Top, class Lock>
class LockedTopRef {
 public:
  static constexpr std::size_t Alignment = Top::Alignment;
  static constexpr bool KeepsSizeWord = SizeWordHeap<Top>;
  static constexpr bool PagesReadZero = PagesReadZeroHeap<Top>;
  static constexpr bool SimulatesData = simulatesData<Top>();
  static constexpr bool HardenedAgainstMisuse = hardened<Top>();
  static constexpr bool SecureAgainstMisuse = secure<Top>();

  LockedTopRef(Top& top, Lock& lock) : top_(&top), lock_(&lock) {}

  void* malloc(std::size_t size) {
    LockGuard<Lock> guard(*lock_);
    return top_->malloc(size);
  }
  void free(void* object) {
    LockGuard<Lock> guard(*lock_);
    top_->free(object);
  }
  std::size_t getSize(void* object) const { return top_->getSize(object); }
  void purge(void* pages, std::size_t bytes) {
    LockGuard<Lock> guard(*lock_);
    top_->purge(pages, bytes);
  }
  void reuse(void* pages, std::size_t bytes) {
    LockGuard<Lock> guard(*lock_);
    top_->reuse(pages, bytes);
  }
  void purgeUntouched(void* pages, std::size_t bytes)
    requires requires(Top& top) { top.purgeUntouched(pages, bytes); }
  {
    LockGuard<Lock> guard(*lock_);
    top_->purgeUntouched(pages, bytes);
  }
  void forgetPurged(void* pages, std::size_t bytes)
    requires requires(Top& top) { top.forgetPurged(pages, bytes); }
  {
    LockGuard<Lock> guard(*lock_);
    top_->forgetPurged(pages, bytes);
  }
  void guardPages(void* pages, std::size_t bytes)
    requires requires(Top& top) { top.guardPages(pages, bytes); }
  {
    top_->guardPages(pages, bytes);  // mprotect: no count changes
  }
  std::size_t bytesHeld() const {
    LockGuard<Lock> guard(*lock_);
    return top_->bytesHeld();
  }
  std::size_t peakBytesHeld() const {
    LockGuard<Lock> guard(*lock_);
    return top_->peakBytesHeld();
  }
  std::size_t residentBytes() const {
    LockGuard<Lock> guard(*lock_);
    return top_->residentBytes();
  }
  std::size_t peakResidentBytes() const {
    LockGuard<Lock> guard(*lock_);
    return top_->peakResidentBytes();
  }
  // Over a counting top (the simulator's, on one thread), the work is counted there.
  WorkCounts& workCounts()
    requires CountingHeap<Top>
  {
    return top_->workCounts();
  }

 private:
  Top* top_;
  Lock* lock_;
};

template <class Top, class Lock>
class OwnedSpanHeap {
  using Spans = LargeObjectHeap<SegmentHeap<LockedTopRef<Top, Lock>>>;

 public:
  // The largest object served: with its slice head and 16 bytes of alignment room
  // (LargeObjectHeap's span), it fits an ordinary segment's 63 slices.
  static constexpr std::size_t kMaxBytes = segment::kSlices * segment::kSliceBytes - sizeof(SliceHead) - kMinAlignment;

  OwnedSpanHeap(const LargeObjectConfig& large, const SegmentConfig& segments, Top& top, Lock& lock)
      : spans_(large, segments, top, lock) {}
  OwnedSpanHeap(const OwnedSpanHeap&) = delete;
  OwnedSpanHeap& operator=(const OwnedSpanHeap&) = delete;
  // The segments go back to the top heap with the blocks in them (the heap is torn down).

  // The largest block served: kMaxBytes, or less when the blocks LargeObjectConfig makes
  // spans are smaller.
  static std::size_t maxBytes(const LargeObjectConfig& large, std::size_t wanted) {
    std::size_t spans = large.spanMaxBytes < kMaxBytes ? large.spanMaxBytes : kMaxBytes;
    return wanted < spans ? wanted : spans;
  }

  // A block of at least `size` bytes (at most maxBytes(its config)), 16-aligned, or null: the
  // blocks other threads freed go back first, so their spans are reused.
  void* malloc(std::size_t size) {
    collectRemote();
    void* object = spans_.mallocLarge(size, kMinAlignment);
    if (object != nullptr) storeMetadata(spans_, Superblock::of(object)->owner, static_cast<void*>(this));
    return object;
  }

  // The owner thread frees `sb`, a block of this heap (its checks done).
  void freeOwned(Superblock* sb) { spans_.freeLarge(sb); }

  // Any other thread frees `sb`, a block of this heap: onto the remote list. The header
  // is the freeing thread's to write until the owner takes the list.
  void freeRemote(Superblock* sb) {
    Superblock* head = remote_.load(std::memory_order_relaxed);
    do {
      storeMetadata(spans_, sb->nextReactivated, head);
    } while (!remote_.compare_exchange_weak(head, sb, std::memory_order_release, std::memory_order_relaxed));
    countStep(spans_);
  }

  // The owner: every block on the remote list goes back to the segments.
  void collectRemote() {
    if (loadMetadata(spans_, remote_) == nullptr) return;
    Superblock* sb = remote_.exchange(nullptr, std::memory_order_acquire);
    while (sb != nullptr) {
      countStep(spans_);
      Superblock* next = loadMetadata(spans_, sb->nextReactivated);
      spans_.freeLarge(sb);
      sb = next;
    }
  }

  // Tests: this heap's segments, and the slices in spans in use.
  std::size_t segments() const { return spans_.segmentCount(); }
  std::size_t freeSlices() const { return spans_.freeSlices(); }
  std::size_t residentFreeBytes() const { return spans_.residentFreeBytes(); }
  bool hasRemoteFrees() const { return remote_.load(std::memory_order_acquire) != nullptr; }

 private:
  // The remote list's head, written by other threads, on a cache line of its own (by
  // padding: the heap lives in memory aligned to 16 only).
  static constexpr std::size_t kLine = 64;
  Spans spans_;
  char beforeRemote_[kLine]{};
  std::atomic<Superblock*> remote_{nullptr};
  char afterRemote_[kLine - sizeof(std::atomic<Superblock*>)]{};
};

}  // namespace heapkit
