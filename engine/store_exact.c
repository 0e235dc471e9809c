/* The exact test that every pair and query passes through after the box test: the collision
 * filters, then the shapes (a sphere against boxes and spheres), on the store's columns. */
#include "store.h"

#include "overlap.h"

#include <string.h>

void store_sphere_columns(const store *s, simd_spheres *out) {
    for (int k = 0; k < 3; k++) out->c[k] = s->center[k];
    out->r = s->radius;
}

/* A sphere against candidate boxes: the boxes are gathered from their records into small
 * columns, a batch at a time, for the SIMD kernel. */
enum { EXACT_BATCH = 64 };

static size_t sphere_vs_boxes(const store *s, int dims, const float qc[3], float qr,
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
            const world_box *b = &s->box[ids[at + i]];
            for (int k = 0; k < 3; k++) {
                lo[k][i] = b->lo[k];
                hi[k][i] = b->hi[k];
            }
        }
        size_t h = simd_sphere_vs_boxes(qc, qr, &cols, positions, n, dims, hit);
        for (size_t i = 0; i < h; i++) out[kept++] = ids[at + hit[i]];
    }
    return kept;
}

/* Of the candidates, those the collision filters let pair with `id`, into out (may alias). */
static size_t filter_candidates(const store *s, uint32_t id, const uint32_t *candidates,
                                size_t count, uint32_t *out) {
    const uint32_t *cat = s->filter_category, *mask = s->filter_mask, *group = s->filter_group;
    uint32_t ca = cat[id], ma = mask[id], ga = group[id];
    size_t kept = 0;
    for (size_t i = 0; i < count; i++) {
        uint32_t c = candidates[i];
        out[kept] = c;
        kept += (ca & mask[c]) != 0 && (cat[c] & ma) != 0 && (ga == 0 || group[c] != ga);
    }
    return kept;
}

size_t store_exact_filter(const store *s, int dims, uint32_t id, const uint32_t *candidates,
                          size_t count, uint32_t *out, uint32_t *scratch) {
    if (s->filter_category) {
        count = filter_candidates(s, id, candidates, count, out);
        candidates = out;
    }
    if (s->sphere_count == 0) {
        if (out != candidates) memmove(out, candidates, count * sizeof(uint32_t));
        return count;
    }
    size_t boxes = 0, spheres = 0;
    for (size_t i = 0; i < count; i++) {
        uint32_t c = candidates[i];
        if (s->kind[c] == OBJECT_SPHERE)
            scratch[spheres++] = c;
        else
            out[boxes++] = c;
    }
    simd_spheres sc;
    store_sphere_columns(s, &sc);
    if (s->kind[id] == OBJECT_BOX) {
        const world_box *q = &s->box[id];
        return boxes + simd_box_vs_spheres(q->lo, q->hi, &sc, scratch, spheres, dims, out + boxes);
    }
    float qc[3] = {s->center[0][id], s->center[1][id], s->center[2][id]};
    float qr = s->radius[id];
    boxes = sphere_vs_boxes(s, dims, qc, qr, out, boxes, out);
    return boxes + simd_sphere_vs_spheres(qc, qr, &sc, scratch, spheres, dims, out + boxes);
}
