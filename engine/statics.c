/* The static field (see statics.h): built from the world's static objects when they change, and
 * queried by the objects in the trees during every search. */
#include "statics.h"

#include "parallel.h"
#include "tree.h"
#include "world.h"

#include <math.h>

enum {
    STATICS_CHUNK = 16384, /* ids per chunk of the build's passes */
    QUERY_SLOTS = 256,     /* tree objects per query job */
    STACK_MAX = 8 * STATICS_LEVELS_MAX,
};

static size_t level_stride(size_t count) {
    return ((count + 7) / 8 * 8 + SIMD_PAD + 15) / 16 * 16;
}

/* Room for `count` entries in a level, sentinels from count on. */
static bool level_reserve(broadphase_world *w, statics_level *l, size_t count) {
    size_t stride = level_stride(count);
    if (stride > l->capacity) {
        float *block = world_alloc(w, stride * 6 * sizeof(float));
        if (!block) return false;
        world_free(w, l->block, l->capacity * 6 * sizeof(float));
        l->block = block;
        l->capacity = stride;
    }
    float *f = l->block;
    for (int k = 0; k < 3; k++) {
        l->min[k] = f + l->capacity * (size_t)k;
        l->max[k] = f + l->capacity * (size_t)(3 + k);
        for (size_t i = count; i < stride; i++) {
            l->min[k][i] = INFINITY;
            l->max[k][i] = -INFINITY;
        }
    }
    l->count = count;
    return true;
}

static bool is_static_object(const broadphase_world *w, size_t i) {
    return w->kind[i] != OBJECT_FREE && w->is_static[i];
}

typedef struct build_ctx {
    broadphase_world *w;
    statics_field *f;
    uint64_t *keys;
    uint32_t *vals;
    double origin[3], scale[3];
    int level; /* pyramid pass: the level being filled from the one below */
} build_ctx;

static void box_centre(const world_box *b, float c[3]) {
    for (int k = 0; k < 3; k++) c[k] = b->lo[k] * 0.5f + b->hi[k] * 0.5f;
}

static void count_statics(size_t chunk, int worker, void *p) {
    (void)worker;
    build_ctx *c = p;
    const broadphase_world *w = c->w;
    size_t begin = chunk * STATICS_CHUNK, end = begin + STATICS_CHUNK;
    if (end > w->id_end) end = w->id_end;
    float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    size_t n = 0;
    for (size_t i = begin; i < end; i++) {
        if (!is_static_object(w, i)) continue;
        float m[3];
        box_centre(&w->box[i], m);
        for (int k = 0; k < 3; k++) {
            lo[k] = m[k] < lo[k] ? m[k] : lo[k];
            hi[k] = m[k] > hi[k] ? m[k] : hi[k];
        }
        n++;
    }
    c->f->chunk_count[chunk] = n;
    for (int k = 0; k < 3; k++) {
        c->f->chunk_bounds[chunk * 6 + (size_t)k] = lo[k];
        c->f->chunk_bounds[chunk * 6 + 3 + (size_t)k] = hi[k];
    }
}

/* A centre's Morton key on a grid of 2^21 (2D: 2^31) cells per axis over the centres' extent. */
static uint64_t centre_key(const build_ctx *c, const float m[3], int dims) {
    uint64_t cell[3] = {0, 0, 0};
    double top = dims == 3 ? 2097151.0 : 2147483647.0;
    for (int k = 0; k < dims; k++) {
        double u = ((double)m[k] - c->origin[k]) * c->scale[k];
        cell[k] = (uint64_t)(u < 0.0 ? 0.0 : u > top ? top : u);
    }
    if (dims == 3)
        return tree_spread3(cell[0]) | tree_spread3(cell[1]) << 1 | tree_spread3(cell[2]) << 2;
    return tree_spread2(cell[0]) | tree_spread2(cell[1]) << 1;
}

static void write_keys(size_t chunk, int worker, void *p) {
    (void)worker;
    build_ctx *c = p;
    const broadphase_world *w = c->w;
    size_t begin = chunk * STATICS_CHUNK, end = begin + STATICS_CHUNK;
    if (end > w->id_end) end = w->id_end;
    size_t at = c->f->chunk_count[chunk];
    for (size_t i = begin; i < end; i++) {
        if (!is_static_object(w, i)) continue;
        float m[3];
        box_centre(&w->box[i], m);
        c->keys[at] = centre_key(c, m, w->config.dimensions);
        c->vals[at++] = (uint32_t)i;
    }
}

static void fill_objects(size_t begin, size_t end, int worker, void *p) {
    (void)worker;
    build_ctx *c = p;
    statics_level *l = &c->f->level[0];
    for (size_t i = begin; i < end; i++) {
        uint32_t id = c->vals[i];
        c->f->ids[i] = id;
        for (int k = 0; k < 3; k++) {
            l->min[k][i] = c->w->box[id].lo[k];
            l->max[k][i] = c->w->box[id].hi[k];
        }
    }
}

static void fill_bounds(size_t begin, size_t end, int worker, void *p) {
    (void)worker;
    build_ctx *c = p;
    const statics_level *below = &c->f->level[c->level - 1];
    statics_level *l = &c->f->level[c->level];
    for (size_t i = begin; i < end; i++) {
        size_t first = 8 * i, last = first + 8 < below->count ? first + 8 : below->count;
        for (int k = 0; k < 3; k++) {
            float lo = INFINITY, hi = -INFINITY;
            for (size_t j = first; j < last; j++) {
                lo = below->min[k][j] < lo ? below->min[k][j] : lo;
                hi = below->max[k][j] > hi ? below->max[k][j] : hi;
            }
            l->min[k][i] = lo;
            l->max[k][i] = hi;
        }
    }
}

static bool build(broadphase_world *w, statics_field *f, size_t count) {
    size_t chunks = (w->id_end + STATICS_CHUNK - 1) / STATICS_CHUNK;
    if (!world_grow(w, (void **)&f->chunk_count, &f->chunk_capacity, chunks + 1, sizeof(size_t),
                    0) ||
        !world_grow(w, (void **)&f->chunk_bounds, &f->chunk_bounds_capacity, 6 * (chunks + 1),
                    sizeof(float), 0) ||
        !world_grow(w, (void **)&f->ids, &f->ids_capacity, count + 1, sizeof(uint32_t), 0))
        return false;
    /* The sort's memory is kept, so that statics moving every step allocate nothing either. */
    size_t hist = threads_radix_scratch_size(w->workers);
    size_t sort_bytes = count * 2 * (sizeof(uint64_t) + sizeof(uint32_t)) + hist;
    if (!world_grow(w, &f->sort, &f->sort_bytes, sort_bytes, 1, 0)) return false;
    build_ctx c = {.w = w, .f = f, .keys = f->sort};
    uint64_t *keys_tmp = c.keys + count;
    c.vals = (uint32_t *)(keys_tmp + count);
    uint32_t *vals_tmp = c.vals + count;
    void *hist_scratch = vals_tmp + count;
    threads_for_chunks(w->workers, chunks, count_statics, &c);
    float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (size_t ch = 0; ch < chunks; ch++) {
        for (int k = 0; k < 3; k++) {
            float a = f->chunk_bounds[ch * 6 + (size_t)k],
                  z = f->chunk_bounds[ch * 6 + 3 + (size_t)k];
            lo[k] = a < lo[k] ? a : lo[k];
            hi[k] = z > hi[k] ? z : hi[k];
        }
    }
    int dims = w->config.dimensions;
    double cells = dims == 3 ? 2097152.0 : 2147483648.0;
    for (int k = 0; k < 3; k++) {
        double extent = (double)hi[k] - (double)lo[k];
        c.origin[k] = lo[k];
        c.scale[k] = extent > 0.0 && isfinite(extent) ? cells / extent : 0.0;
    }
    threads_exclusive_scan(w->workers, f->chunk_count, chunks);
    threads_for_chunks(w->workers, chunks, write_keys, &c);
    threads_radix_sort_pairs(w->workers, c.keys, c.vals, keys_tmp, vals_tmp, count,
                             dims == 3 ? 63 : 62, hist_scratch);
    bool ok = level_reserve(w, &f->level[0], count);
    if (ok) threads_for_ranges(w->workers, count, 4096, fill_objects, &c);
    int levels = 1;
    while (ok && f->level[levels - 1].count > 8) {
        c.level = levels;
        size_t above = (f->level[levels - 1].count + 7) / 8;
        ok = level_reserve(w, &f->level[levels], above);
        if (ok) threads_for_ranges(w->workers, above, 1024, fill_bounds, &c);
        levels++;
    }
    f->levels = ok ? levels : 0;
    return ok;
}

bool statics_update(broadphase_world *w) {
    if (!w->statics_dirty) return true;
    statics_field *f = &w->statics;
    f->levels = 0;
    if (w->static_count > 0 && !build(w, f, w->static_count)) return false;
    f->rebuilds += w->static_count > 0;
    w->statics_dirty = false;
    return true;
}

bool statics_active(const broadphase_world *w) {
    return w->static_count > 0 && w->statics.levels > 0;
}

/* ---- queries ------------------------------------------------------------------------------ */

typedef struct query_ctx {
    broadphase_world *w;
    tree_workers *ws;
    simd_boxes query;
    const uint32_t *query_id;
    size_t count;
    simd_boxes level[STATICS_LEVELS_MAX];
} query_ctx;

/* Every static whose box overlaps object qid's (qmin, qmax), through the exact filter. */
static void query_one(const query_ctx *c, tree_worker *k, pairs_writer *wr, uint32_t qid,
                      const float qmin[3], const float qmax[3]) {
    const statics_field *f = &c->w->statics;
    int dims = c->w->config.dimensions;
    uint32_t stack[STACK_MAX];
    uint8_t stack_level[STACK_MAX];
    uint32_t hit[8 + SIMD_PAD];
    size_t top = 0, h = 0;
    stack[top] = 0;
    stack_level[top++] = (uint8_t)(f->levels - 1);
    while (top > 0) {
        top--;
        int l = stack_level[top];
        size_t first = (size_t)stack[top] * 8, last = first + 8;
        if (last > f->level[l].count) last = f->level[l].count;
        size_t n = simd_box_vs_boxes(qmin, qmax, &c->level[l], first, last, dims, hit);
        if (l == 0) {
            if (h + 8 > k->hit_capacity) {
                tree_emit(c->w, k, wr, qid, f->ids, h);
                h = 0;
            }
            memcpy(k->hits + h, hit, n * sizeof(uint32_t));
            h += n;
            continue;
        }
        /* Pushed last first, so that blocks are visited in order. */
        for (size_t j = n; j > 0; j--) {
            stack[top] = hit[j - 1];
            stack_level[top++] = (uint8_t)(l - 1);
        }
    }
    tree_emit(c->w, k, wr, qid, f->ids, h);
}

static void query_job(size_t job, int worker, void *p) {
    const query_ctx *c = p;
    tree_worker *k = &c->ws->at[worker];
    if (!tree_worker_reserve(k, 0, 64, false)) {
        k->failed = true;
        return;
    }
    pairs_writer wr = pairs_writer_begin(&c->w->pairs, worker);
    size_t begin = job * QUERY_SLOTS,
           end = begin + QUERY_SLOTS < c->count ? begin + QUERY_SLOTS : c->count;
    for (size_t s = begin; s < end; s++) {
        float qmin[3], qmax[3];
        for (int a = 0; a < 3; a++) {
            qmin[a] = c->query.min[a][s];
            qmax[a] = c->query.max[a][s];
        }
        query_one(c, k, &wr, c->query_id[s], qmin, qmax);
    }
}

void statics_search(broadphase_world *w, tree_workers *ws, const tree_slots *slots) {
    if (!statics_active(w) || slots->count == 0) return;
    query_ctx c = {.w = w,
                   .ws = ws,
                   .query = tree_slots_boxes(slots),
                   .query_id = slots->sid[slots->cur],
                   .count = slots->count};
    for (int l = 0; l < w->statics.levels; l++) {
        for (int a = 0; a < 3; a++) {
            c.level[l].min[a] = w->statics.level[l].min[a];
            c.level[l].max[a] = w->statics.level[l].max[a];
        }
    }
    threads_for_chunks(w->workers, (slots->count + QUERY_SLOTS - 1) / QUERY_SLOTS, query_job, &c);
}

void statics_release(broadphase_world *w) {
    statics_field *f = &w->statics;
    for (int l = 0; l < STATICS_LEVELS_MAX; l++)
        world_free(w, f->level[l].block, f->level[l].capacity * 6 * sizeof(float));
    world_free(w, f->ids, f->ids_capacity * sizeof(uint32_t));
    world_free(w, f->chunk_count, f->chunk_capacity * sizeof(size_t));
    world_free(w, f->chunk_bounds, f->chunk_bounds_capacity * sizeof(float));
    world_free(w, f->sort, f->sort_bytes);
    memset(f, 0, sizeof *f);
}
