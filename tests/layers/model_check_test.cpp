// Every layer and every general-purpose composition through the randomized model check,
// over several size distributions and seeds; compositions over AuditedTop must also give
// back every byte when they are destroyed.
#include <cctype>
#include <memory>
#include <string_view>

#include "heapkit/heapkit.h"
#include "support/AuditedTop.h"
#include "support/ModelCheck.h"

namespace heapkit::testing {
namespace {

template <class H>
struct Case {
  using Heap = H;
  static constexpr bool kAudited = true;
  static constexpr bool kMayFail = false;
  static constexpr bool kLargeSizes = true;
  static std::unique_ptr<H> make() { return std::make_unique<H>(); }
};

template <class H>
struct UnauditedCase : Case<H> {
  static constexpr bool kAudited = false;
};

// Never frees single objects, so a long run of large ones would only measure the machine.
template <class H>
struct NoReuseCase : Case<H> {
  static constexpr bool kLargeSizes = false;
};

template <class H>
struct StaticBufferCase : UnauditedCase<H> {
  static constexpr bool kMayFail = true;
  static constexpr std::size_t kBufferBytes = 32 << 20;
  static std::unique_ptr<H> make() {
    static std::unique_ptr<unsigned char[]> buffer(new unsigned char[kBufferBytes]);
    return std::make_unique<H>(buffer.get(), kBufferBytes);
  }
};

template <class H>
struct SilentTraceCase : Case<H> {
  static std::unique_ptr<H> make() {
    auto heap = std::make_unique<H>();
    heap->traceTo(nullptr);
    return heap;
  }
};

template <class Parent>
using SLListBin = AdaptHeap<SLList, Parent>;
// Bounded bins hand objects back to the big heap when full, through their parent slot.
template <class Parent>
using BoundedBin = BoundedFreelistHeap<4, Parent>;
using Top = AuditedTop;

using Cases = ::testing::Types<
    // top heaps
    Case<AuditedTop>, UnauditedCase<MmapHeap>, UnauditedCase<SbrkHeap>, StaticBufferCase<StaticHeap>,
    // object representation
    Case<SizeHeap<Top>>, Case<CoalesceableHeap<64 * 1024, Top>>,
    // building blocks
    Case<FreelistHeap<SizeHeap<Top>>>, Case<BoundedFreelistHeap<16, SizeHeap<Top>>>, NoReuseCase<ChunkHeap<64 * 1024, Top>>,
    NoReuseCase<FreelistHeap<SizeHeap<ChunkHeap<64 * 1024, Top>>>>, Case<AdaptHeap<SLList, SizeHeap<Top>>>,
    Case<AdaptHeap<DLList, SizeHeap<Top>>>, Case<CoalesceHeap<AdaptHeap<DLList, CoalesceableHeap<64 * 1024, Top>>>>,
    // combining
    Case<SegHeap<kingsley::UnboundedClasses, SLListBin, SizeHeap<Top>>>,
    Case<StrictSegHeap<kingsley::Classes, FreelistHeap, SizeHeap<Top>>>,
    Case<StrictSegHeap<kingsley::Classes, BoundedBin, SizeHeap<Top>>>,
    Case<HybridHeap<512, SizeHeap<Top>, SizeHeap<MallocHeap>>>, Case<SelectMmapHeap<4096, SizeHeap<Top>>>,
    Case<ThresholdHeap<1 << 20, SizeHeap<Top>>>, Case<QuickListHeap<128, SizeHeap<Top>>>,
    Case<AdaptiveThresholdHeap<1 << 20, SizeHeap<Top>>>, Case<AdaptiveSelectMmapHeap<SizeHeap<Top>, SizeHeap<MallocHeap>, 4096, 1 << 18>>,
    // utility
    Case<DebugHeap<16, SizeHeap<Top>>>, Case<ProfileHeap<SizeHeap<Top>>>, SilentTraceCase<TraceHeap<SizeHeap<Top>>>,
    Case<ThrowExceptionHeap<SizeHeap<Top>>>, UnauditedCase<UniqueHeap<SizeHeap<MallocHeap>>>,
    // general purpose
    Case<KingsleyHeap<Top>>, Case<KingsleyHeap<Hardened<Top>>>, Case<CoalescingKingsleyHeap<Top>>, Case<LeaCoreHeap<Top>>, Case<LeaHeap<Top>>,
    Case<AdaptiveLeaCoreHeap<Top>>, Case<AdaptiveLeaHeap<Top>>, Case<AdaptiveLeaHeap<Hardened<Top>>>,
    UnauditedCase<AdaptiveLeaHeap<SbrkHeap>>,
    UnauditedCase<LeaHeap<SbrkHeap>>, UnauditedCase<KingsleyHeap<SbrkHeap>>, StaticBufferCase<LeaCoreHeap<StaticHeap>>,
    StaticBufferCase<KingsleyHeap<StaticHeap>>>;

template <class C>
class ModelCheck : public ::testing::Test {};

class CaseNames {
 public:
  // Letters, digits and underscores only: ctest passes the name back as a gtest filter.
  template <class C>
  static std::string GetName(int index) {
    std::string name = ::testing::internal::GetTypeName<typename C::Heap>();
    for (std::string_view noise : {"heapkit::testing::", "heapkit::", "(anonymous namespace)::"}) {
      for (auto at = name.find(noise); at != std::string::npos; at = name.find(noise)) name.erase(at, noise.size());
    }
    for (char& c : name) {
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    }
    return std::to_string(index) + "_" + name.substr(0, 80);
  }
};
TYPED_TEST_SUITE(ModelCheck, Cases, CaseNames);

TYPED_TEST(ModelCheck, RandomOperationsKeepEveryObjectIntact) {
  using C = TypeParam;
  ModelCheckOptions options;
  options.mallocMayFail = C::kMayFail;
  for (const SizeDistribution& sizes : standardDistributions()) {
    if (sizes.name == "large") {
      if (!C::kLargeSizes) continue;
      options.operations = 1000;
      options.maxLiveObjects = 40;
    } else {
      options.operations = 12000;
      options.maxLiveObjects = 1500;
    }
    for (std::uint64_t seed : {1u, 2u}) {
      SCOPED_TRACE(sizes.name + " seed " + std::to_string(seed));
      TeardownAudit::leftoverBytes = 0;
      std::size_t teardownsBefore = TeardownAudit::teardowns;
      {
        auto heap = C::make();
        ModelChecker<typename C::Heap> checker(*heap, seed);
        checker.run(sizes, options);
        if (::testing::Test::HasFatalFailure()) return;
      }
      if constexpr (C::kAudited) {
        EXPECT_GT(TeardownAudit::teardowns, teardownsBefore);
        EXPECT_EQ(TeardownAudit::leftoverBytes, 0u) << "a layer kept memory after it was destroyed";
      }
    }
  }
}

// The top heaps count what they hold; once every object is freed they hold nothing more
// than a cache they document (SbrkHeap keeps one commit step above the break).
TEST(TopHeapFootprint, ReturnsToZeroAfterEveryFree) {
  MmapHeap mmapHeap;
  SbrkHeap sbrkHeap;
  {
    ModelChecker<MmapHeap> checker(mmapHeap, 7);
    checker.run(standardDistributions()[2], {});
  }
  EXPECT_EQ(mmapHeap.bytesHeld(), 0u);
  EXPECT_GT(mmapHeap.peakBytesHeld(), 0u);
  {
    ModelChecker<SbrkHeap> checker(sbrkHeap, 7);
    checker.run(standardDistributions()[2], {});
  }
  EXPECT_LE(sbrkHeap.bytesHeld(), 2 * ReservedMapping::kCommitStep);
  EXPECT_EQ(sbrkHeap.breakOffset(), 0u);
  EXPECT_GT(sbrkHeap.peakBytesHeld(), sbrkHeap.bytesHeld());
}

}  // namespace
}  // namespace heapkit::testing
