// SuperblockHeap: headerless page-segregated size classes. Each size class (a
// SizeClassPolicy, building/SizeClasses.h: by type for libheapkit.so, by value for the
// simulator) has a list of superblocks (building/Superblock.h: 64 KiB pages of objects
// of one size, the header in a slot of its region's first slice, found from any object's
// address by masking); the head of the
// list is the class's current superblock. malloc pops its free list; free pushes the
// object on its superblock's list. Fresh objects are carved from a superblock's bump
// pointer a page at a time; an exhausted superblock leaves the list (kInFullList) until
// a free comes back to it; an empty one that is not current goes back to the parent's
// pool (combining/SuperblockPool.h), where other classes reuse it. Larger requests go to
// the parent's large-object path (combining/LargeObjectHeap.h).
//
// The parent provides: Superblock* takeSuperblock(class, objectBytes), retire(sb),
// grew(sb, from, to), void* mallocLarge(size, alignment), freeLarge(sb).
//
// Single-threaded as it stands (the heap libheapkit.so's threads each have, and the
// simulator's); with RemoteFrees, the thread layer (threads/ScalableHeap.h) lets other
// threads free into its superblocks: they push onto a superblock's atomic remote list,
// which the owner splices onto its free list when it runs out (Hoard's ownership), and a
// superblock in the full list is claimed by the first remote free and handed back to the
// owner through the `reactivated` stack. The protocol for a full superblock (the only
// subtle part): the owner moves an exhausted superblock to its full list and sets
// `inFullList`; a remote free pushes its block first, then claims the superblock by
// clearing `inFullList` with a CAS and pushes it on the owner's `reactivated` stack.
// Whoever wins the CAS (the owner cancelling, or exactly one remote freer) acts, so a
// remote free is never lost and a claimed superblock stays pinned in the full list until
// its owner pops it.
//
// malloc up to 1 KiB reads the class's current superblock from a direct table indexed by
// the size in 16-byte granules (mimalloc's pages_direct); an exhausted class points at an
// empty sentinel, so the inline path tests no null superblock. Larger small requests look
// their class up. free's inline path compares one word of the header, the superblock's
// free token, with the heap's: equal only while this heap owns it and no flag (large
// block, memalign's interior pointers, full list) asks for more.
//
// Counted (core/Counting.h): the direct table, the class lists, the headers and the free
// lists' links it reads and writes; a step per size-class lookup and per superblock
// visited. Over real memory they are plain loads and stores.
#pragma once

#include <array>
#include <atomic>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "heapkit/building/SizeClasses.h"
#include "heapkit/building/Superblock.h"
#include "heapkit/core/Counting.h"
#include "heapkit/core/Hardening.h"
#include "heapkit/core/HeapContract.h"

namespace heapkit {

template <SizeClassPolicy Classes, class Super, bool RemoteFrees = false>
class SuperblockHeap : public Super {
  static constexpr bool kHardened = hardened<Super>();
  static constexpr bool kSecure = secure<Super>();

  struct ClassState {
    Superblock* partial = nullptr;  // head = current superblock
    Superblock* partialTail = nullptr;
    Superblock* full = nullptr;
  };
  struct NoReactivated {};

 public:
  static constexpr std::size_t Alignment = kMinAlignment;
  static constexpr std::size_t kDirectBytes = 1024;
  static constexpr std::size_t kDirectGranules = kDirectBytes / 16 + 1;
  // The free token of a heap no thread layer numbered.
  static constexpr std::uint64_t kSingleOwnerToken = 1;

  template <class... SuperArgs>
  explicit SuperblockHeap(const Classes& classes, SuperArgs&&... superArgs)
      : Super(std::forward<SuperArgs>(superArgs)...), sizeClasses_(classes) {
    direct_.fill(&noFreeObjects);
  }
  SuperblockHeap()
    requires std::default_initializable<Classes> && std::default_initializable<Super>
  {
    direct_.fill(&noFreeObjects);
  }
  SuperblockHeap(const SuperblockHeap&) = delete;
  SuperblockHeap& operator=(const SuperblockHeap&) = delete;

  // ---- malloc ---------------------------------------------------------------------------

  void* malloc(std::size_t size) {
    if (size <= kDirectBytes) [[likely]] return mallocDirect(size);
    if (size <= sizeClasses_.maxBytes()) return mallocClass(size);
    return Super::mallocLarge(size, kMinAlignment);
  }

  // size <= kDirectBytes.
  [[gnu::always_inline]] void* mallocDirect(std::size_t size) {
    countStep(*this);
    Superblock* sb = loadMetadata(*this, direct_[(size + 15) / 16]);
    if (FreeNode* node = loadMetadata(*this, sb->freeList)) [[likely]] return sb->template handOut<kHardened, SuperblockHeap, kSecure>(*this, node);
    return allocSmallSlow(size);
  }

  // size <= kDirectBytes: mallocDirect with otherwise(size) for its slow path, which a
  // malloc wrapper passes (ScalableHeap::mallocInline), so that it is a jump.
  template <class Otherwise>
  [[gnu::always_inline]] void* mallocDirectOr(std::size_t size, Otherwise otherwise) {
    countStep(*this);
    Superblock* sb = loadMetadata(*this, direct_[(size + 15) / 16]);
    if (FreeNode* node = loadMetadata(*this, sb->freeList)) [[likely]] return sb->template handOut<kHardened, SuperblockHeap, kSecure>(*this, node);
    return otherwise(size);
  }

  // kDirectBytes < size <= the largest class.
  [[gnu::always_inline]] void* mallocClass(std::size_t size) {
    countStep(*this);
    Superblock* sb = loadMetadata(*this, classes_[sizeClasses_.classOf(size)].partial);
    if (sb != nullptr) [[likely]] {
      if (FreeNode* node = loadMetadata(*this, sb->freeList)) [[likely]] return sb->template handOut<kHardened, SuperblockHeap, kSecure>(*this, node);
    }
    return allocSmallSlow(size);
  }

  // Any power-of-two alignment; free and getSize accept the pointer it returns.
  void* memalign(std::size_t alignment, std::size_t size) {
    if (!isPowerOfTwo(alignment)) return nullptr;
    if (alignment <= kMinAlignment) return malloc(size);
    if (!fitsSmallAligned(alignment, size)) return Super::mallocLarge(size, alignment);
    auto* object = static_cast<char*>(malloc(size + alignment - kMinAlignment));
    return object != nullptr ? alignSmall(object, alignment) : nullptr;
  }

  // ---- free -----------------------------------------------------------------------------

  // The inline path: the superblock's free token (in its slice's head) is this heap's, so
  // no flag asks for more. A large block's head has a closed token; an object at a slice's
  // start is a large block's (a superblock's objects start past its head).
  void free(void* pointer) {
    if (pointer == nullptr) return;
    auto address = reinterpret_cast<std::uintptr_t>(pointer);
    if ((address & (superblock::kBytes - 1)) != 0) [[likely]] {
      SliceHead* head = Superblock::headAt(address);
      if (loadMetadata(*this, head->freeToken) == token_) [[likely]] {
        Superblock* sb = loadMetadata(*this, head->header);
        auto* node = static_cast<FreeNode*>(pointer);
        if constexpr (kHardened) (void)sb->checkAndTagFreed(node, true);  // the owner: true unless it reported
        sb->template fillFreed<kSecure>(node);
        if (sb->pushFreed(*this, node)) [[unlikely]] onLocalSuperblockEmpty(sb);
        return;
      }
    }
    freeSlow(pointer);
  }

  std::size_t getSize(void* pointer) { return Superblock::of(pointer)->usableFrom(*this, pointer); }
  // calloc's clearing (wrapper/ANSIWrapper.h): the bytes of an object just handed out that
  // may hold old data; a fresh span's pages read as zero (Superblock::bytesToClear), when
  // the top heap's do (without, calloc clears every byte).
  std::size_t bytesToClear(void* pointer, std::size_t bytes) const
    requires PagesReadZeroHeap<Super>
  {
    return Superblock::of(pointer)->bytesToClear(pointer, bytes);
  }
  // Hardened: what a freed small object holds in its second word (a layer above may find it there).
  static std::uint64_t freedTag(const void* object) { return Superblock::freedTag(object); }

  const Classes& sizeClasses() const { return sizeClasses_; }

  // ---- for the thread layer ------------------------------------------------------------

  // The current superblock of a class ran out: other threads' frees, then the class's
  // other superblocks, then a new one from the parent.
  [[gnu::noinline]] void* allocSmallSlow(std::size_t size) {
    if (size > sizeClasses_.maxBytes() || sizeClasses_.count() == 0) return Super::mallocLarge(size, kMinAlignment);
    std::size_t sizeClass = sizeClasses_.classOf(size);
    countStep(*this);
    ClassState& cls = classes_[sizeClass];
    if constexpr (RemoteFrees) {
      if (Superblock* sb = cls.partial) {
        // Blocks other threads freed come before fresh memory, so RSS tracks live data.
        sb->template collectRemote<kHardened>();
        if (void* object = takeFrom(sb)) return object;
      }
      processReactivated();
    }
    while (Superblock* sb = loadMetadata(*this, cls.partial)) {
      countStep(*this);
      if constexpr (RemoteFrees) sb->template collectRemote<kHardened>();
      if (void* object = takeFrom(sb)) return object;
      if (!moveToFull(sb)) {  // a remote free arrived meanwhile: use it
        sb->template collectRemote<kHardened>();
        if (void* object = takeFrom(sb)) return object;
      }
    }
    Superblock* sb = newSuperblock(sizeClass);
    if (sb == nullptr) return nullptr;
    pushPartialFront(sb);
    return takeFrom(sb);
  }

  // A superblock that is not the current one goes back to the pool when it empties.
  [[gnu::noinline]] void onLocalSuperblockEmpty(Superblock* sb) {
    if (sb != loadMetadata(*this, classes_[loadMetadata(*this, sb->sizeClass)].partial)) {
      unlinkPartial(sb);
      retire(sb);
    }
  }

  // A free by the owner that left the inline path (a flag is set), `node` the object's start.
  void freeOwned(Superblock* sb, FreeNode* node) {
    sb->pushFreed(*this, node);
    if (sb->flags(*this) & superblock::kInFullList) {
      if constexpr (RemoteFrees) {
        // Unless a remote freer has claimed it (then `reactivated` brings it back).
        std::uint16_t expected = 1;
        if (!sb->inFullList.compare_exchange_strong(expected, 0, std::memory_order_seq_cst)) return;
      }
      moveFullToPartial(sb);
    }
    if (loadMetadata(*this, sb->used) == 0 && sb != loadMetadata(*this, classes_[loadMetadata(*this, sb->sizeClass)].partial)) {
      unlinkPartial(sb);
      retire(sb);
    }
  }

  // A remote free claimed `sb` out of this heap's full list: the owner takes it back.
  void pushReactivated(Superblock* sb)
    requires RemoteFrees
  {
    Superblock* top = reactivated_.load(std::memory_order_relaxed);
    do {
      sb->nextReactivated = top;
    } while (!reactivated_.compare_exchange_weak(top, sb, std::memory_order_release, std::memory_order_relaxed));
  }

  // The thread is done with the heap: wholly free superblocks go back to the pool now;
  // the rest travel with the heap to the next thread, and remote frees keep reaching them.
  void releaseEmptySuperblocks()
    requires RemoteFrees
  {
    processReactivated();  // full superblocks that frees have reached are partial again
    for (std::size_t c = 0; c < sizeClasses_.count(); ++c) {
      Superblock* sb = classes_[c].partial;
      while (sb != nullptr) {
        Superblock* next = sb->next;
        sb->template collectRemote<kHardened>();
        if (sb->used == 0) {
          unlinkPartial(sb);
          retire(sb, true);
        }
        sb = next;
      }
    }
  }

  // For memalign: small objects are 16-aligned, so one of size + alignment - 16 bytes
  // holds an aligned one, if that is a small object.
  bool fitsSmallAligned(std::size_t alignment, std::size_t size) const {
    std::size_t maxBytes = sizeClasses_.maxBytes();
    return alignment <= superblock::kPageBytes && alignment < maxBytes && size <= maxBytes - alignment;
  }
  // The aligned pointer inside `object`; only such superblocks pay for finding the
  // object's start on free.
  void* alignSmall(char* object, std::size_t alignment) {
    auto aligned = alignUp(reinterpret_cast<std::uintptr_t>(object), alignment);
    if (aligned != reinterpret_cast<std::uintptr_t>(object)) Superblock::of(object)->setFlag(*this, superblock::kInteriorPointers);
    return reinterpret_cast<void*>(aligned);
  }

 protected:
  void setFreeToken(std::uint64_t token) { token_ = token; }
  std::uint64_t freeToken() const { return token_; }

  [[gnu::noinline]] void freeSlow(void* pointer) {
    Superblock* sb = kHardened ? Superblock::checkedOf(pointer) : Superblock::of(pointer);
    // Hardened, the flags as the header's check read them (read once).
    std::uint32_t flags = kHardened ? sb->checkHeader(*this, pointer) : sb->flags(*this);
    if (flags & superblock::kLargeBlock) {
      Super::freeLarge(sb);
      return;
    }
    auto* node = static_cast<FreeNode*>(flags & superblock::kInteriorPointers ? sb->objectStart(*this, pointer) : pointer);
    if constexpr (kHardened) (void)sb->checkAndTagFreed(node, true);  // the owner: true unless it reported
    sb->template fillFreed<kSecure>(node);
    freeOwned(sb, node);
  }

 private:
  void* takeFrom(Superblock* sb) {
    if (loadMetadata(*this, sb->freeList) == nullptr) {
      char* before = loadMetadata(*this, sb->residentEnd);
      if (!sb->carveFreshObjects(*this)) return nullptr;
      char* after = loadMetadata(*this, sb->residentEnd);
      if (after != before) Super::grew(sb, before, after);
    }
    return sb->template handOut<kHardened, SuperblockHeap, kSecure>(*this, loadMetadata(*this, sb->freeList));
  }

  Superblock* newSuperblock(std::size_t sizeClass) {
    std::size_t objectBytes = sizeClasses_.bytesOf(sizeClass);
    Superblock* sb = Super::takeSuperblock(sizeClass, objectBytes);
    if (sb == nullptr) return nullptr;
    sb->format(*this, static_cast<void*>(this), token_, sizeClass, objectBytes);
    return sb;
  }

  void retire(Superblock* sb, bool leaving = false) {
    sb->disown(*this);
    Super::retire(sb, leaving);
  }

  // False when it found a remote free and kept the superblock partial instead.
  bool moveToFull(Superblock* sb) {
    if constexpr (RemoteFrees) {
      sb->inFullList.store(1, std::memory_order_seq_cst);
      if (sb->remoteFree.load(std::memory_order_seq_cst) != nullptr) {
        std::uint16_t expected = 1;
        if (sb->inFullList.compare_exchange_strong(expected, 0, std::memory_order_seq_cst)) return false;
        // A remote freer claimed it: it will be on `reactivated` shortly; park it in full.
      }
    }
    unlinkPartial(sb);
    sb->setFlag(*this, superblock::kInFullList);
    ClassState& cls = classes_[loadMetadata(*this, sb->sizeClass)];
    Superblock* full = loadMetadata(*this, cls.full);
    storeMetadata(*this, sb->prev, nullptr);
    storeMetadata(*this, sb->next, full);
    if (full != nullptr) storeMetadata(*this, full->prev, sb);
    storeMetadata(*this, cls.full, sb);
    return true;
  }

  void processReactivated() {
    if (reactivated_.load(std::memory_order_relaxed) == nullptr) return;
    Superblock* sb = reactivated_.exchange(nullptr, std::memory_order_acquire);
    while (sb != nullptr) {
      Superblock* next = sb->nextReactivated;
      moveFullToPartial(sb);
      sb = next;
    }
  }

  void unlinkFull(Superblock* sb) {
    ClassState& cls = classes_[loadMetadata(*this, sb->sizeClass)];
    Superblock* prev = loadMetadata(*this, sb->prev);
    Superblock* next = loadMetadata(*this, sb->next);
    if (prev != nullptr) storeMetadata(*this, prev->next, next);
    else storeMetadata(*this, cls.full, next);
    if (next != nullptr) storeMetadata(*this, next->prev, prev);
  }

  // The partial list's head is the class's current superblock, which the direct table
  // names too: every change of the head goes through these.
  void unlinkPartial(Superblock* sb) {
    std::size_t sizeClass = loadMetadata(*this, sb->sizeClass);
    Superblock* prev = loadMetadata(*this, sb->prev);
    Superblock* next = loadMetadata(*this, sb->next);
    if (prev != nullptr) storeMetadata(*this, prev->next, next);
    else setCurrent(sizeClass, next);
    if (next != nullptr) storeMetadata(*this, next->prev, prev);
    else storeMetadata(*this, classes_[sizeClass].partialTail, prev);
  }

  void pushPartialFront(Superblock* sb) {
    std::size_t sizeClass = loadMetadata(*this, sb->sizeClass);
    ClassState& cls = classes_[sizeClass];
    sb->clearFlag(*this, superblock::kInFullList);
    Superblock* head = loadMetadata(*this, cls.partial);
    storeMetadata(*this, sb->prev, nullptr);
    storeMetadata(*this, sb->next, head);
    if (head != nullptr) storeMetadata(*this, head->prev, sb);
    else storeMetadata(*this, cls.partialTail, sb);
    setCurrent(sizeClass, sb);
  }

  // Behind the current superblock, so the current one stays in use.
  void pushPartialBack(Superblock* sb) {
    std::size_t sizeClass = loadMetadata(*this, sb->sizeClass);
    ClassState& cls = classes_[sizeClass];
    sb->clearFlag(*this, superblock::kInFullList);
    Superblock* tail = loadMetadata(*this, cls.partialTail);
    storeMetadata(*this, sb->next, nullptr);
    storeMetadata(*this, sb->prev, tail);
    if (tail != nullptr) storeMetadata(*this, tail->next, sb);
    else setCurrent(sizeClass, sb);
    storeMetadata(*this, cls.partialTail, sb);
  }

  void setCurrent(std::size_t sizeClass, Superblock* sb) {
    storeMetadata(*this, classes_[sizeClass].partial, sb);
    std::size_t first = sizeClass == 0 ? 0 : sizeClasses_.bytesOf(sizeClass - 1) / 16 + 1;
    std::size_t objectBytes = sizeClasses_.bytesOf(sizeClass);
    std::size_t last = (objectBytes < kDirectBytes ? objectBytes : kDirectBytes) / 16;
    for (std::size_t granule = first; granule <= last; ++granule) {
      countStep(*this);
      storeMetadata(*this, direct_[granule], sb != nullptr ? sb : &noFreeObjects);
    }
  }

  void moveFullToPartial(Superblock* sb) {
    unlinkFull(sb);
    pushPartialBack(sb);
  }

  // The class lists, indexed by class.
  struct ClassStates {
    ClassState& operator[](std::size_t sizeClass) { return states[sizeClass]; }
    ClassState states[Classes::kMaxClasses];
  };

  // Where malloc's inline path finds an exhausted class: an empty free list.
  static inline constinit Superblock noFreeObjects{};

  std::array<Superblock*, kDirectGranules> direct_;  // [granules]: the class's current superblock or noFreeObjects
  std::uint64_t token_ = kSingleOwnerToken;
  ClassStates classes_;
  [[no_unique_address]] Classes sizeClasses_;
  [[no_unique_address]] std::conditional_t<RemoteFrees, std::atomic<Superblock*>, NoReactivated> reactivated_{};
};

}  // namespace heapkit
