/* Pair output: keys emitted into buckets by their top bits during the search, then each bucket
 * sorted by one worker in cache and written to the published array. Nothing here allocates once
 * the pool and arrays have reached the size the scene needs. */
#include "bits.h"
#include "pairs.h"

#include "parallel.h"
#include "heap.h"

#include <assert.h>
#include <string.h>

enum {
    BUCKET_TARGET = 1 << 16, /* keys per bucket the bucket count aims at */
    BUCKET_MIN = 1 << 12,    /* fewer keys than this: no more buckets for load balance */
    BLOCK_BITS_MIN = 7,      /* blocks of 128 to 4096 keys */
    BLOCK_BITS_MAX = 12,
    DIGIT_MAX = 14,       /* bits per radix pass within a bucket, at most */
    PASSES_MAX = 8,       /* 64 bits in passes of 8 */
    COUNT_BINS = 3 << 14, /* a worker's digit counters, all passes together */
    KEY_COST = 4,         /* a key's move in a pass against a counter's clear and sum */
    SMALL_BIG = 1 << 16,  /* buckets up to this many keys are always one worker's */
    MATRIX_MIN = 1 << 12, /* pairs expected at least, for the matrix mode */
    MATRIX_ROWS = 64,     /* matrix rows per chunk of the output */
};

static int bits_for(uint32_t id_end) {
    int bits = 1;
    while (bits < 32 && ((uint64_t)1 << bits) < (uint64_t)id_end) bits++;
    return bits;
}

static bool matrix_prepare(pairs_state *ps, heap *h, int worker_count, size_t rows,
                           size_t row_words) {
    size_t workers = (size_t)worker_count, words = workers * rows * row_words;
    size_t chunks = (rows + MATRIX_ROWS - 1) / MATRIX_ROWS;
    size_t old = ps->bits_capacity;
    if (!heap_grow(h, (void **)&ps->bits, &ps->bits_capacity, words, sizeof(uint64_t), 0) ||
        !heap_grow(h, (void **)&ps->chunk_count, &ps->chunk_capacity, chunks + 1, sizeof(size_t),
                   0))
        return false;
    if (ps->bits_capacity != old) ps->matrix_zero = 0; /* new memory */
    if (ps->matrix_zero < words)
        memset(ps->bits + ps->matrix_zero, 0, (words - ps->matrix_zero) * sizeof(uint64_t));
    /* Until the output has read (and cleared) them, the matrices are not known to be zero. */
    ps->matrix_zero = 0;
    ps->rows = rows;
    ps->row_words = row_words;
    ps->matrix_words = words;
    ps->workers = (int)workers;
    ps->next_block = 0;
    ps->overflow = false;
    return true;
}

bool pairs_prepare(pairs_state *ps, heap *h, int worker_count, size_t id_end, bool grow) {
    size_t workers = (size_t)worker_count;
    ps->shift = bits_for(id_end);
    /* Expect the last step's pairs; after an overflow, what the overflowing search claimed. */
    size_t expect = ps->last_total;
    size_t claimed = ps->next_block << ps->block_bits;
    if (grow && claimed > expect) expect = claimed;
    /* Before the first search there is no last step to go by: expect a pair per id, what most
     * scenes have, rather than nothing, which made every first step search twice (the first
     * pass overflowing a pool sized for no pairs): 145 of the 280 ms of moving 1e6's first step
     * on 2 threads went to the two passes. */
    if (!ps->laid_out && expect < id_end) expect = id_end;
    /* The matrix mode, when reading all the workers' matrices costs fewer words than there are
     * pairs. */
    size_t rows = id_end, row_words = (rows + 63) / 64;
    ps->matrix = expect >= MATRIX_MIN && workers * rows * row_words <= expect;
    if (ps->matrix) return matrix_prepare(ps, h, worker_count, rows, row_words);
    /* The layout is chosen again only when the expected count has doubled or halved since it
     * was last chosen (or the workers changed), so that a count that wobbles keeps it, and with
     * it the arrays' sizes. */
    if (!ps->laid_out || expect > 2 * ps->layout_expect || 2 * expect < ps->layout_expect ||
        ps->workers != (int)workers || ps->layout_shift != ps->shift) {
        /* Buckets of about BUCKET_TARGET keys, and four per worker while they stay large enough
         * to be worth a worker's visit. */
        int max_bits = ps->shift < PAIRS_BUCKET_BITS ? ps->shift : PAIRS_BUCKET_BITS;
        int bits = 0;
        while (bits < max_bits && expect >> bits > BUCKET_TARGET) bits++;
        while (bits < max_bits && ((size_t)1 << bits) < 4 * workers &&
               expect >> (bits + 1) >= BUCKET_MIN)
            bits++;
        /* Blocks as long as possible (the search writes each as one stream) while the partly
         * filled ones, one per worker and bucket, stay within half the pairs. */
        int block_bits = BLOCK_BITS_MAX;
        while (block_bits > BLOCK_BITS_MIN && (workers << bits << (block_bits + 1)) > expect)
            block_bits--;
        ps->bucket_bits = bits;
        ps->block_bits = block_bits;
        ps->layout_expect = expect;
        ps->layout_shift = ps->shift;
        ps->laid_out = true;
    }
    int bits = ps->bucket_bits, block_bits = ps->block_bits;
    size_t buckets = (size_t)1 << bits;
    ps->narrow = 2 * ps->shift - bits <= 32;
    /* Room for the expected pairs plus a quarter, plus a partly filled block per worker and
     * bucket, plus a sink block per worker. */
    size_t blocks = ((expect + expect / 4) >> block_bits) + workers * buckets + 4;
    /* Each worker's cursors on cache lines of their own: they are written on every push. */
    size_t row = (buckets + 7) & ~(size_t)7;
    ps->cursor_row = row;
    if (!heap_grow(h, (void **)&ps->pool, &ps->pool_capacity, (blocks + workers) << block_bits,
                   sizeof(uint64_t), 0) ||
        !heap_grow(h, (void **)&ps->block_bucket, &ps->block_bucket_capacity, blocks + workers,
                   sizeof(uint32_t), 0) ||
        !heap_grow(h, (void **)&ps->block_fill, &ps->block_fill_capacity, blocks + workers,
                   sizeof(uint32_t), 0) ||
        !heap_grow(h, (void **)&ps->block_list, &ps->block_list_capacity, blocks + workers,
                   sizeof(uint32_t), 0) ||
        !heap_grow(h, (void **)&ps->cursors, &ps->cursor_capacity, workers * row, sizeof(size_t),
                   0))
        return false;
    size_t usable = ps->pool_capacity >> block_bits;
    if (usable > ps->block_bucket_capacity) usable = ps->block_bucket_capacity;
    if (usable > ps->block_fill_capacity) usable = ps->block_fill_capacity;
    if (usable > ps->block_list_capacity) usable = ps->block_list_capacity;
    ps->pool_blocks = usable - workers;
    ps->workers = (int)workers;
    memset(ps->cursors, 0, workers * row * sizeof(size_t));
    ps->next_block = 0;
    ps->overflow = false;
    return true;
}

pairs_writer pairs_writer_begin(pairs_state *ps, int worker) {
    size_t w = (size_t)worker;
    if (ps->matrix)
        return (pairs_writer){.ps = ps,
                              .bits = ps->bits + w * ps->rows * ps->row_words,
                              .row_words = ps->row_words,
                              .worker = worker};
    return (pairs_writer){.ps = ps,
                          .pool = ps->pool,
                          .pool32 = ps->narrow ? (uint32_t *)(void *)ps->pool : NULL,
                          .cursor = ps->cursors + w * ps->cursor_row,
                          .block_mask = ((size_t)1 << ps->block_bits) - 1,
                          .shift = ps->shift,
                          .bucket_shift = 2 * ps->shift - ps->bucket_bits - 1,
                          .worker = worker};
}

size_t pairs_claim(pairs_state *ps, int worker, size_t pos, size_t bucket) {
    if (pos != 0) ps->block_fill[(pos >> ps->block_bits) - 1] = (uint32_t)1 << ps->block_bits;
    size_t block = __atomic_fetch_add(&ps->next_block, 1, __ATOMIC_RELAXED);
    if (block >= ps->pool_blocks) {
        /* Out of pool: keep searching into this worker's sink, so that next_block ends as the
         * count of blocks the step needs, and search again. */
        __atomic_store_n(&ps->overflow, true, __ATOMIC_RELAXED);
        block = ps->pool_blocks + (size_t)worker;
    }
    ps->block_bucket[block] = (uint32_t)bucket;
    ps->block_fill[block] = 0;
    return block << ps->block_bits;
}

/* ---- sorting the buckets ----------------------------------------------------------------------
 */

enum { COUNT_WORDS = COUNT_BINS / 2 }; /* a worker's counters, in keys */

/* The number of radix passes for m keys of `rest` bits, digits spread evenly: the least cost of
 * moving every key once per pass plus clearing and summing every digit's counter, with digits
 * of at most DIGIT_MAX bits whose counters fit in COUNT_BINS. Two passes of 14 bits beat three
 * of 10 for the 47,000-key buckets of mixed 1e5 (output 6.55 -> 4.95 ms on 2 threads), and three
 * of 12 beat four of 9 at moving 1e6 (2.99 -> 2.39); a bucket of a few thousand keys keeps
 * narrower digits, whose counters cost less than its keys. */
static unsigned radix_passes(size_t m, unsigned rest) {
    unsigned best = 0;
    size_t best_cost = SIZE_MAX;
    for (unsigned p = (rest + DIGIT_MAX - 1) / DIGIT_MAX; p <= PASSES_MAX && p <= rest; p++) {
        size_t bins = (size_t)1 << ((rest + p - 1) / p);
        if (p * bins > COUNT_BINS) continue;
        size_t cost = KEY_COST * m * p + 2 * p * bins;
        if (cost < best_cost) {
            best_cost = cost;
            best = p;
        }
    }
    assert(best > 0); /* some p fits: 8 passes of at most 8 bits need 2,048 counters */
    return best;
}

static void unpack(broadphase_pair *out, const uint64_t *keys, size_t n, int shift) {
    uint64_t mask = ((uint64_t)1 << shift) - 1;
    for (size_t i = 0; i < n; i++) {
        out[i].a = (uint32_t)(keys[i] >> shift);
        out[i].b = (uint32_t)(keys[i] & mask);
    }
}

#if defined(__GNUC__)
#define PAIRS_INLINE static inline __attribute__((always_inline))
#else
#define PAIRS_INLINE static inline
#endif

/* A narrow pool's bucket: the bits its keys lack (prefix), and the mask of those they keep. A
 * wide pool's keys are whole: prefix 0. */
static void bucket_parts(const pairs_state *ps, size_t bucket, uint64_t *prefix, uint64_t *below) {
    unsigned rest = (unsigned)(2 * ps->shift - ps->bucket_bits);
    *prefix = ps->narrow && rest < 64 ? (uint64_t)bucket << rest : 0;
    *below = rest < 64 ? ((uint64_t)1 << rest) - 1 : ~(uint64_t)0;
}

/* Key i of a block whose first key is at pool index `at`, as a run holds it: whole, or in a
 * narrow pool the bits below the bucket's (prefix | this is the key). */
PAIRS_INLINE uint64_t pool_entry(const pairs_state *ps, size_t at, size_t i, uint64_t below,
                                 bool narrow) {
    return narrow ? ((const uint32_t *)(const void *)ps->pool)[at + i] & below : ps->pool[at + i];
}

/* Entry i of a run: a whole key, or in a narrow pool's bucket the bits below the bucket's. The
 * `narrow` arguments below are literals, so each of these folds to one load or store. */
PAIRS_INLINE uint64_t run_get(const void *run, size_t i, bool narrow) {
    return narrow ? ((const uint32_t *)run)[i] : ((const uint64_t *)run)[i];
}

PAIRS_INLINE void run_put(void *run, size_t i, uint64_t key, bool narrow) {
    if (narrow)
        ((uint32_t *)run)[i] = (uint32_t)key;
    else
        ((uint64_t *)run)[i] = key;
}

/* A bucket's keys copied from its blocks to dst as runs hold them (below: bucket_parts) while
 * every digit is counted. */
PAIRS_INLINE void gather_count(const pairs_state *ps, size_t bucket, uint64_t below, void *dst,
                               uint32_t *count, size_t bins, unsigned width, unsigned passes,
                               bool narrow) {
    uint64_t digit = ((uint64_t)1 << width) - 1;
    size_t n = 0;
    for (size_t e = ps->bucket_first[bucket]; e < ps->bucket_first[bucket + 1]; e++) {
        uint32_t block = ps->block_list[e], fill = ps->block_fill[block];
        size_t at = (size_t)block << ps->block_bits;
        for (uint32_t i = 0; i < fill; i++) {
            uint64_t key = pool_entry(ps, at, i, below, narrow);
            run_put(dst, n++, key, narrow);
            for (unsigned q = 0; q < passes; q++)
                count[q * bins + ((key >> (width * q)) & digit)]++;
        }
    }
}

/* One bucket, on one worker: its keys gathered from its blocks while every digit below the
 * bucket's bits is counted, then LSD radix passes between the worker's two scratch runs,
 * skipping digits that all keys share, then the pairs written out in order. In a narrow pool the
 * runs hold 32-bit keys, the bits below the bucket's: half the bytes moved by every pass, and runs
 * that stay in cache twice as long. */
PAIRS_INLINE void sort_keys(pairs_state *ps, size_t bucket, int worker, bool narrow) {
    size_t m = ps->bucket_count[bucket];
    uint64_t *base = ps->scratch + (size_t)worker * ps->scratch_stride;
    uint32_t *count = (uint32_t *)(void *)base;
    void *src = base + COUNT_WORDS, *dst = base + COUNT_WORDS + ps->scratch_run;
    unsigned rest = (unsigned)(2 * ps->shift - ps->bucket_bits); /* bits below the bucket's */
    unsigned passes = radix_passes(m, rest);
    unsigned width = (rest + passes - 1) / passes;
    size_t bins = (size_t)1 << width;
    uint64_t digit = bins - 1, prefix, below;
    bucket_parts(ps, bucket, &prefix, &below);
    memset(count, 0, passes * bins * sizeof count[0]);
    /* The common digit counts get loops of their own, unrolled by the compiler. */
    if (passes == 2)
        gather_count(ps, bucket, below, src, count, bins, width, 2, narrow);
    else if (passes == 3)
        gather_count(ps, bucket, below, src, count, bins, width, 3, narrow);
    else
        gather_count(ps, bucket, below, src, count, bins, width, passes, narrow);
    unsigned live[PASSES_MAX], nlive = 0;
    uint64_t first = run_get(src, 0, narrow);
    for (unsigned q = 0; q < passes; q++)
        if (count[q * bins + ((first >> (width * q)) & digit)] != m) live[nlive++] = q;
    for (unsigned l = 0; l < nlive; l++) {
        unsigned at = width * live[l];
        uint32_t *c = count + live[l] * bins, sum = 0;
        for (size_t d = 0; d < bins; d++) {
            uint32_t k = c[d];
            c[d] = sum;
            sum += k;
        }
        for (size_t i = 0; i < m; i++) {
            uint64_t key = run_get(src, i, narrow);
            run_put(dst, c[(key >> at) & digit]++, key, narrow);
        }
        void *t = src;
        src = dst;
        dst = t;
    }
    /* The pairs written in order from the sorted run, rather than scattered into the published
     * array by the last pass: that array is cold, and a scattered store reads its line from
     * memory first (mixed 1e5 1T: output 14.4-14.8 -> 12.6-12.8 ms). */
    broadphase_pair *out = ps->out + ps->bucket_offset[bucket];
    int shift = ps->shift;
    uint64_t low_mask = ((uint64_t)1 << shift) - 1;
    for (size_t i = 0; i < m; i++) {
        uint64_t key = prefix | run_get(src, i, narrow);
        out[i].a = (uint32_t)(key >> shift);
        out[i].b = (uint32_t)(key & low_mask);
    }
}

static void sort_bucket(size_t bucket, int worker, void *p) {
    pairs_state *ps = p;
    size_t m = ps->bucket_count[bucket];
    if (m == 0 || m > ps->big) return;
    if (ps->narrow)
        sort_keys(ps, bucket, worker, true);
    else
        sort_keys(ps, bucket, worker, false);
}

typedef struct big_unpack {
    broadphase_pair *out;
    const uint64_t *keys;
    int shift;
} big_unpack;

static void unpack_range(size_t begin, size_t end, int worker, void *p) {
    (void)worker;
    const big_unpack *u = p;
    unpack(u->out + begin, u->keys + begin, end - begin, u->shift);
}

/* A bucket larger than one worker's share (the first step, a jump in the pair count, or one
 * object overlapping very many): gathered and sorted by all workers with the parallel sort. */
static bool sort_big_bucket(pairs_state *ps, heap *h, size_t bucket) {
    int workers = ps->workers;
    size_t m = ps->bucket_count[bucket];
    if (!heap_grow(h, (void **)&ps->keys, &ps->key_capacity, m, sizeof(uint64_t), 0) ||
        !heap_grow(h, (void **)&ps->tmp, &ps->tmp_capacity, m, sizeof(uint64_t), 0) ||
        !heap_grow(h, &ps->hist, &ps->hist_bytes, threads_radix_scratch_size(workers), 1, 0))
        return false;
    size_t n = 0;
    uint64_t prefix, below;
    bucket_parts(ps, bucket, &prefix, &below);
    for (size_t e = ps->bucket_first[bucket]; e < ps->bucket_first[bucket + 1]; e++) {
        uint32_t block = ps->block_list[e];
        size_t at = (size_t)block << ps->block_bits;
        for (uint32_t i = 0; i < ps->block_fill[block]; i++)
            ps->keys[n++] = prefix | pool_entry(ps, at, i, below, ps->narrow);
    }
    threads_radix_sort_u64(workers, ps->keys, ps->tmp, m, 2 * ps->shift - ps->bucket_bits,
                           ps->hist);
    big_unpack u = {ps->out + ps->bucket_offset[bucket], ps->keys, ps->shift};
    threads_for_ranges(workers, m, 1 << 16, unpack_range, &u);
    return true;
}

/* The blocks grouped by bucket, each bucket's key count and output offset; returns the total
 * and sets *largest. False on out of memory. */
static bool group_blocks(pairs_state *ps, heap *h, size_t *total_out, size_t *largest_out) {
    size_t buckets = (size_t)1 << ps->bucket_bits, workers = (size_t)ps->workers;
    size_t used = ps->next_block, block_keys = (size_t)1 << ps->block_bits;
    /* Each open block's fill. */
    for (size_t i = 0; i < workers * ps->cursor_row; i++) {
        size_t pos = ps->cursors[i];
        if (pos == 0) continue;
        size_t block = (pos - 1) >> ps->block_bits;
        ps->block_fill[block] = (uint32_t)(pos - block * block_keys);
    }
    if (!heap_grow(h, (void **)&ps->bucket_mem, &ps->bucket_mem_capacity, 3 * (buckets + 1),
                   sizeof(size_t), 0))
        return false;
    ps->bucket_first = ps->bucket_mem;
    ps->bucket_count = ps->bucket_first + buckets + 1;
    ps->bucket_offset = ps->bucket_count + buckets + 1;
    memset(ps->bucket_mem, 0, 3 * (buckets + 1) * sizeof(size_t));
    for (size_t block = 0; block < used; block++) {
        ps->bucket_first[ps->block_bucket[block]]++;
        ps->bucket_count[ps->block_bucket[block]] += ps->block_fill[block];
    }
    /* bucket_first[b] = the end of b's blocks in block_list; filled backwards below, after
     * which it is where they begin. */
    size_t blocks_sum = 0, total = 0, largest = 0;
    for (size_t b = 0; b < buckets; b++) {
        blocks_sum += ps->bucket_first[b];
        ps->bucket_first[b] = blocks_sum;
        ps->bucket_offset[b] = total;
        total += ps->bucket_count[b];
        if (ps->bucket_count[b] > largest) largest = ps->bucket_count[b];
    }
    ps->bucket_first[buckets] = blocks_sum;
    for (size_t block = used; block-- > 0;)
        ps->block_list[--ps->bucket_first[ps->block_bucket[block]]] = (uint32_t)block;
    *total_out = total;
    *largest_out = largest;
    return true;
}

/* ---- the matrix mode ------------------------------------------------------------------------ */

typedef struct matrix_ctx {
    pairs_state *ps;
    size_t rows;
} matrix_ctx;

/* Row a's word j, all workers' matrices together; cleared behind when `clear`. */
static uint64_t matrix_word(pairs_state *ps, size_t stride, size_t at, bool clear) {
    uint64_t word = 0;
    for (int k = 0; k < ps->workers; k++) {
        word |= ps->bits[k * stride + at];
        if (clear) ps->bits[k * stride + at] = 0;
    }
    return word;
}

static void matrix_count(size_t chunk, int worker, void *p) {
    (void)worker;
    const matrix_ctx *c = p;
    pairs_state *ps = c->ps;
    size_t stride = c->rows * ps->row_words, end = (chunk + 1) * MATRIX_ROWS, sum = 0;
    if (end > c->rows) end = c->rows;
    for (size_t a = chunk * MATRIX_ROWS; a < end; a++)
        for (size_t j = a >> 6; j < ps->row_words; j++)
            sum += (size_t)bits_popcount64(matrix_word(ps, stride, a * ps->row_words + j, false));
    ps->chunk_count[chunk] = sum;
}

static void matrix_emit(size_t chunk, int worker, void *p) {
    (void)worker;
    const matrix_ctx *c = p;
    pairs_state *ps = c->ps;
    size_t stride = c->rows * ps->row_words, end = (chunk + 1) * MATRIX_ROWS;
    if (end > c->rows) end = c->rows;
    broadphase_pair *out = ps->out + ps->chunk_count[chunk];
    for (size_t a = chunk * MATRIX_ROWS; a < end; a++) {
        for (size_t j = a >> 6; j < ps->row_words; j++) {
            uint64_t word = matrix_word(ps, stride, a * ps->row_words + j, true);
            broadphase_pair pair = {(uint32_t)a, (uint32_t)(j * 64)};
            for (; word; word &= word - 1) {
                pair.b = (uint32_t)(j * 64 + (size_t)__builtin_ctzll(word));
                *out++ = pair;
            }
        }
    }
}

/* Rows counted by chunk, the counts turned into offsets, then every chunk's pairs written in
 * order while the matrices are cleared for the next step. */
static pairs_result matrix_finish(pairs_state *ps, heap *h) {
    matrix_ctx c = {ps, ps->matrix_words / ((size_t)ps->workers * ps->row_words)};
    size_t chunks = (c.rows + MATRIX_ROWS - 1) / MATRIX_ROWS;
    threads_for_chunks(ps->workers, chunks, matrix_count, &c);
    size_t total = threads_exclusive_scan(ps->workers, ps->chunk_count, chunks);
    if ((total > ps->out_capacity || !ps->out) &&
        !heap_grow(h, (void **)&ps->out, &ps->out_capacity, total + total / 4 + 64,
                   sizeof(broadphase_pair), 0))
        return PAIRS_OUT_OF_MEMORY;
    threads_for_chunks(ps->workers, chunks, matrix_emit, &c);
    ps->matrix_zero = ps->matrix_words;
    ps->count = ps->last_total = total;
    return PAIRS_DONE;
}

pairs_result pairs_finish(pairs_state *ps, heap *h) {
    if (ps->matrix) return matrix_finish(ps, h);
    if (ps->overflow) return PAIRS_RETRY;
    size_t total, largest, workers = (size_t)ps->workers;
    if (!group_blocks(ps, h, &total, &largest)) return PAIRS_OUT_OF_MEMORY;
    if ((total > ps->out_capacity || !ps->out) &&
        !heap_grow(h, (void **)&ps->out, &ps->out_capacity, total + total / 4 + 64,
                   sizeof(broadphase_pair), 0))
        return PAIRS_OUT_OF_MEMORY;
    /* A worker sorts buckets up to its share of the pairs in its own scratch, so that all the
     * workers' scratch together stays within twice the pairs. */
    ps->big = total / workers > SMALL_BIG ? total / workers : SMALL_BIG;
    size_t run = ((largest < ps->big ? largest : ps->big) + 7) & ~(size_t)7;
    if (workers * (COUNT_WORDS + 2 * run) > ps->scratch_capacity) {
        run = (run + run / 4 + 7) & ~(size_t)7; /* a quarter to spare, as for out */
        if (!heap_grow(h, (void **)&ps->scratch, &ps->scratch_capacity,
                       workers * (COUNT_WORDS + 2 * run), sizeof(uint64_t), 0))
            return PAIRS_OUT_OF_MEMORY;
    }
    /* Runs as long as the scratch allows, whole cache lines each. */
    ps->scratch_run = (ps->scratch_capacity / workers - COUNT_WORDS) / 2 & ~(size_t)7;
    ps->scratch_stride = COUNT_WORDS + 2 * ps->scratch_run;
    threads_for_chunks(ps->workers, (size_t)1 << ps->bucket_bits, sort_bucket, ps);
    if (largest > ps->big) {
        for (size_t b = 0; b < (size_t)1 << ps->bucket_bits; b++)
            if (ps->bucket_count[b] > ps->big && !sort_big_bucket(ps, h, b))
                return PAIRS_OUT_OF_MEMORY;
    }
    ps->count = ps->last_total = total;
    return PAIRS_DONE;
}

void pairs_release(pairs_state *ps, heap *h) {
    heap_free(h, ps->pool, ps->pool_capacity * sizeof(uint64_t));
    heap_free(h, ps->block_bucket, ps->block_bucket_capacity * sizeof(uint32_t));
    heap_free(h, ps->block_fill, ps->block_fill_capacity * sizeof(uint32_t));
    heap_free(h, ps->cursors, ps->cursor_capacity * sizeof(size_t));
    heap_free(h, ps->block_list, ps->block_list_capacity * sizeof(uint32_t));
    heap_free(h, ps->bucket_mem, ps->bucket_mem_capacity * sizeof(size_t));
    heap_free(h, ps->scratch, ps->scratch_capacity * sizeof(uint64_t));
    heap_free(h, ps->keys, ps->key_capacity * sizeof(uint64_t));
    heap_free(h, ps->tmp, ps->tmp_capacity * sizeof(uint64_t));
    heap_free(h, ps->hist, ps->hist_bytes);
    heap_free(h, ps->out, ps->out_capacity * sizeof(broadphase_pair));
    heap_free(h, ps->prev, ps->prev_capacity * sizeof(broadphase_pair));
    heap_free(h, ps->bits, ps->bits_capacity * sizeof(uint64_t));
    heap_free(h, ps->chunk_count, ps->chunk_capacity * sizeof(size_t));
    memset(ps, 0, sizeof *ps);
}

static void touch_range(size_t begin, size_t end, int worker, void *p) {
    (void)worker;
    memset((broadphase_pair *)p + begin, 0, (end - begin) * sizeof(broadphase_pair));
}

void pairs_reserve_next(pairs_state *ps, heap *h, int workers) {
    if (ps->prev) return; /* (the buffers take turns with the rest's merged list: once only) */
    if (!heap_grow(h, (void **)&ps->prev, &ps->prev_capacity, ps->out_capacity,
                   sizeof(broadphase_pair), 0))
        return;
    /* The next step writes about as many pairs: their pages, touched there, cost that step
     * 8-9 ms at 1e6 objects when the VM had to find the memory (NOTES row 222). */
    size_t n = ps->count < ps->prev_capacity ? ps->count : ps->prev_capacity;
    threads_for_ranges(workers, n, 1 << 16, touch_range, ps->prev);
}

void pairs_keep_previous(pairs_state *ps) {
    broadphase_pair *p = ps->prev;
    size_t capacity = ps->prev_capacity;
    ps->prev = ps->out;
    ps->prev_capacity = ps->out_capacity;
    ps->prev_count = ps->count;
    ps->out = p;
    ps->out_capacity = capacity;
    ps->count = 0;
}
