// heapkit-tour (`make demo`): a few heaps composed from layers, what they cost, and how
// the general-purpose ones compare with glibc malloc on allocation-heavy work.
#include <cxxabi.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <memory_resource>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include "heapkit/building/FreelistHeap.h"
#include "heapkit/building/ChunkHeap.h"
#include "heapkit/objectrep/SizeHeap.h"
#include "heapkit/utility/DebugHeap.h"
#include "heapkit/utility/MemoryResource.h"
#include "heapkit/utility/ProfileHeap.h"
#include "layers/AllocatorComparison.h"

namespace {

using namespace heapkit;

// The demangled type, without namespaces and literal suffixes, so it reads as written.
template <class T>
std::string typeExpression() {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(typeid(T).name(), nullptr, nullptr, &status), std::free);
  std::string text = status == 0 ? name.get() : typeid(T).name();
  for (std::string noise : {"heapkit::", "ul,", "ul>", "(unsigned long)"}) {
    std::string keep = noise.size() == 3 ? noise.substr(2) : "";
    for (std::size_t at; (at = text.find(noise)) != std::string::npos;) text.replace(at, noise.size(), keep);
  }
  return text;
}

// The compositions as the general heaps spell them; the static_asserts prove these are
// exactly what KingsleyHeap and LeaCoreHeap are made of.
using KingsleyExpression = StrictSegHeap<kingsley::Classes, FreelistHeap, SizeHeap<ChunkHeap<kingsley::kChunkBytes, MmapHeap>>>;
using LeaExpression = QuickListHeap<lea::kQuickMaxBytes,
                                    CoalesceHeap<SegHeap<lea::Classes, lea::Bin,
                                                         CoalesceableHeap<lea::kRegionBytes, ThresholdHeap<lea::kTrimThreshold, MmapHeap>>>>>;
static_assert(std::is_base_of_v<KingsleyExpression, KingsleyHeap<MmapHeap>>);
static_assert(std::is_base_of_v<LeaExpression, LeaCoreHeap<MmapHeap>>);

void showCompositions() {
  std::printf("1. Allocators are type expressions of layers:\n\n");
  std::printf("   one size, a free list:\n     %s\n", typeExpression<FreelistHeap<SizeHeap<ChunkHeap<65536, MmapHeap>>>>().c_str());
  std::printf("   KingsleyHeap<MmapHeap> (BSD):\n     %s\n", typeExpression<KingsleyExpression>().c_str());
  std::printf("   LeaHeap<MmapHeap> (dlmalloc 2.7) = SelectMmapHeap<128 KiB, LeaCoreHeap>, LeaCoreHeap =\n     %s\n\n",
              typeExpression<LeaExpression>().c_str());
}

void showProfile() {
  std::printf("2. ProfileHeap over KingsleyHeap: power-of-two classes cost internal fragmentation.\n");
  ProfileHeap<KingsleyHeap<MmapHeap>> heap;
  std::vector<void*> objects;
  workloads::Rng rng(7);
  for (int i = 0; i < 10000; ++i) objects.push_back(heap.malloc(1 + rng.below(600)));
  const HeapProfile& profile = heap.profile();
  std::printf("   10000 objects of 1-600 bytes: %zu bytes requested, %zu held for them -> %.2fx; top heap holds %zu KiB\n\n",
              profile.liveRequestedBytes, profile.liveHeldBytes, profile.internalFragmentation(),
              heap.bytesHeld() / 1024);
  for (void* object : objects) heap.free(object);
}

int reportedErrors = 0;
void countHeapError(HeapError error, void* object, std::size_t size) {
  ++reportedErrors;
  std::printf("   handler called: %s at %p (%zu bytes)\n", describe(error), object, size);
}

void showDebugHeap() {
  std::printf("3. DebugHeap catches a double free (a handler reports it instead of aborting):\n");
  DebugHeap<64, LeaHeap<MmapHeap>> heap;
  heap.setErrorHandler(countHeapError);
  void* object = heap.malloc(48);
  heap.free(object);
  heap.free(object);  // the bug
  std::printf("   %d error(s) reported, the heap is intact\n\n", reportedErrors);
}

void showPmr() {
  std::printf("4. A std::pmr container on a composition:\n");
  HeapMemoryResource<ProfileHeap<LeaHeap<MmapHeap>>> resource;
  {
    std::pmr::vector<std::pmr::string> words(&resource);
    for (int i = 0; i < 1000; ++i) words.emplace_back("a string long enough to need the heap #" + std::to_string(i));
    const HeapProfile& profile = resource.heap().profile();
    std::printf("   pmr::vector of 1000 pmr::strings: %zu mallocs, %zu live objects, %zu bytes requested\n",
                profile.mallocs, profile.liveObjects, profile.liveRequestedBytes);
  }
  std::printf("   after the vector is gone: %zu live objects\n\n", resource.heap().profile().liveObjects);
}

}  // namespace

int main(int argc, char** argv) {
  if (int status = heapkit::bench::childMain(argc, argv); status >= 0) return status;
  showCompositions();
  showProfile();
  showDebugHeap();
  showPmr();

  std::printf("5. KingsleyHeap, CoalescingKingsleyHeap and LeaHeap against glibc malloc (quick mode; full\n"
              "   figures: `make bench-layers`). Time and peak footprint, medians of 3 fresh processes each.\n"
              "   Footprint: the peak of bytes held from the OS (heapkit's top heaps count it, glibc reports\n"
              "   its own high-water marks), and peak resident set (VmHWM) minus that of a process that runs\n"
              "   no workload, every process with its mapped files (code) resident first.\n\n");
  for (const auto& workload : heapkit::workloads::kWorkloads)
    std::printf("   %-9s %s\n", std::string(workload.name).c_str(), std::string(workload.description).c_str());
  std::printf("\n");
  heapkit::bench::ComparisonOptions options;
  options.quick = true;
  options.runs = 3;
  std::vector<heapkit::bench::ComparisonRow> rows;
  double baselineKiB = 0;
  if (!heapkit::bench::compareAllocators(options, rows, baselineKiB)) return 1;
  heapkit::bench::printComparison(stdout, rows, baselineKiB);
  return 0;
}
