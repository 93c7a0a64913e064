/* heapkit obstacks: a C API over ObstackHeap (include/heapkit/special/ObstackHeap.h)
 * with the semantics of GNU obstacks, under its own names so that it can sit beside
 * <obstack.h>. Link with -lheapkit-obstack.
 *
 * Objects are built by growing the current object (hk_obstack_grow, _1grow, _blank) and
 * sealed with hk_obstack_finish; hk_obstack_alloc and _copy do both. Objects are aligned
 * to 16 bytes. hk_obstack_free(ob, object) frees that object and everything allocated
 * after it. Functions returning a pointer return NULL with errno ENOMEM when memory (or
 * the size) is too large; functions returning int return 0 on success, -1 otherwise.
 */
#ifndef HEAPKIT_OBSTACK_H
#define HEAPKIT_OBSTACK_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct hk_obstack {
  void* impl; /* owned by the library */
} hk_obstack;

/* 0 on success; -1 with errno ENOMEM. Chunks come from libc malloc. */
int hk_obstack_init(hk_obstack* ob);
/* Free every object and the obstack's own state; init again to reuse. */
void hk_obstack_destroy(hk_obstack* ob);

void* hk_obstack_alloc(hk_obstack* ob, size_t size);
void* hk_obstack_copy(hk_obstack* ob, const void* data, size_t size);
void* hk_obstack_copy0(hk_obstack* ob, const void* data, size_t size); /* adds a '\0' */

/* Free `object` and everything allocated after it. -1 with errno EINVAL when `object`
 * is not in this obstack (nothing is freed). NULL frees everything, as in GNU obstacks. */
int hk_obstack_free(hk_obstack* ob, void* object);
/* Free every object; the obstack stays usable. */
void hk_obstack_free_all(hk_obstack* ob);

/* Growing the current object; it may move until hk_obstack_finish. */
int hk_obstack_grow(hk_obstack* ob, const void* data, size_t size);
int hk_obstack_grow0(hk_obstack* ob, const void* data, size_t size);
int hk_obstack_1grow(hk_obstack* ob, char c);
int hk_obstack_blank(hk_obstack* ob, size_t size);
void* hk_obstack_finish(hk_obstack* ob);

size_t hk_obstack_object_size(const hk_obstack* ob);
void* hk_obstack_base(const hk_obstack* ob);
void* hk_obstack_next_free(const hk_obstack* ob);
size_t hk_obstack_room(const hk_obstack* ob);

#ifdef __cplusplus
}
#endif

#endif /* HEAPKIT_OBSTACK_H */
