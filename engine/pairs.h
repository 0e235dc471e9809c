/* Pair output. A pair is the key a << shift | b (a < b). The search emits keys straight into
 * buckets by their top bits (the most significant digit of a radix sort, taken for free), so
 * that afterwards each bucket is a set of keys that one worker gathers, sorts in its cache and
 * writes to the published array at the offset the buckets before it give: no global sort pass.
 * Each worker fills, per bucket, blocks claimed from one pool sized from the previous step (so a
 * steady-state step allocates nothing, whichever worker runs which job); the bucket and block
 * sizes follow the expected pair count. When the pairs are a large share of all possible ones
 * (a dense scene), each worker instead sets bits in its own triangular bit matrix, and the
 * output reads the matrices row by row, already in order: no sort at all. Pairs are unique, so
 * the sorted array is the same for every thread count and every method, whatever order the jobs
 * ran in. */
#pragma once

#include "bits.h"
#include "broadphase.h"
#include "heap.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum { PAIRS_BUCKET_BITS = 11 }; /* at most 2^11 buckets */

typedef enum pairs_result { PAIRS_DONE, PAIRS_RETRY, PAIRS_OUT_OF_MEMORY } pairs_result;

typedef struct pairs_state {
    /* pool_blocks blocks of 2^block_bits keys, then one sink block per worker, written when the
     * pool has run out (the step is then searched again with a pool of the size the claims
     * counted). */
    uint64_t *pool;
    int block_bits;
    /* When a key's bits below its bucket's fit in 32 (2 * shift - bucket_bits <= 32), the pool
     * holds them alone, as uint32_t from its start: half the bytes written in the search and
     * read back by the sort (the bucket gives the rest of the key). */
    bool narrow;
    uint32_t *block_bucket; /* by block: whose keys it holds */
    uint32_t *block_fill;   /* by block: keys in it */
    size_t pool_blocks, pool_capacity, block_bucket_capacity, block_fill_capacity;
    size_t next_block; /* claimed with atomics during the search; counts failed claims too */
    bool overflow;     /* set with atomics when the pool ran out */
    /* cursors[worker * cursor_row + bucket]: the pool index of the worker's next key in the
     * bucket; 0 before its first block, a multiple of the block size when that block is full.
     * Rows are whole cache lines: every push writes one. */
    size_t *cursors;
    size_t cursor_capacity, cursor_row;
    int shift;       /* key = a << shift | b */
    int bucket_bits; /* buckets = 2^bucket_bits: bucket = key >> (2 * shift - bucket_bits) */
    bool laid_out;   /* bucket_bits and block_bits chosen, for layout_expect pairs, shift */
    size_t layout_expect;
    int layout_shift;
    /* After the search: the blocks grouped by bucket, and each bucket's first block in that
     * list, key count and output offset. */
    uint32_t *block_list;
    size_t block_list_capacity;
    size_t *bucket_first, *bucket_count, *bucket_offset; /* buckets + 1 each, in bucket_mem */
    size_t *bucket_mem;
    size_t bucket_mem_capacity;
    /* Per worker, scratch_stride words: the radix counters, then two runs of scratch_run keys
     * for a bucket's sort. Buckets of more than `big` keys are sorted by all workers together. */
    uint64_t *scratch;
    size_t scratch_capacity, scratch_stride, scratch_run, big;
    uint64_t *keys, *tmp; /* buckets too large for one worker, sorted with the parallel sort */
    size_t key_capacity, tmp_capacity;
    void *hist;
    size_t hist_bytes;
    broadphase_pair *out;
    size_t out_capacity;
    size_t count;      /* pairs in out */
    size_t last_total; /* pairs the last finished search found: the next one's expectation */
    /* With pair events: the last successful step's list, kept while the next one is made (the
     * two buffers swap at the start of a step that follows a successful one). */
    broadphase_pair *prev;
    size_t prev_capacity, prev_count;
    /* Matrix mode: per worker, id_end rows of row_words words; bit b of row a is the pair
     * (a, b). The words up to matrix_zero are known to be zero. */
    bool matrix;
    uint64_t *bits;
    size_t bits_capacity, rows, row_words, matrix_words, matrix_zero;
    size_t *chunk_count; /* by chunk of rows: pairs, then output offset */
    size_t chunk_capacity;
    int workers;
} pairs_state;

/* A worker's view of the output for one step: where its pushes go. Nothing in it changes
 * during the search (the cursors it points at do), so a job just takes one. */
typedef struct pairs_writer {
    pairs_state *ps;
    uint64_t *pool;
    uint32_t *pool32; /* the pool's narrow view (pairs_state.narrow), else NULL */
    size_t *cursor;   /* this worker's row of ps->cursors */
    uint64_t *bits;   /* matrix mode: this worker's matrix, else NULL */
    size_t row_words;
    size_t block_mask;
    int shift, bucket_shift, worker; /* bucket_shift: 2 * shift - bucket_bits - 1 */
} pairs_writer;

/* Before the search: a pool for at least the last step's pairs (or, after a PAIRS_RETRY, for the
 * count the overflowing search made). False on out of memory. */
bool pairs_prepare(pairs_state *ps, heap *h, int workers, size_t id_end, bool grow);
/* The writer of a job running on `worker`. */
pairs_writer pairs_writer_begin(pairs_state *ps, int worker);
/* Claims a new block for `bucket` for `worker`, after the one ending at `pos` (0: none);
 * returns its first index. */
size_t pairs_claim(pairs_state *ps, int worker, size_t pos, size_t bucket);
/* After the search: sort each bucket and publish in ps->out; PAIRS_RETRY when the pool
 * overflowed (prepare again with grow and search again). */
pairs_result pairs_finish(pairs_state *ps, heap *h);
void pairs_release(pairs_state *ps, heap *h);
/* Pair events: the current list becomes the previous one, and its buffer takes the old
 * previous buffer's place for the next list. */
void pairs_keep_previous(pairs_state *ps);
/* The buffer the next list goes to, made now as large as the current one's when there is none
 * yet: after a world's first step, so that its second does not make it (the first touch of its
 * pages made that step stand out), and its pages touched on `workers` threads as far as this
 * list reaches. Best effort: on out of memory the next step makes it. */
void pairs_reserve_next(pairs_state *ps, heap *h, int workers);

static inline void pairs_writer_push(pairs_writer *wr, uint32_t a, uint32_t b) {
    uint64_t lo = a < b ? a : b, hi = a < b ? b : a;
    if (wr->bits) {
        wr->bits[lo * wr->row_words + (hi >> 6)] |= (uint64_t)1 << (hi & 63);
        return;
    }
    uint64_t key = lo << wr->shift | hi;
    /* Two shifts, so that one bucket (a shift by the whole key width) stays defined. */
    size_t bucket = (size_t)((key >> 1) >> wr->bucket_shift);
    size_t pos = wr->cursor[bucket];
    if ((pos & wr->block_mask) == 0) pos = pairs_claim(wr->ps, wr->worker, pos, bucket);
    if (wr->pool32)
        wr->pool32[pos] = (uint32_t)key; /* the low 32 bits: all of those below the bucket's */
    else
        wr->pool[pos] = key;
    wr->cursor[bucket] = pos + 1;
}

/* The pushes of pairs_writer_push for many pairs, with the writer's fields held in registers (a
 * pool store cannot change them, nor the ids): pair j is (row_id[rows[j]], col_id[hits[j]]), or
 * (qid, col_id[j]) when rows is NULL. `wide` is a literal after inlining. */
static inline void pairs_push_run(pairs_writer *wr, bool wide, uint32_t qid,
                                  const uint32_t *restrict row_id, const uint32_t *restrict rows,
                                  const uint32_t *restrict col_id, const uint32_t *restrict hits,
                                  size_t h) {
    uint32_t *restrict pool32 = wr->pool32;
    uint64_t *restrict pool = wr->pool;
    size_t *restrict cursor = wr->cursor;
    const size_t block_mask = wr->block_mask;
    const int shift = wr->shift, bucket_shift = wr->bucket_shift;
    for (size_t j = 0; j < h; j++) {
        uint64_t a = rows ? row_id[rows[j]] : qid, b = col_id[hits ? hits[j] : j];
        uint64_t key = (a < b ? a : b) << shift | (a < b ? b : a);
        size_t bucket = (size_t)((key >> 1) >> bucket_shift);
        size_t pos = cursor[bucket];
        if ((pos & block_mask) == 0) pos = pairs_claim(wr->ps, wr->worker, pos, bucket);
        if (wide)
            pool[pos] = key;
        else
            pool32[pos] = (uint32_t)key;
        cursor[bucket] = pos + 1;
    }
}

/* The pairs (row_id[rows[j]], col_id[hits[j]]) for j < h. */
static inline void pairs_writer_push_hits(pairs_writer *wr, const uint32_t *row_id,
                                          const uint32_t *rows, const uint32_t *col_id,
                                          const uint32_t *hits, size_t h) {
    if (wr->bits) {
        for (size_t j = 0; j < h; j++) pairs_writer_push(wr, row_id[rows[j]], col_id[hits[j]]);
    } else if (wr->pool32) {
        pairs_push_run(wr, false, 0, row_id, rows, col_id, hits, h);
    } else {
        pairs_push_run(wr, true, 0, row_id, rows, col_id, hits, h);
    }
}

/* The pairs (qid, ids[j]) for j < m. */
static inline void pairs_writer_push_row(pairs_writer *wr, uint32_t qid, const uint32_t *ids,
                                         size_t m) {
    if (wr->bits) {
        for (size_t j = 0; j < m; j++) pairs_writer_push(wr, qid, ids[j]);
    } else if (wr->pool32) {
        pairs_push_run(wr, false, qid, NULL, NULL, ids, NULL, m);
    } else {
        pairs_push_run(wr, true, qid, NULL, NULL, ids, NULL, m);
    }
}

/* A published pair's place in the sorted list, as one integer. */
static inline uint64_t pairs_order_key(broadphase_pair p) {
    return (uint64_t)p.a << 32 | p.b;
}

/* The first index in [0, n) of sorted `list` whose key is not below k. */
static inline size_t pairs_lower_bound(const broadphase_pair *list, size_t n, uint64_t k) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (pairs_order_key(list[mid]) < k)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}
