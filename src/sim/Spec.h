// DMM specs in JSON (docs/dmm-spec.md, python/heapkit/schemas/dmm-spec.schema.json): read,
// validated and normalised here, once, for the simulator, the Python API, the replayer and
// the preload library alike. Every error is one SpecError naming the field's path, e.g.
// "allocators[1].list.fit: 'bestest' is not one of first, next, best, exact, worst".
#pragma once

#include <stdexcept>
#include <string>

#include "heapkit/dmm/DmmSpec.h"

namespace heapkit::sim {

inline constexpr const char* kSpecFormat = "heapkit-dmm/1";

struct SpecError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct ParsedSpec {
  DmmSpec dmm;
  std::string name;
  std::string description;
  // Every field present, defaults filled in, in a fixed order, no white space: two specs
  // that mean the same design have the same normalised text (the search's cache key).
  std::string normalized;
};

ParsedSpec parseSpec(const std::string& jsonText);
// Reads a file; its errors start with the path.
ParsedSpec loadSpec(const std::string& path);

}  // namespace heapkit::sim
