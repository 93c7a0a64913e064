// TailChunkHeap: blocks with headers (objectrep/BlockHeaders.h) carved end to end from
// chunks taken from the parent, the chunk layer of the DMM design space's free-list
// allocators (general/SegregatedFitHeap.h). On its own it is a region: malloc carves,
// free does nothing, and every chunk goes back to the parent when the heap is destroyed.
//
//   chunk: [Chunk 32][pad to align][block][block]...[tail][fence: size word 0]
//
// The current chunk ends in a tail, a pseudo-block that new blocks are carved from (a bump
// pointer with a header, as dlmalloc's top chunk): the layer above may give a block that
// ends where a tail starts back to it (giveToTail). When a tail is too short for a request,
// a new chunk becomes current, and what was left of the old tail is handed to the layer
// above as a block of its own (carve's `retired`), which may list it. A request longer than
// a quarter of a chunk gets a chunk of its own, exactly its size, so the tail keeps its
// room. Chunks grow by a percentage up to a maximum; a chunk found wholly free goes back
// to the parent when the policy trims. There is one tail, or one per size class of the
// layer above (simple segregated storage: each class carves its own chunks).
//
// The chunk policy is read from its members: run-time values (ChunkPolicy) for the
// simulator and the search, or static constexpr members (Chunks<...>) for an emitted
// allocator, where the constants fold every branch away; so is the header layout (Headers).
//
// Counting (core/Counting.h): one step per chunk requested from or returned to the parent
// and per tail compared; every size word, tail cursor and chunk record is loaded and stored
// through this heap, and so counted where it is touched.
#pragma once

#include <sys/mman.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "heapkit/building/DLList.h"
#include "heapkit/core/Counting.h"
#include "heapkit/core/HeapContract.h"
#include "heapkit/core/SizeWord.h"
#include "heapkit/objectrep/BlockHeaders.h"

namespace heapkit {

// The chunk policy by value.
struct ChunkPolicy {
  std::size_t chunkBytes = 64 * 1024;
  std::size_t maxChunkBytes = 64 * 1024;
  unsigned chunkGrowthPercent = 100;  // each new chunk is this percent of the previous one
  bool trim = false;                  // a wholly free chunk goes back to the parent
  bool perClassChunks = false;        // a tail per size class of the layer above
};

// The chunk policy by type.
template <std::size_t Bytes, std::size_t MaxBytes = Bytes, unsigned GrowthPercent = 100, bool Trim = false,
          bool PerClassChunks = false>
struct Chunks {
  static constexpr std::size_t chunkBytes = Bytes;
  static constexpr std::size_t maxChunkBytes = MaxBytes;
  static constexpr unsigned chunkGrowthPercent = GrowthPercent;
  static constexpr bool trim = Trim;
  static constexpr bool perClassChunks = PerClassChunks;
};

// For constructors whose first argument says which form they are: whether Args starts
// with a T.
template <class T, class... Args>
inline constexpr bool startsWith = false;
template <class T, class First, class... Rest>
inline constexpr bool startsWith<T, First, Rest...> = std::is_same_v<std::remove_cvref_t<First>, T>;

// How many size classes the layer above has (the tails of a per-class policy).
struct TailClasses {
  std::size_t count = 1;
};

template <class ChunkP, class HeaderP, SizedHeap Super>
class TailChunkHeap : public Super {
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
  using Layout = BlockHeaders<HeaderP>;
  using ChunkPolicyType = ChunkP;
  using HeaderPolicyType = HeaderP;
  static constexpr std::size_t kFree = Layout::kFree, kPreviousFree = Layout::kPreviousFree;
  static constexpr std::size_t kTail = Layout::kTail, kFirst = Layout::kFirst;
  static constexpr std::size_t kMinBlockBytes = Layout::kMinBlockBytes;
  static constexpr std::size_t Alignment = kMinAlignment;
  static constexpr bool KeepsSizeWord = true;

  template <class... Args>
  explicit TailChunkHeap(const ChunkP& chunks, const HeaderP& headers, TailClasses classes, Args&&... args)
      : Super(static_cast<Args&&>(args)...), chunks_(chunks), layout_(headers), nextChunkBytes_(chunks.chunkBytes) {
    tailCount_ = chunks_.perClassChunks ? classes.count : 1;
    if (tailCount_ == 1) {
      tails_ = &onlyTail_;
      return;
    }
    // The table is the allocator's own fixed state: mapped directly, so it costs no
    // malloc (this heap may be the process's).
    tableBytes_ = alignUp(tailCount_ * sizeof(Tail), 4096);
    void* table = mmap(nullptr, tableBytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (table == MAP_FAILED) return;  // every malloc fails cleanly
    tails_ = static_cast<Tail*>(table);
  }
  // The policies by type (or their values' defaults): one tail.
  template <class... Args>
    requires(!startsWith<ChunkP, Args...>)
  explicit TailChunkHeap(Args&&... args) : TailChunkHeap(ChunkP{}, HeaderP{}, TailClasses{}, static_cast<Args&&>(args)...) {}
  TailChunkHeap(const TailChunkHeap&) = delete;
  TailChunkHeap& operator=(const TailChunkHeap&) = delete;

  ~TailChunkHeap() {
    while (void* chunk = chunkList_.first(*this)) releaseChunk(chunk);
    if (tableBytes_ != 0 && tails_ != nullptr) munmap(tails_, tableBytes_);
  }

  // ---- the layer on its own: a region ----------------------------------------------------

  void* malloc(std::size_t size) {
    if (!ready() || size > kMaxRequestBytes - 64 * 1024) return nullptr;
    char* block = carve(0, layout_.blockLengthFor(size), [](char*, std::size_t) {});
    return block == nullptr ? nullptr : layout_.objectOf(block);
  }
  void free(void*) {}
  std::size_t getSize(void* object) const { return sizeword::size(object) - layout_.headerBytes(); }

  // ---- for the layer above ----------------------------------------------------------------

  const Layout& layout() const { return layout_; }
  bool ready() const { return tails_ != nullptr; }
  bool trims() const { return chunks_.trim; }
  // The tail a block of size class `sizeClass` is carved from.
  std::size_t tailOf(std::size_t sizeClass) const { return chunks_.perClassChunks ? sizeClass : 0; }

  bool tailFits(std::size_t tail, std::size_t length) {
    char* cursor = load(tails_[tail].cursor);
    return cursor != nullptr && layout_.lengthOf(*this, cursor) >= length;
  }

  // A block of `length` bytes (its size word written, not free) from tail `tail`; nullptr
  // when the parent has no chunk for it. When the tail is too short and a new chunk takes
  // its place, `retired(block, word)` is told of what was left of the old tail: a block of
  // its own (its size word `word` written, not free), which the layer above may list; if
  // it does not, it stays unused (counted as waste).
  template <class Retired>
  char* carve(std::size_t tail, std::size_t length, Retired&& retired) {
    Tail& current = tails_[tail];
    char* block = load(current.cursor);
    if (block == nullptr || layout_.lengthOf(*this, block) < length) {
      std::size_t chunkPayload = nextChunkBytes_ - sizeof(Chunk) - 32;
      if (length > chunkPayload / 4) return ownChunk(length);
      Chunk* chunk = newChunk(length);
      if (chunk == nullptr) return nullptr;
      retireTail(current, block, retired);
      block = firstBlockOf(chunk);
      layout_.write(*this, block, static_cast<std::size_t>(fenceOf(chunk) - block) | kTail | kFirst);
    }
    std::size_t word = layout_.read(*this, block);
    std::size_t rest = Layout::lengthIn(word) - length;
    layout_.write(*this, block, length | (word & (kPreviousFree | kFirst)));
    if (rest == 0) {
      store(current.cursor, nullptr);  // used up: the block ends at the fence
    } else {
      store(current.cursor, block + length);
      layout_.write(*this, block + length, rest | kTail);
    }
    return block;
  }

  // Gives `block` (size word `word`, as last written) back to the tail that starts at
  // `following` (size word `followingWord`, which has kTail), if one does; a chunk it then
  // leaves wholly free goes back to the parent when the policy trims. Returns whether the
  // block went.
  bool giveToTail(char* block, std::size_t word, char* following, std::size_t followingWord) {
    for (std::size_t t = 0; t < tailCount_; ++t) {
      countStep(*this);  // a tail compared
      if (load(tails_[t].cursor) != following) continue;
      std::size_t length = Layout::lengthIn(word) + Layout::lengthIn(followingWord);
      layout_.write(*this, block, length | kTail | (word & (kPreviousFree | kFirst)));
      store(tails_[t].cursor, block);
      countCoalesce(*this);
      if ((word & kFirst) != 0 && trims()) {
        store(tails_[t].cursor, nullptr);
        releaseChunkOfFirst(block);
      }
      return true;
    }
    return false;
  }

  // A block that is its chunk's first and reaches the fence is the whole chunk.
  bool isWholeChunk(char* block, std::size_t word) {
    return (word & kFirst) != 0 && layout_.lengthOf(*this, block + Layout::lengthIn(word)) == 0;
  }
  void releaseChunkOfFirst(char* block) {
    releaseChunk(reinterpret_cast<Chunk*>(block - (sizeof(Chunk) + 16 - layout_.headerBytes())));
  }

  // The chunks, newest first (a walk that may release the chunk it is at reads the next
  // one first).
  void* firstChunk() { return chunkList_.first(*this); }
  void* nextChunk(void* chunk) { return chunkList_.next(*this, chunk); }
  char* firstBlockOf(void* chunk) const {
    // The first object lands 16 bytes after the chunk header, 16-byte aligned.
    return static_cast<char*>(chunk) + sizeof(Chunk) + 16 - layout_.headerBytes();
  }
  void releaseChunk(void* chunk) {
    DLList::unlink(*this, chunk);
    countStep(*this);  // the chunk returned
    Super::free(chunk);
  }

  // For tests and the DMM map: every block of every chunk, in address order, as (chunk,
  // block, length, free, tail).
  template <class Visitor>
  void forEachBlock(Visitor&& visit) const {
    Uncounted walk;
    for (void* listed = chunkList_.first(walk); listed != nullptr; listed = chunkList_.next(walk, listed)) {
      for (char* block = firstBlockOf(listed);;) {
        std::size_t word = layout_.sizeWordOf(block);
        if (Layout::lengthIn(word) == 0) break;
        visit(static_cast<const void*>(listed), static_cast<const void*>(block), Layout::lengthIn(word),
              (word & kFree) != 0, (word & kTail) != 0);
        if (word & kTail) break;
        block += Layout::lengthIn(word);
      }
    }
  }

 private:
  template <class T>
  T load(const T& word) { return loadMetadata(*this, word); }
  template <class T, class V>
  void store(T& word, V value) { storeMetadata(*this, word, static_cast<T>(value)); }

  // The fence's block position: room for its header before the chunk ends.
  char* fenceOf(Chunk* chunk) {
    char* first = firstBlockOf(chunk);
    char* end = reinterpret_cast<char*>(chunk) + load(chunk->bytes);
    return first + ((static_cast<std::size_t>(end - first) - layout_.headerBytes()) & ~std::size_t{15});
  }

  Chunk* newChunk(std::size_t length) {
    std::size_t overhead = sizeof(Chunk) + 16 + 16;
    std::size_t bytes = std::max(nextChunkBytes_, length + overhead);
    // The parent adds its own header and rounds to pages: ask for what fills the pages.
    auto* chunk = static_cast<Chunk*>(Super::malloc(bytes > 16 ? bytes - 16 : bytes));
    countStep(*this);  // the chunk requested
    if (chunk == nullptr) return nullptr;
    store(chunk->bytes, Super::getSize(chunk) & ~std::size_t{15});
    chunkList_.insert(*this, chunk);
    layout_.write(*this, fenceOf(chunk), 0);
    if (length + overhead <= nextChunkBytes_) {
      std::size_t grown = nextChunkBytes_ / 100 * chunks_.chunkGrowthPercent;
      nextChunkBytes_ =
          std::min(std::max(grown, chunks_.chunkBytes), std::max(chunks_.maxChunkBytes, chunks_.chunkBytes));
    }
    return chunk;
  }

  // A request bigger than a quarter chunk: a chunk of its own, exactly its size, so the
  // current tail keeps its room.
  char* ownChunk(std::size_t length) {
    std::size_t saved = nextChunkBytes_;
    nextChunkBytes_ = 0;
    Chunk* chunk = newChunk(length);
    nextChunkBytes_ = saved;
    if (chunk == nullptr) return nullptr;
    char* first = firstBlockOf(chunk);
    layout_.write(*this, first, static_cast<std::size_t>(fenceOf(chunk) - first) | kFirst);
    return first;
  }

  // A chunk stops being current: what is left of its tail (`block`, the cursor, already
  // read) becomes a block of its own, offered to the layer above.
  template <class Retired>
  void retireTail(Tail& tail, char* block, Retired& retired) {
    if (block == nullptr) return;
    std::size_t word = layout_.read(*this, block);
    store(tail.cursor, nullptr);
    word = Layout::lengthIn(word) | (word & (kPreviousFree | kFirst));
    layout_.write(*this, block, word);
    retired(block, word);
  }

  [[no_unique_address]] ChunkP chunks_;
  [[no_unique_address]] Layout layout_;
  std::size_t nextChunkBytes_;
  std::size_t tailCount_ = 1;
  std::size_t tableBytes_ = 0;
  Tail* tails_ = nullptr;
  Tail onlyTail_;
  DLList chunkList_;
};

}  // namespace heapkit
