// FreeList (building/FreeList.h): every valid structure, order and fit against a model of
// the list written here independently (which block each fit takes, in which order the
// list holds them), over random insertions, removals and takes; and a compile-time policy
// (static constexpr members) deciding and counting exactly as the run-time one.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "heapkit/building/FreeList.h"

namespace heapkit {
namespace {

// The heap the list's accesses are counted on.
struct CountingOwner {
  WorkCounts counts;
  WorkCounts& workCounts() { return counts; }
};
static_assert(CountingHeap<CountingOwner>);

constexpr std::size_t kBlocks = 48;
constexpr std::size_t kHeaderBytes = 8;
constexpr std::size_t kSlotBytes = 256;

// Blocks of lengths 32..240 (a few repeated, so that ties occur), one per slot, each with
// an 8-byte header holding its size word.
struct Blocks {
  alignas(16) unsigned char memory[kBlocks * kSlotBytes];
  std::size_t lengths[kBlocks];

  explicit Blocks(std::uint32_t seed) {
    std::memset(memory, 0, sizeof memory);
    std::mt19937 random(seed);
    for (std::size_t i = 0; i < kBlocks; ++i) {
      lengths[i] = 32 + 16 * (random() % 8);
      ListedBlocks{kHeaderBytes}.sizeWord(at(i)) = lengths[i];
    }
  }
  char* at(std::size_t i) { return reinterpret_cast<char*>(memory + i * kSlotBytes); }
  std::size_t indexOf(char* block) { return static_cast<std::size_t>(block - at(0)) / kSlotBytes; }
};

// The list as a sequence in list order, and the rover (next fit: the block after the last
// one taken; kNone from the head).
class Model {
 public:
  static constexpr std::size_t kNone = SIZE_MAX;

  Model(const ListPolicy& policy, const std::size_t* lengths) : policy_(policy), lengths_(lengths) {}

  void insert(std::size_t block) {
    switch (policy_.order) {
      case ListOrder::Lifo: order_.insert(order_.begin(), block); break;
      case ListOrder::Fifo: order_.push_back(block); break;
      case ListOrder::Address: order_.insert(std::lower_bound(order_.begin(), order_.end(), block), block); break;
      case ListOrder::Size: {
        auto keyLess = [&](std::size_t a, std::size_t b) {
          return lengths_[a] < lengths_[b] || (lengths_[a] == lengths_[b] && a < b);
        };
        order_.insert(std::lower_bound(order_.begin(), order_.end(), block, keyLess), block);
        break;
      }
    }
  }
  void remove(std::size_t block) {
    auto at = std::find(order_.begin(), order_.end(), block);
    if (policy_.fit == ListFit::Next && rover_ == block) rover_ = at + 1 == order_.end() ? kNone : *(at + 1);
    order_.erase(at);
  }
  std::size_t take(std::size_t length) {
    std::size_t chosen = choose(length);
    if (chosen == kNone) return kNone;
    auto at = std::find(order_.begin(), order_.end(), chosen);
    if (policy_.fit == ListFit::Next) rover_ = at + 1 == order_.end() ? kNone : *(at + 1);
    order_.erase(at);
    return chosen;
  }
  bool holds(std::size_t block) const { return std::find(order_.begin(), order_.end(), block) != order_.end(); }
  const std::vector<std::size_t>& order() const { return order_; }

 private:
  std::size_t choose(std::size_t length) const {
    if (order_.empty()) return kNone;
    if (policy_.structure == ListStructure::SizeTree) {
      // In key order: the smallest that fits (first, best, exact), or the largest (worst).
      if (policy_.fit == ListFit::Worst) return lengths_[order_.back()] >= length ? order_.back() : kNone;
      for (std::size_t b : order_)
        if (lengths_[b] >= length) return policy_.fit == ListFit::Exact && lengths_[b] != length ? kNone : b;
      return kNone;
    }
    std::vector<std::size_t> visit = order_;
    if (policy_.fit == ListFit::Next && rover_ != kNone) {
      auto at = std::find(visit.begin(), visit.end(), rover_);
      std::rotate(visit.begin(), at, visit.end());
    }
    std::size_t chosen = kNone;
    for (std::size_t b : visit) {
      std::size_t l = lengths_[b];
      switch (policy_.fit) {
        case ListFit::First:
        case ListFit::Next:
          if (l >= length) return b;
          break;
        case ListFit::Exact:
          if (l == length) return b;
          break;
        case ListFit::Best:
          if (l >= length && (chosen == kNone || l < lengths_[chosen])) chosen = b;
          break;
        case ListFit::Worst:
          if (l >= length && (chosen == kNone || l > lengths_[chosen])) chosen = b;
          break;
      }
    }
    return chosen;
  }

  ListPolicy policy_;
  const std::size_t* lengths_;
  std::vector<std::size_t> order_;
  std::size_t rover_ = kNone;
};

std::vector<ListPolicy> validPolicies() {
  std::vector<ListPolicy> policies;
  for (auto structure : {ListStructure::SinglyLinked, ListStructure::DoublyLinked, ListStructure::SizeTree})
    for (auto order : {ListOrder::Lifo, ListOrder::Fifo, ListOrder::Address, ListOrder::Size})
      for (auto fit : {ListFit::First, ListFit::Next, ListFit::Best, ListFit::Exact, ListFit::Worst}) {
        ListPolicy policy{structure, fit, order};
        if (invalidListPolicy(policy) == nullptr) policies.push_back(policy);
      }
  return policies;
}

std::string describe(const ListPolicy& p) {
  return "structure " + std::to_string(int(p.structure)) + ", order " + std::to_string(int(p.order)) + ", fit " +
         std::to_string(int(p.fit));
}

// One random run: what each take returned (block index or kNone) and the counts.
struct ListRun {
  std::vector<std::size_t> taken;
  WorkCounts counts;
};

template <class Policy>
ListRun runRandom(const Policy& policy, const ListPolicy& modelPolicy, std::uint32_t seed, bool checkModel) {
  Blocks blocks(seed);
  CountingOwner owner;
  FreeList list;
  Model model(modelPolicy, blocks.lengths);
  ListedBlocks layout{kHeaderBytes};
  std::mt19937 random(seed * 7 + 1);
  ListRun run;
  for (int step = 0; step < 2000; ++step) {
    std::size_t block = random() % kBlocks;
    switch (random() % 3) {
      case 0:
        if (!model.holds(block)) {
          list.insert(owner, policy, layout, blocks.at(block), blocks.lengths[block]);
          model.insert(block);
        }
        break;
      case 1:
        if (model.holds(block)) {
          list.remove(owner, policy, layout, blocks.at(block), blocks.lengths[block]);
          model.remove(block);
        }
        break;
      default: {
        std::size_t length = 32 + 16 * (random() % 9);
        char* got = list.take(owner, policy, layout, length);
        std::size_t expected = model.take(length);
        std::size_t index = got == nullptr ? Model::kNone : blocks.indexOf(got);
        if (checkModel) {
          EXPECT_EQ(index, expected) << "step " << step << ", length " << length;
        }
        run.taken.push_back(index);
        break;
      }
    }
    if (checkModel && ::testing::Test::HasFailure()) break;
  }
  run.counts = owner.counts;
  return run;
}

TEST(FreeList, EveryStructureOrderAndFitTakesTheBlockItsModelTakes) {
  std::vector<ListPolicy> policies = validPolicies();
  ASSERT_EQ(policies.size(), 2u * 3u * 5u + 4u);  // lists: 3 orders x 5 fits; tree: 4 fits
  for (const ListPolicy& policy : policies) {
    SCOPED_TRACE(describe(policy));
    for (std::uint32_t seed = 1; seed <= 3; ++seed) {
      ListRun run = runRandom(policy, policy, seed, true);
      if (HasFailure()) return;
      // Every operation touched the list's memory, and the walks took steps.
      EXPECT_GT(run.counts.reads, 0u);
      EXPECT_GT(run.counts.writes, 0u);
      EXPECT_GT(run.counts.steps, 0u);
    }
  }
}

// A compile-time policy: the form an emitted allocator uses.
template <ListStructure S, ListFit F, ListOrder O>
struct ConstantPolicy {
  static constexpr ListStructure structure = S;
  static constexpr ListFit fit = F;
  static constexpr ListOrder order = O;
};

template <class Constant>
void expectSameAsRunTime() {
  ListPolicy values{Constant::structure, Constant::fit, Constant::order};
  static_assert(invalidListPolicy(Constant{}) == nullptr);
  ListRun byValue = runRandom(values, values, 11, false);
  ListRun byType = runRandom(Constant{}, values, 11, false);
  EXPECT_EQ(byValue.taken, byType.taken);
  EXPECT_EQ(byValue.counts.steps, byType.counts.steps);
  EXPECT_EQ(byValue.counts.reads, byType.counts.reads);
  EXPECT_EQ(byValue.counts.writes, byType.counts.writes);
}

TEST(FreeList, ACompileTimePolicyDecidesAndCountsAsTheRunTimeOne) {
  expectSameAsRunTime<ConstantPolicy<ListStructure::SinglyLinked, ListFit::Exact, ListOrder::Lifo>>();
  expectSameAsRunTime<ConstantPolicy<ListStructure::DoublyLinked, ListFit::First, ListOrder::Lifo>>();
  expectSameAsRunTime<ConstantPolicy<ListStructure::SinglyLinked, ListFit::Next, ListOrder::Address>>();
  expectSameAsRunTime<ConstantPolicy<ListStructure::DoublyLinked, ListFit::Best, ListOrder::Fifo>>();
  expectSameAsRunTime<ConstantPolicy<ListStructure::SizeTree, ListFit::Worst, ListOrder::Size>>();
}

TEST(FreeList, InvalidPoliciesAreNamed) {
  EXPECT_STREQ(invalidListPolicy(ListPolicy{ListStructure::SizeTree, ListFit::Best, ListOrder::Lifo}),
               "list.order: a size tree is ordered by size, and only a size tree is");
  EXPECT_STREQ(invalidListPolicy(ListPolicy{ListStructure::SizeTree, ListFit::Next, ListOrder::Size}),
               "list.fit: next fit has no meaning in a size-ordered tree");
  EXPECT_EQ(invalidListPolicy(ListPolicy{}), nullptr);
}

}  // namespace
}  // namespace heapkit
