// The replaying process's resident set, from /proc: now, at its peak, and the peak set
// back to now, so that a replay's footprint leaves out the decoding before it. Part of
// heapkit-replay and of the verifier `heapkit build` compiles (installed with the package
// as heapkit-replay/ResidentSet.h).
#pragma once

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>

namespace heapkit::replay {

// With system calls only: no stdio buffer, so sampling during a replay allocates nothing
// from the allocator under test.
inline std::uint64_t residentBytes() {
  int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char text[128];
  ssize_t n = ::read(fd, text, sizeof text - 1);
  ::close(fd);
  if (n <= 0) return 0;
  text[n] = '\0';
  unsigned long pages = 0, resident = 0;
  if (std::sscanf(text, "%lu %lu", &pages, &resident) != 2) return 0;
  return std::uint64_t{resident} * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
}

// VmHWM, which resetPeak() sets back to the current resident set (getrusage's maximum
// where /proc has no VmHWM).
inline std::uint64_t peakResidentBytes() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  char line[256];
  unsigned long long kib = 0;
  bool found = false;
  while (f != nullptr && std::fgets(line, sizeof line, f) != nullptr)
    if (std::sscanf(line, "VmHWM: %llu kB", &kib) == 1) found = true;
  if (f != nullptr) std::fclose(f);
  if (found) return kib * 1024;
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;
}

// False where the kernel does not let a process reset its peak.
inline bool resetPeak() {
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (f == nullptr) return false;
  bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}

}  // namespace heapkit::replay
