/* heapkit reaps: region speed with per-object free (Berger, Zorn and McKinley,
 * "Reconsidering Custom Memory Allocation", OOPSLA 2002), as a C library.
 * Link with -lheapkit-reap (static or shared).
 *
 * A reap hands out objects by bumping a pointer through chunks of growing size, like a
 * region, and frees all of them at once (reap_free_all, reap_destroy); unlike a region,
 * any single object can also be freed. Freed memory serves later requests of any size,
 * as in a general-purpose allocator: from the first reap_free on, freed objects go to a
 * Lea-style heap over the reap's chunks, which merges free neighbours and splits a
 * bigger free block for a smaller request; objects freed at the end of the chunk being
 * filled go back to it. Chunks are kept until reap_free_all or reap_destroy. Reaps
 * nest: a child takes its chunks from the same source as its parent; freeing all of a
 * parent frees all of its children (they stay usable), and destroying a parent destroys
 * its children.
 *
 * A reap is not thread-safe; distinct root reaps may be used from distinct threads.
 * Objects are aligned to 16 bytes.
 *
 * Errors: functions that return a pointer return NULL with errno set (ENOMEM when
 * memory or the size is too large, EINVAL for a NULL reap). In a debug build of the
 * library (NDEBUG not defined) misuse is reported with a message and stops the program
 * (or calls the handler set with reap_set_error_handler): a pointer freed to a reap that
 * did not allocate it, a double free, a reap used after reap_destroy.
 */
#ifndef HEAPKIT_REAP_H
#define HEAPKIT_REAP_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct reap reap_t;

/* A new reap, a child of `parent` (NULL for a root reap). NULL with errno on failure. */
reap_t* reap_create(reap_t* parent);
/* Free every object of the reap and destroy it and all its descendants. NULL is ignored. */
void reap_destroy(reap_t* reap);
/* Free every object of the reap and of its descendants at once; all stay usable. */
void reap_free_all(reap_t* reap);

void* reap_malloc(reap_t* reap, size_t size);
/* Zeroed; NULL with errno ENOMEM when count * size overflows. */
void* reap_calloc(reap_t* reap, size_t count, size_t size);
/* As realloc(3): NULL object allocates; size 0 frees the object and returns NULL; on
 * failure NULL is returned and the object is left as it was. */
void* reap_realloc(reap_t* reap, void* object, size_t size);
/* Free one object of this reap; NULL is ignored. */
void reap_free(reap_t* reap, void* object);
/* Bytes the object may use (at least what was asked for). */
size_t reap_usable_size(reap_t* reap, void* object);

typedef struct reap_stats {
  size_t bytes_in_use;   /* bytes of this reap's live objects, headers included
                            (8 bytes each; 32 more in a debug build); not its children's */
  size_t footprint;      /* bytes of chunks the reap holds from its parent or the OS */
  size_t peak_footprint; /* high-water mark of footprint */
} reap_stats_t;
/* 0 on success, -1 with errno EINVAL for a NULL reap. */
int reap_get_stats(reap_t* reap, reap_stats_t* stats);

/* Called with a one-line description of a misuse found by a debug build. The default
 * prints it to stderr and aborts. NULL restores the default. */
typedef void (*reap_error_handler_t)(const char* message);
void reap_set_error_handler(reap_error_handler_t handler);
/* 1 when this build of the library checks for misuse, else 0. */
int reap_checks_enabled(void);

/* The paper's interface, for code written against it. A reap is a void* variable whose
 * address is passed; `parent` is NULL or the address of the parent's variable.
 * reapCreate sets *reap to NULL on failure; reapDestroy sets it to NULL. */
void reapCreate(void** reap, void** parent);
void reapDestroy(void** reap);
void reapFreeAll(void** reap);
void* reapMalloc(void** reap, size_t size);
void reapFree(void** reap, void* object);

#ifdef __cplusplus
}
#endif

#endif /* HEAPKIT_REAP_H */
