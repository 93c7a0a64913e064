// Superblock: a 64 KiB page of objects of one size class (mimalloc's page, Hoard's
// superblock), and the operations on one: its header found from any object's address by
// masking, its free list, lazy carving of fresh objects, the list of blocks other threads
// freed, and the hardening checks of a header. Not a heap by itself: SuperblockHeap
// (combining/) keeps superblocks per size class, SuperblockPool hands them out, and the
// large-object path (combining/LargeObjectHeap.h) gives every medium or large block the
// same kind of header, so that free finds any pointer's header the same way.
//
// Every operation takes the heap it counts against (core/Counting.h): over a counting top
// heap (the simulator's) each metadata word it reads or writes is counted, one step per
// loop iteration; over real memory they are plain loads and stores.
//
// Where the header is (mimalloc's page info in its segment): outside the superblock, in
// a slot of the 4 MiB-aligned region that holds it. A region is 64 slices of 64 KiB; its
// first slice is metadata (building/SegmentHeap.h: the segment, then the slots), and the
// header of slice i is slot i, 128 bytes at i * 128 from the region's start (mimalloc's
// page descriptors in the segment's first page: the 64 slots take two pages, the
// segment's slice entries a third):
//   region: [segment | slot 1 | ... | slot 63 | slice entries ...][slice 1]...[slice 63]
//   slot of an address = (address & ~(4 MiB - 1)) | ((address >> 9) & 0x1F80)
// A slice keeps only its first 16 bytes, its head: the free token and the header's
// address. free reads the head of the 64 KiB block a pointer lies in (a foreign pointer's
// block is as likely mapped as before; a region's start often is not), and only when the
// token is the heap's, the header. So a superblock holds objects from 16 bytes in to its
// end: a class of 4,368 bytes gets 15 objects (a header inside left room for 14).
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <new>

#include "heapkit/core/Counting.h"
#include "heapkit/core/Hardening.h"
#include "heapkit/core/HeapContract.h"

namespace heapkit {

namespace superblock {
// Small enough that a class's superblocks empty (and serve other classes) while the
// program runs: with 256 KiB, espresso's peak RSS was 1.27x glibc's, with 64 KiB 1.14x.
inline constexpr std::size_t kBytes = 64 * 1024;
inline constexpr std::size_t kPageBytes = 4096;
// The region whose first slice holds the headers of its slices (building/SegmentHeap.h
// aligns its segments to it).
inline constexpr std::size_t kRegionBytes = 4 * 1024 * 1024;
inline constexpr std::size_t kRegionSlices = kRegionBytes / kBytes;  // 64, slot 0 the segment's
// A header's bytes, so that finding the header is a shift, a mask and an or.
inline constexpr std::size_t kSlotBytes = 128;
inline constexpr std::size_t kSlotsBytes = kRegionSlices * kSlotBytes;  // 8 KiB, 2 pages

// Bits of Superblock::freeFlags. A free in a superblock with none of them set is the fast
// path: an owner comparison and this one word decide it.
inline constexpr std::uint32_t kLargeBlock = 1;        // the header of a medium or large block
inline constexpr std::uint32_t kInteriorPointers = 2;  // memalign handed out pointers inside objects
inline constexpr std::uint32_t kInFullList = 4;        // a free must follow the full-superblock protocol

// A superblock's free token while a flag is set or no heap owns it: no heap has it.
inline constexpr std::uint64_t kClosedFreeToken = 0;
inline constexpr std::uint32_t kFreedLargeCookie = 1;  // xor'ed into a freed large block's cookie
}  // namespace superblock

struct FreeNode {
  FreeNode* next;
};

struct Superblock;

// The first 16 bytes of a superblock or of a block's first slice: what free's inline path
// reads. Only the owner writes them (relaxed: plain moves).
struct SliceHead {
  // The owner heap's token while none of the header's freeFlags is set, else
  // kClosedFreeToken.
  std::atomic<std::uint64_t> freeToken;
  Superblock* header;
};
static_assert(sizeof(SliceHead) == kMinAlignment);

// Two cache lines, 128 bytes, so that a segment's 64 header slots take two pages (at three
// lines in 256-byte slots they took four, and sqlite3's full segments held 8 KiB more
// each). The owner's allocations and frees write only the first line; frees by other
// threads read the second (the checks, the flags, the object geometry) and write its
// remote list, so they never fight with the owner's fast path.
struct alignas(64) Superblock {
  // Written by the owning heap (or under the pool's lock).
  FreeNode* freeList;
  std::uint32_t used;       // handed out and not yet back on freeList
  std::uint32_t sizeClass;  // a medium or large block: where it came from (see LargeObjectHeap)
  char* bump;
  char* lastStart;     // last address in the bump pointer's region where a whole object fits
  char* residentEnd;   // pages below it are in use (reused from the top heap) and not purged;
                       // a large block: its old data's end (bytesToClear)
  Superblock* prev;
  Superblock* next;
  std::uint64_t ownerToken;  // the owner heap's free token
  // Set when the superblock is (re)formatted, then (except the flags) only read; and the
  // words other threads write.
  alignas(64) void* owner;  // the heap whose class lists hold it (combining/SuperblockHeap.h)
  char* firstObject;
  void* block;  // medium and large blocks: where the block came from (see LargeObjectHeap)
  std::size_t usableBytes;
  std::atomic<FreeNode*> remoteFree;
  Superblock* nextReactivated;
  std::uint32_t reciprocal;  // ceil(2^32 / objectBytes) (objects of 16 bytes or more): object index without a division
  std::uint32_t objectBytes;
  // Hardened: tells a header from anything else a masked pointer may land on (0 in the
  // constant-initialised sentinel, which no free reaches).
  std::uint32_t cookie = 0;
  // Changes rarely (a superblock entering or leaving the full list, memalign). Only the
  // owner writes it, so relaxed loads and stores suffice, and no read-modify-write.
  std::atomic<std::uint16_t> freeFlags;
  std::atomic<std::uint16_t> inFullList;

  // ---- finding a header --------------------------------------------------------------

  // The header of the slice holding `address` (any address in it).
  static Superblock* headerAt(std::uintptr_t address) {
    using namespace superblock;
    constexpr std::size_t kShift = std::countr_zero(kBytes) - std::countr_zero(kSlotBytes);
    return reinterpret_cast<Superblock*>((address & ~(kRegionBytes - 1)) |
                                         ((address >> kShift) & ((kRegionSlices - 1) * kSlotBytes)));
  }
  // The start of the slice whose header this is.
  static std::uintptr_t baseOf(const Superblock* sb) {
    using namespace superblock;
    constexpr std::size_t kShift = std::countr_zero(kBytes) - std::countr_zero(kSlotBytes);
    auto slot = reinterpret_cast<std::uintptr_t>(sb);
    return (slot & ~(kRegionBytes - 1)) | ((slot & (kSlotsBytes - 1)) << kShift);
  }
  // The head of the slice holding `address`.
  static SliceHead* headAt(std::uintptr_t address) {
    return reinterpret_cast<SliceHead*>(address & ~(superblock::kBytes - 1));
  }
  SliceHead* head() const { return headAt(baseOf(this)); }
  // The header of the superblock or block holding `pointer`, which is an object's start.
  // Only a block aligned to 64 KiB or more starts a slice (objects start 16 bytes in at
  // least): its header is the slice's before, and free's inline path leaves such
  // pointers to this.
  static Superblock* of(const void* pointer) {
    auto address = reinterpret_cast<std::uintptr_t>(pointer);
    return headerAt(address - ((address & (superblock::kBytes - 1)) == 0));
  }
  // Superblock::of for a pointer that may be foreign (hardened frees): the slice's head,
  // in the 64 KiB block the pointer lies in, must name the header's slot before the slot
  // (in a region's first 16 KiB, often unmapped for a foreign pointer) is read.
  static Superblock* checkedOf(const void* pointer) {
    auto address = reinterpret_cast<std::uintptr_t>(pointer);
    address -= (address & (superblock::kBytes - 1)) == 0;
    Superblock* header = headerAt(address);
    if (headAt(address)->header != header) [[unlikely]] hardening::invalidPointer(pointer);
    return header;
  }
  // A fresh header for the superblock (or block) holding `address`, in its slot (whose
  // page the segments made resident), and the slice's head (in its first page, which the
  // caller made resident): the fields other than these are zero until it is formatted.
  template <bool Hardened, class H>
  static Superblock* create(H& heap, std::uintptr_t address) {
    auto* sb = new (headerAt(address)) Superblock();
    SliceHead* head = headAt(address);
    storeMetadata(heap, head->freeToken, superblock::kClosedFreeToken);
    storeMetadata(heap, head->header, sb);
    if constexpr (Hardened) storeMetadata(heap, sb->cookie, liveCookie(sb));
    return sb;
  }

  // ---- formatting for a size class ---------------------------------------------------

  // Makes the superblock serve objects of `objectBytes` for `owner`, from its head's end.
  template <class H>
  void format(H& heap, void* ownerHeap, std::uint64_t token, std::size_t sizeClassIndex, std::size_t objectSize) {
    auto objectBytesValue = static_cast<std::uint32_t>(objectSize);
    char* base = reinterpret_cast<char*>(baseOf(this));
    storeMetadata(heap, owner, ownerHeap);
    storeMetadata(heap, ownerToken, token);
    storeMetadata(heap, prev, nullptr);
    storeMetadata(heap, next, nullptr);
    storeMetadata(heap, freeList, nullptr);
    storeMetadata(heap, firstObject, base + sizeof(SliceHead));
    storeMetadata(heap, bump, base + sizeof(SliceHead));
    storeMetadata(heap, lastStart, base + superblock::kBytes - objectBytesValue);
    storeMetadata(heap, objectBytes, objectBytesValue);
    storeMetadata(heap, reciprocal, static_cast<std::uint32_t>(((std::uint64_t{1} << 32) + objectBytesValue - 1) / objectBytesValue));
    storeMetadata(heap, sizeClass, static_cast<std::uint32_t>(sizeClassIndex));
    storeMetadata(heap, used, 0u);
    storeMetadata(heap, freeFlags, std::uint16_t{0});
    syncFreeToken(heap);
    remoteFree.store(nullptr, std::memory_order_relaxed);
    inFullList.store(0, std::memory_order_relaxed);
    nextReactivated = nullptr;
  }

  // ---- flags and the free token --------------------------------------------------------

  template <class H>
  std::uint32_t flags(H& heap) const {
    return loadMetadata(heap, freeFlags);
  }
  template <class H>
  void setFlag(H& heap, std::uint32_t flag) {
    storeMetadata(heap, freeFlags, static_cast<std::uint16_t>(flags(heap) | flag));
    syncFreeToken(heap);
  }
  template <class H>
  void clearFlag(H& heap, std::uint32_t flag) {
    storeMetadata(heap, freeFlags, static_cast<std::uint16_t>(flags(heap) & ~flag));
    syncFreeToken(heap);
  }
  // The owner's token opens free's fast path; a flag, or no owner, closes it.
  template <class H>
  void syncFreeToken(H& heap) {
    bool open = loadMetadata(heap, owner) != nullptr && flags(heap) == 0;
    storeMetadata(heap, head()->freeToken, open ? loadMetadata(heap, ownerToken) : superblock::kClosedFreeToken);
  }
  template <class H>
  void disown(H& heap) {
    storeMetadata(heap, owner, nullptr);
    syncFreeToken(heap);
  }

  // ---- objects ---------------------------------------------------------------------------

  // Pops `node`, the head of the free list, for the program: every malloc path ends here.
  // Secure: an object freed before (it holds its tag) must still hold its fill.
  template <bool Hardened, class H, bool Secure = false>
  [[gnu::always_inline]] void* handOut(H& heap, FreeNode* node) {
    storeMetadata(heap, freeList, loadMetadata(heap, node->next));
    storeMetadata(heap, used, loadMetadata(heap, used) + 1);
    if constexpr (Secure) {
      if (hardening::secondWord(node) == freedTag(node, this) && objectBytes >= kSecureFilledBytes)
        hardening::checkFreedFill(node, kSecureFillWords);
    }
    if constexpr (Hardened) hardening::untagAllocated(node);
    return node;
  }

  // Secure: the fill a freed object gets after its link and tag (objects big enough),
  // once the tag is in place.
  static constexpr std::size_t kSecureFillWords = 2;
  static constexpr std::size_t kSecureFilledBytes = (2 + kSecureFillWords) * sizeof(std::uint64_t);
  template <bool Secure>
  void fillFreed(FreeNode* node) const {
    if constexpr (Secure) {
      if (objectBytes >= kSecureFilledBytes) hardening::fillFreed(node, kSecureFillWords);
    }
  }

  // Pushes a freed object; true when the superblock is now empty.
  template <class H>
  [[gnu::always_inline]] bool pushFreed(H& heap, FreeNode* node) {
    storeMetadata(heap, node->next, loadMetadata(heap, freeList));
    storeMetadata(heap, freeList, node);
    std::uint32_t nowUsed = loadMetadata(heap, used) - 1;
    storeMetadata(heap, used, nowUsed);
    return nowUsed == 0;
  }

  // Threads the never-used objects that start in the page the bump pointer is in (at
  // least one) onto the empty free list, so that malloc's inline path serves the next
  // ones. Writing their links touches only that page: the resident set still grows with
  // use. False when no fresh object is left. residentEnd follows the bump pointer; the
  // caller accounts for the pages it grew into.
  template <class H>
  bool carveFreshObjects(H& heap) {
    char* start = loadMetadata(heap, bump);
    char* last = loadMetadata(heap, lastStart);
    std::size_t size = loadMetadata(heap, objectBytes);
    if (start > last) return false;
    std::size_t available = static_cast<std::size_t>(last - start) / size + 1;
    auto address = reinterpret_cast<std::uintptr_t>(start);
    std::size_t inThisPage = (alignUp(address + 1, superblock::kPageBytes) - address + size - 1) / size;
    std::size_t count = available < inThisPage ? available : inThisPage;
    char* object = start;
    for (std::size_t i = 1; i < count; ++i, object += size) {
      countStep(heap);
      storeMetadata(heap, reinterpret_cast<FreeNode*>(object)->next, reinterpret_cast<FreeNode*>(object + size));
      // Secure: a fresh object holds no tag, whatever an object of another class left
      // there, so handOut checks no fill in it.
      if constexpr (secure<H>()) hardening::untagAllocated(object);
    }
    storeMetadata(heap, reinterpret_cast<FreeNode*>(object)->next, nullptr);
    if constexpr (secure<H>()) hardening::untagAllocated(object);
    storeMetadata(heap, freeList, reinterpret_cast<FreeNode*>(start));
    storeMetadata(heap, bump, object + size);
    if (object + size > loadMetadata(heap, residentEnd)) storeMetadata(heap, residentEnd, object + size);
    return true;
  }

  // Splices the list of blocks other threads freed onto the free list whole. The walk
  // only reads (to count the blocks and find the tail): the blocks were last written by
  // other threads' cores, and relinking each one would cost a second cache-line transfer
  // per block.
  template <bool Hardened>
  void collectRemote() {
    if (remoteFree.load(std::memory_order_relaxed) == nullptr) return;
    FreeNode* head = remoteFree.exchange(nullptr, std::memory_order_acquire);
    FreeNode* tail = head;
    std::uint32_t count = 1;
    while (tail->next != nullptr) {
      tail = tail->next;
      // Every block on the list was handed out: more means a cycle (a block freed twice
      // by other threads at once), which would otherwise loop here for ever.
      if constexpr (Hardened) {
        if (count == used) [[unlikely]] hardening::corruptFreeList(this);
      }
      ++count;
    }
    if (freeList != nullptr) tail->next = freeList;
    freeList = head;
    used -= count;
  }

  // A block freed by a thread that does not own the superblock. True when the free
  // claimed the superblock out of its owner's full list (the caller hands it back).
  bool pushRemote(FreeNode* node) {
    FreeNode* head = remoteFree.load(std::memory_order_relaxed);
    do {
      node->next = head;
    } while (!remoteFree.compare_exchange_weak(head, node, std::memory_order_seq_cst, std::memory_order_relaxed));
    if (inFullList.load(std::memory_order_seq_cst) == 0) return false;
    std::uint16_t expected = 1;
    return inFullList.compare_exchange_strong(expected, 0, std::memory_order_seq_cst);
  }

  // The start of the object holding `pointer` (memalign hands out interior pointers).
  template <class H>
  void* objectStart(H& heap, void* pointer) const {
    char* start = loadMetadata(heap, firstObject);
    auto offset = static_cast<std::uint64_t>(static_cast<char*>(pointer) - start);
    std::uint64_t index = (offset * loadMetadata(heap, reciprocal)) >> 32;
    return start + index * loadMetadata(heap, objectBytes);
  }

  // The bytes the program may use from `pointer`, an object (or, after memalign, a
  // pointer inside one) of the superblock or block whose header this is.
  template <class H>
  std::size_t usableFrom(H& heap, void* pointer) const {
    auto* p = static_cast<char*>(pointer);
    std::uint32_t flagBits = flags(heap);
    if (flagBits & superblock::kLargeBlock)
      return loadMetadata(heap, usableBytes) - static_cast<std::size_t>(p - loadMetadata(heap, firstObject));
    if (!(flagBits & superblock::kInteriorPointers)) return loadMetadata(heap, objectBytes);
    auto* start = static_cast<char*>(objectStart(heap, pointer));
    return loadMetadata(heap, objectBytes) - static_cast<std::size_t>(p - start);
  }

  // calloc's clearing: of `bytes` bytes from `pointer`, in an object or block handed out
  // just now, how many may hold old data. A span's block records where its old data ended
  // (residentEnd, combining/LargeObjectHeap.h): past it its pages were never touched or
  // were purged since, and read as zero. A small object may always hold old data.
  // Not counted, as calloc's memset is not: the simulator skips both (its memory holds no
  // data), so a counting heap over real memory counts what the simulator does.
  std::size_t bytesToClear(const void* pointer, std::size_t bytes) const {
    if (!(freeFlags.load(std::memory_order_relaxed) & superblock::kLargeBlock)) return bytes;
    auto* p = static_cast<const char*>(pointer);
    const char* written = residentEnd;
    if (written <= p) return 0;
    auto dirty = static_cast<std::size_t>(written - p);
    return dirty < bytes ? dirty : bytes;
  }

  // ---- hardening ---------------------------------------------------------------------
  // A free's pointer is masked to a header; the header's cookie (the secret mixed with
  // its address) tells a real header from whatever a foreign pointer lands on. A small
  // object's start is a whole number of objects from the first, and its second word holds
  // its tag while it is free (double frees). A large block's cookie changes when it is
  // freed, so a second free of a kept block is told from an invalid pointer.

  static std::uint32_t liveCookie(const Superblock* sb) { return static_cast<std::uint32_t>(hardening::tagOf(sb)); }

  // The tag a freed object of the superblock whose header is `sb` holds in its second word:
  // the header's address, which free holds in a register already (it masked the pointer to
  // the slice's head and read the header's address there), so the inline free's check is
  // a compare, a branch and a store (the address-dependent tag before cost a `lea` more on
  // every free). No correct program stores it: the header lies in the segment's metadata,
  // no object's address, and malloc clears the word on every hand-out. A program may still
  // copy a stale tag there from memory it never initialised (a superblock reused for
  // another class keeps its old objects' tags inside the new ones), so a match is only
  // reported once confirmed (confirmDoubleFree), as glibc walks its tcache bin when it
  // finds its key.
  static std::uint64_t freedTag(const void*, const Superblock* sb) { return reinterpret_cast<std::uintptr_t>(sb); }
  static std::uint64_t freedTag(const void* object) { return freedTag(object, of(object)); }
  // A free of `node`, an object's start, that left the inline path: reported when it is
  // freed already, else tagged. `owned`: this thread owns the superblock (may read its
  // lists). Returns false for a free that must not go on a list: another thread's free of
  // an object holding the tag that it finds on no list (see confirmDoubleFree).
  [[nodiscard]] bool checkAndTagFreed(void* node, bool owned) const {
    std::uint64_t tag = freedTag(node, this);
    if (hardening::secondWord(node) == tag) [[unlikely]] {
      if (!confirmDoubleFree(node, owned)) return false;
    }
    hardening::secondWord(node) = tag;
    return true;
  }
  // `node` holds the tag. It is reported when found on the superblock's free list or its
  // remote list, else freed by its owner (a live object with a stale tag copied into it).
  // Another thread reads the owner's list as the owner changes it: the walk is bounded and
  // stops at a link out of the superblock, whose pages stay mapped, so at worst it misses;
  // not found, the object is left alone (it may sit on a list the walk missed, where a
  // second listing would hand it out twice, or be live with a stale tag, which a report
  // would abort wrongly): a leak of one object at worst.
  [[gnu::cold, gnu::noinline]] bool confirmDoubleFree(void* node, bool owned) const {
    const FreeNode* ownersList = owned ? freeList : __atomic_load_n(&freeList, __ATOMIC_RELAXED);
    if (listHolds(remoteFree.load(std::memory_order_acquire), node) || listHolds(ownersList, node))
      hardening::doubleFree(node);
    return owned;
  }
  // A walk of at most as many links as the superblock has objects, that stops at a link
  // out of it (a list a write after free broke).
  bool listHolds(const FreeNode* list, const void* node) const {
    std::size_t capacity = static_cast<std::size_t>(lastStart - firstObject) / objectBytes + 1;
    for (std::size_t steps = 0; list != nullptr && steps < capacity; ++steps) {
      if (list == node) return true;
      if (!isObjectStart(list)) return false;
      list = list->next;
    }
    return false;
  }

  // Objects lie from firstObject, just past the slice's head (format's), to the
  // superblock's end. For offsets within a superblock, the low 32 bits of offset *
  // ceil(2^32 / size) are k * (the rounding error, < size) < 2^16 when offset = k * size,
  // and at least 2^32 / size >= 2^17 otherwise: a multiply and a compare instead of a
  // division. Exact for any pointer: one below firstObject has a huge unsigned offset,
  // which the bound (a constant less the size: no header address to compute) refuses.
  bool isObjectStart(const void* pointer) const {
    constexpr std::uint64_t kObjectsBytes = superblock::kBytes - sizeof(SliceHead);
    auto offset = reinterpret_cast<std::uintptr_t>(pointer) - reinterpret_cast<std::uintptr_t>(firstObject);
    return offset <= kObjectsBytes - objectBytes && static_cast<std::uint32_t>(offset * reciprocal) < superblock::kBytes;
  }

  // isObjectStart for the owner's inline free, whose pointer is 16-aligned and lies in this
  // superblock past its slice's head (its token matched): the multiply and the compare, and
  // the end bound (a multiple of the size in the tail slack would overlap the next slice's
  // head).
  [[gnu::always_inline]] bool startsObject(const void* pointer) const {
    auto offset = static_cast<std::uint64_t>(static_cast<const char*>(pointer) - firstObject);
    return static_cast<std::uint32_t>(offset * reciprocal) < superblock::kBytes && pointer <= lastStart;
  }

  // The checks of a free that left the owner's fast path; the object's tag is checked
  // once its start is known. Returns the flags, read once here (through the heap's
  // memory policy) for the caller too.
  template <class H>
  std::uint32_t checkHeader(H& heap, void* pointer) {
    std::uint32_t live = liveCookie(this);
    std::uint32_t flagBits = flags(heap);
    if (cookie != live) [[unlikely]] {
      if (cookie == (live ^ superblock::kFreedLargeCookie) && pointer == firstObject) hardening::doubleFree(pointer);
      hardening::invalidPointer(pointer);
    }
    if (flagBits & superblock::kLargeBlock) {
      if (pointer != firstObject) [[unlikely]] hardening::invalidPointer(pointer);
      cookie = live ^ superblock::kFreedLargeCookie;  // a new header is written when the block is reused
    } else if (!(flagBits & superblock::kInteriorPointers) && !isObjectStart(pointer)) [[unlikely]] {
      hardening::invalidPointer(pointer);
    }
    return flagBits;
  }
};
static_assert(sizeof(Superblock) == 128 && sizeof(Superblock) % kMinAlignment == 0);
static_assert(sizeof(Superblock) <= superblock::kSlotBytes && superblock::kSlotsBytes <= superblock::kBytes);

}  // namespace heapkit
