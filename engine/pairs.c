/* Pair output: per-worker buffers filled by jobs, concatenated in job order, radix-sorted by
 * (a, b) and published as the world's pair array. Nothing here allocates once the buffers have
 * reached their steady-state size. */
#include "pairs.h"

#include "world.h"

#include <string.h>

static int bits_for(uint32_t id_end) {
    int bits = 1;
    while (bits < 32 && ((uint64_t)1 << bits) < (uint64_t)id_end) bits++;
    return bits;
}

bool pairs_prepare(broadphase_world *w, size_t job_count) {
    pairs_state *ps = &w->pairs;
    if (!threads_scratch_reserve(&ps->buffers, w->workers)) return false;
    if (ps->fill_count < w->workers) {
        size_t old = (size_t)ps->fill_count, cap = old;
        if (!world_grow(w, (void **)&ps->fill, &cap, (size_t)w->workers, sizeof(pairs_fill), old))
            return false;
        memset(ps->fill + old, 0, (cap - old) * sizeof(pairs_fill));
        ps->fill_count = (int)cap;
    }
    if (!world_grow(w, (void **)&ps->jobs, &ps->job_capacity, job_count, sizeof(pairs_job), 0))
        return false;
    size_t hist = threads_radix_scratch_size(w->workers);
    if (!world_grow(w, &ps->hist, &ps->hist_bytes, hist, 1, 0)) return false;
    for (int i = 0; i < ps->fill_count; i++) {
        ps->fill[i].count = 0;
        ps->fill[i].failed = false;
    }
    ps->shift = bits_for(w->id_end);
    return true;
}

pairs_writer pairs_job_begin(pairs_state *ps, int worker) {
    pairs_writer wr;
    wr.buffers = &ps->buffers;
    wr.worker = worker;
    wr.shift = ps->shift;
    wr.start = wr.count = ps->fill[worker].count;
    wr.failed = false;
    wr.keys = ps->fill[worker].keys;
    wr.capacity = ps->fill[worker].capacity;
    return wr;
}

bool pairs_writer_grow(pairs_writer *wr, size_t more) {
    if (wr->failed) return false;
    size_t need = wr->count + more;
    size_t cap = wr->capacity * 2;
    if (cap < need) cap = need;
    if (cap < 1024) cap = 1024;
    uint64_t *keys = threads_scratch_get(wr->buffers, wr->worker, cap * sizeof(uint64_t));
    if (!keys) {
        wr->failed = true;
        return false;
    }
    wr->keys = keys;
    wr->capacity = cap;
    return true;
}

void pairs_job_end(pairs_state *ps, size_t job, pairs_writer *wr) {
    ps->jobs[job].worker = (uint32_t)wr->worker;
    ps->jobs[job].begin = wr->start;
    ps->jobs[job].count = wr->failed ? 0 : wr->count - wr->start;
    pairs_fill *f = &ps->fill[wr->worker];
    f->count = wr->failed ? wr->start : wr->count;
    f->keys = wr->keys;
    f->capacity = wr->capacity;
    if (wr->failed) f->failed = true;
}

typedef struct gather_ctx {
    pairs_state *ps;
    const size_t *offsets;
} gather_ctx;

static void gather_job(size_t job, int worker, void *p) {
    (void)worker;
    gather_ctx *ctx = p;
    const pairs_job *j = &ctx->ps->jobs[job];
    if (j->count == 0) return;
    const uint64_t *src = ctx->ps->fill[j->worker].keys;
    memcpy(ctx->ps->keys + ctx->offsets[job], src + j->begin, j->count * sizeof(uint64_t));
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

bool pairs_finish(broadphase_world *w, size_t job_count) {
    pairs_state *ps = &w->pairs;
    for (int i = 0; i < w->workers; i++)
        if (ps->fill[i].failed) return false;
    /* The jobs' offsets in the concatenation live in the head of tmp until the sort needs it. */
    size_t total = 0;
    for (size_t j = 0; j < job_count; j++) total += ps->jobs[j].count;
    size_t need = total > job_count ? total : job_count;
    if (need > ps->key_capacity) {
        size_t cap = ps->key_capacity;
        size_t cap2 = ps->key_capacity;
        if (!world_grow(w, (void **)&ps->keys, &cap, need, sizeof(uint64_t), 0)) return false;
        if (!world_grow(w, (void **)&ps->tmp, &cap2, need, sizeof(uint64_t), 0)) return false;
        ps->key_capacity = cap < cap2 ? cap : cap2;
    }
    if (total > ps->out_capacity &&
        !world_grow(w, (void **)&ps->out, &ps->out_capacity, total, sizeof(broadphase_pair), 0))
        return false;
    size_t *offsets = (size_t *)ps->tmp;
    size_t at = 0;
    for (size_t j = 0; j < job_count; j++) {
        offsets[j] = at;
        at += ps->jobs[j].count;
    }
    gather_ctx ctx = {ps, offsets};
    threads_for_chunks(w->workers, job_count, gather_job, &ctx);
    threads_radix_sort_u64(w->workers, ps->keys, ps->tmp, total, 2 * ps->shift, ps->hist);
    threads_for_ranges(w->workers, total, 1 << 16, unpack_range, ps);
    ps->count = total;
    return true;
}

void pairs_release(broadphase_world *w) {
    pairs_state *ps = &w->pairs;
    threads_scratch_free(&ps->buffers);
    world_free(w, ps->fill, (size_t)ps->fill_count * sizeof(pairs_fill));
    world_free(w, ps->jobs, ps->job_capacity * sizeof(pairs_job));
    world_free(w, ps->keys, ps->key_capacity * sizeof(uint64_t));
    world_free(w, ps->tmp, ps->key_capacity * sizeof(uint64_t));
    world_free(w, ps->out, ps->out_capacity * sizeof(broadphase_pair));
    world_free(w, ps->hist, ps->hist_bytes);
    memset(ps, 0, sizeof *ps);
}
