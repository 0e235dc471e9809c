/* The sweep method's pair search: each column job sweeps its columns, each column against
 * itself and against the columns ahead of it; each large-object job walks the hierarchy of
 * bounds for its large objects. A column's windows are tested 8 boxes at a time
 * (simd_boxes_sweep_pairs), the large objects' leaves too (simd_box_vs_boxes), and every
 * candidate goes through the exact filter (tree_emit_pairs, tree_emit). */
#include "sweep_internal.h"

#include "overlap.h"

size_t sweep_hit_need(const sweep *s) {
    size_t windows = (size_t)(1 + SWEEP_NEIGHBOURS);
    size_t columns = windows * ((size_t)s->max_column + SIMD_PAD);
    size_t leaf = (size_t)s->leaf + SIMD_PAD;
    return columns > leaf ? columns : leaf;
}

/* The pairs between slots [a0, a1) and [b0, b1) (within: the same range), both sorted by min x,
 * through the exact filter. */
static void sweep_pairs(const sweep_ctx *c, tree_worker *k, pairs_writer *wr,
                        const simd_boxes *boxes, uint32_t a0, uint32_t a1, uint32_t b0, uint32_t b1,
                        int within) {
    if (a0 >= a1 || b0 >= b1) return;
    const uint32_t *sid = c->s->slots.sid[c->s->slots.cur];
    size_t cap = k->hit_capacity + SIMD_PAD;
    for (size_t r = a0; r < a1;) {
        size_t h = simd_boxes_sweep_pairs(boxes, r, a1, boxes, b0, b1, c->s->reach, within, c->dims,
                                          k->rows, k->hits, cap, &r);
        tree_emit_pairs(c->w, k, wr, sid, sid, h);
    }
}

static void sweep_columns(const sweep_ctx *c, tree_worker *k, pairs_writer *wr, size_t job) {
    const sweep *s = c->s;
    const tree_slots *t = &s->slots;
    simd_boxes boxes = tree_slots_boxes(t);
    uint32_t gy = s->grid.size[0], gz = s->grid.size[1];
    for (uint32_t col = s->job_col[job]; col < s->job_col[job + 1]; col++) {
        uint32_t begin = s->col_start[col], end = s->col_start[col + 1];
        if (begin == end) continue;
        uint32_t cy = col / gz, cz = col % gz;
        /* The columns ahead: those a pair with a column behind would be met from. */
        uint32_t ahead[SWEEP_NEIGHBOURS], count = 0;
        if (s->grid.axes == 2) {
            if (cz + 1 < gz) ahead[count++] = col + 1;
            if (cy + 1 < gy) {
                uint32_t below = col + gz;
                if (cz > 0) ahead[count++] = below - 1;
                ahead[count++] = below;
                if (cz + 1 < gz) ahead[count++] = below + 1;
            }
        } else if (cy + 1 < gy) {
            ahead[count++] = col + 1;
        }
        sweep_pairs(c, k, wr, &boxes, begin, end, begin, end, 1);
        for (uint32_t m = 0; m < count; m++)
            sweep_pairs(c, k, wr, &boxes, begin, end, s->col_start[ahead[m]],
                        s->col_start[ahead[m] + 1], 0);
    }
}

/* Whether two boxes (as min x, y, z, max x, y, z) overlap on `dims` axes. */
static inline bool overlaps(const float *node, const float qmin[3], const float qmax[3], int dims) {
    for (int a = 0; a < dims; a++)
        if (node[a] > qmax[a] || node[3 + a] < qmin[a]) return false;
    return true;
}

/* Large object at slot p against every slot: the small ones, and the large ones after it. */
static void sweep_large(const sweep_ctx *c, tree_worker *k, pairs_writer *wr, uint32_t p) {
    const sweep *s = c->s;
    const tree_slots *t = &s->slots;
    simd_boxes boxes = tree_slots_boxes(t);
    const uint32_t *sid = t->sid[t->cur];
    int dims = c->dims;
    float qmin[3] = {boxes.min[0][p], boxes.min[1][p], boxes.min[2][p]};
    float qmax[3] = {boxes.max[0][p], boxes.max[1][p], boxes.max[2][p]};
    uint64_t stack[SWEEP_FANOUT * SWEEP_MAX_LEVELS];
    size_t top = 0;
    stack[top++] = (uint64_t)(s->levels - 1) << 32;
    while (top) {
        uint64_t handle = stack[--top];
        int level = (int)(handle >> 32);
        size_t i = (uint32_t)handle;
        if (!overlaps(sweep_node(s, level, i), qmin, qmax, dims)) continue;
        if (level > 0) {
            size_t first = i * SWEEP_FANOUT, last = first + SWEEP_FANOUT;
            if (last > s->level_nodes[level - 1]) last = s->level_nodes[level - 1];
            for (size_t j = last; j-- > first;) stack[top++] = (uint64_t)(level - 1) << 32 | j;
            continue;
        }
        size_t from = i * s->leaf, to = from + s->leaf < s->count ? from + s->leaf : s->count;
        size_t h = simd_box_vs_boxes(qmin, qmax, &boxes, from, to, dims, k->hits), kept = 0;
        for (size_t j = 0; j < h; j++) {
            uint32_t q = k->hits[j];
            k->hits[kept] = q;
            kept += q < s->small || q > p;
        }
        tree_emit(c->w, k, wr, sid[p], sid, kept);
    }
}

void sweep_job(size_t job, int worker, void *p) {
    const sweep_ctx *c = p;
    const sweep *s = c->s;
    tree_worker *k = &s->workers.at[worker];
    pairs_writer wr = pairs_writer_begin(c->w->pairs, worker);
    if (job < s->column_jobs) {
        sweep_columns(c, k, &wr, job);
        return;
    }
    size_t first = s->small + (job - s->column_jobs) * SWEEP_LARGE_PER_JOB;
    size_t last = first + SWEEP_LARGE_PER_JOB < s->count ? first + SWEEP_LARGE_PER_JOB : s->count;
    for (size_t q = first; q < last; q++) sweep_large(c, k, &wr, (uint32_t)q);
}
