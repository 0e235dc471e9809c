/* The sweep method's update: the members in the last order, then the newcomers; the grid chosen
 * from their sizes and spread; the column keys, a stable radix sort by column, the boxes
 * gathered in that order and sorted by min x within each column; the column starts, the
 * search's jobs and the hierarchy of bounds. Every pass runs on the workers, in chunks whose
 * results are combined in chunk order, so the order is the same for every thread count. */
#include "sweep_internal.h"

#include "bits.h"
#include "parallel.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum {
    PASS_CHUNK = 1 << 13,  /* positions or ids per chunk of a pass */
    SAMPLE = 1024,         /* objects whose sizes choose the cell */
    JOB_OBJECTS = 1 << 12, /* objects per column job, about */
};

static size_t chunk_count(size_t n) {
    return n ? (n + PASS_CHUNK - 1) / PASS_CHUNK : 0;
}

static void chunk_range(size_t chunk, size_t n, size_t *begin, size_t *end) {
    *begin = chunk * PASS_CHUNK;
    *end = *begin + PASS_CHUNK < n ? *begin + PASS_CHUNK : n;
}

/* ---- the grid ------------------------------------------------------------------------------ */

/* Whether an object is small: no extent above the cell, with a margin for rounding, so that
 * the cells of the mins of two overlapping small objects differ by at most one per axis. */
static inline bool is_small(const world_box *x, int dims, double cell) {
    for (int k = 0; k < dims; k++)
        if ((double)x->hi[k] - (double)x->lo[k] > cell * 0.999) return false;
    return true;
}

/* floor(v / cell) - base, clamped to the grid: computed as a product and a truncation (floor()
 * is a call where the baseline target lacks a rounding instruction); monotone in v all the
 * same, which is all the pairs need. */
static inline uint32_t cell_of(const sweep_grid *g, int a, float v) {
    double c = (double)v * g->inverse - g->base[a];
    if (!(c >= 0.0)) return 0;
    if (c >= (double)g->size[a]) return g->size[a] - 1;
    return (uint32_t)c;
}

/* An object's key: its column, or the column count for a large object. Any grid gives the same
 * pairs (a grid that no longer covers the objects clamps them into its edge columns). */
static inline uint32_t key_of_box(const sweep_grid *g, const world_box *x, int dims) {
    if (!is_small(x, dims, g->cell)) return g->size[0] * g->size[1];
    uint32_t key = cell_of(g, 0, x->lo[1]);
    if (g->axes == 2) key = key * g->size[1] + cell_of(g, 1, x->lo[2]);
    return key;
}

/* Keys by id with the grid as it stands, and per chunk: the spread of the mins on the grid
 * axes, the longest small extent on x, and the members not in the last order. */
static void scan_job(size_t chunk, int worker, void *p) {
    (void)worker;
    const sweep_ctx *c = p;
    sweep *s = c->s;
    const method_world *w = c->w;
    const world_box *box = w->store->box;
    const sweep_grid *g = &s->grid;
    uint32_t large = g->size[0] * g->size[1];
    size_t b, e, fresh = 0, members = 0;
    chunk_range(chunk, w->store->id_end, &b, &e);
    double lo[2] = {INFINITY, INFINITY}, hi[2] = {-INFINITY, -INFINITY};
    float reach = 0.0f;
    for (size_t i = b; i < e; i++) {
        if (!method_member(w, i)) {
            s->key_of[i] = SWEEP_NOT_MEMBER;
            continue;
        }
        const world_box *x = &box[i];
        for (int a = 0; a < g->axes; a++) {
            double v = x->lo[1 + a];
            lo[a] = v < lo[a] ? v : lo[a];
            hi[a] = v > hi[a] ? v : hi[a];
        }
        /* Before the first grid there are no keys (the grid is chosen next, and the keys
         * made again). */
        uint32_t key = g->size[0] ? key_of_box(g, x, c->dims) : 0;
        s->key_of[i] = key;
        if (key != large) {
            float ext = x->hi[0] - x->lo[0];
            reach = ext > reach ? ext : reach;
        }
        fresh += !s->in_slots[i];
        members++;
    }
    for (int a = 0; a < 2; a++) {
        s->chunk_lo[2 * chunk + (size_t)a] = lo[a];
        s->chunk_hi[2 * chunk + (size_t)a] = hi[a];
    }
    s->chunk_reach[chunk] = reach;
    s->chunk_fresh[chunk] = fresh;
    s->chunk_count[chunk] = members;
}

/* The keys again, after the grid changed. */
static void rekey_job(size_t chunk, int worker, void *p) {
    (void)worker;
    const sweep_ctx *c = p;
    sweep *s = c->s;
    const world_box *box = c->w->store->box;
    const sweep_grid *g = &s->grid;
    uint32_t large = g->size[0] * g->size[1];
    size_t b, e;
    chunk_range(chunk, c->w->store->id_end, &b, &e);
    float reach = 0.0f;
    for (size_t i = b; i < e; i++) {
        if (s->key_of[i] == SWEEP_NOT_MEMBER) continue;
        uint32_t key = key_of_box(g, &box[i], c->dims);
        s->key_of[i] = key;
        if (key != large) {
            float ext = box[i].hi[0] - box[i].lo[0];
            reach = ext > reach ? ext : reach;
        }
    }
    s->chunk_reach[chunk] = reach;
}

static int compare_doubles(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Columns per grid axis for cell side `cell` over mins in [lo, hi]; their product. */
static double grid_columns(const double lo[2], const double hi[2], int axes, double cell,
                           double size[2]) {
    double product = 1.0;
    for (int a = 0; a < 2; a++) {
        size[a] = a < axes ? floor(hi[a] / cell) - floor(lo[a] / cell) + 1.0 : 1.0;
        if (!(size[a] >= 1.0)) size[a] = INFINITY; /* NaN from inf / inf: too many */
        product *= size[a];
    }
    return product;
}

/* The grid for the members, whose mins spread over [lo, hi] on the grid axes; true when it
 * changed. The cell: twice the 90th percentile of the sampled members' longest extents, so
 * that all but a few objects fit a cell (with the median, a world of sizes spread over a factor
 * of two, as spheres' boxes rounded outward far from the origin, had most objects large: 2.4 s
 * a step at `far` 1e5) and a column holds a handful across; kept while it stays within a factor
 * of 1.5 of that. The columns cover the spread with a sixteenth to spare on each side, and are
 * kept while the spread stays inside them (so that the order stays sorted by column), and at
 * most twice as many as the objects (the cell grows for a world spread far and thin). */
static bool choose_grid(const method_world *w, sweep *s, size_t n, const double lo_in[2],
                        const double hi_in[2]) {
    sweep_grid *g = &s->grid, old = *g;
    if (n == 0) { /* nothing to place: any grid will do, and the one standing is kept */
        if (g->size[0] > 0) return false;
        g->cell = g->inverse = 1.0;
        g->base[0] = g->base[1] = 0.0;
        g->size[0] = g->size[1] = 1;
        return true;
    }
    double sample[SAMPLE];
    /* An odd stride: ids often alternate kinds (boxes and spheres, say), and an even one would
     * see one kind only. */
    size_t ids = w->store->id_end, stride = (ids / SAMPLE) | 1, m = 0;
    for (size_t i = 0; i < ids && m < SAMPLE; i += stride) {
        if (s->key_of[i] == SWEEP_NOT_MEMBER) continue;
        const world_box *x = &w->store->box[i];
        double longest = 0.0;
        for (int k = 0; k < w->config->dimensions; k++) {
            double e = (double)x->hi[k] - (double)x->lo[k];
            longest = e > longest ? e : longest;
        }
        sample[m++] = longest;
    }
    double cell = 0.0;
    if (m) {
        qsort(sample, m, sizeof(double), compare_doubles);
        cell = 2.0 * sample[m * 9 / 10];
    }
    double lo[2] = {0.0, 0.0}, hi[2] = {0.0, 0.0};
    for (int a = 0; a < g->axes && n; a++) {
        double slack = (hi_in[a] - lo_in[a]) / 16.0;
        lo[a] = lo_in[a] - slack;
        hi[a] = hi_in[a] + slack;
    }
    double cap = 2.0 * (double)n + 64.0, size[2];
    if (!(cell > 0.0) || !isfinite(cell)) { /* points: spread them over the columns */
        double spread = 0.0;
        for (int a = 0; a < g->axes; a++)
            if (hi[a] - lo[a] > spread) spread = hi[a] - lo[a];
        cell = spread / (g->axes == 2 ? sqrt(cap) : cap);
        if (!(cell > 0.0) || !isfinite(cell)) cell = 1.0;
    }
    if (old.cell > cell / 1.5 && old.cell < cell * 1.5) cell = old.cell;
    /* Kept as it is while the objects stay inside it. */
    bool inside = old.size[0] > 0 && cell == old.cell && old.axes == g->axes &&
                  grid_columns(lo_in, hi_in, g->axes, cell, size) <= cap;
    for (int a = 0; a < g->axes && inside && n; a++)
        inside = floor(lo_in[a] * old.inverse) >= old.base[a] &&
                 floor(hi_in[a] * old.inverse) < old.base[a] + (double)old.size[a];
    if (inside) return false;
    for (int tries = 0; grid_columns(lo, hi, g->axes, cell, size) > cap && tries < 4096; tries++)
        cell *= 2.0;
    g->cell = cell;
    g->inverse = 1.0 / cell;
    for (int a = 0; a < 2; a++) {
        g->base[a] = a < g->axes && n ? floor(lo[a] * g->inverse) : 0.0;
        g->size[a] = a < g->axes && n ? (uint32_t)size[a] : 1;
    }
    return true;
}

/* ---- the members, in the last order then the newcomers ------------------------------------- */

static void count_survivors(size_t chunk, int worker, void *p) {
    (void)worker;
    const sweep_ctx *c = p;
    sweep *s = c->s;
    const uint32_t *sid = s->slots.sid[s->slots.cur];
    size_t b, e, kept = 0;
    chunk_range(chunk, s->count, &b, &e);
    for (size_t i = b; i < e; i++) kept += s->key_of[sid[i]] != SWEEP_NOT_MEMBER;
    s->chunk_count[chunk] = kept;
}

static void write_survivors(size_t chunk, int worker, void *p) {
    (void)worker;
    const sweep_ctx *c = p;
    sweep *s = c->s;
    const uint32_t *sid = s->slots.sid[s->slots.cur];
    size_t b, e, at = s->chunk_count[chunk];
    chunk_range(chunk, s->count, &b, &e);
    for (size_t i = b; i < e; i++) {
        uint32_t id = sid[i], key = s->key_of[id];
        if (key == SWEEP_NOT_MEMBER) {
            s->in_slots[id] = 0; /* dropped: a newcomer if it comes back */
            continue;
        }
        s->keys[at] = key;
        s->ids[at++] = id;
    }
}

/* The same when none was dropped: position for position. */
static void copy_survivors(size_t chunk, int worker, void *p) {
    (void)worker;
    const sweep_ctx *c = p;
    sweep *s = c->s;
    const uint32_t *sid = s->slots.sid[s->slots.cur];
    size_t b, e;
    chunk_range(chunk, s->count, &b, &e);
    for (size_t i = b; i < e; i++) {
        s->keys[i] = s->key_of[sid[i]];
        s->ids[i] = sid[i];
    }
}

static void write_newcomers(size_t chunk, int worker, void *p) {
    (void)worker;
    const sweep_ctx *c = p;
    sweep *s = c->s;
    size_t b, e, at = s->chunk_fresh[chunk];
    chunk_range(chunk, c->w->store->id_end, &b, &e);
    for (size_t i = b; i < e; i++) {
        if (s->key_of[i] == SWEEP_NOT_MEMBER || s->in_slots[i]) continue;
        s->in_slots[i] = 1;
        s->keys[at] = s->key_of[i];
        s->ids[at++] = (uint32_t)i;
    }
}

/* The keys by id, the grid, then the members with their keys into s->keys and s->ids: the
 * survivors of the last order first, then the newcomers by id. Returns how many, or SIZE_MAX
 * when there are more than the room (reserve_columns) holds. The marks (in_slots) follow. */
static size_t gather_members(const method_world *w, sweep *s) {
    sweep_ctx *c = &s->ctx;
    size_t ids = w->store->id_end;
    size_t old_chunks = chunk_count(s->count), id_chunks = chunk_count(ids);
    threads_for_chunks(w->workers, id_chunks, scan_job, c);
    double lo[2] = {INFINITY, INFINITY}, hi[2] = {-INFINITY, -INFINITY};
    float reach = 0.0f;
    for (size_t ch = 0; ch < id_chunks; ch++) {
        for (int a = 0; a < 2; a++) {
            double l = s->chunk_lo[2 * ch + (size_t)a], h = s->chunk_hi[2 * ch + (size_t)a];
            lo[a] = l < lo[a] ? l : lo[a];
            hi[a] = h > hi[a] ? h : hi[a];
        }
    }
    /* Every member is in the last order (marked) or a newcomer; the survivors are the marked
     * members, and when they are all of the last order, they keep their positions. */
    size_t newcomers = 0, members = 0;
    for (size_t ch = 0; ch < id_chunks; ch++) {
        newcomers += s->chunk_fresh[ch];
        members += s->chunk_count[ch];
    }
    size_t survivors = members - newcomers, n = members;
    if (n > s->sort_capacity) return SIZE_MAX;
    if (choose_grid(w, s, n, lo, hi)) threads_for_chunks(w->workers, id_chunks, rekey_job, c);
    for (size_t ch = 0; ch < id_chunks; ch++)
        reach = s->chunk_reach[ch] > reach ? s->chunk_reach[ch] : reach;
    s->reach = reach;
    if (survivors == s->count) {
        threads_for_chunks(w->workers, old_chunks, copy_survivors, c);
    } else {
        threads_for_chunks(w->workers, old_chunks, count_survivors, c);
        threads_exclusive_scan(w->workers, s->chunk_count, old_chunks);
        threads_for_chunks(w->workers, old_chunks, write_survivors, c);
    }
    if (newcomers) {
        threads_exclusive_scan(w->workers, s->chunk_fresh, id_chunks);
        for (size_t ch = 0; ch < id_chunks; ch++) s->chunk_fresh[ch] += survivors;
        threads_for_chunks(w->workers, id_chunks, write_newcomers, c);
    }
    return n;
}

/* ---- sort, columns ------------------------------------------------------------------------- */

/* col_start[c] for every c: the first position whose key is c or more. */
static void column_start_job(size_t chunk, int worker, void *p) {
    (void)worker;
    const sweep_ctx *c = p;
    sweep *s = c->s;
    size_t b, e, n = s->count;
    uint64_t last = (uint64_t)s->grid.size[0] * s->grid.size[1] + 1; /* large, then the end */
    chunk_range(chunk, n, &b, &e);
    for (size_t i = b; i < e; i++) {
        uint64_t from = i ? s->keys[i - 1] + 1 : 0;
        for (uint64_t k = from; k <= s->keys[i]; k++) s->col_start[k] = (uint32_t)i;
    }
    if (e == n)
        for (uint64_t k = n ? s->keys[n - 1] + 1 : 0; k <= last; k++) s->col_start[k] = (uint32_t)n;
}

/* The boxes in the sorted order into the other buffer. */
static void gather_job(size_t chunk, int worker, void *p) {
    (void)worker;
    const sweep_ctx *c = p;
    sweep *s = c->s;
    tree_slots *t = &s->slots;
    int to = 1 - t->cur;
    const world_box *box = c->w->store->box;
    size_t b, e;
    chunk_range(chunk, s->count, &b, &e);
    for (size_t i = b; i < e; i++) {
        uint32_t id = s->ids[i];
        if (i + 16 < e) __builtin_prefetch(&box[s->ids[i + 16]]);
        const world_box *x = &box[id];
        for (int k = 0; k < 3; k++) {
            t->smin[to][k][i] = x->lo[k];
            t->smax[to][k][i] = x->hi[k];
        }
        t->sid[to][i] = id;
    }
}

/* One buffer's slots, for sorting a column in place. */
typedef struct slot_columns {
    float *mn[3], *mx[3];
    uint32_t *id;
} slot_columns;

static inline void swap_slots(const slot_columns *t, uint32_t a, uint32_t b) {
    for (int k = 0; k < 3; k++) {
        float x = t->mn[k][a], y = t->mx[k][a];
        t->mn[k][a] = t->mn[k][b];
        t->mx[k][a] = t->mx[k][b];
        t->mn[k][b] = x;
        t->mx[k][b] = y;
    }
    uint32_t i = t->id[a];
    t->id[a] = t->id[b];
    t->id[b] = i;
}

/* Heap sort of slots [begin, end) by min x: O(m log m) whatever the order. */
static void heap_sort_column(const slot_columns *t, uint32_t begin, uint32_t end) {
    uint32_t m = end - begin;
    const float *key = t->mn[0] + begin;
    for (uint32_t start = m / 2; start-- > 0;) {
        for (uint32_t root = start;;) {
            uint32_t child = 2 * root + 1;
            if (child >= m) break;
            if (child + 1 < m && key[child + 1] > key[child]) child++;
            if (!(key[child] > key[root])) break;
            swap_slots(t, begin + root, begin + child);
            root = child;
        }
    }
    for (uint32_t last = m; last-- > 1;) {
        swap_slots(t, begin, begin + last);
        for (uint32_t root = 0;;) {
            uint32_t child = 2 * root + 1;
            if (child >= last) break;
            if (child + 1 < last && key[child + 1] > key[child]) child++;
            if (!(key[child] > key[root])) break;
            swap_slots(t, begin + root, begin + child);
            root = child;
        }
    }
}

/* Sorts the slots of columns [job_col[j], job_col[j + 1]) by min x: an insertion sort, nearly
 * free when the last order holds, given up for a heap sort of the column when it has moved more
 * than a few slots per slot (a column that arrives in no order: the first update, a rebuild,
 * many newcomers). The same input gives the same order on any thread. */
static void sort_columns_job(size_t j, int worker, void *p) {
    (void)worker;
    const sweep_ctx *c = p;
    sweep *s = c->s;
    tree_slots *t = &s->slots;
    int b = t->cur;
    slot_columns sc = {{t->smin[b][0], t->smin[b][1], t->smin[b][2]},
                       {t->smax[b][0], t->smax[b][1], t->smax[b][2]},
                       t->sid[b]};
    float *const *mn = sc.mn, *const *mx = sc.mx;
    uint32_t *id = sc.id;
    for (uint32_t col = s->job_col[j]; col < s->job_col[j + 1]; col++) {
        uint32_t begin = s->col_start[col], end = s->col_start[col + 1];
        size_t budget = 4 * (size_t)(end - begin) + 64, moves = 0;
        for (uint32_t i = begin + 1; i < end; i++) {
            float key = mn[0][i];
            if (mn[0][i - 1] <= key) continue;
            float v[6] = {mn[0][i], mn[1][i], mn[2][i], mx[0][i], mx[1][i], mx[2][i]};
            uint32_t vid = id[i], k = i;
            for (; k > begin && mn[0][k - 1] > key; k--) {
                for (int a = 0; a < 3; a++) {
                    mn[a][k] = mn[a][k - 1];
                    mx[a][k] = mx[a][k - 1];
                }
                id[k] = id[k - 1];
            }
            for (int a = 0; a < 3; a++) {
                mn[a][k] = v[a];
                mx[a][k] = v[3 + a];
            }
            id[k] = vid;
            moves += i - k;
            if (moves > budget) {
                heap_sort_column(&sc, begin, end);
                break;
            }
        }
    }
}

/* Column jobs of about JOB_OBJECTS objects each (more when the workers would otherwise wait):
 * cut at column starts by objects, which stand for the work (each object's windows). */
static bool plan_column_jobs(const method_world *w, sweep *s) {
    uint32_t columns = s->grid.size[0] * s->grid.size[1];
    size_t want = s->small / JOB_OBJECTS + 1, least = (size_t)w->workers * 4;
    if (want < least) want = least;
    if (want > columns) want = columns;
    if (!heap_grow(w->heap, (void **)&s->job_col, &s->job_capacity, want + 1, sizeof(uint32_t),
                   s->job_capacity))
        return false;
    size_t jobs = 0;
    uint32_t col = 0;
    s->job_col[jobs++] = 0;
    for (size_t j = 1; j < want; j++) {
        size_t target = s->small * j / want;
        /* the first column starting at or after the target position */
        uint32_t lo = col, hi = columns;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if (s->col_start[mid] < target)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo > col && lo < columns) {
            s->job_col[jobs++] = lo;
            col = lo;
        }
    }
    s->job_col[jobs] = columns;
    s->column_jobs = jobs;
    uint32_t most = 0;
    for (uint32_t k = 0; k < columns; k++) {
        uint32_t m = s->col_start[k + 1] - s->col_start[k];
        most = m > most ? m : most;
    }
    s->max_column = most;
    return true;
}

/* ---- the hierarchy of bounds --------------------------------------------------------------- */

static void leaf_bounds_job(size_t chunk, int worker, void *p) {
    (void)worker;
    const sweep_ctx *c = p;
    sweep *s = c->s;
    simd_boxes boxes = tree_slots_boxes(&s->slots);
    size_t b, e;
    chunk_range(chunk, s->level_nodes[0], &b, &e);
    for (size_t i = b; i < e; i++) {
        size_t from = i * s->leaf, to = from + s->leaf < s->count ? from + s->leaf : s->count;
        float *out = s->bounds + 6 * i;
        simd_boxes_bounds(&boxes, from, to, out, out + 3);
    }
}

static bool build_hierarchy(const method_world *w, sweep *s) {
    s->levels = 0;
    s->leaf = w->config->leaf_size > 0 ? (uint32_t)w->config->leaf_size : 32;
    /* No objects: one empty leaf, as an empty tree has an empty root. */
    size_t nodes = s->count ? (s->count + s->leaf - 1) / s->leaf : 1, total = 0;
    for (;;) {
        s->level_offset[s->levels] = (uint32_t)total;
        s->level_nodes[s->levels++] = (uint32_t)nodes;
        total += nodes;
        if (nodes == 1 || s->levels == SWEEP_MAX_LEVELS) break;
        nodes = (nodes + SWEEP_FANOUT - 1) / SWEEP_FANOUT;
    }
    s->level_offset[s->levels] = (uint32_t)total;
    if (!heap_grow(w->heap, (void **)&s->bounds, &s->bounds_capacity, 6 * total, sizeof(float),
                   s->bounds_capacity))
        return false;
    threads_for_chunks(w->workers, chunk_count(s->level_nodes[0]), leaf_bounds_job, &s->ctx);
    for (int l = 1; l < s->levels; l++) {
        for (size_t i = 0; i < s->level_nodes[l]; i++) {
            float *out = s->bounds + 6 * (s->level_offset[l] + i);
            size_t first = i * SWEEP_FANOUT, last = first + SWEEP_FANOUT;
            if (last > s->level_nodes[l - 1]) last = s->level_nodes[l - 1];
            for (int k = 0; k < 3; k++) {
                out[k] = INFINITY;
                out[3 + k] = -INFINITY;
            }
            for (size_t j = first; j < last; j++) {
                const float *in = sweep_node(s, l - 1, j);
                for (int k = 0; k < 3; k++) {
                    out[k] = in[k] < out[k] ? in[k] : out[k];
                    out[3 + k] = in[3 + k] > out[3 + k] ? in[3 + k] : out[3 + k];
                }
            }
        }
    }
    return true;
}

/* ---- the update ---------------------------------------------------------------------------- */

/* Room for the update's working columns for `need` members and their chunks. Contents are not
 * kept. False on out of memory (with the old room). */
enum { CHUNK_BYTES = 2 * sizeof(size_t) + 4 * sizeof(double) + sizeof(float) };

static bool reserve_columns(const method_world *w, sweep *s, size_t need) {
    if (need > s->sort_capacity) {
        size_t cap = s->sort_capacity + s->sort_capacity / 2;
        if (cap < need) cap = need;
        size_t bytes = cap * 2 * (sizeof(uint64_t) + sizeof(uint32_t));
        uint64_t *block = heap_alloc(w->heap, bytes);
        if (!block) return false;
        heap_free(w->heap, s->keys, s->sort_capacity * 2 * (sizeof(uint64_t) + sizeof(uint32_t)));
        s->keys = block;
        s->tmp_keys = block + cap;
        s->ids = (uint32_t *)(block + 2 * cap);
        s->tmp_ids = s->ids + cap;
        s->sort_capacity = cap;
    }
    size_t most = need > s->count ? need : s->count;
    most = most > w->store->id_end ? most : w->store->id_end;
    size_t chunks = chunk_count(most) + 1;
    if (chunks > s->chunk_capacity) {
        size_t *block = heap_alloc(w->heap, chunks * CHUNK_BYTES);
        if (!block) return false;
        heap_free(w->heap, s->chunk_count, s->chunk_capacity * CHUNK_BYTES);
        s->chunk_count = block;
        s->chunk_fresh = block + chunks;
        s->chunk_lo = (double *)(block + 2 * chunks);
        s->chunk_hi = s->chunk_lo + 2 * chunks;
        s->chunk_reach = (float *)(s->chunk_hi + 2 * chunks);
        s->chunk_capacity = chunks;
    }
    size_t radix = threads_radix_scratch_size(w->workers);
    if (radix > s->radix_bytes) {
        void *r = heap_alloc(w->heap, radix);
        if (!r) return false;
        heap_free(w->heap, s->radix, s->radix_bytes);
        s->radix = r;
        s->radix_bytes = radix;
    }
    return true;
}

void sweep_release(const method_world *w, sweep *s) {
    tree_slots_release(w, &s->slots);
    tree_workers_release(w, &s->workers);
    heap_free(w->heap, s->col_start, s->col_capacity * sizeof(uint32_t));
    heap_free(w->heap, s->in_slots, s->in_slots_capacity);
    heap_free(w->heap, s->keys, s->sort_capacity * 2 * (sizeof(uint64_t) + sizeof(uint32_t)));
    heap_free(w->heap, s->chunk_count, s->chunk_capacity * CHUNK_BYTES);
    heap_free(w->heap, s->key_of, s->key_of_capacity * sizeof(uint32_t));
    heap_free(w->heap, s->radix, s->radix_bytes);
    heap_free(w->heap, s->bounds, s->bounds_capacity * sizeof(float));
    heap_free(w->heap, s->job_col, s->job_capacity * sizeof(uint32_t));
}

void sweep_forget_order(sweep *s) {
    if (s->in_slots) memset(s->in_slots, 0, s->in_slots_capacity);
    s->count = s->small = 0;
}

/* After a failure: nothing in the order, no mark set; the next update starts afresh. */
static bool fail(sweep *s) {
    sweep_forget_order(s);
    s->slots.count = 0;
    s->levels = 0;
    s->column_jobs = 0;
    s->built = false;
    return false;
}

static void pad_job(sweep *s) {
    tree_slots *t = &s->slots;
    for (size_t i = s->count; i < (size_t)s->count + SIMD_PAD; i++) {
        for (int k = 0; k < 3; k++) {
            t->smin[t->cur][k][i] = INFINITY;
            t->smax[t->cur][k][i] = -INFINITY;
        }
        t->sid[t->cur][i] = WORLD_NONE;
    }
}

static int bits_for(uint64_t v) {
    int b = 1;
    while (b < 64 && (v >> b) != 0) b++;
    return b;
}

bool sweep_rebuild(const method_world *w, sweep *s) {
    sweep_ctx *c = &s->ctx;
    *c = (sweep_ctx){w, s, w->config->dimensions, 0};
    s->grid.axes = w->config->dimensions == 3 ? 2 : 1;
    /* The marks and keys by id, new ids unmarked. */
    size_t ids = w->store->id_end, old = s->in_slots_capacity;
    if (!heap_grow(w->heap, (void **)&s->in_slots, &s->in_slots_capacity, ids, 1, old))
        return fail(s);
    memset(s->in_slots + old, 0, s->in_slots_capacity - old);
    if (!heap_grow(w->heap, (void **)&s->key_of, &s->key_of_capacity, ids, sizeof(uint32_t), 0))
        return fail(s);
    /* 1. The keys and the grid; the members: the last order's survivors, then the newcomers. */
    if (!reserve_columns(w, s, w->member_count)) return fail(s);
    size_t n = gather_members(w, s);
    if (n == SIZE_MAX) { /* more than member_count said: room for all the ids */
        if (!reserve_columns(w, s, ids)) return fail(s);
        n = gather_members(w, s);
    }
    if (n == SIZE_MAX) return fail(s);
    s->count = (uint32_t)n;
    uint64_t columns = (uint64_t)s->grid.size[0] * s->grid.size[1];
    if (!heap_grow(w->heap, (void **)&s->col_start, &s->col_capacity, columns + 2, sizeof(uint32_t),
                   0))
        return fail(s);
    /* 2. The stable sort by column: large objects last. */
    threads_radix_sort_pairs(w->workers, s->keys, s->ids, s->tmp_keys, s->tmp_ids, n,
                             bits_for(columns), s->radix);
    if (n == 0)
        for (uint64_t k = 0; k <= columns + 1; k++) s->col_start[k] = 0;
    threads_for_chunks(w->workers, chunk_count(n), column_start_job, c);
    s->small = s->col_start[columns];
    /* 3. The boxes in that order, into the other buffer, then sorted by min x per column. */
    if (!tree_slots_reserve(w, &s->slots, n)) return fail(s);
    threads_for_chunks(w->workers, chunk_count(n), gather_job, c);
    s->slots.cur = 1 - s->slots.cur;
    s->slots.count = (uint32_t)n;
    pad_job(s);
    if (!plan_column_jobs(w, s)) return fail(s);
    threads_for_chunks(w->workers, s->column_jobs, sort_columns_job, c);
    /* 4. The hierarchy of bounds, for the large objects and the queries. */
    if (!build_hierarchy(w, s)) return fail(s);
    s->built = true;
    return true;
}
