// LargeObjectHeap: ScalableHeap's blocks above its small-object classes. Each gets a
// superblock header (building/Superblock.h) flagged as a large block in the slot of the
// slice its object starts in, so that free finds it from the pointer like any small
// object's, and so that the owner's free fast path never takes it (its free token is
// closed):
//  - blocks up to spanMaxBytes (32 MiB, glibc's largest mmap threshold; alignment below
//    4 MiB) are spans of 64 KiB slices from the segments (building/SegmentHeap.h): a
//    freed span is reused by the next request that fits (a bigger one is split), and its
//    pages go back to the OS after a delay or over a budget, so a program passing 32 KiB
//    records between threads, or replacing buffers of a few hundred KiB or images of a
//    few MiB, makes no system call per block. Only the pages up to the request's last are
//    counted resident (and handed out: getSize). The header's residentEnd keeps where the
//    span's old data ended when it was handed out: past it the pages read as zero (never
//    touched, or purged), so calloc leaves them untouched, as glibc's does with fresh
//    memory (a program's sparse hash table of 512 KiB then costs the pages it uses);
//  - larger blocks (and those aligned to 4 MiB or more) are blocks of the parent's
//    mallocs, 4 MiB larger than the object, so that a 4 MiB-aligned region in them holds
//    the header's slot (the object starts in its second slice; an object aligned to 4 MiB
//    or more starts a region, and its header is the last slot of the region before): a
//    cache of freed blocks (AdaptiveThresholdHeap) keeps them for reuse within
//    a budget this layer sets, twice the biggest block freed within recentOperations
//    large operations, at least cacheMinBytes, at most cacheMaxBytes (glibc's trim
//    threshold follows its mmap threshold at 2x; two blocks of the biggest size is what
//    a loop replacing a working set needs).
// Not thread-safe: ScalableHeap calls its shared one under its pool lock (a block freed
// by any thread comes back there), and each thread's own one (threads/OwnedSpanHeap.h)
// from that thread only.
//
// Counted (core/Counting.h): the header's words and the live list's links.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "heapkit/building/Superblock.h"
#include "heapkit/core/Counting.h"
#include "heapkit/core/Hardening.h"
#include "heapkit/core/HeapContract.h"

namespace heapkit {

struct LargeObjectConfig {
  std::size_t spanMaxBytes = 32 * 1024 * 1024;
  std::size_t cacheMinBytes = 4 * 1024 * 1024;
  std::size_t cacheMaxBytes = 64 * 1024 * 1024;
  std::uint64_t recentOperations = 1024;
};

template <class Super>
class LargeObjectHeap : public Super {
  static constexpr bool kHardened = hardened<Super>();
  static constexpr bool kSecure = secure<Super>();
  static constexpr std::size_t kSecureSpanMaxBytes = 1024 * 1024;
  static constexpr std::size_t kSb = superblock::kBytes;
  // Where a block came from, in its header's sizeClass (unused by large blocks otherwise).
  static constexpr std::uint32_t kFromSpan = 1;
  static constexpr std::uint32_t kFromParent = 2;

 public:
  using Segment = typename Super::Segment;

  template <class... SuperArgs>
  explicit LargeObjectHeap(const LargeObjectConfig& config, SuperArgs&&... superArgs)
      : Super(std::forward<SuperArgs>(superArgs)...), config_(config) {
    setCacheBudget();
  }
  LargeObjectHeap() { setCacheBudget(); }

  ~LargeObjectHeap() {
    // Live blocks of the parent go back (medium blocks go with their segments).
    while (largeBlocks_ != nullptr) {
      Superblock* sb = largeBlocks_;
      largeBlocks_ = sb->next;
      Super::free(sb->block);
    }
  }

  // A block of at least `size` bytes aligned to `alignment` (a power of two), or null.
  void* mallocLarge(std::size_t size, std::size_t alignment) {
    if (size > kMaxRequestBytes - 2 * superblock::kRegionBytes - alignment) return nullptr;
    std::size_t usable = alignUp(size, kMinAlignment);
    std::size_t spanMaxBytes = config_.spanMaxBytes;
    if constexpr (kSecure) spanMaxBytes = spanMaxBytes < kSecureSpanMaxBytes ? spanMaxBytes : kSecureSpanMaxBytes;
    if (alignment < superblock::kRegionBytes && usable <= spanMaxBytes && usable + alignment <= Super::kMaxSpanBytes)
      return mallocSpan(usable, alignment);
    return mallocFromParent(usable, alignment);
  }

  void freeLarge(Superblock* sb) {
    if (loadMetadata(*this, sb->sizeClass) == kFromSpan) {
      Super::freeSpan(static_cast<Segment*>(loadMetadata(*this, sb->block)), loadMetadata(*this, sb->bump));
      return;
    }
    Superblock* prev = loadMetadata(*this, sb->prev);
    Superblock* next = loadMetadata(*this, sb->next);
    if (prev != nullptr) storeMetadata(*this, prev->next, next);
    else largeBlocks_ = next;
    if (next != nullptr) storeMetadata(*this, next->prev, prev);
    void* raw = loadMetadata(*this, sb->block);
    std::size_t bytes = Super::getSize(raw);
    ++clock_;
    if (!keptByParent(bytes)) {
      // Too big to keep: it does not raise the budget of the blocks that are.
    } else if (bytes >= recentLargestFree_ || clock_ - recentLargestFreeAt_ > config_.recentOperations) {
      recentLargestFree_ = bytes;
      recentLargestFreeAt_ = clock_;
    }
    setCacheBudget();
    Super::free(raw);
  }

  const LargeObjectConfig& largeObjectConfig() const { return config_; }

 private:
  // The object starts past the span's head, or aligned further on; its header is the
  // slice's it starts in (the slice's before, for an object at a slice's start: aligned
  // to 64 KiB or more), and `bump` keeps the span's start.
  void* mallocSpan(std::size_t usable, std::size_t alignment) {
    std::size_t slices = (sizeof(SliceHead) + alignment + usable + kSb - 1) / kSb;
    Segment* segment = nullptr;
    std::size_t residentBytes = 0;
    auto* span = static_cast<char*>(Super::allocSpan(slices, segment, residentBytes));
    if (span == nullptr) return nullptr;
    auto* object = reinterpret_cast<char*>(alignUp(reinterpret_cast<std::uintptr_t>(span + sizeof(SliceHead)), alignment));
    std::uintptr_t headerSlice = headerSliceOf(reinterpret_cast<std::uintptr_t>(object));
    if (headerSlice >= reinterpret_cast<std::uintptr_t>(span) + kSb) Super::makeSlotResident(segment, reinterpret_cast<void*>(headerSlice));
    Superblock* sb = Superblock::create<kHardened>(*this, headerSlice);
    auto* end = reinterpret_cast<char*>(alignUp(reinterpret_cast<std::uintptr_t>(object + usable), superblock::kPageBytes));
    // A span whose pages are all resident (a block replaced by one of its size) has none
    // to take into use, and its old data may reach its end.
    char* written = residentBytes == slices * kSb ? span + residentBytes : Super::makeResident(segment, span, end);
    storeMetadata(*this, sb->freeFlags, superblock::kLargeBlock);
    storeMetadata(*this, sb->sizeClass, kFromSpan);
    storeMetadata(*this, sb->residentEnd, written);  // calloc clears the block up to it (Superblock::bytesToClear)
    storeMetadata(*this, sb->block, static_cast<void*>(segment));
    storeMetadata(*this, sb->bump, span);
    storeMetadata(*this, sb->firstObject, object);
    storeMetadata(*this, sb->usableBytes, static_cast<std::size_t>(end - object));
    return object;
  }

  // A block of the parent (SegmentHeap's malloc, through the cache): it starts the second
  // slice of a 4 MiB-aligned region whose first slice holds the header's slot, and the
  // object starts past the slice's head (or aligned further on, as in a span).
  void* mallocFromParent(std::size_t usable, std::size_t alignment) {
    std::size_t bytes = usable + sizeof(SliceHead) + alignment;
    if constexpr (kSecure) bytes += 3 * superblock::kPageBytes;  // at least one whole guard page
    ++clock_;
    // A block fresh from the parent (not one its cache kept) reads as zero past the page
    // the slice's head is written in, over a top heap whose fresh pages do.
    bool fresh = false;
    void* raw;
    if constexpr (PagesReadZeroHeap<Super> && requires(Super& parent, bool& fromParent) { parent.malloc(bytes, fromParent); })
      raw = Super::malloc(bytes, fresh);
    else
      raw = Super::malloc(bytes);
    if (raw == nullptr) return nullptr;
    auto rawAddress = reinterpret_cast<std::uintptr_t>(raw);
    std::uintptr_t object = alignUp(rawAddress + sizeof(SliceHead), alignment);
    Superblock* sb = Superblock::create<kHardened>(*this, headerSliceOf(object));
    storeMetadata(*this, sb->freeFlags, superblock::kLargeBlock);
    storeMetadata(*this, sb->sizeClass, kFromParent);
    storeMetadata(*this, sb->block, raw);
    storeMetadata(*this, sb->firstObject, reinterpret_cast<char*>(object));
    std::uintptr_t end = rawAddress + Super::getSize(raw);
    if constexpr (kSecure) {
      // Everything from the page after the object's last to the block's end is a guard.
      std::uintptr_t guard = alignUp(object + usable, superblock::kPageBytes);
      std::uintptr_t guardEnd = end & ~(superblock::kPageBytes - 1);
      Super::guardPages(reinterpret_cast<void*>(guard), guardEnd - guard);
      end = guard;
    }
    storeMetadata(*this, sb->usableBytes, end - object);
    // calloc clears the block up to it (and realloc's copy writes zeros only there): a
    // kept block may hold old data anywhere.
    storeMetadata(*this, sb->residentEnd,
                  reinterpret_cast<char*>(fresh ? alignUp(object, superblock::kPageBytes) : end));
    storeMetadata(*this, sb->prev, nullptr);
    storeMetadata(*this, sb->next, largeBlocks_);
    if (largeBlocks_ != nullptr) storeMetadata(*this, largeBlocks_->prev, sb);
    largeBlocks_ = sb;
    return reinterpret_cast<void*>(object);
  }

  // Superblock::of's rule: an object at a slice's start has the slice's before.
  static std::uintptr_t headerSliceOf(std::uintptr_t object) { return object - ((object & (kSb - 1)) == 0); }

  bool keptByParent(std::size_t bytes) const {
    if constexpr (requires(const Super& parent) { parent.limits().maxObjectBytes; }) return bytes <= Super::limits().maxObjectBytes;
    else return true;
  }

  // Without a cache (a thread's own segments: threads/OwnedSpanHeap.h) nothing to set.
  void setCacheBudget() {
    if constexpr (!requires(Super& parent) { parent.setTrimThreshold(std::size_t{}); }) {
    } else if constexpr (kSecure) {
      Super::setTrimThreshold(0);  // a freed block goes back to Top at once
    } else {
      std::size_t budget = 2 * recentLargestFree_;
      if (budget < config_.cacheMinBytes) budget = config_.cacheMinBytes;
      if (budget > config_.cacheMaxBytes) budget = config_.cacheMaxBytes;
      Super::setTrimThreshold(budget);
    }
  }

  LargeObjectConfig config_{};
  Superblock* largeBlocks_ = nullptr;  // live blocks of the parent, for the destructor
  std::uint64_t clock_ = 0;            // large mallocs and frees so far
  std::size_t recentLargestFree_ = 0;
  std::uint64_t recentLargestFreeAt_ = 0;
};

}  // namespace heapkit
