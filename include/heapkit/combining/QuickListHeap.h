// QuickListHeap: exact-size LIFO lists for small objects (one list per 16 bytes of usable
// size, up to MaxQuickBytes) in front of a coalescing heap, as in Lea's allocator. Small frees skip
// coalescing entirely. The lists are consolidated (given back to the heap below, which
// merges them) before a large request (1 KiB or more) and before the heap would grow.
#pragma once

#include <array>
#include <cstddef>

#include "heapkit/core/Counting.h"
#include "heapkit/core/Hardening.h"
#include "heapkit/core/HeapContract.h"
#include "heapkit/core/SizeWord.h"

namespace heapkit {

template <std::size_t MaxQuickBytes, SizedHeap Super>
class QuickListHeap : public Super {
  static_assert(MaxQuickBytes % 16 == 0 && MaxQuickBytes >= 16);
  static constexpr std::size_t kLists = MaxQuickBytes / 16 + 1;
  // Where dlmalloc's small bins end and its large requests begin (64-bit).
  static constexpr std::size_t kLargeRequestBytes = 1024;

 public:
  using Super::Super;
  QuickListHeap() = default;

  ~QuickListHeap() { consolidate(); }

  void* malloc(std::size_t size) {
    if (size <= MaxQuickBytes) {
      // The list of exactly the usable size the heap below would give this request.
      std::size_t list = usableSizeFor(size) / 16;
      countStep(*this);  // the list's lookup
      if (Node* node = loadMetadata(*this, heads_[list])) {
        storeMetadata(*this, heads_[list], loadMetadata(*this, node->next));
        if constexpr (kMarksBlocks) Super::clearRetired(node);
        else if constexpr (kHardened) hardening::untagAllocated(node);
        return node;
      }
    }
    void* object = mallocBelow(size);
    // Whatever path hands the object out, a tag left from an earlier life goes: a block
    // merged below keeps its old second word, and may be carved at the same address.
    if constexpr (kHardened && !kMarksBlocks) {
      if (object != nullptr) hardening::untagAllocated(object);
    }
    return object;
  }

  void free(void* object) {
    if (object == nullptr) return;
    if constexpr (kMarksBlocks) {
      freeMarking(object);
      return;
    }
    std::size_t usable = sizeword::sizeFrom(*this, static_cast<const Super&>(*this), object);
    countStep(*this);  // the list's lookup
    // One unsigned compare. Hardened, a length too short for a block (a made-up pointer's)
    // lands on a list no malloc serves (every request's usable size is a block's), where it
    // waits for the consolidation, whose checks report it.
    if (usable < 16 * kLists) {
      std::size_t list = usable / 16;
      // The heap below sees quick-listed objects as in use; its checks of the next block,
      // which tell pointers that are no block of its own, are made when the lists are
      // consolidated (its free checks every object handed down). Objects that go on to the
      // heap below are checked there.
      if constexpr (kHardened && requires { Super::checkFreeable(object); }) Super::checkFreeable(object);
      if constexpr (kHardened) hardening::checkAndTagFreed(object);
      push(list, object);
      return;
    }
    Super::free(object);
  }

  // Give every quick-listed object back to the heap below.
  void consolidate() {
    for (std::size_t list = 0; list < kLists; ++list) {
      // Hardened over boundary tags, the blocks of a block's length had their own word
      // checked when listed and marked since: the heap below checks the rest
      // (CoalesceHeap::freeRetired). List 0 holds lengths no block has (freeMarking),
      // which its full checks report.
      if constexpr (kFreesRetired) {
        if (list != 0) [[likely]] {
          handDown(list, [this](Node* node) { Super::freeRetired(node); });
          continue;
        }
      }
      handDown(list, [this](Node* node) {
        if constexpr (kMarksBlocks) Super::clearRetired(node);
        Super::free(node);
      });
    }
    quickObjects_ = 0;
  }

 private:
  static constexpr bool kHardened = hardened<Super>();
  // Hardened over boundary tags (Lea's), a quick-listed block is marked in its own size
  // word (BoundaryTags::kRetired) instead of tagged in its second word: the mark costs
  // free one instruction where the tag cost four (its lea, compare, branch and store),
  // and it and the word's free bit push the list index out of range, so a block freed
  // twice, or one the heap below holds free, goes to that heap's free, whose checks
  // report it. The heap below's checks of the next block, which tell pointers that are
  // no block of its own, are made when the lists are consolidated (its free checks every
  // block handed down): glibc's tcache checks no next chunk on free either, and
  // mimalloc's secure mode checks its free lists when it collects them.
  static constexpr bool kMarksBlocks = kHardened && requires(Super& heap, void* block) {
    Super::quickListIndex(heap, block);
    Super::markRetired(block);
    Super::clearRetired(block);
  };

  static constexpr bool kFreesRetired = kMarksBlocks && requires(Super& heap, void* block) { heap.freeRetired(block); };

  template <class FreeBelow>
  [[gnu::always_inline]] void handDown(std::size_t list, FreeBelow freeBelow) {
    Node*& head = heads_[list];
    countStep(*this);  // a list visited
    while (Node* node = loadMetadata(*this, head)) {
      countStep(*this);  // a node handed down
      storeMetadata(*this, head, loadMetadata(*this, node->next));
      freeBelow(node);
    }
  }

  [[gnu::always_inline]] void freeMarking(void* object) {
    std::size_t list = Super::quickListIndex(*this, object);
    countStep(*this);  // the list's lookup
    // A length too short for a block (a made-up pointer's) lands on a list no malloc
    // serves (every request's usable size is a block's), where it waits for the
    // consolidation, whose checks report it.
    if (list < kLists) [[likely]] {
      push(list, object);
      // After the push: its count's store could alias the word for all the compiler knows,
      // so the mark is one read-modify-write of memory (a bts) rather than a set bit and a
      // store of the word the list index was computed from (and a copy of it kept).
      Super::markRetired(object);
      return;
    }
    Super::free(object);
  }

  [[gnu::always_inline]] void push(std::size_t list, void* object) {
    auto* node = static_cast<Node*>(object);
    storeMetadata(*this, node->next, loadMetadata(*this, heads_[list]));
    storeMetadata(*this, heads_[list], node);
    ++quickObjects_;
  }

  // A request no quick list could serve.
  void* mallocBelow(std::size_t size) {
    // Give the heap below the quick-listed objects to merge, as dlmalloc consolidates its
    // fast bins: before a large request, so it is placed among merged neighbours rather
    // than cut from a block those would have joined, and before the heap grows, or
    // objects freed at one size could never serve another while the heap grows.
    if constexpr (requires(Super& s) { s.mallocCached(size); }) {
      if (quickObjects_ != 0) {
        if (size >= kLargeRequestBytes) consolidate();
        else if (void* object = Super::mallocCached(size)) return object;
        else consolidate();
      }
    }
    return Super::malloc(size);
  }

  struct Node {
    Node* next;
  };

  // Usable sizes are multiples of 16 (SizeHeap) or 16k + 8 (overlapped boundary tags):
  // either way, one usable size per list.
  static constexpr std::size_t usableSizeFor(std::size_t size) {
    if constexpr (requires { Super::usableSizeFor(size); }) return Super::usableSizeFor(size);
    else return usableBytesFor(size);
  }
  static_assert(usableSizeFor(MaxQuickBytes) / 16 < kLists);

  std::array<Node*, kLists> heads_{};
  // Counts frees since the last consolidation: an upper bound, enough to skip work.
  std::size_t quickObjects_ = 0;
};

}  // namespace heapkit
