// lindsay-like: a discrete-event simulation of a hypercube message-passing network with
// many small objects, after the lindsay benchmark of Zorn's suite. Messages (a packet
// plus a payload of 8-120 bytes) are injected at random nodes, routed dimension by
// dimension through per-node FIFO queues, and delivered; events live in a binary heap
// of separately allocated event records; deliveries leave log records that are summed
// and freed in batches. Every payload is checked on delivery, every message must arrive
// exactly once over the shortest path, so a heap that corrupts an object is caught.
#pragma once

#include <bit>
#include <cstdint>

#include "AllocatorPolicy.h"
#include "EventQueue.h"

namespace heapkit::workloads {

namespace lindsay_detail {

struct Packet {
  Packet* next;  // in a node's queue
  std::uint32_t id;
  std::uint16_t source, destination;
  std::uint32_t hops;
  std::uint32_t payloadBytes;
  unsigned char* payload;
};

enum class EventKind : std::uint32_t { Inject, Arrive, Serve };

struct Event {
  std::uint64_t time;
  std::uint64_t sequence;  // ties broken by creation order, so runs are deterministic
  EventKind kind;
  std::uint32_t node;
  Packet* packet;
};

struct DeliveryRecord {
  DeliveryRecord* next;
  std::uint32_t id;
  std::uint32_t latency;
};

struct NodeState {
  Packet* head = nullptr;
  Packet* tail = nullptr;
  bool serving = false;
};

inline unsigned char payloadByte(std::uint32_t id, std::uint32_t index) {
  return static_cast<unsigned char>((id * 2654435761u + index * 40503u) >> 13);
}

}  // namespace lindsay_detail

// scale: thousands of messages sent over a 256-node hypercube.
template <AllocatorPolicy A>
std::uint64_t runLindsay(A& alloc, unsigned scale) {
  using namespace lindsay_detail;
  constexpr unsigned kDimensions = 8;
  constexpr std::uint32_t kNodes = 1u << kDimensions;
  constexpr std::uint32_t kLinkLatency = 3;
  constexpr std::uint32_t kRecordBatch = 2048;
  const std::uint32_t messages = scale * 1000;

  Rng rng(0x11D5A7);
  auto* nodes = allocateArray<NodeState>(alloc, kNodes);
  for (std::uint32_t n = 0; n < kNodes; ++n) new (&nodes[n]) NodeState();
  EventQueue<A, Event> queue(alloc);
  std::uint64_t sequence = 0;
  auto schedule = [&](std::uint64_t time, EventKind kind, std::uint32_t node, Packet* packet) {
    auto* event = static_cast<Event*>(allocateOrThrow(alloc, sizeof(Event)));
    *event = Event{time, sequence++, kind, node, packet};
    queue.push(event);
  };

  // One pending injection at a time, about 40 per time unit: the network's own traffic,
  // not a backlog of future events, sets the number of live objects.
  auto scheduleInjection = [&](std::uint64_t now) {
    schedule(now + (rng.below(40) == 0 ? 1 : 0), EventKind::Inject, static_cast<std::uint32_t>(rng.below(kNodes)),
             nullptr);
  };
  scheduleInjection(0);

  std::uint32_t injected = 0, delivered = 0, pendingRecords = 0;
  std::uint64_t expectedHops = 0, totalHops = 0, checksum = 0;
  DeliveryRecord* records = nullptr;
  auto flushRecords = [&] {
    while (records != nullptr) {
      DeliveryRecord* record = records;
      records = record->next;
      checksum = mixChecksum(checksum, (std::uint64_t{record->id} << 32) | record->latency);
      alloc.deallocate(record);
    }
    pendingRecords = 0;
  };
  auto enqueue = [&](std::uint64_t now, std::uint32_t node, Packet* packet) {
    NodeState& state = nodes[node];
    packet->next = nullptr;
    if (state.tail != nullptr) state.tail->next = packet;
    else state.head = packet;
    state.tail = packet;
    if (!state.serving) {
      state.serving = true;
      schedule(now + 1, EventKind::Serve, node, nullptr);
    }
  };

  while (!queue.empty()) {
    Event* event = queue.pop();
    const std::uint64_t now = event->time;
    switch (event->kind) {
      case EventKind::Inject: {
        auto* packet = static_cast<Packet*>(allocateOrThrow(alloc, sizeof(Packet)));
        std::uint32_t destination = static_cast<std::uint32_t>(rng.below(kNodes));
        std::uint32_t bytes = 8 + 8 * static_cast<std::uint32_t>(rng.below(15));
        *packet = Packet{nullptr, injected++, static_cast<std::uint16_t>(event->node),
                         static_cast<std::uint16_t>(destination), 0, bytes,
                         static_cast<unsigned char*>(allocateOrThrow(alloc, bytes))};
        for (std::uint32_t i = 0; i < bytes; ++i) packet->payload[i] = payloadByte(packet->id, i);
        expectedHops += static_cast<unsigned>(std::popcount(event->node ^ destination));
        enqueue(now, event->node, packet);
        if (injected < messages) scheduleInjection(now);
        break;
      }
      case EventKind::Arrive:
        enqueue(now, event->node, event->packet);
        break;
      case EventKind::Serve: {
        NodeState& state = nodes[event->node];
        Packet* packet = state.head;
        require(packet != nullptr, "served an empty queue");
        state.head = packet->next;
        if (state.head == nullptr) state.tail = nullptr;
        if (state.head != nullptr) schedule(now + 1, EventKind::Serve, event->node, nullptr);
        else state.serving = false;

        if (packet->destination == event->node) {
          for (std::uint32_t i = 0; i < packet->payloadBytes; ++i)
            require(packet->payload[i] == payloadByte(packet->id, i), "payload corrupted in flight");
          totalHops += packet->hops;
          auto* record = static_cast<DeliveryRecord*>(allocateOrThrow(alloc, sizeof(DeliveryRecord)));
          *record = DeliveryRecord{records, packet->id, static_cast<std::uint32_t>(now)};
          records = record;
          if (++pendingRecords == kRecordBatch) flushRecords();
          ++delivered;
          alloc.deallocate(packet->payload);
          alloc.deallocate(packet);
        } else {
          // E-cube routing: correct the lowest differing dimension first.
          std::uint32_t differing = packet->destination ^ event->node;
          require(packet->hops < kDimensions, "packet wandered off its shortest path");
          ++packet->hops;
          schedule(now + kLinkLatency, EventKind::Arrive, event->node ^ (differing & (~differing + 1)), packet);
        }
        break;
      }
    }
    alloc.deallocate(event);
  }
  flushRecords();
  alloc.deallocate(nodes);
  require(injected == messages && delivered == messages, "a message was lost or duplicated");
  require(totalHops == expectedHops, "a message took a longer path than the shortest");
  return mixChecksum(checksum, totalHops);
}

}  // namespace heapkit::workloads
