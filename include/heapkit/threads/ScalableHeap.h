// ScalableHeap: heapkit's general-purpose multi-threaded allocator (libheapkit.so), in the
// spirit of Hoard (per-thread heaps, ownership per superblock) with mimalloc's free lists
// per superblock. A composition of layers, each in its own header:
//
//   ThreadHeapRegistry                       threads/ThreadHeapRegistry.h: a heap per thread
//                                            (thread-local cache, pthread key, hand-on at exit)
//   SuperblockHeap<ScalableSizeClasses, .., RemoteFrees>   one per thread: small objects
//                                            (combining/SuperblockHeap.h, building/Superblock.h,
//                                            building/SizeClasses.h)
//   OwnedSpanHeap                            one per thread: its medium blocks up to 256 KiB,
//                                            spans of its own segments, with an atomic
//                                            remote-free list (threads/OwnedSpanHeap.h)
//   ScalableSharedLayers<Top>, under one lock  shared by the threads (general/ScalableCoreHeap.h):
//     LargeObjectHeap<                       medium blocks as spans, large blocks cached
//       SuperblockPool<                      empty superblocks, warm then purged
//         AdaptiveThresholdHeap<             freed large blocks, within a budget
//           SegmentHeap<Top>>>>              4 MiB segments, spans of 64 KiB slices,
//                                            delayed purge within a budget
//
// With one thread this is ScalableCoreHeap<ScalableSizeClasses, Top>, but for the medium
// blocks up to 256 KiB, which come from the thread's own segments. Only the registry
// has thread-locals and pthread keys; only Top talks to the OS (it maps, unmaps and purges,
// and counts bytes held and resident).
//
// Which thread runs is a policy, Registry: ThreadHeapRegistry (the thread calling malloc,
// libheapkit.so's) or SelectedThreadHeaps (a thread the caller names with selectThread(),
// threads/SelectedThreadHeaps.h). With the second, the simulator runs this very heap over
// its ArenaHeap and gives each thread of a trace its heap, and a replay on one thread
// does the same over real memory: the same heaps, the same remote frees, the same bytes
// held as the trace's threads running on ThreadHeapRegistry (tests/sim/thread_fidelity_test.cpp).
//
//  - Small objects (36 classes, 16 B to 16 KiB): each thread allocates from superblocks
//    its heap owns, without locks. A block freed by its owner thread goes on the
//    superblock's free list; one freed by another thread on its atomic remote list, and
//    returns to the owner (Hoard's ownership), which collects it when it runs out.
//  - A wholly free superblock goes back to the shared pool, which keeps the 4 MiB freed
//    last with their pages and purges older ones (combining/SuperblockPool.h).
//  - Medium blocks (over 16 KiB) up to ScalableCoreConfig::ownedSpanMaxBytes (256 KiB) are
//    spans of segments the allocating thread owns: its mallocs and frees of them take no
//    lock, another thread's free pushes the block on the owner's atomic remote list (no
//    lock), and the owner takes the list back at its next medium malloc (mimalloc's
//    thread-free list). Larger ones, up to 32 MiB, are spans of the shared segments,
//    reused by any thread after a free by any thread. Both kinds of segments purge free
//    pages after a delay or over a budget that follows the program (building/
//    SegmentHeap.h): no system call per block.
//  - Larger blocks get a block of their own from Top, kept for reuse when freed (up to
//    32 MiB, within twice the biggest freed recently, 4 to 64 MiB; combining/
//    LargeObjectHeap.h, AdaptiveThresholdHeap.h).
//
// Fast paths (inline; everything else is out of line), measured with callgrind against
// mimalloc 2.0.9 (16 instructions per malloc, 26 per free on GCBench):
//  - malloc up to 1 KiB: this thread's heap from the thread-local (checked against the
//    instance's id), the class's current superblock from the heap's direct table, and the
//    head of its free list popped: 19 instructions per call, the wrapper's checks after
//    it (mallocInline). Larger small requests look the class up in a table.
//  - free: masks the address to the superblock header and compares one word, the
//    superblock's free token, with this thread's: equal only when this thread's heap owns
//    the superblock and no flag asks for more. Then the object is pushed: 18 instructions
//    hardened, 15 not, the return counted (freeInline); hardening is the tag's compare,
//    branch and store (the tag is the header's address, already in a register), the
//    alignment check being folded into the token's read.
// No lock and no atomic on either.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <new>
#include <type_traits>

#include "heapkit/building/SizeClasses.h"
#include "heapkit/building/Superblock.h"
#include "heapkit/combining/SuperblockHeap.h"
#include "heapkit/core/Counting.h"
#include "heapkit/core/Hardening.h"
#include "heapkit/core/HeapContract.h"
#include "heapkit/general/ScalableCoreHeap.h"
#include "heapkit/threads/Locks.h"
#include "heapkit/threads/OwnedSpanHeap.h"
#include "heapkit/threads/ThreadHeapRegistry.h"
#include "heapkit/top/MmapHeap.h"

namespace heapkit {

// Classes: any size classes by type (ScalableSizeClasses, FixedSizeClasses<...>). Config: a
// default-constructible ScalableCoreConfig (or a struct derived from it, as `heapkit emit`
// writes a design's values) that a default-constructed heap takes, since the malloc
// replacement constructs its heap with no arguments.
template <Heap Top = MmapHeap, class Classes = ScalableSizeClasses, class Config = ScalableCoreConfig,
          template <class> class Registry = ThreadHeapRegistry>
class ScalableHeap {
  static_assert(std::is_convertible_v<const Config&, const ScalableCoreConfig&>, "Config is a ScalableCoreConfig");
  using Shared = ScalableSharedLayers<Top>;
  static constexpr bool kHardened = hardened<Top>();
  static constexpr std::size_t kSb = superblock::kBytes;

  // The parent of every thread's heap: the shared layers, under the pool lock.
  class SharedRef {
   public:
    static constexpr std::size_t Alignment = kMinAlignment;
    static constexpr bool HardenedAgainstMisuse = kHardened;
    static constexpr bool SecureAgainstMisuse = secure<Top>();
    explicit SharedRef(ScalableHeap* owner) : owner_(owner) {}

    Superblock* takeSuperblock(std::size_t sizeClass, std::size_t objectBytes) {
      LockGuard<AdaptiveMutexLock> guard(owner_->poolLock_);
      return owner_->shared_.takeSuperblock(sizeClass, objectBytes);
    }
    void retire(Superblock* sb, bool leaving) {
      LockGuard<AdaptiveMutexLock> guard(owner_->poolLock_);
      owner_->shared_.retire(sb, leaving);
    }
    void grew(Superblock* sb, char* from, char* to) {
      LockGuard<AdaptiveMutexLock> guard(owner_->poolLock_);
      owner_->shared_.grew(sb, from, to);
    }
    void* mallocLarge(std::size_t size, std::size_t alignment) { return owner_->mallocLarge(size, alignment); }
    void freeLarge(Superblock* sb) { owner_->freeLarge(sb); }
    // Over a counting top (the simulator's), the threads' heaps count their work there.
    WorkCounts& workCounts()
      requires CountingHeap<Top>
    {
      return owner_->top().workCounts();
    }

   private:
    ScalableHeap* owner_;
  };

  using ThreadHeap = SuperblockHeap<Classes, SharedRef, true>;
  using OwnedSpans = OwnedSpanHeap<Top, AdaptiveMutexLock>;

  struct ThreadHeapState : ThreadHeap {
    ThreadHeapState(ScalableHeap* owner, std::uint64_t token)
        : ThreadHeap(owner->classes_, owner), instance(owner), spans(owner->large_, owner->ownedSegments_, owner->top(), owner->poolLock_) {
      ThreadHeap::setFreeToken(token);
    }
    using ThreadHeap::freeToken;
    ScalableHeap* instance;
    OwnedSpans spans;  // this thread's medium blocks (threads/OwnedSpanHeap.h)
    ThreadHeapState* nextFree = nullptr;
    ThreadHeapState* nextAll = nullptr;
    std::uint32_t thread = 0;  // the thread it serves, for SelectedThreadHeaps
  };
  using Threads = Registry<ThreadHeapState>;
  // What a thread's heap takes from Top, whatever the classes' type: room for one that
  // holds its classes by value (SizeClassTable, as the simulator's does), so that a heap
  // with classes by type (libheapkit.so's, an emitted design's) holds the same bytes per
  // thread as the simulator's. At most a page more per thread, never touched.
  static constexpr std::size_t kThreadHeapBytes =
      alignUp(std::max(sizeof(ThreadHeapState), alignUp(sizeof(SuperblockHeap<SizeClassTable, SharedRef, true>) + 64, alignof(OwnedSpans)) + sizeof(OwnedSpans) + 64),
              4096);
  static constexpr std::size_t kDirectBytes = ThreadHeap::kDirectBytes;

 public:
  static constexpr std::size_t Alignment = kMinAlignment;
  // The layers above (HardenedHeap) read Top's hardening level through this heap.
  static constexpr bool HardenedAgainstMisuse = kHardened;
  static constexpr bool SecureAgainstMisuse = secure<Top>();
  // The largest block a thread's own segments serve (threads/OwnedSpanHeap.h).
  static constexpr std::size_t OwnedSpansMaxBytes = OwnedSpans::kMaxBytes;

  ScalableHeap()
    requires std::is_default_constructible_v<Top>
      : ScalableHeap(Config{}) {}
  // `topArgs` construct the top heap (an ArenaHeap's arena and owner).
  template <class... TopArgs>
  explicit ScalableHeap(const ScalableCoreConfig& config, TopArgs&&... topArgs)
      : registry_(&onThreadExit),
        classes_(classesOf(config)),
        large_(config.large),
        ownedSegments_(ownedSegmentsOf(config)),
        ownedMaxBytes_(OwnedSpans::maxBytes(config.large, config.ownedSpanMaxBytes)),
        shared_(config.large, config.pool, config.cache, config.segments, static_cast<TopArgs&&>(topArgs)...) {}
  ScalableHeap(const ScalableHeap&) = delete;
  ScalableHeap& operator=(const ScalableHeap&) = delete;

  // The threads' heaps go back first; the shared layers' destructors return the rest.
  ~ScalableHeap() {
    registry_.forEachHeap([this](ThreadHeapState* heap) {
      heap->~ThreadHeapState();
      top().free(heap);
    });
  }

  // The inline path: this thread's current superblock of the class has a free object.
  void* malloc(std::size_t size) {
    if (size <= kDirectBytes) [[likely]] {
      if (Threads::threadCache.instanceId == registry_.id()) [[likely]]
        return Threads::threadCache.heap->mallocDirect(size);  // never null while the id matches
      return allocSmallWithoutCachedHeap(size);
    }
    if (size <= classes_.maxBytes()) {
      if (Threads::threadCache.instanceId == registry_.id()) [[likely]] return Threads::threadCache.heap->mallocClass(size);
      return allocSmallWithoutCachedHeap(size);
    }
    return mallocLarge(size, kMinAlignment);
  }

  // Any power-of-two alignment; free and getSize accept the pointer it returns.
  void* memalign(std::size_t alignment, std::size_t size) {
    if (!isPowerOfTwo(alignment)) return nullptr;
    if (alignment <= kMinAlignment) return malloc(size);
    // Small objects are 16-aligned: one of size + alignment - 16 bytes holds an aligned one
    // (SuperblockHeap::fitsSmallAligned's rule).
    if (alignment <= superblock::kPageBytes && alignment < classes_.maxBytes() && size <= classes_.maxBytes() - alignment) {
      auto* object = static_cast<char*>(malloc(size + alignment - kMinAlignment));
      if (object == nullptr) return nullptr;
      return Threads::threadCache.heap->alignSmall(object, alignment);  // malloc gave this thread a heap
    }
    return mallocLarge(size, alignment);
  }

  void free(void* pointer) {
    if (pointer == nullptr) return;
    freeInline(pointer, [this](void* other) { freeSlow(other); });
  }

  // The inline paths alone, for a malloc wrapper to run before anything else
  // (src/wrapper: libheapkit.so's malloc and free are these), with `otherwise` for
  // everything they do not take: the wrapper's usual path, its checks, then this heap's
  // slow paths. Reached by a jump, so the inline paths save no register and keep no
  // stack frame. Safe before the heap is constructed, in zeroed static storage: no
  // thread's cache holds id 0 (ThreadHeapRegistry), so neither takes anything then.
  //
  // malloc: 0 < size <= 1 KiB, this thread has a heap of this instance, and the class's
  // current superblock has a free object; otherwise(size) else (size 0 included).
  template <class Otherwise>
  [[gnu::always_inline]] void* mallocInline(std::size_t size, Otherwise otherwise) {
    if (size - 1 < kDirectBytes && Threads::threadCache.instanceId == registry_.id()) [[likely]]
      return Threads::threadCache.heap->mallocDirectOr(size, otherwise);
    return otherwise(size);
  }

  // free: the superblock's free token is this thread's heap's, so this thread owns it and
  // none of its flags asks for more. A large block's header has no token, and a thread
  // without a heap has none, so neither matches; nor does this thread when it last used
  // another instance (its heap there has another token). Reads one word at the start of
  // the 64 KiB-aligned block that holds `pointer` (hardened, up to 15 bytes in: see
  // below), whatever the pointer (null included: it goes to otherwise), and nothing else
  // unless the token matches.
  template <class Otherwise>
  [[gnu::always_inline]] void freeInline(void* pointer, Otherwise otherwise) {
    auto address = reinterpret_cast<std::uintptr_t>(pointer);
    // A superblock's objects start past its slice's head, so only a large block's object
    // starts on a slice boundary (its header is the slice's before), and null does: the
    // slow path.
    if ((address & (kSb - 1)) != 0) [[likely]] {
      // Hardened, an unaligned pointer goes to the slow path too, to be reported, at no
      // instruction of its own: its misalignment stays in the address the slice head's
      // token is read from (the same one instruction masks the slice's base and keeps it),
      // which is then no token's. At 8 bytes in it is the header's address, which is
      // even, where every token is odd; at other offsets, bytes of the token and of that
      // address, which equal this thread's 64-bit token in no head free can reach.
      constexpr std::uintptr_t kKeptBits = kHardened ? kMinAlignment - 1 : 0;
      auto headAddress = address & (~(kSb - 1) | kKeptBits);
      // The builtin reads at any alignment (relaxed, as the owner's stores).
      if (__atomic_load_n(reinterpret_cast<const std::uint64_t*>(headAddress), __ATOMIC_RELAXED) ==
          Threads::threadCache.freeToken) [[likely]] {
        Superblock* sb = reinterpret_cast<SliceHead*>(headAddress)->header;  // aligned: the token matched
        auto* node = static_cast<FreeNode*>(pointer);
        if constexpr (kHardened) {
          // A pointer inside an object (the program's arithmetic gone wrong) is no object's
          // start: checked here by the secure library only (a multiply, two compares: +4%
          // instructions on gcbench, over the default library's 2% budget; the remote and
          // slow paths check it in both). Then Superblock::checkAndTagFreed, the reports
          // reached by a jump (core/Hardening.h).
          if constexpr (SecureAgainstMisuse)
            if (!sb->startsObject(node)) [[unlikely]] return hardening::reportInvalidPointer(node);
          // A tagged object goes to the slow path, which confirms the double free.
          std::uint64_t tag = Superblock::freedTag(node, sb);
          if (hardening::secondWord(node) == tag) [[unlikely]] return otherwise(pointer);
          hardening::secondWord(node) = tag;
        }
        sb->template fillFreed<SecureAgainstMisuse>(node);
        if (sb->pushFreed(*this, node)) [[unlikely]] static_cast<ThreadHeap*>(sb->owner)->onLocalSuperblockEmpty(sb);
        return;
      }
    }
    return otherwise(pointer);
  }

  // The rest of a free that freeInline passed to `otherwise` (`pointer` not null): the
  // slow path at once, without the inline path's owner check again (a remote free, the
  // commonest such free, would fail it twice). Hardened, it checks the pointer's
  // alignment itself, as free does.
  void freeAfterInline(void* pointer) { freeSlow(pointer); }

  std::size_t getSize(void* pointer) const { return Superblock::of(pointer)->usableFrom(*this, pointer); }
  // calloc's clearing (wrapper/ANSIWrapper.h): the bytes of an object just handed out that
  // may hold old data; a fresh span's pages read as zero (Superblock::bytesToClear), when
  // Top's do (without, calloc clears every byte).
  std::size_t bytesToClear(void* pointer, std::size_t bytes) const
    requires PagesReadZeroHeap<Top>
  {
    return Superblock::of(pointer)->bytesToClear(pointer, bytes);
  }
  // Hardened: what a freed small object holds in its second word (a layer above may find it there).
  static std::uint64_t freedTag(const void* object) { return Superblock::freedTag(object); }

  std::size_t bytesHeld() const { return locked(&Shared::bytesHeld); }
  std::size_t peakBytesHeld() const { return locked(&Shared::peakBytesHeld); }
  std::size_t residentBytes() const { return locked(&Shared::residentBytes); }
  std::size_t peakResidentBytes() const { return locked(&Shared::peakResidentBytes); }

  // Fork: the registry and the pool are the only locks. In the child, the heaps of
  // threads that do not exist there are never handed on; their blocks can still be freed.
  void prepareFork() {
    registry_.prepareFork();
    poolLock_.lock();
  }
  void parentAfterFork() {
    poolLock_.unlock();
    registry_.parentAfterFork();
  }
  void childAfterFork() {
    poolLock_.reset();
    registry_.childAfterFork();
  }

  // The heap of trace thread `thread` serves the calls from now on (SelectedThreadHeaps).
  void selectThread(std::uint32_t thread)
    requires requires(Threads& threads, std::uint32_t index) { threads.select(index); }
  {
    registry_.select(thread);
  }

  // Work and metadata accesses, over a counting top (the simulator's).
  WorkCounts& workCounts()
    requires CountingHeap<Top>
  {
    return top().workCounts();
  }

  // Gives this thread's heap to the next new thread now (tests; the key does it at exit).
  void releaseThisThreadsHeap() {
    ThreadHeapState* heap = myHeap(false);
    if (heap == nullptr) return;
    registry_.forgetThisThread();
    releaseHeap(heap);
  }

  // Freed large blocks kept for reuse: their bytes and their number (tests).
  std::size_t largeCacheBytes() const { return locked(&Shared::cachedBytes); }
  std::size_t largeCacheBlocks() const { return locked(&Shared::cachedObjects); }
  // Superblocks free to hand out (tests: thread exit and frees give them back), and the
  // segments they are cut from.
  std::size_t pooledSuperblocks() const { return locked(&Shared::pooledSuperblocks); }
  std::size_t segments() const { return locked(&Shared::segmentCount); }
  // The largest block a thread's own segments serve with this configuration.
  std::size_t ownedSpanMaxBytes() const { return ownedMaxBytes_; }
  // This thread's medium blocks' segments, and the slices of them not in use (tests).
  std::size_t ownedSpanSegments() {
    ThreadHeapState* heap = myHeap(false);
    return heap == nullptr ? 0 : heap->spans.segments();
  }
  std::size_t ownedFreeSlices() {
    ThreadHeapState* heap = myHeap(false);
    return heap == nullptr ? 0 : heap->spans.freeSlices();
  }
  // Blocks of this thread's segments freed by other threads, not yet taken back (tests).
  bool ownedRemoteFreesWaiting() {
    ThreadHeapState* heap = myHeap(false);
    return heap != nullptr && heap->spans.hasRemoteFrees();
  }
  // Resident bytes of free spans kept for reuse (tests).
  std::size_t residentFreeBytes() const { return locked(&Shared::residentFreeBytes); }

 private:
  friend class SharedRef;

  // A figure of the shared layers, read under the pool lock.
  std::size_t locked(std::size_t (Shared::*figure)() const) const {
    LockGuard<AdaptiveMutexLock> guard(poolLock_);
    return (shared_.*figure)();
  }

  Top& top() { return static_cast<Top&>(shared_); }

  // A thread's own segments keep at least ownedMinResidentFreeBytes of free pages (the
  // shared segments' minimum, once per thread, held more than the rest of the heap).
  static SegmentConfig ownedSegmentsOf(const ScalableCoreConfig& config) {
    SegmentConfig segments = config.segments;
    segments.minResidentFreeBytes = config.ownedMinResidentFreeBytes;
    return segments;
  }

  static Classes classesOf(const ScalableCoreConfig& config) {
    if constexpr (std::is_same_v<Classes, SizeClassTable>) return config.classes;
    else return Classes{};
  }

  ThreadHeapState* myHeap(bool create) {
    return registry_.myHeap(create, [this]() -> ThreadHeapState* {
      void* memory;
      {
        LockGuard<AdaptiveMutexLock> guard(poolLock_);
        memory = top().malloc(kThreadHeapBytes);
      }
      if (memory == nullptr) return nullptr;
      return new (memory) ThreadHeapState(this, Threads::newFreeToken());
    });
  }

  static void onThreadExit(void* value) {
    auto* heap = static_cast<ThreadHeapState*>(value);
    heap->instance->releaseHeap(heap);
  }

  void releaseHeap(ThreadHeapState* heap) {
    Threads::uncache(heap);
    heap->spans.collectRemote();
    heap->releaseEmptySuperblocks();
    registry_.release(heap);
  }

  // First call of this thread, or the thread last used another instance.
  [[gnu::noinline]] void* allocSmallWithoutCachedHeap(std::size_t size) {
    ThreadHeapState* heap = myHeap(true);
    if (heap == nullptr) return nullptr;
    return heap->allocSmallSlow(size);
  }

  // Medium blocks: from this thread's own segments, without the pool lock
  // (threads/OwnedSpanHeap.h); larger or aligned ones from the shared layers.
  [[gnu::noinline]] void* mallocLarge(std::size_t size, std::size_t alignment) {
    if (alignment <= kMinAlignment && size <= ownedMaxBytes_) {
      ThreadHeapState* heap = Threads::threadCache.instanceId == registry_.id() ? Threads::threadCache.heap : myHeap(true);
      if (heap != nullptr) return heap->spans.malloc(size);
    }
    LockGuard<AdaptiveMutexLock> guard(poolLock_);
    return shared_.mallocLarge(size, alignment);
  }
  // A block of a thread's segments goes back to them: at once by that thread, else through
  // its heap's remote list (no lock either way).
  [[gnu::noinline]] void freeLarge(Superblock* sb) {
    if (auto* owner = static_cast<OwnedSpans*>(loadMetadata(*this, sb->owner))) {
      ThreadHeapState* heap = Threads::threadCache.instanceId == registry_.id() ? Threads::threadCache.heap : nullptr;
      if (heap != nullptr && &heap->spans == owner) owner->freeOwned(sb);
      else owner->freeRemote(sb);
      return;
    }
    LockGuard<AdaptiveMutexLock> guard(poolLock_);
    shared_.freeLarge(sb);
  }

  // Every free the inline path did not take, of a non-null pointer. Another thread's free
  // of a small object (prodcons: every free) runs straight through: the header's checks
  // with the flags read once, then the CAS onto the superblock's remote list; the owner's
  // and the large blocks' frees are calls of their own, so that this path saves no
  // register.
  [[gnu::noinline]] void freeSlow(void* pointer) {
    if constexpr (kHardened) {
      if (reinterpret_cast<std::uintptr_t>(pointer) % kMinAlignment != 0) return hardening::reportInvalidPointer(pointer);
    }
    Superblock* sb = kHardened ? Superblock::checkedOf(pointer) : Superblock::of(pointer);
    std::uint32_t flags = kHardened ? sb->checkHeader(*this, pointer) : sb->flags(*this);
    if (flags & superblock::kLargeBlock) return freeLarge(sb);
    auto* node = static_cast<FreeNode*>(flags & superblock::kInteriorPointers ? sb->objectStart(*this, pointer) : pointer);
    // Only the thread-local cache, not the pthread key: a thread that frees but never
    // allocates (a consumer) would look its missing heap up on every free. A thread whose
    // cache names another instance's heap frees through the remote list, which its own
    // heap collects like any other thread's frees.
    ThreadHeapState* heap = Threads::threadCache.instanceId == registry_.id() ? Threads::threadCache.heap : nullptr;
    if (heap != nullptr && sb->owner == static_cast<void*>(static_cast<ThreadHeap*>(heap))) return freeOwnedSlow(heap, sb, node);
    if constexpr (kHardened) {
      // Superblock::checkAndTagFreed, its rare case (the tag found: a double free to
      // confirm) a call of its own too.
      std::uint64_t tag = Superblock::freedTag(node, sb);
      if (hardening::secondWord(node) == tag) [[unlikely]] return freeRemoteTagged(sb, node);
      hardening::secondWord(node) = tag;
    }
    pushRemoteFree(sb, node);
  }
  [[gnu::always_inline]] static void pushRemoteFree(Superblock* sb, FreeNode* node) {
    sb->template fillFreed<SecureAgainstMisuse>(node);
    if (sb->pushRemote(node)) {
      // Claimed: the superblock is pinned in its owner's full list until the owner pops it.
      static_cast<ThreadHeap*>(sb->owner)->pushReactivated(sb);
    }
  }
  [[gnu::noinline]] static void freeRemoteTagged(Superblock* sb, FreeNode* node) {
    if (sb->checkAndTagFreed(node, false)) pushRemoteFree(sb, node);
  }
  // The owner's free that its inline path left: a flag set on the superblock, or a
  // freed object's tag found (a double free to confirm).
  [[gnu::noinline]] void freeOwnedSlow(ThreadHeapState* heap, Superblock* sb, FreeNode* node) {
    if constexpr (kHardened) {
      if (!sb->checkAndTagFreed(node, true)) return;
    }
    sb->template fillFreed<SecureAgainstMisuse>(node);
    heap->freeOwned(sb, node);
  }

  Threads registry_;
  Classes classes_;
  LargeObjectConfig large_;      // every thread's own segments' (threads/OwnedSpanHeap.h)
  SegmentConfig ownedSegments_;
  std::size_t ownedMaxBytes_;
  mutable AdaptiveMutexLock poolLock_;  // guards shared_; taken after the registry's lock
  Shared shared_;
};

}  // namespace heapkit
