// cfrac-like: factoring with big-integer arithmetic in which every intermediate value is
// a fresh heap object, as in the bignum package of the cfrac benchmark (Zorn's suite).
// Each number is a planted semiprime p * q (p of 20-26 bits, q a 61-63-bit prime), split
// by Pollard-Brent rho; the factor found must be p or q and divide the number exactly,
// so a heap that hands out overlapping memory corrupts the arithmetic and is caught.
// Requests are small (16-48 bytes) and short-lived, with a few longer-lived values.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>

#include "AllocatorPolicy.h"

namespace heapkit::workloads {

namespace cfrac_detail {

// Deterministic Miller-Rabin for 64-bit numbers (used only to plant the factors).
inline std::uint64_t mulMod(std::uint64_t a, std::uint64_t b, std::uint64_t m) {
  return static_cast<std::uint64_t>(static_cast<unsigned __int128>(a) * b % m);
}
inline std::uint64_t powMod(std::uint64_t base, std::uint64_t exponent, std::uint64_t m) {
  std::uint64_t result = 1;
  for (base %= m; exponent != 0; exponent >>= 1, base = mulMod(base, base, m))
    if (exponent & 1) result = mulMod(result, base, m);
  return result;
}
inline bool isPrime(std::uint64_t n) {
  if (n < 2) return false;
  for (std::uint64_t p : {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37}) {
    if (n % p == 0) return n == p;
  }
  std::uint64_t d = n - 1;
  int shifts = 0;
  while ((d & 1) == 0) d >>= 1, ++shifts;
  for (std::uint64_t a : {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37}) {
    std::uint64_t x = powMod(a, d, n);
    if (x == 1 || x == n - 1) continue;
    bool composite = true;
    for (int i = 1; i < shifts && composite; ++i) {
      x = mulMod(x, x, n);
      if (x == n - 1) composite = false;
    }
    if (composite) return false;
  }
  return true;
}
inline std::uint64_t randomPrime(Rng& rng, int bits) {
  for (;;) {
    std::uint64_t candidate = (rng.next() >> (64 - bits)) | (std::uint64_t{1} << (bits - 1)) | 1;
    if (isPrime(candidate)) return candidate;
  }
}

}  // namespace cfrac_detail

// Unsigned big integers in 32-bit limbs; every operation returns a new heap object.
template <AllocatorPolicy A>
class BigNumbers {
 public:
  // A header and the limbs right after it, in one heap object sized to the number.
  struct Num {
    std::uint32_t length;  // limbs in use, no leading zero limb; zero has none
    std::uint32_t capacity;
    std::uint32_t* limbs() { return reinterpret_cast<std::uint32_t*>(this + 1); }
    const std::uint32_t* limbs() const { return reinterpret_cast<const std::uint32_t*>(this + 1); }
  };

  explicit BigNumbers(A& alloc) : alloc_(alloc) {}

  Num* make(std::uint32_t length) {
    auto* num = static_cast<Num*>(allocateOrThrow(alloc_, sizeof(Num) + sizeof(std::uint32_t) * length));
    num->length = num->capacity = length;
    return num;
  }
  void release(Num* num) { alloc_.deallocate(num); }

  Num* fromU64(std::uint64_t value) {
    Num* num = make(2);
    num->limbs()[0] = static_cast<std::uint32_t>(value);
    num->limbs()[1] = static_cast<std::uint32_t>(value >> 32);
    return normalize(num);
  }
  Num* copy(const Num* a) {
    Num* num = make(a->length);
    std::memcpy(num->limbs(), a->limbs(), a->length * sizeof(std::uint32_t));
    return num;
  }
  static bool fitsU64(const Num* a) { return a->length <= 2; }
  static std::uint64_t toU64(const Num* a) {
    std::uint64_t value = 0;
    for (std::uint32_t i = a->length; i-- > 0;) value = (value << 32) | a->limbs()[i];
    return value;
  }
  static bool isZero(const Num* a) { return a->length == 0; }

  static int compare(const Num* a, const Num* b) {
    if (a->length != b->length) return a->length < b->length ? -1 : 1;
    for (std::uint32_t i = a->length; i-- > 0;)
      if (a->limbs()[i] != b->limbs()[i]) return a->limbs()[i] < b->limbs()[i] ? -1 : 1;
    return 0;
  }

  Num* add(const Num* a, const Num* b) {
    if (a->length < b->length) std::swap(a, b);
    Num* sum = make(a->length + 1);
    std::uint64_t carry = 0;
    for (std::uint32_t i = 0; i < a->length; ++i) {
      carry += std::uint64_t{a->limbs()[i]} + (i < b->length ? b->limbs()[i] : 0);
      sum->limbs()[i] = static_cast<std::uint32_t>(carry);
      carry >>= 32;
    }
    sum->limbs()[a->length] = static_cast<std::uint32_t>(carry);
    return normalize(sum);
  }

  // |a - b|
  Num* distance(const Num* a, const Num* b) {
    if (compare(a, b) < 0) std::swap(a, b);
    Num* difference = make(a->length);
    std::int64_t borrow = 0;
    for (std::uint32_t i = 0; i < a->length; ++i) {
      std::int64_t t = std::int64_t{a->limbs()[i]} - (i < b->length ? b->limbs()[i] : 0) - borrow;
      borrow = t < 0;
      difference->limbs()[i] = static_cast<std::uint32_t>(t);
    }
    return normalize(difference);
  }

  Num* multiply(const Num* a, const Num* b) {
    Num* product = make(a->length + b->length);
    std::memset(product->limbs(), 0, product->length * sizeof(std::uint32_t));
    for (std::uint32_t i = 0; i < a->length; ++i) {
      std::uint64_t carry = 0;
      for (std::uint32_t j = 0; j < b->length; ++j) {
        carry += std::uint64_t{a->limbs()[i]} * b->limbs()[j] + product->limbs()[i + j];
        product->limbs()[i + j] = static_cast<std::uint32_t>(carry);
        carry >>= 32;
      }
      product->limbs()[i + b->length] = static_cast<std::uint32_t>(carry);
    }
    return normalize(product);
  }

  // u mod v (v non-zero), by Knuth's algorithm D; the normalized operands are
  // temporaries on the heap too, as in cfrac.
  Num* remainder(const Num* u, const Num* v) {
    require(!isZero(v), "division by zero");
    if (compare(u, v) < 0) return copy(u);
    const std::uint32_t n = v->length;
    if (n == 1) {
      std::uint64_t rest = 0;
      for (std::uint32_t i = u->length; i-- > 0;) rest = ((rest << 32) | u->limbs()[i]) % v->limbs()[0];
      return fromU64(rest);
    }
    const std::uint32_t m = u->length - n;
    const int shift = std::countl_zero(v->limbs()[n - 1]);
    auto* vn = allocateArray<std::uint32_t>(alloc_, n);
    auto* un = allocateArray<std::uint32_t>(alloc_, m + n + 1);
    for (std::uint32_t i = n - 1; i > 0; --i)
      vn[i] = (v->limbs()[i] << shift) | static_cast<std::uint32_t>(std::uint64_t{v->limbs()[i - 1]} >> (32 - shift));
    vn[0] = v->limbs()[0] << shift;
    un[m + n] = static_cast<std::uint32_t>(std::uint64_t{u->limbs()[m + n - 1]} >> (32 - shift));
    for (std::uint32_t i = m + n - 1; i > 0; --i)
      un[i] = (u->limbs()[i] << shift) | static_cast<std::uint32_t>(std::uint64_t{u->limbs()[i - 1]} >> (32 - shift));
    un[0] = u->limbs()[0] << shift;

    constexpr std::uint64_t kBase = std::uint64_t{1} << 32;
    for (std::uint32_t j = m + 1; j-- > 0;) {
      std::uint64_t numerator = (std::uint64_t{un[j + n]} << 32) | un[j + n - 1];
      std::uint64_t qhat = numerator / vn[n - 1];
      std::uint64_t rhat = numerator % vn[n - 1];
      while (qhat >= kBase || qhat * vn[n - 2] > ((rhat << 32) | un[j + n - 2])) {
        --qhat;
        rhat += vn[n - 1];
        if (rhat >= kBase) break;
      }
      std::int64_t borrow = 0;
      for (std::uint32_t i = 0; i < n; ++i) {
        std::uint64_t p = qhat * vn[i];
        std::int64_t t = std::int64_t{un[i + j]} - borrow - static_cast<std::int64_t>(p & 0xFFFFFFFF);
        un[i + j] = static_cast<std::uint32_t>(t);
        borrow = static_cast<std::int64_t>(p >> 32) - (t >> 32);
      }
      std::int64_t t = std::int64_t{un[j + n]} - borrow;
      un[j + n] = static_cast<std::uint32_t>(t);
      if (t < 0) {  // qhat was one too big: add v back
        std::uint64_t carry = 0;
        for (std::uint32_t i = 0; i < n; ++i) {
          carry += std::uint64_t{un[i + j]} + vn[i];
          un[i + j] = static_cast<std::uint32_t>(carry);
          carry >>= 32;
        }
        un[j + n] += static_cast<std::uint32_t>(carry);
      }
    }
    Num* rest = make(n);
    for (std::uint32_t i = 0; i < n; ++i)
      rest->limbs()[i] = (un[i] >> shift) | static_cast<std::uint32_t>((std::uint64_t{un[i + 1]} << (32 - shift)));
    alloc_.deallocate(un);
    alloc_.deallocate(vn);
    return normalize(rest);
  }

  Num* gcd(const Num* a, const Num* b) {
    Num* x = copy(a);
    Num* y = copy(b);
    while (!isZero(y)) {
      Num* r = remainder(x, y);
      release(x);
      x = y;
      y = r;
    }
    release(y);
    return x;
  }

 private:
  static Num* normalize(Num* num) {
    while (num->length > 0 && num->limbs()[num->length - 1] == 0) --num->length;
    return num;
  }

  A& alloc_;
};

// Returns a checksum of the factors found; throws WorkloadFailure on a wrong one.
template <AllocatorPolicy A>
std::uint64_t runCfrac(A& alloc, unsigned scale) {
  using Big = BigNumbers<A>;
  using Num = typename Big::Num;
  Big big(alloc);
  Rng rng(0xCF7AC);
  std::uint64_t checksum = 0;
  for (unsigned number = 0; number < scale; ++number) {
    const std::uint64_t p = cfrac_detail::randomPrime(rng, 20 + static_cast<int>(number % 7));
    const std::uint64_t q = cfrac_detail::randomPrime(rng, 61 + static_cast<int>(number % 3));
    Num* pNum = big.fromU64(p);
    Num* qNum = big.fromU64(q);
    Num* n = big.multiply(pNum, qNum);
    big.release(pNum);
    big.release(qNum);

    Num* factor = nullptr;
    // Brent's cycle finding on x -> x^2 + c mod n, with |x - y| batched into a product.
    for (std::uint64_t c = 1; factor == nullptr; ++c) {
      require(c < 8, "rho found no factor: the arithmetic is corrupt");
      Num* cNum = big.fromU64(c);
      Num* y = big.fromU64(2);
      Num* x = big.copy(y);
      Num* product = big.fromU64(1);
      Num* g = big.fromU64(1);
      const std::uint64_t kMaxSteps = std::uint64_t{1} << 18;  // 20x the expected steps for p < 2^26
      std::uint64_t steps = 0;
      for (std::uint64_t run = 1; Big::fitsU64(g) && Big::toU64(g) == 1; run *= 2) {
        big.release(x);
        x = big.copy(y);
        for (std::uint64_t i = 0; i < run && Big::fitsU64(g) && Big::toU64(g) == 1; ++i) {
          Num* square = big.multiply(y, y);
          Num* shifted = big.add(square, cNum);
          big.release(y);
          y = big.remainder(shifted, n);
          big.release(square);
          big.release(shifted);
          Num* d = big.distance(x, y);
          Num* widened = big.multiply(product, d);
          big.release(product);
          product = big.remainder(widened, n);
          big.release(widened);
          big.release(d);
          if (++steps % 32 == 0 || i + 1 == run) {
            big.release(g);
            g = big.gcd(product, n);
          }
          require(steps < kMaxSteps, "rho ran too long: the arithmetic is corrupt");
        }
      }
      if (Big::compare(g, n) != 0 && !Big::isZero(g)) factor = big.copy(g);
      for (Num* num : {cNum, y, x, product, g}) big.release(num);
    }
    Num* rest = big.remainder(n, factor);
    const bool divides = Big::isZero(rest);
    const std::uint64_t found = Big::fitsU64(factor) ? Big::toU64(factor) : 0;
    big.release(rest);
    big.release(factor);
    big.release(n);
    require(divides && (found == p || found == q), "rho returned a wrong factor");
    checksum = mixChecksum(checksum, found);
  }
  return checksum;
}

}  // namespace heapkit::workloads
