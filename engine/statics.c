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
    QUERY_SLOTS = 256,  /* tree objects per query job */
    BATCH_QUERIES = 16, /* queries that walk the pyramid together (else one at a time when a
                           level's blocks overflow FIELD_FRONTIER_MAX) */
};

bool statics_field_build(broadphase_world *w, statics_field *f, const uint8_t *flags,
                         size_t count) {
    field_source src = {w->store.box, w->store.kind,        flags,     w->store.id_end,
                        count,        w->config.dimensions, w->workers};
    return field_build(&f->pyramid, &w->heap, &src);
}

bool statics_update(broadphase_world *w) {
    if (!w->statics_dirty) return true;
    if (!statics_field_build(w, &w->statics, w->store.is_static, w->store.static_count))
        return false;
    w->statics_dirty = false;
    return true;
}

bool statics_active(const broadphase_world *w) {
    return w->store.static_count > 0 && w->statics.pyramid.levels > 0;
}

/* ---- queries ------------------------------------------------------------------------------ */

typedef struct query_ctx {
    broadphase_world *w;
    const method_world *view; /* the world as tree_emit sees it */
    const field *f;
    const uint8_t *mask; /* by id: the field's entries still in it; NULL: all */
    tree_workers *ws;
    simd_boxes query;
    const uint32_t *query_id;
    size_t count;
    statics_cache *cache; /* the field's; slots [0, cached) use it */
    size_t cached;
    size_t valid; /* cache entries made before this step */
} query_ctx;

/* Query s's box, from the tree's slots. */
static inline void query_box(const query_ctx *c, size_t s, float qmin[3], float qmax[3]) {
    for (int a = 0; a < 3; a++) {
        qmin[a] = c->query.min[a][s];
        qmax[a] = c->query.max[a][s];
    }
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
    tree_emit(c->view, k, wr, qid, ids, h);
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
    field_walk(c->f, qmin, qmax, c->w->config.dimensions, one_query_visit, &q);
    if (q.h) emit(c, k, wr, qid, c->f->ids, q.h);
}

/* The batch [first, first + n) of slots; false when a level's blocks overflow the frontier (the
 * batch then goes one query at a time). Nothing is emitted before the last level. */
static bool query_batch(const query_ctx *c, tree_worker *k, pairs_writer *wr, size_t first,
                        size_t n) {
    const field *f = c->f;
    field_frontier at[2][FIELD_FRONTIER_MAX];
    float qmin[BATCH_QUERIES][3], qmax[BATCH_QUERIES][3];
    for (size_t q = 0; q < n; q++) query_box(c, first + q, qmin[q], qmax[q]);
    uint8_t masks[FIELD_FRONTIER_MAX];
    int cur;
    size_t count;
    if (!field_walk_batch(c->f, c->w->config.dimensions, (const float(*)[3])qmin,
                          (const float(*)[3])qmax, n, at, &cur, &count, masks))
        return false;
    /* The ids of the hits are a random read each: all of them asked for before the first. */
    for (size_t e = 0; e < count; e++)
        if (masks[e]) __builtin_prefetch(f->ids + 8 * (size_t)at[cur][e].block);
    /* The frontier is in query order, so each query's hits are emitted together. */
    size_t h = 0;
    uint32_t q = UINT32_MAX;
    for (size_t e = 0; e < count; e++) {
        field_frontier fe = at[cur][e];
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
static size_t collect(const field *f, const float lo[3], const float hi[3], int dims, uint32_t *out,
                      size_t max) {
    collected o = {out, 0, max};
    field_walk(f, lo, hi, dims, collect_visit, &o);
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
    const field_level *l0 = &c->f->level[0];
    for (size_t j = 0; j < STATICS_CACHE_ENTRIES; j++) {
        float *at = &e->block[j / 8][j % 8];
        const float *from = j < n ? field_entry(l0, pos[j]) : NULL;
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
    field_frontier at[2][FIELD_FRONTIER_MAX];
    float qmin[BATCH_QUERIES][3], qmax[BATCH_QUERIES][3];
    for (size_t q = 0; q < n; q++) {
        memcpy(qmin[q], e[q]->fat, sizeof qmin[q]);
        memcpy(qmax[q], e[q]->fat + 3, sizeof qmax[q]);
    }
    uint8_t masks[FIELD_FRONTIER_MAX];
    int cur;
    size_t count;
    uint32_t pos[BATCH_QUERIES][STATICS_CACHE_ENTRIES];
    if (!field_walk_batch(c->f, c->w->config.dimensions, (const float(*)[3])qmin,
                          (const float(*)[3])qmax, n, at, &cur, &count, masks)) {
        for (size_t q = 0; q < n; q++)
            cache_store(c, e[q], pos[q],
                        collect(c->f, qmin[q], qmax[q], dims, pos[q], STATICS_CACHE_ENTRIES));
        return;
    }
    size_t got[BATCH_QUERIES] = {0};
    for (size_t i = 0; i < count; i++) {
        field_frontier fe = at[cur][i];
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
    if (!heap_grow(&w->heap, (void **)&x->of, &x->of_capacity, w->store.id_end, sizeof(uint32_t),
                   had) ||
        !heap_grow(&w->heap, (void **)&x->job_new, &x->job_capacity, jobs + 1, sizeof(size_t), 0) ||
        !heap_grow(&w->heap, (void **)&x->slot_entry, &x->slot_capacity, slots + 1,
                   sizeof(uint32_t), 0))
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
            simd_boxes view = field_block_view(e->block[b]);
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
    if (f->pyramid.levels == 0 || slots->count == 0) return;
    query_ctx c = {.w = w,
                   .view = world_method_view(w),
                   .f = &f->pyramid,
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
    field_release(&f->pyramid, &w->heap);
    heap_free(&w->heap, f->cache.entry, f->cache.capacity * sizeof(statics_cache_entry));
    heap_free(&w->heap, f->cache.of, f->cache.of_capacity * sizeof(uint32_t));
    heap_free(&w->heap, f->cache.job_new, f->cache.job_capacity * sizeof(size_t));
    heap_free(&w->heap, f->cache.slot_entry, f->cache.slot_capacity * sizeof(uint32_t));
    memset(f, 0, sizeof *f);
}

void statics_release(broadphase_world *w) {
    statics_field_release(w, &w->statics);
}
