/* Neighbour lists (see neighbours.h). The pairs come sorted by (a, b), so each row's upper part
 * (its partners above it) is one run of the list already. The lower part is the transpose: the
 * pairs sorted by b, stably, which keeps the a of each b ascending; the radix sort does that in
 * parallel, on b's bits only. Every row's start is the sum of where its two runs start, so no
 * prefix sum is needed, and each row is then copied on its own. */
#include "neighbours.h"

#include "parallel.h"

#include <string.h>

enum { POSITION_CHUNK = 1 << 14, ROW_CHUNK = 1 << 12 };

typedef struct make_ctx {
    neighbours_state *n;
    const broadphase_pair *pairs;
    size_t count, rows;
    size_t *lower; /* by row: where its run begins in the transposed list */
} make_ctx;

static void write_keys(size_t begin, size_t end, int worker, void *p) {
    (void)worker;
    make_ctx *c = p;
    for (size_t j = begin; j < end; j++) {
        c->n->keys.data[j] = c->pairs[j].b;
        c->n->values.data[j] = c->pairs[j].a;
    }
}

static size_t row_at(const broadphase_pair *pairs, const uint64_t *keys, size_t j) {
    return pairs ? pairs[j].a : (size_t)keys[j];
}

/* first[r] for every row r whose run begins in positions [begin, end) of a list of `count`
 * entries sorted by row (pairs by a, or keys): where the run begins; a row without a run begins
 * where the next run does, and first[rows] is count. */
static void run_starts(size_t begin, size_t end, size_t count, size_t rows, size_t *first,
                       const broadphase_pair *pairs, const uint64_t *keys) {
    for (size_t j = begin; j < end && j < count; j++) {
        size_t v = row_at(pairs, keys, j), from = j == 0 ? 0 : row_at(pairs, keys, j - 1) + 1;
        for (size_t r = from; r <= v; r++) first[r] = j;
    }
    if (end >= count) {
        size_t from = count == 0 ? 0 : row_at(pairs, keys, count - 1) + 1;
        for (size_t r = from; r <= rows; r++) first[r] = count;
    }
}

static void lower_starts(size_t begin, size_t end, int worker, void *p) {
    (void)worker;
    make_ctx *c = p;
    run_starts(begin, end, c->count, c->rows, c->lower, NULL, c->n->keys.data);
}

static void upper_starts(size_t begin, size_t end, int worker, void *p) {
    (void)worker;
    make_ctx *c = p;
    run_starts(begin, end, c->count, c->rows, c->n->offsets.data, c->pairs, NULL);
}

/* Rows [begin, end): the start (upper run start + lower run start), then the partners. */
static void fill_rows(size_t begin, size_t end, int worker, void *p) {
    (void)worker;
    make_ctx *c = p;
    size_t *off = c->n->offsets.data;
    uint32_t *ids = c->n->ids.data;
    for (size_t r = begin; r < end; r++) {
        size_t up = off[r], up_end = off[r + 1];
        size_t lo = c->lower[r], lo_end = c->lower[r + 1];
        size_t at = up + lo;
        memcpy(ids + at, c->n->values.data + lo, (lo_end - lo) * sizeof *ids);
        at += lo_end - lo;
        for (size_t j = up; j < up_end; j++) ids[at++] = c->pairs[j].b;
    }
}

/* The starts were upper-run starts while the rows were filled; now they become row starts. */
static void finish_offsets(size_t begin, size_t end, int worker, void *p) {
    (void)worker;
    make_ctx *c = p;
    for (size_t r = begin; r < end; r++) c->n->offsets.data[r] += c->lower[r];
}

bool neighbours_make(neighbours_state *n, const broadphase_pair *pairs, size_t count, size_t rows,
                     heap *h, int workers) {
    n->valid = false;
    size_t hist = threads_radix_scratch_size(workers);
    if (!heap_array_reserve(h, &n->offsets, rows + 1, 0) ||
        !heap_array_reserve(h, &n->ids, 2 * count + 1, 0) ||
        !heap_array_reserve(h, &n->keys, count + 1, 0) ||
        !heap_array_reserve(h, &n->keys_tmp, count + 1, 0) ||
        !heap_array_reserve(h, &n->values, count + 1, 0) ||
        !heap_array_reserve(h, &n->values_tmp, count + 1, 0) ||
        !heap_array_reserve(h, &n->lower, rows + 1, 0))
        return false;
    if (!heap_grow(h, &n->hist, &n->hist_bytes, hist, 1, 0)) return false; /* the sort's */
    make_ctx c = {n, pairs, count, rows, n->lower.data};
    threads_for_ranges(workers, count, POSITION_CHUNK, write_keys, &c);
    int bits = 1;
    while (bits < 32 && (rows >> bits) != 0) bits++;
    threads_radix_sort_pairs(workers, n->keys.data, n->values.data, n->keys_tmp.data,
                             n->values_tmp.data, count, bits, n->hist);
    threads_for_ranges(workers, count ? count : 1, POSITION_CHUNK, lower_starts, &c);
    threads_for_ranges(workers, count ? count : 1, POSITION_CHUNK, upper_starts, &c);
    threads_for_ranges(workers, rows, ROW_CHUNK, fill_rows, &c);
    threads_for_ranges(workers, rows + 1, ROW_CHUNK, finish_offsets, &c);
    n->rows = rows;
    n->valid = true;
    return true;
}

void neighbours_release(neighbours_state *n, heap *h) {
    heap_array_release(h, &n->offsets);
    heap_array_release(h, &n->ids);
    heap_array_release(h, &n->keys);
    heap_array_release(h, &n->keys_tmp);
    heap_array_release(h, &n->values);
    heap_array_release(h, &n->values_tmp);
    heap_array_release(h, &n->lower);
    heap_free(h, n->hist, n->hist_bytes);
    n->hist = NULL;
    n->hist_bytes = 0;
    n->rows = 0;
    n->valid = false;
}
