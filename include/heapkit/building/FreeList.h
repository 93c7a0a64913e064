// FreeList: one free list of blocks, in every form of the DMM design space: singly or
// doubly linked, or a size-ordered tree; LIFO, FIFO or address order; first, next, best,
// exact or worst fit. The form is a policy read from `policy.structure`, `policy.order`
// and `policy.fit`: run-time values for the simulator and the search (ListPolicy, or any
// configuration with those members), or static constexpr members for an emitted allocator,
// where the constants fold every branch away. The same source serves both.
//
// A FreeList is the list's own state only (head, tail, rover: 24 bytes), so a layer keeps
// one per size class in a plain array; the policy, and how a block's links and length are
// found (ListedBlocks), are passed to each operation, since every list of a layer shares
// them. A block is a header of `headerBytes` whose last word is the size word (the block's
// length and flags, core/SizeWord.h), then the object, where a free block keeps its links.
//
// Every operation takes the heap that owns the list: heads, links and the size words read
// to compare lengths are its metadata, loaded and stored through it (core/Counting.h), so
// a counting heap counts each access where it happens, and one step per list or tree node
// visited.
#pragma once

#include <cstddef>
#include <cstdint>

#include "heapkit/core/Counting.h"
#include "heapkit/core/SizeWord.h"

namespace heapkit {

enum class ListStructure : std::uint8_t { SinglyLinked, DoublyLinked, SizeTree };
enum class ListFit : std::uint8_t { First, Next, Best, Exact, Worst };
enum class ListOrder : std::uint8_t { Lifo, Fifo, Address, Size };

// The run-time form of the policy. A compile-time form is any type with these members as
// static constexpr (Lists<...> below); a larger configuration that has them serves too.
struct ListPolicy {
  ListStructure structure = ListStructure::DoublyLinked;
  ListFit fit = ListFit::First;
  ListOrder order = ListOrder::Lifo;
};

// The policy by type.
template <ListStructure Structure, ListFit Fit, ListOrder Order>
struct Lists {
  static constexpr ListStructure structure = Structure;
  static constexpr ListFit fit = Fit;
  static constexpr ListOrder order = Order;
};

// The forms a FreeList cannot take: nullptr when `policy` is valid, else "member: reason".
template <class Policy>
constexpr const char* invalidListPolicy(const Policy& policy) {
  if ((policy.structure == ListStructure::SizeTree) != (policy.order == ListOrder::Size))
    return "list.order: a size tree is ordered by size, and only a size tree is";
  if (policy.structure == ListStructure::SizeTree && policy.fit == ListFit::Next)
    return "list.fit: next fit has no meaning in a size-ordered tree";
  return nullptr;
}

// Where a listed block keeps its links and its length: the object starts `headerBytes`
// after the block, and the size word is the header's last word.
struct ListedBlocks {
  std::size_t headerBytes;

  struct Links {
    char* next;  // a tree's left child
    char* prev;  // a tree's right child
  };
  [[gnu::always_inline]] Links& links(char* block) const { return *reinterpret_cast<Links*>(block + headerBytes); }
  std::size_t& sizeWord(char* block) const {
    return *reinterpret_cast<std::size_t*>(block + headerBytes - sizeof(std::size_t));
  }
  template <class H>
  [[gnu::always_inline]] std::size_t length(H& heap, char* block) const {
    return loadMetadata(heap, sizeWord(block)) & ~sizeword::kFlagMask;
  }
};

class FreeList {
  using Links = ListedBlocks::Links;

 public:
  // Lists `block`, of `length` bytes (its size word is its caller's to write).
  template <class H, class Policy>
  [[gnu::always_inline]] void insert(H& heap, const Policy& policy, ListedBlocks blocks, char* block, std::size_t length) {
    if (policy.structure == ListStructure::SizeTree) return treeInsert(heap, policy, blocks, block, length);
    Walk<H, Policy> walk{heap, policy, blocks};
    char* before = nullptr;  // insert between these two (nullptr: the list's ends)
    char* after = nullptr;
    if (walk.fifo()) {
      before = walk.load(tail_);
    } else {
      after = walk.load(head_);
      if (policy.order == ListOrder::Address) {
        while (after != nullptr && after < block) {
          countStep(heap);  // a node passed
          before = after;
          after = walk.nextOf(after);
        }
      }
    }
    walk.store(blocks.links(block).next, after);
    if (walk.doubly()) walk.store(blocks.links(block).prev, before);
    if (before == nullptr) walk.store(head_, block);
    else walk.store(blocks.links(before).next, block);
    if (after == nullptr) {
      if (walk.fifo()) walk.store(tail_, block);
    } else if (walk.doubly()) {
      walk.store(blocks.links(after).prev, block);
    }
  }

  // Takes `block`, listed here with `length` bytes, out of the list (a neighbour being
  // merged).
  template <class H, class Policy>
  [[gnu::always_inline]] void remove(H& heap, const Policy& policy, ListedBlocks blocks, char* block, std::size_t length) {
    if (policy.structure == ListStructure::SizeTree) return treeRemove(heap, policy, blocks, block, length);
    Walk<H, Policy> walk{heap, policy, blocks};
    char* before = walk.doubly() ? walk.load(blocks.links(block).prev) : predecessorOf(walk, block);
    char* after = unlink(walk, before, block);
    if (policy.fit == ListFit::Next && walk.load(rover_) == block) walk.store(rover_, after);
  }

  // The block the policy's fit chooses for `length` bytes, taken out of the list; nullptr
  // when none fits (or the list is empty: its head is read either way).
  template <class H, class Policy>
  [[gnu::always_inline]] char* take(H& heap, const Policy& policy, ListedBlocks blocks, std::size_t length) {
    char* head = loadMetadata(heap, head_);
    if (head == nullptr) return nullptr;
    if (policy.structure == ListStructure::SizeTree) return treeTake(heap, policy, blocks, head, length);
    Walk<H, Policy> walk{heap, policy, blocks};
    return listFind(walk, head, length);
  }

 private:
  // One operation's context: the heap that counts, the policy, the block layout.
  template <class H, class Policy>
  struct Walk {
    H& heap;
    const Policy& policy;
    ListedBlocks blocks;

    template <class T>
    [[gnu::always_inline]] T load(const T& word) { return loadMetadata(heap, word); }
    template <class T, class V>
    void store(T& word, V value) { storeMetadata(heap, word, static_cast<T>(value)); }

    bool doubly() const { return policy.structure == ListStructure::DoublyLinked; }
    bool fifo() const { return policy.order == ListOrder::Fifo; }
    [[gnu::always_inline]] std::size_t lengthOf(char* block) { return blocks.length(heap, block); }
    [[gnu::always_inline]] char* nextOf(char* block) { return load(blocks.links(block).next); }

    // ---- the size tree: a treap keyed by (length, address) -------------------------------
    // Priorities are a hash of the block's address, so they need no storage; the arena's
    // aligned base makes them the same in the simulator and for real. One step per node
    // visited; the links a level reads and writes are counted where the code touches them.

    static std::uint32_t priorityOf(char* block) {
      auto x = static_cast<std::uint32_t>(reinterpret_cast<std::uintptr_t>(block));
      x ^= x >> 16;
      x *= 0x7feb352dU;
      x ^= x >> 15;
      x *= 0x846ca68bU;
      return x ^ (x >> 16);
    }
    char* leftOf(char* block) { return load(blocks.links(block).next); }
    char* rightOf(char* block) { return load(blocks.links(block).prev); }
    void setLeft(char* block, char* child) { store(blocks.links(block).next, child); }
    void setRight(char* block, char* child) { store(blocks.links(block).prev, child); }
    bool keyLess(char* a, std::size_t aLength, char* b) {
      std::size_t bLength = lengthOf(b);
      return aLength < bLength || (aLength == bLength && a < b);
    }

    char* treeInsert(char* root, char* block, std::size_t length) {
      if (root == nullptr) {
        setLeft(block, nullptr);
        setRight(block, nullptr);
        return block;
      }
      countStep(heap);  // a node visited
      if (keyLess(block, length, root)) {
        char* child = treeInsert(leftOf(root), block, length);
        setLeft(root, child);
        if (priorityOf(child) > priorityOf(root)) root = rotateRight(root, child);
      } else {
        char* child = treeInsert(rightOf(root), block, length);
        setRight(root, child);
        if (priorityOf(child) > priorityOf(root)) root = rotateLeft(root, child);
      }
      return root;
    }

    // `pivot` is root's left (right) child, already read.
    char* rotateRight(char* root, char* pivot) {
      setLeft(root, rightOf(pivot));
      setRight(pivot, root);
      return pivot;
    }
    char* rotateLeft(char* root, char* pivot) {
      setRight(root, leftOf(pivot));
      setLeft(pivot, root);
      return pivot;
    }

    char* treeErase(char* root, char* block, std::size_t length) {
      if (root == nullptr) return nullptr;
      countStep(heap);  // a node visited
      if (root == block) return treeJoin(leftOf(root), rightOf(root));
      if (keyLess(block, length, root)) setLeft(root, treeErase(leftOf(root), block, length));
      else setRight(root, treeErase(rightOf(root), block, length));
      return root;
    }

    char* treeJoin(char* a, char* b) {
      if (a == nullptr) return b;
      if (b == nullptr) return a;
      countStep(heap);  // two nodes merged into one subtree
      if (priorityOf(a) > priorityOf(b)) {
        setRight(a, treeJoin(rightOf(a), b));
        return a;
      }
      setLeft(b, treeJoin(a, leftOf(b)));
      return b;
    }
  };

  // Returns the block that followed.
  template <class W>
  [[gnu::always_inline]] char* unlink(W& walk, char* before, char* block) {
    char* after = walk.nextOf(block);
    if (before == nullptr) walk.store(head_, after);
    else walk.store(walk.blocks.links(before).next, after);
    if (after == nullptr) {
      if (walk.fifo()) walk.store(tail_, before);
    } else if (walk.doubly()) {
      walk.store(walk.blocks.links(after).prev, before);
    }
    return after;
  }

  template <class W>
  [[gnu::always_inline]] char* predecessorOf(W& walk, char* block) {
    char* before = nullptr;
    for (char* node = walk.load(head_); node != block; node = walk.nextOf(node)) {
      countStep(walk.heap);  // a node passed
      before = node;
    }
    return before;
  }

  template <class W>
  [[gnu::always_inline]] char* listFind(W& walk, char* head, std::size_t length) {
    char* chosen = nullptr;
    char* chosenBefore = nullptr;
    std::size_t chosenLength = 0;
    ListFit fit = walk.policy.fit;
    char* start = head;
    char* before = nullptr;
    if (fit == ListFit::Next) {
      if (char* rover = walk.load(rover_); rover != nullptr) {
        start = rover;
        before = walk.doubly() ? walk.load(walk.blocks.links(start).prev) : predecessorOf(walk, start);
      }
    }
    char* node = start;
    bool wrapped = false;
    while (true) {
      if (node == nullptr) {
        if (fit != ListFit::Next || wrapped || start == head) break;
        wrapped = true;
        node = head;
        before = nullptr;
        continue;
      }
      if (wrapped && node == start) break;
      countStep(walk.heap);  // a node visited
      std::size_t nodeLength = walk.lengthOf(node);
      bool fits = fit == ListFit::Exact ? nodeLength == length : nodeLength >= length;
      if (fits) {
        bool better = chosen == nullptr || (fit == ListFit::Best && nodeLength < chosenLength) ||
                      (fit == ListFit::Worst && nodeLength > chosenLength);
        if (better) {
          chosen = node;
          chosenBefore = before;
          chosenLength = nodeLength;
        }
        if (fit != ListFit::Best && fit != ListFit::Worst) break;
        if (fit == ListFit::Best && nodeLength == length) break;
      }
      before = node;
      node = walk.nextOf(node);
    }
    if (chosen == nullptr) return nullptr;
    char* after = unlink(walk, chosenBefore, chosen);
    if (fit == ListFit::Next) walk.store(rover_, after);
    return chosen;
  }

  // The tree's operations, out of line: a recursion is never inlined, and a walk whose
  // address it takes would be kept in memory on the lists' paths too.
  template <class H, class Policy>
  [[gnu::noinline]] void treeInsert(H& heap, const Policy& policy, ListedBlocks blocks, char* block, std::size_t length) {
    Walk<H, Policy> walk{heap, policy, blocks};
    walk.store(head_, walk.treeInsert(walk.load(head_), block, length));
  }
  template <class H, class Policy>
  [[gnu::noinline]] void treeRemove(H& heap, const Policy& policy, ListedBlocks blocks, char* block, std::size_t length) {
    Walk<H, Policy> walk{heap, policy, blocks};
    walk.store(head_, walk.treeErase(walk.load(head_), block, length));
  }
  // Best (and first: in a size-ordered tree the first fit is the best) is the smallest
  // block at least `length` long, exact the one equal to it, worst the longest.
  template <class H, class Policy>
  [[gnu::noinline]] char* treeTake(H& heap, const Policy& policy, ListedBlocks blocks, char* root, std::size_t length) {
    Walk<H, Policy> walk{heap, policy, blocks};
    char* chosen = nullptr;
    std::size_t chosenLength = 0;
    if (walk.policy.fit == ListFit::Worst) {
      for (char* node = root; node != nullptr; node = walk.rightOf(node)) {
        countStep(walk.heap);  // a node visited
        chosen = node;
      }
      chosenLength = walk.lengthOf(chosen);
      if (chosenLength < length) return nullptr;
    } else {
      for (char* node = root; node != nullptr;) {
        countStep(walk.heap);  // a node visited
        std::size_t nodeLength = walk.lengthOf(node);
        if (nodeLength >= length) {
          chosen = node;
          chosenLength = nodeLength;
          node = walk.leftOf(node);
        } else {
          node = walk.rightOf(node);
        }
      }
      if (chosen == nullptr || (walk.policy.fit == ListFit::Exact && chosenLength != length)) return nullptr;
    }
    walk.store(head_, walk.treeErase(root, chosen, chosenLength));
    return chosen;
  }

  char* head_ = nullptr;   // a tree's root
  char* tail_ = nullptr;   // kept for FIFO order only
  char* rover_ = nullptr;  // next fit's starting point
};

}  // namespace heapkit
