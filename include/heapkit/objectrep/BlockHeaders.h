// BlockHeaders: the header layout of blocks that lie end to end (TailChunkHeap's chunks,
// SegregatedFitHeap's free lists), one of three, chosen by value or by type:
//  - SizeWord8: an 8-byte header, the size word (usable = length - 8);
//  - SizeWord16: a 16-byte header whose last word is the size word (usable = length - 16),
//    so objects keep 16-byte alignment with the header in front;
//  - BoundaryTags: the 8-byte header, plus, while a block is free, its length in its last
//    word and a flag in the next block's header, so that it can merge with both neighbours
//    in O(1), as in dlmalloc (objectrep/BoundaryTags.h writes the tags).
// A block's length is a multiple of 16, at least 32; its size word, the last word of the
// header and so the one just before the object, holds the length and four flags: kFree and
// kPreviousFree (the boundary tags', kept in every layout, written as tags only by the
// boundary-tag one), kTail and kFirst (the chunk layer's, building/TailChunkHeap.h).
//
// The layout is a policy read from `policy.header`: a run-time value (HeaderPolicy) for the
// simulator and the search, or a static constexpr member (Headers<Layout>) for an emitted
// allocator, where the constant folds every branch away. The same source serves both.
//
// Every operation that touches a size word or a tag takes the heap whose blocks these are,
// and loads and stores through it (core/Counting.h): a counting heap counts each access.
#pragma once

#include <cstddef>
#include <cstdint>

#include "heapkit/core/Counting.h"
#include "heapkit/core/HeapContract.h"
#include "heapkit/core/SizeWord.h"
#include "heapkit/objectrep/BoundaryTags.h"

namespace heapkit {

enum class HeaderLayout : std::uint8_t { SizeWord8, SizeWord16, BoundaryTags };

// The layout by value.
struct HeaderPolicy {
  HeaderLayout header = HeaderLayout::SizeWord16;
};

// The layout by type.
template <HeaderLayout Layout>
struct Headers {
  static constexpr HeaderLayout header = Layout;
};

template <class Policy>
class BlockHeaders {
 public:
  static constexpr std::size_t kFree = BoundaryTags::kFree, kPreviousFree = BoundaryTags::kPreviousFree;
  // The chunk layer's: kTail marks the tail pseudo-block new blocks are carved from, kFirst
  // the first block of a chunk (a block that is first and reaches the fence is the chunk).
  static constexpr std::size_t kTail = 2, kFirst = 8;
  static_assert(((kTail | kFirst) & (kFree | kPreviousFree)) == 0);
  static constexpr std::size_t kMinBlockBytes = 32;

  constexpr explicit BlockHeaders(const Policy& policy = {}) : policy_(policy) {}

  constexpr std::size_t headerBytes() const { return policy_.header == HeaderLayout::SizeWord16 ? 16 : 8; }
  constexpr bool tagged() const { return policy_.header == HeaderLayout::BoundaryTags; }

  constexpr std::size_t blockLengthFor(std::size_t size) const {
    std::size_t length = alignUp(size + headerBytes(), 16);
    return length < kMinBlockBytes ? kMinBlockBytes : length;
  }

  char* objectOf(char* block) const { return block + headerBytes(); }
  char* blockOf(char* object) const { return object - headerBytes(); }
  std::size_t& sizeWordOf(char* block) const {
    return *reinterpret_cast<std::size_t*>(block + headerBytes() - sizeof(std::size_t));
  }
  static std::size_t lengthIn(std::size_t word) { return word & ~sizeword::kFlagMask; }

  template <class H>
  std::size_t read(H& heap, char* block) const { return loadMetadata(heap, sizeWordOf(block)); }
  template <class H>
  void write(H& heap, char* block, std::size_t word) const { storeMetadata(heap, sizeWordOf(block), word); }
  template <class H>
  std::size_t lengthOf(H& heap, char* block) const { return lengthIn(read(heap, block)); }

  // The boundary tags (objectrep/BoundaryTags.h), written only by the boundary-tag layout.
  // They take the object: that layout has the 8-byte header, so the size word just before
  // the object is the block's, as theirs is (a constant offset, which the layout's
  // run-time test does not have to fold).
  template <class H>
  void tellNextFree(H& heap, char* block, std::size_t length) const {
    if (tagged()) BoundaryTags::tellNextFree(heap, taggedObjectOf(block), length);
  }
  template <class H>
  void tellNextInUse(H& heap, char* block, std::size_t length) const {
    if (tagged()) BoundaryTags::tellNextInUse(heap, taggedObjectOf(block), length);
  }
  // The block before `block`: only with boundary tags, and only when kPreviousFree is set.
  template <class H>
  char* previous(H& heap, char* block) const {
    return static_cast<char*>(BoundaryTags::previous(heap, taggedObjectOf(block))) - BoundaryTags::kSizeWordBytes;
  }

 private:
  static char* taggedObjectOf(char* block) { return block + BoundaryTags::kSizeWordBytes; }

  [[no_unique_address]] Policy policy_;
};

}  // namespace heapkit
