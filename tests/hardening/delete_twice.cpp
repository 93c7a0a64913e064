// operator delete twice, for misuse.c (C has no delete).
#include <cstdint>

extern "C" void heapkit_misuse_announce(const void* pointer);

struct Node {
  std::uint64_t words[6];
};

// volatile: the compiler must not elide the pair or see the second delete.
static Node* volatile node;

extern "C" void heapkit_misuse_delete_twice(int) {
  node = new Node{};
  heapkit_misuse_announce(node);
  delete node;
  delete node;
}
