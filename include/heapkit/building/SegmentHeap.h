// SegmentHeap: reserved segments carved into spans of 64 KiB slices (mimalloc's segments
// and spans, tcmalloc's page heap). ScalableHeap takes every superblock (a span of one
// slice) and every medium block (a span of several, up to 32 MiB) from it, so such
// blocks cost no system call each: a freed span is reused by the next request that fits,
// and its pages go back to the OS only after a delay, or when the free pages kept exceed
// a budget that follows what the program uses.
//
//  - A segment is a region of 4 MiB aligned to 4 MiB (cut from a block of the parent, its
//    top heap, 4 MiB larger; the pages around it are never touched): its first slice is
//    metadata, the segment itself, the slots of its slices' headers and one entry per
//    slice (building/Superblock.h: a superblock's or a block's header is found from an
//    address by masking to the region), and 63 slices follow. A span longer than 63
//    slices gets a segment of its own, as long as the next power of two, that holds that
//    one span at a time (its header's slot is in its first region, where the span starts).
//  - A free span is taken among the free spans that still have pages (the 64 freed last):
//    the one whose first slices hold the most resident bytes, so that the request faults
//    in the fewest pages; among equals the shortest, then the lowest address, which
//    keeps the spans in use packed low and the free space above them idle until it is
//    purged once (jemalloc's and tcmalloc's lowest-address rule). Else best fit by length
//    (a list per length up to 63 slices, one list of longer spans, and a bitmap of the
//    non-empty lists). The span is split; a freed span merges with free neighbours in its
//    segment.
//  - Residency is tracked per slice: the first `resident` bytes of a slice are counted
//    resident by the top heap, the rest purged (core/HeapContract.h, PurgingHeap). A new
//    segment is purged whole (its pages were never touched: this takes them out of the
//    top heap's resident count; a top heap with purgeUntouched does not count them in its
//    resident high-water mark either, nor, with forgetPurged, the purged pages of a
//    segment it takes back), and callers declare the pages they start using
//    (makeResident), so the top heap's resident bytes are the pages in use and the free
//    pages kept, not the segments' size.
//  - Delayed purge: a free slice whose pages no request reused within `purgeDelay` span
//    operations (allocations and frees of spans) loses them (mimalloc's purge_delay,
//    counted in operations: no clock to read, no background thread, and tests are
//    deterministic). Each slice remembers when it was freed, so a span freed now and
//    merged with an old free neighbour does not keep the neighbour's pages young. Free
//    spans with resident pages are kept in an age list by their oldest such slice. And
//    the free resident bytes are kept within a budget that follows the program, the
//    largest of: inUsePercent of what is in use now; what the spans in use were
//    at their peak over the last one or two delays less what is in use now (the memory
//    the program is likely to ask back soon); twice the longest span freed in that time
//    (a loop replacing big blocks reuses the last one freed: glibc's trim threshold
//    follows its mmap threshold at 2x for the same reason); at least
//    minResidentFreeBytes, at most maxResidentFreeBytes; with belowPeak, never more than
//    the most ever in use less what is in use now, so that free pages never raise the
//    resident high-water mark (peak RSS, what a user measures): they are kept while the
//    program runs below its peak and purged as it climbs to a new one (sqlite3: a budget
//    of a quarter of what was in use held 2.5 MB free at 19.8 MB in use, 0.6 MB over the
//    footprint at its 21.7 MB peak). Beyond it, the spans freed longest ago are purged
//    first. (With blocks of 120-710 KiB replaced at random, free
//    space is fragmented: a budget of a quarter of what was in use purged and faulted in
//    a fifth of every block.)
//  - A segment whose slices are all free and purged goes back to the parent, unless the
//    other segments could not hold what was in use at the recent peak.
// Not thread-safe: ScalableHeap calls it under its pool lock.
//
// Counted (core/Counting.h): every slice entry, list link and bin read or written, one
// step per slice visited and per list node, and the top heap's own step per purge.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <new>
#include <utility>

#include "heapkit/building/Superblock.h"
#include "heapkit/core/Counting.h"
#include "heapkit/core/HeapContract.h"

namespace heapkit {

namespace segment {
inline constexpr std::size_t kSliceBytes = superblock::kBytes;
// Of an ordinary segment, after its metadata slice (a longer span gets a segment of its own).
inline constexpr std::size_t kSlices = superblock::kRegionSlices - 1;
inline constexpr std::size_t kSegmentBytes = superblock::kRegionBytes;  // 4 MiB, its alignment
inline constexpr std::size_t kBins = 64;    // lengths 1 to 63, then one list of longer spans
}  // namespace segment

struct SegmentConfig {
  // Span operations a free slice keeps its pages for (then they are purged).
  std::uint64_t purgeDelay = 16384;
  // The budget of free resident bytes: at least inUsePercent of the bytes in use, never
  // less than minResidentFreeBytes nor more than maxResidentFreeBytes.
  std::size_t minResidentFreeBytes = 4 * 1024 * 1024;
  std::size_t maxResidentFreeBytes = 128 * 1024 * 1024;
  std::size_t inUsePercent = 150;
  // Cap the budget at the most slices ever in use less those in use now (and purge as a
  // span taken fresh lowers that cap): kept free pages never raise the peak resident set.
  bool belowPeak = false;
};

template <SizedHeap Super>
  requires PurgingHeap<Super>
class SegmentHeap : public Super {
 public:
  // One entry per slice. A span's first and last entries hold its length and whether it
  // is free; every entry holds its slice's resident bytes; a free span's first entry
  // links it into its length's list and, while it has resident pages, the age list.
  // 64 bytes, so that an ordinary segment's 63 entries fill one page (at 72 they took
  // two, a page more per 4 MiB of heap resident: sqlite3's 6 segments held 24 KiB more).
  // Lengths and indices fit 16 bits (spans of at most kMaxSpanSlices = 2^15 slices), a
  // span's resident bytes 32 (at most 2^15 slices of 64 KiB: 2 GiB).
  struct SliceEntry {
    std::uint16_t spanSlices;
    std::uint16_t index;     // of the slice in its segment
    std::uint32_t resident;  // bytes from the slice's start counted resident (whole pages)
    std::uint32_t free;
    std::uint32_t residentSum;  // a free span's first entry: resident bytes of all its slices
    SliceEntry* prevFree;
    SliceEntry* nextFree;
    SliceEntry* prevAge;      // toward the span freed last
    SliceEntry* nextAge;      // toward the span freed first
    std::uint64_t freedAt;    // every free slice: when it was freed
    std::uint64_t ageKey;     // a free span's first entry: the oldest freedAt of its resident slices (or earlier)
  };
  static_assert(sizeof(SliceEntry) == 64 && segment::kSlices * sizeof(SliceEntry) <= superblock::kPageBytes);
  // At the region's start, in the slot of its metadata slice; the slots of the others'
  // headers follow, then the entries.
  struct Segment {
    Segment* prev;
    Segment* next;
    char* firstSlice;
    std::size_t purgedBytes;  // of the block, purged and not reused: reused before it goes back
    std::size_t usedSlices;
    std::size_t sliceCount;
    void* block;                 // the parent's block the region was cut from
    std::uint64_t residentSlotPages;  // bit p: page p of the header slots is counted resident
    SliceEntry* slices() { return reinterpret_cast<SliceEntry*>(reinterpret_cast<char*>(this) + superblock::kSlotsBytes); }
  };
  static_assert(sizeof(Segment) <= superblock::kSlotBytes && superblock::kSlotsBytes % alignof(SliceEntry) == 0);

  static constexpr std::size_t kSliceBytes = segment::kSliceBytes;
  static constexpr std::size_t kResidentProbes = 64;
  // Spans of up to 2^15 slices (2 GiB): the entries of a segment of 2^15 slices take 33
  // slices, and the span's header slot must lie in the first region.
  static constexpr std::size_t kMaxSpanSlices = std::size_t{1} << 15;
  static constexpr std::size_t kMaxSpanBytes = kMaxSpanSlices * kSliceBytes;
  static_assert(kMaxSpanSlices <= UINT16_MAX && kMaxSpanBytes <= UINT32_MAX,
                "SliceEntry's 16-bit lengths and 32-bit resident sums hold every span");

  template <class... SuperArgs>
  explicit SegmentHeap(const SegmentConfig& config, SuperArgs&&... superArgs)
      : Super(std::forward<SuperArgs>(superArgs)...), config_(config) {}
  SegmentHeap() = default;
  SegmentHeap(const SegmentHeap&) = delete;
  SegmentHeap& operator=(const SegmentHeap&) = delete;

  ~SegmentHeap() {
    while (segments_ != nullptr) {
      Segment* segment = segments_;
      segments_ = segment->next;
      giveBack(segment);
    }
  }

  // A span of `slices` slices (1 to kMaxSpanSlices), aligned to 64 KiB, or nullptr when
  // the parent has no memory; `segment` is set to the segment holding it, which every
  // other call about the span takes.
  void* allocSpan(std::size_t slices, Segment*& segment) {
    std::size_t residentBytes;
    return allocSpan(slices, segment, residentBytes);
  }
  // The same, and `residentBytes` is set to the bytes of the span counted resident: when
  // it is the whole span, the caller need not tell makeResident (whose answer would be the
  // span's end), which would visit every slice to find nothing to do.
  void* allocSpan(std::size_t slices, Segment*& segment, std::size_t& residentBytes) {
    if (slices == 0 || slices > kMaxSpanSlices) return nullptr;
    tick();
    SliceEntry* entry = takeFreeSpan(slices, residentBytes);
    if (entry == nullptr) {
      if (!addSegment(slices)) return nullptr;
      entry = takeFreeSpan(slices, residentBytes);
    }
    segment = segmentOf(entry);
    std::size_t index = loadMetadata(*this, entry->index);
    markSpan(segment, index, slices, false);
    char* span = loadMetadata(*this, segment->firstSlice) + index * kSliceBytes;
    makeSlotResident(segment, span);
    storeMetadata(*this, segment->usedSlices, loadMetadata(*this, segment->usedSlices) + slices);
    inUseSlices_ += slices;
    if (inUseSlices_ > windowPeakSlices_) windowPeakSlices_ = inUseSlices_;
    if (inUseSlices_ > peakSlices_) peakSlices_ = inUseSlices_;
    // Below the peak, the cap fell by the span's length: a span taken fresh (not from
    // free resident pages) would raise the resident set past what was in use at the peak.
    // With no free resident pages there is nothing to purge, and the budget is not worked out.
    if (config_.belowPeak && residentFreeBytes_ != 0) purgeOverBudget();
    return span;
  }

  // The page holding the header slot of the slice at `slice` (in a span in use) is counted
  // resident: a header is written there. Slot pages stay resident while the segment lives.
  void makeSlotResident(Segment* segment, const void* slice) {
    auto address = reinterpret_cast<std::uintptr_t>(slice);
    std::size_t page = ((address >> std::countr_zero(kSliceBytes)) & (superblock::kRegionSlices - 1)) *
                       superblock::kSlotBytes / superblock::kPageBytes;
    std::uint64_t resident = loadMetadata(*this, segment->residentSlotPages);
    if (resident & (std::uint64_t{1} << page)) return;
    Super::reuse(reinterpret_cast<char*>(segment) + page * superblock::kPageBytes, superblock::kPageBytes);
    storeMetadata(*this, segment->purgedBytes, loadMetadata(*this, segment->purgedBytes) - superblock::kPageBytes);
    storeMetadata(*this, segment->residentSlotPages, resident | (std::uint64_t{1} << page));
  }

  // Gives a span back; with purgeNow its resident pages go back to the OS at once (a
  // superblock the pool cools), else after the delay or when over the budget.
  void freeSpan(Segment* segment, void* span, bool purgeNow = false) {
    tick();
    std::size_t index = sliceIndex(segment, span);
    SliceEntry* first = &segment->slices()[index];
    std::size_t slices = loadMetadata(*this, first->spanSlices);
    storeMetadata(*this, segment->usedSlices, loadMetadata(*this, segment->usedSlices) - slices);
    inUseSlices_ -= slices;
    if (slices > windowBiggestFree_) windowBiggestFree_ = slices;
    if (purgeNow) purgeSlices(segment, index, slices);
    std::size_t resident = 0;
    for (std::size_t i = index; i < index + slices; ++i) {
      countStep(*this);
      resident += loadMetadata(*this, segment->slices()[i].resident);
      storeMetadata(*this, segment->slices()[i].freedAt, clock_);
    }
    residentFreeBytes_ += resident;
    std::uint64_t ageKey = clock_;
    // Merge with the free neighbours: the span before ends at index - 1, the one after
    // starts at index + slices. Each slice keeps its own age.
    if (index > 0) {
      SliceEntry* before = &segment->slices()[index - 1];
      if (loadMetadata(*this, before->free) != 0) {
        std::size_t beforeSlices = loadMetadata(*this, before->spanSlices);
        SliceEntry* beforeFirst = &segment->slices()[index - beforeSlices];
        ageKey = olderKey(ageKey, beforeFirst);
        resident += loadMetadata(*this, beforeFirst->residentSum);
        unlinkFree(beforeFirst);
        index -= beforeSlices;
        slices += beforeSlices;
      }
    }
    if (index + slices < loadMetadata(*this, segment->sliceCount)) {
      SliceEntry* after = &segment->slices()[index + slices];
      if (loadMetadata(*this, after->free) != 0) {
        ageKey = olderKey(ageKey, after);
        resident += loadMetadata(*this, after->residentSum);
        slices += loadMetadata(*this, after->spanSlices);
        unlinkFree(after);
      }
    }
    SliceEntry* merged = markSpan(segment, index, slices, true);
    storeMetadata(*this, merged->residentSum, static_cast<std::uint32_t>(resident));
    storeMetadata(*this, merged->ageKey, ageKey);
    linkFree(merged);
    if (!releaseIfUnneeded(segment)) purgeOverBudget();
  }

  // The pages in [from, to) of a span in use are in use: the parts of them counted purged
  // are counted resident again (no system call). Returns where the data written there
  // before ends (`from` when none was): past it, to `to`, the pages were never touched or
  // were purged since (MADV_DONTNEED), so they read as zero, and calloc need not clear
  // them (glibc's calloc skips fresh memory likewise).
  // The top heap hears of each run of contiguous pages once, not of each slice: over a
  // shared top heap every call takes the pool lock (threads/OwnedSpanHeap.h), and a
  // 700 KiB span taken back after a purge is eleven slices but one run.
  char* makeResident(Segment* segment, const char* from, const char* to) {
    char* firstSlice = loadMetadata(*this, segment->firstSlice);
    std::size_t start = static_cast<std::size_t>(from - firstSlice);
    std::size_t end = alignUp(static_cast<std::size_t>(to - firstSlice), superblock::kPageBytes);
    std::size_t written = start;
    std::size_t runStart = 0, runEnd = 0, reused = 0;
    for (std::size_t index = start / kSliceBytes; index * kSliceBytes < end; ++index) {
      countStep(*this);
      SliceEntry* entry = &segment->slices()[index];
      std::size_t want = end - index * kSliceBytes < kSliceBytes ? end - index * kSliceBytes : kSliceBytes;
      std::size_t resident = loadMetadata(*this, entry->resident);
      if (resident != 0 && index * kSliceBytes + resident > written) written = index * kSliceBytes + resident;
      if (want <= resident) continue;
      std::size_t pagesFrom = index * kSliceBytes + resident, pagesTo = index * kSliceBytes + want;
      if (pagesFrom != runEnd) {
        if (runEnd != runStart) Super::reuse(firstSlice + runStart, runEnd - runStart);
        runStart = pagesFrom;
      }
      runEnd = pagesTo;
      reused += want - resident;
      storeMetadata(*this, entry->resident, static_cast<std::uint32_t>(want));
    }
    if (runEnd != runStart) Super::reuse(firstSlice + runStart, runEnd - runStart);
    if (reused != 0) storeMetadata(*this, segment->purgedBytes, loadMetadata(*this, segment->purgedBytes) - reused);
    return firstSlice + written;
  }

  // The pages of an in-use slice from `from` (a page boundary) to the slice's end go
  // back to the OS: a superblock that keeps its head's page and gives back the rest.
  void purgeSliceTail(Segment* segment, char* from) {
    char* firstSlice = loadMetadata(*this, segment->firstSlice);
    std::size_t index = static_cast<std::size_t>(from - firstSlice) / kSliceBytes;
    SliceEntry* entry = &segment->slices()[index];
    std::size_t keep = static_cast<std::size_t>(from - firstSlice) - index * kSliceBytes;
    std::size_t resident = loadMetadata(*this, entry->resident);
    if (resident <= keep) return;
    purgePages(segment, firstSlice + index * kSliceBytes + keep, resident - keep);
    storeMetadata(*this, entry->resident, static_cast<std::uint32_t>(keep));
  }

  // Bytes from the start of `slice` (in use) counted resident.
  std::size_t residentPrefix(Segment* segment, const void* slice) {
    return loadMetadata(*this, segment->slices()[sliceIndex(segment, slice)].resident);
  }

  // ---- blocks for the layers above (the large-block cache) ---------------------------

  // A block of `size` bytes (to the page) that starts the second slice of a 4 MiB-aligned
  // region, cut from a block of the parent 4 MiB and a slice larger: the region's first 16 KiB hold
  // the block's header slot (and, in slot 0, where the parent's block is), so that a
  // block's header is found by the same mask as a superblock's (combining/
  // LargeObjectHeap.h). The pages before the region, after the slots and after the block
  // were never touched: they are not counted resident, and go back with the block.
  static constexpr bool KeepsSizeWord = false;
  void* malloc(std::size_t size) {
    if (size > kMaxRequestBytes - superblock::kRegionBytes - 2 * kSliceBytes) return nullptr;
    void* raw = Super::malloc(size + superblock::kRegionBytes + kSliceBytes);
    if (raw == nullptr) return nullptr;
    auto start = reinterpret_cast<std::uintptr_t>(raw);
    auto region = alignUp(start, superblock::kRegionBytes);
    auto* block = reinterpret_cast<BlockInRegion*>(region);
    auto page = [](std::uintptr_t address) { return reinterpret_cast<char*>(address); };
    std::size_t bytes = alignUp(size, superblock::kPageBytes);
    std::uintptr_t end = (start + Super::getSize(raw)) & ~(superblock::kPageBytes - 1);
    std::size_t untouched = purgeUntouchedRange(page(alignUp(start, superblock::kPageBytes)), page(region)) +
                            purgeUntouchedRange(page(region + superblock::kSlotsBytes), page(region + kSliceBytes)) +
                            purgeUntouchedRange(page(region + kSliceBytes + bytes), page(end));
    storeMetadata(*this, block->parentBlock, raw);
    storeMetadata(*this, block->purgedBytes, untouched);
    storeMetadata(*this, block->bytes, bytes);
    return page(region + kSliceBytes);
  }
  void free(void* object) {
    if (object == nullptr) return;
    auto* block = blockInRegion(object);
    void* raw = loadMetadata(*this, block->parentBlock);
    std::size_t purged = loadMetadata(*this, block->purgedBytes);
    if constexpr (requires { Super::forgetPurged(raw, purged); }) Super::forgetPurged(raw, purged);
    else Super::reuse(raw, purged);
    Super::free(raw);
  }
  // The bytes asked for, to the page: the rest of the parent's block is not the caller's.
  std::size_t getSize(void* object) const { return loadMetadata(*this, blockInRegion(object)->bytes); }

  // Slices not in a span in use, over every segment (tests, and the pool's count).
  std::size_t freeSlices() const { return totalSlices_ - inUseSlices_; }
  std::size_t segmentCount() const { return segmentCount_; }
  // Resident bytes of free spans, kept for reuse.
  std::size_t residentFreeBytes() const { return residentFreeBytes_; }
  // The most free resident bytes kept now.
  std::size_t residentFreeBudget() const {
    std::size_t budget = (recentPeakSlices() - inUseSlices_) * kSliceBytes;
    std::size_t share = inUseSlices_ * kSliceBytes / 100 * config_.inUsePercent;
    if (budget < share) budget = share;
    std::size_t biggest = 2 * kSliceBytes * (windowBiggestFree_ > lastWindowBiggestFree_ ? windowBiggestFree_ : lastWindowBiggestFree_);
    if (budget < biggest) budget = biggest;
    if (budget < config_.minResidentFreeBytes) budget = config_.minResidentFreeBytes;
    if (budget > config_.maxResidentFreeBytes) budget = config_.maxResidentFreeBytes;
    std::size_t belowPeak = (peakSlices_ - inUseSlices_) * kSliceBytes;
    return config_.belowPeak && belowPeak < budget ? belowPeak : budget;
  }
  const SegmentConfig& segmentConfig() const { return config_; }

 private:
  // Slot 0 of a block's region (combining/LargeObjectHeap.h writes the block's header in
  // the slot of the slice its object starts in).
  struct BlockInRegion {
    void* parentBlock;
    std::size_t purgedBytes;
    std::size_t bytes;
  };
  static BlockInRegion* blockInRegion(const void* object) {
    return reinterpret_cast<BlockInRegion*>(reinterpret_cast<std::uintptr_t>(object) - kSliceBytes);
  }
  std::size_t purgeUntouchedRange(char* from, char* to) {
    if (to <= from) return 0;
    auto bytes = static_cast<std::size_t>(to - from);
    if constexpr (requires { Super::purgeUntouched(from, bytes); }) Super::purgeUntouched(from, bytes);
    else Super::purge(from, bytes);
    return bytes;
  }

  static Segment* segmentOf(SliceEntry* entry) {
    return reinterpret_cast<Segment*>(reinterpret_cast<char*>(entry - entry->index) - superblock::kSlotsBytes);
  }
  // A span in an ordinary segment, or one with a segment of its own: neither kind takes
  // the other's free spans.
  static bool ownSegment(std::size_t slices) { return slices > segment::kSlices; }
  std::size_t sliceIndex(Segment* segment, const void* address) {
    return static_cast<std::size_t>(static_cast<const char*>(address) - loadMetadata(*this, segment->firstSlice)) /
           kSliceBytes;
  }

  // The operation clock; every delay, the peak of the window ending is remembered. Two
  // comparisons each span operation: the window's end and the purge are out of line
  // (inline, their registers were saved and restored on every call: some 30
  // instructions an operation, a tenth of a medium block's malloc and free).
  void tick() {
    ++clock_;
    if (clock_ - windowStart_ >= config_.purgeDelay) [[unlikely]] endWindow();
    if (idleSpanDue()) [[unlikely]] purgeIdle();
  }
  [[gnu::noinline]] void endWindow() {
    {
      lastWindowPeakSlices_ = windowPeakSlices_;
      windowPeakSlices_ = inUseSlices_;
      lastWindowBiggestFree_ = windowBiggestFree_;
      windowBiggestFree_ = 0;
      windowStart_ = clock_;
      // The peak fell: empty segments kept for it may go.
      for (Segment* segment = segments_; segment != nullptr;) {
        countStep(*this);
        Segment* next = loadMetadata(*this, segment->next);
        releaseIfUnneeded(segment);
        segment = next;
      }
    }
  }

  // Writes a span's first and last entries; returns the first.
  SliceEntry* markSpan(Segment* segment, std::size_t index, std::size_t slices, bool free) {
    SliceEntry* first = &segment->slices()[index];
    SliceEntry* last = &segment->slices()[index + slices - 1];
    storeMetadata(*this, first->spanSlices, static_cast<std::uint16_t>(slices));
    storeMetadata(*this, first->free, static_cast<std::uint32_t>(free));
    storeMetadata(*this, last->spanSlices, static_cast<std::uint16_t>(slices));
    storeMetadata(*this, last->free, static_cast<std::uint32_t>(free));
    return first;
  }

  std::size_t residentOf(Segment* segment, std::size_t index, std::size_t slices) {
    std::size_t sum = 0;
    for (std::size_t i = index; i < index + slices; ++i) {
      countStep(*this);
      sum += loadMetadata(*this, segment->slices()[i].resident);
    }
    return sum;
  }

  // ---- free lists by length, and the age list ------------------------------------------

  // Onto its length's list and, with resident pages, the age list by its age.
  void linkFree(SliceEntry* entry) {
    linkBin(entry);
    if (loadMetadata(*this, entry->residentSum) != 0) linkAgeByKey(entry);
  }
  static std::size_t binOf(std::size_t slices) { return (slices < segment::kBins ? slices : segment::kBins) - 1; }

  void linkBin(SliceEntry* entry) {
    std::size_t bin = binOf(loadMetadata(*this, entry->spanSlices));
    SliceEntry* head = loadMetadata(*this, bins_[bin]);
    storeMetadata(*this, entry->prevFree, nullptr);
    storeMetadata(*this, entry->nextFree, head);
    if (head != nullptr) storeMetadata(*this, head->prevFree, entry);
    storeMetadata(*this, bins_[bin], entry);
    storeMetadata(*this, nonEmptyBins_, loadMetadata(*this, nonEmptyBins_) | (std::uint64_t{1} << bin));
  }

  // Off its length's list and the age list; its resident bytes stay counted free.
  void unlinkFree(SliceEntry* entry) {
    std::size_t bin = binOf(loadMetadata(*this, entry->spanSlices));
    SliceEntry* prev = loadMetadata(*this, entry->prevFree);
    SliceEntry* next = loadMetadata(*this, entry->nextFree);
    if (prev != nullptr) storeMetadata(*this, prev->nextFree, next);
    else storeMetadata(*this, bins_[bin], next);
    if (next != nullptr) storeMetadata(*this, next->prevFree, prev);
    if (prev == nullptr && next == nullptr)
      storeMetadata(*this, nonEmptyBins_, loadMetadata(*this, nonEmptyBins_) & ~(std::uint64_t{1} << bin));
    if (loadMetadata(*this, entry->residentSum) != 0) unlinkAge(entry);
  }

  // Into the age list between `newer` and `older` (adjacent, or null at either end).
  void linkAge(SliceEntry* entry, SliceEntry* newer, SliceEntry* older) {
    storeMetadata(*this, entry->prevAge, newer);
    storeMetadata(*this, entry->nextAge, older);
    if (newer != nullptr) storeMetadata(*this, newer->nextAge, entry);
    else ageNewest_ = entry;
    if (older != nullptr) storeMetadata(*this, older->prevAge, entry);
    else ageOldest_ = entry;
  }
  // Into the age list where its key belongs: at the newest end for a span freed now,
  // else found from the oldest end (a merged or re-aged span is old).
  void linkAgeByKey(SliceEntry* entry) {
    std::uint64_t key = loadMetadata(*this, entry->ageKey);
    if (ageNewest_ == nullptr || loadMetadata(*this, ageNewest_->ageKey) <= key) {
      linkAge(entry, nullptr, ageNewest_);
      return;
    }
    SliceEntry* older = nullptr;
    SliceEntry* newer = ageOldest_;
    while (newer != nullptr && loadMetadata(*this, newer->ageKey) < key) {
      countStep(*this);
      older = newer;
      newer = loadMetadata(*this, newer->prevAge);
    }
    linkAge(entry, newer, older);
  }

  // The older of a key and a free span's age, when the span has resident pages.
  std::uint64_t olderKey(std::uint64_t key, SliceEntry* span) {
    if (loadMetadata(*this, span->residentSum) == 0) return key;
    std::uint64_t other = loadMetadata(*this, span->ageKey);
    return other < key ? other : key;
  }

  void unlinkAge(SliceEntry* entry) {
    SliceEntry* prev = loadMetadata(*this, entry->prevAge);
    SliceEntry* next = loadMetadata(*this, entry->nextAge);
    if (prev != nullptr) storeMetadata(*this, prev->nextAge, next);
    else ageNewest_ = next;
    if (next != nullptr) storeMetadata(*this, next->prevAge, prev);
    else ageOldest_ = prev;
  }

  // Among the free spans with resident pages (the kResidentProbes freed last), the one
  // long enough whose first `slices` slices hold the most resident bytes (the fewest pages
  // faulted in), the shortest and then the lowest address among equals; or null. Taking a
  // purged span of the best length instead would fault its pages in while resident ones
  // wait to be purged (with blocks of 120-710 KiB replaced at random, best fit alone
  // faulted in a tenth of every block allocated); taking the first long enough among the
  // 8 freed last spread the spans in use over the segments, so that pages were purged
  // and faulted back in (bench-malloc's buffers: 2.8x the page faults).
  // A span with a segment of its own takes the shortest of them instead: it is taken
  // whole, pages and all.
  // `bestCovered` is set to the resident bytes of the first `slices` slices of the span
  // returned (of an ordinary segment). A span whose slices are all resident covers the
  // request whole without summing them, and one whose resident bytes in all could not
  // reach the best so far is not summed (most of a medium malloc's work was these sums).
  SliceEntry* residentFit(std::size_t slices, std::size_t& bestCovered) {
    SliceEntry* entry = ageNewest_;
    SliceEntry* best = nullptr;
    std::size_t bestLength = SIZE_MAX;
    bestCovered = 0;
    const std::size_t wanted = slices * kSliceBytes;
    for (std::size_t probes = 0; entry != nullptr && probes < kResidentProbes; ++probes) {
      countStep(*this);
      std::size_t length = loadMetadata(*this, entry->spanSlices);
      if (length >= slices && ownSegment(length) == ownSegment(slices)) {
        if (!ownSegment(slices)) {
          std::size_t residentSum = loadMetadata(*this, entry->residentSum);
          std::size_t covered = 0;
          if (residentSum == length * kSliceBytes) {
            covered = wanted;
          } else if ((residentSum < wanted ? residentSum : wanted) < bestCovered) {
            entry = loadMetadata(*this, entry->nextAge);
            continue;
          } else {
            for (std::size_t i = 0; i < slices; ++i) {
              countStep(*this);
              covered += loadMetadata(*this, entry[i].resident);
            }
          }
          if (best == nullptr || covered > bestCovered ||
              (covered == bestCovered && (length < bestLength || (length == bestLength && entry < best)))) {
            best = entry;
            bestLength = length;
            bestCovered = covered;
          }
        } else if (length < bestLength) {
          best = entry;
          bestLength = length;
        }
      }
      entry = loadMetadata(*this, entry->nextAge);
    }
    return best;
  }

  // The shortest span of the list of long ones that holds `slices`, or null.
  SliceEntry* bestFitLong(std::size_t slices) {
    SliceEntry* best = nullptr;
    std::size_t bestSlices = SIZE_MAX;
    for (SliceEntry* entry = loadMetadata(*this, bins_[segment::kBins - 1]); entry != nullptr;
         entry = loadMetadata(*this, entry->nextFree)) {
      countStep(*this);
      std::size_t length = loadMetadata(*this, entry->spanSlices);
      if (length >= slices && length < bestSlices) {
        best = entry;
        bestSlices = length;
      }
    }
    return best;
  }

  // Among the free spans freed last with resident pages (residentFit), the long-enough one
  // whose first slices hold the most resident bytes, then the shortest, then the lowest;
  // else best fit by length (the span freed last among equals). Split: the rest stays free with the
  // age of the whole (its place in the age list). Null when no free span is long enough.
  // A span with a segment of its own is taken whole (`slices` becomes its length).
  SliceEntry* takeFreeSpan(std::size_t& slices, std::size_t& taken) {
    std::size_t covered = 0;
    SliceEntry* entry = residentFit(slices, covered);
    // residentFit summed the resident bytes the span's first slices hold (an ordinary one).
    const bool coveredKnown = entry != nullptr && !ownSegment(slices);
    if (entry == nullptr) {
      std::uint64_t candidates = loadMetadata(*this, nonEmptyBins_) & (~std::uint64_t{0} << binOf(slices));
      // The last bin holds the spans with a segment of their own (ordinary ones are shorter).
      if (!ownSegment(slices)) candidates &= ~(std::uint64_t{1} << (segment::kBins - 1));
      countStep(*this);
      if (candidates == 0) return nullptr;
      std::size_t bin = static_cast<std::size_t>(std::countr_zero(candidates));
      entry = bin + 1 < segment::kBins ? loadMetadata(*this, bins_[bin]) : bestFitLong(slices);
      if (entry == nullptr) return nullptr;
    }
    std::size_t length = loadMetadata(*this, entry->spanSlices);
    Segment* segment = segmentOf(entry);
    std::size_t index = loadMetadata(*this, entry->index);
    std::uint64_t resident = loadMetadata(*this, entry->residentSum);
    SliceEntry* newer = nullptr;
    SliceEntry* older = nullptr;
    if (resident != 0) {
      newer = loadMetadata(*this, entry->prevAge);
      older = loadMetadata(*this, entry->nextAge);
    }
    unlinkFree(entry);
    // Its segment holds one span: the slices past the request go with it, and their pages
    // (purging them made bigblocks fault every page back in: 4x the system time).
    if (ownSegment(length)) slices = length;
    taken = coveredKnown ? covered : residentOf(segment, index, slices);
    residentFreeBytes_ -= taken;
    if (length > slices) {
      SliceEntry* rest = markSpan(segment, index + slices, length - slices, true);
      storeMetadata(*this, rest->residentSum, static_cast<std::uint32_t>(resident - taken));
      storeMetadata(*this, rest->ageKey, loadMetadata(*this, entry->ageKey));
      linkBin(rest);
      if (resident != taken) linkAge(rest, newer, older);
    }
    return entry;
  }

  // ---- purging ------------------------------------------------------------------------

  void purgePages(Segment* segment, char* pages, std::size_t bytes) {
    Super::purge(pages, bytes);
    storeMetadata(*this, segment->purgedBytes, loadMetadata(*this, segment->purgedBytes) + bytes);
  }

  // Purges the resident pages of the slices in [index, index + slices) for which
  // `purgeable(entry)` holds: one request to the OS per run of contiguous pages. Returns
  // the bytes purged.
  template <class Purgeable>
  std::size_t purgeSlicesIf(Segment* segment, std::size_t index, std::size_t slices, Purgeable purgeable) {
    char* firstSlice = loadMetadata(*this, segment->firstSlice);
    char* runStart = nullptr;
    char* runEnd = nullptr;
    std::size_t purged = 0;
    for (std::size_t i = index; i < index + slices; ++i) {
      countStep(*this);
      SliceEntry* entry = &segment->slices()[i];
      std::size_t resident = loadMetadata(*this, entry->resident);
      if (resident == 0 || !purgeable(entry)) continue;
      char* start = firstSlice + i * kSliceBytes;
      if (runEnd != start) {
        if (runStart != nullptr) purgePages(segment, runStart, static_cast<std::size_t>(runEnd - runStart));
        runStart = start;
      }
      runEnd = start + resident;
      purged += resident;
      storeMetadata(*this, entry->resident, 0u);
    }
    if (runStart != nullptr) purgePages(segment, runStart, static_cast<std::size_t>(runEnd - runStart));
    return purged;
  }
  std::size_t purgeSlices(Segment* segment, std::size_t index, std::size_t slices) {
    return purgeSlicesIf(segment, index, slices, [](SliceEntry*) { return true; });
  }

  // The free span's slices idle for longer than the delay lose their pages, or (with
  // `needBytes`) its last slices, enough of them to purge that many bytes: the span is
  // split from its start, so its first slices are the ones reused next. The span stays
  // free, and takes the age of its oldest slice still resident.
  void purgeFreeSpan(SliceEntry* entry, std::size_t needBytes = 0) {
    Segment* segment = segmentOf(entry);
    std::size_t index = loadMetadata(*this, entry->index);
    std::size_t slices = loadMetadata(*this, entry->spanSlices);
    unlinkAge(entry);
    std::size_t purged;
    if (needBytes != 0) {
      std::size_t from = index + slices;
      for (std::size_t found = 0; from > index && found < needBytes;) {
        countStep(*this);
        found += loadMetadata(*this, segment->slices()[--from].resident);
      }
      purged = purgeSlicesIf(segment, from, index + slices - from, [](SliceEntry*) { return true; });
    } else {
      purged = purgeSlicesIf(segment, index, slices, [&](SliceEntry* slice) {
        return clock_ - loadMetadata(*this, slice->freedAt) > config_.purgeDelay;
      });
    }
    residentFreeBytes_ -= purged;
    std::uint64_t resident = loadMetadata(*this, entry->residentSum) - purged;
    storeMetadata(*this, entry->residentSum, static_cast<std::uint32_t>(resident));
    if (resident != 0) {
      std::uint64_t oldest = UINT64_MAX;
      for (std::size_t i = index; i < index + slices; ++i) {
        countStep(*this);
        SliceEntry* slice = &segment->slices()[i];
        if (loadMetadata(*this, slice->resident) != 0 && loadMetadata(*this, slice->freedAt) < oldest)
          oldest = loadMetadata(*this, slice->freedAt);
      }
      storeMetadata(*this, entry->ageKey, oldest);
      linkAgeByKey(entry);
    } else {
      releaseIfUnneeded(segment);
    }
  }

  // The free span with resident pages freed longest ago has been idle for the delay.
  bool idleSpanDue() {
    return ageOldest_ != nullptr && clock_ - loadMetadata(*this, ageOldest_->ageKey) > config_.purgeDelay;
  }
  // Called when idleSpanDue().
  [[gnu::noinline]] void purgeIdle() {
    do {
      countStep(*this);
      purgeFreeSpan(ageOldest_);
    } while (idleSpanDue());
  }

  void purgeOverBudget() {
    // Within the least budget there is nothing to purge, and no budget to compute (the
    // free calls this for every span: some 30 instructions each).
    std::size_t least = config_.minResidentFreeBytes < config_.maxResidentFreeBytes ? config_.minResidentFreeBytes
                                                                                      : config_.maxResidentFreeBytes;
    if (!config_.belowPeak && residentFreeBytes_ <= least) return;
    std::size_t budget = residentFreeBudget();
    while (residentFreeBytes_ > budget && ageOldest_ != nullptr) {
      countStep(*this);
      purgeFreeSpan(ageOldest_, residentFreeBytes_ - budget);
    }
  }

  // ---- segments -----------------------------------------------------------------------

  // A segment of at least `slices` slices: 63, or for a longer span the next power of
  // two, so that the segment can serve the next, somewhat longer span when this one is
  // freed (a loop replacing 5-25 MiB blocks mapped a new segment and faulted it in for a
  // third of its blocks with segments of the span's length, and purged old ones as often).
  // Its region is the 4 MiB-aligned address in a block of the parent 4 MiB larger: only
  // the metadata's pages are touched (the slots' pages as headers are written there).
  bool addSegment(std::size_t slices) {
    std::size_t count = ownSegment(slices) ? std::bit_ceil(slices) : segment::kSlices;
    std::size_t metadata = superblock::kSlotsBytes + count * sizeof(SliceEntry);
    std::size_t metadataSlices = (metadata + kSliceBytes - 1) / kSliceBytes;
    std::size_t blockBytes = superblock::kRegionBytes + (metadataSlices + count) * kSliceBytes;
    void* raw = Super::malloc(blockBytes);
    if (raw == nullptr) return false;
    auto start = reinterpret_cast<std::uintptr_t>(raw);
    auto region = alignUp(start, superblock::kRegionBytes);
    auto* segment = new (reinterpret_cast<void*>(region)) Segment();
    storeMetadata(*this, segment->block, raw);
    SliceEntry* entries = segment->slices();
    for (std::size_t i = 0; i < count; ++i) {
      countStep(*this);
      new (&entries[i]) SliceEntry();
      storeMetadata(*this, entries[i].index, static_cast<std::uint16_t>(i));
    }
    char* firstSlice = reinterpret_cast<char*>(region + metadataSlices * kSliceBytes);
    storeMetadata(*this, segment->firstSlice, firstSlice);
    storeMetadata(*this, segment->sliceCount, count);
    storeMetadata(*this, segment->residentSlotPages, std::uint64_t{1});  // the segment's page
    storeMetadata(*this, segment->next, segments_);
    storeMetadata(*this, segment->prev, nullptr);
    if (segments_ != nullptr) storeMetadata(*this, segments_->prev, segment);
    segments_ = segment;
    ++segmentCount_;
    totalSlices_ += count;
    // The block's pages but the segment's page and the entries' were never touched: out of
    // the resident count. The slots' pages come back as headers are written there.
    auto page = [](std::uintptr_t address) { return reinterpret_cast<char*>(address); };
    std::uintptr_t end = (start + Super::getSize(raw)) & ~(superblock::kPageBytes - 1);
    purgeUntouched(segment, page(alignUp(start, superblock::kPageBytes)), page(region));
    purgeUntouched(segment, page(region + superblock::kPageBytes), page(region + superblock::kSlotsBytes));
    purgeUntouched(segment, page(alignUp(region + metadata, superblock::kPageBytes)), page(end));
    linkFree(markSpan(segment, 0, count, true));
    return true;
  }

  // A top heap that can tell untouched pages from purged ones keeps them out of its
  // resident high-water mark too: the process's resident set never held them.
  void purgeUntouched(Segment* segment, char* from, char* to) {
    std::size_t bytes = purgeUntouchedRange(from, to);
    storeMetadata(*this, segment->purgedBytes, loadMetadata(*this, segment->purgedBytes) + bytes);
  }

  // A segment with no span in use and no resident free page goes back to the parent,
  // unless the program needs it: the other segments could not hold what was in use at
  // the recent peak (it would map a new one soon).
  bool releaseIfUnneeded(Segment* segment) {
    if (loadMetadata(*this, segment->usedSlices) != 0) return false;
    if (loadMetadata(*this, segment->slices()[0].residentSum) != 0) return false;
    if (totalSlices_ - loadMetadata(*this, segment->sliceCount) < recentPeakSlices()) return false;
    releaseSegment(segment);
    return true;
  }
  std::size_t recentPeakSlices() const {
    return windowPeakSlices_ > lastWindowPeakSlices_ ? windowPeakSlices_ : lastWindowPeakSlices_;
  }

  void releaseSegment(Segment* segment) {
    unlinkFree(&segment->slices()[0]);
    Segment* prev = loadMetadata(*this, segment->prev);
    Segment* next = loadMetadata(*this, segment->next);
    if (prev != nullptr) storeMetadata(*this, prev->next, next);
    else segments_ = next;
    if (next != nullptr) storeMetadata(*this, next->prev, prev);
    --segmentCount_;
    totalSlices_ -= loadMetadata(*this, segment->sliceCount);
    giveBack(segment);
  }

  void giveBack(Segment* segment) {
    std::size_t purged = loadMetadata(*this, segment->purgedBytes);
    void* block = loadMetadata(*this, segment->block);
    // A top heap that can forget purged pages of a block it takes back does not count them
    // resident for the moment before the free (its resident high-water mark is the RSS's).
    if constexpr (requires { Super::forgetPurged(block, purged); }) {
      if (purged != 0) Super::forgetPurged(block, purged);
    } else {
      if (purged != 0) Super::reuse(block, purged);
    }
    Super::free(block);
  }

  SegmentConfig config_{};
  Segment* segments_ = nullptr;
  std::size_t segmentCount_ = 0;
  std::size_t totalSlices_ = 0;
  SliceEntry* bins_[segment::kBins] = {};
  std::uint64_t nonEmptyBins_ = 0;
  SliceEntry* ageNewest_ = nullptr;  // free spans with resident pages, freed last first
  SliceEntry* ageOldest_ = nullptr;
  std::size_t residentFreeBytes_ = 0;
  std::size_t inUseSlices_ = 0;
  std::size_t peakSlices_ = 0;  // the most slices ever in use (belowPeak's cap)
  std::uint64_t clock_ = 0;  // span allocations and frees so far
  std::uint64_t windowStart_ = 0;
  std::size_t windowPeakSlices_ = 0;
  std::size_t lastWindowPeakSlices_ = 0;
  std::size_t windowBiggestFree_ = 0;  // the longest span freed in this window, and the last
  std::size_t lastWindowBiggestFree_ = 0;
};

}  // namespace heapkit
