// Random page_segregated allocators for the fidelity tests (fidelity_test.cpp,
// thread_fidelity_test.cpp).
#pragma once

#include <cstddef>
#include <random>
#include <string>
#include <vector>

namespace heapkit::sim {

// A page_segregated allocator's fields, each present or not: random class lists (k
// ascending multiples of 16, 0 to 64 of them, up to 32 KiB) and random parameters, small
// enough that purges, segment releases and the large-block cache's limits happen within
// the synthetic traces.
inline std::string randomPageSegregatedFields(std::mt19937_64& rng) {
  std::string out;
  if (rng() % 4 != 0) {
    std::size_t count = rng() % 8 == 0 ? 0 : 1 + rng() % 64;
    std::vector<std::size_t> sizes;
    std::size_t granule = 1 + rng() % 4;
    for (std::size_t i = 0; i < count && granule <= 2048; ++i) {
      sizes.push_back(granule * 16);
      granule += 1 + rng() % (1 + granule / 2);
    }
    out += ", \"class_sizes\": [";
    for (std::size_t i = 0; i < sizes.size(); ++i) out += (i == 0 ? "" : ", ") + std::to_string(sizes[i]);
    out += "]";
  }
  if (rng() % 2) out += ", \"span_max_bytes\": " + std::to_string(std::size_t{65536} << (rng() % 10));
  if (rng() % 2) out += ", \"purge_delay\": " + std::to_string(rng() % 3 == 0 ? 0 : std::size_t{1} << (rng() % 13));
  if (rng() % 2) {
    std::size_t min = (rng() % 3) * 1048576;
    out += ", \"resident_free\": {\"min_bytes\": " + std::to_string(min) + ", \"max_bytes\": " +
           std::to_string(min + (rng() % 4) * 4194304) + ", \"in_use_percent\": " + std::to_string(rng() % 300) +
           (rng() % 2 ? ", \"below_peak\": true" : "") + "}";
  }
  if (rng() % 2) out += ", \"warm_superblocks\": " + std::to_string(rng() % 80);
  if (rng() % 2)
    out += ", \"large_cache\": {\"max_blocks\": " + std::to_string(rng() % 10) + ", \"fit_slack\": " +
           std::to_string(1 + rng() % 8) + ", \"idle_operations\": " + std::to_string(1 + rng() % 2048) + "}";
  return out;
}

}  // namespace heapkit::sim
