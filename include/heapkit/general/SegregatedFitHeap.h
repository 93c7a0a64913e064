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
// that it can merge with both neighbours in O(1), as in dlmalloc.
//
//   chunk: [Chunk 32][pad to align][block][block]...[tail][fence: size word 0]
//
// The current chunk ends in a tail, a pseudo-block that new blocks are carved from (a bump
// pointer with a header, as dlmalloc's top chunk): freeing the block before it gives the
// space back to it. A chunk that is wholly free again goes back to the parent when the
// design trims. A request larger than a quarter of a chunk gets a chunk of its own.
//
// Counting (core/Counting.h, docs/simulator.md): one step per class lookup, per list
// probed, per list or tree node visited, per split, merge and chunk request; every read
// and write of a header, tag, link or list head is one metadata access.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "heapkit/core/Counting.h"
#include "heapkit/core/HeapContract.h"
#include "heapkit/core/SizeWord.h"

namespace heapkit {

enum class ListStructure : std::uint8_t { SinglyLinked, DoublyLinked, SizeTree };
enum class ListFit : std::uint8_t { First, Next, Best, Exact, Worst };
enum class ListOrder : std::uint8_t { Lifo, Fifo, Address, Size };
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
  if ((config.structure == ListStructure::SizeTree) != (config.order == ListOrder::Size))
    return "list.order: a size tree is ordered by size, and only a size tree is";
  if (config.structure == ListStructure::SizeTree && config.fit == ListFit::Next)
    return "list.fit: next fit has no meaning in a size-ordered tree";
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
  static constexpr std::size_t kFree = 1, kPreviousFree = 2, kTail = 4, kFirst = 8;
  static constexpr std::size_t kMinBlockBytes = 32;

  struct Chunk {
    Chunk* prev;
    Chunk* next;
    std::size_t bytes;
    std::size_t reserved;
  };
  static_assert(sizeof(Chunk) == 32);

  // A free block's links, in its object area. A size tree uses them as left and right.
  struct Links {
    char* next;
    char* prev;
  };

  struct ListHead {
    char* head = nullptr;  // a tree's root
    char* tail = nullptr;
    char* rover = nullptr;  // next fit's starting point
  };

  struct Tail {
    char* cursor = nullptr;  // the tail pseudo-block; nullptr: no current chunk
    Chunk* chunk = nullptr;
  };

 public:
  static constexpr std::size_t Alignment = kMinAlignment;
  static constexpr bool KeepsSizeWord = true;

  template <class... Args>
  explicit SegregatedFitHeap(const Config& config, Args&&... args)
      : Super(static_cast<Args&&>(args)...), config_(config), nextChunkBytes_(config.chunkBytes) {
    listCount_ = config_.classes == SizeClasses::Exact ? config_.exactMaxBytes / 16 + 1 : config_.classCount;
    tailCount_ = config_.perClassChunks ? listCount_ : 1;
    // The tables are the allocator's own fixed state, like a bin array inside a heap
    // object: mapped directly, so they cost no malloc (this heap may be the process's).
    tableBytes_ = alignUp(listCount_ * sizeof(ListHead) + tailCount_ * sizeof(Tail), 4096);
    void* tables = mmap(nullptr, tableBytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (tables == MAP_FAILED) {
      listCount_ = 0;  // every malloc fails cleanly
      return;
    }
    lists_ = static_cast<ListHead*>(tables);
    tails_ = reinterpret_cast<Tail*>(lists_ + listCount_);
  }
  SegregatedFitHeap(const SegregatedFitHeap&) = delete;
  SegregatedFitHeap& operator=(const SegregatedFitHeap&) = delete;

  ~SegregatedFitHeap() {
    while (chunks_ != nullptr) releaseChunk(chunks_);
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
      markInUse(block);
      if (config_.split && lengthOf(block) >= length + kMinBlockBytes) splitOff(block, length);
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
    if (config_.coalescing == Coalescing::Immediate) {
      block = mergeWithNeighbours(block);
      if (block == nullptr) return;  // it went back to a tail or a released chunk
    }
    insertFree(block);
  }

  std::size_t getSize(void* object) const {
    return (sizeword::size(object)) - headerBytes();
  }

  // For tests and the DMM map: every block of every chunk, in address order.
  template <class Visitor>
  void forEachBlock(Visitor&& visit) const {
    for (Chunk* chunk = chunks_; chunk != nullptr; chunk = chunk->next) {
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
  std::size_t rawWord(char* block) const { return sizeWordRef(block); }
  std::size_t rawLength(char* block) const { return rawWord(block) & ~sizeword::kFlagMask; }

  std::size_t readWord(char* block) {
    countWork(*this, 0, 1, 0);
    return sizeWordRef(block);
  }
  void writeWord(char* block, std::size_t word) {
    countWork(*this, 0, 0, 1);
    sizeWordRef(block) = word;
  }
  std::size_t lengthOf(char* block) { return readWord(block) & ~sizeword::kFlagMask; }
  char* nextBlock(char* block) { return block + lengthOf(block); }

  // Boundary tags: a free block's length in its last word.
  void writeFooter(char* block, std::size_t length) {
    countWork(*this, 0, 0, 1);
    *reinterpret_cast<std::size_t*>(block + length - sizeof(std::size_t)) = length;
  }
  char* previousBlock(char* block) {
    countWork(*this, 0, 1, 0);
    return block - *reinterpret_cast<std::size_t*>(block - sizeof(std::size_t));
  }
  void setFlagsOf(char* block, std::size_t set, std::size_t clear) {
    writeWord(block, (readWord(block) | set) & ~clear);
  }

  // ---- chunks ----------------------------------------------------------------------------

  char* firstBlock(Chunk* chunk) const {
    // The first object lands 16 bytes after the chunk header, 16-byte aligned.
    return reinterpret_cast<char*>(chunk) + sizeof(Chunk) + 16 - headerBytes();
  }
  // The fence's block position: room for its header before the chunk ends.
  char* fenceOf(Chunk* chunk) const {
    char* first = firstBlock(chunk);
    char* end = reinterpret_cast<char*>(chunk) + chunk->bytes;
    return first + ((static_cast<std::size_t>(end - first) - headerBytes()) & ~std::size_t{15});
  }

  Chunk* newChunk(std::size_t length) {
    std::size_t overhead = sizeof(Chunk) + 16 + 16;
    std::size_t bytes = std::max(nextChunkBytes_, length + overhead);
    // The parent adds its own header and rounds to pages: ask for what fills the pages.
    auto* chunk = static_cast<Chunk*>(Super::malloc(bytes > 16 ? bytes - 16 : bytes));
    countWork(*this, 1, 0, 0);
    if (chunk == nullptr) return nullptr;
    chunk->bytes = Super::getSize(chunk) & ~std::size_t{15};
    chunk->prev = nullptr;
    chunk->next = chunks_;
    if (chunks_ != nullptr) chunks_->prev = chunk;
    chunks_ = chunk;
    countWork(*this, 0, 0, 4);
    writeWord(fenceOf(chunk), 0);
    if (length + overhead <= nextChunkBytes_) {
      std::size_t grown = nextChunkBytes_ / 100 * config_.chunkGrowthPercent;
      nextChunkBytes_ = std::min(std::max(grown, config_.chunkBytes), std::max(config_.maxChunkBytes, config_.chunkBytes));
    }
    return chunk;
  }

  void releaseChunk(Chunk* chunk) {
    if (chunk->prev != nullptr) chunk->prev->next = chunk->next;
    else chunks_ = chunk->next;
    if (chunk->next != nullptr) chunk->next->prev = chunk->prev;
    countWork(*this, 1, 2, 2);
    Super::free(chunk);
  }

  bool isWholeChunk(char* block, std::size_t word) {
    return (word & kFirst) != 0 && rawLength(block + (word & ~sizeword::kFlagMask)) == 0;
  }
  Chunk* chunkOfFirst(char* block) const {
    return reinterpret_cast<Chunk*>(block - (sizeof(Chunk) + 16 - headerBytes()));
  }

  // ---- tails: carving new blocks ------------------------------------------------------

  Tail& tailFor(std::size_t list) { return tails_[config_.perClassChunks ? list : 0]; }

  bool tailFits(std::size_t list, std::size_t length) {
    Tail& tail = tailFor(list);
    return tail.cursor != nullptr && lengthOf(tail.cursor) >= length;
  }

  char* carve(std::size_t list, std::size_t length) {
    Tail& tail = tailFor(list);
    countWork(*this, 0, 1, 0);
    if (tail.cursor == nullptr || lengthOf(tail.cursor) < length) {
      std::size_t chunkPayload = nextChunkBytes_ - sizeof(Chunk) - 32;
      if (length > chunkPayload / 4) return ownChunk(length);
      Chunk* chunk = newChunk(length);
      if (chunk == nullptr) return nullptr;
      retireTail(tail);
      char* first = firstBlock(chunk);
      writeWord(first, static_cast<std::size_t>(fenceOf(chunk) - first) | kTail | kFirst);
      tail = {first, chunk};
    }
    char* block = tail.cursor;
    std::size_t word = readWord(block);
    std::size_t rest = (word & ~sizeword::kFlagMask) - length;
    writeWord(block, length | (word & (kPreviousFree | kFirst)));
    if (rest == 0) {
      tail = {};  // used up: the block ends at the fence
    } else {
      tail.cursor = block + length;
      writeWord(tail.cursor, rest | kTail);
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
  void retireTail(Tail& tail) {
    if (tail.cursor == nullptr) return;
    char* block = tail.cursor;
    std::size_t word = readWord(block);
    std::size_t length = word & ~sizeword::kFlagMask;
    tail = {};
    writeWord(block, length | (word & (kPreviousFree | kFirst)));
    if (length >= kMinBlockBytes && config_.classes == SizeClasses::Ranges && !config_.region) {
      insertFree(block);
    }
  }

  // ---- splitting and merging -------------------------------------------------------------

  void splitOff(char* block, std::size_t keep) {
    std::size_t word = readWord(block);
    std::size_t total = word & ~sizeword::kFlagMask;
    writeWord(block, keep | (word & (kPreviousFree | kFirst)));
    char* rest = block + keep;
    writeWord(rest, total - keep);
    countSplit(*this);
    // With deferred coalescing the block after may be free: the remainder then merges
    // later, in the next pass.
    insertFree(rest);
  }

  void markInUse(char* block) {
    setFlagsOf(block, 0, kFree);
    if (tagged()) setFlagsOf(block + lengthOf(block), 0, kPreviousFree);
  }

  // Immediate coalescing: the block absorbs free neighbours; a block next to the tail
  // gives itself back to it; a wholly free chunk goes back to the parent if the design
  // trims. Returns the block to list, or nullptr when there is none.
  char* mergeWithNeighbours(char* block) {
    std::size_t word = readWord(block);
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
        if (tails_[t].cursor != following) continue;
        std::size_t length = (word & ~sizeword::kFlagMask) + (followingWord & ~sizeword::kFlagMask);
        writeWord(block, length | kTail | (word & (kPreviousFree | kFirst)));
        tails_[t].cursor = block;
        countCoalesce(*this);
        if ((word & kFirst) != 0 && config_.trim) {
          tails_[t] = {};
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
    Chunk* chunk = chunks_;
    while (chunk != nullptr) {
      Chunk* nextChunk = chunk->next;
      countWork(*this, 1, 1, 0);
      char* block = firstBlock(chunk);
      bool released = false;
      while (!released) {
        std::size_t word = readWord(block);
        std::size_t length = word & ~sizeword::kFlagMask;
        if (length == 0 || (word & kTail) != 0) break;
        countWork(*this, 1, 0, 0);
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
        char* merged = mergeWithNeighbours(block);
        if (merged == nullptr) break;  // given to the tail, or the chunk went back
        insertFree(merged);
        block = merged + rawLength(merged);
      }
      chunk = nextChunk;
    }
  }

  // ---- size classes ----------------------------------------------------------------------

  std::size_t listOf(std::size_t length) {
    countWork(*this, 1, 0, 0);
    if (config_.classes == SizeClasses::Exact) return std::min(length / 16, listCount_ - 1);
    const std::size_t* bounds = config_.classBounds;
    std::size_t count = config_.classCount;
    return static_cast<std::size_t>(std::lower_bound(bounds, bounds + count - 1, length) - bounds);
  }

  // Strict classes give a request its class's whole length (the last class, and exact
  // classes, round to 16 bytes only).
  std::size_t roundedLength(std::size_t list, std::size_t length) const {
    if (config_.classes == SizeClasses::Exact || list + 1 == config_.classCount) return length;
    return config_.classBounds[list];
  }

  // ---- free lists ----------------------------------------------------------------------

  static Links& linksOf(char* object) { return *reinterpret_cast<Links*>(object); }
  Links& links(char* block) { return linksOf(objectOf(block)); }
  char* nextOf(char* block) {
    countWork(*this, 1, 1, 0);
    return links(block).next;
  }

  void insertFree(char* block) {
    std::size_t word = readWord(block);
    std::size_t length = word & ~sizeword::kFlagMask;
    writeWord(block, word | kFree);
    if (tagged()) {
      writeFooter(block, length);
      setFlagsOf(block + length, kPreviousFree, 0);
    }
    ListHead& list = lists_[listOf(length)];
    if (config_.structure == ListStructure::SizeTree) {
      list.head = treeInsert(list.head, block, length);
      return;
    }
    bool doubly = config_.structure == ListStructure::DoublyLinked;
    char* before = nullptr;  // insert after this one (nullptr: at the head)
    if (config_.order == ListOrder::Fifo) {
      before = list.tail;
    } else if (config_.order == ListOrder::Address) {
      for (char* node = list.head; node != nullptr && node < block; node = nextOf(node)) before = node;
    }
    char* after = before == nullptr ? list.head : links(before).next;
    links(block).next = after;
    if (doubly) links(block).prev = before;
    if (before == nullptr) list.head = block;
    else links(before).next = block;
    if (after == nullptr) list.tail = block;
    else if (doubly) links(after).prev = block;
    countWork(*this, 0, 1, 4);
  }

  // Takes a free block of `length` out of its list (a neighbour being merged).
  void removeFree(char* block, std::size_t length) {
    ListHead& list = lists_[listOf(length)];
    if (config_.structure == ListStructure::SizeTree) {
      list.head = treeErase(list.head, block, length);
      return;
    }
    char* before = nullptr;
    if (config_.structure == ListStructure::DoublyLinked) {
      countWork(*this, 0, 1, 0);
      before = links(block).prev;
    } else {
      for (char* node = list.head; node != block; node = nextOf(node)) before = node;
    }
    unlink(list, before, block);
  }

  void unlink(ListHead& list, char* before, char* block) {
    char* after = links(block).next;
    if (before == nullptr) list.head = after;
    else links(before).next = after;
    if (after == nullptr) list.tail = before;
    else if (config_.structure == ListStructure::DoublyLinked) links(after).prev = before;
    if (list.rover == block) list.rover = after;
    countWork(*this, 0, 2, 2);
  }

  // The block a fit chooses, taken out of its list; nullptr when no list has one.
  char* searchLists(std::size_t first, std::size_t length) {
    std::size_t last = config_.searchLargerClasses ? listCount_ - 1 : first;
    for (std::size_t i = first; i <= last; ++i) {
      ListHead& list = lists_[i];
      countWork(*this, 1, 1, 0);
      if (list.head == nullptr) continue;
      char* found = config_.structure == ListStructure::SizeTree ? treeFind(list, length) : listFind(list, length);
      if (found != nullptr) return found;
    }
    return nullptr;
  }

  char* listFind(ListHead& list, std::size_t length) {
    char* chosen = nullptr;
    char* chosenBefore = nullptr;
    std::size_t chosenLength = 0;
    ListFit fit = config_.fit;
    char* start = list.head;
    char* before = nullptr;
    if (fit == ListFit::Next && list.rover != nullptr) {
      start = list.rover;
      before = config_.structure == ListStructure::DoublyLinked ? links(start).prev : predecessorOf(list, start);
    }
    char* node = start;
    bool wrapped = false;
    while (true) {
      if (node == nullptr) {
        if (fit != ListFit::Next || wrapped || start == list.head) break;
        wrapped = true;
        node = list.head;
        before = nullptr;
        continue;
      }
      if (wrapped && node == start) break;
      countWork(*this, 1, 1, 0);
      std::size_t nodeLength = rawLength(node);
      bool fits = fit == ListFit::Exact ? nodeLength == length : nodeLength >= length;
      if (fits) {
        bool better = chosen == nullptr || (fit == ListFit::Best && nodeLength < chosenLength) ||
                      (fit == ListFit::Worst && nodeLength > chosenLength);
        if (better) {
          chosen = node;
          chosenBefore = before;
          chosenLength = nodeLength;
        }
        if (fit != ListFit::Best && fit != ListFit::Worst) break;
        if (fit == ListFit::Best && nodeLength == length) break;
      }
      before = node;
      node = nextOf(node);
    }
    if (chosen == nullptr) return nullptr;
    char* after = links(chosen).next;
    unlink(list, chosenBefore, chosen);
    if (fit == ListFit::Next) list.rover = after;
    return chosen;
  }

  char* predecessorOf(ListHead& list, char* block) {
    char* before = nullptr;
    for (char* node = list.head; node != block; node = nextOf(node)) before = node;
    return before;
  }

  // ---- the size tree: a treap keyed by (length, address) ---------------------------------
  // Priorities are a hash of the block's address, so they need no storage; the arena's
  // aligned base makes them the same in the simulator and for real.

  static std::uint32_t priorityOf(char* block) {
    auto x = static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(block));
    x ^= x >> 16;
    x *= 0x7feb352dU;
    x ^= x >> 15;
    x *= 0x846ca68bU;
    return x ^ (x >> 16);
  }
  char*& left(char* block) { return links(block).next; }
  char*& right(char* block) { return links(block).prev; }
  bool keyLess(char* a, std::size_t aLength, char* b) {
    std::size_t bLength = rawLength(b);
    return aLength < bLength || (aLength == bLength && a < b);
  }

  char* treeInsert(char* root, char* block, std::size_t length) {
    countWork(*this, 1, 1, 0);
    if (root == nullptr) {
      left(block) = right(block) = nullptr;
      countWork(*this, 0, 0, 2);
      return block;
    }
    if (keyLess(block, length, root)) {
      left(root) = treeInsert(left(root), block, length);
      if (priorityOf(left(root)) > priorityOf(root)) root = rotateRight(root);
    } else {
      right(root) = treeInsert(right(root), block, length);
      if (priorityOf(right(root)) > priorityOf(root)) root = rotateLeft(root);
    }
    countWork(*this, 0, 0, 1);
    return root;
  }

  char* rotateRight(char* root) {
    char* pivot = left(root);
    left(root) = right(pivot);
    right(pivot) = root;
    countWork(*this, 1, 2, 2);
    return pivot;
  }
  char* rotateLeft(char* root) {
    char* pivot = right(root);
    right(root) = left(pivot);
    left(pivot) = root;
    countWork(*this, 1, 2, 2);
    return pivot;
  }

  char* treeErase(char* root, char* block, std::size_t length) {
    countWork(*this, 1, 1, 0);
    if (root == nullptr) return nullptr;
    if (root == block) return treeJoin(left(root), right(root));
    if (keyLess(block, length, root)) left(root) = treeErase(left(root), block, length);
    else right(root) = treeErase(right(root), block, length);
    countWork(*this, 0, 0, 1);
    return root;
  }

  char* treeJoin(char* a, char* b) {
    countWork(*this, 1, 2, 0);
    if (a == nullptr) return b;
    if (b == nullptr) return a;
    if (priorityOf(a) > priorityOf(b)) {
      right(a) = treeJoin(right(a), b);
      countWork(*this, 0, 0, 1);
      return a;
    }
    left(b) = treeJoin(a, left(b));
    countWork(*this, 0, 0, 1);
    return b;
  }

  // Best (and first: in a size-ordered tree the first fit is the best) is the smallest
  // block at least `length` long, exact the one equal to it, worst the longest.
  char* treeFind(ListHead& list, std::size_t length) {
    char* chosen = nullptr;
    std::size_t chosenLength = 0;
    if (config_.fit == ListFit::Worst) {
      for (char* node = list.head; node != nullptr; node = right(node)) {
        countWork(*this, 1, 2, 0);
        chosen = node;
      }
      if (chosen != nullptr) chosenLength = rawLength(chosen);
      if (chosen == nullptr || chosenLength < length) return nullptr;
    } else {
      for (char* node = list.head; node != nullptr;) {
        countWork(*this, 1, 2, 0);
        std::size_t nodeLength = rawLength(node);
        if (nodeLength >= length) {
          chosen = node;
          chosenLength = nodeLength;
          node = left(node);
        } else {
          node = right(node);
        }
      }
      if (chosen == nullptr || (config_.fit == ListFit::Exact && chosenLength != length)) return nullptr;
    }
    list.head = treeErase(list.head, chosen, chosenLength);
    return chosen;
  }

  [[no_unique_address]] Config config_;
  std::size_t nextChunkBytes_;
  std::size_t listCount_ = 0;
  std::size_t tailCount_ = 0;
  std::size_t tableBytes_ = 0;
  std::size_t freesSinceCoalescing_ = 0;
  ListHead* lists_ = nullptr;
  Tail* tails_ = nullptr;
  Chunk* chunks_ = nullptr;
};

}  // namespace heapkit
