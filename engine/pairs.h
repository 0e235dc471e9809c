/* Pair output. Jobs write the pairs they find into blocks claimed from one pool sized from the
 * previous step (so a steady-state step allocates nothing, whichever worker runs which job);
 * afterwards the blocks are compacted and radix-sorted by (a, b). Pairs are unique, so the
 * sorted array is the same for every thread count and every method, whatever order the jobs
 * ran in. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct broadphase_world broadphase_world;
typedef struct broadphase_pair broadphase_pair;

enum { PAIRS_BLOCK = 2048 }; /* keys per pool block */

typedef enum pairs_result { PAIRS_DONE, PAIRS_RETRY, PAIRS_OUT_OF_MEMORY } pairs_result;

typedef struct pairs_lane pairs_lane;

typedef struct pairs_state {
    uint64_t *pool;       /* pool_blocks * PAIRS_BLOCK keys */
    uint32_t *block_fill; /* keys in the run of blocks starting here (0 if none starts here) */
    size_t *block_offset;
    size_t pool_blocks; /* usable blocks: what all three arrays have room for */
    size_t pool_capacity, fill_capacity, offset_capacity;
    size_t next_block; /* claimed with atomics during the search */
    bool overflow;     /* set with atomics when the pool ran out */
    uint64_t *keys, *tmp;
    size_t key_capacity;
    broadphase_pair *out;
    size_t out_capacity;
    size_t count; /* pairs in out */
    void *hist;
    size_t hist_bytes;
    int shift;         /* key = a << shift | b */
    pairs_lane *lanes; /* one per worker */
    size_t lane_capacity;
} pairs_state;

/* A worker's open run of pool blocks, kept across the jobs it runs. */
typedef struct pairs_writer {
    pairs_state *ps;
    uint64_t *keys;
    size_t count, capacity, block;
    int shift, worker;
    bool failed;
} pairs_writer;

typedef struct pairs_lane {
    _Alignas(64) pairs_writer open;
} pairs_lane;

/* Before the search: a pool for at least the last step's pairs, twice as large when `grow`
 * (after a PAIRS_RETRY). False on out of memory. */
bool pairs_prepare(broadphase_world *w, bool grow);
/* A job running on `worker` takes the worker's writer and gives it back with _end. */
pairs_writer pairs_writer_begin(pairs_state *ps, int worker);
/* Makes room for `more` keys; false (and the step will be retried) when the pool ran out. */
bool pairs_writer_grow(pairs_writer *wr, size_t more);
void pairs_writer_end(pairs_writer *wr);
/* After the search: compact, sort, publish in ps->out; PAIRS_RETRY when the pool overflowed
 * (prepare again with grow and search again). */
pairs_result pairs_finish(broadphase_world *w);
void pairs_release(broadphase_world *w);

static inline bool pairs_writer_reserve(pairs_writer *wr, size_t more) {
    return wr->count + more <= wr->capacity || pairs_writer_grow(wr, more);
}
static inline void pairs_writer_push(pairs_writer *wr, uint32_t a, uint32_t b) {
    uint64_t lo = a < b ? a : b, hi = a < b ? b : a;
    wr->keys[wr->count++] = lo << wr->shift | hi;
}
