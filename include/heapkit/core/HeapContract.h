// The layer contract, named once so that a wrong composition fails to compile
// with a readable error instead of a page of template noise. See docs/layers.md.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>

namespace heapkit {

// Every heapkit layer guarantees at least this alignment (glibc's malloc does too).
inline constexpr std::size_t kMinAlignment = alignof(std::max_align_t);

constexpr bool isPowerOfTwo(std::size_t n) { return n != 0 && (n & (n - 1)) == 0; }

// Round n up to a multiple of a power-of-two `alignment`. Callers that take sizes from
// users check for overflow first with fitsAfterAlignUp.
constexpr std::size_t alignUp(std::size_t n, std::size_t alignment) {
  return (n + alignment - 1) & ~(alignment - 1);
}

// No object may be larger than this (as in glibc), so pointer differences never overflow.
inline constexpr std::size_t kMaxRequestBytes = PTRDIFF_MAX;

// Every object has room for two pointers, so any free-list layer can link it once freed.
inline constexpr std::size_t kMinObjectBytes = 16;

// The usable bytes a layer sets aside for a request: a multiple of the alignment, never
// less than kMinObjectBytes. Check fitsAfterAlignUp first.
constexpr std::size_t usableBytesFor(std::size_t size) {
  return size <= kMinObjectBytes ? kMinObjectBytes : alignUp(size, kMinAlignment);
}

constexpr bool fitsAfterAlignUp(std::size_t n, std::size_t extra, std::size_t alignment) {
  return n <= SIZE_MAX - extra - alignment;
}

// A heap: malloc/free and a compile-time alignment. malloc returns nullptr on failure and a
// layer never writes through a null from its parent.
template <class H>
concept Heap = requires(H& heap, void* ptr, std::size_t size) {
  { heap.malloc(size) } -> std::same_as<void*>;
  { heap.free(ptr) } -> std::same_as<void>;
  { H::Alignment } -> std::convertible_to<std::size_t>;
} && isPowerOfTwo(H::Alignment) && H::Alignment >= kMinAlignment;

// A heap that can tell how many bytes a live object may use (>= what was requested).
template <class H>
concept SizedHeap = Heap<H> && requires(H& heap, void* ptr) {
  { heap.getSize(ptr) } -> std::same_as<std::size_t>;
};

// Top heaps talk to the OS (or own a fixed buffer) and count what they hold: the footprint.
template <class H>
concept FootprintHeap = Heap<H> && requires(const H& heap) {
  { heap.bytesHeld() } -> std::same_as<std::size_t>;
  { heap.peakBytesHeld() } -> std::same_as<std::size_t>;
};

// Top heaps that can give pages back to the OS without giving up the address range, so
// that a layer keeping free memory for reuse (ScalableHeap's segments and superblocks)
// asks its top heap instead of calling madvise itself, and the top heap counts it:
//  - purge(pages, bytes): the OS takes the pages of [pages, pages + bytes) back; the range
//    stays held, its contents are lost (they read as zero over MmapHeap; a top heap with
//    no way to give pages back, MallocHeap, only counts them). Page-aligned, inside one
//    block the top heap handed out, counted resident (never purged twice).
//  - reuse(pages, bytes): a purged range is in use again (no system call: the OS faults
//    pages in on first touch). A layer reuses every range it purged before it frees the
//    block holding it.
//  - residentBytes(): bytes held less bytes purged and not reused (pages never touched
//    count too: a layer that wants them out of the count purges them when it gets them),
//    and peakResidentBytes() its high-water mark.
// Optional, so that the high-water mark is the process's peak resident set (ArenaHeap and
// the OS heaps have them; SegmentHeap uses them where they exist):
//  - purgeUntouched(pages, bytes): purge, right after malloc, of pages of that block never
//    touched: the high-water mark is not raised by them in between;
//  - forgetPurged(pages, bytes): instead of reuse right before free, for purged pages that
//    go back with the block.
template <class H>
concept PurgingHeap = FootprintHeap<H> && requires(H& heap, const H& constHeap, void* pages, std::size_t bytes) {
  heap.purge(pages, bytes);
  heap.reuse(pages, bytes);
  { constHeap.residentBytes() } -> std::same_as<std::size_t>;
  { constHeap.peakResidentBytes() } -> std::same_as<std::size_t>;
};

// Top heaps whose fresh blocks and purged pages read as zero (mapped or given back with
// MADV_DONTNEED: MmapHeap, ArenaHeap) say so; only over them may calloc leave alone the
// pages a layer knows were never written since (Superblock::bytesToClear). MallocHeap's
// blocks may be recycled and its purge only counts.
template <class H>
concept PagesReadZeroHeap = requires { requires H::PagesReadZero; };

// Heaps that know which bytes of an object just handed out may hold old data (a span's
// pages never written or purged since read as zero) say how many with bytesToClear;
// calloc clears only those (ANSIWrapper), and the DMM routing asks the owning allocator.
template <class H>
concept ClearsOnlyOldDataHeap = requires(H& heap, void* object, std::size_t bytes) {
  { heap.bytesToClear(object, bytes) } -> std::same_as<std::size_t>;
};

// Layers that keep the object's usable size in the machine word just before the object
// (SizeHeap, CoalesceableHeap, and the heaps built on them) say so; layers that route
// frees between two heaps by size (HybridHeap, SelectMmapHeap) require it of both.
template <class H>
concept SizeWordHeap = SizedHeap<H> && requires { requires H::KeepsSizeWord; };

// A heap over simulated memory (the DMM simulator's arena) has no application data: layers
// that would write it (realloc's copy, calloc's zeroing) ask first.
template <class H>
constexpr bool simulatesData() {
  if constexpr (requires { H::SimulatesData; }) return H::SimulatesData;
  else return false;
}

}  // namespace heapkit
