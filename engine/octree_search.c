/* The octree's pair search (see octree.c): the jobs of the tree search (each node's objects
 * against each other and against the list of its ancestors' objects that reach it, neighbouring
 * subtrees crossed) and of the flat search (each leaf of the list against the later leaves it
 * may meet), and the cut of the tree into jobs. The flat search's jobs are here, not in
 * octree_flat.c, beside cross_leaves(), the kernel's caller that both searches run per pair of
 * leaves: without LTO, a hot loop and the functions it calls stay in one file. */
#include "octree_internal.h"

enum {
    JOB_OBJECTS = 4096,   /* subtrees up to this many objects are one search job */
    LIST_NARROW_MIN = 32, /* lists longer than this are narrowed to a node's own objects */
    FLAT_AHEAD = 2,       /* the flat search fetches the nodes of the leaf this far ahead */
};

/* ---- the tree search ------------------------------------------------------------------------- */

/* Copies the entries of `src` [lb, le) (ids src_ids) that overlap the box [lo, hi] to the list
 * from `at`; returns how many. The list must have room for le - lb + SIMD_PAD entries there. */
static size_t select_box(const oc_search_ctx *c, tree_worker *k, const simd_boxes *src,
                         const uint32_t *src_ids, size_t lb, size_t le, const float lo[3],
                         const float hi[3], size_t at) {
    if (le <= lb) return 0;
    size_t h = simd_box_vs_boxes(lo, hi, src, lb, le, c->dims, k->hits);
    for (size_t j = 0; j < h; j++) {
        uint32_t i = k->hits[j];
        for (int a = 0; a < 3; a++) {
            k->lmin[a][at + j] = src->min[a][i];
            k->lmax[a][at + j] = src->max[a][i];
        }
        k->lid[at + j] = src_ids[i];
    }
    return h;
}

static void fail(tree_worker *k) {
    k->failed = true;
}

/* Objects [lo, hi) of the node's own against each other and against [hi, rest_end); then own
 * objects [olo, ohi) against the list [lb, le), narrowed first to the entries that reach the
 * node's own objects when it is long. */
static void test_own(const oc_search_ctx *c, tree_worker *k, pairs_writer *wr, const oc_node *node,
                     uint32_t lo, uint32_t hi, uint32_t rest_end, uint32_t olo, uint32_t ohi,
                     size_t lb, size_t le) {
    const uint32_t *sid = c->t->slots.sid[c->t->slots.cur];
    tree_test_within(c->w, k, wr, &c->slots, sid, lo, hi, c->dims);
    tree_test_cross(c->w, k, wr, &c->slots, sid, lo, hi, &c->slots, sid, hi, rest_end, c->dims);
    if (le <= lb || ohi <= olo) return;
    if (le - lb > LIST_NARROW_MIN && node->sub_end > node->end) {
        if (!tree_worker_reserve(k, le + (le - lb) + SIMD_PAD, 0, false)) {
            fail(k);
            return;
        }
        simd_boxes list = tree_worker_list(k);
        size_t kept = select_box(c, k, &list, k->lid, lb, le, node->own_lo, node->own_hi, le);
        lb = le;
        le = lb + kept;
    }
    simd_boxes list = tree_worker_list(k);
    tree_test_cross(c->w, k, wr, &c->slots, sid, olo, ohi, &list, k->lid, lb, le, c->dims);
}

/* Without a branch per comparison: the child loop of cross() makes a mask of these. */
static bool boxes_meet(const oc_node *a, const oc_node *b, int dims) {
    unsigned m = 1;
    for (int k = 0; k < dims; k++)
        m &= (unsigned)(a->lo[k] <= b->hi[k]) & (unsigned)(b->lo[k] <= a->hi[k]);
    return m;
}

/* The list [lb, le) against every object of n's subtree (not the subtree's own pairs). */
static void list_vs_subtree(const oc_search_ctx *c, tree_worker *k, pairs_writer *wr, uint32_t n,
                            size_t lb, size_t le) {
    if (le <= lb) return;
    const octree *t = c->t;
    const oc_node *node = &t->nodes[n];
    size_t len = le - lb, own = node->end - node->begin;
    if (!tree_worker_reserve(k, le + 2 * len + 2 * SIMD_PAD, (own > len ? own : len) + SIMD_PAD + 1,
                             false)) {
        fail(k);
        return;
    }
    if (own)
        test_own(c, k, wr, node, node->begin, node->begin, node->begin, node->begin, node->end, lb,
                 le);
    for (int j = 0; j < t->nchild; j++) {
        uint32_t ci = node->child[j];
        if (!(node->live >> j & 1)) continue;
        const oc_node *child = &t->nodes[ci];
        simd_boxes list = tree_worker_list(k);
        size_t kept = select_box(c, k, &list, k->lid, lb, le, child->lo, child->hi, le);
        list_vs_subtree(c, k, wr, ci, le, le + kept);
    }
}

/* Two leaves whose bounds meet: the objects of each that reach the other's bounds, into the
 * list from `top`, then those against each other. The common case of cross() below. */
static void cross_leaves(const oc_search_ctx *c, tree_worker *k, pairs_writer *wr,
                         const oc_node *na, const oc_node *nb, size_t top) {
    size_t own_a = na->end - na->begin, own_b = nb->end - nb->begin;
    const uint32_t *sid = c->t->slots.sid[c->t->slots.cur];
    if (own_a <= SIMD_CROSS_MAX && own_b <= SIMD_CROSS_MAX) {
        size_t room = own_a * own_b + SIMD_PAD + 1;
        if (room > k->hit_capacity && !tree_worker_reserve(k, 0, room, false)) {
            fail(k);
            return;
        }
        /* The ids are read only when pairs come out; fetch them while the kernel runs. */
        __builtin_prefetch(sid + na->begin);
        __builtin_prefetch(sid + na->end - 1);
        __builtin_prefetch(sid + nb->begin);
        __builtin_prefetch(sid + nb->end - 1);
        size_t h =
            simd_boxes_cross_pairs(&c->slots, na->begin, na->end, na->lo, na->hi, &c->slots,
                                   nb->begin, nb->end, nb->lo, nb->hi, c->dims, k->rows, k->hits);
        if (h > 0) tree_emit_pairs(c->w, k, wr, sid, sid, h);
        return;
    }
    size_t most = own_a > own_b ? own_a : own_b;
    if (!tree_worker_reserve(k, top + own_a + own_b + 2 * SIMD_PAD, most + SIMD_PAD + 1, false)) {
        fail(k);
        return;
    }
    size_t ka = select_box(c, k, &c->slots, sid, na->begin, na->end, nb->lo, nb->hi, top);
    if (ka == 0) return;
    size_t kb = select_box(c, k, &c->slots, sid, nb->begin, nb->end, na->lo, na->hi, top + ka);
    if (kb == 0) return;
    simd_boxes list = tree_worker_list(k);
    tree_test_cross(c->w, k, wr, &list, k->lid, top, top + ka, &list, k->lid, top + ka,
                    top + ka + kb, c->dims);
}

/* Every pair between the disjoint subtrees a and b, using the list from `top`. In a strict
 * octree siblings' objects meet only on a shared face; in a loose one their enlarged cells
 * overlap, so neighbouring subtrees meet often. */
static void cross(const oc_search_ctx *c, tree_worker *k, pairs_writer *wr, uint32_t a, uint32_t b,
                  size_t top) {
    const octree *t = c->t;
    const oc_node *na = &t->nodes[a], *nb = &t->nodes[b];
    if (!boxes_meet(na, nb, c->dims)) return;
    /* Split the side with children (the larger when both have them); the other is the target. */
    bool a_split = na->sub_end > na->end, b_split = nb->sub_end > nb->end;
    if (!a_split && !b_split) {
        cross_leaves(c, k, wr, na, nb, top);
        return;
    }
    if (b_split && (!a_split || nb->sub_end - nb->begin > na->sub_end - na->begin)) {
        uint32_t x = a;
        a = b;
        b = x;
        na = &t->nodes[a];
        nb = &t->nodes[b];
    }
    size_t own = na->end - na->begin;
    if (own) {
        if (!tree_worker_reserve(k, top + own + SIMD_PAD, own + SIMD_PAD + 1, false)) {
            fail(k);
            return;
        }
        const uint32_t *sid = t->slots.sid[t->slots.cur];
        size_t kept = select_box(c, k, &c->slots, sid, na->begin, na->end, nb->lo, nb->hi, top);
        list_vs_subtree(c, k, wr, b, top, top + kept);
    }
    /* Two leaves go straight to the kernel: no call, no second bounds test. */
    bool b_leaf = nb->sub_end == nb->end;
    /* Which children meet b, as a mask computed without a branch per child; then only those
     * (a branch per child on its test mispredicts about half the time). */
    unsigned meet = 0;
    for (int j = 0; j < t->nchild; j++) {
        if (!(na->live >> j & 1)) continue;
        meet |= (unsigned)boxes_meet(&t->nodes[na->child[j]], nb, c->dims) << j;
    }
    while (meet) {
        int j = __builtin_ctz(meet);
        meet &= meet - 1;
        uint32_t cj = na->child[j];
        const oc_node *nc = &t->nodes[cj];
        if (b_leaf && nc->sub_end == nc->end)
            cross_leaves(c, k, wr, nc, nb, top);
        else
            cross(c, k, wr, cj, b, top);
    }
}

static void search_node(const oc_search_ctx *c, tree_worker *k, pairs_writer *wr, uint32_t n,
                        size_t lb, size_t le) {
    const octree *t = c->t;
    const oc_node *node = &t->nodes[n];
    size_t own = node->end - node->begin;
    size_t need = own > le - lb ? own : le - lb;
    if (!tree_worker_reserve(k, le + SIMD_PAD, need + SIMD_PAD + 1, false)) {
        fail(k);
        return;
    }
    test_own(c, k, wr, node, node->begin, node->end, node->end, node->begin, node->end, lb, le);
    const uint32_t *sid = t->slots.sid[t->slots.cur];
    for (int i = 0; i < t->nchild; i++) {
        if (!(node->live >> i & 1)) continue;
        for (int j = i + 1; j < t->nchild; j++)
            if (node->live >> j & 1) cross(c, k, wr, node->child[i], node->child[j], le);
    }
    for (int j = 0; j < t->nchild; j++) {
        uint32_t ci = node->child[j];
        if (!(node->live >> j & 1)) continue;
        const oc_node *child = &t->nodes[ci];
        if (!tree_worker_reserve(k, le + (le - lb) + own + 2 * SIMD_PAD, need + SIMD_PAD + 1,
                                 false)) {
            fail(k);
            return;
        }
        simd_boxes list = tree_worker_list(k);
        size_t at = le;
        at += select_box(c, k, &list, k->lid, lb, le, child->lo, child->hi, at);
        at += select_box(c, k, &c->slots, sid, node->begin, node->end, child->lo, child->hi, at);
        search_node(c, k, wr, ci, le, at);
    }
}

/* The ancestors' objects that reach node r's subtree, into the list from 0; returns its length. */
static size_t ancestors_list(const oc_search_ctx *c, tree_worker *k, uint32_t r, bool *ok) {
    const octree *t = c->t;
    const oc_node *target = &t->nodes[r];
    const uint32_t *sid = t->slots.sid[t->slots.cur];
    size_t at = 0;
    for (uint32_t a = target->parent; a != NONE; a = t->nodes[a].parent) {
        const oc_node *anc = &t->nodes[a];
        size_t own = anc->end - anc->begin;
        if (!tree_worker_reserve(k, at + own + SIMD_PAD, own + SIMD_PAD + 1, false)) {
            *ok = false;
            return 0;
        }
        at += select_box(c, k, &c->slots, sid, anc->begin, anc->end, target->lo, target->hi, at);
    }
    return at;
}

void oc_search_job(size_t job, int worker, void *p) {
    const oc_search_ctx *c = p;
    octree *t = c->t;
    tree_worker *k = &t->workers.at[worker];
    const oc_job *j = &t->jobs[job];
    pairs_writer wr = pairs_writer_begin(c->w->pairs, worker);
    if (j->kind == JOB_CROSS) {
        cross(c, k, &wr, j->lo, j->hi, 0);
        return;
    }
    bool ok = true;
    size_t n0 = ancestors_list(c, k, j->node, &ok);
    if (!ok) {
        fail(k);
    } else if (j->kind == JOB_SUBTREE) {
        search_node(c, k, &wr, j->node, 0, n0);
    } else {
        const oc_node *node = &t->nodes[j->node];
        size_t own = node->end - node->begin;
        if (!tree_worker_reserve(k, 2 * n0 + SIMD_PAD, (own > n0 ? own : n0) + SIMD_PAD + 1, false))
            fail(k);
        else
            test_own(c, k, &wr, node, j->lo, j->hi, node->end, j->lo, j->hi, 0, n0);
    }
}

/* ---- the flat search ------------------------------------------------------------------------- */

void oc_flat_job(size_t job, int worker, void *p) {
    const oc_search_ctx *c = p;
    const octree *t = c->t;
    tree_worker *k = &t->workers.at[worker];
    pairs_writer wr = pairs_writer_begin(c->w->pairs, worker);
    const uint32_t *sid = t->slots.sid[t->slots.cur];
    uint32_t end = t->fl_job[job + 1];
    for (uint32_t i = t->fl_job[job]; i < end; i++) {
        /* The nodes of the leaf FLAT_AHEAD on and of its candidates: scattered in memory, and
         * the first thing read (NOTES row 100). */
        if (i + FLAT_AHEAD < t->fl_leaves) {
            uint32_t f = i + FLAT_AHEAD;
            __builtin_prefetch(&t->nodes[t->fl_leaf[f]]);
            for (uint32_t e = t->fl_first[f]; e < t->fl_first[f + 1]; e++)
                __builtin_prefetch(&t->nodes[t->fl_leaf[t->fl_cand[e]]]);
        }
        /* A leaf that emptied, or whose node now serves another cell, holds nothing here. */
        const oc_node *na = &t->nodes[t->fl_leaf[i]];
        size_t own = na->end - na->begin;
        if (!tree_worker_reserve(k, SIMD_PAD, own + SIMD_PAD + 1, false)) {
            fail(k);
            return;
        }
        tree_test_within(c->w, k, &wr, &c->slots, sid, na->begin, na->end, c->dims);
        for (uint32_t e = t->fl_first[i]; e < t->fl_first[i + 1]; e++) {
            const oc_node *nb = &t->nodes[t->fl_leaf[t->fl_cand[e]]];
            if (boxes_meet(na, nb, c->dims)) cross_leaves(c, k, &wr, na, nb, 0);
        }
    }
}

/* ---- the jobs -------------------------------------------------------------------------------- */

/* Subtrees small enough become one job; above them, each node's own objects are cut into
 * pieces. The cut depends on the tree only, never on the thread count. */
static void add_job(octree *t, oc_job job, bool write) {
    if (write) t->jobs[t->job_count] = job;
    t->job_count++;
}

void oc_collect_jobs(octree *t, uint32_t n, bool write) {
    const oc_node *node = &t->nodes[n];
    /* A node owning many objects (most objects overlap most others, as in a dense scene) is cut
     * into pieces even in a small subtree: its own tests are quadratic. */
    if (node->sub_end - node->begin <= JOB_OBJECTS && node->end - node->begin <= OWN_PIECE) {
        add_job(t, (oc_job){n, JOB_SUBTREE, 0, 0}, write);
        return;
    }
    for (uint32_t lo = node->begin; lo < node->end; lo += OWN_PIECE) {
        uint32_t hi = node->end - lo > OWN_PIECE ? lo + OWN_PIECE : node->end;
        add_job(t, (oc_job){n, JOB_OWN, lo, hi}, write);
    }
    for (int i = 0; i < t->nchild; i++) {
        if (!(node->live >> i & 1)) continue;
        for (int j = i + 1; j < t->nchild; j++)
            if ((node->live >> j & 1) &&
                boxes_meet(&t->nodes[node->child[i]], &t->nodes[node->child[j]], t->dims))
                add_job(t, (oc_job){n, JOB_CROSS, node->child[i], node->child[j]}, write);
    }
    for (int j = 0; j < t->nchild; j++)
        if (node->live >> j & 1) oc_collect_jobs(t, node->child[j], write);
}
