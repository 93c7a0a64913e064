// boxed-sim-like: spheres bouncing in a box, after the boxed-sim benchmark used in the
// simulation studies of dynamic memory managers. An event-driven simulation over a
// spatial grid of cells one sphere wide: every predicted event (sphere on sphere, sphere
// on wall, a sphere crossing into the next cell) is a separately allocated record in a
// priority queue; a bounce makes the events predicted for its spheres stale (they are
// freed when they come up) and predicts new ones, gathering the spheres of the cells
// around in a temporary array, so event records are born and die at a high rate while
// the spheres live long. Time runs in intervals; at each sync point the spheres are
// brought up to date, the population follows a slow wave (spheres poured in, others
// taken out), the box and its grid are resized with it (the cell array reallocated), and
// a temporary list of neighbouring pairs is built for the interval's first predictions,
// then freed. Checks: every sphere carries a seal and its table slot, every event
// a seal, every event pushed must come out of the queue exactly once, and the kinetic
// energy must stay what the bounces (which conserve it) and the population changes make
// it, so a heap that hands out live memory is caught.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "AllocatorPolicy.h"
#include "EventQueue.h"

namespace heapkit::workloads {

namespace boxedsim_detail {

struct Sphere {
  std::uint64_t id;
  std::uint32_t slot;        // index in the sphere table
  std::uint32_t collisions;  // bumped by every bounce: events predicted before it are stale
  double position[3];        // at `time`: a sphere is moved only at its own events and at syncs
  double velocity[3];
  double time;
  double radius;
  Sphere* nextInCell;  // the grid's cell lists: rebuilt at every sync, kept up at every crossing
  std::uint32_t cell;
  std::uint32_t seal;  // derived from the id: shows a sphere overwritten by another object
};

enum class EventKind : std::uint16_t { SphereBounce, WallBounce, CellCrossing };

struct Event {
  double time;
  std::uint64_t sequence;  // ties broken by creation order, so runs are deterministic
  Sphere* a;
  Sphere* b;  // the other sphere of a sphere-on-sphere bounce, else null
  std::uint32_t collisionsA, collisionsB;  // at prediction; stale once either sphere bounced since
  EventKind kind;
  std::uint16_t axis;  // of the wall or the cell face
  std::uint32_t seal;
};

// Two spheres in neighbouring cells at a sync point.
struct NeighbourPair {
  NeighbourPair* next;
  Sphere* a;
  Sphere* b;
};

inline std::uint32_t sphereSeal(std::uint64_t id) {
  return static_cast<std::uint32_t>((id * 0x9E3779B97F4A7C15ULL) >> 32);
}

inline std::uint32_t eventSeal(const Event& event) {
  std::uint64_t mixed = event.sequence * 0xBF58476D1CE4E5B9ULL;
  mixed ^= event.a->id * 0x94D049BB133111EBULL + (event.b != nullptr ? event.b->id : 0) +
           (static_cast<std::uint64_t>(event.kind) << 2) + event.axis;
  return static_cast<std::uint32_t>(mixed >> 29);
}

// Uniform in [0, 1): the top 53 bits of the generator, the same on every platform.
inline double unitRandom(Rng& rng) { return static_cast<double>(rng.next() >> 11) * 0x1.0p-53; }

inline double square(double x) { return x * x; }

// A growable array of sphere pointers through the workload's allocator: the sphere table,
// and the short-lived candidate lists of re-predictions.
template <AllocatorPolicy A>
class SphereArray {
 public:
  // The first array is taken at once, as a reserve() before the query fills it.
  SphereArray(A& alloc, std::size_t initialCapacity) : alloc_(alloc), capacity_(initialCapacity) {
    items_ = allocateArray<Sphere*>(alloc_, capacity_);
  }
  ~SphereArray() { alloc_.deallocate(items_); }
  SphereArray(const SphereArray&) = delete;
  SphereArray& operator=(const SphereArray&) = delete;

  std::size_t size() const { return size_; }
  Sphere* operator[](std::size_t i) const { return items_[i]; }
  void push(Sphere* sphere) {
    if (size_ == capacity_) growArray(alloc_, items_, size_, capacity_, capacity_);  // never empty: doubles
    items_[size_++] = sphere;
  }
  // Moves the last sphere into the hole, as a simulation's unordered table does.
  void removeAt(std::size_t i) {
    items_[i] = items_[--size_];
    if (i < size_) items_[i]->slot = static_cast<std::uint32_t>(i);
  }

 private:
  A& alloc_;
  Sphere** items_;
  std::size_t size_ = 0, capacity_;
};

struct Counters {
  std::uint64_t sphereBounces = 0, wallBounces = 0, cellCrossings = 0, staleEvents = 0, expiredEvents = 0;
  std::uint64_t eventsScheduled = 0, neighbourPairs = 0, touchingPairs = 0;
};

template <AllocatorPolicy A>
class BoxSimulation {
 public:
  static constexpr double kInterval = 1.0;  // simulated time between sync points
  static constexpr double kLargeRadius = 0.5, kSmallRadius = 0.4;
  static constexpr double kCellSize = 2 * kLargeRadius;  // spheres that touch are in neighbouring cells
  static constexpr double kDensity = 0.25;  // spheres per unit volume: about 13 % of the box filled

  explicit BoxSimulation(A& alloc) : alloc_(alloc), rng_(0xB0C5ED51), spheres_(alloc, 256), queue_(alloc) {}

  ~BoxSimulation() {
    discardPendingEvents();
    while (spheres_.size() != 0) removeSphere(spheres_.size() - 1);
    alloc_.deallocate(grid_);
  }

  // The population rises from 2000 to 6000 spheres and falls back every 8 intervals.
  static std::uint32_t populationAt(unsigned interval) {
    unsigned phase = interval % 8;
    return 2000 + 1000 * (phase < 4 ? phase : 8 - phase);
  }

  void runInterval(unsigned interval) {
    const double start = interval * kInterval;
    intervalEnd_ = start + kInterval;
    sync(start, populationAt(interval));
    std::uint64_t processed = 0;
    const std::uint64_t processingLimit = 1000 + 64 * std::uint64_t{spheres_.size()};
    while (!queue_.empty() && queue_.top()->time < intervalEnd_) {
      Event* event = queue_.pop();
      require(event->seal == eventSeal(*event), "event record corrupted");
      poppedSignature_ ^= mixChecksum(0, event->sequence);
      if (isStale(*event)) {
        ++counters_.staleEvents;
      } else {
        process(*event);
        require(++processed < processingLimit, "events never settle: a sphere was corrupted");
      }
      alloc_.deallocate(event);
    }
    discardPendingEvents();
    require(pushedSignature_ == poppedSignature_, "an event was lost or came out of the queue twice");
  }

  // Brings every sphere to `time` and folds the final state into the checksum.
  std::uint64_t finish(double time) {
    advanceAll(time);
    std::uint64_t checksum = 0;
    for (std::size_t i = 0; i < spheres_.size(); ++i) {
      const Sphere* sphere = spheres_[i];
      checksum = mixChecksum(checksum, sphere->id);
      for (int axis = 0; axis < 3; ++axis)
        checksum = mixChecksum(checksum, static_cast<std::uint64_t>(std::llround(sphere->position[axis] * 1024)));
      checksum = mixChecksum(checksum, sphere->collisions);
    }
    for (std::uint64_t count : {counters_.sphereBounces, counters_.wallBounces, counters_.cellCrossings,
                                counters_.staleEvents, counters_.expiredEvents, counters_.eventsScheduled,
                                counters_.neighbourPairs, counters_.touchingPairs})
      checksum = mixChecksum(checksum, count);
    return checksum;
  }

 private:
  void sync(double time, std::uint32_t population) {
    advanceAll(time);
    while (spheres_.size() > population) removeSphere(rng_.below(spheres_.size()));
    resizeBox(population);
    rebuildGrid();
    // Poured in at random free places; a place taken by another sphere is given up, so
    // the population may fall a little short of the wave.
    for (std::uint32_t attempts = 0; spheres_.size() < population && attempts < 2 * population; ++attempts)
      tryPourSphere(time);
    predictFromNeighbourPairs();
    for (std::size_t i = 0; i < spheres_.size(); ++i) {
      predictWall(spheres_[i]);
      predictCellCrossing(spheres_[i]);
    }
  }

  void advanceAll(double time) {
    double energy = 0;
    for (std::size_t i = 0; i < spheres_.size(); ++i) {
      Sphere* sphere = spheres_[i];
      checkSphere(sphere, i);
      advance(sphere, time);
      for (double& coordinate : sphere->position)  // rounding may leave a sphere a hair outside
        coordinate = std::clamp(coordinate, sphere->radius, boxLength_ - sphere->radius);
      energy += kineticEnergy(*sphere);
    }
    require(std::fabs(energy - expectedEnergy_) <= 1e-6 * (expectedEnergy_ + 1), "kinetic energy not conserved");
  }

  void checkSphere(const Sphere* sphere, std::size_t slot) const {
    require(sphere->seal == sphereSeal(sphere->id) && sphere->slot == slot, "sphere corrupted");
  }

  static double mass(const Sphere& sphere) { return sphere.radius * sphere.radius * sphere.radius; }
  static double kineticEnergy(const Sphere& sphere) {
    return mass(sphere) * (square(sphere.velocity[0]) + square(sphere.velocity[1]) + square(sphere.velocity[2]));
  }

  static void advance(Sphere* sphere, double time) {
    for (int axis = 0; axis < 3; ++axis) sphere->position[axis] += sphere->velocity[axis] * (time - sphere->time);
    sphere->time = time;
  }
  static double positionAt(const Sphere& sphere, int axis, double time) {
    return sphere.position[axis] + sphere.velocity[axis] * (time - sphere.time);
  }

  void removeSphere(std::size_t slot) {
    Sphere* sphere = spheres_[slot];
    expectedEnergy_ -= kineticEnergy(*sphere);
    spheres_.removeAt(slot);
    alloc_.deallocate(sphere);
  }

  // The box keeps the density: its side is a whole number of cells, so it changes, and
  // the cell array is reallocated, only when the population has moved enough.
  void resizeBox(std::uint32_t population) {
    std::uint32_t cellsPerSide =
        std::max(4u, static_cast<std::uint32_t>(std::lround(std::cbrt(population / kDensity) / kCellSize)));
    if (cellsPerSide == cellsPerSide_) return;
    double newLength = cellsPerSide * kCellSize;
    for (std::size_t i = 0; i < spheres_.size(); ++i) {
      Sphere* sphere = spheres_[i];
      double stretch = (newLength - 2 * sphere->radius) / (boxLength_ - 2 * sphere->radius);
      for (double& coordinate : sphere->position)
        coordinate = sphere->radius + (coordinate - sphere->radius) * stretch;
    }
    alloc_.deallocate(grid_);
    cellsPerSide_ = cellsPerSide;
    boxLength_ = newLength;
    grid_ = allocateArray<Sphere*>(alloc_, std::size_t{cellsPerSide} * cellsPerSide * cellsPerSide);
  }

  std::uint32_t cellCoordinate(double coordinate) const {
    return std::min(cellsPerSide_ - 1, static_cast<std::uint32_t>(std::max(0.0, coordinate / kCellSize)));
  }
  std::uint32_t cellOf(const double* position) const {
    return (cellCoordinate(position[0]) * cellsPerSide_ + cellCoordinate(position[1])) * cellsPerSide_ +
           cellCoordinate(position[2]);
  }
  std::uint32_t cellStride(int axis) const { return axis == 0 ? cellsPerSide_ * cellsPerSide_ : axis == 1 ? cellsPerSide_ : 1; }
  std::uint32_t cellCoordinateOf(std::uint32_t cell, int axis) const { return cell / cellStride(axis) % cellsPerSide_; }

  void insertIntoCell(Sphere* sphere, std::uint32_t cell) {
    sphere->cell = cell;
    sphere->nextInCell = grid_[cell];
    grid_[cell] = sphere;
  }
  void removeFromCell(Sphere* sphere) {
    Sphere** link = &grid_[sphere->cell];
    while (*link != sphere) {
      require(*link != nullptr, "a sphere is missing from its cell");
      link = &(*link)->nextInCell;
    }
    *link = sphere->nextInCell;
  }
  void rebuildGrid() {
    std::fill_n(grid_, std::size_t{cellsPerSide_} * cellsPerSide_ * cellsPerSide_, nullptr);
    for (std::size_t i = spheres_.size(); i-- > 0;) insertIntoCell(spheres_[i], cellOf(spheres_[i]->position));
  }

  // Calls visit(sphere) for every sphere in `cell` and the 26 cells around it, or, given
  // a slab (axis and side), only in the 9 of them on that side.
  struct Slab {
    int axis = -1;
    int side = 0;
  };
  template <class Visit>
  void forEachNearby(std::uint32_t cell, Visit visit, Slab slab = {}) const {
    const std::int64_t last = cellsPerSide_ - 1;
    std::int64_t low[3], high[3];
    for (int axis = 0; axis < 3; ++axis) {
      std::int64_t centre = cellCoordinateOf(cell, axis);
      low[axis] = std::max<std::int64_t>(0, axis == slab.axis ? centre + slab.side : centre - 1);
      high[axis] = std::min(last, axis == slab.axis ? centre + slab.side : centre + 1);
    }
    for (std::int64_t x = low[0]; x <= high[0]; ++x)
      for (std::int64_t y = low[1]; y <= high[1]; ++y)
        for (std::int64_t z = low[2]; z <= high[2]; ++z)
          for (Sphere* other = grid_[(x * cellsPerSide_ + y) * cellsPerSide_ + z]; other != nullptr;
               other = other->nextInCell)
            visit(other);
  }

  void tryPourSphere(double time) {
    double radius = rng_.below(4) == 0 ? kSmallRadius : kLargeRadius;
    double position[3];
    for (double& coordinate : position) coordinate = radius + unitRandom(rng_) * (boxLength_ - 2 * radius);
    double velocity[3];
    for (double& component : velocity) component = 2 * unitRandom(rng_) - 1;
    bool free = true;
    const std::uint32_t cell = cellOf(position);
    forEachNearby(cell, [&](const Sphere* other) {
      double distance2 = 0;
      for (int axis = 0; axis < 3; ++axis) distance2 += square(other->position[axis] - position[axis]);
      if (distance2 < square(radius + other->radius)) free = false;
    });
    if (!free) return;
    auto* sphere = static_cast<Sphere*>(allocateOrThrow(alloc_, sizeof(Sphere)));
    *sphere = Sphere{nextId_, static_cast<std::uint32_t>(spheres_.size()), 0, {position[0], position[1], position[2]},
                     {velocity[0], velocity[1], velocity[2]}, time, radius, nullptr, 0, sphereSeal(nextId_)};
    ++nextId_;
    spheres_.push(sphere);
    insertIntoCell(sphere, cell);
    expectedEnergy_ += kineticEnergy(*sphere);
  }

  // The interval's first predictions: every pair in neighbouring cells, listed whole
  // (as a simulation's per-step neighbour list), then predicted and freed.
  void predictFromNeighbourPairs() {
    NeighbourPair* pairs = nullptr;
    for (std::size_t i = 0; i < spheres_.size(); ++i) {
      Sphere* a = spheres_[i];
      forEachNearby(a->cell, [&](Sphere* b) {
        if (b->slot <= a->slot) return;  // each pair once
        auto* pair = static_cast<NeighbourPair*>(allocateOrThrow(alloc_, sizeof(NeighbourPair)));
        *pair = NeighbourPair{pairs, a, b};
        pairs = pair;
        ++counters_.neighbourPairs;
      });
    }
    while (pairs != nullptr) {
      NeighbourPair* pair = pairs;
      pairs = pair->next;
      checkSphere(pair->a, pair->a->slot);
      checkSphere(pair->b, pair->b->slot);
      double distance2 = 0;
      for (int axis = 0; axis < 3; ++axis) distance2 += square(pair->b->position[axis] - pair->a->position[axis]);
      if (distance2 < square((pair->a->radius + pair->b->radius) * 1.05)) ++counters_.touchingPairs;
      predictPair(pair->a, pair->b);
      alloc_.deallocate(pair);
    }
  }

  void schedule(double time, EventKind kind, Sphere* a, Sphere* b, std::uint16_t axis) {
    auto* event = static_cast<Event*>(allocateOrThrow(alloc_, sizeof(Event)));
    *event = Event{time, sequence_++, a, b, a->collisions, b != nullptr ? b->collisions : 0, kind, axis, 0};
    event->seal = eventSeal(*event);
    pushedSignature_ ^= mixChecksum(0, event->sequence);
    ++counters_.eventsScheduled;
    queue_.push(event);
  }

  // The time a and b touch, if they do before the interval ends.
  void predictPair(Sphere* a, Sphere* b) {
    const double now = std::max(a->time, b->time);
    double gap[3], closing[3];
    for (int axis = 0; axis < 3; ++axis) {
      gap[axis] = positionAt(*b, axis, now) - positionAt(*a, axis, now);
      closing[axis] = b->velocity[axis] - a->velocity[axis];
    }
    double approach = gap[0] * closing[0] + gap[1] * closing[1] + gap[2] * closing[2];
    if (approach >= 0) return;  // moving apart
    double gap2 = square(gap[0]) + square(gap[1]) + square(gap[2]);
    double closing2 = square(closing[0]) + square(closing[1]) + square(closing[2]);
    double contact2 = square(a->radius + b->radius);
    double delay = 0;  // already overlapping (rounding, a shrunk box): bounce them apart now
    if (gap2 > contact2) {
      double discriminant = square(approach) - closing2 * (gap2 - contact2);
      if (discriminant < 0) return;  // they pass each other
      delay = -(approach + std::sqrt(discriminant)) / closing2;
    }
    if (now + delay < intervalEnd_) schedule(now + delay, EventKind::SphereBounce, a, b, 0);
  }

  // The earliest of the faces of the box (wall) or of the sphere's cell (crossing) that
  // the sphere reaches, per axis, if before the interval ends.
  template <class FaceOnAxis>
  void predictFace(Sphere* sphere, EventKind kind, FaceOnAxis faceOnAxis) {
    double earliest = intervalEnd_;
    int earliestAxis = -1;
    for (int axis = 0; axis < 3; ++axis) {
      double velocity = sphere->velocity[axis], face;
      if (velocity == 0 || !faceOnAxis(axis, velocity > 0, face)) continue;
      double when = sphere->time + std::max(0.0, (face - sphere->position[axis]) / velocity);
      if (when < earliest) earliest = when, earliestAxis = axis;
    }
    if (earliestAxis >= 0) schedule(earliest, kind, sphere, nullptr, static_cast<std::uint16_t>(earliestAxis));
  }
  void predictWall(Sphere* sphere) {
    predictFace(sphere, EventKind::WallBounce, [&](int, bool upwards, double& face) {
      face = upwards ? boxLength_ - sphere->radius : sphere->radius;
      return true;
    });
  }
  // No crossing out through the box's outer faces: the walls turn the sphere back first.
  void predictCellCrossing(Sphere* sphere) {
    predictFace(sphere, EventKind::CellCrossing, [&](int axis, bool upwards, double& face) {
      std::uint32_t coordinate = cellCoordinateOf(sphere->cell, axis);
      if (upwards ? coordinate + 1 == cellsPerSide_ : coordinate == 0) return false;
      face = (coordinate + (upwards ? 1 : 0)) * kCellSize;
      return true;
    });
  }

  bool isStale(const Event& event) const {
    return event.a->collisions != event.collisionsA || (event.b != nullptr && event.b->collisions != event.collisionsB);
  }

  void process(const Event& event) {
    Sphere* a = event.a;
    checkSphere(a, a->slot);
    advance(a, event.time);
    switch (event.kind) {
      case EventKind::CellCrossing: {
        // The path goes on, so the sphere's other events stay valid: only the next face,
        // and the neighbours in the slab of cells it has come next to, are predicted.
        ++counters_.cellCrossings;
        const std::uint32_t stride = cellStride(event.axis);
        const bool upwards = a->velocity[event.axis] > 0;
        removeFromCell(a);
        insertIntoCell(a, upwards ? a->cell + stride : a->cell - stride);
        predictCellCrossing(a);
        predictNeighbours(a, Slab{event.axis, upwards ? 1 : -1});
        return;
      }
      case EventKind::WallBounce:
        ++counters_.wallBounces;
        ++a->collisions;
        a->velocity[event.axis] = -a->velocity[event.axis];
        repredict(a);
        return;
      case EventKind::SphereBounce:
        break;
    }
    Sphere* b = event.b;
    checkSphere(b, b->slot);
    advance(b, event.time);
    ++a->collisions;
    ++b->collisions;
    ++counters_.sphereBounces;
    // Elastic: the impulse along the line of centres, shared by mass.
    double normal[3], distance2 = 0;
    for (int axis = 0; axis < 3; ++axis) {
      normal[axis] = b->position[axis] - a->position[axis];
      distance2 += square(normal[axis]);
    }
    if (distance2 > 0) {
      double distance = std::sqrt(distance2), closing = 0;
      for (int axis = 0; axis < 3; ++axis) {
        normal[axis] /= distance;
        closing += (b->velocity[axis] - a->velocity[axis]) * normal[axis];
      }
      double impulse = 2 * mass(*a) * mass(*b) / (mass(*a) + mass(*b)) * closing;
      for (int axis = 0; axis < 3; ++axis) {
        a->velocity[axis] += impulse / mass(*a) * normal[axis];
        b->velocity[axis] -= impulse / mass(*b) * normal[axis];
      }
    }
    repredict(a);
    repredict(b);
  }

  // After a bounce every earlier prediction for the sphere is stale: all made again.
  void repredict(Sphere* sphere) {
    predictWall(sphere);
    predictCellCrossing(sphere);
    predictNeighbours(sphere);
  }

  // The neighbours are gathered first into a temporary array, as a simulation's
  // neighbour query returns them.
  void predictNeighbours(Sphere* sphere, Slab slab = {}) {
    SphereArray<A> candidates(alloc_, 16);
    forEachNearby(
        sphere->cell,
        [&](Sphere* other) {
          if (other != sphere) candidates.push(other);
        },
        slab);
    for (std::size_t i = 0; i < candidates.size(); ++i) predictPair(sphere, candidates[i]);
  }

  void discardPendingEvents() {
    while (!queue_.empty()) {
      Event* event = queue_.pop();
      poppedSignature_ ^= mixChecksum(0, event->sequence);
      ++counters_.expiredEvents;
      alloc_.deallocate(event);
    }
  }

  A& alloc_;
  Rng rng_;
  SphereArray<A> spheres_;
  EventQueue<A, Event> queue_;
  Sphere** grid_ = nullptr;
  std::uint32_t cellsPerSide_ = 0;
  double boxLength_ = 0, intervalEnd_ = 0, expectedEnergy_ = 0;
  std::uint64_t nextId_ = 0, sequence_ = 0, pushedSignature_ = 0, poppedSignature_ = 0;
  Counters counters_;
};

}  // namespace boxedsim_detail

// scale: intervals of one time unit; 2000-6000 spheres, the population's wave 8
// intervals long.
template <AllocatorPolicy A>
std::uint64_t runBoxedSim(A& alloc, unsigned scale) {
  boxedsim_detail::BoxSimulation<A> simulation(alloc);
  for (unsigned interval = 0; interval < scale; ++interval) simulation.runInterval(interval);
  return simulation.finish(scale * simulation.kInterval);
}

}  // namespace heapkit::workloads
