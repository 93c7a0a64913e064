// ScalableHeap: heapkit's general-purpose multi-threaded allocator, in the spirit of Hoard
// (per-thread heaps, ownership per superblock) with mimalloc's free lists per superblock.
//
//  - Memory comes from Top in 4 MiB arenas cut into 64 KiB superblocks, aligned so
//    that any object's superblock header is found by masking its address.
//  - A superblock holds objects of one of 40 size classes (16 B to 32 KiB; 16-byte steps
//    to 128 B, then four classes per doubling) and is owned by one thread heap. Each
//    thread allocates from its own heap without locks.
//  - A block freed by its owner thread goes on the superblock's local free list; a block
//    freed by another thread is pushed on the superblock's atomic remote list, and
//    returns to the owner (Hoard's ownership), which collects it when it runs out.
//  - A wholly free superblock goes back to a shared pool. The pool keeps the 4 MiB of
//    free superblocks freed last with their pages and returns the pages of older ones to
//    the OS (madvise), so peak RSS tracks live data while a program that frees and
//    rebuilds a structure (GCBench's trees) reuses warm pages instead of faulting in
//    zeroed ones. A warm superblock goes to its own class first; a class of small
//    objects gets another class's without its pages (it would leave most of them unused
//    and resident); and when the program grows into new pages while warm superblocks
//    sit unused, as many bytes of the oldest go back to the OS.
//  - A thread's heap is handed on to the next new thread when the thread exits (a
//    pthread key destructor), so many short-lived threads reuse a few heaps.
//  - Requests over 32 KiB (or with large alignment) get a block of their own from Top.
//    Freed ones up to 32 MiB are kept with their pages and reused by later requests
//    (the smallest that fits): a program that allocates and frees large buffers in a
//    loop (Python's bytes, I/O buffers, images) would otherwise pay an mmap, its page
//    faults and a munmap every time (glibc raises its mmap threshold for the same
//    reason). The cache's budget is twice the biggest block freed recently (4 to
//    64 MiB, as glibc's trim threshold follows its mmap threshold), and a block unused
//    for 1024 large operations goes back to the OS (mimalloc's delayed purge, counted
//    in operations: no background thread). See kLargeCache* below.
//
// Fast paths (inline; everything else is out of line), measured with callgrind against
// mimalloc 2.0.9 (16 instructions per malloc, 26 per free on GCBench):
//  - malloc up to 1 KiB: this thread's heap from an initial-exec thread-local (checked
//    against the instance's id), the class's current superblock from the heap's direct
//    table indexed by the size in 16-byte granules (an exhausted class points at an
//    empty sentinel, so no null test), and the head of its free list popped: 26
//    instructions per call with the wrapper's checks (31 with a class table and a null
//    test). Larger small requests look the class up in a table.
//  - free: masks the address to the superblock header and compares one word, the
//    superblock's free token, with this thread's: equal only when this thread's heap owns
//    the superblock and no flag (large block, memalign's interior pointers, full list)
//    asks for more. Then the object is pushed: 25 instructions per call (33 when the
//    owner, the instance and the flags were three checks).
// No lock and no atomic on either. Fresh objects are threaded onto the list a page at a
// time, so bump allocation does not leave the fast path for every object.
//
// Thread-safety protocol for a full superblock (the only subtle part): the owner moves
// an exhausted superblock to its full list and sets `inFullList`; a remote free pushes
// its block first, then claims the superblock by clearing `inFullList` with a CAS and
// pushes the superblock on the owner's `reactivated` stack. Whoever wins the CAS (the
// owner cancelling, or exactly one remote freer) acts, so a remote free is never lost and
// a claimed superblock stays pinned in the full list until its owner pops it.
#pragma once

#include <pthread.h>
#include <sys/mman.h>

#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <new>

#include "heapkit/core/Hardening.h"
#include "heapkit/core/HeapContract.h"
#include "heapkit/threads/Locks.h"
#include "heapkit/top/MmapHeap.h"

namespace heapkit {

namespace scalable {
// Small enough that a class's superblocks empty (and serve other classes) while the
// program runs: with 256 KiB, espresso's peak RSS was 1.27x glibc's, with 64 KiB 1.14x.
inline constexpr std::size_t kSuperblockBytes = 64 * 1024;
inline constexpr std::size_t kSuperblocksPerArena = 64;
inline constexpr std::size_t kMaxSmallBytes = 32 * 1024;
inline constexpr std::size_t kNumClasses = 40;
// Free superblocks kept with their pages (4 MiB); beyond this the pool gives pages back.
inline constexpr std::size_t kCommittedPoolSuperblocks = 64;
// Freed large blocks are kept for reuse, their pages resident (as glibc keeps freed heap
// memory once it has raised its mmap threshold, and mimalloc keeps freed segments):
//  - any block up to kLargeCacheMaxBlockBytes (glibc's largest mmap threshold); bigger
//    ones are rare enough that a mapping each costs little next to using them;
//  - together at most a budget of twice the biggest block freed recently (glibc's trim
//    threshold follows its mmap threshold at 2x), at least kLargeCacheMinBytes and at
//    most kLargeCacheMaxBytes, and at most kLargeCacheBlocks blocks (each request scans
//    them); beyond it the block freed longest ago goes back to the OS;
//  - a block not reused within kLargeCachePurgeDelay large operations (mallocs and frees
//    over kMaxSmallBytes) goes back too: a count, not a clock, so there is no background
//    thread and no system call to read the time, and tests are deterministic. "Recently"
//    is the same window.
// A request takes the smallest cached block it fits in, however much bigger, as glibc
// serves it from freed heap space; pages more than kLargeReuseSlack times the request
// beyond it are given back (madvise), so a small request never pins a big block's pages.
// Measured on bench-malloc's bigblocks (5-25 MiB) and buffers (16-256 KiB) workloads and
// a Python loop of 40-240 KB bytes objects.
inline constexpr std::size_t kLargeCacheMaxBlockBytes = 32 * 1024 * 1024;
inline constexpr std::size_t kLargeCacheMinBytes = 4 * 1024 * 1024;
inline constexpr std::size_t kLargeCacheMaxBytes = 64 * 1024 * 1024;
inline constexpr std::size_t kLargeCacheBlocks = 8;
inline constexpr std::uint64_t kLargeCachePurgeDelay = 1024;
inline constexpr std::size_t kLargeReuseSlack = 4;
inline constexpr std::size_t kPageBytes = 4096;

constexpr std::size_t computeSizeClass(std::size_t size) {
  if (size <= 128) return size == 0 ? 0 : (size - 1) / 16;
  std::size_t log2 = static_cast<std::size_t>(std::bit_width(size - 1)) - 1;  // size in (2^log2, 2^(log2+1)]
  return 8 + (log2 - 7) * 4 + (((size - 1) >> (log2 - 2)) & 3);
}
// A class is one table load (2 KiB, of which a program touches the lines of the sizes it
// uses) instead of a branch and a bit scan on every malloc.
inline constexpr auto kClassTable = [] {
  std::array<std::uint8_t, kMaxSmallBytes / 16 + 1> table{};
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<std::uint8_t>(computeSizeClass(i * 16));
  return table;
}();
constexpr std::size_t sizeToClass(std::size_t size) { return kClassTable[(size + 15) / 16]; }
constexpr std::size_t classToSize(std::size_t sizeClass) {
  if (sizeClass < 8) return (sizeClass + 1) * 16;
  std::size_t log2 = 7 + (sizeClass - 8) / 4;
  return (std::size_t{1} << log2) + ((sizeClass - 8) % 4 + 1) * (std::size_t{1} << (log2 - 2));
}
static_assert(sizeToClass(1) == 0 && sizeToClass(128) == 7 && sizeToClass(129) == 8 && classToSize(8) == 160 &&
              sizeToClass(256) == 11 && classToSize(11) == 256 && sizeToClass(kMaxSmallBytes) == kNumClasses - 1 &&
              classToSize(kNumClasses - 1) == kMaxSmallBytes);
}  // namespace scalable

template <Heap Top = MmapHeap>
class ScalableHeap {
  struct FreeNode {
    FreeNode* next;
  };
  struct ThreadHeapState;

  // Bits of Superblock::freeFlags. A free in a superblock with none of them set is the
  // fast path: an owner comparison and this one word decide it.
  static constexpr std::uint32_t kLargeBlock = 1;        // the header of a large block
  static constexpr std::uint32_t kInteriorPointers = 2;  // memalign handed out pointers inside objects
  static constexpr std::uint32_t kInFullList = 4;        // a free must follow the full-superblock protocol

  // Hardened (core/Hardening.h): see "Hardening" at the end of the class.
  static constexpr bool kHardened = hardened<Top>();

  // At the start of every superblock, and of every large block's first 64 KiB. Three
  // cache lines, so that frees by other threads (which read the first and write the
  // third) never fight with the owner's allocations (which write the second).
  struct alignas(64) Superblock {
    // The one word free's fast path compares: the owner heap's freeToken while none of
    // freeFlags is set, else 0 (no thread's token). Here, not with the owner's data: every
    // free reads it, and a remote free that read the owner's cache line would take it
    // away from the owner. Only the owner writes it (relaxed: plain moves).
    std::atomic<std::uint64_t> freeToken;
    // Set when the superblock is (re)initialised, then (except freeFlags) only read.
    ThreadHeapState* owner;
    char* firstObject;
    std::uint64_t reciprocal;  // ceil(2^32 / objectBytes): object index without a division
    std::uint32_t objectBytes;
    std::uint32_t sizeClass;
    // Changes rarely (a superblock entering or leaving the full list, memalign). Only the
    // owner writes it, so relaxed loads and stores suffice, and no read-modify-write.
    std::atomic<std::uint32_t> freeFlags;
    // Hardened: tells a header from anything else a masked pointer may land on. Set by
    // newHeader (the sentinel noFreeObjects, constant-initialised, keeps 0: no free
    // reaches it).
    std::uint32_t cookie = 0;
    void* topBlock;  // large blocks: what Top gave
    std::size_t usableBytes;
    // Written by the owning thread (or under the pool lock).
    alignas(64) Superblock* prev;
    Superblock* next;
    FreeNode* freeList;
    char* bump;
    char* lastStart;     // last address in the bump pointer's region where a whole object fits
    char* residentEnd;   // pages below it have been touched and not given back since
    std::uint32_t used;  // handed out and not yet back on freeList
    // Written by other threads.
    alignas(64) std::atomic<FreeNode*> remoteFree;
    std::atomic<std::uint32_t> inFullList;
    Superblock* nextReactivated;
  };
  static_assert(sizeof(Superblock) == 192 && sizeof(Superblock) % kMinAlignment == 0);

  static std::uint32_t flags(const Superblock* sb) { return sb->freeFlags.load(std::memory_order_relaxed); }
  static void setFlag(Superblock* sb, std::uint32_t flag) {
    sb->freeFlags.store(flags(sb) | flag, std::memory_order_relaxed);
    syncFreeToken(sb);
  }
  static void clearFlag(Superblock* sb, std::uint32_t flag) {
    sb->freeFlags.store(flags(sb) & ~flag, std::memory_order_relaxed);
    syncFreeToken(sb);
  }
  // The owner's token opens free's fast path; a flag, or no owner, closes it.
  static void syncFreeToken(Superblock* sb) {
    std::uint64_t token = sb->owner != nullptr && flags(sb) == 0 ? sb->owner->freeToken : kClosedFreeToken;
    sb->freeToken.store(token, std::memory_order_relaxed);
  }

  // Headers at one offset in every superblock would all fall in the same cache sets
  // (64 KiB apart), and with a few dozen superblocks in use they would evict each other
  // on every malloc and free. Each superblock's header sits at one of 16 offsets, chosen
  // by the superblock's address, so it is still found from any object's address; the
  // gap before it holds objects too (kGapOffset).
  // 256 bytes apart (not 192), so finding the header is a shift, a mask and an or.
  static constexpr std::size_t kColors = 16;
  static constexpr std::size_t kColorStride = 256;
  static constexpr std::size_t kHeaderAreaBytes = kColors * kColorStride;  // 4 KiB
  static_assert(sizeof(Superblock) <= kColorStride && scalable::kSuperblockBytes / kColors >= kColorStride);
  static_assert(kHeaderAreaBytes <= scalable::kPageBytes);
  // The gap a colour leaves before the header holds objects too (it cost 2 KiB of every
  // superblock on average: GCBench's peak RSS, 130 superblocks of 32-byte nodes, was 250
  // KiB over glibc's for it). They start 16 bytes in: an object at a superblock boundary
  // would be taken for a large block's (see free).
  static constexpr std::size_t kGapOffset = kMinAlignment;

  struct ClassState {
    Superblock* partial = nullptr;  // head = current superblock
    Superblock* partialTail = nullptr;
    Superblock* full = nullptr;
  };

  // Free tokens identify a thread heap for free's fast path. They are never reused (a
  // heap's address may be, once an instance is destroyed, while other threads still
  // cache a pointer to it), and no superblock or thread ever holds the two below.
  static constexpr std::uint64_t kClosedFreeToken = 0;  // a superblock's: no fast free
  static constexpr std::uint64_t kNoFreeToken = ~std::uint64_t{0};  // a thread's: no heap
  static std::uint64_t newFreeToken() {
    static constinit std::atomic<std::uint64_t> next{1};
    return next.fetch_add(1, std::memory_order_relaxed);
  }

  // malloc's fast path for requests up to kDirectBytes: one load from the size in 16-byte
  // granules to the class's current superblock, as mimalloc's pages_direct. An exhausted
  // class points at `noFreeObjects`, whose empty free list sends malloc to the slow path,
  // so the fast path tests no null superblock. 65 entries: 520 bytes per heap.
  static constexpr std::size_t kDirectBytes = 1024;
  static constexpr std::size_t kDirectGranules = kDirectBytes / 16 + 1;
  static inline constinit Superblock noFreeObjects{};

  struct ThreadHeapState {
    ThreadHeapState() { direct.fill(&noFreeObjects); }
    std::array<Superblock*, kDirectGranules> direct;  // [granules]: classes[class].partial or noFreeObjects
    std::uint64_t freeToken = newFreeToken();
    ClassState classes[scalable::kNumClasses];
    std::atomic<Superblock*> reactivated{nullptr};
    ScalableHeap* instance;
    ThreadHeapState* nextFree = nullptr;
    ThreadHeapState* nextAll = nullptr;
  };

  struct ThreadCache {
    std::uint64_t instanceId;
    ThreadHeapState* heap;
    std::uint64_t freeToken;  // heap->freeToken, or kNoFreeToken
  };

 public:
  static constexpr std::size_t Alignment = kMinAlignment;

  ScalableHeap() : id_(nextInstanceId().fetch_add(1, std::memory_order_relaxed)) {
    keyOk_ = pthread_key_create(&key_, &onThreadExit) == 0;
  }
  ScalableHeap(const ScalableHeap&) = delete;
  ScalableHeap& operator=(const ScalableHeap&) = delete;

  ~ScalableHeap() {
    if (keyOk_) pthread_key_delete(key_);
    if (threadCache.instanceId == id_) threadCache = {0, nullptr, kNoFreeToken};
    while (largeBlocks_ != nullptr) {
      Superblock* block = largeBlocks_;
      largeBlocks_ = block->next;
      top_.free(block->topBlock);
    }
    while (largeCache_ != nullptr) {
      CachedLarge* cached = largeCache_;
      largeCache_ = cached->next;
      top_.free(cached);
    }
    while (arenas_ != nullptr) {
      void* raw = arenas_;
      arenas_ = *arenaLink(raw);
      top_.free(raw);
    }
    while (allHeaps_ != nullptr) {
      ThreadHeapState* heap = allHeaps_;
      allHeaps_ = heap->nextAll;
      heap->~ThreadHeapState();
      top_.free(heap);
    }
  }

  // The fast path: this thread's current superblock of the class has a free object. No
  // lock, no atomic, no call; everything else is out of line.
  void* malloc(std::size_t size) {
    if (size <= kDirectBytes) [[likely]] {
      if (threadCache.instanceId == id_) [[likely]] {
        ThreadHeapState* heap = threadCache.heap;  // never null while the id matches
        Superblock* sb = heap->direct[(size + 15) / 16];
        if (FreeNode* node = sb->freeList) [[likely]] return handOut(sb, node);
        return allocSmallSlow(heap, scalable::sizeToClass(size));
      }
      return allocSmallWithoutCachedHeap(size);
    }
    if (size <= scalable::kMaxSmallBytes) {
      if (threadCache.instanceId == id_) [[likely]] {
        ThreadHeapState* heap = threadCache.heap;  // never null while the id matches
        std::size_t sizeClass = scalable::sizeToClass(size);
        Superblock* sb = heap->classes[sizeClass].partial;
        if (sb != nullptr) [[likely]] {
          if (FreeNode* node = sb->freeList) [[likely]] return handOut(sb, node);
        }
        return allocSmallSlow(heap, sizeClass);
      }
      return allocSmallWithoutCachedHeap(size);
    }
    return allocLarge(size, kMinAlignment);
  }

  // Any power-of-two alignment; free and getSize accept the pointer it returns.
  void* memalign(std::size_t alignment, std::size_t size) {
    if (!isPowerOfTwo(alignment)) return nullptr;
    if (alignment <= kMinAlignment) return malloc(size);
    // Small objects are 16-aligned: one of size + alignment - 16 bytes holds an aligned one.
    if (alignment <= scalable::kPageBytes && size <= scalable::kMaxSmallBytes - alignment) {
      auto* object = static_cast<char*>(malloc(size + alignment - kMinAlignment));
      if (object == nullptr) return nullptr;
      auto aligned = alignUp(reinterpret_cast<std::uintptr_t>(object), alignment);
      // Only such superblocks pay for finding the object's start on free.
      if (aligned != reinterpret_cast<std::uintptr_t>(object)) setFlag(superblockOf(object), kInteriorPointers);
      return reinterpret_cast<void*>(aligned);
    }
    return allocLarge(size, alignment);
  }

  // The fast path: the superblock's free token is this thread's heap's, so this thread
  // owns it and none of its flags asks for more. A large block's header has no token,
  // and a thread without a heap has none, so neither matches; nor does this thread when
  // it last used another instance (its heap there has another token).
  void free(void* pointer) {
    if (pointer == nullptr) return;
    auto address = reinterpret_cast<std::uintptr_t>(pointer);
    // A superblock's objects start kGapOffset in at least, so only a large block's object
    // starts on a superblock boundary (and its header lies one superblock below): slow path.
    if ((address & (scalable::kSuperblockBytes - 1)) != 0) [[likely]] {
      Superblock* sb = headerAt(address & ~(scalable::kSuperblockBytes - 1));
      if (sb->freeToken.load(std::memory_order_relaxed) == threadCache.freeToken) [[likely]] {
        auto* node = static_cast<FreeNode*>(pointer);
        if constexpr (kHardened) hardening::checkAndTagFreed(node);
        node->next = sb->freeList;
        sb->freeList = node;
        if (--sb->used == 0) [[unlikely]] onLocalSuperblockEmpty(sb);
        return;
      }
    }
    freeSlow(pointer);
  }

  std::size_t getSize(void* pointer) const {
    Superblock* sb = superblockOf(pointer);
    auto* p = static_cast<char*>(pointer);
    if (flags(sb) & kLargeBlock) return sb->usableBytes - static_cast<std::size_t>(p - sb->firstObject);
    if (!(flags(sb) & kInteriorPointers)) return sb->objectBytes;
    auto* start = static_cast<char*>(objectStart(sb, pointer));
    return sb->objectBytes - static_cast<std::size_t>(p - start);
  }

  std::size_t bytesHeld() const {
    LockGuard<SpinLock> guard(poolLock_);
    return top_.bytesHeld();
  }
  std::size_t peakBytesHeld() const {
    LockGuard<SpinLock> guard(poolLock_);
    return top_.peakBytesHeld();
  }

  // Fork: the pool and the heap registry are the only locks. In the child, the heaps of
  // threads that do not exist there are never handed on: one of them may have been
  // mid-update when fork() copied it. Their blocks can still be freed (remote frees).
  void prepareFork() {
    heapsLock_.lock();
    poolLock_.lock();
  }
  void parentAfterFork() {
    poolLock_.unlock();
    heapsLock_.unlock();
  }
  void childAfterFork() {
    // Heaps on the free list were released whole and are safe to hand on; the heaps of
    // the parent's other threads are simply never released in the child.
    poolLock_.reset();
    heapsLock_.reset();
  }

  // Gives this thread's heap to the next new thread now (tests; the key does it at exit).
  void releaseThisThreadsHeap() {
    ThreadHeapState* heap = myHeap(false);
    if (heap == nullptr) return;
    if (keyOk_) pthread_setspecific(key_, nullptr);
    releaseHeap(heap);
  }

  // Freed large blocks kept for reuse: their resident bytes and their number (tests).
  std::size_t largeCacheBytes() const {
    LockGuard<SpinLock> guard(poolLock_);
    return largeCacheResidentBytes_;
  }
  std::size_t largeCacheBlocks() const {
    LockGuard<SpinLock> guard(poolLock_);
    return largeCacheCount_;
  }

  // Superblocks in the shared pool (tests: thread exit and frees give them back).
  std::size_t pooledSuperblocks() const {
    LockGuard<SpinLock> guard(poolLock_);
    return warmCount_ + coldCount_ + freshLeft_;
  }

 private:
  // ---- thread heaps ----------------------------------------------------------------

  // One entry per thread: the heap of the instance it used last. The pthread key is
  // the fallback when a thread uses several instances.
  static inline constinit thread_local ThreadCache threadCache{0, nullptr, kNoFreeToken};

  static std::atomic<std::uint64_t>& nextInstanceId() {
    static constinit std::atomic<std::uint64_t> next{1};
    return next;
  }

  ThreadHeapState* myHeap(bool create) {
    if (threadCache.instanceId == id_) return threadCache.heap;
    auto* heap = keyOk_ ? static_cast<ThreadHeapState*>(pthread_getspecific(key_)) : nullptr;
    if (heap == nullptr) {
      if (!create) return nullptr;
      heap = acquireHeap();
      if (heap == nullptr) return nullptr;
      threadCache = {id_, heap, heap->freeToken};
      // Set after the cache: pthread_setspecific may itself call malloc (keys >= 32).
      if (keyOk_) pthread_setspecific(key_, heap);
    }
    threadCache = {id_, heap, heap->freeToken};
    return heap;
  }

  ThreadHeapState* acquireHeap() {
    LockGuard<SpinLock> guard(heapsLock_);
    if (freeHeaps_ != nullptr) {
      ThreadHeapState* heap = freeHeaps_;
      freeHeaps_ = heap->nextFree;
      return heap;
    }
    void* memory;
    {
      LockGuard<SpinLock> poolGuard(poolLock_);
      memory = top_.malloc(sizeof(ThreadHeapState));
    }
    if (memory == nullptr) return nullptr;
    auto* heap = new (memory) ThreadHeapState();
    heap->instance = this;
    heap->nextAll = allHeaps_;
    allHeaps_ = heap;
    return heap;
  }

  static void onThreadExit(void* value) {
    auto* heap = static_cast<ThreadHeapState*>(value);
    heap->instance->releaseHeap(heap);
  }

  void releaseHeap(ThreadHeapState* heap) {
    if (threadCache.heap == heap) threadCache = {0, nullptr, kNoFreeToken};
    // Superblocks that are wholly free go back to the pool now; the rest travel with the
    // heap to the next thread, and remote frees keep reaching them meanwhile.
    for (std::size_t c = 0; c < scalable::kNumClasses; ++c) {
      Superblock* sb = heap->classes[c].partial;
      while (sb != nullptr) {
        Superblock* next = sb->next;
        collectRemote(sb);
        if (sb->used == 0) {
          unlinkPartial(heap, sb);
          retire(sb);
        }
        sb = next;
      }
    }
    LockGuard<SpinLock> guard(heapsLock_);
    heap->nextFree = freeHeaps_;
    freeHeaps_ = heap;
  }

  // ---- small objects -----------------------------------------------------------------

  static Superblock* headerAt(std::uintptr_t base) {
    constexpr std::size_t kShift = std::countr_zero(scalable::kSuperblockBytes) - std::countr_zero(kColorStride);
    return reinterpret_cast<Superblock*>(base | ((base >> kShift) & ((kColors - 1) * kColorStride)));
  }
  // A fresh header for the superblock (or large block) at `base`.
  static Superblock* newHeader(std::uintptr_t base) {
    auto* sb = new (headerAt(base)) Superblock();
    if constexpr (kHardened) sb->cookie = liveCookie(sb);
    return sb;
  }
  static std::uintptr_t baseOf(const Superblock* sb) {
    return reinterpret_cast<std::uintptr_t>(sb) & ~(scalable::kSuperblockBytes - 1);
  }

  static Superblock* superblockOf(void* pointer) {
    auto address = reinterpret_cast<std::uintptr_t>(pointer);
    auto base = address & ~(scalable::kSuperblockBytes - 1);
    // Only a large block aligned to a superblock boundary starts there (a superblock's
    // objects start kGapOffset in at least): its header sits one superblock below.
    if (base == address) base -= scalable::kSuperblockBytes;
    return headerAt(base);
  }

  // The start of the object holding `pointer` (memalign hands out interior pointers).
  static void* objectStart(Superblock* sb, void* pointer) {
    char* start = pointer < static_cast<void*>(sb) ? reinterpret_cast<char*>(baseOf(sb)) + kGapOffset : sb->firstObject;
    auto offset = static_cast<std::uint64_t>(static_cast<char*>(pointer) - start);
    std::uint64_t index = (offset * sb->reciprocal) >> 32;
    return start + index * sb->objectBytes;
  }

  // First call of this thread, or the thread last used another instance.
  [[gnu::noinline]] void* allocSmallWithoutCachedHeap(std::size_t size) {
    ThreadHeapState* heap = myHeap(true);
    if (heap == nullptr) return nullptr;
    return allocSmallSlow(heap, scalable::sizeToClass(size));
  }

  // The current superblock has no free object on its list.
  [[gnu::noinline]] void* allocSmallSlow(ThreadHeapState* heap, std::size_t sizeClass) {
    ClassState& cls = heap->classes[sizeClass];
    if (Superblock* sb = cls.partial) {
      // Blocks other threads freed come before fresh memory, so RSS tracks live data.
      collectRemote(sb);
      if (void* object = takeFrom(sb)) return object;
    }
    processReactivated(heap);
    while (Superblock* sb = cls.partial) {
      collectRemote(sb);
      if (void* object = takeFrom(sb)) return object;
      if (!moveToFull(heap, sb)) {  // a remote free arrived meanwhile: use it
        collectRemote(sb);
        if (void* object = takeFrom(sb)) return object;
      }
    }
    Superblock* sb = newSuperblock(heap, sizeClass);
    if (sb == nullptr) return nullptr;
    pushPartialFront(heap, sb);
    return takeFrom(sb);
  }

  void* takeFrom(Superblock* sb) {
    if (sb->freeList == nullptr && !carveFreshObjects(sb)) return nullptr;
    return handOut(sb, sb->freeList);
  }

  // Pops `node`, the head of the superblock's free list, for the program: every malloc
  // path ends here.
  static void* handOut(Superblock* sb, FreeNode* node) {
    sb->freeList = node->next;
    ++sb->used;
    if constexpr (kHardened) hardening::untagAllocated(node);
    return node;
  }

  // Threads the never-used objects that start in the page the bump pointer is in (at
  // least one) onto the empty free list, so that the inline fast path serves the next
  // ones. Writing their links touches only that page: RSS still grows with use.
  bool carveFreshObjects(Superblock* sb) {
    if (sb->bump > sb->lastStart) {
      // The gap is used up (the bump pointer is below the header): on past the header.
      if (sb->bump > reinterpret_cast<char*>(sb)) return false;
      sb->bump = sb->firstObject;
      sb->lastStart = reinterpret_cast<char*>(baseOf(sb)) + scalable::kSuperblockBytes - sb->objectBytes;
    }
    std::size_t available = static_cast<std::size_t>(sb->lastStart - sb->bump) / sb->objectBytes + 1;
    auto bump = reinterpret_cast<std::uintptr_t>(sb->bump);
    std::size_t inThisPage = (alignUp(bump + 1, scalable::kPageBytes) - bump + sb->objectBytes - 1) / sb->objectBytes;
    std::size_t count = available < inThisPage ? available : inThisPage;
    char* object = sb->bump;
    for (std::size_t i = 1; i < count; ++i, object += sb->objectBytes)
      reinterpret_cast<FreeNode*>(object)->next = reinterpret_cast<FreeNode*>(object + sb->objectBytes);
    reinterpret_cast<FreeNode*>(object)->next = nullptr;
    sb->freeList = reinterpret_cast<FreeNode*>(sb->bump);
    sb->bump = object + sb->objectBytes;
    if (sb->bump > sb->residentEnd) {
      auto grown = static_cast<std::size_t>(sb->bump - sb->residentEnd);
      sb->residentEnd = sb->bump;
      if (warmCount_.load(std::memory_order_relaxed) != 0) offsetGrowth(grown);
    }
    return true;
  }

  // The program grows into pages never touched (or given back) while the pool holds
  // resident superblocks nobody took: the peak would count both. As many bytes of the
  // oldest warm superblocks as the program grew by go back to the OS, so the resident
  // set stays near what is in use. A program that frees a structure and builds it again
  // (GCBench) takes the warm superblocks back before it touches new pages, so it keeps
  // them: 20 more madvise calls there.
  [[gnu::noinline]] void offsetGrowth(std::size_t grown) {
    LockGuard<SpinLock> guard(poolLock_);
    unoffsetGrowth_ += grown;
    while (warmCount_ != 0) {
      Superblock* oldest = warmPoolTail_;
      auto resident = static_cast<std::size_t>(oldest->residentEnd - reinterpret_cast<char*>(baseOf(oldest)));
      resident = resident > scalable::kPageBytes ? resident - scalable::kPageBytes : 0;  // the header page stays
      if (unoffsetGrowth_ < resident) return;
      unoffsetGrowth_ -= resident;
      coolOldestWarm();
    }
    unoffsetGrowth_ = 0;
  }

  // Splices the remote list onto the free list whole. The walk only reads (to count the
  // blocks and find the tail): the blocks were last written by other threads' cores, and
  // relinking each one would cost a second cache-line transfer per block.
  static void collectRemote(Superblock* sb) {
    if (sb->remoteFree.load(std::memory_order_relaxed) == nullptr) return;
    FreeNode* head = sb->remoteFree.exchange(nullptr, std::memory_order_acquire);
    FreeNode* tail = head;
    std::uint32_t count = 1;
    while (tail->next != nullptr) {
      tail = tail->next;
      // Every block on the list was handed out: more means a cycle (a block freed twice
      // by other threads at once), which would otherwise loop here for ever.
      if constexpr (kHardened) {
        if (count == sb->used) [[unlikely]] hardening::corruptFreeList(sb);
      }
      ++count;
    }
    if (sb->freeList != nullptr) tail->next = sb->freeList;
    sb->freeList = head;
    sb->used -= count;
  }

  // Returns false when it found a remote free and kept the superblock partial instead.
  bool moveToFull(ThreadHeapState* heap, Superblock* sb) {
    sb->inFullList.store(1, std::memory_order_seq_cst);
    if (sb->remoteFree.load(std::memory_order_seq_cst) != nullptr) {
      std::uint32_t expected = 1;
      if (sb->inFullList.compare_exchange_strong(expected, 0, std::memory_order_seq_cst)) return false;
      // A remote freer claimed it: it will be on `reactivated` shortly; park it in full.
    }
    unlinkPartial(heap, sb);
    setFlag(sb, kInFullList);
    ClassState& cls = heap->classes[sb->sizeClass];
    sb->prev = nullptr;
    sb->next = cls.full;
    if (cls.full) cls.full->prev = sb;
    cls.full = sb;
    return true;
  }

  void processReactivated(ThreadHeapState* heap) {
    if (heap->reactivated.load(std::memory_order_relaxed) == nullptr) return;
    Superblock* sb = heap->reactivated.exchange(nullptr, std::memory_order_acquire);
    while (sb != nullptr) {
      Superblock* next = sb->nextReactivated;
      moveFullToPartial(heap, sb);
      sb = next;
    }
  }

  static void unlinkFull(ClassState& cls, Superblock* sb) {
    if (sb->prev) sb->prev->next = sb->next;
    else cls.full = sb->next;
    if (sb->next) sb->next->prev = sb->prev;
  }

  // The partial list's head is the class's current superblock, which the direct table
  // of small sizes names too: every change of the head goes through these.
  static void unlinkPartial(ThreadHeapState* heap, Superblock* sb) {
    ClassState& cls = heap->classes[sb->sizeClass];
    if (sb->prev) sb->prev->next = sb->next;
    else setCurrent(heap, sb->sizeClass, sb->next);
    if (sb->next) sb->next->prev = sb->prev;
    else cls.partialTail = sb->prev;
  }

  static void pushPartialFront(ThreadHeapState* heap, Superblock* sb) {
    ClassState& cls = heap->classes[sb->sizeClass];
    clearFlag(sb, kInFullList);
    sb->prev = nullptr;
    sb->next = cls.partial;
    if (cls.partial) cls.partial->prev = sb;
    else cls.partialTail = sb;
    setCurrent(heap, sb->sizeClass, sb);
  }

  // Behind the current superblock, so the current one stays in use.
  static void pushPartialBack(ThreadHeapState* heap, Superblock* sb) {
    ClassState& cls = heap->classes[sb->sizeClass];
    clearFlag(sb, kInFullList);
    sb->next = nullptr;
    sb->prev = cls.partialTail;
    if (cls.partialTail) cls.partialTail->next = sb;
    else setCurrent(heap, sb->sizeClass, sb);
    cls.partialTail = sb;
  }

  static void setCurrent(ThreadHeapState* heap, std::size_t sizeClass, Superblock* sb) {
    heap->classes[sizeClass].partial = sb;
    std::size_t objectBytes = scalable::classToSize(sizeClass);
    if (objectBytes > kDirectBytes) return;
    std::size_t first = sizeClass == 0 ? 0 : scalable::classToSize(sizeClass - 1) / 16 + 1;
    for (std::size_t granule = first; granule <= objectBytes / 16; ++granule)
      heap->direct[granule] = sb != nullptr ? sb : &noFreeObjects;
  }

  static void moveFullToPartial(ThreadHeapState* heap, Superblock* sb) {
    unlinkFull(heap->classes[sb->sizeClass], sb);
    pushPartialBack(heap, sb);
  }

  [[gnu::noinline]] void freeSlow(void* pointer) {
    Superblock* sb = superblockOf(pointer);
    if constexpr (kHardened) checkHeader(sb, pointer);
    if (flags(sb) & kLargeBlock) {
      freeLarge(sb);
      return;
    }
    auto* node = static_cast<FreeNode*>(flags(sb) & kInteriorPointers ? objectStart(sb, pointer) : pointer);
    if constexpr (kHardened) hardening::checkAndTagFreed(node);
    ThreadHeapState* heap = myHeap(false);
    if (sb->owner == heap && heap != nullptr) freeLocal(heap, sb, node);
    else freeRemote(sb, node);
  }

  // A superblock that is not the current one goes back to the pool when it empties.
  [[gnu::noinline]] void onLocalSuperblockEmpty(Superblock* sb) {
    ThreadHeapState* heap = sb->owner;
    if (sb != heap->classes[sb->sizeClass].partial) {
      unlinkPartial(heap, sb);
      retire(sb);
    }
  }

  void freeLocal(ThreadHeapState* heap, Superblock* sb, FreeNode* node) {
    node->next = sb->freeList;
    sb->freeList = node;
    --sb->used;
    ClassState& cls = heap->classes[sb->sizeClass];
    if (flags(sb) & kInFullList) {
      // Unless a remote freer has claimed it (then `reactivated` brings it back).
      std::uint32_t expected = 1;
      if (!sb->inFullList.compare_exchange_strong(expected, 0, std::memory_order_seq_cst)) return;
      moveFullToPartial(heap, sb);
    }
    if (sb->used == 0 && sb != cls.partial) {
      unlinkPartial(heap, sb);
      retire(sb);
    }
  }

  void freeRemote(Superblock* sb, FreeNode* node) {
    FreeNode* head = sb->remoteFree.load(std::memory_order_relaxed);
    do {
      node->next = head;
    } while (!sb->remoteFree.compare_exchange_weak(head, node, std::memory_order_seq_cst, std::memory_order_relaxed));
    if (sb->inFullList.load(std::memory_order_seq_cst) == 0) return;
    std::uint32_t expected = 1;
    if (!sb->inFullList.compare_exchange_strong(expected, 0, std::memory_order_seq_cst)) return;
    // Claimed: the superblock is pinned in its owner's full list until the owner pops it.
    ThreadHeapState* owner = sb->owner;
    Superblock* top = owner->reactivated.load(std::memory_order_relaxed);
    do {
      sb->nextReactivated = top;
    } while (!owner->reactivated.compare_exchange_weak(top, sb, std::memory_order_release, std::memory_order_relaxed));
  }

  // ---- the superblock pool -------------------------------------------------------------

  static void** arenaLink(void* raw) {
    auto aligned = alignUp(reinterpret_cast<std::uintptr_t>(raw) + 16, scalable::kSuperblockBytes);
    return reinterpret_cast<void**>(aligned - 16);
  }

  // Warm superblocks first (their pages are resident), the one freed last by the same
  // class before others; then ones whose pages were given back; then the untouched rest
  // of the newest arena. A class of small objects that takes another class's warm
  // superblock gets it without its pages: it may need only a few of the pages another
  // class filled, and would keep the rest resident for nothing (espresso, where half
  // the takes change class: peak RSS 560 KiB over glibc's before, 150 KiB after, with
  // offsetGrowth; either alone gained nothing). Larger
  // objects fill pages quickly, and alloctest's big classes pass superblocks to each
  // other thousands of times: giving their pages back there cost 9,000 madvise calls
  // and 0.2 s of page faults for no gain in peak RSS.
  Superblock* newSuperblock(ThreadHeapState* heap, std::size_t sizeClass) {
    Superblock* sb;
    {
      LockGuard<SpinLock> guard(poolLock_);
      sb = takeWarm(sizeClass);
      if (sb == nullptr && (sb = takeWarm(kAnyClass)) != nullptr) {
        if (scalable::classToSize(sizeClass) <= kDirectBytes) giveBackPages(sb);
      }
      if (sb == nullptr && coldPool_ != nullptr) {
        sb = coldPool_;
        coldPool_ = sb->next;
        --coldCount_;
      }
      if (sb == nullptr) {
        if (freshLeft_ == 0 && !addArena()) return nullptr;
        // Its header is written only now: an arena's unused superblocks cost no pages.
        sb = newHeader(reinterpret_cast<std::uintptr_t>(freshNext_));
        sb->residentEnd = freshNext_ + scalable::kPageBytes;
        freshNext_ += scalable::kSuperblockBytes;
        --freshLeft_;
      }
    }
    auto objectBytes = static_cast<std::uint32_t>(scalable::classToSize(sizeClass));
    auto* base = reinterpret_cast<char*>(baseOf(sb));
    sb->owner = heap;
    sb->prev = sb->next = nullptr;
    sb->freeList = nullptr;
    sb->firstObject = reinterpret_cast<char*>(sb + 1);
    // The colour gap before the header is carved first (it shares the header's page).
    char* gapStart = base + kGapOffset;
    if (reinterpret_cast<char*>(sb) - gapStart >= static_cast<std::ptrdiff_t>(objectBytes)) {
      sb->bump = gapStart;
      sb->lastStart = reinterpret_cast<char*>(sb) - objectBytes;
    } else {
      sb->bump = sb->firstObject;
      sb->lastStart = base + scalable::kSuperblockBytes - objectBytes;
    }
    sb->objectBytes = objectBytes;
    sb->reciprocal = ((std::uint64_t{1} << 32) + objectBytes - 1) / objectBytes;
    sb->sizeClass = static_cast<std::uint32_t>(sizeClass);
    sb->used = 0;
    sb->freeFlags.store(0, std::memory_order_relaxed);
    syncFreeToken(sb);
    sb->remoteFree.store(nullptr, std::memory_order_relaxed);
    sb->inFullList.store(0, std::memory_order_relaxed);
    sb->nextReactivated = nullptr;
    return sb;
  }

  // Called with poolLock_ held.
  bool addArena() {
    constexpr std::size_t kBytes = (scalable::kSuperblocksPerArena + 1) * scalable::kSuperblockBytes + 16;
    void* raw = top_.malloc(kBytes);
    if (raw == nullptr) return false;
    *arenaLink(raw) = arenas_;
    arenas_ = raw;
    freshNext_ = reinterpret_cast<char*>(arenaLink(raw)) + 16;
    freshLeft_ = scalable::kSuperblocksPerArena;
    return true;
  }

  void retire(Superblock* sb) {
    sb->owner = nullptr;
    syncFreeToken(sb);
    LockGuard<SpinLock> guard(poolLock_);
    sb->prev = nullptr;
    sb->next = warmPool_;
    if (warmPool_ != nullptr) warmPool_->prev = sb;
    else warmPoolTail_ = sb;
    warmPool_ = sb;
    if (++warmCount_ > scalable::kCommittedPoolSuperblocks) coolOldestWarm();
  }

  static constexpr std::size_t kAnyClass = scalable::kNumClasses;

  // Keeps the header page (it links the pool); gives the rest of the pages back.
  static void giveBackPages(Superblock* sb) {
    char* base = reinterpret_cast<char*>(baseOf(sb));
    if (sb->residentEnd <= base + scalable::kPageBytes) return;
    madvise(base + scalable::kPageBytes, scalable::kSuperblockBytes - scalable::kPageBytes, MADV_DONTNEED);
    sb->residentEnd = base + scalable::kPageBytes;
  }

  // Called with poolLock_ held: the warm superblock freed last of the class (or of any
  // class), unlinked; or null. The scan is short (64 at most) and runs once per 64 KiB.
  Superblock* takeWarm(std::size_t sizeClass) {
    Superblock* sb = warmPool_;
    while (sb != nullptr && sizeClass != kAnyClass && sb->sizeClass != sizeClass) sb = sb->next;
    if (sb != nullptr) unlinkWarm(sb);
    return sb;
  }

  // Called with poolLock_ held.
  void unlinkWarm(Superblock* sb) {
    if (sb->prev != nullptr) sb->prev->next = sb->next;
    else warmPool_ = sb->next;
    if (sb->next != nullptr) sb->next->prev = sb->prev;
    else warmPoolTail_ = sb->prev;
    --warmCount_;
  }

  // The superblock freed longest ago loses its pages: the ones freed last are the
  // likeliest to be needed again, and giving those back would only fault them in anew.
  void coolOldestWarm() {
    Superblock* oldest = warmPoolTail_;
    unlinkWarm(oldest);
    giveBackPages(oldest);
    oldest->next = coldPool_;
    coldPool_ = oldest;
    ++coldCount_;
  }

  // ---- large objects -----------------------------------------------------------------
  //
  // A large block is what Top gave: its first 16 bytes (which the header never covers)
  // hold its size while it is live and the cache's links while it is cached.

  struct LiveLarge {
    std::size_t bytes;  // the whole block, which a cached one may exceed the request by
  };
  struct CachedLarge {
    CachedLarge* next;
    std::size_t bytes;
    std::size_t residentBytes;  // from the start: the pages beyond were given back or never used
    std::uint64_t freedAt;      // largeClock_ when it was freed
  };
  static_assert(sizeof(CachedLarge) <= scalable::kSuperblockBytes);

  [[gnu::noinline]] void* allocLarge(std::size_t size, std::size_t alignment) {
    constexpr std::size_t kSb = scalable::kSuperblockBytes;
    constexpr std::size_t kSlack = kSb + kHeaderAreaBytes + 16;
    if (size > kMaxRequestBytes - kSlack - alignment - kSb) return nullptr;
    std::size_t usable = alignUp(size, kMinAlignment);
    std::size_t bytes = usable + kSlack + alignment + (alignment >= kSb ? kSb : 0);
    LockGuard<SpinLock> guard(poolLock_);
    ++largeClock_;
    purgeIdleLarge();
    void* raw;
    std::size_t blockBytes = bytes;
    std::size_t handedOut = bytes;  // from the block's start: what the object may use up to
    if (CachedLarge* cached = takeCachedLarge(bytes)) {
      raw = cached;
      blockBytes = cached->bytes;
      handedOut = keepResidentForReuse(cached, bytes);
    } else {
      raw = top_.malloc(bytes);
      if (raw == nullptr) return nullptr;
    }
    new (raw) LiveLarge{blockBytes};
    auto rawAddress = reinterpret_cast<std::uintptr_t>(raw);
    std::uintptr_t base, object;
    if (alignment >= kSb) {
      object = alignUp(rawAddress + 16 + kHeaderAreaBytes + kSb, alignment);
      base = object - kSb;
    } else {
      base = alignUp(rawAddress + 16, kSb);
      object = alignUp(reinterpret_cast<std::uintptr_t>(headerAt(base) + 1), alignment);
    }
    auto* sb = newHeader(base);
    sb->freeFlags.store(kLargeBlock, std::memory_order_relaxed);
    sb->topBlock = raw;
    sb->firstObject = reinterpret_cast<char*>(object);
    sb->usableBytes = rawAddress + handedOut - object;
    sb->prev = nullptr;
    sb->next = largeBlocks_;
    if (largeBlocks_) largeBlocks_->prev = sb;
    largeBlocks_ = sb;
    return sb->firstObject;
  }

  // Under poolLock_. How much of a reused block the request gets: all of it, unless that
  // is more than kLargeReuseSlack times the request; then the pages beyond go back to the
  // OS, and a later bigger request faults in only what it uses of them.
  static std::size_t keepResidentForReuse(const CachedLarge* cached, std::size_t bytes) {
    if (cached->bytes / scalable::kLargeReuseSlack <= bytes) return cached->bytes;
    auto start = reinterpret_cast<std::uintptr_t>(cached);
    std::uintptr_t keepEnd = alignUp(start + scalable::kLargeReuseSlack * bytes, scalable::kPageBytes);
    std::uintptr_t residentEnd = (start + cached->residentBytes) & ~(scalable::kPageBytes - 1);
    if (residentEnd > keepEnd) madvise(reinterpret_cast<void*>(keepEnd), residentEnd - keepEnd, MADV_DONTNEED);
    return keepEnd - start < cached->bytes ? keepEnd - start : cached->bytes;
  }

  void freeLarge(Superblock* sb) {
    LockGuard<SpinLock> guard(poolLock_);
    ++largeClock_;
    if (sb->prev) sb->prev->next = sb->next;
    else largeBlocks_ = sb->next;
    if (sb->next) sb->next->prev = sb->prev;
    void* raw = sb->topBlock;
    std::size_t bytes = static_cast<LiveLarge*>(raw)->bytes;
    // Everything handed out may have been written: count it resident.
    std::size_t resident = static_cast<std::size_t>(sb->firstObject + sb->usableBytes - static_cast<char*>(raw));
    if (bytes > scalable::kLargeCacheMaxBlockBytes) {
      top_.free(raw);
    } else {
      if (bytes >= recentLargestFree_ || largeClock_ - recentLargestFreeAt_ > scalable::kLargeCachePurgeDelay) {
        recentLargestFree_ = bytes;
        recentLargestFreeAt_ = largeClock_;
      }
      largeCache_ = new (raw) CachedLarge{largeCache_, bytes, resident, largeClock_};
      largeCacheResidentBytes_ += resident;
      ++largeCacheCount_;
      trimLargeCache();
    }
    purgeIdleLarge();
  }

  std::size_t largeCacheBudget() const {
    std::size_t budget = 2 * recentLargestFree_;
    if (budget < scalable::kLargeCacheMinBytes) return scalable::kLargeCacheMinBytes;
    return budget < scalable::kLargeCacheMaxBytes ? budget : scalable::kLargeCacheMaxBytes;
  }

  // Under poolLock_: the blocks freed longest ago go back until the rest fit the budget.
  void trimLargeCache() {
    while (largeCacheResidentBytes_ > largeCacheBudget() || largeCacheCount_ > scalable::kLargeCacheBlocks) {
      CachedLarge** oldest = &largeCache_;
      while ((*oldest)->next != nullptr) oldest = &(*oldest)->next;
      releaseCachedLarge(oldest);
    }
  }

  // Under poolLock_: blocks idle for longer than the delay go back (the list is newest
  // first, so they are its tail).
  void purgeIdleLarge() {
    CachedLarge** link = &largeCache_;
    while (*link != nullptr && largeClock_ - (*link)->freedAt <= scalable::kLargeCachePurgeDelay) link = &(*link)->next;
    while (*link != nullptr) releaseCachedLarge(link);
  }

  void releaseCachedLarge(CachedLarge** link) { top_.free(unlinkCachedLarge(link)); }

  CachedLarge* unlinkCachedLarge(CachedLarge** link) {
    CachedLarge* cached = *link;
    *link = cached->next;
    largeCacheResidentBytes_ -= cached->residentBytes;
    --largeCacheCount_;
    return cached;
  }

  // Under poolLock_: the smallest cached block of at least `bytes` (the newest of equals),
  // unlinked; or null.
  CachedLarge* takeCachedLarge(std::size_t bytes) {
    CachedLarge** best = nullptr;
    for (CachedLarge** link = &largeCache_; *link != nullptr; link = &(*link)->next) {
      if ((*link)->bytes >= bytes && (best == nullptr || (*link)->bytes < (*best)->bytes)) best = link;
    }
    return best != nullptr ? unlinkCachedLarge(best) : nullptr;
  }

  // ---- hardening ----------------------------------------------------------------------
  // Only with kHardened. A free's pointer is masked to a superblock header; the header's
  // cookie (the secret mixed with its address) tells a real header from whatever a
  // foreign pointer lands on. A small object's start is a whole number of objects from
  // the first, and its second word holds its tag while it is free (double frees). A large
  // block's cookie changes when it is freed, so a second free of a cached block is told
  // from an invalid pointer. The owner's fast path checks only the tag: a header whose
  // free token is this thread's heap's is not a foreign page's (a thread without a heap,
  // zeroed memory and pooled superblocks have tokens that match nothing), and the
  // object-start check (a load, a multiply and a compare more) doubled the cost of
  // hardening on cfrac (+4.3% to +8.7% instructions), so interior pointers freed by the
  // owner are not detected.

  static std::uint32_t liveCookie(const Superblock* sb) { return static_cast<std::uint32_t>(hardening::tagOf(sb)); }
  static constexpr std::uint32_t kFreedLargeCookie = 1;  // xor'ed into the live cookie

  // Objects lie in two runs: the colour gap before the header (from kGapOffset) and from
  // the end of the header to the superblock's end. For offsets within a superblock, the
  // low 32 bits of offset * ceil(2^32 / size) are k * (the rounding error, < size) < 2^16
  // when offset = k * size, and at least 2^32 / size >= 2^17 otherwise: a multiply and a
  // compare instead of a division.
  static bool isObjectStart(const Superblock* sb, const void* pointer) {
    auto* object = static_cast<const char*>(pointer);
    auto* header = reinterpret_cast<const char*>(sb);
    auto* base = reinterpret_cast<const char*>(baseOf(sb));
    const char* start = object < header ? base + kGapOffset : sb->firstObject;
    const char* end = object < header ? header : base + scalable::kSuperblockBytes;
    if (object < start) return false;
    auto offset = static_cast<std::uint64_t>(object - start);
    return offset + sb->objectBytes <= static_cast<std::uint64_t>(end - start) &&
           static_cast<std::uint32_t>(offset * sb->reciprocal) < scalable::kSuperblockBytes;
  }

  // The slow path's header checks; the object's tag is checked once its start is known.
  static void checkHeader(Superblock* sb, void* pointer) {
    std::uint32_t live = liveCookie(sb);
    if (sb->cookie != live) [[unlikely]] {
      if (sb->cookie == (live ^ kFreedLargeCookie) && pointer == sb->firstObject) hardening::doubleFree(pointer);
      hardening::invalidPointer(pointer);
    }
    if (flags(sb) & kLargeBlock) {
      if (pointer != sb->firstObject) [[unlikely]] hardening::invalidPointer(pointer);
      sb->cookie = live ^ kFreedLargeCookie;  // allocLarge writes a new header when it reuses the block
    } else if (!(flags(sb) & kInteriorPointers) && !isObjectStart(sb, pointer)) [[unlikely]] {
      hardening::invalidPointer(pointer);
    }
  }

  const std::uint64_t id_;
  pthread_key_t key_{};
  bool keyOk_ = false;

  mutable SpinLock poolLock_;  // guards top_, the pool, arenas and large blocks
  Top top_;
  Superblock* warmPool_ = nullptr;  // freed superblocks with their pages, last freed first
  Superblock* warmPoolTail_ = nullptr;
  // Changed under poolLock_; read without it as a hint by carveFreshObjects.
  std::atomic<std::size_t> warmCount_ = 0;
  std::size_t unoffsetGrowth_ = 0;  // bytes grown into while warm superblocks stayed resident
  Superblock* coldPool_ = nullptr;  // superblocks whose pages the OS has (or never had)
  std::size_t coldCount_ = 0;
  char* freshNext_ = nullptr;  // the newest arena's superblocks never handed out
  std::size_t freshLeft_ = 0;
  void* arenas_ = nullptr;
  Superblock* largeBlocks_ = nullptr;
  CachedLarge* largeCache_ = nullptr;  // freed large blocks, newest first
  std::size_t largeCacheResidentBytes_ = 0;
  std::size_t largeCacheCount_ = 0;
  std::uint64_t largeClock_ = 0;  // large mallocs and frees so far: the cache's clock
  std::size_t recentLargestFree_ = 0;
  std::uint64_t recentLargestFreeAt_ = 0;

  SpinLock heapsLock_;  // guards the heap registry; taken before poolLock_
  ThreadHeapState* freeHeaps_ = nullptr;
  ThreadHeapState* allHeaps_ = nullptr;
};

}  // namespace heapkit
