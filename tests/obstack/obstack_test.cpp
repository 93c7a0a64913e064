// The C obstack API (include/heapkit/obstack.h) against glibc's own <obstack.h>: the
// same sequences of operations, step by step, must give objects of the same sizes and
// contents, the same growing-object sizes, and free back to the same objects.
#include <gtest/gtest.h>
#include <obstack.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "heapkit/obstack.h"

#define obstack_chunk_alloc std::malloc
#define obstack_chunk_free std::free

namespace {

// The two obstacks side by side, each finished object recorded with its size.
class Pair {
 public:
  Pair() {
    obstack_init(&glibc_);
    EXPECT_EQ(hk_obstack_init(&mine_), 0);
  }
  ~Pair() {
    obstack_free(&glibc_, nullptr);
    hk_obstack_destroy(&mine_);
  }

  void alloc(std::size_t size, unsigned char fill) {
    auto* a = static_cast<unsigned char*>(obstack_alloc(&glibc_, size));
    auto* b = static_cast<unsigned char*>(hk_obstack_alloc(&mine_, size));
    ASSERT_NE(b, nullptr);
    std::memset(a, fill, size);
    std::memset(b, fill, size);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(b) % 16, 0u);
    record(a, b, size);
  }
  void copy(const std::string& text, bool zero) {
    void* a = zero ? obstack_copy0(&glibc_, text.data(), text.size()) : obstack_copy(&glibc_, text.data(), text.size());
    void* b = zero ? hk_obstack_copy0(&mine_, text.data(), text.size()) : hk_obstack_copy(&mine_, text.data(), text.size());
    ASSERT_NE(b, nullptr);
    record(a, b, text.size() + (zero ? 1 : 0));
  }
  void grow(const std::string& text) {
    obstack_grow(&glibc_, text.data(), text.size());
    ASSERT_EQ(hk_obstack_grow(&mine_, text.data(), text.size()), 0);
    compareGrowing();
  }
  void grow0(const std::string& text) {
    obstack_grow0(&glibc_, text.data(), text.size());
    ASSERT_EQ(hk_obstack_grow0(&mine_, text.data(), text.size()), 0);
    compareGrowing();
  }
  void grow1(char c) {
    obstack_1grow(&glibc_, c);
    ASSERT_EQ(hk_obstack_1grow(&mine_, c), 0);
    compareGrowing();
  }
  void blank(std::size_t size) {
    obstack_blank(&glibc_, size);
    ASSERT_EQ(hk_obstack_blank(&mine_, size), 0);
    std::memset(static_cast<char*>(obstack_next_free(&glibc_)) - size, 'z', size);
    std::memset(static_cast<char*>(hk_obstack_next_free(&mine_)) - size, 'z', size);
    compareGrowing();
  }
  void finish() {
    std::size_t size = obstack_object_size(&glibc_);
    void* a = obstack_finish(&glibc_);
    void* b = hk_obstack_finish(&mine_);
    record(a, b, size);
  }
  // Free back to the i-th live object; both must then start the next object there.
  void freeTo(std::size_t index) {
    ASSERT_LT(index, objects_.size());
    obstack_free(&glibc_, objects_[index].glibc);
    ASSERT_EQ(hk_obstack_free(&mine_, objects_[index].mine), 0);
    EXPECT_EQ(obstack_base(&glibc_), objects_[index].glibc);
    EXPECT_EQ(hk_obstack_base(&mine_), objects_[index].mine);
    objects_.resize(index);
    compareGrowing();
    verifyAll();
  }
  void freeAll() {
    // glibc: free(NULL) frees everything, the growing object too; init makes it usable.
    obstack_free(&glibc_, nullptr);
    obstack_init(&glibc_);
    hk_obstack_free_all(&mine_);
    objects_.clear();
    EXPECT_EQ(hk_obstack_object_size(&mine_), 0u);
  }

  void compareGrowing() {
    ASSERT_EQ(obstack_object_size(&glibc_), hk_obstack_object_size(&mine_));
    if (hk_obstack_object_size(&mine_) == 0) return;  // base may be NULL: memcmp must not see it
    ASSERT_EQ(std::memcmp(obstack_base(&glibc_), hk_obstack_base(&mine_), hk_obstack_object_size(&mine_)), 0)
        << "the growing objects differ";
  }
  void verifyAll() {
    for (std::size_t i = 0; i < objects_.size(); ++i) {
      if (objects_[i].size == 0) continue;
      ASSERT_EQ(std::memcmp(objects_[i].glibc, objects_[i].mine, objects_[i].size), 0) << "object " << i << " differs";
    }
  }
  std::size_t liveObjects() const { return objects_.size(); }
  hk_obstack& mine() { return mine_; }

 private:
  struct Object {
    void* glibc;
    void* mine;
    std::size_t size;
  };
  void record(void* a, void* b, std::size_t size) {
    ASSERT_NE(b, nullptr);
    ASSERT_EQ(std::memcmp(a, b, size), 0);
    objects_.push_back({a, b, size});
  }
  struct obstack glibc_;
  hk_obstack mine_;
  std::vector<Object> objects_;
};

TEST(ObstackVsGlibc, ScriptedSequence) {
  Pair pair;
  pair.copy("hello", false);
  pair.copy("world", true);
  pair.alloc(100, 1);
  pair.grow("abc");
  pair.grow1('d');
  pair.grow0("efg");
  pair.finish();
  pair.finish();  // an empty object
  pair.blank(5000);  // moves the growing object to a bigger chunk
  pair.grow(std::string(20000, 'x'));
  pair.finish();
  pair.alloc(0, 0);
  pair.alloc(7, 7);
  pair.verifyAll();
  pair.freeTo(3);
  pair.grow("after the free");
  pair.finish();
  pair.freeTo(1);
  pair.freeAll();
  pair.alloc(10, 9);
  pair.verifyAll();
}

TEST(ObstackVsGlibc, RandomSequences) {
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    std::mt19937_64 rng(seed);
    Pair pair;
    for (int step = 0; step < 3000 && !HasFatalFailure(); ++step) {
      std::size_t size = rng() % 8 == 0 ? rng() % 10000 : rng() % 100;
      switch (rng() % 10) {
        case 0: pair.alloc(size, static_cast<unsigned char>(step)); break;
        case 1: pair.copy(std::string(size, static_cast<char>('a' + step % 26)), rng() % 2); break;
        case 2: pair.grow(std::string(size, 'g')); break;
        case 3: pair.grow0(std::string(size % 50, 'h')); break;
        case 4: pair.grow1(static_cast<char>(step)); break;
        case 5: pair.blank(size); break;
        case 6: case 7: pair.finish(); break;
        case 8:
          if (pair.liveObjects() > 0) pair.freeTo(rng() % pair.liveObjects());
          break;
        case 9:
          if (rng() % 20 == 0) pair.freeAll();
          break;
      }
    }
    pair.verifyAll();
  }
}

TEST(HkObstack, ErrorsAreReportedNotCrashes) {
  hk_obstack ob;
  ASSERT_EQ(hk_obstack_init(&ob), 0);
  errno = 0;
  EXPECT_EQ(hk_obstack_alloc(&ob, SIZE_MAX), nullptr);
  EXPECT_EQ(errno, ENOMEM);
  EXPECT_EQ(hk_obstack_grow0(&ob, "x", SIZE_MAX), -1);
  EXPECT_EQ(hk_obstack_blank(&ob, SIZE_MAX - 100), -1);
  int elsewhere = 0;
  errno = 0;
  EXPECT_EQ(hk_obstack_free(&ob, &elsewhere), -1);
  EXPECT_EQ(errno, EINVAL);
  void* object = hk_obstack_copy0(&ob, "still here", 10);
  EXPECT_STREQ(static_cast<char*>(object), "still here");
  EXPECT_GE(hk_obstack_room(&ob), 0u);
  EXPECT_EQ(hk_obstack_free(&ob, nullptr), 0);
  EXPECT_EQ(hk_obstack_init(nullptr), -1);
  hk_obstack_destroy(&ob);
}

}  // namespace
