/* Pair output: a block pool filled by the jobs, compacted, radix-sorted by (a, b) and published
 * as the world's pair array. Nothing here allocates once the pool and arrays have reached the
 * size the scene needs. */
#include "pairs.h"

#include "parallel.h"
#include "world.h"

#include <string.h>

static int bits_for(uint32_t id_end) {
    int bits = 1;
    while (bits < 32 && ((uint64_t)1 << bits) < (uint64_t)id_end) bits++;
    return bits;
}

bool pairs_prepare(broadphase_world *w, bool grow) {
    pairs_state *ps = &w->pairs;
    /* Room for the last step's pairs plus a quarter, plus two partly filled blocks per worker. */
    size_t blocks = (ps->count + ps->count / 4) / PAIRS_BLOCK + 2 * (size_t)w->workers + 4;
    if (grow) blocks = 2 * ps->pool_blocks > blocks ? 2 * ps->pool_blocks : blocks;
    if (blocks > ps->pool_blocks) {
        if (!world_grow(w, (void **)&ps->pool, &ps->pool_capacity, blocks * PAIRS_BLOCK,
                        sizeof(uint64_t), 0) ||
            !world_grow(w, (void **)&ps->block_fill, &ps->fill_capacity, blocks, sizeof(uint32_t),
                        0) ||
            !world_grow(w, (void **)&ps->block_offset, &ps->offset_capacity, blocks + 1,
                        sizeof(size_t), 0))
            return false;
        size_t usable = ps->pool_capacity / PAIRS_BLOCK;
        if (usable > ps->fill_capacity) usable = ps->fill_capacity;
        if (usable > ps->offset_capacity - 1) usable = ps->offset_capacity - 1;
        ps->pool_blocks = usable;
    }
    if (!world_grow(w, (void **)&ps->lanes, &ps->lane_capacity, (size_t)w->workers,
                    sizeof(pairs_lane), 0))
        return false;
    for (int i = 0; i < w->workers; i++)
        ps->lanes[i].open = (pairs_writer){ps, NULL, 0, 0, 0, 0, i, false};
    size_t hist = threads_radix_scratch_size(w->workers);
    if (!world_grow(w, &ps->hist, &ps->hist_bytes, hist, 1, 0)) return false;
    memset(ps->block_fill, 0, ps->pool_blocks * sizeof(uint32_t));
    ps->next_block = 0;
    ps->overflow = false;
    ps->shift = bits_for(w->id_end);
    return true;
}

pairs_writer pairs_writer_begin(pairs_state *ps, int worker) {
    pairs_writer wr = ps->lanes[worker].open;
    wr.shift = ps->shift;
    return wr;
}

void pairs_writer_end(pairs_writer *wr) {
    wr->ps->lanes[wr->worker].open = *wr;
}

static void close_run(pairs_writer *wr) {
    if (wr->keys) wr->ps->block_fill[wr->block] = (uint32_t)wr->count;
    wr->keys = NULL;
    wr->count = wr->capacity = 0;
}

bool pairs_writer_grow(pairs_writer *wr, size_t more) {
    if (wr->failed) return false;
    close_run(wr);
    pairs_state *ps = wr->ps;
    size_t want = (more + PAIRS_BLOCK - 1) / PAIRS_BLOCK;
    if (want == 0) want = 1;
    size_t first = __atomic_fetch_add(&ps->next_block, want, __ATOMIC_RELAXED);
    if (first + want > ps->pool_blocks || more > UINT32_MAX) {
        __atomic_store_n(&ps->overflow, true, __ATOMIC_RELAXED);
        wr->failed = true;
        return false;
    }
    wr->keys = ps->pool + first * PAIRS_BLOCK;
    wr->block = first;
    wr->count = 0;
    wr->capacity = want * PAIRS_BLOCK;
    return true;
}

static void gather_blocks(size_t begin, size_t end, int worker, void *p) {
    (void)worker;
    pairs_state *ps = p;
    for (size_t b = begin; b < end; b++)
        if (ps->block_fill[b])
            memcpy(ps->keys + ps->block_offset[b], ps->pool + b * PAIRS_BLOCK,
                   ps->block_fill[b] * sizeof(uint64_t));
}

static void unpack_range(size_t begin, size_t end, int worker, void *p) {
    (void)worker;
    pairs_state *ps = p;
    uint64_t mask = ((uint64_t)1 << ps->shift) - 1;
    for (size_t i = begin; i < end; i++) {
        uint64_t k = ps->keys[i];
        ps->out[i].a = (uint32_t)(k >> ps->shift);
        ps->out[i].b = (uint32_t)(k & mask);
    }
}

pairs_result pairs_finish(broadphase_world *w) {
    pairs_state *ps = &w->pairs;
    if (ps->overflow) return PAIRS_RETRY;
    for (int i = 0; i < w->workers; i++) close_run(&ps->lanes[i].open);
    size_t used = ps->next_block < ps->pool_blocks ? ps->next_block : ps->pool_blocks;
    size_t total = 0;
    for (size_t b = 0; b < used; b++) {
        ps->block_offset[b] = total;
        total += ps->block_fill[b];
    }
    /* Grown with a quarter to spare, so that a pair count that wobbles from step to step does
     * not reallocate. */
    size_t room = total + total / 4 + 64;
    if (total > ps->key_capacity) {
        size_t cap = ps->key_capacity, cap2 = ps->key_capacity;
        if (!world_grow(w, (void **)&ps->keys, &cap, room, sizeof(uint64_t), 0) ||
            !world_grow(w, (void **)&ps->tmp, &cap2, room, sizeof(uint64_t), 0))
            return PAIRS_OUT_OF_MEMORY;
        ps->key_capacity = cap < cap2 ? cap : cap2;
    }
    if (total > ps->out_capacity &&
        !world_grow(w, (void **)&ps->out, &ps->out_capacity, room, sizeof(broadphase_pair), 0))
        return PAIRS_OUT_OF_MEMORY;
    threads_for_ranges(w->workers, used, 64, gather_blocks, ps);
    threads_radix_sort_u64(w->workers, ps->keys, ps->tmp, total, 2 * ps->shift, ps->hist);
    threads_for_ranges(w->workers, total, 1 << 16, unpack_range, ps);
    ps->count = total;
    return PAIRS_DONE;
}

void pairs_release(broadphase_world *w) {
    pairs_state *ps = &w->pairs;
    world_free(w, ps->pool, ps->pool_capacity * sizeof(uint64_t));
    world_free(w, ps->block_fill, ps->fill_capacity * sizeof(uint32_t));
    world_free(w, ps->block_offset, ps->offset_capacity * sizeof(size_t));
    world_free(w, ps->keys, ps->key_capacity * sizeof(uint64_t));
    world_free(w, ps->tmp, ps->key_capacity * sizeof(uint64_t));
    world_free(w, ps->out, ps->out_capacity * sizeof(broadphase_pair));
    world_free(w, ps->hist, ps->hist_bytes);
    world_free(w, ps->lanes, ps->lane_capacity * sizeof(pairs_lane));
    memset(ps, 0, sizeof *ps);
}
