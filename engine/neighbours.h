/* Neighbour lists: a step's pairs as one row of partners per object (compressed rows), made in
 * parallel from the sorted pair list, for broadphase_neighbours. */
#pragma once

#include "broadphase.h"
#include "heap.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct neighbours_state {
    HEAP_ARRAY(size_t) offsets; /* rows + 1 */
    HEAP_ARRAY(uint32_t) ids;   /* two entries a pair */
    /* The transposition's working memory: each pair's b with its a, sorted by b. */
    HEAP_ARRAY(uint64_t) keys;
    HEAP_ARRAY(uint64_t) keys_tmp;
    HEAP_ARRAY(uint32_t) values;
    HEAP_ARRAY(uint32_t) values_tmp;
    HEAP_ARRAY(size_t) lower; /* by row: where its run of the sorted b begins (rows + 1) */
    void *hist;
    size_t hist_bytes;
    size_t rows;
    bool valid; /* made from the pairs as they stand (the step clears it) */
} neighbours_state;

/* Rows [0, rows) from `count` pairs sorted by (a, b), every id below `rows`: row x holds the a of
 * every pair (a, x), then the b of every pair (x, b), so ascending. Identical for every worker
 * count; allocates only to grow. False on out of memory (the state is then not valid). */
bool neighbours_make(neighbours_state *n, const broadphase_pair *pairs, size_t count, size_t rows,
                     heap *h, int workers);
void neighbours_release(neighbours_state *n, heap *h);
