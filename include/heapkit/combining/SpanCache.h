// SpanCache: the medium blocks (spans, combining/LargeObjectHeap.h) one thread freed since
// its last request that none of them fitted, kept by that thread, so that a thread
// replacing buffers of a few hundred KiB takes the pool lock for a fraction of its blocks
// (tcmalloc's per-thread caches; mimalloc gets the same from segments a thread owns).
// ScalableHeap (threads/ScalableHeap.h) gives each thread's heap one: every medium block
// went through the shared segments under the pool lock, about 0.93 lock acquisitions per
// malloc and free, and two threads replacing 16-256 KiB buffers waited for each other
// (bench-malloc's buffers x2: some 26,000 futex calls, 4x mimalloc's time).
//
//  - A block is kept as it was freed, with its span and its pages: the segments still
//    count it in use, so nothing of theirs changes and no lock is taken. It serves a
//    request whose pages end within its own (those counted resident) by at most a slice
//    (64 KiB: what a span of the segments may leave unused at its end too); the closest
//    fit is taken. Only blocks with their object at the span's start (no alignment) are
//    kept, of at most maxBlockBytes; at most `blocks` blocks and `maxBytes` of pages.
//  - A request that none fits takes the lock, as it must to take a span from the
//    segments, and gives every kept block back first, so that the segments can merge them
//    and split the request from their pages: held back from the segments, they made the
//    segments fault in new pages (8 blocks kept past a miss: mixedstress 1.6-4 MiB more
//    peak RSS, buffers 0.8-1.6 MiB), and slack beyond a slice left the pages past the
//    request unused (2x slack: mixedstress +4 MiB). A free that finds the cache full gives
//    back the oldest blocks until the block fits. A thread that exits gives back all.
//  - Any thread may keep any block it frees (the segments are shared): a block freed by
//    another thread than its allocator serves the freeing thread next.
// Measured (bench-malloc's workloads, 2 threads): buffers 373,860 lock acquisitions a run
// -> 137,977; mixedstress 200,016 -> 89,242; peak RSS and page faults within the runs'
// spread.
// Not thread-safe: one thread uses it (the owner of the heap it is in); the giveBack
// calls run under the pool lock. The simulator runs it as the real heap does
// (SelectedThreadHeaps names the thread), so footprints stay equal to the byte, with one
// exception: a trace does not record threads ending, so the simulator never gives back
// the blocks a finished thread kept (up to maxBytes a thread) where the real heap does;
// a program whose threads end before its peak is predicted that much above it.
// After fork, the child's heaps of threads that do not exist there keep their blocks
// (their lists may have been mid-change): up to maxBytes a thread, never reused.
//
// Counted (core/Counting.h): the entries read and written, one step per entry visited,
// and the header's words (LargeObjectHeap).
#pragma once

#include <cstddef>
#include <cstdint>

#include "heapkit/building/Superblock.h"
#include "heapkit/core/Counting.h"
#include "heapkit/core/HeapContract.h"

namespace heapkit {

struct SpanCacheConfig {
  std::size_t blocks = 8;                   // kept per thread, at most SpanCache::kMaxBlocks (0: none)
  std::size_t maxBlockBytes = 1024 * 1024;  // pages of one block kept
  std::size_t maxBytes = 2 * 1024 * 1024;   // pages kept per thread
};

class SpanCache {
 public:
  static constexpr std::size_t kMaxBlocks = 8;

  // A kept block serving `size` bytes (16-aligned), or null. Large is LargeObjectHeap's
  // type (its static keptEnd and reuseKept know the header); `heap` counts.
  template <class Large, class H>
  void* take(H& heap, const SpanCacheConfig& config, std::size_t size) {
    std::size_t count = loadMetadata(heap, count_);
    if (count == 0 || size > config.maxBlockBytes) return nullptr;
    std::size_t usable = alignUp(size, kMinAlignment);
    std::size_t best = kMaxBlocks;
    std::size_t bestBytes = SIZE_MAX;
    for (std::size_t i = 0; i < count; ++i) {
      countStep(heap);
      Superblock* sb = loadMetadata(heap, entries_[i].block);
      auto object = Superblock::baseOf(sb) + sizeof(SliceHead);
      auto kept = static_cast<std::size_t>(reinterpret_cast<std::uintptr_t>(loadMetadata(heap, entries_[i].end)) - object);
      std::size_t need = alignUp(object + usable, superblock::kPageBytes) - object;
      if (kept >= need && kept - need <= superblock::kBytes && kept < bestBytes) {
        best = i;
        bestBytes = kept;
      }
    }
    if (best == kMaxBlocks) return nullptr;
    Superblock* sb = loadMetadata(heap, entries_[best].block);
    remove(heap, best);
    return Large::reuseKept(heap, sb, usable);
  }

  // Keeps `sb`, a block just freed (its checks done): true; false when it is not one to
  // keep, or (`full`) when the cache has no room for it until giveBackFor makes some.
  template <class Large, class H>
  bool keep(H& heap, const SpanCacheConfig& config, Superblock* sb, bool& full) {
    full = false;
    if (maxBlocks(config) == 0) return false;
    char* end = Large::keptEnd(heap, sb, config.maxBlockBytes);
    if (end == nullptr) return false;
    std::size_t bytes = blockBytes(sb, end);
    if (bytes > config.maxBytes) return false;
    if (noRoomFor(heap, config, bytes)) {
      full = true;
      return false;
    }
    push(heap, sb, end, bytes);
    return true;
  }

  // Under the pool lock, when a freed block found the cache full: the oldest blocks go
  // back to `large` until `sb` fits; then it is kept.
  template <class Large, class H>
  void giveBackFor(H& heap, Large& large, const SpanCacheConfig& config, Superblock* sb) {
    char* end = Large::keptEnd(heap, sb, config.maxBlockBytes);
    std::size_t bytes = blockBytes(sb, end);
    while (loadMetadata(heap, count_) != 0 && noRoomFor(heap, config, bytes)) giveBackOldest(heap, large);
    push(heap, sb, end, bytes);
  }

  // Under the pool lock: every block goes back to `large` (a request none fitted, or the
  // thread is leaving).
  template <class Large, class H>
  void giveBackAll(H& heap, Large& large) {
    std::size_t count = loadMetadata(heap, count_);
    if (count == 0) return;  // nothing kept: no stores (most misses of a thread that keeps none)
    for (std::size_t i = 0; i < count; ++i) {
      countStep(heap);
      large.freeLarge(loadMetadata(heap, entries_[i].block));
    }
    storeMetadata(heap, count_, std::size_t{0});
    storeMetadata(heap, bytes_, std::size_t{0});
  }

  std::size_t blocks() const { return count_; }
  std::size_t bytes() const { return bytes_; }

 private:
  struct Entry {
    Superblock* block;
    char* end;  // of its pages counted resident (LargeObjectHeap::keptEnd)
  };

  static std::size_t maxBlocks(const SpanCacheConfig& config) { return config.blocks < kMaxBlocks ? config.blocks : kMaxBlocks; }
  static std::size_t blockBytes(Superblock* sb, const char* end) {
    return static_cast<std::size_t>(end - reinterpret_cast<const char*>(Superblock::baseOf(sb)));
  }

  // The cache's limits leave no room for a block of `bytes` more.
  template <class H>
  bool noRoomFor(H& heap, const SpanCacheConfig& config, std::size_t bytes) {
    return loadMetadata(heap, count_) >= maxBlocks(config) || loadMetadata(heap, bytes_) + bytes > config.maxBytes;
  }

  template <class H>
  void push(H& heap, Superblock* sb, char* end, std::size_t bytes) {
    std::size_t count = loadMetadata(heap, count_);
    storeMetadata(heap, entries_[count].block, sb);
    storeMetadata(heap, entries_[count].end, end);
    storeMetadata(heap, count_, count + 1);
    storeMetadata(heap, bytes_, loadMetadata(heap, bytes_) + bytes);
  }

  // Entries stay oldest first.
  template <class H>
  void remove(H& heap, std::size_t index) {
    std::size_t count = loadMetadata(heap, count_);
    Superblock* sb = loadMetadata(heap, entries_[index].block);
    storeMetadata(heap, bytes_, loadMetadata(heap, bytes_) - blockBytes(sb, loadMetadata(heap, entries_[index].end)));
    for (std::size_t i = index + 1; i < count; ++i) {
      countStep(heap);
      storeMetadata(heap, entries_[i - 1].block, loadMetadata(heap, entries_[i].block));
      storeMetadata(heap, entries_[i - 1].end, loadMetadata(heap, entries_[i].end));
    }
    storeMetadata(heap, count_, count - 1);
  }

  template <class H, class Large>
  void giveBackOldest(H& heap, Large& large) {
    Superblock* sb = loadMetadata(heap, entries_[0].block);
    remove(heap, 0);
    large.freeLarge(sb);
  }

  Entry entries_[kMaxBlocks] = {};
  std::size_t count_ = 0;
  std::size_t bytes_ = 0;
};

}  // namespace heapkit
