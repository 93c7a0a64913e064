// SegregatedFitHeap: the free-list allocators of the DMM design space as a composition of
// three policies over a chunk layer, each set by a value at run time (so the simulator and
// the search need no compiler) or by a type at compile time (the same source; a constant
// folds every branch away):
//
//   SegregatedFitHeap<Bins,    the size classes: combining/Bins.h's bin policy, as SegHeap
//                              and StrictSegHeap take it (BinTable; FixedBins<...>,
//                              ExactBins<N>)
//                     Fits,    what a class is and how its blocks are reused: ranges, strict
//                              or exact classes, search of larger classes, split, coalescing,
//                              region (FitPolicy; Fits<...>)
//                     Lists,   each class's free list: building/FreeList.h's structure, fit
//                              and order (ListPolicy; Lists<...>)
//                     TailChunkHeap<Chunks, Headers, Top>>
//                              the blocks, end to end in chunks taken from Top, with a tail to
//                              carve from (building/TailChunkHeap.h: ChunkPolicy; Chunks<...>)
//                              and their header layout (objectrep/BlockHeaders.h: 8 or 16
//                              bytes, or boundary tags; HeaderPolicy; Headers<...>)
//
// One composition covers:
//  - segregated fits and segregated lists: each class a free list; a request searches its
//    class, then larger ones; blocks are split and coalesced when the design says so;
//  - strict segregated fit: requests rounded up to their class's length, lists hold only
//    that length, nothing split or merged (Kingsley's scheme with any classes);
//  - exact segregated fit: one list per block length (a bin per 16 bytes);
//  - simple segregated storage: strict classes that each carve their own chunks (the chunk
//    policy's perClassChunks);
//  - a region: bump allocation, no per-object free.
// ConfiguredSegregatedFitHeap<Top> is the composition with every policy by value, built
// from a SegregatedFitConfig (what the simulator runs); `heapkit emit` writes the same
// composition with the design's values as types.
//
// Counting (core/Counting.h, docs/simulator.md): one step per class lookup, per list
// probed, per list or tree node visited, per split and merge; every size word, tag, link
// and list head is read and written through the layout (BlockHeaders, BoundaryTags) and
// FreeList, which take this heap: each counts the access where it happens. The chunk
// layer counts its own (chunks, tails).
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "heapkit/building/FreeList.h"
#include "heapkit/building/TailChunkHeap.h"
#include "heapkit/combining/Bins.h"
#include "heapkit/core/Counting.h"
#include "heapkit/core/HeapContract.h"
#include "heapkit/core/SizeWord.h"
#include "heapkit/objectrep/BlockHeaders.h"

namespace heapkit {

enum class Coalescing : std::uint8_t { None, Immediate, Deferred };
enum class SizeClasses : std::uint8_t { Ranges, Strict, Exact };

// A design's free-list allocator as the spec describes it, one flat record of values (the
// simulator's, the search's and the spec validator's form); ConfiguredSegregatedFitHeap is
// built from it, and `heapkit emit` writes it as the policies' types.
struct SegregatedFitConfig {
  static constexpr std::size_t kMaxClasses = 256;

  SizeClasses classes = SizeClasses::Ranges;
  // Ranges and Strict: the largest block length of each class, ascending; the last class
  // takes every longer block (Ranges) or rounds up to whole 16 bytes (Strict).
  std::size_t classBounds[kMaxClasses] = {};
  std::size_t classCount = 1;
  // Exact: the longest block length that gets a list of its own.
  std::size_t exactMaxBytes = 0;
  bool searchLargerClasses = true;  // a miss in the request's class looks in larger ones
  bool perClassChunks = false;      // simple segregated storage: each class bumps its own chunks
  ListStructure structure = ListStructure::DoublyLinked;
  ListFit fit = ListFit::First;
  ListOrder order = ListOrder::Lifo;
  HeaderLayout header = HeaderLayout::SizeWord16;
  bool split = false;
  Coalescing coalescing = Coalescing::None;
  bool trim = false;
  bool region = false;  // no per-object free: memory returns when the heap is destroyed
  std::size_t chunkBytes = 64 * 1024;
  std::size_t maxChunkBytes = 64 * 1024;
  unsigned chunkGrowthPercent = 100;  // each new chunk is this percent of the previous one
};

// The combinations a SegregatedFitHeap cannot honour: nullptr when `config` is valid, else
// the offending member's name and why, as "member: reason" (the spec validator prefixes
// the path of the allocator it came from).
constexpr const char* invalidSegregatedFit(const SegregatedFitConfig& config) {
  if (config.coalescing != Coalescing::None && config.header != HeaderLayout::BoundaryTags)
    return "coalesce: coalescing needs boundary tags (header \"boundary_tags\") to find the previous block";
  if (config.trim && config.coalescing == Coalescing::None)
    return "trim: a chunk can only be found wholly free when blocks coalesce";
  if (const char* why = invalidListPolicy(config)) return why;
  if (config.classes != SizeClasses::Ranges && (config.split || config.coalescing != Coalescing::None))
    return "split: strict and exact classes keep every block at its class's length (no split, no coalescing)";
  if (config.classes == SizeClasses::Exact && config.fit != ListFit::Exact)
    return "list.fit: exact segregated fit reuses a block only for its exact length (fit \"exact\")";
  if (config.region && (config.split || config.coalescing != Coalescing::None || config.trim))
    return "region: a region frees nothing before it is destroyed (no split, coalescing or trim)";
  if (config.perClassChunks && config.classes != SizeClasses::Strict)
    return "classes: only strict classes can carve chunks of their own";
  if (config.classCount == 0 || config.classCount > SegregatedFitConfig::kMaxClasses)
    return "classes: between 1 and 256 size classes";
  for (std::size_t i = 0; i + 1 < config.classCount; ++i) {
    std::size_t bound = config.classBounds[i];
    if (bound < 32 || bound % 16 != 0 || (i > 0 && bound <= config.classBounds[i - 1]))
      return "class_sizes: class bounds must be ascending multiples of 16, at least 32";
  }
  if (config.classes == SizeClasses::Exact && config.exactMaxBytes > (std::size_t{1} << 20) + 32)
    return "range: exact segregated fit keeps a list per length up to 1 MiB";
  if (config.chunkBytes < 4096 || config.chunkBytes % 4096 != 0 || config.chunkBytes > (std::size_t{1} << 32))
    return "chunk.bytes: a whole number of 4 KiB pages, at most 4 GiB";
  if (config.maxChunkBytes < config.chunkBytes || config.maxChunkBytes > (std::size_t{1} << 32))
    return "chunk.max_bytes: at least chunk.bytes, at most 4 GiB";
  if (config.chunkGrowthPercent < 100 || config.chunkGrowthPercent > 400)
    return "chunk.growth: between 1.0 and 4.0";
  return nullptr;
}

// What a class is and how its blocks are reused, by value.
struct FitPolicy {
  SizeClasses classes = SizeClasses::Ranges;
  bool searchLargerClasses = true;  // a miss in the request's class looks in larger ones
  bool split = false;
  Coalescing coalescing = Coalescing::None;
  bool region = false;  // no per-object free: memory returns when the heap is destroyed
};

// The same, by type.
template <SizeClasses Classes, bool SearchLargerClasses, bool Split, Coalescing Coalesce, bool Region = false>
struct Fits {
  static constexpr SizeClasses classes = Classes;
  static constexpr bool searchLargerClasses = SearchLargerClasses;
  static constexpr bool split = Split;
  static constexpr Coalescing coalescing = Coalesce;
  static constexpr bool region = Region;
};

namespace segregatedfit {
// Policy P of a composition built from `config`: the value it describes for a policy by
// value; for a policy by type, the type's constants (the config must agree: emit writes
// them from one).
template <class P>
P policyFrom(const SegregatedFitConfig& c) {
  if constexpr (std::is_same_v<P, BinTable>) {
    // Exact fits: a bin per 16 bytes; ranges and strict classes: the configuration's
    // bounds. Either way the last class takes every longer block.
    if (c.classes == SizeClasses::Exact) return BinTable::exact(c.exactMaxBytes);
    std::size_t bounds[BinTable::kMaxBins];
    std::size_t count = std::min<std::size_t>(c.classCount, BinTable::kMaxBins);
    for (std::size_t i = 0; i + 1 < count; ++i) bounds[i] = c.classBounds[i];
    bounds[count == 0 ? 0 : count - 1] = SIZE_MAX;
    return BinTable::bounded({bounds, count == 0 ? 1 : count});
  } else if constexpr (std::is_same_v<P, FitPolicy>) {
    return FitPolicy{c.classes, c.searchLargerClasses, c.split, c.coalescing, c.region};
  } else if constexpr (std::is_same_v<P, ListPolicy>) {
    return ListPolicy{c.structure, c.fit, c.order};
  } else if constexpr (std::is_same_v<P, ChunkPolicy>) {
    return ChunkPolicy{c.chunkBytes, c.maxChunkBytes, c.chunkGrowthPercent, c.trim, c.perClassChunks};
  } else if constexpr (std::is_same_v<P, HeaderPolicy>) {
    return HeaderPolicy{c.header};
  } else {
    return P{};
  }
}
}  // namespace segregatedfit

// The layer the policies compose over: a TailChunkHeap (its chunk and header policies are
// named so that a configuration can set them).
template <class H>
concept SegregatedFitChunks = SizeWordHeap<H> && requires { typename H::ChunkPolicyType; typename H::HeaderPolicyType; };

template <BinPolicy Bins, class Fits, class Lists, SegregatedFitChunks Super>
class SegregatedFitHeap : public Super {
  using Layout = typename Super::Layout;
  static constexpr std::size_t kFree = Layout::kFree, kPreviousFree = Layout::kPreviousFree;
  static constexpr std::size_t kTail = Layout::kTail, kFirst = Layout::kFirst;
  static constexpr std::size_t kMinBlockBytes = Layout::kMinBlockBytes;

  struct FromPolicies {};

 public:
  static constexpr std::size_t Alignment = kMinAlignment;
  static constexpr bool KeepsSizeWord = true;

  // The policies by value from `config` (those by type keep their constants).
  template <class... Args>
  explicit SegregatedFitHeap(const SegregatedFitConfig& config, Args&&... args)
      : SegregatedFitHeap(FromPolicies{}, segregatedfit::policyFrom<Bins>(config), segregatedfit::policyFrom<Fits>(config),
                          segregatedfit::policyFrom<Lists>(config),
                          segregatedfit::policyFrom<typename Super::ChunkPolicyType>(config),
                          segregatedfit::policyFrom<typename Super::HeaderPolicyType>(config), static_cast<Args&&>(args)...) {}
  // The policies by type (an emitted design).
  template <class... Args>
    requires(!startsWith<SegregatedFitConfig, Args...> && !startsWith<FromPolicies, Args...>)
  explicit SegregatedFitHeap(Args&&... args)
      : SegregatedFitHeap(FromPolicies{}, Bins{}, Fits{}, Lists{}, typename Super::ChunkPolicyType{}, typename Super::HeaderPolicyType{},
                          static_cast<Args&&>(args)...) {}
  SegregatedFitHeap(const SegregatedFitHeap&) = delete;
  SegregatedFitHeap& operator=(const SegregatedFitHeap&) = delete;

  ~SegregatedFitHeap() {
    if (lists_ != nullptr) munmap(lists_, tableBytes_);
  }

  void* malloc(std::size_t size) {
    if (lists_ == nullptr || !Super::ready() || size > kMaxRequestBytes - 64 * 1024) return nullptr;
    std::size_t length = layout().blockLengthFor(size);
    std::size_t list = listOf(length);
    if (fits_.classes != SizeClasses::Ranges) length = roundedLength(list, length);
    char* block = nullptr;
    if (!fits_.region) {
      block = searchLists(list, length);
      if (block == nullptr && fits_.coalescing == Coalescing::Deferred && freesSinceCoalescing_ != 0 &&
          !Super::tailFits(Super::tailOf(list), length)) {
        coalesceEverything();
        block = searchLists(list, length);
      }
    }
    if (block != nullptr) {
      std::size_t word = readWord(block) & ~kFree;
      std::size_t found = Layout::lengthIn(word);
      if (fits_.split && found >= length + kMinBlockBytes) {
        splitOff(block, word, length);  // the remainder, free, stays before the next block
      } else {
        writeWord(block, word);
        layout().tellNextInUse(*this, block, found);
      }
    } else {
      block = Super::carve(Super::tailOf(list), length, [this](char* retired, std::size_t word) {
        // What was left of a tail: listed where blocks of any length may be.
        if (Layout::lengthIn(word) >= kMinBlockBytes && fits_.classes == SizeClasses::Ranges && !fits_.region)
          insertFree(retired, word);
      });
      if (block == nullptr) return nullptr;
    }
    return layout().objectOf(block);
  }

  void free(void* object) {
    if (object == nullptr || fits_.region) return;
    char* block = layout().blockOf(static_cast<char*>(object));
    ++freesSinceCoalescing_;
    std::size_t word = readWord(block);
    if (fits_.coalescing == Coalescing::Immediate) {
      block = mergeWithNeighbours(block, word);
      if (block == nullptr) return;  // it went back to a tail or a released chunk
    }
    insertFree(block, word);
  }

  std::size_t getSize(void* object) const { return Super::getSize(object); }

 private:
  SegregatedFitHeap(FromPolicies, const Bins& bins, const Fits& fits, const Lists& lists, const typename Super::ChunkPolicyType& chunks,
                    const typename Super::HeaderPolicyType& headers, auto&&... args)
      : Super(chunks, headers, TailClasses{bins.count()}, static_cast<decltype(args)&&>(args)...),
        bins_(bins),
        fits_(fits),
        listPolicy_(lists) {
    listCount_ = bins_.count();
    // The lists are the allocator's own fixed state, like a bin array inside a heap
    // object: mapped directly, so they cost no malloc (this heap may be the process's).
    tableBytes_ = alignUp(listCount_ * sizeof(FreeList), 4096);
    void* table = mmap(nullptr, tableBytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (table != MAP_FAILED) lists_ = static_cast<FreeList*>(table);  // else every malloc fails cleanly
  }

  const Layout& layout() const { return Super::layout(); }
  std::size_t readWord(char* block) { return layout().read(*this, block); }
  void writeWord(char* block, std::size_t word) { layout().write(*this, block, word); }

  // ---- splitting and merging -------------------------------------------------------------

  // `word` is the block's size word as read (the block being taken, so not free).
  void splitOff(char* block, std::size_t word, std::size_t keep) {
    std::size_t total = Layout::lengthIn(word);
    writeWord(block, keep | (word & (kPreviousFree | kFirst)));
    char* rest = block + keep;
    writeWord(rest, total - keep);
    countSplit(*this);
    // With deferred coalescing the block after may be free: the remainder then merges
    // later, in the next pass.
    insertFree(rest, total - keep);
  }

  // Immediate coalescing: the block absorbs free neighbours; a block next to a tail gives
  // itself back to it; a wholly free chunk goes back to the parent if the design trims.
  // Returns the block to list, or nullptr when there is none; `word` is the block's size
  // word as read, and becomes the returned block's as last written.
  char* mergeWithNeighbours(char* block, std::size_t& word) {
    char* following = block + Layout::lengthIn(word);
    std::size_t followingWord = readWord(following);
    // One free block follows at most, unless coalescing is deferred.
    while ((followingWord & kFree) != 0) {
      removeFree(following, Layout::lengthIn(followingWord));
      word += Layout::lengthIn(followingWord);
      writeWord(block, word);
      countCoalesce(*this);
      following = block + Layout::lengthIn(word);
      followingWord = readWord(following);
    }
    if ((word & kPreviousFree) != 0) {
      char* preceding = layout().previous(*this, block);
      std::size_t precedingWord = readWord(preceding);
      removeFree(preceding, Layout::lengthIn(precedingWord));
      word = (precedingWord & ~kFree) + Layout::lengthIn(word);
      block = preceding;
      writeWord(block, word);
      countCoalesce(*this);
    }
    if ((followingWord & kTail) != 0 && Super::giveToTail(block, word, following, followingWord)) return nullptr;
    if (Super::trims() && Super::isWholeChunk(block, word)) {
      Super::releaseChunkOfFirst(block);
      return nullptr;
    }
    return block;
  }

  // Deferred coalescing: one pass over every chunk merges each run of free blocks.
  void coalesceEverything() {
    freesSinceCoalescing_ = 0;
    void* chunk = Super::firstChunk();
    while (chunk != nullptr) {
      countStep(*this);  // a chunk visited
      void* nextChunk = Super::nextChunk(chunk);
      char* block = Super::firstBlockOf(chunk);
      bool released = false;
      while (!released) {
        std::size_t word = readWord(block);
        std::size_t length = Layout::lengthIn(word);
        if (length == 0 || (word & kTail) != 0) break;
        countStep(*this);  // a block visited
        char* following = block + length;
        if ((word & kFree) == 0 || (readWord(following) & (kFree | kTail)) == 0) {
          if ((word & kFree) != 0 && Super::trims() && Super::isWholeChunk(block, word)) {
            removeFree(block, length);
            Super::releaseChunk(chunk);
            released = true;
          }
          block = following;
          continue;
        }
        removeFree(block, length);
        char* merged = mergeWithNeighbours(block, word);
        if (merged == nullptr) break;  // given to the tail, or the chunk went back
        insertFree(merged, word);
        block = merged + Layout::lengthIn(word);
      }
      chunk = nextChunk;
    }
  }

  // ---- size classes (combining/Bins.h) ---------------------------------------------------

  std::size_t listOf(std::size_t length) {
    countStep(*this);  // the class lookup
    return bins_.binOf(length);
  }

  // Strict classes give a request its class's whole length; the last class, and exact
  // classes (whose bound is the length itself), take it as it is.
  std::size_t roundedLength(std::size_t list, std::size_t length) const {
    if (fits_.classes == SizeClasses::Exact) return length;
    std::size_t bound = bins_.boundOf(list);
    return bound == SIZE_MAX ? length : bound;
  }

  // ---- free lists (building/FreeList.h) -------------------------------------------------
  // The list's form is the Lists policy's structure, order and fit; its blocks keep their
  // links in the object, after the layout's header.

  ListedBlocks listed() const { return ListedBlocks{layout().headerBytes()}; }

  // `word` is the block's size word, as its caller last read or wrote it.
  void insertFree(char* block, std::size_t word) {
    std::size_t length = Layout::lengthIn(word);
    writeWord(block, word | kFree);
    layout().tellNextFree(*this, block, length);
    lists_[listOf(length)].insert(*this, listPolicy_, listed(), block, length);
  }

  // Takes a free block of `length` out of its list (a neighbour being merged).
  void removeFree(char* block, std::size_t length) {
    lists_[listOf(length)].remove(*this, listPolicy_, listed(), block, length);
  }

  // The block a fit chooses, taken out of its list; nullptr when no list has one.
  char* searchLists(std::size_t first, std::size_t length) {
    std::size_t last = fits_.searchLargerClasses ? listCount_ - 1 : first;
    ListedBlocks blocks = listed();
    for (std::size_t i = first; i <= last; ++i) {
      countStep(*this);  // a list probed
      if (char* found = lists_[i].take(*this, listPolicy_, blocks, length)) return found;
    }
    return nullptr;
  }

  [[no_unique_address]] Bins bins_;
  [[no_unique_address]] Fits fits_;
  [[no_unique_address]] Lists listPolicy_;
  std::size_t listCount_ = 0;
  std::size_t tableBytes_ = 0;
  std::size_t freesSinceCoalescing_ = 0;
  FreeList* lists_ = nullptr;
};

// Every policy by value, built from a SegregatedFitConfig: the form the simulator runs.
template <class Top>
using ConfiguredSegregatedFitHeap =
    SegregatedFitHeap<BinTable, FitPolicy, ListPolicy, TailChunkHeap<ChunkPolicy, HeaderPolicy, Top>>;

}  // namespace heapkit
