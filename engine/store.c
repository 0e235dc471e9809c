/* The object store: the columns by id (box records, sphere centres and radii, stamps, change
 * epochs, kinds) in one block, grown geometrically with sentinels in the free ids; the filter
 * and static columns, made on first use. The exact filter is store_exact.c. */
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
