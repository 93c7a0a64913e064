// SegregatedFitHeap: the free-list allocators of the DMM design space in one layer, set by
// values at run time (so the simulator and the search need no compiler) or by constants
// at compile time (the same source; a constant folds every branch away).
//
// One configuration covers:
//  - segregated fits and segregated lists: classes of block lengths, each a free list with
//    its own structure (singly or doubly linked, or a size-ordered tree), fit (first, next,
//    best, exact, worst) and order (LIFO, FIFO, address); a request searches its class,
//    then larger ones; blocks are split and coalesced when the design says so;
//  - strict segregated fit: requests rounded up to their class's length, lists hold only
//    that length, nothing split or merged (Kingsley's scheme with any classes);
//  - exact segregated fit: one list per block length;
//  - simple segregated storage: strict classes that each carve their own chunks;
//  - a region: bump allocation, no per-object free.
//
// Blocks lie end to end in chunks taken from the parent. Each starts with a header whose
// last word, the one just before the object, is the size word: the block's length (a
// multiple of 16) and four flags. Layouts: an 8-byte header (usable = length - 8), a
// 16-byte header (usable = length - 16), or boundary tags: the 8-byte header, plus, while
// a block is free, its length in its last word and a flag in the next block's header, so
// that it can merge with both neighbours in O(1), as in dlmalloc (objectrep/BoundaryTags.h,
// LeaHeap's tags).
//
//   chunk: [Chunk 32][pad to align][block][block]...[tail][fence: size word 0]
//
// The current chunk ends in a tail, a pseudo-block that new blocks are carved from (a bump
// pointer with a header, as dlmalloc's top chunk): freeing the block before it gives the
// space back to it. A chunk that is wholly free again goes back to the parent when the
// design trims. A request larger than a quarter of a chunk gets a chunk of its own.
//
// The classes are combining/Bins.h's bin policy by value (SegHeap's and StrictSegHeap's
// policy), made from the configuration's bounds, or one bin per 16 bytes for exact fits.
// The free lists are building/FreeList.h's, one per class, in the configuration's
// structure, order and fit (its `structure`, `order` and `fit` are the list policy).
//
// Counting (core/Counting.h, docs/simulator.md): one step per class lookup, per list
// probed, per list or tree node visited, per split, merge and chunk requested or returned;
// every header, tag, link, list head, tail cursor and chunk record is read and written
// through load and store below, or through FreeList (heads and links), BoundaryTags (the
// tags) and DLList (the list of chunks), which take this heap: each counts the access
// where it happens.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "heapkit/building/DLList.h"
#include "heapkit/building/FreeList.h"
#include "heapkit/combining/Bins.h"
#include "heapkit/core/Counting.h"
#include "heapkit/core/HeapContract.h"
#include "heapkit/core/SizeWord.h"
#include "heapkit/objectrep/BoundaryTags.h"

namespace heapkit {

enum class Coalescing : std::uint8_t { None, Immediate, Deferred };
enum class HeaderLayout : std::uint8_t { SizeWord8, SizeWord16, BoundaryTags };
enum class SizeClasses : std::uint8_t { Ranges, Strict, Exact };

// The run-time form. A compile-time form is any type with the same members as static
// constexpr (docs/simulator.md shows one); SegregatedFitHeap reads them the same way.
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

template <class Config, SizedHeap Super>
class SegregatedFitHeap : public Super {
  // Size-word flags. kFirst marks the first block of a chunk: a block that is first and
  // reaches the fence is the whole chunk.
  // kFree and kPreviousFree are the boundary tags' (objectrep/BoundaryTags.h), which every
  // layout keeps in the size word; only the boundary-tag layout writes the tags.
  static constexpr std::size_t kFree = BoundaryTags::kFree, kPreviousFree = BoundaryTags::kPreviousFree;
  static constexpr std::size_t kTail = 2, kFirst = 8;
  static_assert(((kTail | kFirst) & (kFree | kPreviousFree)) == 0);
  static constexpr std::size_t kMinBlockBytes = 32;

  struct Chunk {
    DLList::Node link;  // on the list of chunks (building/DLList.h)
    std::size_t bytes;
    std::size_t reserved;
  };
  static_assert(sizeof(Chunk) == 32);

  struct Tail {
    char* cursor = nullptr;  // the tail pseudo-block; nullptr: no current chunk
  };

 public:
  static constexpr std::size_t Alignment = kMinAlignment;
  static constexpr bool KeepsSizeWord = true;

  template <class... Args>
  explicit SegregatedFitHeap(const Config& config, Args&&... args)
      : Super(static_cast<Args&&>(args)...),
        config_(config),
        bins_(binsOf(config)),
        nextChunkBytes_(config.chunkBytes) {
    listCount_ = bins_.count();
    tailCount_ = config_.perClassChunks ? listCount_ : 1;
    // The tables are the allocator's own fixed state, like a bin array inside a heap
    // object: mapped directly, so they cost no malloc (this heap may be the process's).
    tableBytes_ = alignUp(listCount_ * sizeof(FreeList) + tailCount_ * sizeof(Tail), 4096);
    void* tables = mmap(nullptr, tableBytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (tables == MAP_FAILED) {
      listCount_ = 0;  // every malloc fails cleanly
      return;
    }
    lists_ = static_cast<FreeList*>(tables);
    tails_ = reinterpret_cast<Tail*>(lists_ + listCount_);
  }
  SegregatedFitHeap(const SegregatedFitHeap&) = delete;
  SegregatedFitHeap& operator=(const SegregatedFitHeap&) = delete;

  ~SegregatedFitHeap() {
    while (void* chunk = chunks_.first(*this)) releaseChunk(static_cast<Chunk*>(chunk));
    if (lists_ != nullptr) munmap(lists_, tableBytes_);
  }

  void* malloc(std::size_t size) {
    if (lists_ == nullptr || size > kMaxRequestBytes - 64 * 1024) return nullptr;
    std::size_t length = blockLengthFor(size);
    std::size_t list = listOf(length);
    if (config_.classes != SizeClasses::Ranges) length = roundedLength(list, length);
    char* block = nullptr;
    if (!config_.region) {
      block = searchLists(list, length);
      if (block == nullptr && config_.coalescing == Coalescing::Deferred && freesSinceCoalescing_ != 0 &&
          !tailFits(list, length)) {
        coalesceEverything();
        block = searchLists(list, length);
      }
    }
    if (block != nullptr) {
      std::size_t word = readWord(block) & ~kFree;
      std::size_t found = word & ~sizeword::kFlagMask;
      if (config_.split && found >= length + kMinBlockBytes) {
        splitOff(block, word, length);  // the remainder, free, stays before the next block
      } else {
        writeWord(block, word);
        if (tagged()) BoundaryTags::tellNextInUse(*this, taggedObjectOf(block), found);
      }
    } else {
      block = carve(list, length);
      if (block == nullptr) return nullptr;
    }
    return objectOf(block);
  }

  void free(void* object) {
    if (object == nullptr || config_.region) return;
    char* block = blockOf(static_cast<char*>(object));
    ++freesSinceCoalescing_;
    std::size_t word = readWord(block);
    if (config_.coalescing == Coalescing::Immediate) {
      block = mergeWithNeighbours(block, word);
      if (block == nullptr) return;  // it went back to a tail or a released chunk
    }
    insertFree(block, word);
  }

  std::size_t getSize(void* object) const {
    return (sizeword::size(object)) - headerBytes();
  }

  // For tests and the DMM map: every block of every chunk, in address order.
  template <class Visitor>
  void forEachBlock(Visitor&& visit) const {
    Uncounted walk;
    for (void* listed = chunks_.first(walk); listed != nullptr; listed = chunks_.next(walk, listed)) {
      auto* chunk = static_cast<Chunk*>(listed);
      for (char* block = firstBlock(chunk);; block += rawLength(block)) {
        std::size_t word = rawWord(block);
        if ((word & ~sizeword::kFlagMask) == 0) break;
        visit(static_cast<const void*>(chunk), static_cast<const void*>(block), word & ~sizeword::kFlagMask,
              (word & kFree) != 0, (word & kTail) != 0);
        if (word & kTail) break;
      }
    }
  }

 private:
  // ---- block layout --------------------------------------------------------------------

  std::size_t headerBytes() const { return config_.header == HeaderLayout::SizeWord16 ? 16 : 8; }
  bool tagged() const { return config_.header == HeaderLayout::BoundaryTags; }

  std::size_t blockLengthFor(std::size_t size) const {
    std::size_t length = alignUp(size + headerBytes(), 16);
    return length < kMinBlockBytes ? kMinBlockBytes : length;
  }

  char* objectOf(char* block) const { return block + headerBytes(); }
  char* blockOf(char* object) const { return object - headerBytes(); }
  static std::size_t& wordAt(char* block, std::size_t header) {
    return *reinterpret_cast<std::size_t*>(block + header - sizeof(std::size_t));
  }
  std::size_t& sizeWordRef(char* block) const { return wordAt(block, headerBytes()); }
  // Uncounted: for forEachBlock, which observes the heap from outside.
  std::size_t rawWord(char* block) const { return sizeWordRef(block); }
  std::size_t rawLength(char* block) const { return rawWord(block) & ~sizeword::kFlagMask; }

  // Every metadata word goes through these: plain loads and stores over real memory,
  // counted at their address over a counting top heap.
  template <class T>
  T load(const T& word) { return loadMetadata(*this, word); }
  template <class T, class V>
  void store(T& word, V value) { storeMetadata(*this, word, static_cast<T>(value)); }

  std::size_t readWord(char* block) { return load(sizeWordRef(block)); }
  void writeWord(char* block, std::size_t word) { store(sizeWordRef(block), word); }
  std::size_t lengthOf(char* block) { return readWord(block) & ~sizeword::kFlagMask; }
  char* nextBlock(char* block) { return block + lengthOf(block); }

  // Boundary tags (objectrep/BoundaryTags.h) take the object: the boundary-tag layout has
  // the 8-byte header, so the size word just before the object is the block's, as theirs
  // is (a constant offset, which the layout's run-time test does not have to fold).
  static char* taggedObjectOf(char* block) { return block + BoundaryTags::kSizeWordBytes; }
  // Only when kPreviousFree is set.
  char* previousBlock(char* block) {
    return static_cast<char*>(BoundaryTags::previous(*this, taggedObjectOf(block))) - BoundaryTags::kSizeWordBytes;
  }

  // ---- chunks ----------------------------------------------------------------------------

  char* firstBlock(Chunk* chunk) const {
    // The first object lands 16 bytes after the chunk header, 16-byte aligned.
    return reinterpret_cast<char*>(chunk) + sizeof(Chunk) + 16 - headerBytes();
  }
  // The fence's block position: room for its header before the chunk ends.
  char* fenceOf(Chunk* chunk) {
    char* first = firstBlock(chunk);
    char* end = reinterpret_cast<char*>(chunk) + load(chunk->bytes);
    return first + ((static_cast<std::size_t>(end - first) - headerBytes()) & ~std::size_t{15});
  }

  Chunk* newChunk(std::size_t length) {
    std::size_t overhead = sizeof(Chunk) + 16 + 16;
    std::size_t bytes = std::max(nextChunkBytes_, length + overhead);
    // The parent adds its own header and rounds to pages: ask for what fills the pages.
    auto* chunk = static_cast<Chunk*>(Super::malloc(bytes > 16 ? bytes - 16 : bytes));
    countStep(*this);  // the chunk requested
    if (chunk == nullptr) return nullptr;
    store(chunk->bytes, Super::getSize(chunk) & ~std::size_t{15});
    chunks_.insert(*this, chunk);
    writeWord(fenceOf(chunk), 0);
    if (length + overhead <= nextChunkBytes_) {
      std::size_t grown = nextChunkBytes_ / 100 * config_.chunkGrowthPercent;
      nextChunkBytes_ = std::min(std::max(grown, config_.chunkBytes), std::max(config_.maxChunkBytes, config_.chunkBytes));
    }
    return chunk;
  }

  void releaseChunk(Chunk* chunk) {
    DLList::unlink(*this, chunk);
    countStep(*this);  // the chunk returned
    Super::free(chunk);
  }

  bool isWholeChunk(char* block, std::size_t word) {
    return (word & kFirst) != 0 && lengthOf(block + (word & ~sizeword::kFlagMask)) == 0;
  }
  Chunk* chunkOfFirst(char* block) const {
    return reinterpret_cast<Chunk*>(block - (sizeof(Chunk) + 16 - headerBytes()));
  }

  // ---- tails: carving new blocks ------------------------------------------------------

  Tail& tailFor(std::size_t list) { return tails_[config_.perClassChunks ? list : 0]; }

  bool tailFits(std::size_t list, std::size_t length) {
    char* cursor = load(tailFor(list).cursor);
    return cursor != nullptr && lengthOf(cursor) >= length;
  }

  char* carve(std::size_t list, std::size_t length) {
    Tail& tail = tailFor(list);
    char* block = load(tail.cursor);
    if (block == nullptr || lengthOf(block) < length) {
      std::size_t chunkPayload = nextChunkBytes_ - sizeof(Chunk) - 32;
      if (length > chunkPayload / 4) return ownChunk(length);
      Chunk* chunk = newChunk(length);
      if (chunk == nullptr) return nullptr;
      retireTail(tail, block);
      block = firstBlock(chunk);
      writeWord(block, static_cast<std::size_t>(fenceOf(chunk) - block) | kTail | kFirst);
    }
    std::size_t word = readWord(block);
    std::size_t rest = (word & ~sizeword::kFlagMask) - length;
    writeWord(block, length | (word & (kPreviousFree | kFirst)));
    if (rest == 0) {
      store(tail.cursor, nullptr);  // used up: the block ends at the fence
    } else {
      store(tail.cursor, block + length);
      writeWord(block + length, rest | kTail);
    }
    return block;
  }

  // A request bigger than a quarter chunk: a chunk of its own, exactly its size, so the
  // current tail keeps its room.
  char* ownChunk(std::size_t length) {
    std::size_t saved = nextChunkBytes_;
    nextChunkBytes_ = 0;
    Chunk* chunk = newChunk(length);
    nextChunkBytes_ = saved;
    if (chunk == nullptr) return nullptr;
    char* first = firstBlock(chunk);
    writeWord(first, static_cast<std::size_t>(fenceOf(chunk) - first) | kFirst);
    return first;
  }

  // A chunk stops being current: what is left of its tail becomes a free block where
  // blocks of any length may be listed, and otherwise stays unused (counted as waste).
  // `block` is the cursor, already read.
  void retireTail(Tail& tail, char* block) {
    if (block == nullptr) return;
    std::size_t word = readWord(block);
    std::size_t length = word & ~sizeword::kFlagMask;
    store(tail.cursor, nullptr);
    word = length | (word & (kPreviousFree | kFirst));
    writeWord(block, word);
    if (length >= kMinBlockBytes && config_.classes == SizeClasses::Ranges && !config_.region) {
      insertFree(block, word);
    }
  }

  // ---- splitting and merging -------------------------------------------------------------

  // `word` is the block's size word as read (the block being taken, so not free).
  void splitOff(char* block, std::size_t word, std::size_t keep) {
    std::size_t total = word & ~sizeword::kFlagMask;
    writeWord(block, keep | (word & (kPreviousFree | kFirst)));
    char* rest = block + keep;
    writeWord(rest, total - keep);
    countSplit(*this);
    // With deferred coalescing the block after may be free: the remainder then merges
    // later, in the next pass.
    insertFree(rest, total - keep);
  }

  // Immediate coalescing: the block absorbs free neighbours; a block next to the tail
  // gives itself back to it; a wholly free chunk goes back to the parent if the design
  // trims. Returns the block to list, or nullptr when there is none; `word` is the block's
  // size word as read, and becomes the returned block's as last written.
  char* mergeWithNeighbours(char* block, std::size_t& word) {
    char* following = block + (word & ~sizeword::kFlagMask);
    std::size_t followingWord = readWord(following);
    // One free block follows at most, unless coalescing is deferred.
    while ((followingWord & kFree) != 0) {
      removeFree(following, followingWord & ~sizeword::kFlagMask);
      word += followingWord & ~sizeword::kFlagMask;
      writeWord(block, word);
      countCoalesce(*this);
      following = block + (word & ~sizeword::kFlagMask);
      followingWord = readWord(following);
    }
    if ((word & kPreviousFree) != 0) {
      char* preceding = previousBlock(block);
      std::size_t precedingWord = readWord(preceding);
      removeFree(preceding, precedingWord & ~sizeword::kFlagMask);
      word = (precedingWord & ~kFree) + (word & ~sizeword::kFlagMask);
      block = preceding;
      writeWord(block, word);
      countCoalesce(*this);
    }
    if ((followingWord & kTail) != 0) {
      for (std::size_t t = 0; t < tailCount_; ++t) {
        countStep(*this);  // a tail compared
        if (load(tails_[t].cursor) != following) continue;
        std::size_t length = (word & ~sizeword::kFlagMask) + (followingWord & ~sizeword::kFlagMask);
        writeWord(block, length | kTail | (word & (kPreviousFree | kFirst)));
        store(tails_[t].cursor, block);
        countCoalesce(*this);
        if ((word & kFirst) != 0 && config_.trim) {
          store(tails_[t].cursor, nullptr);
          releaseChunk(chunkOfFirst(block));
        }
        return nullptr;
      }
    }
    if (config_.trim && isWholeChunk(block, word)) {
      releaseChunk(chunkOfFirst(block));
      return nullptr;
    }
    return block;
  }

  // Deferred coalescing: one pass over every chunk merges each run of free blocks.
  void coalesceEverything() {
    freesSinceCoalescing_ = 0;
    auto* chunk = static_cast<Chunk*>(chunks_.first(*this));
    while (chunk != nullptr) {
      countStep(*this);  // a chunk visited
      auto* nextChunk = static_cast<Chunk*>(chunks_.next(*this, chunk));
      char* block = firstBlock(chunk);
      bool released = false;
      while (!released) {
        std::size_t word = readWord(block);
        std::size_t length = word & ~sizeword::kFlagMask;
        if (length == 0 || (word & kTail) != 0) break;
        countStep(*this);  // a block visited
        char* following = block + length;
        if ((word & kFree) == 0 || (readWord(following) & (kFree | kTail)) == 0) {
          if ((word & kFree) != 0 && config_.trim && isWholeChunk(block, word)) {
            removeFree(block, length);
            releaseChunk(chunk);
            released = true;
          }
          block = following;
          continue;
        }
        removeFree(block, length);
        char* merged = mergeWithNeighbours(block, word);
        if (merged == nullptr) break;  // given to the tail, or the chunk went back
        insertFree(merged, word);
        block = merged + (word & ~sizeword::kFlagMask);
      }
      chunk = nextChunk;
    }
  }

  // ---- size classes (combining/Bins.h) ---------------------------------------------------

  // Exact fits: a bin per 16 bytes; ranges and strict classes: the configuration's bounds.
  // Either way the last class takes every longer block.
  static BinTable binsOf(const Config& config) {
    if (config.classes == SizeClasses::Exact) return BinTable::exact(config.exactMaxBytes);
    std::size_t bounds[BinTable::kMaxBins];
    std::size_t count = std::min<std::size_t>(config.classCount, BinTable::kMaxBins);
    for (std::size_t i = 0; i + 1 < count; ++i) bounds[i] = config.classBounds[i];
    bounds[count == 0 ? 0 : count - 1] = SIZE_MAX;
    return BinTable::bounded({bounds, count == 0 ? 1 : count});
  }

  std::size_t listOf(std::size_t length) {
    countStep(*this);  // the class lookup
    return bins_.binOf(length);
  }

  // Strict classes give a request its class's whole length; the last class, and exact
  // classes (whose bound is the length itself), take it as it is.
  std::size_t roundedLength(std::size_t list, std::size_t length) const {
    if (config_.classes == SizeClasses::Exact) return length;
    std::size_t bound = bins_.boundOf(list);
    return bound == SIZE_MAX ? length : bound;
  }

  // ---- free lists (building/FreeList.h) -------------------------------------------------
  // The list's form is the configuration's structure, order and fit; its blocks keep their
  // links in the object, after this layout's header.

  ListedBlocks listed() const { return ListedBlocks{headerBytes()}; }

  // `word` is the block's size word, as its caller last read or wrote it.
  void insertFree(char* block, std::size_t word) {
    std::size_t length = word & ~sizeword::kFlagMask;
    writeWord(block, word | kFree);
    if (tagged()) BoundaryTags::tellNextFree(*this, taggedObjectOf(block), length);
    lists_[listOf(length)].insert(*this, config_, listed(), block, length);
  }

  // Takes a free block of `length` out of its list (a neighbour being merged).
  void removeFree(char* block, std::size_t length) {
    lists_[listOf(length)].remove(*this, config_, listed(), block, length);
  }

  // The block a fit chooses, taken out of its list; nullptr when no list has one.
  char* searchLists(std::size_t first, std::size_t length) {
    std::size_t last = config_.searchLargerClasses ? listCount_ - 1 : first;
    ListedBlocks blocks = listed();
    for (std::size_t i = first; i <= last; ++i) {
      countStep(*this);  // a list probed
      if (char* found = lists_[i].take(*this, config_, blocks, length)) return found;
    }
    return nullptr;
  }

  [[no_unique_address]] Config config_;
  BinTable bins_;
  std::size_t nextChunkBytes_;
  std::size_t listCount_ = 0;
  std::size_t tailCount_ = 0;
  std::size_t tableBytes_ = 0;
  std::size_t freesSinceCoalescing_ = 0;
  FreeList* lists_ = nullptr;
  Tail* tails_ = nullptr;
  DLList chunks_;
};

}  // namespace heapkit
