// Must fail to compile: int is not a heap, so FreelistHeap<int> breaks the layer contract.
#include "heapkit/building/FreelistHeap.h"

heapkit::FreelistHeap<int> wrong;
