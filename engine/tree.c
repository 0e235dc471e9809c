/* What the kd-tree and the octree share: slots, per-worker search memory, pair emission, the
 * update policy. */
#include "tree.h"

#include "parallel.h"
#include "method.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static size_t slot_stride(size_t capacity) {
    return (capacity + SIMD_PAD + 15) / 16 * 16;
}

/* Slots a worker fills with sentinels at a time (tree_slots_ready). */
enum { SLOT_FILL_GRAIN = 1 << 14 };

static size_t slot_block_bytes(size_t capacity) {
    return slot_stride(capacity) * (6 * sizeof(float) + sizeof(uint32_t));
}

bool tree_slots_reserve(const method_world *w, tree_slots *t, size_t need) {
    if (need <= t->capacity && t->block[0]) return true;
    /* An eighth to spare: objects added after a build wait in the spare slots until the next
     * relayout, and without room for them the first add after a build would force a build at
     * every step (moving 1e5 with 10 objects swapped per step: a build every step, update 5.7 ms
     * against 1.9 with the spare slots) (NOTES row 127). */
    size_t cap = t->capacity + t->capacity / 2, want = need + need / 8;
    if (cap < want) cap = want;
    if (cap < 64) cap = 64;
    size_t stride = slot_stride(cap);
    void *blocks[2];
    for (int b = 0; b < 2; b++) {
        blocks[b] = heap_alloc(w->heap, slot_block_bytes(cap));
        if (!blocks[b]) {
            if (b) heap_free(w->heap, blocks[0], slot_block_bytes(cap));
            return false;
        }
    }
    tree_slots_release(w, t);
    for (int b = 0; b < 2; b++) {
        t->block[b] = blocks[b];
        float *f = blocks[b];
        for (int k = 0; k < 3; k++) {
            t->smin[b][k] = f + stride * (size_t)k;
            t->smax[b][k] = f + stride * (size_t)(3 + k);
        }
        t->sid[b] = (uint32_t *)(f + stride * 6);
        t->filled[b] = false;
        t->warm[b] = 0;
    }
    t->capacity = cap;
    return true;
}

typedef struct slots_fill {
    tree_slots *t;
    int b;
    size_t from;
} slots_fill;

static void fill_range(size_t begin, size_t end, int worker, void *p) {
    (void)worker;
    const slots_fill *f = p;
    tree_slots *t = f->t;
    for (size_t i = f->from + begin; i < f->from + end; i++) {
        for (int k = 0; k < 3; k++) {
            t->smin[f->b][k][i] = INFINITY;
            t->smax[f->b][k][i] = -INFINITY;
        }
        t->sid[f->b][i] = WORLD_NONE;
    }
}

void tree_slots_ready(const method_world *w, tree_slots *t, int b, size_t written) {
    if (t->filled[b]) return;
    size_t stride = slot_stride(t->capacity);
    if (written < t->warm[b]) written = t->warm[b];
    if (written > stride) written = stride;
    slots_fill f = {t, b, written};
    threads_for_ranges(w->workers, stride - written, SLOT_FILL_GRAIN, fill_range, &f);
    t->filled[b] = true;
}

static void touch_range(size_t begin, size_t end, int worker, void *p) {
    (void)worker;
    memset((char *)p + begin, 0, end - begin);
}

void tree_touch(const method_world *w, void *p, size_t bytes) {
    if (p && bytes) threads_for_ranges(w->workers, bytes, (size_t)1 << 20, touch_range, p);
}

void tree_slots_warm(const method_world *w, tree_slots *t, int b, size_t slots) {
    if (t->filled[b]) return;
    size_t stride = slot_stride(t->capacity), from = t->warm[b];
    size_t to = stride - from > slots ? from + slots : stride;
    slots_fill f = {t, b, from};
    threads_for_ranges(w->workers, to - from, SLOT_FILL_GRAIN, fill_range, &f);
    t->warm[b] = to;
    t->filled[b] = to == stride;
}

/* With more than one worker, the last search left the slots' lines in other cores' caches, and
 * an ordinary store would first take each line from there. Streaming stores do not; measured on
 * the octree's refit, 2 threads, in the VM's slow mood (update): moving 1e4 0.195 -> 0.118 ms,
 * 1e5 0.94-0.99 -> 0.63-0.67, 3e5 2.7-2.8 -> 2.0-2.1; but 1e6 7.8-7.9 -> 8.3-8.5: its 28 MB of
 * slots do not stay in caches anyway, and the measure and the relayout read them again soon
 * after, from memory. Hence the limit of 2^19 slots. */
bool tree_slots_stream(const method_world *w, const tree_slots *s) {
    return w->workers > 1 && s->count <= (size_t)1 << 19;
}

void tree_slots_stream_block(tree_slots *s, int b, size_t s0, size_t count,
                             const tree_slot_block *blk) {
    for (int k = 0; k < 3; k++) {
        simd_stream_floats(s->smin[b][k] + s0, blk->min[k], count);
        simd_stream_floats(s->smax[b][k] + s0, blk->max[k], count);
    }
}

void *tree_slots_scratch(tree_slots *t, int b, size_t *bytes) {
    t->filled[b] = false;
    t->warm[b] = 0;
    *bytes = t->block[b] ? slot_block_bytes(t->capacity) : 0;
    return t->block[b];
}

void tree_slots_release(const method_world *w, tree_slots *t) {
    for (int b = 0; b < 2; b++)
        if (t->block[b]) heap_free(w->heap, t->block[b], slot_block_bytes(t->capacity));
    memset(t, 0, sizeof *t);
}

/* A worker's list block (seven columns) and hit block (four), for `cap` entries. */
static size_t list_bytes(size_t cap) {
    return (cap + SIMD_PAD + 15) / 16 * 16 * 7 * sizeof(float);
}

static size_t hit_bytes(size_t cap) {
    return (cap + SIMD_PAD + 15) / 16 * 16 * 4 * sizeof(uint32_t);
}

bool tree_worker_reserve(tree_worker *k, size_t list_need, size_t hit_need, bool exact) {
    if (list_need > k->list_capacity) {
        size_t cap = exact ? 0 : k->list_capacity * 2;
        if (cap < list_need) cap = list_need;
        if (cap < 256) cap = 256;
        size_t stride = (cap + SIMD_PAD + 15) / 16 * 16;
        size_t bytes = stride * 7 * sizeof(float);
        float *block = heap_alloc(k->heap, bytes);
        if (!block) return false;
        for (int c = 0; c < 7; c++) {
            float *col = block + stride * (size_t)c;
            const float *old = c < 3 ? k->lmin[c] : c < 6 ? k->lmax[c - 3] : (float *)k->lid;
            if (old) memcpy(col, old, k->list_capacity * sizeof(float));
        }
        heap_free(k->heap, k->lmin[0], list_bytes(k->list_capacity));
        for (int c = 0; c < 3; c++) {
            k->lmin[c] = block + stride * (size_t)c;
            k->lmax[c] = block + stride * (size_t)(3 + c);
        }
        k->lid = (uint32_t *)(block + stride * 6);
        k->list_capacity = cap;
    }
    if (hit_need > k->hit_capacity) {
        size_t cap = exact ? 0 : k->hit_capacity * 2;
        if (cap < hit_need) cap = hit_need;
        /* Room for many short rows, so that a pair kernel call covers a whole small node, and
         * for the most pairs two leaves can make (simd_boxes_cross_pairs), so that the buffer
         * does not grow in steady state when a crowded crossing first turns up. */
        size_t least = (size_t)SIMD_CROSS_MAX * SIMD_CROSS_MAX + SIMD_PAD + 1;
        if (cap < least) cap = least;
        size_t stride = (cap + SIMD_PAD + 15) / 16 * 16;
        uint32_t *block = heap_alloc(k->heap, stride * 4 * sizeof(uint32_t));
        if (!block) return false;
        heap_free(k->heap, k->hits, hit_bytes(k->hit_capacity));
        k->hits = block;
        k->rows = block + stride;
        k->ids = block + 2 * stride;
        k->scratch = block + 3 * stride;
        k->hit_capacity = cap;
    }
    return true;
}

bool tree_workers_ready(const method_world *w, tree_workers *ws) {
    if (ws->count < w->workers) {
        size_t old = (size_t)ws->count, cap = old;
        if (!heap_grow(w->heap, (void **)&ws->at, &cap, (size_t)w->workers, sizeof(tree_worker),
                       old))
            return false;
        memset(ws->at + old, 0, (cap - old) * sizeof(tree_worker));
        ws->count = (int)cap;
    }
    size_t list_need = 0, hit_need = 0;
    for (int i = 0; i < ws->count; i++) {
        if (ws->at[i].list_capacity > list_need) list_need = ws->at[i].list_capacity;
        if (ws->at[i].hit_capacity > hit_need) hit_need = ws->at[i].hit_capacity;
    }
    for (int i = 0; i < ws->count; i++) ws->at[i].heap = w->heap;
    for (int i = 0; i < w->workers; i++)
        if (!tree_worker_reserve(&ws->at[i], list_need, hit_need, true)) return false;
    return true;
}

void tree_workers_release(const method_world *w, tree_workers *ws) {
    for (int i = 0; i < ws->count; i++) {
        heap_free(w->heap, ws->at[i].lmin[0], list_bytes(ws->at[i].list_capacity));
        heap_free(w->heap, ws->at[i].hits, hit_bytes(ws->at[i].hit_capacity));
    }
    heap_free(w->heap, ws->at, (size_t)ws->count * sizeof(tree_worker));
    ws->at = NULL;
    ws->count = 0;
}

void tree_emit(const method_world *w, tree_worker *k, pairs_writer *wr, uint32_t qid,
               const uint32_t *pos_to_id, size_t h) {
    if (h == 0) return;
    for (size_t j = 0; j < h; j++) k->ids[j] = pos_to_id[k->hits[j]];
    h = store_exact_filter(w->store, w->config->dimensions, qid, k->ids, h, k->ids, k->scratch);
    pairs_writer_push_row(wr, qid, k->ids, h);
}

void tree_emit_pairs(const method_world *w, tree_worker *k, pairs_writer *wr,
                     const uint32_t *row_id, const uint32_t *col_id, size_t h) {
    if (h == 0) return;
    if (w->store->sphere_count == 0 && !w->store->filter_category) {
        pairs_writer_push_hits(wr, row_id, k->rows, col_id, k->hits, h);
        return;
    }
    for (size_t j = 0; j < h;) {
        uint32_t r = k->rows[j];
        size_t m = 0;
        for (; j < h && k->rows[j] == r; j++) k->ids[m++] = col_id[k->hits[j]];
        uint32_t qid = row_id[r];
        m = store_exact_filter(w->store, w->config->dimensions, qid, k->ids, m, k->ids, k->scratch);
        pairs_writer_push_row(wr, qid, k->ids, m);
    }
}

void tree_test_within(const method_world *w, tree_worker *k, pairs_writer *wr,
                      const simd_boxes *boxes, const uint32_t *id, size_t lo, size_t hi, int dims) {
    size_t cap = k->hit_capacity + SIMD_PAD;
    for (size_t r = lo; r < hi;) {
        size_t h = simd_boxes_pairs_within(boxes, r, hi, dims, k->rows, k->hits, cap, &r);
        tree_emit_pairs(w, k, wr, id, id, h);
    }
}

void tree_test_cross(const method_world *w, tree_worker *k, pairs_writer *wr, const simd_boxes *a,
                     const uint32_t *a_id, size_t a_lo, size_t a_hi, const simd_boxes *b,
                     const uint32_t *b_id, size_t b_lo, size_t b_hi, int dims) {
    if (a_hi <= a_lo || b_hi <= b_lo) return;
    size_t na = a_hi - a_lo, nb = b_hi - b_lo;
    if (na * ((nb + 7) / 8) > nb * ((na + 7) / 8)) {
        tree_test_cross(w, k, wr, b, b_id, b_lo, b_hi, a, a_id, a_lo, a_hi, dims);
        return;
    }
    size_t cap = k->hit_capacity + SIMD_PAD;
    for (size_t r = a_lo; r < a_hi;) {
        size_t h =
            simd_boxes_vs_boxes_pairs(a, r, a_hi, b, b_lo, b_hi, dims, k->rows, k->hits, cap, &r);
        tree_emit_pairs(w, k, wr, a_id, b_id, h);
    }
}

bool tree_idle(const method_world *w, bool built_empty) {
    return built_empty && w->member_count == 0 && w->added_count == 0 && !w->stale;
}

bool tree_should_rebuild(const method_world *w, bool built, size_t count, size_t capacity,
                         uint64_t cost, uint64_t base_cost) {
    broadphase_update_policy policy = w->config->update;
    if (!built || count == 0 || w->stale || policy == BROADPHASE_UPDATE_REBUILD ||
        count + w->added_count > capacity)
        return true;
    if (policy != BROADPHASE_UPDATE_AUTO) return false;
    double n = (double)count, now = (double)cost / n, base = (double)base_cost / n;
    return now > (double)w->config->rebuild_threshold * (base > 1.0 ? base : 1.0) ||
           w->added_count > count / 4;
}

bool tree_workers_failed(tree_workers *ws) {
    bool failed = false;
    for (int i = 0; i < ws->count; i++) {
        failed |= ws->at[i].failed;
        ws->at[i].failed = false;
    }
    return failed;
}

bool tree_node_of_reserve(const method_world *w, uint32_t **node_of, size_t *capacity) {
    size_t old = *capacity;
    if (!heap_grow(w->heap, (void **)node_of, capacity, w->store->id_end, sizeof(uint32_t), old))
        return false;
    for (size_t i = old; i < *capacity; i++) (*node_of)[i] = WORLD_NONE;
    return true;
}

typedef struct forget_ctx {
    const method_world *w;
    uint32_t *node_of;
} forget_ctx;

static void forget_range(size_t begin, size_t end, int worker, void *p) {
    (void)worker;
    const forget_ctx *c = p;
    for (size_t i = begin; i < end; i++)
        if (!method_member(c->w, i)) c->node_of[i] = WORLD_NONE;
}

void tree_forget_free_ids(const method_world *w, uint32_t *node_of) {
    forget_ctx c = {w, node_of};
    threads_for_ranges(w->workers, w->store->id_end, 16384, forget_range, &c);
}

void tree_collect_moves(const uint32_t *dest, const uint32_t *slot_node, size_t begin, size_t end,
                        uint64_t *out) {
    for (size_t s = begin; s < end; s++)
        if (dest[s] != slot_node[s]) *out++ = (uint64_t)dest[s] << 32 | s;
}

enum { COPY_RUN_MIN = 16 }; /* shorter runs of staying slots are copied slot by slot */

/* Slots [s, e) of `from` to dst.. of `to`: long runs column by column (memcpy streams), short
 * ones slot by slot (a call per column costs more than the copy). */
void tree_copy_run(tree_slots *t, int from, int to, uint32_t s, uint32_t e, uint32_t dst,
                   uint32_t *restrict slot_node, uint32_t n) {
    size_t len = e - s;
    if (len < COPY_RUN_MIN) {
        for (size_t i = 0; i < len; i++) {
            tree_move_slot(t, from, (uint32_t)(s + i), to, (uint32_t)(dst + i));
            slot_node[dst + i] = n;
        }
        return;
    }
    for (int k = 0; k < 3; k++) {
        memcpy(t->smin[to][k] + dst, t->smin[from][k] + s, len * sizeof(float));
        memcpy(t->smax[to][k] + dst, t->smax[from][k] + s, len * sizeof(float));
    }
    memcpy(t->sid[to] + dst, t->sid[from] + s, len * sizeof(uint32_t));
    for (size_t i = 0; i < len; i++) slot_node[dst + i] = n;
}

void tree_copy_node(const method_world *w, tree_slots *t, const uint32_t *dest, uint32_t *slot_node,
                    uint32_t *node_of, const uint64_t *moves, unsigned src_shift, uint32_t n,
                    uint32_t begin, uint32_t end, uint32_t dst, size_t first, size_t last) {
    int from = t->cur, to = 1 - t->cur;
    /* The slots that stay come in long runs (few objects leave a node in one step): each run
     * is copied whole; between runs, removed objects lose their node. */
    for (uint32_t s = begin; s < end;) {
        uint32_t e = s;
        while (e < end && dest[e] == n) e++;
        if (e > s) {
            tree_copy_run(t, from, to, s, e, dst, slot_node, n);
            dst += e - s;
        }
        for (; e < end && dest[e] != n; e++)
            if (dest[e] == TREE_DEAD) node_of[t->sid[from][e]] = WORLD_NONE;
        s = e;
    }
    for (size_t m = first; m < last; m++) {
        uint32_t src = (uint32_t)(moves[m] >> src_shift);
        bool added = src & TREE_ADDED;
        uint32_t s = src & ~TREE_ADDED;
        uint32_t id = added ? w->added[s] : t->sid[from][s];
        for (int k = 0; k < 3; k++) {
            t->smin[to][k][dst] = added ? w->store->box[id].lo[k] : t->smin[from][k][s];
            t->smax[to][k][dst] = added ? w->store->box[id].hi[k] : t->smax[from][k][s];
        }
        slot_node[dst] = n;
        t->sid[to][dst++] = id;
        node_of[id] = n;
    }
}
