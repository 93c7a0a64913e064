// Reap: the C++ face of ReapHeap. A std::pmr::memory_resource (standard containers can
// live on a reap), with RAII ownership and nesting:
//
//   heapkit::Reap server;                    // a root reap: chunks come from libc malloc
//   heapkit::Reap connection(server);        // a child: chunks from the same top heap
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

#include "heapkit/combining/ThresholdHeap.h"
#include "heapkit/special/ReapHeap.h"
#include "heapkit/top/MallocHeap.h"
#include "heapkit/utility/MemoryResource.h"

namespace heapkit {

class Reap;

// Where a reap's chunks come from: the top heap of its root reap, which every reap of a
// tree shares and which counts the tree's footprint. Children do not carve their chunks
// out of the parent's objects: a child's chunks coming and going would put the parent
// in heap mode and its small objects would split them. Distinct roots share no state.
// The top heap keeps up to 2 MiB of freed chunks for reuse (as APR's allocator keeps
// its free blocks), so a reap per connection does not cost libc calls each time; the
// cached chunks count in the footprint. A dead reap gets nothing.
class ReapChunkSource {
 public:
  static constexpr std::size_t Alignment = kMinAlignment;

  ReapChunkSource() : top_(&ownTop_) {}
  inline explicit ReapChunkSource(Reap* parent);
  ReapChunkSource(const ReapChunkSource&) = delete;
  ReapChunkSource& operator=(const ReapChunkSource&) = delete;

  void* malloc(std::size_t size) { return top_ != nullptr ? top_->malloc(size) : nullptr; }
  void free(void* chunk) { top_->free(chunk); }
  std::size_t getSize(void* chunk) const { return top_->getSize(chunk); }

  using Top = ThresholdHeap<2 * 1024 * 1024, MallocHeap>;

 private:
  friend class Reap;
  Reap* parent_ = nullptr;
  Top* top_;
  Top ownTop_;  // used by a root reap only
};

class Reap : public HeapMemoryResource<ReapHeap<ReapChunkSource>> {
  using Resource = HeapMemoryResource<ReapHeap<ReapChunkSource>>;
  using Heap = ReapHeap<ReapChunkSource>;
  // The chunk source is a base of the heap; the reap manages its parent link.
  friend class ReapChunkSource;
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
    // The heap, destroyed next, gives its chunks back to the root's top heap (alive: a
    // parent destroys its children first).
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

  // Usable bytes of this reap's live objects (not its children's).
  std::size_t bytesInUse() { return heap().bytesInUse(); }
  // Bytes of chunks held by this reap and its descendants. A root reap answers with its
  // top heap's count, which includes the top heap's own 32-byte header per chunk.
  std::size_t footprint() {
    if (parentReap() == nullptr && !dead()) return source().ownTop_.bytesHeld();
    std::size_t bytes = heap().footprint();
    for (Reap* child = firstChild_; child != nullptr; child = child->nextSibling_) bytes += child->footprint();
    return bytes;
  }
  // The high-water mark of footprint(): exact for a root reap (its top heap sees every
  // chunk of the tree); for a child, of its own chunks only.
  std::size_t peakFootprint() {
    if (parentReap() == nullptr) return source().ownTop_.peakBytesHeld();
    return heap().peakFootprint();
  }

  Reap* parentReap() { return source().parent_; }
  Reap* firstChild() const { return firstChild_; }
  Reap* nextSibling() const { return nextSibling_; }
  bool ownedByParent() const { return ownedByParent_; }
  bool dead() { return source().top_ == nullptr; }

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
    source().top_ = nullptr;
  }

  Reap* firstChild_ = nullptr;
  Reap* prevSibling_ = nullptr;
  Reap* nextSibling_ = nullptr;
  bool ownedByParent_ = false;
};

inline ReapChunkSource::ReapChunkSource(Reap* parent) : parent_(parent), top_(parent->source().top_) {}

}  // namespace heapkit
