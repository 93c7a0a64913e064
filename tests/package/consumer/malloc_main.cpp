// A user's program with a heapkit composition linked in as its malloc: KingsleyHeap rounds
// requests up to powers of two, which glibc does not, so usable sizes show whose malloc runs.
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <string>

int main() {
  void* block = std::malloc(100);
  std::size_t usable = malloc_usable_size(block);
  std::string text(1000, 'k');  // operator new goes to the same heap
  std::free(block);
  if (usable != 128 || text.size() != 1000) {
    std::printf("consumer-malloc: not Kingsley's malloc (usable size %zu for 100 bytes)\n", usable);
    return 1;
  }
  std::printf("consumer-malloc: ok (usable size %zu)\n", usable);
  return 0;
}
