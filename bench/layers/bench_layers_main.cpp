// heapkit-bench-layers [--quick] [--runs N]: KingsleyHeap, CoalescingKingsleyHeap and
// LeaHeap against glibc malloc on the workloads; prints a Markdown table of medians.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "layers/AllocatorComparison.h"

int main(int argc, char** argv) {
  if (int status = heapkit::bench::childMain(argc, argv); status >= 0) return status;
  heapkit::bench::ComparisonOptions options;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) options.quick = true;
    else if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc) options.runs = static_cast<unsigned>(std::atoi(argv[++i]));
    else {
      std::fprintf(stderr, "usage: %s [--quick] [--runs N]\n", argv[0]);
      return 2;
    }
  }
  if (options.runs == 0) options.runs = 1;
  std::vector<heapkit::bench::ComparisonRow> rows;
  double baselineKiB = 0;
  if (!heapkit::bench::compareAllocators(options, rows, baselineKiB)) return 1;
  std::printf("Medians of %u runs, each a fresh process; %s scales.\n\n", options.runs, options.quick ? "quick" : "full");
  heapkit::bench::printComparison(stdout, rows, baselineKiB);
  return 0;
}
