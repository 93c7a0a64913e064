// Runs the workloads on glibc's malloc and on heapkit's general-purpose heaps and
// reports time and peak footprint per (workload, allocator), as ratios to glibc measured
// in the same run (the paper's Tables 5 and 6). Each measurement is a fresh process (this
// program re-executed with --child). Footprint is counted two ways:
//  - held from the OS at the peak, exact and repeatable: heapkit's top heaps count it,
//    glibc reports its own high-water marks (glibcPeakBytesHeld);
//  - peak resident set (VmHWM) over that of a process that runs no workload. Every child
//    first faults in its mapped files (faultInMappedFiles), so the difference is memory,
//    not code; the kernel updates its counters in batches, so this one varies by up to a
//    few hundred KiB from run to run.
// Shared by `heapkit-bench-layers` and the `heapkit-tour` demo.
#pragma once

#include <malloc.h>
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
  std::size_t peakBytesHeld = 0;  // high-water mark of bytes held from the OS (see glibcPeakBytesHeld)
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

// Faults in every page of every file this process maps (the program, the C and C++
// libraries). Peak resident set counts file pages too, and which library code gets
// touched depends on the allocator: heapkit's top heaps call mmap and munmap, whose code
// glibc's malloc never faults in, and each fault brings in 64 KiB around it, more than
// some workloads' whole heap. With every mapped file resident in every child, the
// baseline included, those pages cancel and the difference is the heap's memory.
inline void faultInMappedFiles() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  long page = sysconf(_SC_PAGESIZE);
  while (std::getline(maps, line)) {
    unsigned long start = 0, end = 0, offset = 0;
    char permissions[5] = {};
    int pathAt = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx %4s %lx %*s %*s %n", &start, &end, permissions, &offset, &pathAt) < 4) continue;
    if (permissions[0] != 'r' || pathAt <= 0 || line.c_str()[pathAt] != '/') continue;
    for (unsigned long address = start; address < end; address += static_cast<unsigned long>(page))
      static_cast<void>(*reinterpret_cast<const volatile char*>(address));
  }
}

// glibc's own high-water marks of what it obtained from the OS: its arenas' peak system
// bytes (malloc_info's total <system type="max">, the arena it made at start-up included,
// since the workload uses it) plus the peak of its mmapped chunks (malloc_stats' "max mmap
// bytes"). Two peaks summed, an upper bound of the true peak, as for LeaHeap's two top
// heaps. 0 if either cannot be read.
inline std::size_t glibcPeakBytesHeld() {
  std::size_t arenas = 0, mapped = 0;
  bool haveArenas = false, haveMapped = false;
  char* text = nullptr;
  std::size_t length = 0;
  if (std::FILE* info = open_memstream(&text, &length)) {
    malloc_info(0, info);
    std::fclose(info);
    // Per-heap figures come first; the last one is the total.
    for (const char* at = text; (at = std::strstr(at, "<system type=\"max\" size=\"")) != nullptr; ++at)
      arenas = std::strtoull(at + std::strlen("<system type=\"max\" size=\""), nullptr, 10), haveArenas = true;
    std::free(text);
  }
  // malloc_stats writes to stderr only: lend it a temporary file.
  std::fflush(stderr);
  int savedStderr = dup(STDERR_FILENO);
  if (std::FILE* stats = std::tmpfile(); stats != nullptr && savedStderr >= 0) {
    dup2(fileno(stats), STDERR_FILENO);
    malloc_stats();
    std::fflush(stderr);
    dup2(savedStderr, STDERR_FILENO);
    std::rewind(stats);
    char line[256];
    while (std::fgets(line, sizeof line, stats) != nullptr)
      if (std::sscanf(line, "max mmap bytes = %zu", &mapped) == 1) haveMapped = true;
    std::fclose(stats);
  }
  if (savedStderr >= 0) close(savedStderr);
  return haveArenas && haveMapped ? arenas + mapped : 0;
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
  m.peakBytesHeld = glibcPeakBytesHeld();
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
  faultInMappedFiles();
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
  double peakBytesHeld, heldRatio;    // peak bytes held from the OS; ratio to glibc's
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
    double glibcHeld = std::max(1.0, detail::median(held[w][0]));
    for (std::size_t a = 0; a < kAllocatorCount; ++a) {
      ComparisonRow row;
      row.workload = kWorkloads[w].name;
      row.allocator = kAllocators[a];
      row.seconds = detail::median(seconds[w][a]);
      row.timeRatio = row.seconds / glibcSeconds;
      row.peakBytesHeld = detail::median(held[w][a]);
      row.heldRatio = row.peakBytesHeld / glibcHeld;
      row.residentKiB = std::max(1.0, detail::median(resident[w][a]) - baselineKiB);
      row.residentRatio = row.residentKiB / glibcResident;
      rows.push_back(row);
    }
  }
  return true;
}

// A Markdown table, then the geometric mean of each allocator's ratios.
inline void printComparison(std::FILE* out, const std::vector<ComparisonRow>& rows, double baselineKiB) {
  std::fprintf(out, "| workload | allocator | time (ms) | time / glibc | peak held from the OS (KiB) | held / glibc | peak RSS − baseline (KiB) | RSS / glibc |\n");
  std::fprintf(out, "|---|---|---:|---:|---:|---:|---:|---:|\n");
  for (const ComparisonRow& row : rows) {
    std::fprintf(out, "| %s | %s | %.1f | %.2f | %.0f | %.3f | %.0f | %.2f |\n", row.workload.c_str(), row.allocator.c_str(),
                 row.seconds * 1e3, row.timeRatio, row.peakBytesHeld / 1024, row.heldRatio, row.residentKiB, row.residentRatio);
  }
  std::fprintf(out, "\nGeometric mean over the workloads (baseline RSS %.0f KiB subtracted):\n\n", baselineKiB);
  std::fprintf(out, "| allocator | time / glibc | held / glibc | RSS / glibc |\n|---|---:|---:|---:|\n");
  for (std::string_view allocator : kAllocators) {
    double logTime = 0, logHeld = 0, logResident = 0;
    int count = 0;
    for (const ComparisonRow& row : rows) {
      if (row.allocator != allocator) continue;
      logTime += std::log(row.timeRatio);
      logHeld += std::log(row.heldRatio);
      logResident += std::log(row.residentRatio);
      ++count;
    }
    std::fprintf(out, "| %s | %.2f | %.3f | %.2f |\n", std::string(allocator).c_str(), std::exp(logTime / count),
                 std::exp(logHeld / count), std::exp(logResident / count));
  }
}

}  // namespace heapkit::bench
