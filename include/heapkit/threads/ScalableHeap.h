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
//    zeroed ones.
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
// Fast paths (inline; everything else is out of line): malloc finds the class in a table,
// reads this thread's heap from an initial-exec thread-local and pops the head of its
// current superblock's free list; free masks the address to the superblock header and,
// when this thread owns it and the header's one flag word is clear, pushes the object.
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
    // Set when the superblock is (re)initialised, then (except freeFlags) only read.
    ThreadHeapState* owner;
    char* firstObject;
    std::uint64_t reciprocal;  // ceil(2^32 / objectBytes): object index without a division
    std::uint32_t objectBytes;
    std::uint32_t sizeClass;
    // Here, not with the owner's data: every free reads it, and a remote free that read
    // the owner's cache line would take it away from the owner. Changes rarely (a
    // superblock entering or leaving the full list, memalign). Only the owner writes it,
    // so relaxed loads and stores suffice (plain moves), and no read-modify-write.
    std::atomic<std::uint32_t> freeFlags;
    // Hardened: tells a header from anything else a masked pointer may land on.
    std::uint32_t cookie = kHardened ? liveCookie(this) : 0;
    char* lastStart;  // last address where a whole object still fits
    void* topBlock;   // large blocks: what Top gave
    std::size_t usableBytes;
    // Written by the owning thread (or under the pool lock).
    alignas(64) Superblock* prev;
    Superblock* next;
    FreeNode* freeList;
    char* bump;
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
  }
  static void clearFlag(Superblock* sb, std::uint32_t flag) {
    sb->freeFlags.store(flags(sb) & ~flag, std::memory_order_relaxed);
  }

  // Headers at one offset in every superblock would all fall in the same cache sets
  // (64 KiB apart), and with a few dozen superblocks in use they would evict each other
  // on every malloc and free. Each superblock's header sits at one of 16 offsets, chosen
  // by the superblock's address, so it is still found from any object's address.
  // 256 bytes apart (not 192), so finding the header is a shift, a mask and an or.
  static constexpr std::size_t kColors = 16;
  static constexpr std::size_t kColorStride = 256;
  static constexpr std::size_t kHeaderAreaBytes = kColors * kColorStride;  // 4 KiB
  static_assert(sizeof(Superblock) <= kColorStride && scalable::kSuperblockBytes / kColors >= kColorStride);
  static_assert(kHeaderAreaBytes <= scalable::kPageBytes);

  struct ClassState {
    Superblock* partial = nullptr;  // head = current superblock
    Superblock* partialTail = nullptr;
    Superblock* full = nullptr;
  };

  struct ThreadHeapState {
    ClassState classes[scalable::kNumClasses];
    std::atomic<Superblock*> reactivated{nullptr};
    ScalableHeap* instance;
    ThreadHeapState* nextFree = nullptr;
    ThreadHeapState* nextAll = nullptr;
  };

  struct ThreadCache {
    std::uint64_t instanceId;
    ThreadHeapState* heap;
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
    if (threadCache.instanceId == id_) threadCache = {0, nullptr};
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
    if (size <= scalable::kMaxSmallBytes) [[likely]] {
      if (threadCache.instanceId == id_) [[likely]] {
        ThreadHeapState* heap = threadCache.heap;  // never null while the id matches
        std::size_t sizeClass = scalable::sizeToClass(size);
        Superblock* sb = heap->classes[sizeClass].partial;
        if (sb != nullptr) [[likely]] {
          if (FreeNode* node = sb->freeList) [[likely]] {
            sb->freeList = node->next;
            ++sb->used;
            if constexpr (kHardened) hardening::untagAllocated(node);
            return node;
          }
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

  // The fast path: this thread owns the superblock and none of its flags asks for more.
  // A large block has a flag, and no owner, so a thread without a heap never matches.
  void free(void* pointer) {
    if (pointer == nullptr) return;
    Superblock* sb = superblockOf(pointer);
    ThreadHeapState* heap = cachedHeap();
    if (sb->owner == heap && flags(sb) == 0) [[likely]] {
      auto* node = static_cast<FreeNode*>(pointer);
      if constexpr (kHardened) checkOwnFree(heap, sb, node);
      node->next = sb->freeList;
      sb->freeList = node;
      if (--sb->used == 0) [[unlikely]] onLocalSuperblockEmpty(heap, sb);
      return;
    }
    freeSlow(sb, pointer);
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
  static inline constinit thread_local ThreadCache threadCache{0, nullptr};

  static std::atomic<std::uint64_t>& nextInstanceId() {
    static constinit std::atomic<std::uint64_t> next{1};
    return next;
  }

  // This thread's heap of this instance when the thread used this instance last.
  ThreadHeapState* cachedHeap() const { return threadCache.instanceId == id_ ? threadCache.heap : nullptr; }

  ThreadHeapState* myHeap(bool create) {
    if (threadCache.instanceId == id_) return threadCache.heap;
    auto* heap = keyOk_ ? static_cast<ThreadHeapState*>(pthread_getspecific(key_)) : nullptr;
    if (heap == nullptr) {
      if (!create) return nullptr;
      heap = acquireHeap();
      if (heap == nullptr) return nullptr;
      threadCache = {id_, heap};
      // Set after the cache: pthread_setspecific may itself call malloc (keys >= 32).
      if (keyOk_) pthread_setspecific(key_, heap);
    }
    threadCache = {id_, heap};
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
    if (threadCache.heap == heap) threadCache = {0, nullptr};
    // Superblocks that are wholly free go back to the pool now; the rest travel with the
    // heap to the next thread, and remote frees keep reaching them meanwhile.
    for (std::size_t c = 0; c < scalable::kNumClasses; ++c) {
      Superblock* sb = heap->classes[c].partial;
      while (sb != nullptr) {
        Superblock* next = sb->next;
        collectRemote(sb);
        if (sb->used == 0) {
          unlinkPartial(heap->classes[c], sb);
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
  static std::uintptr_t baseOf(const Superblock* sb) {
    return reinterpret_cast<std::uintptr_t>(sb) & ~(scalable::kSuperblockBytes - 1);
  }

  static Superblock* superblockOf(void* pointer) {
    auto address = reinterpret_cast<std::uintptr_t>(pointer);
    auto base = address & ~(scalable::kSuperblockBytes - 1);
    // Only a large block aligned to a superblock boundary starts there (a superblock
    // begins with its header area): its header sits one superblock below.
    if (base == address) base -= scalable::kSuperblockBytes;
    return headerAt(base);
  }

  // The start of the object holding `pointer` (memalign hands out interior pointers).
  static void* objectStart(Superblock* sb, void* pointer) {
    auto offset = static_cast<std::uint64_t>(static_cast<char*>(pointer) - sb->firstObject);
    std::uint64_t index = (offset * sb->reciprocal) >> 32;
    return sb->firstObject + index * sb->objectBytes;
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
      if (!moveToFull(cls, sb)) {  // a remote free arrived meanwhile: use it
        collectRemote(sb);
        if (void* object = takeFrom(sb)) return object;
      }
    }
    Superblock* sb = newSuperblock(heap, sizeClass);
    if (sb == nullptr) return nullptr;
    pushPartialFront(cls, sb);
    return takeFrom(sb);
  }

  static void* takeFrom(Superblock* sb) {
    if (sb->freeList == nullptr && !carveFreshObjects(sb)) return nullptr;
    FreeNode* node = sb->freeList;
    sb->freeList = node->next;
    ++sb->used;
    if constexpr (kHardened) hardening::untagAllocated(node);
    return node;
  }

  // Threads the never-used objects that start in the page the bump pointer is in (at
  // least one) onto the empty free list, so that the inline fast path serves the next
  // ones. Writing their links touches only that page: RSS still grows with use.
  static bool carveFreshObjects(Superblock* sb) {
    if (sb->bump > sb->lastStart) return false;
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
    return true;
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
  bool moveToFull(ClassState& cls, Superblock* sb) {
    sb->inFullList.store(1, std::memory_order_seq_cst);
    if (sb->remoteFree.load(std::memory_order_seq_cst) != nullptr) {
      std::uint32_t expected = 1;
      if (sb->inFullList.compare_exchange_strong(expected, 0, std::memory_order_seq_cst)) return false;
      // A remote freer claimed it: it will be on `reactivated` shortly; park it in full.
    }
    unlinkPartial(cls, sb);
    setFlag(sb, kInFullList);
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
      moveFullToPartial(heap->classes[sb->sizeClass], sb);
      sb = next;
    }
  }

  static void unlinkFull(ClassState& cls, Superblock* sb) {
    if (sb->prev) sb->prev->next = sb->next;
    else cls.full = sb->next;
    if (sb->next) sb->next->prev = sb->prev;
  }

  static void unlinkPartial(ClassState& cls, Superblock* sb) {
    if (sb->prev) sb->prev->next = sb->next;
    else cls.partial = sb->next;
    if (sb->next) sb->next->prev = sb->prev;
    else cls.partialTail = sb->prev;
  }

  static void pushPartialFront(ClassState& cls, Superblock* sb) {
    clearFlag(sb, kInFullList);
    sb->prev = nullptr;
    sb->next = cls.partial;
    if (cls.partial) cls.partial->prev = sb;
    else cls.partialTail = sb;
    cls.partial = sb;
  }

  // Behind the current superblock, so the current one stays in use.
  static void pushPartialBack(ClassState& cls, Superblock* sb) {
    clearFlag(sb, kInFullList);
    sb->next = nullptr;
    sb->prev = cls.partialTail;
    if (cls.partialTail) cls.partialTail->next = sb;
    else cls.partial = sb;
    cls.partialTail = sb;
  }

  static void moveFullToPartial(ClassState& cls, Superblock* sb) {
    unlinkFull(cls, sb);
    pushPartialBack(cls, sb);
  }

  [[gnu::noinline]] void freeSlow(Superblock* sb, void* pointer) {
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
  [[gnu::noinline]] void onLocalSuperblockEmpty(ThreadHeapState* heap, Superblock* sb) {
    ClassState& cls = heap->classes[sb->sizeClass];
    if (sb != cls.partial) {
      unlinkPartial(cls, sb);
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
      moveFullToPartial(cls, sb);
    }
    if (sb->used == 0 && sb != cls.partial) {
      unlinkPartial(cls, sb);
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

  // Warm superblocks first (their pages are resident), then ones whose pages were given
  // back, then the untouched rest of the newest arena.
  Superblock* newSuperblock(ThreadHeapState* heap, std::size_t sizeClass) {
    Superblock* sb;
    {
      LockGuard<SpinLock> guard(poolLock_);
      if (warmPool_ != nullptr) {
        sb = warmPool_;
        warmPool_ = sb->next;
        if (warmPool_ != nullptr) warmPool_->prev = nullptr;
        else warmPoolTail_ = nullptr;
        --warmCount_;
      } else if (coldPool_ != nullptr) {
        sb = coldPool_;
        coldPool_ = sb->next;
        --coldCount_;
      } else {
        if (freshLeft_ == 0 && !addArena()) return nullptr;
        // Its header is written only now: an arena's unused superblocks cost no pages.
        sb = new (headerAt(reinterpret_cast<std::uintptr_t>(freshNext_))) Superblock();
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
    sb->bump = sb->firstObject;
    sb->lastStart = base + scalable::kSuperblockBytes - objectBytes;
    sb->objectBytes = objectBytes;
    sb->reciprocal = ((std::uint64_t{1} << 32) + objectBytes - 1) / objectBytes;
    sb->sizeClass = static_cast<std::uint32_t>(sizeClass);
    sb->used = 0;
    sb->freeFlags.store(0, std::memory_order_relaxed);
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
    LockGuard<SpinLock> guard(poolLock_);
    sb->prev = nullptr;
    sb->next = warmPool_;
    if (warmPool_ != nullptr) warmPool_->prev = sb;
    else warmPoolTail_ = sb;
    warmPool_ = sb;
    if (++warmCount_ <= scalable::kCommittedPoolSuperblocks) return;
    // The superblock freed longest ago loses its pages: the ones freed last are the
    // likeliest to be needed again, and giving those back would only fault them in anew.
    Superblock* oldest = warmPoolTail_;
    warmPoolTail_ = oldest->prev;
    warmPoolTail_->next = nullptr;
    --warmCount_;
    // Keep the header page (it links the pool); give the rest of the pages back.
    madvise(reinterpret_cast<char*>(baseOf(oldest)) + scalable::kPageBytes,
            scalable::kSuperblockBytes - scalable::kPageBytes, MADV_DONTNEED);
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
    auto* sb = new (headerAt(base)) Superblock();
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

  void releaseCachedLarge(CachedLarge** link) {
    CachedLarge* cached = *link;
    *link = cached->next;
    largeCacheResidentBytes_ -= cached->residentBytes;
    --largeCacheCount_;
    top_.free(cached);
  }

  // Under poolLock_: the smallest cached block of at least `bytes` (the newest of equals),
  // unlinked; or null.
  CachedLarge* takeCachedLarge(std::size_t bytes) {
    CachedLarge** best = nullptr;
    for (CachedLarge** link = &largeCache_; *link != nullptr; link = &(*link)->next) {
      if ((*link)->bytes >= bytes && (best == nullptr || (*link)->bytes < (*best)->bytes)) best = link;
    }
    if (best == nullptr) return nullptr;
    CachedLarge* cached = *best;
    *best = cached->next;
    largeCacheResidentBytes_ -= cached->residentBytes;
    --largeCacheCount_;
    return cached;
  }

  // ---- hardening ----------------------------------------------------------------------
  // Only with kHardened. A free's pointer is masked to a superblock header; the header's
  // cookie (the secret mixed with its address) tells a real header from whatever a
  // foreign pointer lands on. A small object's start is a whole number of objects from
  // the first, and its second word holds its tag while it is free (double frees). A large
  // block's cookie changes when it is freed, so a second free of a cached block is told
  // from an invalid pointer. The owner's fast path checks only the tag: a header
  // whose first word is this thread's heap is not a foreign page's; and the object-start
  // check is too dear there (see checkOwnFree).

  static std::uint32_t liveCookie(const Superblock* sb) { return static_cast<std::uint32_t>(hardening::tagOf(sb)); }
  static constexpr std::uint32_t kFreedLargeCookie = 1;  // xor'ed into the live cookie

  // For offsets within a superblock, the low 32 bits of offset * ceil(2^32 / size) are
  // k * (the rounding error, < size) < 2^16 when offset = k * size, and at least
  // 2^32 / size >= 2^17 otherwise: a multiply and a compare instead of a division.
  static bool isObjectStart(const Superblock* sb, const void* pointer) {
    auto offset = static_cast<std::uint64_t>(static_cast<const char*>(pointer) - sb->firstObject);
    return offset <= static_cast<std::uint64_t>(sb->lastStart - sb->firstObject) &&
           static_cast<std::uint32_t>(offset * sb->reciprocal) < scalable::kSuperblockBytes;
  }

  // The owner's fast path checks the tag only: the object-start check there (a load, a
  // multiply and a compare more) doubled the cost of hardening on cfrac (+4.3% to +8.7%
  // instructions), so interior pointers freed by the owner are not detected.
  // A thread without a heap matches a header whose owner is null: zeroed memory a foreign
  // pointer masks to, or a superblock back in the pool. Neither is a valid free.
  static void checkOwnFree(const ThreadHeapState* heap, Superblock* sb, FreeNode* node) {
    if (heap == nullptr) [[unlikely]] rejectFreeWithoutOwner(sb, node);
    hardening::checkAndTagFreed(node);
  }
  [[noreturn, gnu::cold, gnu::noinline]] static void rejectFreeWithoutOwner(Superblock* sb, FreeNode* node) {
    checkHeader(sb, node);
    hardening::checkNotFreed(node);
    hardening::invalidPointer(node);
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
  std::size_t warmCount_ = 0;
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
