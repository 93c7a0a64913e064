// Hand-written monolithic equivalents of two compositions, for the abstraction-penalty
// benchmarks: one class each, the same algorithm and the same memory layout as the
// layers, no layering. If the compiler inlines through the layers as it should, the
// layered heaps cost the same per malloc+free pair.
//
//   MonolithicFreelistHeap ~ FreelistHeap<SizeHeap<ChunkHeap<64 KiB, MmapHeap>>>
//   MonolithicKingsleyHeap ~ KingsleyHeap<MmapHeap>
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "heapkit/core/HeapContract.h"

namespace heapkit::bench {

// A size header before each object, chunks bumped from mmap, one LIFO free list. The
// chunk and OS-block bookkeeping is shared by both monolithic heaps below, written out
// once here rather than as layers.
class MonolithicFreelistHeap {
 public:
  static constexpr std::size_t Alignment = kMinAlignment;

  MonolithicFreelistHeap() = default;
  MonolithicFreelistHeap(const MonolithicFreelistHeap&) = delete;
  MonolithicFreelistHeap& operator=(const MonolithicFreelistHeap&) = delete;
  ~MonolithicFreelistHeap() { releaseAllChunks(); }

  void* malloc(std::size_t size) {
    if (head_ != nullptr && sizeOf(head_) >= size) {
      FreeNode* node = head_;
      head_ = node->next;
      return node;
    }
    return mallocWithHeader(size);
  }

  void free(void* object) {
    if (object == nullptr) return;
    auto* node = static_cast<FreeNode*>(object);
    node->next = head_;
    head_ = node;
  }

  std::size_t getSize(void* object) const { return sizeOf(object); }
  std::size_t bytesHeld() const { return held_; }
  std::size_t peakBytesHeld() const { return peak_; }

 protected:
  struct FreeNode {
    FreeNode* next;
  };
  static constexpr std::size_t kSizeHeaderBytes = 16;
  static constexpr std::size_t kChunkBytes = 64 * 1024;
  static constexpr std::size_t kOsHeaderBytes = 32;  // OS-block links and sizes, as the top heap keeps

  static std::size_t sizeOf(const void* object) { return static_cast<const std::size_t*>(object)[-1] & ~std::size_t{15}; }

  // A fresh object with a size header, bumped from the current chunk.
  void* mallocWithHeader(std::size_t size) {
    if (!fitsAfterAlignUp(size, kSizeHeaderBytes, kMinAlignment)) return nullptr;
    std::size_t usable = usableBytesFor(size);
    char* block = bump(usable + kSizeHeaderBytes);
    if (block == nullptr) return nullptr;
    char* object = block + kSizeHeaderBytes;
    reinterpret_cast<std::size_t*>(object)[-1] = usable;
    return object;
  }

 private:
  struct alignas(16) ChunkHeader {
    ChunkHeader* next;
  };
  struct alignas(16) OsHeader {
    OsHeader* prev;
    OsHeader* next;
    std::size_t blockBytes;
    std::size_t usableBytes;
  };
  static constexpr std::size_t kPayloadBytes = kChunkBytes - sizeof(ChunkHeader);

  char* bump(std::size_t bytes) {
    if (!fitsAfterAlignUp(bytes, sizeof(ChunkHeader), kMinAlignment)) return nullptr;
    bytes = usableBytesFor(bytes);
    if (bytes <= static_cast<std::size_t>(limit_ - cursor_)) {
      char* object = cursor_;
      cursor_ += bytes;
      return object;
    }
    return bumpNewChunk(bytes);
  }

  // Out of line and cold, as any hand-tuned allocator keeps its OS path.
  [[gnu::noinline, gnu::cold]] char* bumpNewChunk(std::size_t bytes) {
    if (bytes > kPayloadBytes / 4) return newChunk(bytes + sizeof(ChunkHeader));
    char* start = newChunk(kChunkBytes);
    if (start == nullptr) return nullptr;
    cursor_ = start + bytes;
    limit_ = start + kPayloadBytes;
    return start;
  }

  char* newChunk(std::size_t bytes) {
    if (bytes > kMaxRequestBytes - kOsHeaderBytes - kMinAlignment) return nullptr;
    std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    std::size_t mapped = alignUp(usableBytesFor(bytes) + kOsHeaderBytes, page);
    void* block = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (block == MAP_FAILED) return nullptr;
    auto* os = static_cast<OsHeader*>(block);
    *os = OsHeader{nullptr, osBlocks_, mapped, (mapped - kOsHeaderBytes) & ~std::size_t{15}};
    if (osBlocks_ != nullptr) osBlocks_->prev = os;
    osBlocks_ = os;
    held_ += mapped;
    peak_ = std::max(peak_, held_);
    auto* chunk = reinterpret_cast<ChunkHeader*>(os + 1);
    chunk->next = chunks_;
    chunks_ = chunk;
    return reinterpret_cast<char*>(chunk + 1);
  }

  void releaseAllChunks() {
    while (OsHeader* os = osBlocks_) {
      osBlocks_ = os->next;
      held_ -= os->blockBytes;
      munmap(os, os->blockBytes);
    }
    chunks_ = nullptr;
  }

  FreeNode* head_ = nullptr;
  ChunkHeader* chunks_ = nullptr;
  char* cursor_ = nullptr;
  char* limit_ = nullptr;
  OsHeader* osBlocks_ = nullptr;
  std::size_t held_ = 0, peak_ = 0;
};

// Kingsley's power-of-two free lists over the same headers and chunks.
class MonolithicKingsleyHeap : private MonolithicFreelistHeap {
 public:
  static constexpr std::size_t Alignment = kMinAlignment;
  static constexpr std::size_t kNumBins = 29;

  using MonolithicFreelistHeap::bytesHeld;
  using MonolithicFreelistHeap::getSize;
  using MonolithicFreelistHeap::peakBytesHeld;

  void* malloc(std::size_t size) {
    std::size_t sizeClass = classOf(size);
    if (sizeClass >= kNumBins) return mallocWithHeader(size);
    std::size_t classBytes = std::size_t{16} << sizeClass;
    FreeNode* node = bins_[sizeClass];
    if (node != nullptr && sizeOf(node) >= classBytes) {
      bins_[sizeClass] = node->next;
      return node;
    }
    return mallocWithHeader(classBytes);
  }

  void free(void* object) {
    if (object == nullptr) return;
    std::size_t size = sizeOf(object);
    std::size_t sizeClass = classOf(size);
    // An object bigger than asked for belongs to the largest class it can fully serve;
    // one that fits no class stays where it is, as chunk memory does.
    if (sizeClass < kNumBins && (std::size_t{16} << sizeClass) > size) {
      if (sizeClass == 0) return;
      --sizeClass;
    }
    if (sizeClass >= kNumBins) return;
    auto* node = static_cast<FreeNode*>(object);
    node->next = bins_[sizeClass];
    bins_[sizeClass] = node;
  }

 private:
  static std::size_t classOf(std::size_t size) {
    return size <= 16 ? 0 : static_cast<std::size_t>(std::bit_width(size - 1)) - 4;
  }

  FreeNode* bins_[kNumBins] = {};
};

}  // namespace heapkit::bench
