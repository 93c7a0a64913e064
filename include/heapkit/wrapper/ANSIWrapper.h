// ANSIWrapper: C semantics for any composition. Whatever the heap below does with odd
// requests, the layer above behaves like glibc's malloc family:
//  - malloc(0) returns a unique pointer; every pointer is at least 16-byte aligned;
//  - requests over PTRDIFF_MAX (SIZE_MAX included) fail with errno = ENOMEM, as does
//    any failure of the heap below;
//  - calloc and reallocarray check count * size for overflow; calloc zeroes (only what
//    the heap's bytesToClear says may hold old data, when it has one);
//  - realloc grows, shrinks (in place when the block stays at least half used), takes
//    NULL like malloc, and with size 0 frees and returns NULL as glibc does; a moved
//    block's pages that hold only zeros are not written where the new block's pages read
//    as zero already (the heap's bytesToClear), as glibc's mremap leaves them untouched;
//  - memalign/aligned_alloc/posix_memalign/valloc/pvalloc for any power-of-two alignment.
//
// Aligned objects: a heap that has memalign(alignment, size) itself (ScalableHeap) is
// used as is. Over a heap that keeps size words (SizeWordHeap: Kingsley, Lea, anything
// over SizeHeap or CoalesceableHeap), the layer over-allocates and, in the word before
// the aligned pointer, writes its offset from the real object with the top bit set. A
// size word never has that bit (no object exceeds PTRDIFF_MAX), so free and getSize can
// tell the two apart and reach the real object.
#pragma once

#include <errno.h>
#include <unistd.h>

#include <bit>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "heapkit/core/AlignedObjects.h"
#include "heapkit/core/HeapContract.h"
#include "heapkit/core/PageSize.h"
#include "heapkit/core/SizeWord.h"

namespace heapkit {

template <SizedHeap Super>
class ANSIWrapper : public Super {
  static constexpr bool kNativeMemalign = requires(Super& heap, std::size_t n) {
    { heap.memalign(n, n) } -> std::same_as<void*>;
  };
  static_assert(kNativeMemalign || SizeWordHeap<Super>,
                "ANSIWrapper needs a heap with memalign(alignment, size) or one that keeps size words");

 public:
  static constexpr std::size_t Alignment = Super::Alignment;

  using Super::Super;
  ANSIWrapper() = default;

  void* malloc(std::size_t size) {
    // One comparison on the common path for both odd cases: 0 and sizes over PTRDIFF_MAX.
    if (size - 1 >= kMaxRequestBytes) [[unlikely]] return size == 0 ? malloc(1) : fail(ENOMEM);
    void* object = Super::malloc(size);
    return object != nullptr ? object : fail(ENOMEM);
  }

  void free(void* object) {
    if (object == nullptr) return;
    Super::free(realObject(object));
  }

  // The heap's inline paths, when it has them (ScalableHeap::mallocInline, freeInline),
  // for the malloc wrapper to run first: `otherwise` gets every request they do not take,
  // size 0, sizes over PTRDIFF_MAX and null included, and is expected to come back here.
  // Not with aligned objects of ours (kNativeMemalign: pointers are the heap's own).
  template <class Otherwise>
  [[gnu::always_inline]] void* mallocInline(std::size_t size, Otherwise otherwise)
    requires(kNativeMemalign && requires(Super& heap) { heap.mallocInline(size, otherwise); })
  {
    return Super::mallocInline(size, otherwise);
  }
  template <class Otherwise>
  [[gnu::always_inline]] void freeInline(void* object, Otherwise otherwise)
    requires(kNativeMemalign && requires(Super& heap) { heap.freeInline(object, otherwise); })
  {
    Super::freeInline(object, otherwise);
  }
  // What freeInline passed on (not null) goes to the heap's slow path straight.
  void freeAfterInline(void* object)
    requires(kNativeMemalign && requires(Super& heap) { heap.freeAfterInline(object); })
  {
    Super::freeAfterInline(object);
  }

  std::size_t getSize(void* object) {
    if (object == nullptr) return 0;
    void* real = realObject(object);
    return Super::getSize(real) - static_cast<std::size_t>(static_cast<char*>(object) - static_cast<char*>(real));
  }

  void* calloc(std::size_t count, std::size_t size) {
    std::size_t bytes;
    if (__builtin_mul_overflow(count, size, &bytes)) return fail(ENOMEM);
    void* object = malloc(bytes);
    if (object != nullptr) {
      // A heap that knows which of the object's pages read as zero already (fresh from the
      // OS, or purged) clears only the rest: the pages a program leaves untouched in a big
      // calloc'd table stay out of its resident set, as glibc's calloc leaves them.
      if constexpr (simulatesData<Super>()) {
      } else if constexpr (ClearsOnlyOldDataHeap<Super>) {
        std::memset(object, 0, Super::bytesToClear(object, bytes));
      } else {
        std::memset(object, 0, bytes);
      }
    }
    return object;
  }

  void* realloc(void* object, std::size_t size) {
    if (object == nullptr) return malloc(size);
    if (size == 0) {
      free(object);
      return nullptr;
    }
    if (size > kMaxRequestBytes) return fail(ENOMEM);
    std::size_t old = getSize(object);
    // Keep the block while it is at least half used: no copy, little waste.
    if (size <= old && size >= old / 2) return object;
    void* moved = malloc(size);
    if (moved == nullptr) return nullptr;  // the old block stays valid, as C requires
    if constexpr (!simulatesData<Super>()) copyMoved(moved, object, size < old ? size : old);
    free(object);
    return moved;
  }

  void* reallocarray(void* object, std::size_t count, std::size_t size) {
    std::size_t bytes;
    if (__builtin_mul_overflow(count, size, &bytes)) return fail(ENOMEM);
    return realloc(object, bytes);
  }

  // glibc's memalign: an alignment that is not a power of two is rounded up to one.
  void* memalign(std::size_t alignment, std::size_t size) {
    if (alignment > SIZE_MAX / 2 + 1) return fail(EINVAL);
    if (!isPowerOfTwo(alignment)) alignment = alignment <= 1 ? 1 : std::bit_ceil(alignment);
    if (alignment <= Alignment) return malloc(size);
    if (size > kMaxRequestBytes || alignment > kMaxRequestBytes) return fail(ENOMEM);
    void* object = alignedMalloc(alignment, size == 0 ? 1 : size);
    return object != nullptr ? object : fail(ENOMEM);
  }

  // C11: the alignment must be a power of two (as glibc 2.38 checks), else EINVAL.
  void* aligned_alloc(std::size_t alignment, std::size_t size) {
    if (!isPowerOfTwo(alignment)) return fail(EINVAL);
    return memalign(alignment, size);
  }

  // POSIX: returns the error instead of setting errno, and leaves *result alone on error.
  int posix_memalign(void** result, std::size_t alignment, std::size_t size) {
    if (!isPowerOfTwo(alignment) || alignment % sizeof(void*) != 0) return EINVAL;
    int saved = errno;
    void* object = memalign(alignment, size);
    if (object == nullptr) {
      errno = saved;
      return ENOMEM;
    }
    *result = object;
    return 0;
  }

  void* valloc(std::size_t size) { return memalign(pageSize(), size); }

  // Rounds the size up to whole pages; pvalloc(0) is one page, as in glibc.
  void* pvalloc(std::size_t size) {
    std::size_t page = pageSize();
    if (size > kMaxRequestBytes - page) return fail(ENOMEM);
    return memalign(page, size == 0 ? page : alignUp(size, page));
  }

 private:
  static void* fail(int error) {
    errno = error;
    return nullptr;
  }

  // realloc's copy into a block just handed out. Past what the heap's bytesToClear says
  // may hold old data, the new block's pages read as zero (fresh from the OS, or purged),
  // and an old page holding only zeros (never written: reading it maps the kernel's zero
  // page, no memory) is not copied, so it does not become resident. A buffer grown by a
  // chain of reallocs before the program fills it (sqlite3 grows one from 16 KiB to 2 MiB
  // in seven calls in a row) then costs only the pages the program writes, as under
  // glibc, whose mremap moves a mapped block's pages without touching them.
  void copyMoved(void* to, const void* from, std::size_t bytes) {
    std::size_t mayHoldOldData = bytes;
    if constexpr (ClearsOnlyOldDataHeap<Super>) mayHoldOldData = Super::bytesToClear(to, bytes);
    auto* target = static_cast<char*>(to);
    auto* source = static_cast<const char*>(from);
    std::size_t page = pageSize();
    // Up to the page boundary after the old data, a plain copy.
    auto zeroPagesFrom = static_cast<std::size_t>(
        alignUp(reinterpret_cast<std::uintptr_t>(target) + mayHoldOldData, page) - reinterpret_cast<std::uintptr_t>(target));
    std::size_t copied = zeroPagesFrom < bytes ? zeroPagesFrom : bytes;
    std::memcpy(target, source, copied);
    for (std::size_t at = copied; at < bytes; at += page) {
      std::size_t chunk = bytes - at < page ? bytes - at : page;
      if (!allZero(source + at, chunk)) std::memcpy(target + at, source + at, chunk);
    }
  }

  static bool allZero(const char* bytes, std::size_t count) {
    std::size_t i = 0;
    for (; i + sizeof(std::uint64_t) <= count; i += sizeof(std::uint64_t)) {
      std::uint64_t word;
      std::memcpy(&word, bytes + i, sizeof word);
      if (word != 0) return false;
    }
    for (; i < count; ++i)
      if (bytes[i] != 0) return false;
    return true;
  }

  void* alignedMalloc(std::size_t alignment, std::size_t size) {
    if constexpr (kNativeMemalign) {
      return Super::memalign(alignment, size);
    } else {
      if (size > kMaxRequestBytes - alignment) return nullptr;
      void* base = Super::malloc(size + alignment - kMinAlignment);
      if (base == nullptr) return nullptr;
      return alignedobjects::alignWithin(base, alignment);
    }
  }

  static void* realObject(void* object) {
    if constexpr (kNativeMemalign) {
      return object;
    } else {
      return alignedobjects::realObject(object);
    }
  }
};

}  // namespace heapkit
