/* The case study of "Reconsidering Custom Memory Allocation" (OOPSLA 2002), rebuilt: an
 * arbitrary-precision calculator written for malloc/free (decimal bignums, one digit per
 * byte as in bc) finds the Nth prime by trial division. Its allocations are routed into
 * a reap, run once ignoring its frees (the reap as a pure region) and once honouring
 * them, and the peak footprint of each run is reported. The paper: 7.4 MB without frees,
 * 240 KB with, for the 1000th prime.
 *
 *   heapkit-reap-calculator [N]        (default 1000)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heapkit/reap.h"

/* ---- the allocator the calculator was written against ------------------------------ */

static void* heap;       /* the reap, the paper's way: a void* passed by address */
static int honourFrees;  /* 0: the reap is a region; frees are dropped */

static void* xmalloc(size_t size) {
  void* object = reapMalloc(&heap, size);
  if (object == NULL) {
    fprintf(stderr, "out of memory\n");
    exit(1);
  }
  return object;
}

static void xfree(void* object) {
  if (honourFrees) reapFree(&heap, object);
}

/* ---- decimal bignums ----------------------------------------------------------------- */

typedef struct {
  size_t length;         /* digits in use; 0 is the number zero */
  unsigned char* digits; /* least significant first, 0..9 */
} bignum;

static bignum* big_new(size_t capacity) {
  bignum* n = xmalloc(sizeof *n);
  n->length = 0;
  n->digits = xmalloc(capacity == 0 ? 1 : capacity);
  return n;
}

static void big_free(bignum* n) {
  xfree(n->digits);
  xfree(n);
}

static void big_trim(bignum* n) {
  while (n->length > 0 && n->digits[n->length - 1] == 0) --n->length;
}

static bignum* big_from(unsigned long value) {
  bignum* n = big_new(20);
  for (; value != 0; value /= 10) n->digits[n->length++] = (unsigned char)(value % 10);
  return n;
}

static int big_cmp(const bignum* a, const bignum* b) {
  if (a->length != b->length) return a->length < b->length ? -1 : 1;
  for (size_t i = a->length; i-- > 0;)
    if (a->digits[i] != b->digits[i]) return a->digits[i] < b->digits[i] ? -1 : 1;
  return 0;
}

static bignum* big_add(const bignum* a, const bignum* b) {
  size_t length = (a->length > b->length ? a->length : b->length) + 1;
  bignum* sum = big_new(length);
  int carry = 0;
  for (size_t i = 0; i < length; ++i) {
    int digit = carry + (i < a->length ? a->digits[i] : 0) + (i < b->length ? b->digits[i] : 0);
    sum->digits[i] = (unsigned char)(digit % 10);
    carry = digit / 10;
  }
  sum->length = length;
  big_trim(sum);
  return sum;
}

static bignum* big_mul(const bignum* a, const bignum* b) {
  size_t length = a->length + b->length;
  bignum* product = big_new(length);
  /* a scratch row of wide digits, as bc keeps one while multiplying */
  unsigned* row = xmalloc((length + 1) * sizeof *row);
  memset(row, 0, (length + 1) * sizeof *row);
  for (size_t i = 0; i < a->length; ++i)
    for (size_t j = 0; j < b->length; ++j) row[i + j] += (unsigned)a->digits[i] * b->digits[j];
  unsigned carry = 0;
  for (size_t i = 0; i < length; ++i) {
    unsigned digit = row[i] + carry;
    product->digits[i] = (unsigned char)(digit % 10);
    carry = digit / 10;
  }
  xfree(row);
  product->length = length;
  big_trim(product);
  return product;
}

/* remainder -= divisor, given remainder >= divisor */
static void big_sub_in_place(bignum* remainder, const bignum* divisor) {
  int borrow = 0;
  for (size_t i = 0; i < remainder->length; ++i) {
    int digit = remainder->digits[i] - borrow - (i < divisor->length ? divisor->digits[i] : 0);
    borrow = digit < 0;
    remainder->digits[i] = (unsigned char)(digit + (borrow ? 10 : 0));
  }
  big_trim(remainder);
}

/* Long division: *quotient and *remainder are new numbers. */
static void big_divmod(const bignum* a, const bignum* b, bignum** quotient, bignum** remainder) {
  bignum* q = big_new(a->length);
  bignum* r = big_new(a->length + 1);
  memset(q->digits, 0, a->length == 0 ? 1 : a->length);
  for (size_t i = a->length; i-- > 0;) {
    /* r = r * 10 + a[i] */
    memmove(r->digits + 1, r->digits, r->length);
    r->digits[0] = a->digits[i];
    ++r->length;
    big_trim(r);
    unsigned char digit = 0;
    while (big_cmp(r, b) >= 0) {
      big_sub_in_place(r, b);
      ++digit;
    }
    q->digits[i] = digit;
  }
  q->length = a->length;
  big_trim(q);
  *quotient = q;
  *remainder = r;
}

static int big_is_prime(const bignum* candidate) {
  bignum* two = big_from(2);
  bignum* divisor = big_from(3);
  int prime = 1;
  for (;;) {
    bignum* square = big_mul(divisor, divisor);
    int beyond = big_cmp(square, candidate) > 0;
    big_free(square);
    if (beyond) break;
    bignum *q, *r;
    big_divmod(candidate, divisor, &q, &r);
    int divides = r->length == 0;
    big_free(q);
    big_free(r);
    if (divides) {
      prime = 0;
      break;
    }
    bignum* next = big_add(divisor, two);
    big_free(divisor);
    divisor = next;
  }
  big_free(divisor);
  big_free(two);
  return prime;
}

/* The Nth prime, as a decimal string in `out`. */
static void nth_prime(unsigned n, char* out, size_t outSize) {
  bignum* two = big_from(2);
  bignum* candidate = big_from(2);
  unsigned found = 1; /* 2 */
  if (n > 1) {
    bignum* three = big_from(3);
    big_free(candidate);
    candidate = three;
    for (;;) {
      if (big_is_prime(candidate) && ++found == n) break;
      bignum* next = big_add(candidate, two);
      big_free(candidate);
      candidate = next;
    }
  }
  size_t length = 0;
  for (size_t i = candidate->length; i-- > 0 && length + 1 < outSize;) out[length++] = (char)('0' + candidate->digits[i]);
  out[length] = '\0';
  big_free(candidate);
  big_free(two);
}

/* ---- the experiment ------------------------------------------------------------------- */

static int run(unsigned n, int frees, char* prime, size_t primeSize, reap_stats_t* stats) {
  honourFrees = frees;
  reapCreate(&heap, NULL);
  if (heap == NULL) return 1;
  nth_prime(n, prime, primeSize);
  reap_get_stats((reap_t*)heap, stats);
  reapDestroy(&heap);
  return 0;
}

int main(int argc, char** argv) {
  unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 10) : 1000;
  if (n == 0 || n > 1000000) {
    fprintf(stderr, "usage: %s [N]   (1 <= N <= 1000000)\n", argv[0]);
    return 2;
  }
  char withoutFrees[64], withFrees[64];
  reap_stats_t regionStats, reapStats;
  if (run((unsigned)n, 0, withoutFrees, sizeof withoutFrees, &regionStats) != 0 ||
      run((unsigned)n, 1, withFrees, sizeof withFrees, &reapStats) != 0) {
    fprintf(stderr, "cannot create a reap\n");
    return 1;
  }
  if (strcmp(withoutFrees, withFrees) != 0) {
    fprintf(stderr, "the two runs disagree: %s vs %s\n", withoutFrees, withFrees);
    return 1;
  }
  printf("prime %lu = %s\n", n, withFrees);
  printf("peak footprint without frees: %zu bytes (%.1f KiB)\n", regionStats.peak_footprint,
         regionStats.peak_footprint / 1024.0);
  printf("peak footprint with frees:    %zu bytes (%.1f KiB)\n", reapStats.peak_footprint,
         reapStats.peak_footprint / 1024.0);
  return 0;
}
