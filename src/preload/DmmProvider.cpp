// libheapkit-dmm.so: any DMM design as the process's malloc, read from a spec at start-up:
//
//   HEAPKIT_SPEC=design.json LD_PRELOAD=.../libheapkit-dmm.so program
//
// The heap is DmmHeap<RealMemory>, the one the simulator runs over simulated memory, behind
// one lock (so threads are safe) and the malloc wrapper. A missing or invalid spec stops
// the program before it starts, with the spec's error on standard error and status 127.
#include <new>

#include "DmmDesignLoader.h"
#include "heapkit/dmm/DmmHeap.h"
#include "heapkit/threads/LockedHeap.h"
#include "heapkit/threads/Locks.h"
#include "heapkit/utility/HardenedHeap.h"
#include "heapkit/wrapper/ANSIWrapper.h"
#include "heapkit_entry_points.h"

namespace {
// HardenedHeap: unaligned pointers and pointers outside the design's arena stop the program.
using ProvidedHeap =
    heapkit::ANSIWrapper<heapkit::HardenedHeap<heapkit::LockedHeap<heapkit::SpinLock, heapkit::DmmHeap<heapkit::RealMemory>>>>;
static_assert(heapkit::SizedHeap<ProvidedHeap>);

alignas(ProvidedHeap) alignas(64) unsigned char storage[sizeof(ProvidedHeap)];
inline ProvidedHeap& providedHeap() { return *std::launder(reinterpret_cast<ProvidedHeap*>(storage)); }

// Read while the process starts, before this library's dynamic initialisers have run:
// constant-initialised, and large, so not on the stack of whichever thread called first.
constinit heapkit::DmmSpec design;

}  // namespace

extern "C" {
void heapkit_ep_init(void) {
  heapkit::preload::loadDesignOrExit(design);
  new (storage) ProvidedHeap(design);
}
void* heapkit_ep_malloc(size_t size) { return providedHeap().malloc(size); }
void heapkit_ep_free(void* ptr) { providedHeap().free(ptr); }
void* heapkit_ep_memalign(size_t alignment, size_t size) { return providedHeap().memalign(alignment, size); }
size_t heapkit_ep_usable_size(void* ptr) { return providedHeap().getSize(ptr); }
void* heapkit_ep_realloc(void* ptr, size_t size) { return providedHeap().realloc(ptr, size); }
// The heap's calloc clears only what may hold old data, as the simulator counts it.
void* heapkit_ep_calloc(size_t count, size_t size) { return providedHeap().calloc(count, size); }
void heapkit_ep_fork_prepare(void) { heapkit::forkhooks::prepare(providedHeap()); }
void heapkit_ep_fork_parent(void) { heapkit::forkhooks::parent(providedHeap()); }
void heapkit_ep_fork_child(void) { heapkit::forkhooks::child(providedHeap()); }
}

// The wrapper in the same translation unit, so the entry points inline into malloc/free.
#include "wrapper.cpp"
