// heapkit._core: the C++ trace library (include/heapkit/trace/, src/trace/) for Python.
// Long operations are objects with step(n), so the Python side can show progress and
// stay interruptible; everything else is a plain function.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <time.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "Emit.h"
#include "Simulate.h"
#include "Spec.h"
#include "heapkit/trace/Convert.h"
#include "heapkit/trace/Stats.h"
#include "heapkit/trace/Writer.h"

namespace nb = nanobind;
using namespace heapkit::trace;

namespace {

// Bad input of any kind (a corrupt trace, a malformed log): one line that says where.
struct TraceError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct FileCloser {
  void operator()(std::FILE* f) const {
    if (f != nullptr) std::fclose(f);
  }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

File openOutput(const std::string& path) {
  File f(std::fopen(path.c_str(), "wb"));
  if (!f) throw std::runtime_error(path + ": " + std::strerror(errno));
  return f;
}

void closeOutput(File& f, const std::string& path) {
  std::FILE* raw = f.release();
  if (raw != nullptr && std::fclose(raw) != 0) throw std::runtime_error(path + ": " + std::strerror(errno));
}

LogFormat formatNamed(const std::string& name) {
  LogFormat format;
  if (!parseLogFormat(name, format)) throw std::invalid_argument("unknown log format '" + name + "' (text, mtrace, heaptrack)");
  return format;
}

// Text from a trace (its command line, its source) as str: a trace may carry any bytes
// there, and an invalid UTF-8 sequence becomes U+FFFD rather than an exception.
nb::str traceText(const std::string& text) {
  PyObject* decoded = PyUnicode_DecodeUTF8(text.data(), static_cast<Py_ssize_t>(text.size()), "replace");
  if (decoded == nullptr) throw nb::python_error();
  return nb::steal<nb::str>(decoded);
}

nb::dict headerDict(const Header& h) {
  nb::dict d;
  d["version"] = std::to_string(h.versionMajor) + "." + std::to_string(h.versionMinor);
  d["pid"] = h.pid;
  d["start_unix_ns"] = h.startUnixNs;
  d["command"] = traceText(h.command);
  d["source"] = traceText(h.source);
  return d;
}

class PyTraceReader {
 public:
  PyTraceReader(const std::string& path, bool checkLiveness)
      : file_(std::make_unique<MappedFile>(path)), decoder_(file_->data(), file_->size(), checkLiveness) {
    if (decoder_.failed()) throw TraceError(path + ": " + decoder_.error());
    path_ = path;
  }

  nb::dict header() const { return headerDict(decoder_.header()); }

  // Up to maxEvents operations as numpy arrays (op, thread, time, id, old_id, size, alignment).
  nb::dict read(std::size_t maxEvents) {
    std::vector<Event> events;
    events.reserve(std::min<std::size_t>(maxEvents, 1 << 20));
    Event e;
    while (events.size() < maxEvents && decoder_.next(e)) events.push_back(e);
    if (decoder_.failed()) throw TraceError(path_ + ": " + decoder_.error());
    nb::dict d;
    d["op"] = column<std::uint8_t>(events, [](const Event& x) { return static_cast<std::uint8_t>(x.op); });
    d["thread"] = column<std::uint32_t>(events, [](const Event& x) { return x.thread; });
    d["time"] = column<std::uint64_t>(events, [](const Event& x) { return x.time; });
    d["id"] = column<std::uint64_t>(events, [](const Event& x) { return x.id; });
    d["old_id"] = column<std::uint64_t>(events, [](const Event& x) { return x.oldId; });
    d["size"] = column<std::uint64_t>(events, [](const Event& x) { return x.size; });
    d["alignment"] = column<std::uint64_t>(events, [](const Event& x) { return x.alignment; });
    return d;
  }

  std::uint64_t offset() const { return decoder_.offset(); }
  std::uint64_t size() const { return decoder_.size(); }
  bool finished() const { return decoder_.finished(); }
  std::vector<std::uint64_t> threads() const { return decoder_.osThreadIds(); }

 private:
  template <class T, class F>
  static nb::object column(const std::vector<Event>& events, F field) {
    auto* data = new T[events.size()];
    for (std::size_t i = 0; i < events.size(); ++i) data[i] = field(events[i]);
    nb::capsule owner(data, [](void* p) noexcept { delete[] static_cast<T*>(p); });
    return nb::cast(nb::ndarray<nb::numpy, T, nb::ndim<1>>(data, {events.size()}, owner));
  }

  std::unique_ptr<MappedFile> file_;
  TraceDecoder decoder_;
  std::string path_;
};

class PyImporter {
 public:
  PyImporter(const std::string& format, const std::string& out, bool lenient, const std::string& command)
      : path_(out), file_(openOutput(out)) {
    Header h;
    h.command = command;
    h.source = format;
    importer_ = std::make_unique<LogImporter>(formatNamed(format), file_.get(), lenient, h);
  }

  void feed(nb::bytes data) {
    try {
      importer_->feed(std::string_view(data.c_str(), data.size()));
    } catch (const std::invalid_argument& e) {
      throw TraceError(e.what());
    } catch (const std::runtime_error& e) {
      throw TraceError(e.what());
    }
  }

  nb::dict finish() {
    ImportSummary s;
    try {
      s = importer_->finish();
    } catch (const std::runtime_error& e) {
      throw TraceError(e.what());
    }
    importer_.reset();
    closeOutput(file_, path_);
    nb::dict d;
    d["lines"] = s.lines;
    d["events"] = s.events;
    d["objects"] = s.objects;
    d["unknown_frees"] = s.unknownFrees;
    d["reused_addresses"] = s.reusedAddresses;
    d["failed_allocations"] = s.failedAllocations;
    d["bytes_written"] = s.bytesWritten;
    return d;
  }

 private:
  std::string path_;
  File file_;
  std::unique_ptr<LogImporter> importer_;
};

class PyExporter {
 public:
  PyExporter(const std::string& trace, const std::string& format, const std::string& out)
      : trace_(trace), input_(std::make_unique<MappedFile>(trace)), path_(out), file_(openOutput(out)),
        exporter_(formatNamed(format), input_->data(), input_->size(), file_.get()) {}

  bool step(std::uint64_t maxEvents) {
    bool more;
    try {
      more = exporter_.step(maxEvents);
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(path_ + ": " + e.what());
    }
    if (exporter_.failed()) throw TraceError(trace_ + ": " + exporter_.error());
    if (!more) closeOutput(file_, path_);
    return more;
  }
  std::uint64_t offset() const { return exporter_.offset(); }
  std::uint64_t size() const { return input_->size(); }
  std::uint64_t events() const { return exporter_.events(); }

 private:
  std::string trace_;
  std::unique_ptr<MappedFile> input_;
  std::string path_;
  File file_;
  LogExporter exporter_;
};

class PyStats {
 public:
  PyStats(const std::string& path, std::size_t topSizes, std::size_t livePoints)
      : path_(path), file_(std::make_unique<MappedFile>(path)), builder_(file_->data(), file_->size(), topSizes, livePoints) {
    if (builder_.failed()) throw TraceError(path + ": " + builder_.error());
  }

  bool step(std::uint64_t maxEvents) {
    bool more = builder_.step(maxEvents);
    if (builder_.failed()) throw TraceError(path_ + ": " + builder_.error());
    return more;
  }
  std::uint64_t offset() const { return builder_.offset(); }
  std::uint64_t size() const { return builder_.size(); }

  nb::dict result() {
    TraceStats s = builder_.result();
    nb::dict d;
    d["header"] = headerDict(s.header);
    d["events"] = s.events;
    d["mallocs"] = s.allocationsByKind[0];
    d["callocs"] = s.allocationsByKind[1];
    d["reallocs"] = s.allocationsByKind[2];
    d["aligned"] = s.allocationsByKind[3];
    d["frees"] = s.frees;
    d["objects"] = s.objects;
    d["total_bytes"] = s.totalBytes;
    d["max_live_bytes"] = s.maxLiveBytes;
    d["max_live_objects"] = s.maxLiveObjects;
    d["max_live_bytes_event"] = s.maxLiveBytesEvent;
    d["end_live_bytes"] = s.endLiveBytes;
    d["end_live_objects"] = s.endLiveObjects;
    d["min_size"] = s.minSize;
    d["max_size"] = s.maxSize;
    d["duration_ns"] = s.durationNs;
    d["size_histogram"] = std::vector<std::uint64_t>(s.sizeHistogram.begin(), s.sizeHistogram.end());
    nb::list top;
    for (auto [size, count] : s.topSizes) top.append(nb::make_tuple(size, count));
    d["top_sizes"] = top;
    d["distinct_sizes"] = s.distinctSizes;
    d["lifetime_events_histogram"] =
        std::vector<std::uint64_t>(s.lifetimeEventsHistogram.begin(), s.lifetimeEventsHistogram.end());
    d["lifetime_events_median"] = s.lifetimeEventsMedian;
    d["lifetime_events_mean"] = s.lifetimeEventsMean;
    d["lifetime_ns_mean"] = s.lifetimeNsMean;
    nb::list threads;
    for (const ThreadStats& t : s.threads) {
      nb::dict td;
      td["os_tid"] = t.osTid;
      td["allocations"] = t.allocations;
      td["frees"] = t.frees;
      td["bytes"] = t.bytes;
      td["remote_frees"] = t.remoteFrees;
      td["first_allocation_event"] = t.firstAllocationEvent;
      td["last_allocation_event"] = t.lastAllocationEvent;
      threads.append(td);
    }
    d["threads"] = threads;
    nb::list live;
    for (const LivePoint& p : s.liveOverTime) live.append(nb::make_tuple(p.time, p.event, p.bytes, p.objects));
    d["live_over_time"] = live;
    d["trace_bytes"] = s.traceBytes;
    return d;
  }

  // The small request sizes with their counts and live objects at the peak of live bytes
  // (TraceStats::smallSizes), as three columns: python/heapkit/stats.py size_profile().
  nb::dict smallSizes() {
    TraceStats s = builder_.result();
    std::vector<std::uint64_t> sizes, counts, live;
    for (const TraceStats::SmallSize& z : s.smallSizes) {
      sizes.push_back(z.size);
      counts.push_back(z.count);
      live.push_back(z.liveAtPeak);
    }
    nb::dict d;
    d["sizes"] = sizes;
    d["counts"] = counts;
    d["live_at_peak"] = live;
    d["max_live_bytes"] = s.maxLiveBytes;
    d["max_live_bytes_event"] = s.maxLiveBytesEvent;
    d["objects"] = s.objects;
    return d;
  }

 private:
  std::string path_;
  std::unique_ptr<MappedFile> file_;
  StatsBuilder builder_;
};

nb::dict mergeSpoolPy(const std::string& spool, const std::string& out) {
  File file = openOutput(out);
  MergeSummary s;
  try {
    s = mergeSpool(spool, file.get());
  } catch (const std::runtime_error& e) {
    throw TraceError(e.what());
  }
  closeOutput(file, out);
  nb::dict d;
  d["pid"] = s.pid;
  d["events"] = s.events;
  d["objects"] = s.objects;
  d["threads"] = s.threads;
  d["unknown_frees"] = s.unknownFrees;
  d["truncated_records"] = s.truncatedRecords;
  d["bytes_written"] = s.bytesWritten;
  d["command"] = traceText(s.command);
  return d;
}

// Decoding speed: the fastest of `repeats` full decodes (with liveness checks), in the
// thread's CPU time, so that the figure is the decoder's, not the page cache's or other
// processes'.
nb::dict decodeSpeed(const std::string& path, int repeats, bool checkLiveness) {
  MappedFile file(path);
  double best = 0;
  std::uint64_t events = 0, checksum = 0;
  for (int r = 0; r < repeats; ++r) {
    // The thread's CPU time: other load on a shared machine does not count.
    auto cpuSeconds = [] {
      struct timespec ts;
      clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
      return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
    };
    double start = cpuSeconds();
    TraceDecoder decoder(file.data(), file.size(), checkLiveness);
    Event e;
    std::uint64_t sum = 0;
    while (decoder.next(e)) sum += e.size + e.id;
    double seconds = cpuSeconds() - start;
    if (decoder.failed()) throw TraceError(path + ": " + decoder.error());
    if (r == 0 || seconds < best) best = seconds;
    events = decoder.events();
    checksum = sum;
  }
  nb::dict d;
  d["events"] = events;
  d["seconds"] = best;
  d["events_per_second"] = best > 0 ? static_cast<double>(events) / best : 0.0;
  d["bytes"] = static_cast<std::uint64_t>(file.size());
  d["checksum"] = checksum;
  return d;
}

// The first maxEvents operations of a trace, as a trace of their own (the search's --sample).
std::uint64_t tracePrefix(const std::string& source, const std::string& output, std::uint64_t maxEvents) {
  MappedFile file(source);
  TraceDecoder decoder(file.data(), file.size());
  if (decoder.failed()) throw TraceError(source + ": " + decoder.error());
  File out = openOutput(output);
  std::uint64_t written = 0;
  {
    TraceWriter writer(out.get());
    Header header = decoder.header();
    header.source = "prefix of " + source;
    writer.begin(header);
    Event e;
    while (written < maxEvents && decoder.next(e)) {
      switch (e.op) {
        case Op::Malloc: writer.malloc(e.thread, e.time, e.size); break;
        case Op::Calloc: writer.calloc(e.thread, e.time, e.size); break;
        case Op::Realloc: writer.realloc(e.thread, e.time, e.oldId, e.size); break;
        case Op::Aligned: writer.aligned(e.thread, e.time, e.alignment, e.size); break;
        default: writer.free(e.thread, e.time, e.id); break;
      }
      ++written;
    }
    if (decoder.failed()) throw TraceError(source + ": " + decoder.error());
    writer.end();
  }
  closeOutput(out, output);
  return written;
}

// Traces of several processes as one: each source's operations in turn, its threads
// numbered after the previous sources' and its times after their end; the objects a
// process still held when it ended are freed there, as the process's exit released them
// (so one heap serving the processes one after the other holds what each held).
// With no sources, an empty trace: the recording of a program that allocated nothing.
nb::dict concatTraces(const std::vector<std::string>& sources, const std::string& output, const std::string& command,
                      std::uint64_t pid) {
  File out = openOutput(output);
  std::uint64_t events = 0, closed = 0;
  std::uint32_t threads = 0;
  {
    TraceWriter writer(out.get());
    Header header;
    header.pid = pid;
    header.command = command;
    header.source = sources.size() == 1 ? "record" : sources.empty() ? "record (no allocations)" : "record (merged)";
    std::uint64_t timeBase = 0;
    std::vector<std::unique_ptr<MappedFile>> files;
    for (const std::string& source : sources) files.push_back(std::make_unique<MappedFile>(source));
    if (!files.empty()) {
      TraceDecoder first(files[0]->data(), files[0]->size());
      if (first.failed()) throw TraceError(sources[0] + ": " + first.error());
      header.startUnixNs = first.header().startUnixNs;
      if (sources.size() == 1) header = first.header();
    }
    writer.begin(header);
    for (std::size_t i = 0; i < files.size(); ++i) {
      TraceDecoder decoder(files[i]->data(), files[i]->size());
      if (decoder.failed()) throw TraceError(sources[i] + ": " + decoder.error());
      std::vector<std::uint64_t> ids;  // the source's object id -> ours
      std::vector<bool> live;
      std::uint64_t latest = timeBase;
      std::uint32_t maxThread = 0, seenThreads = 0;
      Event e;
      while (decoder.next(e)) {
        std::uint32_t thread = threads + e.thread;
        if (e.thread >= seenThreads) {  // keep the OS thread ids of the process's threads
          const auto& tids = decoder.osThreadIds();
          for (; seenThreads < tids.size(); ++seenThreads) writer.setOsTid(threads + seenThreads, tids[seenThreads]);
        }
        maxThread = std::max(maxThread, e.thread);
        std::uint64_t t = timeBase + e.time;
        latest = std::max(latest, t);
        if (e.op == Op::Free) {
          writer.free(thread, t, ids[e.id]);
          live[e.id] = false;
        } else {
          std::uint64_t id;
          switch (e.op) {
            case Op::Malloc: id = writer.malloc(thread, t, e.size); break;
            case Op::Calloc: id = writer.calloc(thread, t, e.size); break;
            case Op::Realloc: id = writer.realloc(thread, t, ids[e.oldId], e.size); live[e.oldId] = false; break;
            default: id = writer.aligned(thread, t, e.alignment, e.size); break;
          }
          if (e.id >= ids.size()) {
            ids.resize(e.id + 1, 0);
            live.resize(e.id + 1, false);
          }
          ids[e.id] = id;
          live[e.id] = true;
        }
        ++events;
      }
      if (decoder.failed()) throw TraceError(sources[i] + ": " + decoder.error());
      for (std::uint64_t id = 0; id < live.size(); ++id) {
        if (!live[id]) continue;
        writer.free(threads, latest, ids[id]);
        ++events;
        ++closed;
      }
      if (decoder.events() > 0) threads += maxThread + 1;
      timeBase = latest + 1;
    }
    writer.end();
  }
  closeOutput(out, output);
  nb::dict d;
  d["events"] = events;
  d["freed_at_exit"] = closed;
  d["threads"] = threads;
  return d;
}

// ---- DMM specs and the simulator ----------------------------------------------------

using heapkit::sim::ParsedSpec;
using heapkit::sim::Simulation;
using heapkit::sim::SimulationResult;

nb::dict parseSpecPy(const std::string& text) {
  ParsedSpec spec = heapkit::sim::parseSpec(text);
  nb::dict d;
  d["name"] = spec.name;
  d["description"] = spec.description;
  d["normalized"] = spec.normalized;
  d["allocators"] = spec.dmm.count;
  return d;
}

heapkit::sim::EnergyModel energyFrom(const nb::dict& energy) {
  heapkit::sim::EnergyModel model;
  for (auto [key, value] : energy) {
    std::string name = nb::cast<std::string>(key);
    double number = nb::cast<double>(value);
    if (!(number >= 0)) throw std::invalid_argument("energy model: " + name + " must be a number >= 0");
    if (name == "access_nj") model.accessNanojoules = number;
    else if (name == "step_nj") model.stepNanojoules = number;
    else if (name == "static_nw_per_kib") model.staticNanowattsPerKib = number;
    else if (name == "ns_per_operation") model.nanosecondsPerOperation = number;
    else throw std::invalid_argument("energy model: unknown parameter '" + name + "' (access_nj, step_nj, static_nw_per_kib, ns_per_operation)");
  }
  return model;
}

// One design on one trace. step() runs with the GIL released, so several simulations
// proceed on threads at once.
class PySimulation {
 public:
  PySimulation(const std::string& specText, const std::string& trace, std::size_t reserveBytes, std::size_t maxSamples,
               const nb::dict& energy, std::uint64_t maxStepsPerEvent, bool cacheModel, bool touchObjects) {
    heapkit::sim::SimulationOptions options;
    options.cacheModel = cacheModel;
    options.touchObjects = touchObjects;
    options.reserveBytes = reserveBytes;
    options.maxSamples = maxSamples;
    options.maxStepsPerEvent = maxStepsPerEvent;
    options.energy = energyFrom(energy);
    ParsedSpec spec = heapkit::sim::parseSpec(specText);
    simulation_ = std::make_unique<Simulation>(spec, trace, options);
  }

  bool step(std::uint64_t maxEvents) {
    nb::gil_scoped_release release;
    return simulation_->step(maxEvents);
  }
  std::uint64_t offset() const { return simulation_->bytesRead(); }
  std::uint64_t size() const { return simulation_->traceBytes(); }

  nb::dict result() const {
    SimulationResult r = simulation_->result();
    nb::dict d;
    d["events"] = r.operations.events;
    d["mallocs"] = r.operations.mallocs;
    d["frees"] = r.operations.frees;
    d["reallocs"] = r.operations.reallocs;
    d["aligned"] = r.operations.alignedAllocations;
    d["failed"] = r.operations.failedRequests;
    d["steps"] = r.counts.steps;
    d["reads"] = r.counts.reads;
    d["writes"] = r.counts.writes;
    d["splits"] = r.counts.splits;
    d["coalesces"] = r.counts.coalesces;
    d["peak_footprint"] = r.peakFootprintBytes;
    d["end_footprint"] = r.endFootprintBytes;
    d["peak_bytes_held"] = r.peakBytesHeld;
    d["max_live_bytes"] = r.operations.maxLiveBytes;
    d["live_bytes_at_peak"] = r.liveBytesAtPeak;
    d["usable_bytes_at_peak"] = r.usableBytesAtPeak;
    d["dynamic_energy_nj"] = r.dynamicEnergyNanojoules;
    d["static_energy_nj"] = r.staticEnergyNanojoules;
    d["seconds"] = r.seconds;
    d["abandoned"] = r.abandoned;
    d["cache_modelled"] = r.cacheModelled;
    d["l1_misses"] = r.memory.l1Misses;
    d["l2_misses"] = r.memory.l2Misses;
    d["l3_misses"] = r.memory.l3Misses;
    d["tlb_misses"] = r.memory.tlbMisses;
    d["pages_touched"] = r.memory.pagesTouched;
    d["releases"] = r.memory.releases;
    d["copied_bytes"] = r.program.copiedBytes;
    nb::list samples;
    for (auto [event, held] : r.footprintSamples) samples.append(nb::make_tuple(event, held));
    d["footprint_samples"] = samples;
    nb::list allocators;
    for (const auto& a : r.allocators) {
      nb::dict ad;
      ad["requests"] = a.requests;
      ad["requested_bytes"] = a.requestedBytes;
      ad["peak_bytes_held"] = a.peakBytesHeld;
      allocators.append(ad);
    }
    d["allocators"] = allocators;
    return d;
  }

 private:
  std::unique_ptr<Simulation> simulation_;
};

}  // namespace

NB_MODULE(_core, m) {
  m.doc() = "heapkit's C++ trace library: reader, converters, statistics, spool merge.";
  nb::exception<TraceError>(m, "TraceError");
  m.attr("FORMAT_VERSION") = std::to_string(kVersionMajor) + "." + std::to_string(kVersionMinor);

  nb::class_<PyTraceReader>(m, "TraceReader")
      .def(nb::init<const std::string&, bool>(), nb::arg("path"), nb::arg("check_liveness") = true)
      .def_prop_ro("header", &PyTraceReader::header)
      .def("read", &PyTraceReader::read, nb::arg("max_events"))
      .def_prop_ro("offset", &PyTraceReader::offset)
      .def_prop_ro("size", &PyTraceReader::size)
      .def_prop_ro("finished", &PyTraceReader::finished)
      .def_prop_ro("threads", &PyTraceReader::threads);

  nb::class_<PyImporter>(m, "Importer")
      .def(nb::init<const std::string&, const std::string&, bool, const std::string&>(), nb::arg("format"),
           nb::arg("out"), nb::arg("lenient"), nb::arg("command"))
      .def("feed", &PyImporter::feed)
      .def("finish", &PyImporter::finish);

  nb::class_<PyExporter>(m, "Exporter")
      .def(nb::init<const std::string&, const std::string&, const std::string&>(), nb::arg("trace"), nb::arg("format"),
           nb::arg("out"))
      .def("step", &PyExporter::step)
      .def_prop_ro("offset", &PyExporter::offset)
      .def_prop_ro("size", &PyExporter::size)
      .def_prop_ro("events", &PyExporter::events);

  nb::class_<PyStats>(m, "StatsBuilder")
      .def(nb::init<const std::string&, std::size_t, std::size_t>(), nb::arg("path"), nb::arg("top_sizes") = 10,
           nb::arg("live_points") = 200)
      .def("step", &PyStats::step)
      .def_prop_ro("offset", &PyStats::offset)
      .def_prop_ro("size", &PyStats::size)
      .def("result", &PyStats::result)
      .def("small_sizes", &PyStats::smallSizes);

  nb::exception<heapkit::sim::SpecError>(m, "SpecError", PyExc_ValueError);
  nb::exception<heapkit::sim::SimulationError>(m, "SimulationError", PyExc_RuntimeError);
  m.attr("SPEC_FORMAT") = heapkit::sim::kSpecFormat;
  m.def("parse_spec", &parseSpecPy, nb::arg("text"));
  m.def("trace_prefix", &tracePrefix, nb::arg("source"), nb::arg("output"), nb::arg("max_events"));
  m.def(
      "emit_header",
      [](const std::string& text, const std::string& ns, const std::string& source) {
        return heapkit::sim::emitHeader(heapkit::sim::parseSpec(text), ns, source);
      },
      nb::arg("spec"), nb::arg("namespace"), nb::arg("source"));
  nb::class_<PySimulation>(m, "Simulation")
      .def(nb::init<const std::string&, const std::string&, std::size_t, std::size_t, const nb::dict&, std::uint64_t,
                    bool, bool>(),
           nb::arg("spec"), nb::arg("trace"), nb::arg("reserve_bytes"), nb::arg("max_samples"), nb::arg("energy"),
           nb::arg("max_steps_per_event") = 0, nb::arg("cache_model") = true, nb::arg("touch_objects") = true)
      .def("step", &PySimulation::step, nb::arg("max_events"))
      .def_prop_ro("offset", &PySimulation::offset)
      .def_prop_ro("size", &PySimulation::size)
      .def("result", &PySimulation::result);

  m.def("concat_traces", &concatTraces, nb::arg("sources"), nb::arg("output"), nb::arg("command"), nb::arg("pid"));
  m.def("merge_spool", &mergeSpoolPy, nb::arg("spool"), nb::arg("out"));
  m.def("decode_speed", &decodeSpeed, nb::arg("path"), nb::arg("repeats") = 3, nb::arg("check_liveness") = true);
}
