// Reap: the C++ face of ReapHeap. A std::pmr::memory_resource (standard containers can
// live on a reap), with RAII ownership and nesting:
//
//   heapkit::Reap server;                    // a root reap: chunks come from libc malloc
//   heapkit::Reap connection(server);        // a child: its chunks are objects of `server`
//   std::pmr::vector<int> v(&connection);
//   connection.clear();                      // frees every object of the child at once
//
// Clearing a reap clears its children (they stay usable); destroying it destroys the
// children it owns (made with createChild, or through the C API) and releases the memory
// of the others, which become dead: they allocate nothing more (nullptr, or bad_alloc
// from the memory_resource interface) and their destructor does nothing further.
//
// A reap is not thread-safe; distinct root reaps may be used from distinct threads.
#pragma once

#include <cstddef>
#include <new>

#include "heapkit/special/ReapHeap.h"
#include "heapkit/top/MallocHeap.h"
#include "heapkit/utility/MemoryResource.h"

namespace heapkit {

class Reap;

// Where a reap's chunks come from: its parent reap, or for a root reap a top heap of
// its own (so distinct roots share no state). A dead reap gets nothing.
class ReapChunkSource {
 public:
  static constexpr std::size_t Alignment = kMinAlignment;

  ReapChunkSource() = default;
  explicit ReapChunkSource(Reap* parent) : parent_(parent) {}

  inline void* malloc(std::size_t size);
  inline void free(void* chunk);

 private:
  friend class Reap;
  Reap* parent_ = nullptr;
  bool dead_ = false;
  MallocHeap top_;
};

class Reap : public HeapMemoryResource<ReapHeap<ReapChunkSource>> {
  using Resource = HeapMemoryResource<ReapHeap<ReapChunkSource>>;
  using Heap = ReapHeap<ReapChunkSource>;
  // The chunk source is a base of the heap; the reap manages its parent link.
  ReapChunkSource& source() { return heap(); }

 public:
  static constexpr std::size_t Alignment = Heap::Alignment;

  Reap() : Resource() {}
  explicit Reap(Reap& parent) : Resource(&parent) { parent.adopt(this); }
  Reap(const Reap&) = delete;
  Reap& operator=(const Reap&) = delete;

  ~Reap() override {
    destroyChildren();
    if (Reap* parent = parentReap()) parent->disown(this);
    // The heap, destroyed next, gives its chunks back to the parent (alive: a parent
    // destroys its children first).
  }

  // A child owned by this reap: destroyed with it, or earlier with `delete`.
  Reap* createChild() {
    Reap* child = new (std::nothrow) Reap(*this);
    if (child != nullptr) child->ownedByParent_ = true;
    return child;
  }

  void* malloc(std::size_t size) { return heap().malloc(size); }
  void free(void* object) { heap().free(object); }
  void* realloc(void* object, std::size_t size) { return heap().realloc(object, size); }
  std::size_t getSize(void* object) { return heap().getSize(object); }

  // Free every object of this reap and of its descendants, which stay usable.
  void clear() {
    for (Reap* child = firstChild_; child != nullptr; child = child->nextSibling_) child->clear();
    heap().clear();
  }

  std::size_t bytesInUse() { return heap().bytesInUse(); }
  std::size_t footprint() { return heap().footprint(); }
  std::size_t peakFootprint() { return heap().peakFootprint(); }

  Reap* parentReap() { return source().parent_; }
  Reap* firstChild() const { return firstChild_; }
  Reap* nextSibling() const { return nextSibling_; }
  bool ownedByParent() const { return ownedByParent_; }
  bool dead() { return source().dead_; }

 private:
  void adopt(Reap* child) {
    child->nextSibling_ = firstChild_;
    if (firstChild_ != nullptr) firstChild_->prevSibling_ = child;
    firstChild_ = child;
  }

  void disown(Reap* child) {
    if (child->prevSibling_ != nullptr) child->prevSibling_->nextSibling_ = child->nextSibling_;
    else firstChild_ = child->nextSibling_;
    if (child->nextSibling_ != nullptr) child->nextSibling_->prevSibling_ = child->prevSibling_;
    child->prevSibling_ = child->nextSibling_ = nullptr;
  }

  void destroyChildren() {
    while (Reap* child = firstChild_) {
      if (child->ownedByParent_) {
        delete child;  // unlinks itself
      } else {
        child->kill();
      }
    }
  }

  // Release everything a child not owned by its parent holds, then cut it loose: its
  // object outlives the parent, so it must not touch the parent again.
  void kill() {
    destroyChildren();
    heap().clear();
    parentReap()->disown(this);
    source().parent_ = nullptr;
    source().dead_ = true;
  }

  Reap* firstChild_ = nullptr;
  Reap* prevSibling_ = nullptr;
  Reap* nextSibling_ = nullptr;
  bool ownedByParent_ = false;
};

inline void* ReapChunkSource::malloc(std::size_t size) {
  if (parent_ != nullptr) return parent_->heap().malloc(size);
  return dead_ ? nullptr : top_.malloc(size);
}

inline void ReapChunkSource::free(void* chunk) {
  if (parent_ != nullptr) parent_->heap().free(chunk);
  else top_.free(chunk);
}

}  // namespace heapkit
