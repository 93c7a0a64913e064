// The shared body of the top heaps that take one OS (or libc) block per request:
// a 32-byte header links every block so that the destructor can return all of them,
// and the footprint counts exactly what the source handed out.
#pragma once

#include <cstddef>
#include <cstdint>

#include "heapkit/core/Footprint.h"
#include "heapkit/core/HeapContract.h"
#include "heapkit/core/OsBlockList.h"
#include "heapkit/core/SizeWord.h"

namespace heapkit {

// Source: static void* obtain(std::size_t& bytes) may round bytes up and returns nullptr
// on failure; static void release(void* block, std::size_t bytes); optionally static void
// purge(void* pages, std::size_t bytes), which gives pages back to the OS (without it,
// purge counts the pages out of the resident bytes and leaves them where they are).
template <class Source>
class TrackedOsHeap {
 public:
  static constexpr std::size_t Alignment = kMinAlignment;
  static constexpr bool KeepsSizeWord = true;
  // A Source that purges gives pages back (they read as zero again) and maps fresh ones.
  static constexpr bool PagesReadZero = requires(void* pages, std::size_t bytes) { Source::purge(pages, bytes); };

  TrackedOsHeap() = default;
  TrackedOsHeap(const TrackedOsHeap&) = delete;
  TrackedOsHeap& operator=(const TrackedOsHeap&) = delete;

  ~TrackedOsHeap() {
    while (OsBlockList::Header* header = blocks_.popFront()) releaseBlock(header);
  }

  void* malloc(std::size_t size) {
    constexpr std::size_t kHeader = sizeof(OsBlockList::Header);
    // Like glibc, never ask for more than PTRDIFF_MAX: pointer differences must work.
    if (size > kMaxRequestBytes - kHeader - kMinAlignment) return nullptr;
    std::size_t bytes = usableBytesFor(size) + kHeader;
    void* block = Source::obtain(bytes);
    if (block == nullptr) return nullptr;
    auto* header = static_cast<OsBlockList::Header*>(block);
    header->blockBytes = bytes;
    header->usableBytes = (bytes - kHeader) & ~std::size_t{15};
    blocks_.push(header);
    footprint_.add(bytes);
    return OsBlockList::objectOf(header);
  }

  void free(void* object) {
    if (object == nullptr) return;
    OsBlockList::Header* header = OsBlockList::headerOf(object);
    blocks_.remove(header);
    releaseBlock(header);
  }

  std::size_t getSize(void* object) const { return sizeword::size(object); }

  std::size_t bytesHeld() const { return footprint_.held(); }
  std::size_t peakBytesHeld() const { return footprint_.peak(); }

  // The top-heap contract's purge and reuse (core/HeapContract.h, PurgingHeap).
  void purge(void* pages, std::size_t bytes) {
    if constexpr (requires { Source::purge(pages, bytes); }) Source::purge(pages, bytes);
    footprint_.purge(bytes);
  }
  void reuse(void* /*pages*/, std::size_t bytes) { footprint_.reuse(bytes); }
  // Pages of the block obtained last, never touched: out of the resident count without
  // having raised its high-water mark (a new segment's; core/Footprint.h).
  void purgeUntouched(void* pages, std::size_t bytes) {
    if constexpr (requires { Source::purge(pages, bytes); }) Source::purge(pages, bytes);
    footprint_.purgeUntouched(bytes);
  }
  // Purged pages of a block about to be freed: they go back with it, never resident again
  // (instead of reuse before free, which would raise the resident high-water mark).
  void forgetPurged(void* /*pages*/, std::size_t bytes) { footprint_.forgetPurged(bytes); }
  std::size_t residentBytes() const { return footprint_.resident(); }
  std::size_t peakResidentBytes() const { return footprint_.peakResident(); }

 private:
  void releaseBlock(OsBlockList::Header* header) {
    std::size_t bytes = header->blockBytes;
    footprint_.remove(bytes);
    Source::release(header, bytes);
  }

  OsBlockList blocks_;
  Footprint footprint_;
};

}  // namespace heapkit
