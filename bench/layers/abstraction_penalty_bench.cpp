// Abstraction penalty, in time: a malloc+free pair through a composition of layers
// against a hand-written monolithic heap with the same algorithm (Google Benchmark).
// Repetitions are interleaved at random so machine noise falls on both alike; the
// summary prints median(layered) / median(monolithic) per case.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "layers/PairHeaps.h"

namespace {

using namespace heapkit::bench;

constexpr std::size_t kPairsPerIteration = 1000;

class MedianCollector : public benchmark::ConsoleReporter {
 public:
  std::map<std::string, double> medianNanosPerPair;

  void ReportRuns(const std::vector<Run>& runs) override {
    for (const Run& run : runs)
      if (run.run_type == Run::RT_Aggregate && run.aggregate_name == "median")
        medianNanosPerPair[run.run_name.str()] = run.GetAdjustedCPUTime() / kPairsPerIteration;
    ConsoleReporter::ReportRuns(runs);
  }
};

std::string caseName(const PairCase& pairCase, bool layered) {
  return std::string(layered ? "layered/" : "monolithic/") + std::string(pairCase.name) + "/" +
         std::to_string(pairCase.size) + (pairCase.inlined ? "/inlined" : "/called");
}

}  // namespace

int main(int argc, char** argv) {
  for (const PairCase& pairCase : kPairCases) {
    for (bool layered : {true, false}) {
      benchmark::RegisterBenchmark(caseName(pairCase, layered).c_str(), [pairCase, layered](benchmark::State& state) {
        withPairHeap(pairCase.name, layered, [&](auto& heap) {
          mallocFreePairs(heap, pairCase.size, 1, pairCase.inlined);  // the first pair takes the slow path
          for (auto _ : state) mallocFreePairs(heap, pairCase.size, kPairsPerIteration, pairCase.inlined);
        });
      })->Unit(benchmark::kNanosecond);
    }
  }
  // Defaults for a noisy machine; command-line flags given after these win.
  std::vector<char*> args{argv[0]};
  std::string repetitions = "--benchmark_repetitions=15", interleave = "--benchmark_enable_random_interleaving=true",
              minTime = "--benchmark_min_time=0.1", aggregatesOnly = "--benchmark_report_aggregates_only=true";
  for (std::string* flag : {&repetitions, &interleave, &minTime, &aggregatesOnly}) args.push_back(flag->data());
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  int count = static_cast<int>(args.size());
  benchmark::Initialize(&count, args.data());
  if (benchmark::ReportUnrecognizedArguments(count, args.data())) return 2;
  MedianCollector reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  std::printf("\n| case | layered (ns/pair) | monolithic (ns/pair) | layered / monolithic |\n|---|---:|---:|---:|\n");
  for (const PairCase& pairCase : kPairCases) {
    auto layered = reporter.medianNanosPerPair.find(caseName(pairCase, true));
    auto monolithic = reporter.medianNanosPerPair.find(caseName(pairCase, false));
    if (layered == reporter.medianNanosPerPair.end() || monolithic == reporter.medianNanosPerPair.end()) continue;
    std::printf("| %s, %zu B, %s | %.2f | %.2f | %.3f |\n", std::string(pairCase.name).c_str(), pairCase.size,
                pairCase.inlined ? "inlined" : "called",
                layered->second, monolithic->second, layered->second / monolithic->second);
  }
  return 0;
}
