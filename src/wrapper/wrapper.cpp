// The one place that defines the malloc family. Every heapkit preload library (and any
// program that links an allocator in) consists of this file plus a provider of the entry
// points in heapkit_entry_points.h. The C semantics come from ANSIWrapper over a heap
// whose calls are the entry points, so a provider only ever sees valid requests.
//
// Before the provider is initialised (the first call of any function here), and while
// heapkit_ep_init() runs on this thread, requests are served from a static bootstrap
// buffer; free() ignores pointers into it. That covers allocations by the dynamic linker,
// by dlsym() in a provider that forwards to another malloc, and by fork handlers that run
// while this thread holds the provider's locks (see "fork handlers" below).
//
// Compiled without exceptions and linked without the C++ runtime: see "C++ without a C++
// runtime of our own" below for how operator new still calls the new_handler and throws.
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <sys/single_threaded.h>  // __libc_single_threaded (glibc 2.32)
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <atomic>
#include <initializer_list>
#include <new>

#include "heapkit/core/PageSize.h"
#include "heapkit/wrapper/ANSIWrapper.h"
#include "heapkit_entry_points.h"

namespace {

// The entry points as a heap, so that ANSIWrapper's semantics apply to every provider.
struct EntryPointHeap {
  static constexpr std::size_t Alignment = heapkit::kMinAlignment;
  void* malloc(std::size_t size) { return heapkit_ep_malloc(size); }
  void free(void* ptr) { heapkit_ep_free(ptr); }
  std::size_t getSize(void* ptr) { return heapkit_ep_usable_size(ptr); }
  void* memalign(std::size_t alignment, std::size_t size) { return heapkit_ep_memalign(alignment, size); }
};
static_assert(heapkit::SizedHeap<EntryPointHeap>);

constinit heapkit::ANSIWrapper<EntryPointHeap> family;

// ---- initialisation and the bootstrap buffer -------------------------------------------

enum : int { kUninitialized, kInitializing, kReady };
constinit std::atomic<int> state{kUninitialized};
constinit thread_local bool initializingHere = false;

// 64 KiB-aligned and a multiple of 64 KiB: a provider's inline free may read the 64 KiB
// block that holds a pointer it is given (heapkit_entry_points.h, InlinePaths), and a
// pointer into the bootstrap must lead it to no memory but this.
constexpr std::size_t kBootstrapBytes = 256 * 1024;
alignas(65536) unsigned char bootstrap[kBootstrapBytes];
constinit std::atomic<std::size_t> bootstrapUsed{0};

bool inBootstrap(const void* ptr) {
  auto address = reinterpret_cast<std::uintptr_t>(ptr);
  auto start = reinterpret_cast<std::uintptr_t>(bootstrap);
  return address - start < kBootstrapBytes;
}

// Each bootstrap object is preceded by its size; it is never reused.
void* bootstrapAlloc(std::size_t alignment, std::size_t size) {
  if (alignment < 16) alignment = 16;
  if (size > kBootstrapBytes || alignment > kBootstrapBytes) {
    errno = ENOMEM;
    return nullptr;
  }
  std::size_t used = bootstrapUsed.load(std::memory_order_relaxed);
  std::size_t object;
  do {
    object = heapkit::alignUp(used + 16, alignment);
    if (object + size > kBootstrapBytes) {
      errno = ENOMEM;
      return nullptr;
    }
  } while (!bootstrapUsed.compare_exchange_weak(used, heapkit::alignUp(object + size, 16), std::memory_order_relaxed));
  reinterpret_cast<std::size_t*>(bootstrap + object)[-1] = size;
  return bootstrap + object;  // static storage: already zero, so calloc needs nothing more
}

std::size_t bootstrapSize(const void* ptr) { return static_cast<const std::size_t*>(ptr)[-1]; }

// ---- fork handlers, registered when the process gets a second thread --------------------
//
// The provider's fork hooks take its locks before fork() and release them after, so that
// the child inherits no lock held by a thread it does not have. Only another thread can
// hold one when a thread forks, so for a provider with inline paths (libheapkit.so's,
// which take most calls and no lock) they are registered (pthread_atfork) when a call that
// may take one first finds the process multi-threaded: a single-threaded program never
// calls pthread_atfork, whose code shares no page with anything else a program runs
// before it forks (glibc's malloc reaches its fork hooks from fork() itself), and cost
// every program under the library up to 128 KiB of peak RSS (libc's pages mapped around
// it). A thread that finds the process multi-threaded registers them before it takes a
// lock; pthread_atfork waits while a fork runs its handlers (glibc holds its atfork lock
// from the prepare handlers to the child's and parent's), so a thread either registered
// before a fork began, or takes no lock until it is over.
//
// Registered late, they may run before prepare handlers the program registered earlier
// (prepare handlers run last registered first), and such a handler may allocate while
// this thread holds the provider's locks: from our prepare handler until the parent's or
// child's, this thread allocates from the bootstrap buffer (256 KiB for the process's
// life: ENOMEM beyond), keeps what it frees, and fails to move a block with realloc
// (ENOMEM, the block intact). A provider without inline paths registers them when it is
// initialised, first, as before: every call of its would pay the checks (Lea's cfrac: 5%
// more instructions).
constexpr bool kLazyForkHandlers = heapkit::entry_points::InlinePaths<>::kProvided;
constinit std::atomic<bool> forkHandlersRegistered{false};
constinit thread_local bool forkingHere = false;
pthread_once_t forkHandlersOnce = PTHREAD_ONCE_INIT;

void forkPrepare() {
  heapkit_ep_fork_prepare();
  forkingHere = true;
}
void forkParent() {
  forkingHere = false;
  heapkit_ep_fork_parent();
}
void forkChild() {
  forkingHere = false;
  heapkit_ep_fork_child();
}

void registerForkHandlers() {
  if (heapkit_ep_fork_prepare || heapkit_ep_fork_parent || heapkit_ep_fork_child)
    pthread_atfork(heapkit_ep_fork_prepare ? forkPrepare : nullptr, heapkit_ep_fork_parent ? forkParent : nullptr,
                   heapkit_ep_fork_child ? forkChild : nullptr);
  forkHandlersRegistered.store(true, std::memory_order_release);
}

bool singleThreaded() { return __libc_single_threaded; }

// Before every call into the provider that may take one of its locks (its inline paths
// take none): registers the fork handlers when they are due, and is true while this
// thread runs fork handlers that came before ours and holds the provider's locks, when
// the call must not enter the provider.
inline bool forkingWithLocks() {
  if constexpr (kLazyForkHandlers) {
    if (forkHandlersRegistered.load(std::memory_order_acquire)) [[likely]] return forkingHere;
    if (!singleThreaded()) pthread_once(&forkHandlersOnce, registerForkHandlers);
  }
  return false;  // no fork ran our handlers yet
}

[[gnu::noinline]] bool initialize() {
  if (initializingHere) return false;  // re-entered from heapkit_ep_init: bootstrap
  int expected = kUninitialized;
  if (state.compare_exchange_strong(expected, kInitializing, std::memory_order_acq_rel)) {
    initializingHere = true;
    heapkit_ep_init();
    if (!kLazyForkHandlers) registerForkHandlers();
    initializingHere = false;
    state.store(kReady, std::memory_order_release);
    return true;
  }
  while (state.load(std::memory_order_acquire) != kReady) sched_yield();
  return true;
}

// True when the provider may be called; false when this call must use the bootstrap.
inline bool ready() {
  if (state.load(std::memory_order_acquire) == kReady) [[likely]] return true;
  return initialize();
}

// ---- the family, once, for both the C and the C++ entry points -----------------------------

// Out of line, so that the common case keeps no register alive across a call.
[[gnu::noinline]] void* mallocBeforeReady(std::size_t size) {
  if (!initialize()) return bootstrapAlloc(16, size);
  if (forkingWithLocks()) return bootstrapAlloc(16, size);
  return family.malloc(size);
}

inline void* doMallocUsually(std::size_t size) {
  if (state.load(std::memory_order_acquire) == kReady) [[likely]] {
    if (forkingWithLocks()) [[unlikely]] return bootstrapAlloc(16, size);
    return family.malloc(size);
  }
  return mallocBeforeReady(size);
}

using heapkit::entry_points::InlinePaths;

// What the provider's inline path does not take: out of line, reached by a jump.
[[gnu::noinline, maybe_unused]] void* mallocOtherwise(std::size_t size) { return doMallocUsually(size); }

// Templates, so that `if constexpr` discards the inline paths a provider does not have.
template <class Paths = InlinePaths<>>
inline void* doMalloc(std::size_t size) {
  if constexpr (Paths::kProvided) {
    return Paths::malloc(size, mallocOtherwise);
  } else {
    return doMallocUsually(size);
  }
}

inline void* doMemalign(std::size_t alignment, std::size_t size) {
  if (!ready()) return bootstrapAlloc(alignment, size);
  if (forkingWithLocks()) [[unlikely]] return bootstrapAlloc(alignment, size);
  return family.memalign(alignment, size);
}

inline void doFreeUsually(void* ptr) {
  if (ptr == nullptr || inBootstrap(ptr)) return;
  if (forkingWithLocks()) [[unlikely]] return;  // kept: the provider's locks are this thread's now
  family.free(ptr);  // a pointer not from the bootstrap means the provider is ready
}

// What the provider's inline free does not take: out of line, reached by a jump. A
// provider with InlinePaths::freeAfterInline gets the pointer there once the wrapper's own
// cases are ruled out, past its usual free's checks (ScalableHeap's: the owner check its
// inline path just failed, run again).
// The fork handlers not registered yet (forkingWithLocks): a call of its own, so that
// freeOtherwise keeps the pointer in its argument register, not a saved one.
template <class Paths>
[[gnu::noinline]] void freeRegisteringForkHandlers(void* ptr) {
  if (forkingWithLocks()) return;  // never true before our handlers ran: it registers them
  Paths::freeAfterInline(ptr);
}

template <class Paths = InlinePaths<>>
[[gnu::noinline, maybe_unused]] void freeOtherwise(void* ptr) {
  if constexpr (requires(void* object) { Paths::freeAfterInline(object); }) {
    if (ptr == nullptr || inBootstrap(ptr)) return;
    // forkingWithLocks(), its registration out of line.
    if (!forkHandlersRegistered.load(std::memory_order_acquire)) [[unlikely]] return freeRegisteringForkHandlers<Paths>(ptr);
    if (forkingHere) [[unlikely]] return;  // kept: the provider's locks are this thread's now
    Paths::freeAfterInline(ptr);  // a pointer not from the bootstrap means the provider is ready
  } else {
    doFreeUsually(ptr);
  }
}

template <class Paths = InlinePaths<>>
inline void doFree(void* ptr) {
  if constexpr (Paths::kProvided) {
    Paths::free(ptr, freeOtherwise<Paths>);
  } else {
    doFreeUsually(ptr);
  }
}

void* doCalloc(std::size_t count, std::size_t size) {
  std::size_t bytes;
  if (__builtin_mul_overflow(count, size, &bytes) || bytes > heapkit::kMaxRequestBytes) {
    errno = ENOMEM;
    return nullptr;
  }
  if (!ready()) return bootstrapAlloc(16, bytes);
  if (forkingWithLocks()) [[unlikely]] return bootstrapAlloc(16, bytes);  // static storage: zero
  if (heapkit_ep_calloc) {
    void* ptr = heapkit_ep_calloc(count == 0 || size == 0 ? 1 : count, count == 0 || size == 0 ? 1 : size);
    if (ptr == nullptr) errno = ENOMEM;
    return ptr;
  }
  return family.calloc(count, size);
}

void* doRealloc(void* ptr, std::size_t size) {
  if (ptr != nullptr && inBootstrap(ptr)) {
    if (size == 0) return nullptr;  // glibc frees and returns NULL; bootstrap memory stays
    void* moved = doMalloc(size);
    if (moved != nullptr) memcpy(moved, ptr, size < bootstrapSize(ptr) ? size : bootstrapSize(ptr));
    return moved;
  }
  if (!ready()) return bootstrapAlloc(16, size);  // ptr is NULL here
  if (forkingWithLocks()) [[unlikely]] {
    if (ptr == nullptr) return bootstrapAlloc(16, size);
    errno = ENOMEM;  // its size would need the provider's locks: the block stays as it is
    return nullptr;
  }
  if (heapkit_ep_realloc && ptr != nullptr && size != 0) {
    if (size > heapkit::kMaxRequestBytes) {
      errno = ENOMEM;
      return nullptr;
    }
    void* moved = heapkit_ep_realloc(ptr, size);
    if (moved == nullptr) errno = ENOMEM;
    return moved;
  }
  return family.realloc(ptr, size);
}

std::size_t doUsableSize(void* ptr) {
  if (ptr == nullptr) return 0;
  if (inBootstrap(ptr)) return bootstrapSize(ptr);
  return family.getSize(ptr);
}

// ---- C++ without a C++ runtime of our own ---------------------------------------------
//
// The library must not load libstdc++ into C programs: its start-up alone costs a C
// program about 1.8 MiB of RSS and puts a 72 KiB allocation (the emergency exception pool)
// in every trace the recorder makes. operator new needs the runtime only when allocation
// fails, to read the new_handler and to throw std::bad_alloc, and by then the program that
// called it has a runtime loaded: it is looked up at that moment.
//
// The nothrow forms are the runtime's own: libstdc++ (since GCC 9) and libc++ define them
// as `try { return ::operator new(size); } catch (...) { return nullptr; }`, which calls
// the forms defined below, so they keep their semantics (a throwing new_handler included)
// without this library catching anything, which would need the runtime's personality.

// A symbol of the C++ runtime the process has loaded, or null.
void* cxxRuntimeSymbol(const char* name) {
  if (void* symbol = dlsym(RTLD_DEFAULT, name)) return symbol;
  // A C program (Python, say) that dlopen()ed a C++ library with RTLD_LOCAL: the runtime is
  // loaded, but not in the global scope.
  for (const char* runtime : {"libstdc++.so.6", "libc++.so.1"}) {
    if (void* library = dlopen(runtime, RTLD_LAZY | RTLD_NOLOAD)) {
      void* symbol = dlsym(library, name);
      dlclose(library);  // RTLD_NOLOAD took a reference
      if (symbol != nullptr) return symbol;
    }
  }
  return nullptr;
}

[[noreturn]] void throwBadAlloc() {
  // std::__throw_bad_alloc(): exported by libstdc++ and libc++ alike.
  if (auto thrower = reinterpret_cast<void (*)()>(cxxRuntimeSymbol("_ZSt17__throw_bad_allocv"))) thrower();
  static constexpr char kMessage[] = "heapkit: operator new: out of memory and no C++ runtime loaded to throw std::bad_alloc\n";
  ssize_t ignored = write(STDERR_FILENO, kMessage, sizeof(kMessage) - 1);
  (void)ignored;
  abort();
}

// The request failed: calls the new_handler (which may free memory, throw or give up), or
// throws std::bad_alloc when there is none. Returns when the request should be tried again.
[[gnu::noinline, gnu::cold]] void onNewFailure() {
  auto getHandler = reinterpret_cast<std::new_handler (*)()>(cxxRuntimeSymbol("_ZSt15get_new_handlerv"));
  std::new_handler handler = getHandler != nullptr ? getHandler() : nullptr;
  if (handler == nullptr) throwBadAlloc();
  handler();
}

void* newOrThrow(std::size_t size) {
  for (;;) {
    if (void* ptr = doMalloc(size)) [[likely]] return ptr;
    onNewFailure();
  }
}

void* alignedNewOrThrow(std::size_t size, std::align_val_t alignment) {
  for (;;) {
    if (void* ptr = doMemalign(static_cast<std::size_t>(alignment), size)) [[likely]] return ptr;
    onNewFailure();
  }
}

}  // namespace

// Everything below is the process's malloc family: exported even though the library is
// built with hidden visibility.
#pragma GCC visibility push(default)

extern "C" {

void* malloc(size_t size) __THROW { return doMalloc(size); }
void free(void* ptr) __THROW { doFree(ptr); }
void* calloc(size_t count, size_t size) __THROW { return doCalloc(count, size); }
void* realloc(void* ptr, size_t size) __THROW { return doRealloc(ptr, size); }

void* reallocarray(void* ptr, size_t count, size_t size) __THROW {
  size_t bytes;
  if (__builtin_mul_overflow(count, size, &bytes)) {
    errno = ENOMEM;
    return nullptr;
  }
  return doRealloc(ptr, bytes);
}

void* memalign(size_t alignment, size_t size) __THROW { return doMemalign(alignment, size); }

// Defined here, unlike Heap Layers upstream: glibc's own aligned_alloc would otherwise
// return memory from the wrong heap.
void* aligned_alloc(size_t alignment, size_t size) __THROW {
  if (!heapkit::isPowerOfTwo(alignment)) {
    errno = EINVAL;
    return nullptr;
  }
  return doMemalign(alignment, size);
}

int posix_memalign(void** result, size_t alignment, size_t size) __THROW {
  if (alignment % sizeof(void*) != 0 || !heapkit::isPowerOfTwo(alignment)) return EINVAL;
  int saved = errno;
  void* ptr = doMemalign(alignment, size);
  if (ptr == nullptr) {
    errno = saved;
    return ENOMEM;
  }
  *result = ptr;
  return 0;
}

void* valloc(size_t size) __THROW { return doMemalign(heapkit::pageSize(), size); }

void* pvalloc(size_t size) __THROW {
  std::size_t page = heapkit::pageSize();
  if (size > heapkit::kMaxRequestBytes - page) {
    errno = ENOMEM;
    return nullptr;
  }
  return doMemalign(page, size == 0 ? page : heapkit::alignUp(size, page));
}

size_t malloc_usable_size(void* ptr) __THROW { return doUsableSize(ptr); }

// C23; glibc 2.36 does not declare them yet, but programs built elsewhere may call them.
void free_sized(void* ptr, size_t) __THROW { doFree(ptr); }
void free_aligned_sized(void* ptr, size_t, size_t) __THROW { doFree(ptr); }

}  // extern "C"

// The four throwing forms; the runtime's nothrow forms call them (see above).
void* operator new(std::size_t size) { return newOrThrow(size); }
void* operator new[](std::size_t size) { return newOrThrow(size); }
// Size first, alignment second (Heap Layers upstream swaps them here).
void* operator new(std::size_t size, std::align_val_t alignment) { return alignedNewOrThrow(size, alignment); }
void* operator new[](std::size_t size, std::align_val_t alignment) { return alignedNewOrThrow(size, alignment); }

// Every delete form: none of them needs the runtime.
void operator delete(void* ptr) noexcept { doFree(ptr); }
void operator delete[](void* ptr) noexcept { doFree(ptr); }
void operator delete(void* ptr, const std::nothrow_t&) noexcept { doFree(ptr); }
void operator delete[](void* ptr, const std::nothrow_t&) noexcept { doFree(ptr); }
void operator delete(void* ptr, std::size_t) noexcept { doFree(ptr); }
void operator delete[](void* ptr, std::size_t) noexcept { doFree(ptr); }
void operator delete(void* ptr, std::align_val_t) noexcept { doFree(ptr); }
void operator delete[](void* ptr, std::align_val_t) noexcept { doFree(ptr); }
void operator delete(void* ptr, std::align_val_t, const std::nothrow_t&) noexcept { doFree(ptr); }
void operator delete[](void* ptr, std::align_val_t, const std::nothrow_t&) noexcept { doFree(ptr); }
void operator delete(void* ptr, std::size_t, std::align_val_t) noexcept { doFree(ptr); }
void operator delete[](void* ptr, std::size_t, std::align_val_t) noexcept { doFree(ptr); }

#pragma GCC visibility pop
