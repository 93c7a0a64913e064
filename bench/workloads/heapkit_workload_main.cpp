// heapkit-workload <name> [scale]: runs one workload on the C library's malloc family
// only, so that LD_PRELOAD can put any malloc underneath, and prints its checksum.
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "Workloads.h"

int main(int argc, char** argv) {
  using namespace heapkit::workloads;
  const WorkloadInfo* info = argc >= 2 ? findWorkload(argv[1]) : nullptr;
  if (info == nullptr || argc > 3) {
    std::fprintf(stderr, "usage: %s <workload> [scale]\nworkloads:\n", argv[0]);
    for (const WorkloadInfo& known : kWorkloads)
      std::fprintf(stderr, "  %-9s %s (default scale %u)\n", std::string(known.name).c_str(),
                   std::string(known.description).c_str(), known.fullScale);
    return 2;
  }
  unsigned scale = info->fullScale;
  if (argc == 3) {
    char* end = nullptr;
    unsigned long parsed = std::strtoul(argv[2], &end, 10);
    if (end == argv[2] || *end != '\0' || parsed == 0 || parsed > 1'000'000) {
      std::fprintf(stderr, "scale must be a positive integer\n");
      return 2;
    }
    scale = static_cast<unsigned>(parsed);
  }
  try {
    MallocPolicy malloc;
    std::uint64_t checksum = runWorkload(info->name, malloc, scale);
    std::printf("%s scale %u checksum %016" PRIx64 "\n", argv[1], scale, checksum);
  } catch (const WorkloadFailure& failure) {
    std::fprintf(stderr, "%s: FAILED: %s\n", argv[1], failure.what());
    return 1;
  }
  return 0;
}
