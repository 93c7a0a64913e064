/* A plain C program over the reap library: compiled as C (the header must be valid C),
 * run by ctest directly and under valgrind. Exits non-zero on the first wrong result. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "heapkit/reap.h"

#define CHECK(condition)                                                  \
  do {                                                                    \
    if (!(condition)) {                                                   \
      fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #condition); \
      return 1;                                                           \
    }                                                                     \
  } while (0)

struct node {
  struct node* next;
  char name[40];
};

static int fill_and_check(reap_t* reap, int count, int freeEvery) {
  struct node* head = NULL;
  for (int i = 0; i < count; ++i) {
    struct node* n = reap_malloc(reap, sizeof *n);
    CHECK(n != NULL);
    snprintf(n->name, sizeof n->name, "node %d", i);
    n->next = head;
    head = n;
    if (freeEvery != 0 && i % freeEvery == 0) {
      char* scratch = reap_calloc(reap, 3, 100);
      CHECK(scratch != NULL && scratch[299] == 0);
      scratch = reap_realloc(reap, scratch, 3000);
      CHECK(scratch != NULL && scratch[0] == 0);
      reap_free(reap, scratch);
    }
  }
  for (int i = count - 1; head != NULL; --i, head = head->next) {
    char expected[40];
    snprintf(expected, sizeof expected, "node %d", i);
    CHECK(strcmp(head->name, expected) == 0);
  }
  return 0;
}

int main(void) {
  reap_t* root = reap_create(NULL);
  CHECK(root != NULL);
  for (int connection = 0; connection < 50; ++connection) {
    reap_t* child = reap_create(root);
    reap_t* grandchild = reap_create(child);
    CHECK(child != NULL && grandchild != NULL);
    CHECK(fill_and_check(child, 500, 7) == 0);
    CHECK(fill_and_check(grandchild, 300, 0) == 0);
    if (connection % 2 == 0) reap_free_all(child);
    CHECK(fill_and_check(grandchild, 300, 3) == 0);
    void* big = reap_malloc(grandchild, 1 << 20);
    CHECK(big != NULL);
    memset(big, 1, 1 << 20);
    if (connection % 3 == 0) reap_free(grandchild, big);
    reap_destroy(child); /* destroys grandchild too */
  }
  errno = 0;
  CHECK(reap_malloc(root, SIZE_MAX) == NULL && errno == ENOMEM);
  CHECK(reap_calloc(root, SIZE_MAX, 2) == NULL);

  reap_stats_t stats;
  CHECK(reap_get_stats(root, &stats) == 0);
  CHECK(stats.bytes_in_use == 0 && stats.peak_footprint > 0);

  void* paper = NULL;
  reapCreate(&paper, (void**)&root);
  CHECK(paper != NULL);
  void* object = reapMalloc(&paper, 64);
  reapFree(&paper, object);
  CHECK(reapMalloc(&paper, 64) == object);
  reapFreeAll(&paper);
  reapDestroy(&paper);
  CHECK(paper == NULL);
  reap_destroy(root);
  puts("reap C program: ok");
  return 0;
}
