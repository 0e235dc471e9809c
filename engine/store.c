/* The object store: the columns by id (box records, sphere centres and radii, stamps, change
 * epochs, kinds) in one block, grown geometrically with sentinels in the free ids; the filter
 * and static columns, made on first use; and the exact filter that every pair and query passes
 * through after the box test. */
#include "world.h"

#include "overlap.h"

#include <math.h>
#include <string.h>

static size_t round_up(size_t n, size_t to) {
    return (n + to - 1) / to * to;
}

/* ---- columns ----------------------------------------------------------------------------- */

enum { FLOAT_COLUMNS = 4 }; /* center[3], radius */

static size_t column_stride(size_t capacity) {
    return round_up(capacity, 16); /* floats; 16 floats = 64 bytes */
}

/* One block: the box records, then the float columns, the stamps, the change epochs and the
 * kinds. */
static size_t column_block_bytes(size_t capacity) {
    size_t s = column_stride(capacity);
    return s * sizeof(world_box) + s * sizeof(float) * FLOAT_COLUMNS + 2 * s * sizeof(uint32_t) +
           round_up(s, 64);
}

void store_set_sentinel(broadphase_world *w, size_t i) {
    world_box *b = &w->store.box[i];
    for (int k = 0; k < 3; k++) {
        b->lo[k] = INFINITY;
        b->hi[k] = -INFINITY;
        w->store.center[k][i] = 0.0f;
    }
    b->lo[3] = b->hi[3] = 0.0f;
    w->store.radius[i] = 0.0f;
    w->store.kind[i] = OBJECT_FREE;
}

bool store_reserve(broadphase_world *w, size_t need) {
    if (need <= w->store.capacity && w->store.column_block) return true;
    size_t cap = w->store.capacity + w->store.capacity / 2;
    if (cap < need) cap = need;
    if (cap < 64) cap = 64;
    cap = round_up(cap, 16);
    size_t stride = column_stride(cap);
    char *block = heap_alloc(&w->heap, column_block_bytes(cap));
    if (!block) return false;
    world_box *box = (world_box *)(void *)block;
    float *f = (float *)(void *)(box + stride);
    float **cols[FLOAT_COLUMNS] = {&w->store.center[0], &w->store.center[1], &w->store.center[2],
                                   &w->store.radius};
    uint32_t *stamp = (uint32_t *)(f + stride * FLOAT_COLUMNS);
    uint32_t *changed = stamp + stride;
    uint8_t *kind = (uint8_t *)(changed + stride);
    if (w->store.box) memcpy(box, w->store.box, w->store.id_end * sizeof(world_box));
    w->store.box = box;
    for (int c = 0; c < FLOAT_COLUMNS; c++) {
        float *old = *cols[c];
        *cols[c] = f + stride * (size_t)c;
        if (old) memcpy(*cols[c], old, w->store.id_end * sizeof(float));
    }
    if (w->store.stamp) memcpy(stamp, w->store.stamp, w->store.id_end * sizeof(uint32_t));
    if (w->store.changed) memcpy(changed, w->store.changed, w->store.id_end * sizeof(uint32_t));
    if (w->store.kind) memcpy(kind, w->store.kind, w->store.id_end);
    w->store.stamp = stamp;
    w->store.changed = changed;
    w->store.kind = kind;
    for (size_t i = w->store.id_end; i < stride; i++) {
        store_set_sentinel(w, i);
        stamp[i] = changed[i] = 0;
    }
    heap_free(&w->heap, w->store.column_block,
              w->store.column_block ? column_block_bytes(w->store.capacity) : 0);
    w->store.column_block = block;
    w->store.capacity = cap;
    return true;
}

void store_sphere_columns(const broadphase_world *w, simd_spheres *out) {
    for (int k = 0; k < 3; k++) out->c[k] = w->store.center[k];
    out->r = w->store.radius;
}

/* A sphere against candidate boxes: the boxes are gathered from their records into small
 * columns, a batch at a time, for the SIMD kernel. */
enum { EXACT_BATCH = 64 };

static size_t sphere_vs_boxes(const broadphase_world *w, const float qc[3], float qr,
                              const uint32_t *ids, size_t count, uint32_t *out) {
    static const uint32_t positions[EXACT_BATCH] = {
        0,  1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
        22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43,
        44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63};
    float lo[3][EXACT_BATCH + SIMD_PAD], hi[3][EXACT_BATCH + SIMD_PAD];
    uint32_t hit[EXACT_BATCH];
    simd_boxes cols = {{lo[0], lo[1], lo[2]}, {hi[0], hi[1], hi[2]}};
    size_t kept = 0;
    for (size_t at = 0; at < count; at += EXACT_BATCH) {
        size_t n = count - at < EXACT_BATCH ? count - at : EXACT_BATCH;
        for (size_t i = 0; i < n; i++) {
            const world_box *b = &w->store.box[ids[at + i]];
            for (int k = 0; k < 3; k++) {
                lo[k][i] = b->lo[k];
                hi[k][i] = b->hi[k];
            }
        }
        size_t h = simd_sphere_vs_boxes(qc, qr, &cols, positions, n, w->config.dimensions, hit);
        for (size_t i = 0; i < h; i++) out[kept++] = ids[at + hit[i]];
    }
    return kept;
}

/* Of the candidates, those the collision filters let pair with `id`, into out (may alias). */
static size_t filter_candidates(const broadphase_world *w, uint32_t id, const uint32_t *candidates,
                                size_t count, uint32_t *out) {
    const uint32_t *cat = w->store.filter_category, *mask = w->store.filter_mask,
                   *group = w->store.filter_group;
    uint32_t ca = cat[id], ma = mask[id], ga = group[id];
    size_t kept = 0;
    for (size_t i = 0; i < count; i++) {
        uint32_t c = candidates[i];
        out[kept] = c;
        kept += (ca & mask[c]) != 0 && (cat[c] & ma) != 0 && (ga == 0 || group[c] != ga);
    }
    return kept;
}

size_t store_exact_filter(const broadphase_world *w, uint32_t id, const uint32_t *candidates,
                          size_t count, uint32_t *out, uint32_t *scratch) {
    if (w->store.filter_category) {
        count = filter_candidates(w, id, candidates, count, out);
        candidates = out;
    }
    if (w->store.sphere_count == 0) {
        if (out != candidates) memmove(out, candidates, count * sizeof(uint32_t));
        return count;
    }
    int dims = w->config.dimensions;
    size_t boxes = 0, spheres = 0;
    for (size_t i = 0; i < count; i++) {
        uint32_t c = candidates[i];
        if (w->store.kind[c] == OBJECT_SPHERE)
            scratch[spheres++] = c;
        else
            out[boxes++] = c;
    }
    simd_spheres sc;
    store_sphere_columns(w, &sc);
    if (w->store.kind[id] == OBJECT_BOX) {
        const world_box *q = &w->store.box[id];
        return boxes + simd_box_vs_spheres(q->lo, q->hi, &sc, scratch, spheres, dims, out + boxes);
    }
    float qc[3] = {w->store.center[0][id], w->store.center[1][id], w->store.center[2][id]};
    float qr = w->store.radius[id];
    boxes = sphere_vs_boxes(w, qc, qr, out, boxes, out);
    return boxes + simd_sphere_vs_spheres(qc, qr, &sc, scratch, spheres, dims, out + boxes);
}

const broadphase_filter store_default_filter = {1u, 0xFFFFFFFFu, 0u};

bool store_filter_reserve(broadphase_world *w, size_t need) {
    if (need <= w->store.filter_capacity) return true;
    size_t old = w->store.filter_capacity, cap = old + old / 2;
    if (cap < need) cap = need;
    uint32_t **cols[3] = {&w->store.filter_category, &w->store.filter_mask, &w->store.filter_group};
    uint32_t *grown[3] = {NULL, NULL, NULL};
    for (int c = 0; c < 3; c++) {
        grown[c] = heap_alloc(&w->heap, cap * sizeof(uint32_t));
        if (!grown[c]) {
            for (int d = 0; d < c; d++) heap_free(&w->heap, grown[d], cap * sizeof(uint32_t));
            return false;
        }
        if (old) memcpy(grown[c], *cols[c], old * sizeof(uint32_t));
    }
    for (size_t i = old; i < cap; i++) {
        grown[0][i] = store_default_filter.category;
        grown[1][i] = store_default_filter.mask;
        grown[2][i] = store_default_filter.group;
    }
    for (int c = 0; c < 3; c++) {
        heap_free(&w->heap, *cols[c], old * sizeof(uint32_t));
        *cols[c] = grown[c];
    }
    w->store.filter_capacity = cap;
    return true;
}

bool store_static_reserve(broadphase_world *w, size_t need) {
    size_t old = w->store.static_capacity;
    if (!heap_grow(&w->heap, (void **)&w->store.is_static, &w->store.static_capacity, need, 1, old))
        return false;
    memset(w->store.is_static + old, 0, w->store.static_capacity - old);
    return true;
}

void store_release(broadphase_world *w) {
    heap_free(&w->heap, w->store.column_block, column_block_bytes(w->store.capacity));
    heap_free(&w->heap, w->store.free_ids, w->store.free_capacity * sizeof(uint32_t));
    heap_free(&w->heap, w->store.filter_category, w->store.filter_capacity * sizeof(uint32_t));
    heap_free(&w->heap, w->store.filter_mask, w->store.filter_capacity * sizeof(uint32_t));
    heap_free(&w->heap, w->store.filter_group, w->store.filter_capacity * sizeof(uint32_t));
    heap_free(&w->heap, w->store.is_static, w->store.static_capacity);
}
