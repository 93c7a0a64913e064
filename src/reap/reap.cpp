// The C library of reaps: a thin layer over heapkit::Reap (include/heapkit/special/Reap.h).
//
// With HEAPKIT_REAP_CHECKS (on unless NDEBUG), every call checks its reap against a
// registry of live reaps, and every object carries an owner tag, so frees to the wrong
// reap and double frees are reported before anything is written. The tag needs room
// the reap's 8-byte header does not have: a checked build asks the reap for 32 bytes
// more per object and hands out the object 32 bytes in, the tag in the word before it
// (the two words at the start hold the reap's list links while the object is free, so a
// freed object keeps its "freed" tag until its block is reused). Release builds hand out
// the reap's objects as they are. Sizes and bytes_in_use count the prefix as the reap's own.
#include "heapkit/reap.h"

#include <cerrno>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <unordered_set>

#include "heapkit/special/Reap.h"

#ifndef HEAPKIT_REAP_CHECKS
#ifdef NDEBUG
#define HEAPKIT_REAP_CHECKS 0
#else
#define HEAPKIT_REAP_CHECKS 1
#endif
#endif

namespace {

using heapkit::Reap;

constexpr std::size_t kPrefixBytes = HEAPKIT_REAP_CHECKS ? 32 : 0;
// The pointer the caller sees, from the reap's object, and back.
void* userOf(void* object) { return object != nullptr ? static_cast<char*>(object) + kPrefixBytes : nullptr; }
void* objectOf(void* user) { return static_cast<char*>(user) - kPrefixBytes; }
bool ownsChunk(Reap* reap, void* user) { return reap->heap().ownsChunk(objectOf(user)); }

Reap* asReap(reap_t* reap) { return reinterpret_cast<Reap*>(reap); }
reap_t* asHandle(Reap* reap) { return reinterpret_cast<reap_t*>(reap); }

reap_error_handler_t errorHandler = nullptr;

[[gnu::format(printf, 1, 2), maybe_unused]] void report(const char* format, ...) {
  char message[256];
  va_list args;
  va_start(args, format);
  std::vsnprintf(message, sizeof message, format, args);
  va_end(args);
  if (errorHandler != nullptr) {
    errorHandler(message);
    return;
  }
  std::fprintf(stderr, "heapkit reap: %s\n", message);
  std::abort();
}

#if HEAPKIT_REAP_CHECKS
constexpr std::uintptr_t kLiveTag = 0x5245'4150'4c49'5645ULL;   // "REAPLIVE"
constexpr std::uintptr_t kFreedTag = 0x5245'4150'4652'4545ULL;  // "REAPFREE"

std::mutex registryLock;
std::unordered_set<const void*>& registry() {
  static auto* reaps = new std::unordered_set<const void*>;  // never destroyed: atexit order
  return *reaps;
}
bool isLive(const void* reap) {
  std::lock_guard<std::mutex> guard(registryLock);
  return registry().count(reap) != 0;
}
void registerReap(Reap* reap) {
  std::lock_guard<std::mutex> guard(registryLock);
  registry().insert(reap);
}
void unregisterTree(Reap* reap) {
  for (Reap* child = reap->firstChild(); child != nullptr; child = child->nextSibling()) unregisterTree(child);
  std::lock_guard<std::mutex> guard(registryLock);
  registry().erase(reap);
}

std::uintptr_t& tagOf(void* user) { return static_cast<std::uintptr_t*>(user)[-1]; }
void tag(Reap* reap, void* user) {
  if (user != nullptr) tagOf(user) = reinterpret_cast<std::uintptr_t>(reap) ^ kLiveTag;
}

// A reap handle every entry point can use; reports and returns nullptr otherwise.
Reap* checkedReap(reap_t* handle, const char* function) {
  if (handle == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  if (!isLive(handle)) {
    report("%s: reap %p is not a live reap (already destroyed, or not made by reap_create)", function,
           static_cast<void*>(handle));
    errno = EINVAL;
    return nullptr;
  }
  return asReap(handle);
}

// True when `object` is a live object of `reap`; reports the misuse otherwise.
bool ownsLive(Reap* reap, void* object, const char* function) {
  std::uintptr_t word = tagOf(object);
  auto self = reinterpret_cast<std::uintptr_t>(reap);
  if (word == (self ^ kLiveTag)) return true;
  if (word == (self ^ kFreedTag)) {
    report("%s: double free of %p in reap %p", function, object, static_cast<void*>(reap));
  } else if (isLive(reinterpret_cast<void*>(word ^ kLiveTag))) {
    report("%s: %p belongs to reap %p, not to reap %p", function, object, reinterpret_cast<void*>(word ^ kLiveTag),
           static_cast<void*>(reap));
  } else if (isLive(reinterpret_cast<void*>(word ^ kFreedTag))) {
    report("%s: %p was already freed, in reap %p, not reap %p", function, object,
           reinterpret_cast<void*>(word ^ kFreedTag), static_cast<void*>(reap));
  } else {
    report("%s: %p was not allocated by reap %p (or its header was overwritten)", function, object,
           static_cast<void*>(reap));
  }
  return false;
}

// Mark an object freed before the reap reuses it; an own-chunk object's memory goes
// back to the parent at once, so there is nothing left to mark.
void markFreed(Reap* reap, void* user) {
  if (!ownsChunk(reap, user)) tagOf(user) = reinterpret_cast<std::uintptr_t>(reap) ^ kFreedTag;
}
#else
void registerReap(Reap*) {}
void unregisterTree(Reap*) {}
void tag(Reap*, void*) {}
Reap* checkedReap(reap_t* handle, const char*) {
  if (handle == nullptr) errno = EINVAL;
  return asReap(handle);
}
bool ownsLive(Reap*, void*, const char*) { return true; }
void markFreed(Reap*, void*) {}
#endif

}  // namespace

extern "C" {

reap_t* reap_create(reap_t* parent) {
  Reap* reap = nullptr;
  if (parent == nullptr) {
    reap = new (std::nothrow) Reap();
  } else {
    Reap* owner = checkedReap(parent, "reap_create");
    if (owner == nullptr) return nullptr;
    reap = owner->createChild();
  }
  if (reap == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  registerReap(reap);
  return asHandle(reap);
}

void reap_destroy(reap_t* handle) {
  if (handle == nullptr) return;
  Reap* reap = checkedReap(handle, "reap_destroy");
  if (reap == nullptr) return;
  unregisterTree(reap);
  delete reap;  // its children too: every reap made here is owned by its parent
}

void reap_free_all(reap_t* handle) {
  if (Reap* reap = checkedReap(handle, "reap_free_all")) reap->clear();
}

void* reap_malloc(reap_t* handle, std::size_t size) {
  Reap* reap = checkedReap(handle, "reap_malloc");
  if (reap == nullptr) return nullptr;
  void* user = size <= SIZE_MAX - kPrefixBytes ? userOf(reap->malloc(size + kPrefixBytes)) : nullptr;
  if (user == nullptr) errno = ENOMEM;
  tag(reap, user);
  return user;
}

void* reap_calloc(reap_t* handle, std::size_t count, std::size_t size) {
  std::size_t bytes;
  if (__builtin_mul_overflow(count, size, &bytes)) {
    errno = ENOMEM;
    return nullptr;
  }
  void* object = reap_malloc(handle, bytes);
  // Reused objects hold old data and fresh chunks come from libc malloc: clear it all.
  if (object != nullptr) std::memset(object, 0, bytes);
  return object;
}

void* reap_realloc(reap_t* handle, void* object, std::size_t size) {
  if (object == nullptr) return reap_malloc(handle, size);
  Reap* reap = checkedReap(handle, "reap_realloc");
  if (reap == nullptr || !ownsLive(reap, object, "reap_realloc")) return nullptr;
  if (size == 0) {
    markFreed(reap, object);
    reap->free(objectOf(object));
    return nullptr;
  }
  bool ownChunk = ownsChunk(reap, object);
  void* moved = size <= SIZE_MAX - kPrefixBytes ? userOf(reap->realloc(objectOf(object), size + kPrefixBytes)) : nullptr;
  if (moved == nullptr) {
    errno = ENOMEM;
    return nullptr;
  }
  if (moved != object) {
    if (!ownChunk) markFreed(reap, object);
    tag(reap, moved);
  }
  return moved;
}

void reap_free(reap_t* handle, void* object) {
  if (object == nullptr) return;
  Reap* reap = checkedReap(handle, "reap_free");
  if (reap == nullptr || !ownsLive(reap, object, "reap_free")) return;
  markFreed(reap, object);
  reap->free(objectOf(object));
}

std::size_t reap_usable_size(reap_t* handle, void* object) {
  if (object == nullptr) return 0;
  Reap* reap = checkedReap(handle, "reap_usable_size");
  if (reap == nullptr || !ownsLive(reap, object, "reap_usable_size")) return 0;
  return reap->getSize(objectOf(object)) - kPrefixBytes;
}

int reap_get_stats(reap_t* handle, reap_stats_t* stats) {
  Reap* reap = checkedReap(handle, "reap_get_stats");
  if (reap == nullptr || stats == nullptr) {
    errno = EINVAL;
    return -1;
  }
  stats->bytes_in_use = reap->bytesInUse();
  stats->footprint = reap->footprint();
  stats->peak_footprint = reap->peakFootprint();
  return 0;
}

void reap_set_error_handler(reap_error_handler_t handler) { errorHandler = handler; }

int reap_checks_enabled(void) { return HEAPKIT_REAP_CHECKS; }

// The paper's interface.
void reapCreate(void** reap, void** parent) {
  if (reap == nullptr) return;
  *reap = reap_create(parent != nullptr ? static_cast<reap_t*>(*parent) : nullptr);
}

void reapDestroy(void** reap) {
  if (reap == nullptr) return;
  reap_destroy(static_cast<reap_t*>(*reap));
  *reap = nullptr;
}

void reapFreeAll(void** reap) {
  if (reap != nullptr) reap_free_all(static_cast<reap_t*>(*reap));
}

void* reapMalloc(void** reap, std::size_t size) {
  if (reap == nullptr) {
    errno = EINVAL;
    return nullptr;
  }
  return reap_malloc(static_cast<reap_t*>(*reap), size);
}

void reapFree(void** reap, void* object) {
  if (reap != nullptr) reap_free(static_cast<reap_t*>(*reap), object);
}

}  // extern "C"
