// A user's program: composes its own heap from heapkit layers and checks it works.
#include <heapkit/heapkit.h>

#include <cstdio>
#include <cstring>
#include <vector>

using MyHeap = heapkit::ProfileHeap<heapkit::LeaHeap<heapkit::MmapHeap>>;

int main() {
  MyHeap heap;
  std::vector<void*> objects;
  for (std::size_t i = 1; i <= 1000; ++i) {
    void* object = heap.malloc(i * 7);
    if (object == nullptr) return 1;
    std::memset(object, 0x5a, i * 7);
    objects.push_back(object);
  }
  for (void* object : objects) heap.free(object);
  if (heap.profile().liveObjects != 0 || heap.profile().mallocs != 1000) return 2;
  std::printf("consumer: ok (%zu mallocs)\n", heap.profile().mallocs);
  return 0;
}
