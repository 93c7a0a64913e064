// A program with the custom allocator linked in (heapkit_link_allocator): every malloc,
// new and aligned_alloc of the process, its libraries' included, goes to example::MyHeap.
// glibc's own heap stays empty, which is what this program checks and prints.
#include <malloc.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

int main() {
  std::size_t glibcBefore = mallinfo2().uordblks;
  std::map<int, std::string> table;
  for (int i = 0; i < 100000; ++i) table[i] = std::string(static_cast<std::size_t>(i % 64), 'x');
  void* aligned = std::aligned_alloc(4096, 10000);
  std::size_t glibcAfter = mallinfo2().uordblks;
  std::printf("custom allocator: %zu map entries, aligned block %s, glibc heap grew by %zu bytes\n", table.size(),
              reinterpret_cast<std::uintptr_t>(aligned) % 4096 == 0 ? "aligned" : "MISALIGNED", glibcAfter - glibcBefore);
  std::free(aligned);
  return glibcAfter - glibcBefore < 65536 ? 0 : 1;
}
