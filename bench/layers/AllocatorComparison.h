// Runs the workloads on glibc's malloc and on heapkit's general-purpose heaps and
// reports time and peak footprint per (workload, allocator), as ratios to glibc measured
// in the same run (the paper's Tables 5 and 6). Each measurement is a fresh process (this
// program re-executed with --child), so peak resident set (VmHWM) belongs to one
// allocator and one workload; a process that runs no workload gives the baseline.
// Shared by `heapkit-bench-layers` and the `heapkit-tour` demo.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "heapkit/general/CoalescingKingsleyHeap.h"
#include "heapkit/general/KingsleyHeap.h"
#include "heapkit/general/LeaHeap.h"
#include "workloads/Workloads.h"

namespace heapkit::bench {

inline constexpr std::string_view kAllocators[] = {"glibc", "Kingsley", "CoalescingKingsley", "Lea"};

struct Measurement {
  double seconds = 0;
  std::size_t peakBytesHeld = 0;  // the heapkit top heap's high-water mark; 0 for glibc
  std::size_t peakResidentKiB = 0;  // VmHWM of the whole process
  std::uint64_t checksum = 0;
};

inline std::size_t peakResidentKiB() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10);
  return 0;
}

namespace detail {

template <class Heap>
Measurement measureOnHeap(std::string_view workload, unsigned scale) {
  Measurement m;
  auto start = std::chrono::steady_clock::now();
  {
    // Built and torn down inside the timed region, as a process's heap would be.
    Heap heap;
    workloads::HeapPolicy<Heap> policy{&heap};
    m.checksum = workloads::runWorkload(workload, policy, scale);
    m.peakBytesHeld = heap.peakBytesHeld();
  }
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return m;
}

inline Measurement measure(std::string_view allocator, std::string_view workload, unsigned scale) {
  if (workload == "none") return Measurement{};
  if (allocator == "Kingsley") return measureOnHeap<KingsleyHeap<MmapHeap>>(workload, scale);
  if (allocator == "CoalescingKingsley") return measureOnHeap<CoalescingKingsleyHeap<MmapHeap>>(workload, scale);
  if (allocator == "Lea") return measureOnHeap<LeaHeap<MmapHeap>>(workload, scale);
  Measurement m;
  workloads::MallocPolicy policy;
  auto start = std::chrono::steady_clock::now();
  m.checksum = workloads::runWorkload(workload, policy, scale);
  m.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return m;
}

inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// Re-executes this program as `--child allocator workload scale` and reads its one line.
inline bool runChildProcess(std::string_view allocator, std::string_view workload, unsigned scale, Measurement& out) {
  int pipeFds[2];
  if (pipe(pipeFds) != 0) return false;
  std::string a(allocator), w(workload), s = std::to_string(scale);
  pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    dup2(pipeFds[1], STDOUT_FILENO);
    close(pipeFds[0]);
    close(pipeFds[1]);
    char* args[] = {const_cast<char*>("heapkit-measure"), const_cast<char*>("--child"), a.data(), w.data(), s.data(),
                    nullptr};
    execv("/proc/self/exe", args);
    _exit(127);
  }
  close(pipeFds[1]);
  std::string text;
  char buffer[256];
  for (ssize_t got; (got = read(pipeFds[0], buffer, sizeof buffer)) > 0;) text.append(buffer, static_cast<std::size_t>(got));
  close(pipeFds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return false;
  return std::sscanf(text.c_str(), "measurement %lf %zu %zu %" SCNx64, &out.seconds, &out.peakBytesHeld,
                     &out.peakResidentKiB, &out.checksum) == 4;
}

}  // namespace detail

// In a child process: measures one run and prints it. Returns the exit status, or -1
// when this process is not a child (the caller then goes on with its own work).
inline int childMain(int argc, char** argv) {
  if (argc != 5 || std::strcmp(argv[1], "--child") != 0) return -1;
  try {
    Measurement m = detail::measure(argv[2], argv[3], static_cast<unsigned>(std::strtoul(argv[4], nullptr, 10)));
    m.peakResidentKiB = peakResidentKiB();
    std::printf("measurement %.9f %zu %zu %" PRIx64 "\n", m.seconds, m.peakBytesHeld, m.peakResidentKiB, m.checksum);
    return 0;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s on %s: %s\n", argv[3], argv[2], error.what());
    return 1;
  }
}

struct ComparisonOptions {
  bool quick = false;  // the workloads' quick scales (the demo)
  unsigned runs = 5;   // medians of this many runs
  std::FILE* progress = stderr;
};

struct ComparisonRow {
  std::string workload, allocator;
  double seconds, timeRatio;          // medians; ratio to glibc on the same workload
  double peakBytesHeld;               // heapkit top heap, bytes (0 for glibc)
  double residentKiB, residentRatio;  // VmHWM minus the baseline process
};

// Runs everything, interleaving allocators within each round so drifting machine load
// hits all of them alike. Returns false (after saying why) if any run failed or two
// allocators disagreed on a workload's checksum.
inline bool compareAllocators(const ComparisonOptions& options, std::vector<ComparisonRow>& rows, double& baselineKiB) {
  using workloads::kWorkloads;
  constexpr std::size_t kAllocatorCount = std::size(kAllocators);
  constexpr std::size_t kWorkloadCount = std::size(kWorkloads);
  std::vector<double> seconds[kWorkloadCount][kAllocatorCount], held[kWorkloadCount][kAllocatorCount],
      resident[kWorkloadCount][kAllocatorCount], baseline;
  std::uint64_t checksums[kWorkloadCount] = {};
  for (unsigned run = 0; run < options.runs; ++run) {
    if (options.progress) std::fprintf(options.progress, "\r  run %u/%u ", run + 1, options.runs), std::fflush(options.progress);
    Measurement none;
    if (!detail::runChildProcess("glibc", "none", 0, none)) return false;
    baseline.push_back(static_cast<double>(none.peakResidentKiB));
    for (std::size_t w = 0; w < kWorkloadCount; ++w) {
      unsigned scale = options.quick ? kWorkloads[w].quickScale : kWorkloads[w].fullScale;
      for (std::size_t a = 0; a < kAllocatorCount; ++a) {
        Measurement m;
        if (!detail::runChildProcess(kAllocators[a], kWorkloads[w].name, scale, m)) {
          std::fprintf(stderr, "\n%s on %s failed\n", std::string(kWorkloads[w].name).c_str(),
                       std::string(kAllocators[a]).c_str());
          return false;
        }
        if (run == 0 && a == 0) checksums[w] = m.checksum;
        if (m.checksum != checksums[w]) {
          std::fprintf(stderr, "\n%s on %s: checksum differs from glibc's\n", std::string(kWorkloads[w].name).c_str(),
                       std::string(kAllocators[a]).c_str());
          return false;
        }
        seconds[w][a].push_back(m.seconds);
        held[w][a].push_back(static_cast<double>(m.peakBytesHeld));
        resident[w][a].push_back(static_cast<double>(m.peakResidentKiB));
      }
    }
  }
  if (options.progress) std::fprintf(options.progress, "\r%*s\r", 20, "");
  baselineKiB = detail::median(baseline);
  rows.clear();
  for (std::size_t w = 0; w < kWorkloadCount; ++w) {
    double glibcSeconds = detail::median(seconds[w][0]);
    double glibcResident = std::max(1.0, detail::median(resident[w][0]) - baselineKiB);
    for (std::size_t a = 0; a < kAllocatorCount; ++a) {
      ComparisonRow row;
      row.workload = kWorkloads[w].name;
      row.allocator = kAllocators[a];
      row.seconds = detail::median(seconds[w][a]);
      row.timeRatio = row.seconds / glibcSeconds;
      row.peakBytesHeld = detail::median(held[w][a]);
      row.residentKiB = std::max(1.0, detail::median(resident[w][a]) - baselineKiB);
      row.residentRatio = row.residentKiB / glibcResident;
      rows.push_back(row);
    }
  }
  return true;
}

// A Markdown table, then the geometric mean of each allocator's ratios.
inline void printComparison(std::FILE* out, const std::vector<ComparisonRow>& rows, double baselineKiB) {
  std::fprintf(out, "| workload | allocator | time (ms) | time / glibc | peak held by top heap (KiB) | peak RSS − baseline (KiB) | RSS / glibc |\n");
  std::fprintf(out, "|---|---|---:|---:|---:|---:|---:|\n");
  for (const ComparisonRow& row : rows) {
    char held[32] = "n/a";
    if (row.allocator != "glibc") std::snprintf(held, sizeof held, "%.0f", row.peakBytesHeld / 1024);
    std::fprintf(out, "| %s | %s | %.1f | %.2f | %s | %.0f | %.2f |\n", row.workload.c_str(), row.allocator.c_str(),
                 row.seconds * 1e3, row.timeRatio, held, row.residentKiB, row.residentRatio);
  }
  std::fprintf(out, "\nGeometric mean over the workloads (baseline RSS %.0f KiB subtracted):\n\n", baselineKiB);
  std::fprintf(out, "| allocator | time / glibc | RSS / glibc |\n|---|---:|---:|\n");
  for (std::string_view allocator : kAllocators) {
    double logTime = 0, logResident = 0;
    int count = 0;
    for (const ComparisonRow& row : rows) {
      if (row.allocator != allocator) continue;
      logTime += std::log(row.timeRatio);
      logResident += std::log(row.residentRatio);
      ++count;
    }
    std::fprintf(out, "| %s | %.2f | %.2f |\n", std::string(allocator).c_str(), std::exp(logTime / count),
                 std::exp(logResident / count));
  }
}

}  // namespace heapkit::bench
