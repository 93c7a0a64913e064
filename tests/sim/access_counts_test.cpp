// Work and metadata accesses, derived by hand from the code of each layer, for small
// hand-made traces: every list kind and order of SegregatedFitHeap and its trim, a binary
// buddy, the Kingsley and Lea heaps. The counts come from the accesses themselves
// (core/Counting.h: loadMetadata, storeMetadata, countStep), so these figures are what the
// code touches; each comment walks through the code path that gives it. The constants the layers used
// to type beside their code gave other figures (SegregatedFitHeap's insertFree counted 1
// read and 4 writes for every list kind and order, Kingsley's bump a step), so this test
// failed on them.
//
// Steps (docs/simulator.md): a class or route lookup, a list or bin probed, a list or tree
// node visited, a split, a merge, a request to the parent that takes or returns memory
// (the arena counts one more for its own obtain or release).
#include <gtest/gtest.h>

#include <cstdint>

#include "heapkit/general/BuddyHeap.h"
#include "heapkit/general/KingsleyHeap.h"
#include "heapkit/general/LeaHeap.h"
#include "heapkit/general/SegregatedFitHeap.h"
#include "heapkit/top/ArenaHeap.h"

namespace heapkit {
namespace {

using Arena = ReservedArena<CountedMemory>;
using Top = ArenaHeap<Arena>;

struct Counts {
  std::uint64_t steps, reads, writes;
  friend bool operator==(const Counts&, const Counts&) = default;
};
void PrintTo(const Counts& c, std::ostream* out) {
  *out << "{steps " << c.steps << ", reads " << c.reads << ", writes " << c.writes << "}";
}

// The counts one operation adds.
class Meter {
 public:
  explicit Meter(Arena& arena) : arena_(arena) {}
  template <class Operation>
  Counts operator()(Operation&& operation) {
    WorkCounts before = arena_.workCounts();
    operation();
    const WorkCounts& after = arena_.workCounts();
    return {after.steps - before.steps, after.reads - before.reads, after.writes - before.writes};
  }

 private:
  Arena& arena_;
};

// ---- SegregatedFitHeap: one list, 8-byte headers, no split, no coalescing ------------------
//
// Trace: a, b, c = malloc(24) (blocks of 32 bytes carved one after the other, so
// a < b < c), then free(c), free(a), free(b), then malloc(24).
//
// The carving is the same for every list kind:
//  malloc a, the heap empty: class lookup (1 step); list 0 probed (1 step, its head read:
//    1 read, null); carve: the tail cursor read (1 read, null); a new chunk: the chunk
//    requested (1 step) from ArenaHeap (the arena's obtain 1 step; ArenaHeap writes its
//    extent's two header words: 2 writes); the chunk's bytes written (1 write); the chunk
//    pushed on the list of chunks, a DLList (circular, with a sentinel): the sentinel's
//    next read twice (2 reads), the chunk's prev and next, the old first's prev (here the
//    sentinel's own) and the sentinel's next written (4 writes); the fence: the chunk's
//    bytes read (1 read), its size word written (1 write); the tail block: the chunk's
//    bytes read again for the fence's place (1 read), its size word written (1 write);
//    then the cut: the tail's size word read (1 read) and rewritten as the block's (1
//    write), the cursor written (1 write), the new tail's size word written (1 write).
//      steps 1+1+1+1 = 4; reads 1+1+2+1+1+1 = 7; writes 2+1+4+1+1+1+1+1 = 12
//  malloc b, c: class lookup 1, list probed 1 (head read 1), the cursor read (1) and the
//    tail's length (1): it fits; the tail's word read (1), the block's written (1), the
//    cursor written (1), the new tail's word written (1).
//      steps 2; reads 4; writes 3
constexpr Counts kFirstCarve{4, 7, 12};
constexpr Counts kCarve{2, 4, 3};

struct ListCase {
  const char* name;
  ListStructure structure;
  ListOrder order;
  ListFit fit;
  Counts freeC, freeA, freeB, mallocAgain;
};

// Every free reads the block's size word and writes it back marked free (1 read, 1
// write) and looks up the class (1 step); then the list's own work:
const ListCase kListCases[] = {
    // LIFO, singly linked: the head read (1), the block's next written (1), the head
    // written (1). The same whether the list was empty or not.
    {"singly linked, LIFO", ListStructure::SinglyLinked, ListOrder::Lifo, ListFit::First,
     {1, 2, 3}, {1, 2, 3}, {1, 2, 3},
     // malloc: class lookup 1, list probed 1 (head read 1), the head node visited (1
     // step, its length read 1: it fits); unlink: its next read (1), the head written
     // (1); the block's size word read (1) and written in use (1).
     {3, 4, 2}},
    // LIFO, doubly linked: the head read (1); next, prev and head written (3); and the
    // old head's prev (1) when there was one: not for c, for a and b.
    {"doubly linked, LIFO", ListStructure::DoublyLinked, ListOrder::Lifo, ListFit::First,
     {1, 2, 4}, {1, 2, 5}, {1, 2, 5},
     // As singly linked, and the unlinked block's successor's prev written (1).
     {3, 4, 3}},
    // FIFO, singly linked: the tail read (1); the block's next written (1), then the head
    // (list empty) or the old tail's next (1), then the tail (1).
    {"singly linked, FIFO", ListStructure::SinglyLinked, ListOrder::Fifo, ListFit::First,
     {1, 2, 4}, {1, 2, 4}, {1, 2, 4},
     // The head (c) has a successor, so the tail stays: as LIFO.
     {3, 4, 2}},
    // FIFO, doubly linked: the same and the block's prev (1).
    {"doubly linked, FIFO", ListStructure::DoublyLinked, ListOrder::Fifo, ListFit::First,
     {1, 2, 5}, {1, 2, 5}, {1, 2, 5}, {3, 4, 3}},
    // Address order, singly linked: the head read (1), then one step and one next read for
    // every node below the block. free c: empty list (next and head written: 2 writes).
    // free a: the head c is above a: no node passed; next and head written. free b: a
    // passed (1 step, its next read: c, above b); b's next and a's next written.
    {"singly linked, address order", ListStructure::SinglyLinked, ListOrder::Address, ListFit::First,
     {1, 2, 3}, {1, 2, 3}, {2, 3, 3},
     // The head a fits.
     {3, 4, 2}},
    // Address order, doubly linked: prev written too, and the successor's prev when there
    // is one (c's, for a and for b).
    {"doubly linked, address order", ListStructure::DoublyLinked, ListOrder::Address, ListFit::First,
     {1, 2, 4}, {1, 2, 5}, {2, 3, 5}, {3, 4, 3}},
    // The size tree (a treap keyed by length, then address; priority a hash of the
    // address). The arena's base is 4 GiB-aligned and the chunk comes first from it, so
    // the blocks sit at offsets 56, 88, 120 (16 for ArenaHeap's header, 32 for the chunk
    // record, 8 for the header before the 16-byte aligned object), and their priorities
    // are a 4131180297, b 3856952608, c 1826715890 (priorityOf: a max-heap).
    //  free c: the root read (1, null): c's left and right written (2), the root written
    //    (1).                                                    steps 1, reads 2, writes 4
    //  free a: root c visited (1 step): c's length read (1), a < c: c's left read (1,
    //    null): a's left and right written (2); c's left written (1); a outranks c: rotate
    //    right: a's right read (1), c's left and a's right written (2); the root written.
    //                                     steps 1+1 = 2, reads 2+3 = 5, writes 1+5+1 = 7
    //  free b: root a visited (1 step, length read 1, b > a: a's right read 1: c); c
    //    visited (1 step, length 1, b < c: c's left read 1: null); b's left and right
    //    written (2); c's left written (1); b outranks c: rotate right (b's right read 1;
    //    c's left and b's right written 2); a's right written (1); a outranks b: no
    //    rotation; the root written (1).   steps 1+2 = 3, reads 2+5 = 7, writes 1+6+1 = 8
    //  malloc: class lookup 1, list probed 1 (root read 1: a); best fit: a visited (1
    //    step, length read 1: fits, go left: a's left read 1, null); erase a: a visited
    //    (1 step, it is the block: its left and right read 2; the join of nothing and b
    //    is b, no step); the root written (1); a's size word read and written (1, 1).
    //                                     steps 4, reads 1+1+1+2+1 = 6, writes 2
    {"size tree", ListStructure::SizeTree, ListOrder::Size, ListFit::Best, {1, 2, 4}, {2, 5, 7}, {3, 7, 8}, {4, 6, 2}},
};

TEST(AccessCounts, EveryListKindAndOrderOfSegregatedFitHeap) {
  for (const ListCase& c : kListCases) {
    SCOPED_TRACE(c.name);
    SegregatedFitConfig config;
    config.classCount = 1;
    config.structure = c.structure;
    config.order = c.order;
    config.fit = c.fit;
    config.header = HeaderLayout::SizeWord8;
    config.chunkBytes = config.maxChunkBytes = 4096;
    Arena arena(std::size_t{1} << 30);
    Meter meter(arena);
    {
      ConfiguredSegregatedFitHeap<Top> heap(config, arena, std::uint8_t{1});
      void *a = nullptr, *b = nullptr, *c2 = nullptr, *again = nullptr;
      EXPECT_EQ(meter([&] { a = heap.malloc(24); }), kFirstCarve);
      EXPECT_EQ(meter([&] { b = heap.malloc(24); }), kCarve);
      EXPECT_EQ(meter([&] { c2 = heap.malloc(24); }), kCarve);
      ASSERT_TRUE(a < b && b < c2);
      ASSERT_EQ(reinterpret_cast<std::uintptr_t>(a) % (std::uintptr_t{1} << 32), 64u) << "the offsets the tree's priorities assume";
      EXPECT_EQ(meter([&] { heap.free(c2); }), c.freeC);
      EXPECT_EQ(meter([&] { heap.free(a); }), c.freeA);
      EXPECT_EQ(meter([&] { heap.free(b); }), c.freeB);
      EXPECT_EQ(meter([&] { again = heap.malloc(24); }), c.mallocAgain);
      EXPECT_EQ(again, c.order == ListOrder::Lifo ? b : c.order == ListOrder::Fifo ? c2 : a);
    }
  }
}

// ---- SegregatedFitHeap with boundary tags, immediate coalescing and trim ------------------
TEST(AccessCounts, SegregatedFitHeapGivesAWhollyFreeChunkBack) {
  SegregatedFitConfig config;
  config.classCount = 1;
  config.header = HeaderLayout::BoundaryTags;
  config.coalescing = Coalescing::Immediate;
  config.trim = true;
  config.chunkBytes = config.maxChunkBytes = 4096;
  Arena arena(std::size_t{1} << 30);
  Meter meter(arena);
  ConfiguredSegregatedFitHeap<Top> heap(config, arena, std::uint8_t{1});
  void* a = nullptr;
  // The carving is the one above (boundary tags have the 8-byte header, and carving writes
  // no tag).
  EXPECT_EQ(meter([&] { a = heap.malloc(24); }), kFirstCarve);
  // free(a): its size word read (1). The block after it is the tail: its word read (1),
  // not free; a's previous block is not free. The tail compared (1 step: the cursor read,
  // 1): a gives itself back to it: a's word rewritten as the tail's (1 write), the cursor
  // written (1 write), a merge (1 step). a was the chunk's first block, and the design
  // trims: the cursor cleared (1 write) and the chunk unlinked from the list of chunks, a
  // DLList (its prev and next read twice each, 4 reads; two links written, 2 writes),
  // returned (1 step); ArenaHeap reads its extent's bytes (1), the arena releases it (1
  // step). Nothing is listed.
  //   steps 1+1+1+1 = 4, reads 1+1+1+4+1 = 8, writes 1+1+1+2 = 5
  EXPECT_EQ(meter([&] { heap.free(a); }), (Counts{4, 8, 5}));
  EXPECT_EQ(arena.bytesHeld(), 0u);
}

// ---- a binary buddy: 32-byte smallest block, 128-byte areas, coalescing and trim -----------
TEST(AccessCounts, BinaryBuddy) {
  BuddyConfig config;
  config.minBlockBytes = 32;
  config.areaBytes = 128;
  Arena arena(std::size_t{1} << 30);
  Meter meter(arena);
  BuddyHeap<BuddyConfig, Top> heap(config, arena, std::uint8_t{1});
  void *a = nullptr, *b = nullptr;
  // The free lists and the list of areas are DLLists (circular, with a sentinel): a push
  // reads the sentinel's next twice and writes the node's prev and next, the old first's
  // prev and the sentinel's next (2 reads, 4 writes); an unlink reads prev and next twice
  // each and writes two links (4 reads, 2 writes); taking the first reads the sentinel's
  // next (1 read).
  //
  // malloc(8): 8 usable + the 16-byte header: the 32-byte class. The list of 32 probed (1
  // step, the sentinel's next read: 1, empty); no larger list yet. A new area: requested (1
  // step; the arena's obtain 1 step, ArenaHeap's two header words 2 writes); the area pushed
  // on the list of areas (2 reads, 4 writes), the root's bytes written (1). Split 128 -> 64
  // + 64 and 64 -> 32 + 32 (1 step each); each right half pushed: its word written (1), the
  // push (2 reads, 4 writes). The block's word written in use (1), the object's size word
  // (1).
  //   steps 1+1+1+2 = 5, reads 1+2+2+2 = 7, writes 2+5+5+5+1+1 = 19
  EXPECT_EQ(meter([&] { a = heap.malloc(8); }), (Counts{5, 7, 19}));
  // malloc(8): the list of 32 probed (1 step, the sentinel's next read 1: the right half),
  // unlinked (4 reads, 2 writes); its word read (1), written in use (1), the size word (1).
  //   steps 1, reads 1+4+1 = 6, writes 2+1+1 = 4
  EXPECT_EQ(meter([&] { b = heap.malloc(8); }), (Counts{1, 6, 4}));
  // free(a): its word read (1); its buddy b looked at (1 step, word read 1): in use. Pushed:
  // word written (1), the push (2 reads, 4 writes).    steps 1, reads 4, writes 5
  EXPECT_EQ(meter([&] { heap.free(a); }), (Counts{1, 4, 5}));
  // free(b): its word read (1); buddy a looked at (1 step, read 1): free: unlinked (4 reads,
  // 2 writes), merged (1 step); the 64-byte buddy looked at (1 step, read 1): free:
  // unlinked (4 reads, 2 writes), merged (1 step): the root. Trim: the area unlinked from
  // the list of areas (4 reads, 2 writes), returned (1 step); ArenaHeap reads its extent's
  // bytes (1), the arena releases it (1 step).
  //   steps 1+1+1+1+1+1 = 6, reads 1+1+4+1+4+4+1 = 16, writes 2+2+2 = 6
  EXPECT_EQ(meter([&] { heap.free(b); }), (Counts{6, 16, 6}));
  EXPECT_EQ(arena.bytesHeld(), 0u);
}

// ---- Kingsley: power-of-two classes over a bump-allocated chunk --------------------------
TEST(AccessCounts, Kingsley) {
  Arena arena(std::size_t{1} << 30);
  Meter meter(arena);
  KingsleyHeap<Top> heap(arena, std::uint8_t{1});
  void *a = nullptr, *c = nullptr;
  // malloc(100): the class lookup (1 step: 128 bytes); the bin's head read (1, null); the
  // bin's parent misses; SizeHeap asks ChunkHeap for 144 bytes: cursor and limit read (2,
  // null): a chunk requested (1 step; the arena's obtain 1 step, ArenaHeap's header 2
  // writes); its next written from the chunk list's head (1 read, 1 write), the head
  // written (1), the cursor and limit written (2); the object's size word written (1).
  //   steps 3, reads 1+2+1 = 4, writes 2+1+1+2+1 = 7
  EXPECT_EQ(meter([&] { a = heap.malloc(100); }), (Counts{3, 4, 7}));
  // malloc(100): class lookup (1 step), the bin's head read (1, null); cursor and limit
  // read (2), the cursor written (1), the size word written (1).   steps 1, reads 3, writes 2
  EXPECT_EQ(meter([&] { heap.malloc(100); }), (Counts{1, 3, 2}));
  // free(a): its size word read (1), the class lookup (1 step); pushed: the head read (1),
  // a's next and the head written (2).                             steps 1, reads 2, writes 2
  EXPECT_EQ(meter([&] { heap.free(a); }), (Counts{1, 2, 2}));
  // malloc(100): class lookup (1 step), the head read (1: a; strict classes: it fits
  // unread), a's next read (1), the head written (1).              steps 1, reads 2, writes 1
  EXPECT_EQ(meter([&] { c = heap.malloc(100); }), (Counts{1, 2, 1}));
  EXPECT_EQ(c, a);
}

// ---- Lea: quick lists over segregated DLList bins with boundary tags ---------------------
TEST(AccessCounts, Lea) {
  Arena arena(std::size_t{1} << 30);
  Meter meter(arena);
  LeaHeap<Top> heap(arena, std::uint8_t{1});
  void *a = nullptr, *c = nullptr;
  // malloc(100): the route (HybridHeap: 1 step); the quick list of 104 usable bytes (1
  // step, its head read 1: null); CoalesceHeap asks SegHeap for 104: class 7 looked up
  // (1 step), the bitmap's first word read (1) and, empty, its second (1 step, 1 read):
  // no bin. CoalesceableHeap makes a region: ThresholdHeap's cache head read (1, null), the
  // arena's obtain (1 step, ArenaHeap's header 2 writes), the region requested (1 step),
  // the region list's head read (1), prev, next and head written (3), the first block's
  // size word and the fence written (2). carve: setInUse reads and writes the block's word
  // and the fence's (2 reads, 2 writes); usable reads the word (1); the split reads it (1)
  // and writes both halves' (2), 1 step; setFree on the rest reads and writes its word,
  // writes its length at its end and reads and writes the fence's (2 reads, 3 writes); the
  // rest freed to SegHeap: its size word read (1), the class lookup (1 step), pushed on
  // bin 89's DLList (node prev and node next written, the sentinel's next read for the
  // node's next and again for the old first's prev, which is written, then the sentinel's
  // next written: 2 reads, 4 writes), the bitmap word read and written (1, 1).
  //   steps 1+1+1+1+1+1+1+1 = 8
  //   reads 1+2+1+1+2+1+1+2+1+2+1 = 15
  //   writes 2+3+2+2+2+3+4+1 = 19
  EXPECT_EQ(meter([&] { a = heap.malloc(100); }), (Counts{8, 15, 19}));
  // malloc(100): the route (1 step), the quick list (1 step, head read 1); SegHeap: the
  // lookup (1 step), the bitmap: word 0 (1 read) then word 1 (1 step, 1 read): bin 89,
  // probed (1 step); its first node visited (1 step: the sentinel's next read 1, the
  // node's size word read 1: it fits), unlinked (node->prev->next = node->next, then
  // node->next->prev = node->prev: each link read twice, as the store between makes the
  // machine reload it too: 4 reads, 2 writes); the bin now empty (the sentinel's next read
  // 1), its bit cleared (1 read, 1 write). carve as above without the region: setInUse (2,
  // 2), usable (1), split (1 read, 2 writes, 1 step), setFree (2, 3), the rest freed to bin
  // 89 (size word 1, lookup 1 step, DLList 2 reads and 4 writes, the bitmap 1 read and 1
  // write).
  //   steps 1+1+1+1+1+1+1+1 = 8
  //   reads 1+2+1+1+4+1+1+2+1+1+2+1+2+1 = 21
  //   writes 2+1+2+2+3+4+1 = 15
  EXPECT_EQ(meter([&] { heap.malloc(100); }), (Counts{8, 21, 15}));
  // free(a): the route (1 step, the size word's flags read 1); QuickListHeap reads the size
  // (1), looks up the list (1 step), pushes: head read (1), a's next and the head written.
  //   steps 2, reads 3, writes 2
  EXPECT_EQ(meter([&] { heap.free(a); }), (Counts{2, 3, 2}));
  // malloc(100): the route (1 step), the quick list (1 step, head read 1: a), a's next read
  // (1), the head written (1).                                     steps 2, reads 2, writes 1
  EXPECT_EQ(meter([&] { c = heap.malloc(100); }), (Counts{2, 2, 1}));
  EXPECT_EQ(c, a);
}

}  // namespace
}  // namespace heapkit
