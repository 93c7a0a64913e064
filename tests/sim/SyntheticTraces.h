// Synthetic traces of several shapes, written once per test process into the temporary
// directory, for the simulator's fidelity tests.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "heapkit/trace/Writer.h"

namespace heapkit::sim {

// A hand-made trace: `body` writes its events to a file in the temporary directory, named
// for this process and `name`, whose path is returned (the test removes it).
inline std::string writeTrace(const std::string& name, const std::function<void(trace::TraceWriter&)>& body) {
  std::string path =
      (std::filesystem::temp_directory_path() / ("heapkit-test-" + std::to_string(getpid()) + "-" + name)).string();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  {
    trace::TraceWriter w(f);
    w.begin({});
    body(w);
    w.end();
  }
  std::fclose(f);
  return path;
}

// How much of the heavy randomized checks to run: 1 in a release build; the sanitizer run
// (`make test-asan`) sets HEAPKIT_TEST_SCALE lower, as its code runs several times slower.
inline double testScale() {
  const char* text = std::getenv("HEAPKIT_TEST_SCALE");
  double scale = text != nullptr ? std::atof(text) : 1.0;
  return scale > 0 && scale <= 1 ? scale : 1.0;
}

// ---- synthetic traces -----------------------------------------------------------------

struct TraceShape {
  const char* name;
  std::size_t operations;
  // size of the next object, given the step and the generator
  std::size_t (*size)(std::mt19937_64&, std::size_t step);
  unsigned freePercent;  // chance that a step frees instead of allocating
  bool reallocs;
  bool aligned;
};

inline std::size_t smallSizes(std::mt19937_64& rng, std::size_t) { return 1 + rng() % 512; }
inline std::size_t geometricSizes(std::mt19937_64& rng, std::size_t) {
  std::size_t bits = 3 + rng() % 15;
  return 1 + rng() % (std::size_t{1} << bits);
}
// Phases of one size each (the reaps paper's phase shift), so freed space of one size
// must serve another.
inline std::size_t phasedSizes(std::mt19937_64&, std::size_t step) {
  static constexpr std::size_t kSizes[] = {24, 48, 100, 200, 400, 96, 40, 3000};
  return kSizes[(step / 1500) % std::size(kSizes)];
}
inline std::size_t largeSizes(std::mt19937_64& rng, std::size_t) {
  return rng() % 8 == 0 ? 100000 + rng() % 3000000 : 1 + rng() % 4096;
}

inline const TraceShape kShapes[] = {
    {"small", 12000, smallSizes, 45, true, false},
    {"geometric", 8000, geometricSizes, 48, true, true},
    {"phases", 12000, phasedSizes, 0, false, false},  // frees whole phases (see writeTrace)
    {"large", 3000, largeSizes, 50, true, true},
};

inline std::string writeTrace(const TraceShape& shape, std::uint64_t seed) {
  std::string path = (std::filesystem::temp_directory_path() / ("heapkit-fidelity-" + std::to_string(getpid()) + "-" +
                                                   shape.name + "-" + std::to_string(seed) + ".hkt"))
                         .string();
  std::FILE* file = std::fopen(path.c_str(), "wb");
  EXPECT_NE(file, nullptr);
  {
    trace::TraceWriter writer(file);
    trace::Header header;
    header.source = "fidelity test";
    writer.begin(header);
    std::mt19937_64 rng(seed);
    std::vector<std::uint64_t> live;
    std::uint64_t time = 0;
    for (std::size_t step = 0; step < shape.operations; ++step) {
      time += 1 + rng() % 50;
      bool phaseEnds = shape.freePercent == 0 && step % 1500 == 1499;
      if (phaseEnds) {
        // Free the whole phase, but keep every seventh object (long-lived survivors).
        std::vector<std::uint64_t> kept;
        for (std::uint64_t id : live) {
          if (id % 7 == 0) kept.push_back(id);
          else writer.free(0, time, id);
        }
        live.swap(kept);
        continue;
      }
      unsigned choice = static_cast<unsigned>(rng() % 100);
      if (!live.empty() && choice < shape.freePercent) {
        std::size_t at = rng() % live.size();
        writer.free(0, time, live[at]);
        live[at] = live.back();
        live.pop_back();
      } else if (!live.empty() && shape.reallocs && choice < shape.freePercent + 8) {
        std::size_t at = rng() % live.size();
        live[at] = writer.realloc(0, time, live[at], shape.size(rng, step));
      } else if (shape.aligned && choice >= 97) {
        live.push_back(writer.aligned(0, time, std::size_t{64} << (rng() % 7), shape.size(rng, step)));
      } else if (choice % 11 == 0) {
        live.push_back(writer.calloc(0, time, shape.size(rng, step)));
      } else {
        live.push_back(writer.malloc(0, time, shape.size(rng, step)));
      }
    }
    writer.end();
  }
  std::fclose(file);
  return path;
}

class Traces {
 public:
  Traces() {
    std::uint64_t seed = 11;
    for (const TraceShape& shape : kShapes) paths_.push_back(writeTrace(shape, seed++));
  }
  ~Traces() {
    for (const std::string& path : paths_) std::remove(path.c_str());
  }
  const std::vector<std::string>& paths() const { return paths_; }

 private:
  std::vector<std::string> paths_;
};

inline const Traces& traces() {
  static Traces instance;
  return instance;
}

}  // namespace heapkit::sim
