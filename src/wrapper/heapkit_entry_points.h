/* The interface between heapkit's malloc wrapper (wrapper.cpp) and whatever provides the
 * memory: a heap-layers composition (heap_provider.cpp.in), the trace recorder, or a
 * user's own code. wrapper.cpp defines the whole malloc family of a process (C, POSIX,
 * C11, glibc extras, C++ new/delete in every form) on top of these few functions; see
 * docs/malloc-replacement.md.
 *
 * The wrapper does the C semantics, so a provider does not have to: it handles NULL and
 * size 0, sizes over PTRDIFF_MAX, calloc's overflow check and zeroing, errno, alignment
 * checks, posix_memalign's return codes, new_handler loops and bad_alloc, and serves
 * requests made while heapkit_ep_init() runs (dlsym, pthread_atfork) from a static
 * bootstrap buffer. It calls heapkit_ep_init() once, before any other entry point.
 *
 * Link the provider into the same shared library or program as wrapper.cpp. */
#ifndef HEAPKIT_ENTRY_POINTS_H
#define HEAPKIT_ENTRY_POINTS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- required ---------------------------------------------------------------------- */

/* Sets the provider up (placement-new the heap, dlsym the next malloc, ...). May call
 * malloc: those calls are served from the bootstrap buffer. */
void heapkit_ep_init(void);

/* 0 < size <= PTRDIFF_MAX. Returns at least 16-byte aligned memory, or NULL. */
void* heapkit_ep_malloc(size_t size);

/* ptr is non-NULL and came from this provider's malloc, memalign, realloc or calloc. */
void heapkit_ep_free(void* ptr);

/* alignment is a power of two above 16 and at most PTRDIFF_MAX; 0 < size <= PTRDIFF_MAX.
 * Returns NULL on failure. free and usable_size must accept the pointer. */
void* heapkit_ep_memalign(size_t alignment, size_t size);

/* ptr is non-NULL and live: the bytes usable from ptr, at least what was requested. */
size_t heapkit_ep_usable_size(void* ptr);

/* ---- optional: weak, the wrapper falls back when they are absent ------------------- */

/* ptr non-NULL and live, 0 < size <= PTRDIFF_MAX. NULL on failure, ptr left intact.
 * Fallback: keep the block when it is big enough and at least half used, else
 * malloc + memcpy(usable_size) + free. */
void* heapkit_ep_realloc(void* ptr, size_t size) __attribute__((weak));

/* count * size does not overflow and is at most PTRDIFF_MAX; returns zeroed memory.
 * Fallback: malloc + memset. */
void* heapkit_ep_calloc(size_t count, size_t size) __attribute__((weak));

/* Fork: prepare takes every lock the provider has; parent releases them; child makes
 * the provider usable by the one thread that exists in the child. Registered with
 * pthread_atfork during initialisation, so prepare runs after every handler the program
 * registers (and those may still allocate). */
void heapkit_ep_fork_prepare(void) __attribute__((weak));
void heapkit_ep_fork_parent(void) __attribute__((weak));
void heapkit_ep_fork_child(void) __attribute__((weak));

#ifdef __cplusplus
}

/* ---- optional, C++, in the wrapper's translation unit ------------------------------ */
namespace heapkit::entry_points {
/* A provider that #includes wrapper.cpp (heap_provider.cpp.in does) may specialise
 * InlinePaths<0>, before the #include, with kProvided = true and
 *   template <class Otherwise> static void* malloc(size_t size, Otherwise otherwise);
 *   template <class Otherwise> static void free(void* ptr, Otherwise otherwise);
 * which malloc and free (and operator new and delete) run first, inline, for any size
 * and any pointer (0 and NULL included), even before heapkit_ep_init: whatever they do
 * not take they must pass to otherwise(size) or otherwise(ptr), the wrapper's usual path
 * (a jump: the wrapper passes a function). free's may read the 64 KiB-aligned block
 * that holds ptr: the bootstrap buffer is 64 KiB-aligned and a multiple of 64 KiB, so a
 * pointer into it reads only it. It may also have
 *   static void freeAfterInline(void* ptr);
 * which then gets what free's passed to otherwise, but for NULL, the bootstrap's
 * pointers and frees during fork handlers (the wrapper's own cases), instead of
 * heapkit_ep_free: the provider's free without the checks its inline path made already.
 * libheapkit.so's are ScalableHeap's mallocInline, freeInline and freeAfterInline
 * (docs/malloc-replacement.md). */
template <int = 0>
struct InlinePaths {
  static constexpr bool kProvided = false;
};
}  // namespace heapkit::entry_points
#endif

#endif
