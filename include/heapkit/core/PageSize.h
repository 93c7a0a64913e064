// The OS page size, read once.
#pragma once

#include <sys/auxv.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>

namespace heapkit {

// A relaxed atomic, not a function-local static: the thread-safe initialisation of a
// static calls the C++ runtime (__cxa_guard_acquire), which the preload libraries do not
// load. Two threads reading it first both ask the OS, and store the same value.
// getauxval, not sysconf: sysconf's code shares a page with nothing else a program runs
// early (fork and exec do), and under a preload library that page and the 15 mapped
// around it cost every program 64 KiB of resident memory.
inline std::size_t pageSize() {
  static constinit std::atomic<std::size_t> cached{0};
  std::size_t size = cached.load(std::memory_order_relaxed);
  if (size == 0) [[unlikely]] {
    size = static_cast<std::size_t>(getauxval(AT_PAGESZ));
    if (size == 0) size = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    cached.store(size, std::memory_order_relaxed);
  }
  return size;
}

}  // namespace heapkit
