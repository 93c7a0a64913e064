// heapkit-sim-speed TRACE SPEC [REPEATS [RESERVE_GIB]] [--no-cache-model]: simulation speed of one
// design on one trace, trace decoding included (the figure `make bench-sim` reports): the
// median and the best of REPEATS runs, in wall-clock time and in the thread's CPU time
// (which other load on a shared machine does not disturb), and the run's counts (so that a
// change meant to make the simulator faster can be checked to count the same). The cache
// model is on, as in `heapkit simulate`, unless --no-cache-model.
#include <time.h>

#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <exception>

#include "Simulate.h"

int main(int argc, char** argv) {
  heapkit::sim::SimulationOptions options;
  if (argc > 1 && std::strcmp(argv[argc - 1], "--no-cache-model") == 0) {
    options.cacheModel = false;
    --argc;
  }
  if (argc < 3) {
    std::fprintf(stderr, "usage: heapkit-sim-speed TRACE SPEC [REPEATS [RESERVE_GIB]] [--no-cache-model]\n");
    return 1;
  }
  int repeats = argc > 3 ? std::atoi(argv[3]) : 3;
  // valgrind gives a process less address space than the default reserve.
  if (argc > 4) options.reserveBytes = static_cast<std::size_t>(std::atoi(argv[4])) << 30;
  try {
    heapkit::sim::ParsedSpec spec = heapkit::sim::loadSpec(argv[2]);
    auto cpuSeconds = [] {
      struct timespec ts;
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
      return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
    };
    std::vector<double> times, cpuTimes;
    heapkit::sim::SimulationResult result;
    for (int i = 0; i < std::max(repeats, 1); ++i) {
      double start = cpuSeconds();
      result = heapkit::sim::simulate(spec, argv[1], options);
      cpuTimes.push_back(cpuSeconds() - start);
      times.push_back(result.seconds);
    }
    std::sort(times.begin(), times.end());
    std::sort(cpuTimes.begin(), cpuTimes.end());
    double median = times[times.size() / 2], best = times.front();
    double cpuMedian = cpuTimes[cpuTimes.size() / 2];
    auto events = static_cast<double>(result.operations.events);
    std::printf("{\"events\": %llu, \"seconds\": %.6f, \"best_seconds\": %.6f, \"events_per_second\": %.0f, "
                "\"best_events_per_second\": %.0f, \"cpu_seconds\": %.6f, \"cpu_events_per_second\": %.0f, "
                "\"cpu_best_events_per_second\": %.0f, \"peak_footprint\": %zu, \"steps\": %llu, \"reads\": %llu, "
                "\"writes\": %llu, \"l1_misses\": %llu, \"l2_misses\": %llu, \"l3_misses\": %llu, \"tlb_misses\": %llu, "
                "\"pages_touched\": %llu}\n",
                static_cast<unsigned long long>(result.operations.events), median, best, events / median, events / best,
                cpuMedian, events / cpuMedian, events / cpuTimes.front(), result.peakFootprintBytes,
                static_cast<unsigned long long>(result.counts.steps), static_cast<unsigned long long>(result.counts.reads),
                static_cast<unsigned long long>(result.counts.writes), static_cast<unsigned long long>(result.memory.l1Misses),
                static_cast<unsigned long long>(result.memory.l2Misses), static_cast<unsigned long long>(result.memory.l3Misses),
                static_cast<unsigned long long>(result.memory.tlbMisses),
                static_cast<unsigned long long>(result.memory.pagesTouched));
  } catch (const std::exception& error) {
    std::fprintf(stderr, "heapkit-sim-speed: %s\n", error.what());
    return 2;
  }
}
