/* The Morton pyramid (see field.h): its build, the batched walk, and its view for the queries. */
#include "field.h"

#include "bits.h"
#include "parallel.h"

#include <math.h>
#include <string.h>

enum { FIELD_CHUNK = 16384 }; /* ids per chunk of the build's passes */

static size_t level_bytes(size_t blocks) {
    return blocks * FIELD_BLOCK_FLOATS * sizeof(float);
}

/* Room for `count` entries in a level, sentinels (min +inf, max -inf) from count on. One block
 * more than needed, so that a kernel reading past a block's last column stays inside. */
static bool level_reserve(heap *h, field_level *l, size_t count) {
    size_t blocks = (count + 7) / 8 + 1;
    if (blocks > l->capacity) {
        float *b = heap_alloc(h, level_bytes(blocks));
        if (!b) return false;
        heap_free(h, l->blocks, level_bytes(l->capacity));
        l->blocks = b;
        l->capacity = blocks;
    }
    for (size_t i = count; i < blocks * 8; i++) {
        float *at = l->blocks + i / 8 * FIELD_BLOCK_FLOATS + i % 8;
        for (int k = 0; k < 3; k++) {
            at[8 * k] = INFINITY;
            at[24 + 8 * k] = -INFINITY;
        }
    }
    l->count = count;
    return true;
}

typedef struct build_ctx {
    const field_source *src;
    field *f;
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
    const field_source *s = c->src;
    size_t begin = chunk * FIELD_CHUNK, end = begin + FIELD_CHUNK;
    if (end > s->id_end) end = s->id_end;
    float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    size_t n = 0;
    for (size_t i = begin; i < end; i++) {
        if (s->kind[i] == OBJECT_FREE || !s->flags[i]) continue;
        float m[3];
        box_centre(&s->box[i], m);
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
    const field_source *s = c->src;
    size_t begin = chunk * FIELD_CHUNK, end = begin + FIELD_CHUNK;
    if (end > s->id_end) end = s->id_end;
    size_t at = c->f->chunk_count[chunk];
    for (size_t i = begin; i < end; i++) {
        if (s->kind[i] == OBJECT_FREE || !s->flags[i]) continue;
        float m[3];
        box_centre(&s->box[i], m);
        c->keys[at] = centre_key(c, m, s->dims);
        c->vals[at++] = (uint32_t)i;
    }
}

static void fill_objects(size_t begin, size_t end, int worker, void *p) {
    (void)worker;
    build_ctx *c = p;
    field_level *l = &c->f->level[0];
    for (size_t i = begin; i < end; i++) {
        uint32_t id = c->vals[i];
        c->f->ids[i] = id;
        float *at = field_entry(l, i);
        for (int k = 0; k < 3; k++) {
            at[8 * k] = c->src->box[id].lo[k];
            at[24 + 8 * k] = c->src->box[id].hi[k];
        }
    }
}

static void fill_bounds(size_t begin, size_t end, int worker, void *p) {
    (void)worker;
    build_ctx *c = p;
    const field_level *below = &c->f->level[c->level - 1];
    field_level *l = &c->f->level[c->level];
    for (size_t i = begin; i < end; i++) {
        /* Entry i bounds block i below, whose sentinels change nothing. */
        const float *block = below->blocks + i * FIELD_BLOCK_FLOATS;
        float *at = field_entry(l, i);
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

bool field_build(field *f, heap *h, const field_source *src) {
    size_t count = src->count;
    int workers = src->workers;
    f->levels = 0;
    if (count == 0) return true;
    size_t chunks = (src->id_end + FIELD_CHUNK - 1) / FIELD_CHUNK;
    if (!heap_grow(h, (void **)&f->chunk_count, &f->chunk_capacity, chunks + 1, sizeof(size_t),
                   0) ||
        !heap_grow(h, (void **)&f->chunk_bounds, &f->chunk_bounds_capacity, 6 * (chunks + 1),
                   sizeof(float), 0) ||
        !heap_grow(h, (void **)&f->ids, &f->ids_capacity, count + 1, sizeof(uint32_t), 0))
        return false;
    /* The sort's memory is kept, so that statics moving every step allocate nothing either. */
    size_t hist = threads_radix_scratch_size(workers);
    size_t sort_bytes = count * 2 * (sizeof(uint64_t) + sizeof(uint32_t)) + hist;
    if (!heap_grow(h, &f->sort, &f->sort_bytes, sort_bytes, 1, 0)) return false;
    build_ctx c = {.src = src, .f = f, .keys = f->sort};
    uint64_t *keys_tmp = c.keys + count;
    c.vals = (uint32_t *)(keys_tmp + count);
    uint32_t *vals_tmp = c.vals + count;
    void *hist_scratch = vals_tmp + count;
    threads_for_chunks(workers, chunks, count_statics, &c);
    float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (size_t ch = 0; ch < chunks; ch++) {
        for (int k = 0; k < 3; k++) {
            float a = f->chunk_bounds[ch * 6 + (size_t)k],
                  z = f->chunk_bounds[ch * 6 + 3 + (size_t)k];
            lo[k] = a < lo[k] ? a : lo[k];
            hi[k] = z > hi[k] ? z : hi[k];
        }
    }
    int dims = src->dims;
    double cells = dims == 3 ? 2097152.0 : 2147483648.0;
    for (int k = 0; k < 3; k++) {
        double extent = (double)hi[k] - (double)lo[k];
        c.origin[k] = lo[k];
        c.scale[k] = extent > 0.0 && isfinite(extent) ? cells / extent : 0.0;
    }
    threads_exclusive_scan(workers, f->chunk_count, chunks);
    threads_for_chunks(workers, chunks, write_keys, &c);
    threads_radix_sort_pairs(workers, c.keys, c.vals, keys_tmp, vals_tmp, count,
                             dims == 3 ? 63 : 62, hist_scratch);
    bool ok = level_reserve(h, &f->level[0], count);
    if (ok) threads_for_ranges(workers, count, 4096, fill_objects, &c);
    int levels = 1;
    while (ok && f->level[levels - 1].count > 8) {
        c.level = levels;
        size_t above = (f->level[levels - 1].count + 7) / 8;
        ok = level_reserve(h, &f->level[levels], above);
        if (ok) threads_for_ranges(workers, above, 1024, fill_bounds, &c);
        levels++;
    }
    f->levels = ok ? levels : 0;
    f->rebuilds += ok;
    return ok;
}

void field_release(field *f, heap *h) {
    for (int l = 0; l < FIELD_LEVELS_MAX; l++)
        heap_free(h, f->level[l].blocks, level_bytes(f->level[l].capacity));
    heap_free(h, f->ids, f->ids_capacity * sizeof(uint32_t));
    heap_free(h, f->chunk_count, f->chunk_capacity * sizeof(size_t));
    heap_free(h, f->chunk_bounds, f->chunk_bounds_capacity * sizeof(float));
    heap_free(h, f->sort, f->sort_bytes);
    memset(f, 0, sizeof *f);
}

/* The batch's walk down to the objects, for queries (qmin[q], qmax[q]), q < n: the frontier
 * ends in at[*cur][0, *count) (entries of level 0, in query order) with each one's hits in
 * masks. False when a level's blocks overflow the frontier. */
bool field_walk_batch(const field *f, int dims, const float (*qmin)[3], const float (*qmax)[3],
                      size_t n, field_frontier (*at)[FIELD_FRONTIER_MAX], int *cur_out,
                      size_t *count_out, uint8_t *masks) {
    for (size_t q = 0; q < n; q++) at[0][q] = (field_frontier){0, (uint32_t)q};
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
            field_frontier fe = at[cur][e];
            if (next + 8 > FIELD_FRONTIER_MAX) return false;
            for (; m; m &= m - 1) {
                uint32_t child = 8 * fe.block + (uint32_t)__builtin_ctz(m);
                field_fetch_block(below + (size_t)child * FIELD_BLOCK_FLOATS);
                at[1 - cur][next++] = (field_frontier){child, fe.query};
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

/* ---- the queries' view (query_view.h) ---------------------------------------------------- */

/* The root's bounds: the union of the top level's entries (at most 8), so the objects' own
 * boxes when the field fits in one block (a root with no entry below it to take the union of).
 * The blocks' sentinels (min +inf, max -inf) change nothing. */
static void top_bounds(const field *f, float lo[3], float hi[3]) {
    const field_level *top = &f->level[f->levels - 1];
    for (int k = 0; k < 3; k++) {
        lo[k] = INFINITY;
        hi[k] = -INFINITY;
        for (size_t j = 0; j < top->count; j++) {
            const float *e = field_entry(top, j);
            lo[k] = e[8 * k] < lo[k] ? e[8 * k] : lo[k];
            hi[k] = e[24 + 8 * k] > hi[k] ? e[24 + 8 * k] : hi[k];
        }
    }
}

/* Node handles: level << 32 | entry; level == levels is a root above the top level's entries.
 * Entry i of level l bounds the objects at positions [i * 8^l, (i + 1) * 8^l) of level 0. */
static void query_node_of(const void *p, uint64_t handle, query_node *out) {
    const field *f = p;
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
        const float *e = field_entry(&f->level[l], i);
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
        out->own = field_block_view(f->level[0].blocks + i * FIELD_BLOCK_FLOATS);
        out->own_id = f->ids + 8 * i;
        out->own_end = (uint32_t)(n0 - 8 * i < 8 ? n0 - 8 * i : 8);
        return;
    }
    const field_level *below = &f->level[l - 1];
    for (size_t j = 8 * i; j < 8 * i + 8 && j < below->count; j++)
        out->child[out->children++] = (uint64_t)(l - 1) << 32 | j;
}

static void bounds_of(const void *p, uint64_t handle, float lo[3], float hi[3]) {
    const field *f = p;
    int l = (int)(handle >> 32);
    if (l == f->levels) {
        top_bounds(f, lo, hi);
        return;
    }
    const float *e = field_entry(&f->level[l], (uint32_t)handle);
    for (int k = 0; k < 3; k++) {
        lo[k] = e[8 * k];
        hi[k] = e[24 + 8 * k];
    }
}

bool field_query_view(const field *f, query_member member, query_view *out) {
    if (f->levels == 0 || f->level[0].count == 0) return false;
    *out = (query_view){f, (uint64_t)f->levels << 32, query_node_of, member, bounds_of, NULL, NULL};
    return true;
}
