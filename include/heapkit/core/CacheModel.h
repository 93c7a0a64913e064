// CacheModel: what `work` misses, counted from the simulated addresses. A few levels of a
// set-associative data cache (64-byte lines, least recently used within a set), a TLB of
// 4 KiB pages, and the pages first touched (each a page fault in the real replay), fed by
// every metadata word the counting reports (WorkCounts::read and write) and by the
// program's own touches of the objects it gets, as the replayer makes them.
//
// The geometry defaults to one core of the machine the time model was calibrated on (an
// AMD EPYC: L1d 32 KiB 8-way, L2 1 MiB 16-way, L3 32 MiB 16-way, a second-level data TLB
// of 2048 entries); the L3 is looked up only on an L2 miss, so its 4 MiB of tags cost
// little when the working set fits the L2;
// the counts only have to rank designs as the hardware does, not to match its counters.
//
// A page is "touched" once it is first read or written after it came from the OS; the
// kernel then zeroes it through the cache, so the access that faults finds its line there
// (it counts as a fault, not as a miss). Pages
// given back (an extent released, pages purged: MADV_DONTNEED in the real arena) become
// untouched again, so the next access is a fault again, as it is for real. Only pages in
// the tracked range (the arena) fault; other addresses (a heap object's own fields, say)
// are taken as resident.
//
// The caches and the TLB see addresses the same in every run, whatever the process's
// address-space randomisation: an arena page by its offset in the arena (whose base is
// aligned far beyond any set index), any other page by the order it was first seen in.
// Otherwise the sets a heap object's fields fall in, and so the counts and the predicted
// time, would change from run to run.
#pragma once

#include <sys/mman.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <unordered_map>

namespace heapkit {

struct CacheModelCounts {
  std::uint64_t accesses = 0;      // words and touches the model saw
  std::uint64_t l1Misses = 0;      // lines missing from the first level
  std::uint64_t l2Misses = 0;      // ... and from the second
  std::uint64_t l3Misses = 0;      // ... and from the third (memory accesses)
  std::uint64_t tlbMisses = 0;     // pages missing from the TLB (page walks)
  std::uint64_t pagesTouched = 0;  // pages first touched after they came from the OS (page faults)
  std::uint64_t releases = 0;      // times pages were given back (each a system call, madvise)
};

struct CacheGeometry {
  std::size_t l1Bytes = 32 * 1024;          // 8-way
  std::size_t l2Bytes = 1024 * 1024;        // 16-way
  std::size_t l3Bytes = 32 * 1024 * 1024;   // 16-way
  std::size_t tlbEntries = 2048;            // 16-way
  static constexpr std::size_t kLineBytes = 64;
  static constexpr std::size_t kPageBytes = 4096;
};

// Keys (line or page numbers) in sets of Ways, most recently used first.
template <unsigned Ways>
class SetAssociativeCache {
 public:
  // `entries` is rounded up to a power of two of at least Ways (no exceptions here: this
  // header reaches libraries built without them).
  explicit SetAssociativeCache(std::size_t entries) {
    entries = std::bit_ceil(entries < Ways ? std::size_t{Ways} : entries);
    setMask_ = entries / Ways - 1;
    keys_ = std::make_unique<std::uint64_t[]>(entries);
    std::memset(keys_.get(), 0xff, entries * sizeof(std::uint64_t));
  }

  // True when `key` was present; it is the set's most recent either way (a miss evicts
  // the least recently used).
  [[gnu::always_inline]] bool access(std::uint64_t key) {
    std::uint64_t* set = keys_.get() + (key & setMask_) * Ways;
    if (set[0] == key) return true;
    return moveToFront(set, key);
  }

  // The Ways keys of `key`'s set, most recent first (~0: an empty way): for tests that
  // check the order itself, not only the hits it gives.
  const std::uint64_t* setOf(std::uint64_t key) const { return keys_.get() + (key & setMask_) * Ways; }

 private:
  // The ways move down one as they are searched, up to the key's (or off the end, the
  // least recent, when it is absent): one pass, where a search and then a shift would be
  // two (and GCC makes the shift's loop a call to memmove). Measured against it on the
  // S10/boxedsim key streams and in the simulator, none faster (issue 19): ways left in
  // place with the order as 4-bit way numbers in one word (found by comparing every way,
  // or by a byte of each tag first), a search and shift without branches over all or the
  // first 4 ways, sets aligned to 64 bytes, 32-bit tags, and a prefetch of the L2 set.
  // Where S10 spends its time (perf) is the first load of the L2 set and of the TLB's, and
  // the walk's own loads of the simulated heap: memory, not these instructions.
  [[gnu::always_inline]] static bool moveToFront(std::uint64_t* set, std::uint64_t key) {
    std::uint64_t carried = set[0];
    set[0] = key;
    for (unsigned way = 1; way < Ways; ++way) {
      std::uint64_t here = set[way];
      set[way] = carried;
      if (here == key) return true;
      carried = here;
    }
    return false;
  }

  std::uint64_t setMask_ = 0;
  std::unique_ptr<std::uint64_t[]> keys_;  // ~0: an empty way
};

class CacheModel {
 public:
  // Faults are modelled over [trackedBase, trackedBase + trackedBytes): the arena's range.
  CacheModel(const void* trackedBase, std::size_t trackedBytes, const CacheGeometry& geometry = {})
      : l1_(geometry.l1Bytes / CacheGeometry::kLineBytes),
        l2_(geometry.l2Bytes / CacheGeometry::kLineBytes),
        l3_(geometry.l3Bytes / CacheGeometry::kLineBytes),
        tlb_(geometry.tlbEntries),
        firstPage_(reinterpret_cast<std::uintptr_t>(trackedBase) / CacheGeometry::kPageBytes),
        pages_(trackedBytes / CacheGeometry::kPageBytes) {
    bitmapBytes_ = ((pages_ + 63) / 64 * 8 + 4095) & ~std::size_t{4095};
    if (bitmapBytes_ != 0) {
      // Zero pages on demand: a 64 GiB range needs 2 MiB of bits, of which a run touches little.
      void* bits = mmap(nullptr, bitmapBytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (bits != MAP_FAILED) touched_ = static_cast<std::uint64_t*>(bits);
      else pages_ = 0;  // failed(): the owner reports it
    }
  }
  // The bitmap of touched pages could not be mapped: faults would go uncounted.
  bool failed() const { return pages_ == 0 && bitmapBytes_ != 0; }
  ~CacheModel() {
    if (touched_ != nullptr) munmap(touched_, bitmapBytes_);
  }
  CacheModel(const CacheModel&) = delete;
  CacheModel& operator=(const CacheModel&) = delete;

  // One load or store at `address` (a metadata word, or a byte the program writes).
  [[gnu::always_inline]] void access(const void* address) {
    auto at = reinterpret_cast<std::uintptr_t>(address);
    ++counts_.accesses;
    // The line of the access before (a header's words, a link beside a size word): it is
    // the most recent of its L1 set, its page the TLB's most recent of its set and
    // touched, so nothing would change and nothing is counted but the access.
    std::uint64_t realLine = at / CacheGeometry::kLineBytes;
    if (realLine == lastLine_) return;
    lastLine_ = realLine;
    std::uint64_t page = at / CacheGeometry::kPageBytes;
    if (page != lastPage_) [[unlikely]] {
      if (switchToPage(page)) {  // a fault: the kernel has just written the line
        std::uint64_t line = lineOf(at);
        l1_.access(line);
        l2_.access(line);
        l3_.access(line);
        return;
      }
    }
    std::uint64_t line = lineOf(at);
    if (!l1_.access(line)) [[unlikely]] {
      ++counts_.l1Misses;
      if (!l2_.access(line)) [[unlikely]] {
        ++counts_.l2Misses;
        if (!l3_.access(line)) ++counts_.l3Misses;
      }
    }
  }

  // The program writes one byte per page of an object it got (heapkit-replay's touch).
  void touchObject(const void* object, std::uint64_t bytes) {
    const char* first = static_cast<const char*>(object);
    for (std::uint64_t at = 0; at < bytes; at += CacheGeometry::kPageBytes) access(first + at);
  }

  // Pages given back to the OS: untouched again.
  void pagesReleased(const void* start, std::size_t bytes) {
    std::uint64_t from = reinterpret_cast<std::uintptr_t>(start) / CacheGeometry::kPageBytes;
    std::uint64_t to = (reinterpret_cast<std::uintptr_t>(start) + bytes + CacheGeometry::kPageBytes - 1) /
                       CacheGeometry::kPageBytes;
    if (from < firstPage_) from = firstPage_;
    if (to > firstPage_ + pages_) to = firstPage_ + pages_;
    ++counts_.releases;
    for (std::uint64_t page = from; page < to;) {
      std::uint64_t index = page - firstPage_;
      if (index % 64 == 0 && page + 64 <= to) {
        touched_[index / 64] = 0;
        page += 64;
      } else {
        touched_[index / 64] &= ~(std::uint64_t{1} << (index % 64));
        ++page;
      }
    }
    lastPage_ = kNoPage;
    lastLine_ = kNoPage;
  }

  const CacheModelCounts& counts() const { return counts_; }

 private:
  static constexpr std::uint64_t kNoPage = ~std::uint64_t{0};

  static constexpr std::uint64_t kLinesPerPage = CacheGeometry::kPageBytes / CacheGeometry::kLineBytes;
  // Arena pages sit above every page numbered by first sight.
  static constexpr std::uint64_t kArenaFirstVirtualPage = std::uint64_t{1} << 40;

  // The line the caches see: the address's line within the page it is in, on that page's
  // number as the model sees it (the header's comment).
  [[gnu::always_inline]] std::uint64_t lineOf(std::uintptr_t at) const {
    return lastVirtualPage_ * kLinesPerPage + (at % CacheGeometry::kPageBytes) / CacheGeometry::kLineBytes;
  }

  // An access moves to another page about six times an operation, mostly back to one of a
  // few pages (the heap object's fields, a list head's page, the object's), which is then
  // still the most recent of its TLB set: the TLB's lookup ends at its first way, and an
  // arena page's number and touched bit are a subtraction and a bit test away.
  // True when the page faults (its first touch).
  [[gnu::always_inline]] bool switchToPage(std::uint64_t page) {
    lastPage_ = page;
    std::uint64_t index = page - firstPage_;
    if (index >= pages_) [[unlikely]] {
      lastVirtualPage_ = otherVirtualPage(page);
      if (!tlb_.access(lastVirtualPage_)) ++counts_.tlbMisses;
      return false;
    }
    lastVirtualPage_ = kArenaFirstVirtualPage + index;
    if (!tlb_.access(lastVirtualPage_)) [[unlikely]] ++counts_.tlbMisses;
    std::uint64_t bit = std::uint64_t{1} << (index % 64);
    std::uint64_t& word = touched_[index / 64];
    if ((word & bit) != 0) [[likely]] return false;
    word |= bit;
    ++counts_.pagesTouched;
    return true;
  }

  // A page outside the arena, numbered by first sight. The heap object's own fields
  // alternate with arena pages several times an operation: a few recent pages spare the
  // hash table's lookup (a division) most of the time.
  std::uint64_t otherVirtualPage(std::uint64_t page) {
    RecentPage& recent = recentOtherPages_[page % kRecentOtherPages];
    if (recent.page != page) [[unlikely]] recent = {page, otherPages_.try_emplace(page, otherPages_.size()).first->second};
    return recent.virtualPage;
  }

  SetAssociativeCache<8> l1_;
  SetAssociativeCache<16> l2_;
  SetAssociativeCache<16> l3_;
  SetAssociativeCache<16> tlb_;
  std::uint64_t firstPage_;
  std::uint64_t pages_;
  std::uint64_t* touched_ = nullptr;
  std::size_t bitmapBytes_ = 0;
  std::uint64_t lastPage_ = kNoPage;
  std::uint64_t lastLine_ = kNoPage;  // the real line of the access before
  std::uint64_t lastVirtualPage_ = 0;
  // Pages outside the arena, numbered in the order they were first accessed.
  std::unordered_map<std::uint64_t, std::uint64_t> otherPages_;
  struct RecentPage {
    std::uint64_t page = kNoPage;
    std::uint64_t virtualPage = 0;
  };
  static constexpr std::size_t kRecentOtherPages = 8;
  RecentPage recentOtherPages_[kRecentOtherPages];
  CacheModelCounts counts_;
};

}  // namespace heapkit
