// BuddyHeap: the buddy systems of the DMM literature, configured by values at run time
// (the simulator's search tries thousands of designs without compiling one) or by
// constants at compile time (a shipped allocator: the same source, every branch on the
// configuration folded away).
//
//   BuddyHeap<BuddyConfig, Top> heap(BuddyConfig{BuddyKind::Fibonacci, 32, 64 << 10, true, true});
//   struct Shipped { static constexpr BuddyKind kind = BuddyKind::Binary; ... };
//   BuddyHeap<Shipped, Top> heap;
//
// Kinds (block sizes, smallest first; m is the smallest block):
//  - Binary: m * 2^k; a block splits into two halves.
//  - Fibonacci: m, 1.5m (rounded to 16), then each size the sum of the two before
//    (32, 48, 80, 128, 208, ...); F(k) splits into F(k-1) on the left, F(k-2) on the right.
//  - Weighted (Shen & Peterson): P * 2^k and 1.5P * 2^k (P = m rounded to 32: 32, 48, 64,
//    96, ...); 2^k splits into 3*2^(k-2) + 2^(k-2), 3*2^k into 2^(k+1) + 2^k. 1.5P is
//    never formed (its buddy would be P/2), so those requests get 2P.
//  - Double (Page & Hagins): two binary systems, P * 2^k and 1.5P * 2^k, in areas of their
//    own; a request goes to the system that gives it the smaller block.
// Sizes are indexed in one increasing table (Weighted and Double interleave their two
// series: even indices P * 2^k, odd ones 1.5P * 2^k), so each kind is a split rule on
// indices: index i splits into left(i) and right(i), and the parent is a small distance
// above its children: Binary i-1, i-1; Fibonacci i-1, i-2; Weighted i-1, then i-4 (even)
// or i-3 (odd); Double i-2, i-2.
//
// Areas: the heap takes areas from its parent (Super): areaBytes rounded down to the
// largest size of the series (of the request's series, for Double), or, for a request
// larger than that, an area of its own, of the smallest size that holds it. An area is
// one buddy tree; blocks never merge across areas. A block is found whole in one free list
// per size, or split from a larger one: at each split the kept child is the smaller one
// that can still be cut to exactly the request's size, the other goes to its free list.
// An area asks the parent for 32 bytes more than its root (the area's prefix): over an
// ArenaHeap, whose extents add a 16-byte header and round to pages, a 4096-byte root
// takes two pages.
//
// Headers: every block starts with 16 bytes, its object follows.
//   word 0 (this layer's): size index (bits 0-7), free (bit 8), role (bits 9-12), saved
//          role (bits 13-16), offset of the block within its area / 16 (bits 20-63)
//   word 1 (object - 8): the usable size, block bytes - 16, in the project's size-word
//          form (a multiple of 16, low four bits free for flags), written when handed out.
// A free block's object holds its free-list links (next, previous).
// Area: [previous area, next area, root bytes, live blocks: 32 bytes][root block ...]
//
// Finding a buddy uses only sizes and offsets within the area, never absolute addresses,
// so the simulator (ArenaHeap over simulated memory) and the real allocator decide alike.
// A block's role says whether it is its parent's left or right child and how many indices
// above it the parent is (0 marks the root); from it, the buddy is the parent's other
// child, just after a left child or just before a right one. The parent's own role has to
// survive the split, which is Cranston & Thomas's trick for Fibonacci buddies, here for
// every kind: the left child saves its parent's role, the right child its parent's saved
// role, and a merge restores both (parent role = left's saved, parent saved = right's
// saved). A buddy is whole when the header at its offset carries its size index (a split
// buddy's first descendant there has a smaller one).
//
// A freed block merges with its buddy while the buddy is free and whole, up to the root,
// when coalescing; otherwise it stays at its size. With trim, an area with no live block
// goes back to the parent (coalescing: its root is free; not coalescing: its live-block
// count, kept only then, drops to zero and its free blocks are taken off their lists);
// without, it stays for reuse. The destructor gives every area back.
//
// What is counted (core/Counting.h; nothing over a top heap that does not count):
//  - steps: one per free list probed by malloc; one per buddy examined by free; one per
//    split (countSplit) and per merge (countCoalesce); one per block taken off its list
//    when a non-coalescing heap trims an area.
//  - reads / writes: 8-byte words of metadata: block header words (word 0 on every
//    examination, the size word when a block is handed out), free-list links and list
//    heads, and the area's live-block count and list links.
#pragma once

#include <algorithm>
#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "heapkit/building/DLList.h"
#include "heapkit/core/Counting.h"
#include "heapkit/core/HeapContract.h"
#include "heapkit/core/SizeWord.h"

namespace heapkit {

enum class BuddyKind : std::uint8_t { Binary, Fibonacci, Weighted, Double };

// The run-time configuration; a struct with static constexpr members of the same names is
// the compile-time one.
struct BuddyConfig {
  BuddyKind kind = BuddyKind::Binary;
  std::size_t minBlockBytes = 32;       // smallest block, header included (at least 32)
  std::size_t areaBytes = 64 * 1024;    // the bytes of an area's root block, rounded down
  bool coalesce = true;                 // merge a freed block with its buddy, repeatedly
  bool trim = true;                     // give a wholly free area back to the parent
};

template <class P>
concept BuddyParams = requires(const P& params) {
  { params.kind } -> std::convertible_to<BuddyKind>;
  { params.minBlockBytes } -> std::convertible_to<std::size_t>;
  { params.areaBytes } -> std::convertible_to<std::size_t>;
  { params.coalesce } -> std::convertible_to<bool>;
  { params.trim } -> std::convertible_to<bool>;
};

// Every parameter a constant: the size table is built by the compiler too. (Static
// members first: naming a non-static one in a constant expression is a hard error.)
template <class P>
concept CompileTimeBuddyParams =
    BuddyParams<P> && !std::is_member_object_pointer_v<decltype(&P::kind)> &&
    !std::is_member_object_pointer_v<decltype(&P::minBlockBytes)> &&
    !std::is_member_object_pointer_v<decltype(&P::areaBytes)> &&
    !std::is_member_object_pointer_v<decltype(&P::coalesce)> && !std::is_member_object_pointer_v<decltype(&P::trim)> &&
    requires {
  typename std::integral_constant<BuddyKind, P::kind>;
  typename std::integral_constant<std::size_t, P::minBlockBytes>;
  typename std::integral_constant<std::size_t, P::areaBytes>;
  typename std::integral_constant<bool, P::coalesce>;
  typename std::integral_constant<bool, P::trim>;
};

namespace buddy {

inline constexpr std::size_t kHeaderBytes = 16;
inline constexpr std::size_t kSmallestBlockBytes = kHeaderBytes + kMinObjectBytes;
// Offsets live in 44 bits of word 0 (in units of 16): no block may exceed 2^47 bytes.
inline constexpr std::size_t kLargestBlockBytes = std::size_t{1} << 47;
inline constexpr std::size_t kMaxClasses = 128;
inline constexpr int kNoChild = -1;

constexpr bool interleavesTwoSeries(BuddyKind kind) { return kind == BuddyKind::Weighted || kind == BuddyKind::Double; }

// Double keeps its two series in areas of their own: system 0 (even indices), 1 (odd).
constexpr unsigned systemOf(BuddyKind kind, unsigned index) { return kind == BuddyKind::Double ? index & 1 : 0; }
constexpr unsigned classStride(BuddyKind kind) { return kind == BuddyKind::Double ? 2 : 1; }

// Weighted's 1.5P (index 1) would be the left child of 2P, whose right child P/2 is below
// the smallest block: no block ever has that size.
constexpr bool isFormed(BuddyKind kind, unsigned index) { return !(kind == BuddyKind::Weighted && index == 1); }

constexpr int leftChild(BuddyKind kind, unsigned index) {
  int i = static_cast<int>(index);
  int left = kind == BuddyKind::Double ? i - 2 : i - 1;
  return left >= 0 ? left : kNoChild;
}

constexpr int rightChild(BuddyKind kind, unsigned index) {
  int i = static_cast<int>(index);
  int right = i;
  switch (kind) {
    case BuddyKind::Binary: right = i - 1; break;
    case BuddyKind::Fibonacci: right = i - 2; break;
    case BuddyKind::Weighted: right = (i % 2 == 0) ? i - 4 : i - 3; break;
    case BuddyKind::Double: right = i - 2; break;
  }
  return right >= 0 ? right : kNoChild;
}

constexpr bool isSplittable(BuddyKind kind, unsigned index) {
  return leftChild(kind, index) != kNoChild && rightChild(kind, index) != kNoChild;
}

// Whether splitting a block of index `from` can end in a block of exactly `target`.
constexpr bool cutsExactlyTo(BuddyKind kind, unsigned from, unsigned target) {
  if (from == target) return true;
  if (target > from) return false;
  switch (kind) {
    case BuddyKind::Binary: return true;
    case BuddyKind::Double: return (from - target) % 2 == 0;
    case BuddyKind::Fibonacci: return from >= 2;
    case BuddyKind::Weighted: return from >= 3 && target != 1;
  }
  return false;
}

struct SizeClasses {
  std::array<std::size_t, kMaxClasses> bytes{};
  unsigned count = 0;
  std::array<unsigned, 2> areaRoot{};  // the root index of an ordinary area, per system

  // The smallest formed index whose blocks hold `need` bytes, or count when none does.
  constexpr unsigned fit(BuddyKind kind, std::size_t need) const {
    unsigned index = static_cast<unsigned>(std::lower_bound(bytes.begin(), bytes.begin() + count, need) - bytes.begin());
    if (index < count && !isFormed(kind, index)) ++index;
    return index;
  }
};

constexpr SizeClasses makeSizeClasses(BuddyKind kind, std::size_t minBlockBytes, std::size_t areaBytes) {
  SizeClasses classes;
  std::size_t smallest = std::clamp(minBlockBytes, kSmallestBlockBytes, kLargestBlockBytes / 4);
  auto add = [&](std::size_t bytes) {
    if (bytes > kLargestBlockBytes || classes.count == kMaxClasses) return false;
    classes.bytes[classes.count++] = bytes;
    return true;
  };
  if (interleavesTwoSeries(kind)) {
    // 1.5P must be a multiple of 16 too.
    std::size_t p = alignUp(smallest, 2 * kMinAlignment);
    for (unsigned k = 0; add(p << k) && add((p + p / 2) << k); ++k) {
    }
  } else if (kind == BuddyKind::Fibonacci) {
    std::size_t previous = alignUp(smallest, kMinAlignment);
    std::size_t current = alignUp(previous + previous / 2, kMinAlignment);
    add(previous);
    while (add(current)) {
      std::size_t next = previous + current;
      previous = current;
      current = next;
    }
  } else {
    std::size_t m = alignUp(smallest, kMinAlignment);
    for (unsigned k = 0; add(m << k); ++k) {
    }
  }
  for (unsigned system = 0; system < 2; ++system) {
    unsigned root = kMaxClasses;
    for (unsigned i = system; i < classes.count; i += classStride(kind)) {
      if (!isFormed(kind, i)) continue;
      if (root == kMaxClasses || classes.bytes[i] <= areaBytes) root = i;
    }
    classes.areaRoot[system] = root == kMaxClasses ? 0 : root;
  }
  return classes;
}

// Where a block sits in its parent: 0 for an area's root, else left or right child and
// how many size indices above it the parent is (1 to 4).
struct Role {
  static constexpr std::uint8_t kRoot = 0;
  static constexpr std::uint8_t left(unsigned parentDistance) { return static_cast<std::uint8_t>(parentDistance); }
  static constexpr std::uint8_t right(unsigned parentDistance) { return static_cast<std::uint8_t>(4 + parentDistance); }
  static constexpr bool isRight(std::uint8_t role) { return role > 4; }
  static constexpr unsigned parentDistance(std::uint8_t role) { return isRight(role) ? role - 4u : role; }
};

// Header word 0, decoded.
struct BlockWord {
  unsigned sizeIndex = 0;
  bool free = false;
  std::uint8_t role = Role::kRoot;
  std::uint8_t savedRole = Role::kRoot;
  std::size_t offset = 0;  // from the area's root block

  static constexpr std::size_t kFreeBit = std::size_t{1} << 8;
  static constexpr unsigned kRoleShift = 9, kSavedRoleShift = 13, kOffsetShift = 20;

  constexpr std::size_t encode() const {
    return sizeIndex | (free ? kFreeBit : 0) | (std::size_t{role} << kRoleShift) |
           (std::size_t{savedRole} << kSavedRoleShift) | ((offset / kMinAlignment) << kOffsetShift);
  }
  static constexpr BlockWord decode(std::size_t word) {
    return {static_cast<unsigned>(word & 0xff), (word & kFreeBit) != 0, static_cast<std::uint8_t>((word >> kRoleShift) & 15),
            static_cast<std::uint8_t>((word >> kSavedRoleShift) & 15), (word >> kOffsetShift) * kMinAlignment};
  }
};

// The size table, built at run time from values, or by the compiler from constants.
template <class Params>
class SizeClassesOf {
 public:
  explicit SizeClassesOf(const Params& params)
      : classes_(makeSizeClasses(params.kind, params.minBlockBytes, params.areaBytes)) {}
  const SizeClasses& get() const { return classes_; }

 private:
  SizeClasses classes_;
};

template <CompileTimeBuddyParams Params>
class SizeClassesOf<Params> {
 public:
  explicit SizeClassesOf(const Params&) {}
  static constexpr const SizeClasses& get() { return kClasses; }

 private:
  static constexpr SizeClasses kClasses = makeSizeClasses(Params::kind, Params::minBlockBytes, Params::areaBytes);
};

}  // namespace buddy

// What forEachBlock reports of each block (tests and debugging).
struct BuddyBlockInfo {
  std::size_t area;        // the area's position in the heap's list of areas
  std::size_t areaBytes;   // the bytes of the area's root block
  std::size_t offset;      // of the block within its area
  std::size_t bytes;       // header included
  unsigned sizeIndex;
  bool free;
  void* object;            // the block's object (its links while free)
};

template <class Params, SizeWordHeap Super>
  requires BuddyParams<Params>
class BuddyHeap : public Super {
  using BlockWord = buddy::BlockWord;
  using Role = buddy::Role;

  struct Area {
    DLList::Node link;  // on the list of areas
    std::size_t rootBytes;
    std::size_t liveBlocks;  // kept only when not coalescing, for trim
  };
  static constexpr std::size_t kAreaPrefixBytes = sizeof(Area);
  static_assert(kAreaPrefixBytes % kMinAlignment == 0 && Super::Alignment >= kMinAlignment);


 public:
  static constexpr std::size_t Alignment = kMinAlignment;
  static constexpr bool KeepsSizeWord = true;

  template <class... SuperArgs>
  explicit BuddyHeap(const Params& params, SuperArgs&&... superArgs)
      : Super(std::forward<SuperArgs>(superArgs)...), params_(params), classes_(params) {}
  BuddyHeap()
    requires CompileTimeBuddyParams<Params>
      : BuddyHeap(Params{}) {}
  BuddyHeap(const BuddyHeap&) = delete;
  BuddyHeap& operator=(const BuddyHeap&) = delete;

  ~BuddyHeap() {
    while (void* area = areas_.first(*this)) releaseArea(static_cast<Area*>(area));
  }

  void* malloc(std::size_t size) {
    if (size > kMaxRequestBytes) return nullptr;
    unsigned target = classes().fit(params_.kind, usableBytesFor(size) + buddy::kHeaderBytes);
    if (target >= classes().count) return nullptr;  // more than the largest block
    BlockWord word;
    char* block = takeFreeBlock(target, word);
    if (block == nullptr) {
      block = newArea(target, word);
      if (block == nullptr) return nullptr;
    }
    block = splitDown(block, word, target);
    word.free = false;
    writeWord(block, word);
    void* object = block + buddy::kHeaderBytes;
    sizeword::set(*this, object, bytesOf(word.sizeIndex) - buddy::kHeaderBytes);
    if (!params_.coalesce) adjustLiveBlocks(areaOf(block, word), +1);
    return object;
  }

  void free(void* object) {
    if (object == nullptr) return;
    char* block = static_cast<char*>(object) - buddy::kHeaderBytes;
    BlockWord word = readWord(block);
    if (!params_.coalesce) {
      Area* area = areaOf(block, word);
      if (adjustLiveBlocks(area, -1) == 0 && params_.trim) {
        releaseWhollyFreeArea(area, block);
        return;
      }
      pushFree(block, word);
      return;
    }
    mergeWithBuddies(block, word);
    if (word.role == Role::kRoot && params_.trim) {
      releaseArea(areaOf(block, word));
      return;
    }
    pushFree(block, word);
  }

  // The usable bytes: the block's bytes less its header.
  std::size_t getSize(void* object) const { return sizeword::size(object); }

  const Params& params() const { return params_; }
  std::size_t sizeClassBytes(unsigned index) const { return bytesOf(index); }
  unsigned sizeClassCount() const { return classes().count; }

  // Every block of every area, in address order within each area. For tests and
  // debugging: not counted as work.
  template <class Visitor>
  void forEachBlock(Visitor&& visit) const {
    std::size_t ordinal = 0;
    Uncounted walk;
    for (void* listed = areas_.first(walk); listed != nullptr; listed = areas_.next(walk, listed), ++ordinal) {
      auto* area = static_cast<Area*>(listed);
      char* root = rootOf(area);
      for (std::size_t offset = 0; offset < area->rootBytes;) {
        BlockWord word = BlockWord::decode(*reinterpret_cast<std::size_t*>(root + offset));
        std::size_t bytes = bytesOf(word.sizeIndex);
        visit(BuddyBlockInfo{ordinal, area->rootBytes, offset, bytes, word.sizeIndex, word.free,
                             root + offset + buddy::kHeaderBytes});
        if (bytes == 0) return;  // a corrupt header: stop rather than loop
        offset += bytes;
      }
    }
  }

  // The blocks on the free lists (tests compare it with the free blocks the walk finds).
  std::size_t freeListedBlocks() const {
    std::size_t count = 0;
    for (const DLList& list : freeLists_) count += list.size();
    return count;
  }

 private:
  const buddy::SizeClasses& classes() const { return classes_.get(); }
  std::size_t bytesOf(unsigned index) const { return classes().bytes[index]; }

  static char* rootOf(Area* area) { return reinterpret_cast<char*>(area) + kAreaPrefixBytes; }
  static Area* areaOf(char* block, const BlockWord& word) {
    return reinterpret_cast<Area*>(block - word.offset - kAreaPrefixBytes);
  }
  // A free block's list node is its object.
  static void* nodeOf(char* block) { return block + buddy::kHeaderBytes; }
  static char* blockOfNode(void* node) { return static_cast<char*>(node) - buddy::kHeaderBytes; }

  // Metadata is read and written through these, counted where it is touched
  // (core/Counting.h); over real memory they are plain loads and stores.
  template <class T>
  T load(const T& word) { return loadMetadata(*this, word); }
  template <class T, class V>
  void store(T& word, V value) { storeMetadata(*this, word, static_cast<T>(value)); }

  BlockWord readWord(char* block) { return BlockWord::decode(load(*reinterpret_cast<std::size_t*>(block))); }
  void writeWord(char* block, const BlockWord& word) { store(*reinterpret_cast<std::size_t*>(block), word.encode()); }

  // --- free lists: one DLList per size, LIFO, linked through the free blocks -------

  void pushFree(char* block, BlockWord word) {
    word.free = true;
    writeWord(block, word);
    freeLists_[word.sizeIndex].insert(*this, nodeOf(block));
  }

  // Wherever it is listed: the list is circular, so a node unlinks itself.
  void unlinkFree(char* block) { DLList::unlink(*this, nodeOf(block)); }

  // The first free block of the smallest size that holds the target, off its list.
  char* takeFreeBlock(unsigned target, BlockWord& word) {
    const BuddyKind kind = params_.kind;
    for (unsigned index = target; index <= highestRootIndex_ && index < classes().count;
         index += buddy::classStride(kind)) {
      countStep(*this);  // a list probed
      void* node = freeLists_[index].removeFirst(*this);
      if (node == nullptr) continue;
      char* block = blockOfNode(node);
      word = readWord(block);
      return block;
    }
    return nullptr;
  }

  // A new area whose root holds the target: an ordinary one, or one of the target's size.
  char* newArea(unsigned target, BlockWord& word) {
    unsigned root = std::max(classes().areaRoot[buddy::systemOf(params_.kind, target)], target);
    std::size_t rootBytes = bytesOf(root);
    auto* area = static_cast<Area*>(Super::malloc(kAreaPrefixBytes + rootBytes));
    countStep(*this);  // the area requested
    if (area == nullptr) return nullptr;
    areas_.insert(*this, area);
    store(area->rootBytes, rootBytes);
    if (!params_.coalesce) store(area->liveBlocks, 0);
    highestRootIndex_ = std::max(highestRootIndex_, root);
    word = BlockWord{root, false, Role::kRoot, Role::kRoot, 0};
    return rootOf(area);
  }

  // Cut the block down to the target index, freeing the other child of every split.
  char* splitDown(char* block, BlockWord& word, unsigned target) {
    const BuddyKind kind = params_.kind;
    while (word.sizeIndex > target && buddy::isSplittable(kind, word.sizeIndex)) {
      auto leftIndex = static_cast<unsigned>(buddy::leftChild(kind, word.sizeIndex));
      auto rightIndex = static_cast<unsigned>(buddy::rightChild(kind, word.sizeIndex));
      BlockWord left{leftIndex, false, Role::left(word.sizeIndex - leftIndex), word.role, word.offset};
      BlockWord right{rightIndex, false, Role::right(word.sizeIndex - rightIndex), word.savedRole,
                      word.offset + bytesOf(leftIndex)};
      char* rightBlock = block + bytesOf(leftIndex);
      countSplit(*this);
      // The smaller child when it can still be cut to exactly the target: the best fit.
      if (rightIndex < leftIndex && buddy::cutsExactlyTo(kind, rightIndex, target)) {
        pushFree(block, left);
        block = rightBlock;
        word = right;
      } else {
        pushFree(rightBlock, right);
        word = left;
      }
    }
    return block;
  }

  // Merge a freed block with its buddy while the buddy is free and whole; the block and
  // its word become the merged block.
  void mergeWithBuddies(char*& block, BlockWord& word) {
    const BuddyKind kind = params_.kind;
    while (word.role != Role::kRoot) {
      unsigned parentIndex = word.sizeIndex + Role::parentDistance(word.role);
      bool isRight = Role::isRight(word.role);
      auto buddyIndex = static_cast<unsigned>(isRight ? buddy::leftChild(kind, parentIndex)
                                                      : buddy::rightChild(kind, parentIndex));
      char* buddyBlock = isRight ? block - bytesOf(buddyIndex) : block + bytesOf(word.sizeIndex);
      countStep(*this);  // a buddy looked at
      BlockWord buddyWord = readWord(buddyBlock);
      if (!buddyWord.free || buddyWord.sizeIndex != buddyIndex) return;
      unlinkFree(buddyBlock);
      const BlockWord& left = isRight ? buddyWord : word;
      const BlockWord& right = isRight ? word : buddyWord;
      BlockWord parent{parentIndex, false, left.savedRole, right.savedRole, left.offset};
      if (isRight) block = buddyBlock;
      word = parent;
      countCoalesce(*this);
    }
  }

  // Not coalescing: the live blocks of an area, for trim. Returns the new count.
  std::size_t adjustLiveBlocks(Area* area, int change) {
    std::size_t live = load(area->liveBlocks) + static_cast<std::size_t>(change);
    store(area->liveBlocks, live);
    return live;
  }

  // Not coalescing, the area's last live block was freed: take its other blocks, all
  // free, off their lists, then give the area back.
  void releaseWhollyFreeArea(Area* area, char* lastFreed) {
    char* root = rootOf(area);
    std::size_t rootBytes = load(area->rootBytes);
    for (std::size_t offset = 0; offset < rootBytes;) {
      countStep(*this);  // a block visited
      char* block = root + offset;
      BlockWord word = readWord(block);
      if (block != lastFreed) unlinkFree(block);
      offset += bytesOf(word.sizeIndex);
    }
    releaseArea(area);
  }

  void releaseArea(Area* area) {
    DLList::unlink(*this, area);
    countStep(*this);  // the area returned
    Super::free(area);
  }

  [[no_unique_address]] Params params_;
  [[no_unique_address]] buddy::SizeClassesOf<Params> classes_;
  DLList areas_;
  unsigned highestRootIndex_ = 0;
  std::array<DLList, buddy::kMaxClasses> freeLists_;
};

}  // namespace heapkit
