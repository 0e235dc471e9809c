/* The kd-tree's pair search: each job walks a subtree (or one piece of a large node's own objects)
 * with the ancestors' objects that reach it, testing every node's own objects against each other
 * and against the list carried down from parent to child, all with the SIMD kernels. */
#include "kdtree_internal.h"

#include "bits.h"
#include "overlap.h"
#include "tree.h"
#include "method.h"

#include <math.h>

/* An internal node's objects straddle its plane, so they span a thin slab along its axis, and
 * most of the list [*lb, *le) misses it: two selections keep the entries that reach the slab of
 * own objects [lo, hi) (min <= its top, then max >= its bottom), placed after *le, where the
 * children's lists go later, and the range is narrowed to them. False on out of memory. */
static bool narrow_list(const kd_search_ctx *c, tree_worker *k, const kd_node *node, uint32_t lo,
                        uint32_t hi, size_t *lb, size_t *le) {
    int x = node->axis;
    float slab_lo = INFINITY, slab_hi = -INFINITY;
    for (uint32_t i = lo; i < hi; i++) {
        slab_lo = c->slots.min[x][i] < slab_lo ? c->slots.min[x][i] : slab_lo;
        slab_hi = c->slots.max[x][i] > slab_hi ? c->slots.max[x][i] : slab_hi;
    }
    size_t len = *le - *lb;
    if (!tree_worker_reserve(k, *le + 2 * len + 2 * SIMD_PAD, 0, false)) {
        k->failed = true;
        return false;
    }
    simd_boxes all;
    for (int a = 0; a < 3; a++) {
        all.min[a] = k->lmin[a];
        all.max[a] = k->lmax[a];
    }
    size_t first = *le;
    size_t below = simd_boxes_select(&all, k->lid, *lb, *le, c->dims, x, bits_next_up(slab_hi), 0,
                                     k->lmin, k->lmax, k->lid, first);
    size_t second = first + below + SIMD_PAD;
    size_t kept = simd_boxes_select(&all, k->lid, first, first + below, c->dims, x,
                                    bits_next_down(slab_lo), 1, k->lmin, k->lmax, k->lid, second);
    *lb = second;
    *le = second + kept;
    return true;
}

/* A small node's own objects [lo, hi) against each other (and those up to own_end) and against
 * the list [lb, le), with the pair kernels: a few calls per node instead of two per object. The
 * shorter side becomes the rows, since each row costs its width rounded up to 8. */
static void test_small_own(const kd_search_ctx *c, tree_worker *k, pairs_writer *wr,
                           const kd_node *node, uint32_t lo, uint32_t hi, size_t lb, size_t le) {
    const kdtree *t = c->t;
    const uint32_t *sid = t->slots.sid[t->slots.cur];
    tree_test_within(c->w, k, wr, &c->slots, sid, lo, hi, c->dims);
    tree_test_cross(c->w, k, wr, &c->slots, sid, lo, hi, &c->slots, sid, hi, node->end, c->dims);
    if (le <= lb || hi <= lo) return;
    if (!is_leaf(node) && le - lb > LIST_NARROW_MIN && !narrow_list(c, k, node, lo, hi, &lb, &le))
        return;
    simd_boxes list = tree_worker_list(k);
    tree_test_cross(c->w, k, wr, &c->slots, sid, lo, hi, &list, k->lid, lb, le, c->dims);
}

/* Own objects [lo, hi) of `node` against its own objects after them and against the list
 * [lb, le). An internal node first narrows the list to the entries that reach its objects' slab.
 * A sorted (sweep) node then narrows each query to the run that can reach it; a small one tests
 * its objects against the list with the pair kernels. */
static void test_own(const kd_search_ctx *c, tree_worker *k, pairs_writer *wr, const kd_node *node,
                     uint32_t lo, uint32_t hi, size_t lb, size_t le) {
    const kdtree *t = c->t;
    int b = t->slots.cur;
    uint32_t own_end = node->end;
    int s = node->sweep;
    if (s == NO_SWEEP) {
        test_small_own(c, k, wr, node, lo, hi, lb, le);
        return;
    }
    for (uint32_t i = lo; i < hi; i++) {
        float qmin[3] = {t->slots.smin[b][0][i], t->slots.smin[b][1][i], t->slots.smin[b][2][i]};
        float qmax[3] = {t->slots.smax[b][0][i], t->slots.smax[b][1][i], t->slots.smax[b][2][i]};
        uint32_t qid = t->slots.sid[b][i];
        /* The run is short (objects within one extent along the sweep axis) and it is tested
         * right after, so walking it beats a search. */
        const float *key = t->slots.smin[b][s];
        uint32_t end = i + 1;
        while (end < own_end && key[end] <= qmax[s]) end++;
        size_t h = simd_box_vs_boxes(qmin, qmax, &c->slots, i + 1, end, c->dims, k->hits);
        tree_emit(c->w, k, wr, qid, t->slots.sid[b], h);
    }
    if (le <= lb || hi <= lo) return;
    if (!is_leaf(node) && !narrow_list(c, k, node, lo, hi, &lb, &le)) return;
    for (size_t x = lb; x < le; x++) {
        /* In 2D the list's z columns are not copied. */
        float qmin[3] = {k->lmin[0][x], k->lmin[1][x], c->dims == 3 ? k->lmin[2][x] : 0.0f};
        float qmax[3] = {k->lmax[0][x], k->lmax[1][x], c->dims == 3 ? k->lmax[2][x] : 0.0f};
        /* Rounded down: an object whose min is below this ends before the query begins. */
        float from = bits_next_down(qmin[s] - node->reach);
        uint32_t first = tree_bound(t->slots.smin[b][s], lo, hi, from, false);
        uint32_t last = tree_bound(t->slots.smin[b][s], first, hi, qmax[s], true);
        if (first == last) continue;
        size_t h = simd_box_vs_boxes(qmin, qmax, &c->slots, first, last, c->dims, k->hits);
        tree_emit(c->w, k, wr, k->lid[x], t->slots.sid[b], h);
    }
}

static void list_push(tree_worker *k, size_t at, const float *const mn[3], const float *const mx[3],
                      const uint32_t *ids, size_t i) {
    for (int a = 0; a < 3; a++) {
        k->lmin[a][at] = mn[a][i];
        k->lmax[a][at] = mx[a][i];
    }
    k->lid[at] = ids[i];
}

static void search_node(const kd_search_ctx *c, tree_worker *k, pairs_writer *wr, uint32_t n,
                        size_t lb, size_t le) {
    const kdtree *t = c->t;
    const kd_node *node = &t->nodes[n];
    int b = t->slots.cur;
    size_t own = node->end - node->begin;
    if (!tree_worker_reserve(k, le, (own > le - lb ? own : le - lb) + 1, false)) {
        k->failed = true;
        return;
    }
    test_own(c, k, wr, node, node->begin, node->end, lb, le);
    if (is_leaf(node)) return;
    int axis = node->axis;
    float plane = node->plane;
    for (int side = 0; side < 2; side++) {
        if (node->child[side] == NONE) continue;
        if (!tree_worker_reserve(k, le + (le - lb) + own + SIMD_PAD, 0, false)) {
            k->failed = true;
            return;
        }
        /* An object reaches the left child only if its min is below the plane (the child's
         * objects all end before it), the right child only if its max is above. */
        simd_boxes list;
        for (int a = 0; a < 3; a++) {
            list.min[a] = k->lmin[a];
            list.max[a] = k->lmax[a];
        }
        size_t at = le;
        at += simd_boxes_select(&list, k->lid, lb, le, c->dims, axis, plane, side, k->lmin, k->lmax,
                                k->lid, at);
        at += simd_boxes_select(&c->slots, t->slots.sid[b], node->begin, node->end, c->dims, axis,
                                plane, side, k->lmin, k->lmax, k->lid, at);
        search_node(c, k, wr, node->child[side], le, at);
    }
}

/* The ancestors' objects that reach node r's cell, into the list from 0; returns its length. */
static size_t ancestors_list(const kd_search_ctx *c, tree_worker *k, uint32_t r, bool *ok) {
    const kdtree *t = c->t;
    const kd_node *target = &t->nodes[r];
    int b = t->slots.cur;
    const float *const smin[3] = {t->slots.smin[b][0], t->slots.smin[b][1], t->slots.smin[b][2]};
    const float *const smax[3] = {t->slots.smax[b][0], t->slots.smax[b][1], t->slots.smax[b][2]};
    size_t at = 0;
    for (uint32_t a = target->parent; a != NONE; a = t->nodes[a].parent) {
        const kd_node *anc = &t->nodes[a];
        if (!tree_worker_reserve(k, at + (anc->end - anc->begin) + 1, 0, false)) {
            *ok = false;
            return 0;
        }
        /* Objects reach the cell when min < cell_hi and max > cell_lo on every axis. A sorted
         * ancestor's objects that reach it on its sweep axis (max above cell_lo, so min above
         * cell_lo - reach; min below cell_hi) form one run. */
        uint32_t first = anc->begin, last = anc->end;
        int s = anc->sweep;
        if (s != NO_SWEEP) {
            /* None reach when the cell lies beyond the span of the ancestor's objects along its
             * split axis: only the nearest ancestors split on each axis usually remain. */
            int x = anc->axis;
            if (!(anc->slab_lo < target->cell_hi[x] && anc->slab_hi > target->cell_lo[x])) continue;
            first = tree_bound(smin[s], first, last,
                               bits_next_down(target->cell_lo[s] - anc->reach), false);
            last = tree_bound(smin[s], first, last, target->cell_hi[s], false);
        }
        for (uint32_t i = first; i < last; i++) {
            bool reaches = true;
            for (int d = 0; d < c->dims; d++)
                reaches &= (smin[d][i] < target->cell_hi[d]) & (smax[d][i] > target->cell_lo[d]);
            list_push(k, at, smin, smax, t->slots.sid[b], i);
            at += reaches;
        }
    }
    return at;
}

void kd_search_job(size_t job, int worker, void *p) {
    const kd_search_ctx *c = p;
    kdtree *t = c->t;
    tree_worker *k = &t->workers.at[worker];
    const kd_job *j = &t->jobs[job];
    pairs_writer wr = pairs_writer_begin(c->w->pairs, worker);
    bool ok = true;
    size_t n0 = ancestors_list(c, k, j->node, &ok);
    if (!ok) {
        k->failed = true;
    } else if (j->kind == JOB_SUBTREE) {
        search_node(c, k, &wr, j->node, 0, n0);
    } else {
        const kd_node *node = &t->nodes[j->node];
        size_t own = node->end - node->begin;
        if (!tree_worker_reserve(k, n0, (own > n0 ? own : n0) + 1, false))
            k->failed = true;
        else
            test_own(c, k, &wr, node, j->lo, j->hi, 0, n0);
    }
}

/* Subtrees small enough become one job; above them, each node's own objects are cut into
 * pieces. The cut depends on the tree only, never on the thread count. */
void kd_collect_jobs(kdtree *t, uint32_t n) {
    const kd_node *node = &t->nodes[n];
    /* A node owning many objects (most objects overlap most others, as in a dense scene) is cut
     * into pieces even in a small subtree: its own tests are quadratic. */
    if ((node->sub_end - node->begin <= JOB_OBJECTS || is_leaf(node)) &&
        node->end - node->begin <= OWN_PIECE) {
        t->jobs[t->job_count++] = (kd_job){n, JOB_SUBTREE, 0, 0};
        return;
    }
    for (uint32_t lo = node->begin; lo < node->end; lo += OWN_PIECE) {
        uint32_t hi = node->end - lo > OWN_PIECE ? lo + OWN_PIECE : node->end;
        t->jobs[t->job_count++] = (kd_job){n, JOB_OWN, lo, hi};
    }
    for (int s = 0; s < 2; s++)
        if (node->child[s] != NONE) kd_collect_jobs(t, node->child[s]);
}
