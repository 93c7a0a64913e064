// GCBench-like: Boehm's binary-tree builder with explicit frees. A long-lived tree and
// a long-lived array stay up while many short-lived trees of depths 4..16 are built top
// down and bottom up and then freed. Every tree is walked before it is freed: its shape
// (node count, depth) and the values stored in its nodes must be exactly right, so a heap
// that hands out a live node again is caught. Requests are all one size (32 bytes), with
// one big array.
#pragma once

#include <cstdint>

#include "AllocatorPolicy.h"

namespace heapkit::workloads {

namespace gcbench_detail {

struct Node {
  Node* left;
  Node* right;
  std::uint32_t depth;  // of the subtree below this node
  std::uint32_t label;  // left/right path from the root, kept to check the walk
};

template <AllocatorPolicy A>
Node* makeNode(A& alloc, Node* left, Node* right, std::uint32_t depth, std::uint32_t label) {
  auto* node = static_cast<Node*>(allocateOrThrow(alloc, sizeof(Node)));
  *node = Node{left, right, depth, label};
  return node;
}

// Bottom-up: children first, as in GCBench's MakeTree.
template <AllocatorPolicy A>
Node* makeTree(A& alloc, std::uint32_t depth, std::uint32_t label) {
  if (depth == 0) return makeNode<A>(alloc, nullptr, nullptr, 0, label);
  Node* left = makeTree(alloc, depth - 1, label * 2);
  Node* right = makeTree(alloc, depth - 1, label * 2 + 1);
  return makeNode(alloc, left, right, depth, label);
}

// Top-down: the parent first, as in GCBench's Populate.
template <AllocatorPolicy A>
void populate(A& alloc, Node* node, std::uint32_t depth) {
  if (depth == 0) return;
  node->left = makeNode<A>(alloc, nullptr, nullptr, depth - 1, node->label * 2);
  node->right = makeNode<A>(alloc, nullptr, nullptr, depth - 1, node->label * 2 + 1);
  populate(alloc, node->left, depth - 1);
  populate(alloc, node->right, depth - 1);
}

// Walks at most `depth` levels, so a corrupted tree cannot send the walk round a cycle.
inline std::uint64_t checkTree(const Node* node, std::uint32_t depth, std::uint32_t label) {
  require(node != nullptr && node->depth == depth && node->label == label, "tree node corrupted");
  if (depth == 0) {
    require(node->left == nullptr && node->right == nullptr, "leaf has children");
    return 1;
  }
  return 1 + checkTree(node->left, depth - 1, label * 2) + checkTree(node->right, depth - 1, label * 2 + 1);
}

template <AllocatorPolicy A>
void freeTree(A& alloc, Node* node) {
  if (node == nullptr) return;
  freeTree(alloc, node->left);
  freeTree(alloc, node->right);
  alloc.deallocate(node);
}

template <AllocatorPolicy A>
std::uint64_t buildCheckFree(A& alloc, Node* root, std::uint32_t depth) {
  std::uint64_t nodes = checkTree(root, depth, 1);
  require(nodes == (std::uint64_t{2} << depth) - 1, "tree has the wrong node count");
  freeTree(alloc, root);
  return nodes;
}

}  // namespace gcbench_detail

// scale: rounds of temporary trees (GCBench's shape is one round at long-lived depth 16).
template <AllocatorPolicy A>
std::uint64_t runGcBench(A& alloc, unsigned scale) {
  using namespace gcbench_detail;
  constexpr std::uint32_t kLongLivedDepth = 16;
  constexpr std::uint32_t kArraySize = 500'000;
  constexpr std::uint32_t kMinDepth = 4, kMaxDepth = 16;

  Node* longLived = makeNode<A>(alloc, nullptr, nullptr, kLongLivedDepth, 1);
  populate(alloc, longLived, kLongLivedDepth);
  auto* array = allocateArray<double>(alloc, kArraySize);
  for (std::uint32_t i = 0; i < kArraySize / 2; ++i) array[i] = 1.0 / (i + 1);

  std::uint64_t checksum = 0;
  for (unsigned round = 0; round < scale; ++round) {
    for (std::uint32_t depth = kMinDepth; depth <= kMaxDepth; depth += 2) {
      // As in GCBench: as many trees of each depth as make the same number of nodes.
      std::uint32_t iterations = 2u << (kMaxDepth - depth);
      for (std::uint32_t i = 0; i < iterations; ++i) {
        Node* topDown = makeNode<A>(alloc, nullptr, nullptr, depth, 1);
        populate(alloc, topDown, depth);
        checksum += buildCheckFree(alloc, topDown, depth);
        checksum += buildCheckFree(alloc, makeTree(alloc, depth, 1), depth);
      }
    }
  }
  checksum += checkTree(longLived, kLongLivedDepth, 1);
  require(array[1000] == 1.0 / 1001, "long-lived array corrupted");
  freeTree(alloc, longLived);
  alloc.deallocate(array);
  return checksum;
}

}  // namespace heapkit::workloads
