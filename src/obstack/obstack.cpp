// The C obstack API: a thin layer over ObstackHeap, with chunks from libc malloc.
#include "heapkit/obstack.h"

#include <cerrno>
#include <new>

#include "heapkit/special/ObstackHeap.h"
#include "heapkit/top/MallocHeap.h"

namespace {

// 4 KiB chunks, as glibc's default (4064 there, counting malloc's header); MallocHeap
// adds its own 32-byte header and counts the footprint.
using Obstack = heapkit::ObstackHeap<4064, heapkit::MallocHeap>;

Obstack& of(const hk_obstack* ob) { return *static_cast<Obstack*>(ob->impl); }

void* orNoMemory(void* object) {
  if (object == nullptr) errno = ENOMEM;
  return object;
}
int status(bool ok) {
  if (ok) return 0;
  errno = ENOMEM;
  return -1;
}

}  // namespace

extern "C" {

int hk_obstack_init(hk_obstack* ob) {
  if (ob == nullptr) {
    errno = EINVAL;
    return -1;
  }
  ob->impl = new (std::nothrow) Obstack();
  return status(ob->impl != nullptr);
}

void hk_obstack_destroy(hk_obstack* ob) {
  if (ob == nullptr) return;
  delete static_cast<Obstack*>(ob->impl);
  ob->impl = nullptr;
}

void* hk_obstack_alloc(hk_obstack* ob, size_t size) { return orNoMemory(of(ob).alloc(size)); }
void* hk_obstack_copy(hk_obstack* ob, const void* data, size_t size) { return orNoMemory(of(ob).copy(data, size)); }
void* hk_obstack_copy0(hk_obstack* ob, const void* data, size_t size) { return orNoMemory(of(ob).copy0(data, size)); }

int hk_obstack_free(hk_obstack* ob, void* object) {
  if (object == nullptr) {
    of(ob).clear();
    return 0;
  }
  if (of(ob).freeTo(object)) return 0;
  errno = EINVAL;
  return -1;
}

void hk_obstack_free_all(hk_obstack* ob) { of(ob).clear(); }

int hk_obstack_grow(hk_obstack* ob, const void* data, size_t size) { return status(of(ob).grow(data, size)); }
int hk_obstack_grow0(hk_obstack* ob, const void* data, size_t size) { return status(of(ob).grow0(data, size)); }
int hk_obstack_1grow(hk_obstack* ob, char c) { return status(of(ob).grow1(c)); }
int hk_obstack_blank(hk_obstack* ob, size_t size) { return status(of(ob).blank(size)); }
void* hk_obstack_finish(hk_obstack* ob) { return orNoMemory(of(ob).finish()); }

size_t hk_obstack_object_size(const hk_obstack* ob) { return of(ob).objectSize(); }
void* hk_obstack_base(const hk_obstack* ob) { return of(ob).base(); }
void* hk_obstack_next_free(const hk_obstack* ob) { return of(ob).nextFree(); }
size_t hk_obstack_room(const hk_obstack* ob) { return of(ob).room(); }

}  // extern "C"
