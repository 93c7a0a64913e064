// Reaps, regions and obstacks against their peers, on two region workloads:
//  - compiler: per translation unit a region, per function a nested region destroyed at
//    the end of the function; many small objects (AST nodes, 16-128 bytes) initialised
//    when allocated; no single-object frees;
//  - server: a server-wide region, a child region per connection; request objects of
//    16-512 bytes and a few buffers of 1-8 KiB; about a third of the objects (scratch
//    buffers, temporaries) freed during the connection, where the allocator can;
//  - phase-shift: one heap; seven phases, each allocating 100 000 objects of one size
//    (24, 48, 100, 200, 400, 96, 40 bytes) and then freeing all of them, so the space a
//    phase frees can serve the next only if freed blocks merge and split. Reported with
//    each allocator's peak footprint beside its time.
// Every allocator runs the same pre-drawn size sequence; runs are interleaved and each
// figure is the median of --runs runs; ratios are against the reap in the same run.
//
//   reap_bench [--runs N] [--scale S] [--workload compiler|server|phase-shift] [--only NAME]
// --workload and --only (a substring of the allocator names) pick one workload and some
// allocators, e.g. one allocator alone under callgrind.
#include <apr_pools.h>
#include <malloc.h>
#include <obstack.h>
#include <sys/resource.h>
#include <talloc.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory_resource>
#include <random>
#include <string>
#include <vector>

#include "heapkit/general/LeaHeap.h"
#include "heapkit/reap.h"
#include "heapkit/special/ObstackHeap.h"
#include "heapkit/special/Reap.h"
#include "heapkit/special/ZoneHeap.h"
#include "heapkit/top/MallocHeap.h"
#include "heapkit/utility/ParentRef.h"

#define obstack_chunk_alloc std::malloc
#define obstack_chunk_free std::free

namespace {

// ---------------------------------------------------------------- allocators
// Each: Region* create(Region* parent); destroy(Region*); alloc(Region*, n); free(Region*, p)
// (a no-op where the allocator cannot free single objects).

struct ReapCpp {
  static constexpr const char* kName = "reap (C++ heapkit::Reap)";
  using Region = heapkit::Reap;
  static Region* create(Region* parent) { return parent ? new Region(*parent) : new Region(); }
  static void destroy(Region* r) { delete r; }
  static void* alloc(Region* r, std::size_t n) { return r->malloc(n); }
  static void free(Region* r, void* p) { r->free(p); }
};

struct ReapC {
  static constexpr const char* kName = "reap (C libheapkit-reap)";
  using Region = reap_t;
  static Region* create(Region* parent) { return reap_create(parent); }
  static void destroy(Region* r) { reap_destroy(r); }
  static void* alloc(Region* r, std::size_t n) { return reap_malloc(r, n); }
  static void free(Region* r, void* p) { reap_free(r, p); }
};

// A reap that drops its frees: a reap in region mode throughout.
struct ReapNoFree : ReapCpp {
  static constexpr const char* kName = "reap, frees dropped";
  static void free(Region*, void*) {}
};

// Over the same top heap as a reap's (libc malloc behind a 2 MiB chunk cache), shared
// by every region, so the comparison is of the region layers alone.
struct Zone {
  static constexpr const char* kName = "region (heapkit ZoneHeap)";
  using Top = heapkit::ReapChunkSource::Top;
  using Region = heapkit::ZoneHeap<heapkit::ParentRef<Top>>;
  static Top& top() {
    static Top shared;
    return shared;
  }
  static Region* create(Region*) { return new Region(&top()); }
  static void destroy(Region* r) { delete r; }
  static void* alloc(Region* r, std::size_t n) { return r->malloc(n); }
  static void free(Region*, void*) {}
};

struct HkObstack {
  static constexpr const char* kName = "obstack (heapkit ObstackHeap)";
  using Region = heapkit::ObstackHeap<4064, heapkit::MallocHeap>;
  static Region* create(Region*) { return new Region(); }
  static void destroy(Region* r) { delete r; }
  static void* alloc(Region* r, std::size_t n) { return r->alloc(n); }
  static void free(Region*, void*) {}
};

struct GnuObstack {
  static constexpr const char* kName = "obstack (glibc)";
  using Region = struct obstack;
  static Region* create(Region*) {
    auto* r = static_cast<Region*>(std::malloc(sizeof(Region)));
    obstack_init(r);
    return r;
  }
  static void destroy(Region* r) {
    obstack_free(r, nullptr);
    std::free(r);
  }
  static void* alloc(Region* r, std::size_t n) { return obstack_alloc(r, n); }
  static void free(Region*, void*) {}
};

// malloc/free has no regions: a region is the list of its objects, freed one by one.
struct Glibc {
  static constexpr const char* kName = "glibc malloc/free";
  struct Region {
    std::vector<void*> objects;
  };
  static Region* create(Region*) {
    auto* r = new Region();
    r->objects.reserve(256);
    return r;
  }
  static void destroy(Region* r) {
    for (void* p : r->objects) std::free(p);
    delete r;
  }
  static void* alloc(Region* r, std::size_t n) {
    void* p = std::malloc(n);
    r->objects.push_back(p);
    return p;
  }
  static void free(Region* r, void* p) {
    // The workload frees its most recent objects, so the search is short.
    auto it = std::find(r->objects.rbegin(), r->objects.rend(), p);
    *it = r->objects.back();
    r->objects.pop_back();
    std::free(p);
  }
};

struct Talloc {
  static constexpr const char* kName = "talloc";
  using Region = void;
  static Region* create(Region* parent) { return talloc_new(parent); }
  static void destroy(Region* r) { talloc_free(r); }
  static void* alloc(Region* r, std::size_t n) { return talloc_size(r, n); }
  static void free(Region*, void* p) { talloc_free(p); }
};

struct Apr {
  static constexpr const char* kName = "APR pools";
  using Region = apr_pool_t;
  static Region* create(Region* parent) {
    apr_pool_t* pool = nullptr;
    apr_pool_create(&pool, parent);
    return pool;
  }
  static void destroy(Region* r) { apr_pool_destroy(r); }
  static void* alloc(Region* r, std::size_t n) { return apr_palloc(r, n); }
  static void free(Region*, void*) {}
};

struct Monotonic {
  static constexpr const char* kName = "std::pmr::monotonic_buffer_resource";
  using Region = std::pmr::monotonic_buffer_resource;
  static Region* create(Region*) { return new Region(); }
  static void destroy(Region* r) { delete r; }
  static void* alloc(Region* r, std::size_t n) { return r->allocate(n == 0 ? 1 : n, 16); }
  static void free(Region*, void*) {}
};

// ---------------------------------------------------------------- workloads

struct Config {
  int runs = 7;
  double scale = 1.0;
  const char* workload = nullptr;  // both
  const char* only = nullptr;      // every allocator
};

// Sizes drawn once; every allocator sees the same sequence.
// count is a power of two (the workloads index with a mask).
std::vector<std::uint32_t> drawSizes(std::size_t count, std::uint64_t seed, bool server) {
  std::mt19937_64 rng(seed);
  std::vector<std::uint32_t> sizes(count);
  static const std::uint32_t kNodeSizes[] = {16, 24, 24, 32, 32, 32, 40, 48, 48, 64, 64, 96, 128};
  for (auto& size : sizes) {
    if (!server) {
      size = kNodeSizes[rng() % std::size(kNodeSizes)];
    } else {
      size = rng() % 16 == 0 ? 1024 + static_cast<std::uint32_t>(rng() % 7168)
                             : 16 + static_cast<std::uint32_t>(rng() % 497);
    }
  }
  return sizes;
}

volatile std::uint64_t sink;

// Writes the object as the program would initialise it.
inline void touch(void* p, std::size_t n) {
  std::memset(p, static_cast<int>(n), n);
}

template <class A>
double compiler(const std::vector<std::uint32_t>& sizes, int units) {
  // A mask, not %: a division per object would cost as much as a region's allocation.
  const std::size_t sizeMask = sizes.size() - 1;
  auto start = std::chrono::steady_clock::now();
  std::uint64_t check = 0;
  std::size_t next = 0;
  for (int unit = 0; unit < units; ++unit) {
    auto* unitRegion = A::create(nullptr);
    for (int function = 0; function < 20; ++function) {
      auto* functionRegion = A::create(unitRegion);
      for (int node = 0; node < 500; ++node) {
        std::size_t n = sizes[next++ & sizeMask];
        // One node in 16 outlives the function (symbols, types): the unit keeps it.
        auto* region = node % 16 == 0 ? unitRegion : functionRegion;
        void* p = A::alloc(region, n);
        touch(p, n);
        check += reinterpret_cast<std::uintptr_t>(p) & 0xff;
      }
      A::destroy(functionRegion);
    }
    A::destroy(unitRegion);
  }
  sink = check;
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

template <class A>
double server(const std::vector<std::uint32_t>& sizes, int connections) {
  // A mask, not %: a division per object would cost as much as a region's allocation.
  const std::size_t sizeMask = sizes.size() - 1;
  auto start = std::chrono::steady_clock::now();
  std::uint64_t check = 0;
  std::size_t next = 0;
  auto* serverRegion = A::create(nullptr);
  void* scratch[8];
  for (int connection = 0; connection < connections; ++connection) {
    auto* region = A::create(serverRegion);
    for (int request = 0; request < 8; ++request) {
      // Request objects live to the end of the connection; scratch objects (every
      // third) are freed when the request is done.
      int scratchCount = 0;
      for (int object = 0; object < 24; ++object) {
        std::size_t n = sizes[next++ & sizeMask];
        void* p = A::alloc(region, n);
        touch(p, n < 64 ? n : 64);  // headers written; buffers filled later, if at all
        check += reinterpret_cast<std::uintptr_t>(p) & 0xff;
        if (object % 3 == 0) scratch[scratchCount++] = p;
      }
      while (scratchCount > 0) A::free(region, scratch[--scratchCount]);
    }
    A::destroy(region);
  }
  A::destroy(serverRegion);
  sink = check;
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// ---------------------------------------------------------------- phase shift
// Heaps for the phase-shift workload: malloc, free, and peakBytes(), the high-water mark
// of the bytes the heap held (heapkit's top heaps count them).

struct PhaseReapCpp {
  static constexpr const char* kName = "reap (C++ heapkit::Reap)";
  heapkit::Reap reap;
  void* malloc(std::size_t n) { return reap.malloc(n); }
  void free(void* p) { reap.free(p); }
  std::size_t peakBytes() { return reap.peakFootprint(); }
};

struct PhaseReapC {
  static constexpr const char* kName = "reap (C libheapkit-reap)";
  reap_t* reap = reap_create(nullptr);
  ~PhaseReapC() { reap_destroy(reap); }
  void* malloc(std::size_t n) { return reap_malloc(reap, n); }
  void free(void* p) { reap_free(reap, p); }
  std::size_t peakBytes() {
    reap_stats_t stats{};
    reap_get_stats(reap, &stats);
    return stats.peak_footprint;
  }
};

struct PhaseReapNoFree : PhaseReapCpp {
  static constexpr const char* kName = "reap, frees dropped (region mode)";
  void free(void*) {}
};

struct PhaseLea {
  static constexpr const char* kName = "LeaHeap (heapkit)";
  heapkit::LeaHeap<> lea;
  void* malloc(std::size_t n) { return lea.malloc(n); }
  void free(void* p) { lea.free(p); }
  std::size_t peakBytes() { return lea.peakBytesHeld(); }
};

// glibc's bytes held are read with mallinfo2 (arena + mmapped) at the end of each
// phase's allocations, where live data peaks. Only a fresh process shows them: in this
// one, glibc's arena also holds what the other allocators' chunks left in it.
struct PhaseGlibc {
  static constexpr const char* kName = "glibc malloc/free";
  std::size_t peak = 0;
  void* malloc(std::size_t n) { return std::malloc(n); }
  void free(void* p) { std::free(p); }
  void phasePeak() {
    struct mallinfo2 info = mallinfo2();
    peak = std::max(peak, info.arena + info.hblkhd);
  }
  std::size_t peakBytes() { return peak; }
};

constexpr std::uint32_t kPhaseSizes[] = {24, 48, 100, 200, 400, 96, 40};

struct PhaseResult {
  double ms;
  std::size_t peakBytes;
};

template <class H>
PhaseResult phaseShift(std::size_t objectsPerPhase) {
  std::vector<void*> objects(objectsPerPhase);
  auto start = std::chrono::steady_clock::now();
  std::size_t peak;
  {
    H heap;
    for (std::uint32_t size : kPhaseSizes) {
      for (void*& object : objects) {
        object = heap.malloc(size);
        touch(object, size);
      }
      if constexpr (requires { heap.phasePeak(); }) heap.phasePeak();
      for (void* object : objects) heap.free(object);
    }
    peak = heap.peakBytes();
  }
  return {std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count(), peak};
}

// The hidden option by which the bench measures glibc's footprint in a fresh process.
constexpr const char* kGlibcFootprintOption = "--glibc-phase-shift-footprint";

struct GlibcFootprint {
  std::size_t peakBytes = 0;    // mallinfo2, at the phases' peaks
  std::size_t peakRssBytes = 0;  // the child's peak resident set, before and after
  std::size_t rssBeforeBytes = 0;
};

std::size_t peakRssBytes() {
  struct rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<std::size_t>(usage.ru_maxrss) * 1024;
}

int glibcFootprintChild(std::size_t objectsPerPhase) {
  std::size_t before = peakRssBytes();
  PhaseResult result = phaseShift<PhaseGlibc>(objectsPerPhase);
  std::printf("%zu %zu %zu\n", result.peakBytes, peakRssBytes(), before);
  return 0;
}

GlibcFootprint measureGlibcFootprint(std::size_t objectsPerPhase) {
  GlibcFootprint footprint;
  char self[4096];
  ssize_t length = readlink("/proc/self/exe", self, sizeof self - 1);  // popen's shell has its own
  if (length <= 0) return footprint;
  self[length] = '\0';
  std::string command = std::string("'") + self + "' " + kGlibcFootprintOption + " " + std::to_string(objectsPerPhase);
  FILE* child = popen(command.c_str(), "r");
  if (child == nullptr) return footprint;
  if (std::fscanf(child, "%zu %zu %zu", &footprint.peakBytes, &footprint.peakRssBytes, &footprint.rssBeforeBytes) != 3)
    footprint = {};
  pclose(child);
  return footprint;
}

// ---------------------------------------------------------------- reports

struct Row {
  const char* name;
  std::function<PhaseResult()> run;
  std::vector<double> times;
  std::vector<double> peaks;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median of `runs` interleaved runs of every row; `footprintBases` (names of rows) adds
// each row's peak footprint and its ratio to theirs.
void report(const char* title, std::vector<Row>& rows, int runs, const char* baseline, const char* only,
            std::vector<const char*> footprintBases = {}) {
  if (only != nullptr)
    std::erase_if(rows, [only](const Row& row) { return std::strstr(row.name, only) == nullptr; });
  for (int run = 0; run < runs; ++run) {
    for (Row& row : rows) {
      PhaseResult result = row.run();
      row.times.push_back(result.ms);
      row.peaks.push_back(static_cast<double>(result.peakBytes));
    }
  }
  auto medianOf = [&rows](const char* name, std::vector<double> Row::*figures) {
    for (Row& row : rows)
      if (std::strcmp(row.name, name) == 0) return median(row.*figures);
    return 0.0;
  };
  double base = medianOf(baseline, &Row::times);
  std::vector<double> footprintBase;
  for (const char* name : footprintBases) footprintBase.push_back(medianOf(name, &Row::peaks));
  std::printf("\n### %s (median of %d runs; ratio = time / %s)\n\n", title, runs, baseline);
  std::printf("| allocator | ms | ratio |");
  if (!footprintBases.empty()) std::printf(" peak footprint MB |");
  for (const char* name : footprintBases) std::printf(" footprint / %s |", name);
  std::printf("\n|---|---:|---:|");
  if (!footprintBases.empty()) std::printf("---:|");
  for (std::size_t i = 0; i < footprintBases.size(); ++i) std::printf("---:|");
  std::printf("\n");
  for (Row& row : rows) {
    double time = median(row.times);
    if (base > 0) std::printf("| %s | %.1f | %.2f |", row.name, time, time / base);
    else std::printf("| %s | %.1f | - |", row.name, time);
    if (!footprintBases.empty()) {
      double peak = median(row.peaks);
      std::printf(" %.1f |", peak / 1e6);
      for (double other : footprintBase) {
        if (other > 0) std::printf(" %.2f |", peak / other);
        else std::printf(" - |");
      }
    }
    std::printf("\n");
  }
}

template <class... As>
std::vector<Row> rowsFor(const std::vector<std::uint32_t>& sizes, int count, bool isServer) {
  std::vector<Row> rows;
  (rows.push_back(Row{As::kName,
                      [&sizes, count, isServer] {
                        return PhaseResult{isServer ? server<As>(sizes, count) : compiler<As>(sizes, count), 0};
                      },
                      {},
                      {}}),
   ...);
  return rows;
}

int usage(const char* program) {
  std::fprintf(stderr,
               "usage: %s [--runs N] [--scale S] [--workload compiler|server|phase-shift] [--only NAME]\n"
               "  --runs N       interleaved runs per allocator; the median is reported (default %d)\n"
               "  --scale S      multiplies every workload's size (default 1)\n"
               "  --workload W   run one workload only\n"
               "  --only NAME    run only the allocators whose name contains NAME\n",
               program, Config{}.runs);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], kGlibcFootprintOption) == 0)
    return glibcFootprintChild(static_cast<std::size_t>(std::atoll(argv[2])));
  Config config;
  for (int i = 1; i < argc; i += 2) {
    const char* option = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (value == nullptr) return usage(argv[0]);
    if (std::strcmp(option, "--runs") == 0 && std::atoi(value) >= 1) config.runs = std::atoi(value);
    else if (std::strcmp(option, "--scale") == 0 && std::atof(value) > 0) config.scale = std::atof(value);
    else if (std::strcmp(option, "--workload") == 0 &&
             (std::strcmp(value, "compiler") == 0 || std::strcmp(value, "server") == 0 ||
              std::strcmp(value, "phase-shift") == 0))
      config.workload = value;
    else if (std::strcmp(option, "--only") == 0) config.only = value;
    else return usage(argv[0]);
  }
  apr_initialize();
  talloc_disable_null_tracking();

  auto wanted = [&config](const char* workload) {
    return config.workload == nullptr || std::strcmp(config.workload, workload) == 0;
  };
  if (wanted("compiler")) {
    auto compilerSizes = drawSizes(1 << 16, 1, false);
    int units = std::max(1, static_cast<int>(200 * config.scale));
    auto compilerRows = rowsFor<ReapCpp, ReapC, Zone, HkObstack, GnuObstack, Glibc, Talloc, Apr, Monotonic>(
        compilerSizes, units, false);
    std::printf("Compiler-like: %d units x 20 nested function regions x 500 objects of 16-128 bytes, "
                "1/16 of them in the unit region; no single-object frees.\n", units);
    report("compiler-like", compilerRows, config.runs, ReapCpp::kName, config.only);
  }
  if (wanted("server")) {
    auto serverSizes = drawSizes(1 << 16, 2, true);
    int connections = std::max(1, static_cast<int>(20000 * config.scale));
    auto serverRows = rowsFor<ReapCpp, ReapC, ReapNoFree, Zone, HkObstack, GnuObstack, Glibc, Talloc, Apr, Monotonic>(
        serverSizes, connections, true);
    std::printf("\nServer-like: %d connections, each a child region of the server's; 8 requests x 24 objects "
                "(16-512 bytes, 1 in 16 a 1-8 KiB buffer); every third object freed after its request "
                "(a no-op where the allocator cannot free one object).\n", connections);
    report("server-like", serverRows, config.runs, ReapCpp::kName, config.only);
  }
  if (wanted("phase-shift")) {
    auto objects = static_cast<std::size_t>(std::max(1.0, 100000 * config.scale));
    GlibcFootprint glibc = measureGlibcFootprint(objects);
    std::vector<Row> rows;
    auto add = [&rows, objects]<class H>(H*) {
      rows.push_back(Row{H::kName, [objects] { return phaseShift<H>(objects); }, {}, {}});
    };
    add(static_cast<PhaseReapCpp*>(nullptr));
    add(static_cast<PhaseReapC*>(nullptr));
    add(static_cast<PhaseReapNoFree*>(nullptr));
    add(static_cast<PhaseLea*>(nullptr));
    // Timed here; its footprint is the fresh process's.
    rows.push_back(Row{PhaseGlibc::kName,
                       [objects, glibc] { return PhaseResult{phaseShift<PhaseGlibc>(objects).ms, glibc.peakBytes}; },
                       {},
                       {}});
    std::printf("\nPhase shift: one heap; 7 phases of %zu objects of one size (24, 48, 100, 200, 400, 96, 40 "
                "bytes), every object written when allocated and all freed at the end of the phase. Peak "
                "footprint: the high-water mark of bytes held from the parent (heapkit: the top heap's count, "
                "chunk and region headers included; glibc: mallinfo2 arena + mmapped bytes at each phase's "
                "peak, in a fresh process, whose peak RSS was %.1f MB, %.1f MB before the workload).\n",
                objects, glibc.peakRssBytes / 1e6, glibc.rssBeforeBytes / 1e6);
    report("phase shift", rows, config.runs, PhaseReapCpp::kName, config.only, {PhaseLea::kName, PhaseGlibc::kName});
  }

  apr_terminate();
  return 0;
}
