/* The static field (see statics.h): built from the world's static objects when they change, and
 * queried by the objects in the trees during every search. */
#include "bits.h"
#include "statics.h"

#include "parallel.h"
#include "query.h"
#include "tree.h"
#include "world.h"

#include <math.h>

enum {
    STATICS_CHUNK = 16384, /* ids per chunk of the build's passes */
    QUERY_SLOTS = 256,     /* tree objects per query job */
    STACK_MAX = 8 * STATICS_LEVELS_MAX,
    BATCH_QUERIES = 16,  /* queries that walk the pyramid together */
    FRONTIER_MAX = 1024, /* blocks of one level a batch may visit, else one query at a time */
};

static size_t level_bytes(size_t blocks) {
    return blocks * STATICS_BLOCK_FLOATS * sizeof(float);
}

/* Room for `count` entries in a level, sentinels (min +inf, max -inf) from count on. One block
 * more than needed, so that a kernel reading past a block's last column stays inside. */
static bool level_reserve(broadphase_world *w, statics_level *l, size_t count) {
    size_t blocks = (count + 7) / 8 + 1;
    if (blocks > l->capacity) {
        float *b = heap_alloc(&w->heap, level_bytes(blocks));
        if (!b) return false;
        heap_free(&w->heap, l->blocks, level_bytes(l->capacity));
        l->blocks = b;
        l->capacity = blocks;
    }
    for (size_t i = count; i < blocks * 8; i++) {
        float *at = l->blocks + i / 8 * STATICS_BLOCK_FLOATS + i % 8;
        for (int k = 0; k < 3; k++) {
            at[8 * k] = INFINITY;
            at[24 + 8 * k] = -INFINITY;
        }
    }
    l->count = count;
    return true;
}

/* Entry i's min on axis k is at(l, i)[8k], its max at(l, i)[24 + 8k]. */
static inline float *entry_at(const statics_level *l, size_t i) {
    return l->blocks + i / 8 * STATICS_BLOCK_FLOATS + i % 8;
}

typedef struct build_ctx {
    broadphase_world *w;
    statics_field *f;
    const uint8_t *flags; /* by id: the field's objects */
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
        if (w->kind[i] == OBJECT_FREE || !c->flags[i]) continue;
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
        return bits_spread3(cell[0]) | bits_spread3(cell[1]) << 1 | bits_spread3(cell[2]) << 2;
    return bits_spread2(cell[0]) | bits_spread2(cell[1]) << 1;
}

static void write_keys(size_t chunk, int worker, void *p) {
    (void)worker;
    build_ctx *c = p;
    const broadphase_world *w = c->w;
    size_t begin = chunk * STATICS_CHUNK, end = begin + STATICS_CHUNK;
    if (end > w->id_end) end = w->id_end;
    size_t at = c->f->chunk_count[chunk];
    for (size_t i = begin; i < end; i++) {
        if (w->kind[i] == OBJECT_FREE || !c->flags[i]) continue;
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
        float *at = entry_at(l, i);
        for (int k = 0; k < 3; k++) {
            at[8 * k] = c->w->box[id].lo[k];
            at[24 + 8 * k] = c->w->box[id].hi[k];
        }
    }
}

static void fill_bounds(size_t begin, size_t end, int worker, void *p) {
    (void)worker;
    build_ctx *c = p;
    const statics_level *below = &c->f->level[c->level - 1];
    statics_level *l = &c->f->level[c->level];
    for (size_t i = begin; i < end; i++) {
        /* Entry i bounds block i below, whose sentinels change nothing. */
        const float *block = below->blocks + i * STATICS_BLOCK_FLOATS;
        float *at = entry_at(l, i);
        for (int k = 0; k < 3; k++) {
            float lo = INFINITY, hi = -INFINITY;
            for (int j = 0; j < 8; j++) {
                lo = block[8 * k + j] < lo ? block[8 * k + j] : lo;
                hi = block[24 + 8 * k + j] > hi ? block[24 + 8 * k + j] : hi;
            }
            at[8 * k] = lo;
            at[24 + 8 * k] = hi;
        }
    }
}

bool statics_field_build(broadphase_world *w, statics_field *f, const uint8_t *flags,
                         size_t count) {
    f->levels = 0;
    if (count == 0) return true;
    size_t chunks = (w->id_end + STATICS_CHUNK - 1) / STATICS_CHUNK;
    if (!heap_grow(&w->heap, (void **)&f->chunk_count, &f->chunk_capacity, chunks + 1, sizeof(size_t),
                    0) ||
        !heap_grow(&w->heap, (void **)&f->chunk_bounds, &f->chunk_bounds_capacity, 6 * (chunks + 1),
                    sizeof(float), 0) ||
        !heap_grow(&w->heap, (void **)&f->ids, &f->ids_capacity, count + 1, sizeof(uint32_t), 0))
        return false;
    /* The sort's memory is kept, so that statics moving every step allocate nothing either. */
    size_t hist = threads_radix_scratch_size(w->workers);
    size_t sort_bytes = count * 2 * (sizeof(uint64_t) + sizeof(uint32_t)) + hist;
    if (!heap_grow(&w->heap, &f->sort, &f->sort_bytes, sort_bytes, 1, 0)) return false;
    build_ctx c = {.w = w, .f = f, .flags = flags, .keys = f->sort};
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
    f->rebuilds += ok;
    return ok;
}

bool statics_update(broadphase_world *w) {
    if (!w->statics_dirty) return true;
    if (!statics_field_build(w, &w->statics, w->is_static, w->static_count)) return false;
    w->statics_dirty = false;
    return true;
}

bool statics_active(const broadphase_world *w) {
    return w->static_count > 0 && w->statics.levels > 0;
}

/* ---- queries ------------------------------------------------------------------------------ */

typedef struct query_ctx {
    broadphase_world *w;
    const statics_field *f;
    const uint8_t *mask; /* by id: the field's entries still in it; NULL: all */
    tree_workers *ws;
    simd_boxes query;
    const uint32_t *query_id;
    size_t count;
    statics_cache *cache; /* the field's; slots [0, cached) use it */
    size_t cached;
    size_t valid; /* cache entries made before this step */
} query_ctx;

/* A block of 8 entries as the box kernel sees it. */
static inline simd_boxes block_view(const float *block) {
    return (simd_boxes){{block, block + 8, block + 16}, {block + 24, block + 32, block + 40}};
}

/* Query s's box, from the tree's slots. */
static inline void query_box(const query_ctx *c, size_t s, float qmin[3], float qmax[3]) {
    for (int a = 0; a < 3; a++) {
        qmin[a] = c->query.min[a][s];
        qmax[a] = c->query.max[a][s];
    }
}

static inline void fetch_block(const float *block) {
    __builtin_prefetch(block);
    __builtin_prefetch(block + 16);
    __builtin_prefetch(block + 32);
}

/* The pairs of object qid with the field's entries ids[k->hits[0, h)], of those still in the
 * field, through the exact filter. */
static void emit(const query_ctx *c, tree_worker *k, pairs_writer *wr, uint32_t qid,
                 const uint32_t *ids, size_t h) {
    if (c->mask) {
        size_t kept = 0;
        for (size_t j = 0; j < h; j++) {
            k->hits[kept] = k->hits[j];
            kept += c->mask[ids[k->hits[j]]];
        }
        h = kept;
    }
    tree_emit(c->w, k, wr, qid, ids, h);
}

/* A depth-first walk of the field for the box (lo, hi): each block of level 0 that it meets is
 * handed to visit with the lanes that overlap (block index, hit lanes, count); the walk stops
 * when visit returns false. Blocks are visited in order, each fetched ahead. */
typedef bool walk_visit(void *ctx, size_t block, const uint32_t *hit, size_t n);

static inline void walk_one(const statics_field *f, const float lo[3], const float hi[3], int dims,
                            walk_visit *visit, void *ctx) {
    uint32_t stack[STACK_MAX];
    uint8_t stack_level[STACK_MAX];
    uint32_t hit[8 + SIMD_PAD];
    size_t top = 0;
    stack[top] = 0;
    stack_level[top++] = (uint8_t)(f->levels - 1);
    while (top > 0) {
        top--;
        int l = stack_level[top];
        size_t b = stack[top];
        simd_boxes view = block_view(f->level[l].blocks + b * STATICS_BLOCK_FLOATS);
        size_t n = simd_box_vs_boxes(lo, hi, &view, 0, 8, dims, hit);
        if (l == 0) {
            if (n && !visit(ctx, b, hit, n)) return;
            continue;
        }
        /* Pushed last first, so that blocks are visited in order. */
        const float *below = f->level[l - 1].blocks;
        for (size_t j = n; j > 0; j--) {
            size_t child = 8 * b + hit[j - 1];
            fetch_block(below + child * STATICS_BLOCK_FLOATS);
            stack[top] = (uint32_t)child;
            stack_level[top++] = (uint8_t)(l - 1);
        }
    }
}

typedef struct one_query {
    const query_ctx *c;
    tree_worker *k;
    pairs_writer *wr;
    uint32_t qid;
    size_t h;
} one_query;

static bool one_query_visit(void *p, size_t block, const uint32_t *hit, size_t n) {
    one_query *q = p;
    if (q->h + 8 > q->k->hit_capacity) {
        emit(q->c, q->k, q->wr, q->qid, q->c->f->ids, q->h);
        q->h = 0;
    }
    for (size_t j = 0; j < n; j++) q->k->hits[q->h++] = (uint32_t)(8 * block) + hit[j];
    return true;
}

/* Every entry whose box overlaps object qid's (qmin, qmax), through the exact filter. */
static void query_one(const query_ctx *c, tree_worker *k, pairs_writer *wr, uint32_t qid,
                      const float qmin[3], const float qmax[3]) {
    one_query q = {c, k, wr, qid, 0};
    walk_one(c->f, qmin, qmax, c->w->config.dimensions, one_query_visit, &q);
    if (q.h) emit(c, k, wr, qid, c->f->ids, q.h);
}

/* A batch of queries walks the pyramid level by level together: each level's blocks, for all
 * of the batch, are found (and fetched ahead) before any of them is read, so the misses of a
 * level overlap instead of following one another as a depth-first walk's do. */
typedef struct frontier_entry {
    uint32_t block;
    uint32_t query; /* index in the batch */
} frontier_entry;

/* The batch's walk down to the objects, for queries (qmin[q], qmax[q]), q < n: the frontier
 * ends in at[*cur][0, *count) (entries of level 0, in query order) with each one's hits in
 * masks. False when a level's blocks overflow the frontier. */
static bool walk_batch(const query_ctx *c, const float (*qmin)[3], const float (*qmax)[3], size_t n,
                       frontier_entry (*at)[FRONTIER_MAX], int *cur_out, size_t *count_out,
                       uint8_t *masks) {
    const statics_field *f = c->f;
    int dims = c->w->config.dimensions;
    for (size_t q = 0; q < n; q++) at[0][q] = (frontier_entry){0, (uint32_t)q};
    size_t count = n;
    int cur = 0;
    /* Each level's blocks are tested in one kernel call (a frontier entry is a block and a
     * query index, the pair the kernel reads), then the children of their hits listed. */
    for (int l = f->levels - 1; l > 0; l--) {
        const float *below = f->level[l - 1].blocks;
        simd_blocks_vs_boxes(f->level[l].blocks, &at[cur][0].block, count, qmin, qmax, dims, masks);
        size_t next = 0;
        for (size_t e = 0; e < count; e++) {
            unsigned m = masks[e];
            frontier_entry fe = at[cur][e];
            if (next + 8 > FRONTIER_MAX) return false;
            for (; m; m &= m - 1) {
                uint32_t child = 8 * fe.block + (uint32_t)__builtin_ctz(m);
                fetch_block(below + (size_t)child * STATICS_BLOCK_FLOATS);
                at[1 - cur][next++] = (frontier_entry){child, fe.query};
            }
        }
        cur = 1 - cur;
        count = next;
    }
    simd_blocks_vs_boxes(f->level[0].blocks, &at[cur][0].block, count, qmin, qmax, dims, masks);
    *cur_out = cur;
    *count_out = count;
    return true;
}

/* The batch [first, first + n) of slots; false when a level's blocks overflow the frontier (the
 * batch then goes one query at a time). Nothing is emitted before the last level. */
static bool query_batch(const query_ctx *c, tree_worker *k, pairs_writer *wr, size_t first,
                        size_t n) {
    const statics_field *f = c->f;
    frontier_entry at[2][FRONTIER_MAX];
    float qmin[BATCH_QUERIES][3], qmax[BATCH_QUERIES][3];
    for (size_t q = 0; q < n; q++) query_box(c, first + q, qmin[q], qmax[q]);
    uint8_t masks[FRONTIER_MAX];
    int cur;
    size_t count;
    if (!walk_batch(c, (const float(*)[3])qmin, (const float(*)[3])qmax, n, at, &cur, &count,
                    masks))
        return false;
    /* The ids of the hits are a random read each: all of them asked for before the first. */
    for (size_t e = 0; e < count; e++)
        if (masks[e]) __builtin_prefetch(f->ids + 8 * (size_t)at[cur][e].block);
    /* The frontier is in query order, so each query's hits are emitted together. */
    size_t h = 0;
    uint32_t q = UINT32_MAX;
    for (size_t e = 0; e < count; e++) {
        frontier_entry fe = at[cur][e];
        if (fe.query != q || h + 8 > k->hit_capacity) {
            if (h) emit(c, k, wr, c->query_id[first + q], c->f->ids, h);
            h = 0;
            q = fe.query;
        }
        for (unsigned m = masks[e]; m; m &= m - 1)
            k->hits[h++] = 8 * fe.block + (uint32_t)__builtin_ctz(m);
    }
    if (h) emit(c, k, wr, c->query_id[first + q], c->f->ids, h);
    return true;
}

/* ---- the per-object cache (statics.h) -------------------------------------------------------- */

enum {
    CACHE_OVER = UINT32_MAX,
    CACHE_SLOTS_MAX = 32768, /* tree objects (the first, in tree order) that keep an entry */
};

/* The fat box's margin on every axis, as a fraction of the box's largest side. */
#define CACHE_MARGIN 0.5

typedef struct collected {
    uint32_t *out;
    size_t count, max; /* count > max: too many */
} collected;

static bool collect_visit(void *p, size_t block, const uint32_t *hit, size_t n) {
    collected *o = p;
    if (o->count + n > o->max) {
        o->count = o->max + 1;
        return false;
    }
    for (size_t j = 0; j < n; j++) o->out[o->count++] = (uint32_t)(8 * block) + hit[j];
    return true;
}

/* Every level-0 position whose box overlaps (lo, hi), into out[0, max); max + 1 when there are
 * more. */
static size_t collect(const statics_field *f, const float lo[3], const float hi[3], int dims,
                      uint32_t *out, size_t max) {
    collected o = {out, 0, max};
    walk_one(f, lo, hi, dims, collect_visit, &o);
    return o.count;
}

static bool cache_inside(const statics_cache_entry *e, const float qmin[3], const float qmax[3],
                         int dims) {
    bool in = true;
    for (int k = 0; k < dims; k++) in &= (qmin[k] >= e->fat[k]) & (qmax[k] <= e->fat[3 + k]);
    return in;
}

/* Entry e's fat box, around the box (qmin, qmax), for the field as it is. Kept finite (see
 * bits_round_down): an object longer than FLT_MAX would otherwise get a fat box from -inf to
 * +inf, which the fill's walk finds overlapping the sentinels of the pyramid's blocks. */
static void cache_fat(const query_ctx *c, statics_cache_entry *e, const float qmin[3],
                      const float qmax[3]) {
    int dims = c->w->config.dimensions;
    double side = 0.0;
    for (int k = 0; k < dims; k++) {
        double s = (double)qmax[k] - (double)qmin[k];
        side = s > side ? s : side;
    }
    double m = side * CACHE_MARGIN;
    for (int k = 0; k < 3; k++) {
        e->fat[k] = k < dims ? bits_round_down((double)qmin[k] - m) : qmin[k];
        e->fat[3 + k] = k < dims ? bits_round_up((double)qmax[k] + m) : qmax[k];
    }
    e->generation = c->f->rebuilds;
}

/* Entry e keeps the field's entries at positions pos[0, n), their boxes copied; n above the
 * room: too many, the object walks the field. */
static void cache_store(const query_ctx *c, statics_cache_entry *e, const uint32_t *pos, size_t n) {
    if (n > STATICS_CACHE_ENTRIES) {
        e->count = CACHE_OVER;
        return;
    }
    e->count = (uint32_t)n;
    const statics_level *l0 = &c->f->level[0];
    for (size_t j = 0; j < STATICS_CACHE_ENTRIES; j++) {
        float *at = &e->block[j / 8][j % 8];
        const float *from = j < n ? entry_at(l0, pos[j]) : NULL;
        for (int k = 0; k < 3; k++) {
            at[8 * k] = from ? from[8 * k] : INFINITY;
            at[24 + 8 * k] = from ? from[24 + 8 * k] : -INFINITY;
        }
        e->id[j] = j < n ? c->f->ids[pos[j]] : 0;
    }
}

/* Fills entries e[0, n) (n <= BATCH_QUERIES), their fat boxes set: the field's entries that
 * overlap each, found by one batched walk (or, when its frontier overflows, one walk each). */
static void cache_fill(const query_ctx *c, statics_cache_entry **e, size_t n) {
    int dims = c->w->config.dimensions;
    frontier_entry at[2][FRONTIER_MAX];
    float qmin[BATCH_QUERIES][3], qmax[BATCH_QUERIES][3];
    for (size_t q = 0; q < n; q++) {
        memcpy(qmin[q], e[q]->fat, sizeof qmin[q]);
        memcpy(qmax[q], e[q]->fat + 3, sizeof qmax[q]);
    }
    uint8_t masks[FRONTIER_MAX];
    int cur;
    size_t count;
    uint32_t pos[BATCH_QUERIES][STATICS_CACHE_ENTRIES];
    if (!walk_batch(c, (const float(*)[3])qmin, (const float(*)[3])qmax, n, at, &cur, &count,
                    masks)) {
        for (size_t q = 0; q < n; q++)
            cache_store(c, e[q], pos[q],
                        collect(c->f, qmin[q], qmax[q], dims, pos[q], STATICS_CACHE_ENTRIES));
        return;
    }
    size_t got[BATCH_QUERIES] = {0};
    for (size_t i = 0; i < count; i++) {
        frontier_entry fe = at[cur][i];
        for (unsigned m = masks[i]; m; m &= m - 1) {
            size_t q = fe.query;
            if (got[q] < STATICS_CACHE_ENTRIES)
                pos[q][got[q]] = 8 * fe.block + (uint32_t)__builtin_ctz(m);
            got[q]++;
        }
    }
    for (size_t q = 0; q < n; q++) cache_store(c, e[q], pos[q], got[q]);
}

static bool cache_hit(const query_ctx *c, uint32_t id) {
    uint32_t e = c->cache->of[id];
    return e < c->valid && c->cache->entry[e].owner == id;
}

/* First pass: how many entries each job makes (its objects without one). */
static void cache_count_job(size_t job, int worker, void *p) {
    (void)worker;
    const query_ctx *c = p;
    size_t begin = job * QUERY_SLOTS,
           end = begin + QUERY_SLOTS < c->cached ? begin + QUERY_SLOTS : c->cached;
    size_t n = 0;
    for (size_t s = begin; s < end; s++) {
        uint32_t id = c->query_id[s];
        bool hit = cache_hit(c, id);
        c->cache->slot_entry[s] = hit ? c->cache->of[id] : UINT32_MAX;
        n += !hit;
    }
    c->cache->job_new[job] = n;
}

/* Readies the cache for this step's search: the entries of objects that have none are
 * numbered, job by job, so that each job makes its own; when the entries made would double
 * those in use, all start again. False (the search then walks) on out of memory. */
static bool cache_prepare(broadphase_world *w, statics_field *f, query_ctx *c) {
    statics_cache *x = &f->cache;
    size_t slots = c->count < CACHE_SLOTS_MAX ? c->count : CACHE_SLOTS_MAX;
    size_t jobs = (slots + QUERY_SLOTS - 1) / QUERY_SLOTS;
    size_t had = x->of_capacity;
    if (!heap_grow(&w->heap, (void **)&x->of, &x->of_capacity, w->id_end, sizeof(uint32_t), had) ||
        !heap_grow(&w->heap, (void **)&x->job_new, &x->job_capacity, jobs + 1, sizeof(size_t), 0) ||
        !heap_grow(&w->heap, (void **)&x->slot_entry, &x->slot_capacity, slots + 1, sizeof(uint32_t), 0))
        return false;
    for (size_t i = had; i < x->of_capacity; i++) x->of[i] = UINT32_MAX;
    c->cache = x;
    c->cached = slots;
    c->valid = x->count;
    threads_for_chunks(w->workers, jobs, cache_count_job, c);
    size_t made = 0;
    for (size_t j = 0; j < jobs; j++) made += x->job_new[j];
    if (x->count + made > 2 * slots + 1024) {
        c->valid = x->count = 0;
        for (size_t s = 0; s < slots; s++) x->slot_entry[s] = UINT32_MAX;
        for (size_t j = 0; j < jobs; j++)
            x->job_new[j] =
                slots - j * QUERY_SLOTS < QUERY_SLOTS ? slots - j * QUERY_SLOTS : QUERY_SLOTS;
        made = slots;
    }
    if (!heap_grow(&w->heap, (void **)&x->entry, &x->capacity, x->count + made,
                    sizeof(statics_cache_entry), x->count)) {
        c->cached = 0;
        return false;
    }
    size_t at = x->count;
    for (size_t j = 0; j < jobs; j++) {
        size_t n = x->job_new[j];
        x->job_new[j] = at;
        at += n;
    }
    x->count = at;
    return true;
}

/* Slots [begin, end) of job `job` through the cache: each object's entry, made or filled again
 * when it has none, the field was rebuilt or its box left the fat box, then its box tested
 * against the entry's (or, for an object with too many, the field walked). */
static void cached_range(const query_ctx *c, tree_worker *k, pairs_writer *wr, size_t job,
                         size_t begin, size_t end) {
    statics_cache *x = c->cache;
    int dims = c->w->config.dimensions;
    size_t made = x->job_new[job];
    enum { AHEAD = 4 };
    /* First each object's entry, those to fill gathered into batches that walk the field
     * together; then the tests. */
    statics_cache_entry *entry[QUERY_SLOTS], *fill[BATCH_QUERIES];
    size_t fills = 0;
    for (size_t s = begin; s < end; s++) {
        if (s + AHEAD < end && x->slot_entry[s + AHEAD] != UINT32_MAX)
            __builtin_prefetch(&x->entry[x->slot_entry[s + AHEAD]]);
        uint32_t id = c->query_id[s];
        float qmin[3], qmax[3];
        query_box(c, s, qmin, qmax);
        statics_cache_entry *e;
        bool stale = true;
        if (x->slot_entry[s] != UINT32_MAX) {
            e = &x->entry[x->slot_entry[s]];
            stale = e->generation != c->f->rebuilds || !cache_inside(e, qmin, qmax, dims);
        } else {
            x->of[id] = (uint32_t)made;
            e = &x->entry[made++];
            e->owner = id;
        }
        entry[s - begin] = e;
        if (!stale) continue;
        cache_fat(c, e, qmin, qmax);
        fill[fills++] = e;
        if (fills == BATCH_QUERIES) {
            cache_fill(c, fill, fills);
            fills = 0;
        }
    }
    if (fills) cache_fill(c, fill, fills);
    uint32_t hit[8 + SIMD_PAD];
    for (size_t s = begin; s < end; s++) {
        if (s + AHEAD < end) {
            const char *ahead = (const char *)entry[s + AHEAD - begin];
            for (size_t at = 0; at < 5 * 64; at += 64) __builtin_prefetch(ahead + at);
        }
        statics_cache_entry *e = entry[s - begin];
        uint32_t id = c->query_id[s];
        float qmin[3], qmax[3];
        query_box(c, s, qmin, qmax);
        if (e->count == CACHE_OVER) {
            query_one(c, k, wr, id, qmin, qmax);
            continue;
        }
        size_t h = 0;
        for (size_t b = 0; 8 * b < e->count; b++) {
            simd_boxes view = block_view(e->block[b]);
            size_t n = simd_box_vs_boxes(qmin, qmax, &view, 0, 8, dims, hit);
            for (size_t j = 0; j < n; j++) k->hits[h++] = (uint32_t)(8 * b) + hit[j];
        }
        if (h) emit(c, k, wr, id, e->id, h);
    }
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
    if (begin < c->cached) {
        /* (cached is a multiple of the job's size or the count: the job is cached whole) */
        cached_range(c, k, &wr, job, begin, end);
        return;
    }
    for (size_t first = begin; first < end; first += BATCH_QUERIES) {
        size_t n = end - first < BATCH_QUERIES ? end - first : BATCH_QUERIES;
        if (query_batch(c, k, &wr, first, n)) continue;
        for (size_t s = first; s < first + n; s++) {
            float qmin[3], qmax[3];
            query_box(c, s, qmin, qmax);
            query_one(c, k, &wr, c->query_id[s], qmin, qmax);
        }
    }
}

static void field_search(broadphase_world *w, tree_workers *ws, const tree_slots *slots,
                         statics_field *f, const uint8_t *mask) {
    if (f->levels == 0 || slots->count == 0) return;
    query_ctx c = {.w = w,
                   .f = f,
                   .mask = mask,
                   .ws = ws,
                   .query = tree_slots_boxes(slots),
                   .query_id = slots->sid[slots->cur],
                   .count = slots->count};
    cache_prepare(w, f, &c);
    threads_for_chunks(w->workers, (slots->count + QUERY_SLOTS - 1) / QUERY_SLOTS, query_job, &c);
}

void statics_search(broadphase_world *w, tree_workers *ws, const tree_slots *slots) {
    if (statics_active(w)) field_search(w, ws, slots, &w->statics, NULL);
    if (w->rest.count > 0) field_search(w, ws, slots, &w->rest.field, w->rest.at_rest);
}

void statics_field_release(broadphase_world *w, statics_field *f) {
    for (int l = 0; l < STATICS_LEVELS_MAX; l++)
        heap_free(&w->heap, f->level[l].blocks, level_bytes(f->level[l].capacity));
    heap_free(&w->heap, f->ids, f->ids_capacity * sizeof(uint32_t));
    heap_free(&w->heap, f->chunk_count, f->chunk_capacity * sizeof(size_t));
    heap_free(&w->heap, f->chunk_bounds, f->chunk_bounds_capacity * sizeof(float));
    heap_free(&w->heap, f->sort, f->sort_bytes);
    heap_free(&w->heap, f->cache.entry, f->cache.capacity * sizeof(statics_cache_entry));
    heap_free(&w->heap, f->cache.of, f->cache.of_capacity * sizeof(uint32_t));
    heap_free(&w->heap, f->cache.job_new, f->cache.job_capacity * sizeof(size_t));
    heap_free(&w->heap, f->cache.slot_entry, f->cache.slot_capacity * sizeof(uint32_t));
    memset(f, 0, sizeof *f);
}

void statics_release(broadphase_world *w) {
    statics_field_release(w, &w->statics);
}

/* ---- the queries' view (query.h) ----------------------------------------------------------- */

/* The root's bounds: the union of the top level's entries (at most 8), so the objects' own
 * boxes when the field fits in one block (a root with no entry below it to take the union of).
 * The blocks' sentinels (min +inf, max -inf) change nothing. */
static void top_bounds(const statics_field *f, float lo[3], float hi[3]) {
    const statics_level *top = &f->level[f->levels - 1];
    for (int k = 0; k < 3; k++) {
        lo[k] = INFINITY;
        hi[k] = -INFINITY;
        for (size_t j = 0; j < top->count; j++) {
            const float *e = entry_at(top, j);
            lo[k] = e[8 * k] < lo[k] ? e[8 * k] : lo[k];
            hi[k] = e[24 + 8 * k] > hi[k] ? e[24 + 8 * k] : hi[k];
        }
    }
}

/* Node handles: level << 32 | entry; level == levels is a root above the top level's entries.
 * Entry i of level l bounds the objects at positions [i * 8^l, (i + 1) * 8^l) of level 0. */
static void query_node_of(const void *p, uint64_t handle, query_node *out) {
    const statics_field *f = p;
    int l = (int)(handle >> 32);
    size_t i = (uint32_t)handle, n0 = f->level[0].count;
    out->children = 0;
    out->sweep = 3;
    out->own_begin = out->own_end = 0;
    out->sub_id = out->own_id = f->ids;
    uint64_t span = 1;
    for (int j = 0; j < l && span < n0; j++) span *= 8;
    if (l == f->levels) {
        top_bounds(f, out->lo, out->hi);
        i = 0;
    } else {
        const float *e = entry_at(&f->level[l], i);
        for (int k = 0; k < 3; k++) {
            out->lo[k] = e[8 * k];
            out->hi[k] = e[24 + 8 * k];
        }
    }
    memcpy(out->own_lo, out->lo, sizeof out->lo);
    memcpy(out->own_hi, out->hi, sizeof out->hi);
    out->sub_begin = (uint32_t)(i * span < n0 ? i * span : n0);
    out->sub_end = (uint32_t)((i + 1) * span < n0 ? (i + 1) * span : n0);
    if (l == 1) {
        /* its entries are objects: one block of level 0 */
        out->own = block_view(f->level[0].blocks + i * STATICS_BLOCK_FLOATS);
        out->own_id = f->ids + 8 * i;
        out->own_end = (uint32_t)(n0 - 8 * i < 8 ? n0 - 8 * i : 8);
        return;
    }
    const statics_level *below = &f->level[l - 1];
    for (size_t j = 8 * i; j < 8 * i + 8 && j < below->count; j++)
        out->child[out->children++] = (uint64_t)(l - 1) << 32 | j;
}

static void bounds_of(const void *p, uint64_t handle, float lo[3], float hi[3]) {
    const statics_field *f = p;
    int l = (int)(handle >> 32);
    if (l == f->levels) {
        top_bounds(f, lo, hi);
        return;
    }
    const float *e = entry_at(&f->level[l], (uint32_t)handle);
    for (int k = 0; k < 3; k++) {
        lo[k] = e[8 * k];
        hi[k] = e[24 + 8 * k];
    }
}

bool statics_query_view(const statics_field *f, query_member member, query_view *out) {
    if (f->levels == 0 || f->level[0].count == 0) return false;
    *out = (query_view){f, (uint64_t)f->levels << 32, query_node_of, member, bounds_of, NULL, NULL};
    return true;
}
