/* The octree's flat search list (see octree.c): the leaves in slot order, each with the later
 * leaves whose reach regions meet its own, found by a parallel descent over the tree as the
 * search's cross() does on bounds, and the list's cut into jobs. Made when the set of leaves
 * changes; the jobs that walk it are in octree_search.c. */
#include "octree_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum {
    FLAT_JOBS_LEAST = 64, /* the flat search's jobs: runs of leaves holding 1/64 of the */
    FLAT_JOB_MIN = 256,   /* objects, but at least this many */
    FLAT_JOB_MAX = 2048,  /* and at most this many */
};

/* The leaves of n's subtree into the list, in slot order; each node's region becomes the union
 * of its leaves' reach regions. */
static void flat_leaves(octree *t, uint32_t n) {
    oc_node *node = &t->nodes[n];
    float *r = t->fl_region + 6 * (size_t)n;
    if (node->end > node->begin) { /* a leaf: FLAT_NEVER is clear */
        node->list_gen = t->fl_gen;
        t->fl_index[n] = (uint32_t)t->fl_leaves;
        t->fl_leaf[t->fl_leaves++] = n;
        memcpy(r, node->reach_lo, 3 * sizeof(float));
        memcpy(r + 3, node->reach_hi, 3 * sizeof(float));
        return;
    }
    for (int k = 0; k < 3; k++) {
        r[k] = INFINITY;
        r[3 + k] = -INFINITY;
    }
    for (int j = 0; j < t->nchild; j++) {
        if (!(node->live >> j & 1)) continue;
        uint32_t c = node->child[j];
        flat_leaves(t, c);
        const float *cr = t->fl_region + 6 * (size_t)c;
        for (int k = 0; k < 3; k++) {
            r[k] = cr[k] < r[k] ? cr[k] : r[k];
            r[3 + k] = cr[3 + k] > r[3 + k] ? cr[3 + k] : r[3 + k];
        }
    }
}

static bool regions_meet(const octree *t, uint32_t a, uint32_t b) {
    const float *ra = t->fl_region + 6 * (size_t)a, *rb = t->fl_region + 6 * (size_t)b;
    unsigned m = 1;
    for (int k = 0; k < t->dims; k++)
        m &= (unsigned)(ra[k] <= rb[3 + k]) & (unsigned)(rb[k] <= ra[3 + k]);
    return m;
}

/* A worker's edges while the list is made: its slot of the world's per-worker scratch, a count
 * then the edges. */
typedef struct flat_edges {
    uint64_t count, edge[];
} flat_edges;

/* Every pair of leaves, one in each of the disjoint subtrees a and b, whose regions meet, as an
 * edge (lower leaf index << 32 | higher) in the worker's scratch. The same descent as cross(),
 * on regions. */
static void flat_meet(const method_world *w, octree *t, int worker, uint32_t a, uint32_t b) {
    if (!regions_meet(t, a, b) || __atomic_load_n(&t->fl_failed, __ATOMIC_RELAXED)) return;
    const oc_node *na = &t->nodes[a], *nb = &t->nodes[b];
    bool a_leaf = t->fl_index[a] != NONE, b_leaf = t->fl_index[b] != NONE;
    if (a_leaf && b_leaf) {
        uint64_t ia = t->fl_index[a], ib = t->fl_index[b];
        flat_edges *e = threads_scratch_get(w->scratch, worker, sizeof(flat_edges));
        if (e)
            e = threads_scratch_get(w->scratch, worker,
                                    sizeof(flat_edges) + (e->count + 1) * sizeof(uint64_t));
        if (!e) {
            __atomic_store_n(&t->fl_failed, true, __ATOMIC_RELAXED);
            return;
        }
        e->edge[e->count++] = ia < ib ? ia << 32 | ib : ib << 32 | ia;
        return;
    }
    if (a_leaf || (!b_leaf && nb->sub_end - nb->begin > na->sub_end - na->begin)) {
        uint32_t x = a;
        a = b;
        b = x;
        na = nb;
    }
    for (int j = 0; j < t->nchild; j++)
        if (na->live >> j & 1) flat_meet(w, t, worker, na->child[j], b);
}

/* One piece of the list's making: the pairs between subtrees a and b (b != NONE), or every pair
 * within subtree a. Nodes above octree.task_levels hand their pieces to other workers. */
typedef struct flat_task {
    const method_world *w;
    octree *t;
    uint32_t a, b;
} flat_task;

static void flat_task_run(void *p, int worker) {
    const flat_task *task = p;
    const method_world *w = task->w;
    octree *t = task->t;
    if (task->b != NONE) {
        flat_meet(w, t, worker, task->a, task->b);
        return;
    }
    const oc_node *node = &t->nodes[task->a];
    if (t->fl_index[task->a] != NONE) return;
    bool spawn = node->level < t->task_levels;
    flat_task sub[8 * 9 / 2 + 8];
    int subs = 0;
    for (int i = 0; i < t->nchild; i++) {
        if (!(node->live >> i & 1)) continue;
        for (int j = i + 1; j <= t->nchild; j++) {
            if (j < t->nchild && !(node->live >> j & 1)) continue;
            /* j == nchild: the child's own subtree */
            flat_task piece = {w, t, node->child[i], j < t->nchild ? node->child[j] : NONE};
            if (spawn) {
                sub[subs] = piece;
                threads_spawn(flat_task_run, &sub[subs]);
                subs++;
            } else {
                flat_task_run(&piece, worker);
            }
        }
    }
    if (subs > 0) threads_wait_children();
}

static int by_u32(const void *x, const void *y) {
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return (a > b) - (a < b);
}

/* The list's arrays, grown with an eighth to spare: the next list has about as many leaves and
 * pairs, often a few more, and growing again means new pages to fault in, which took the second
 * making at 1e6 from 7.5 ms to 15-18 (NOTES row 107). Contents are not kept. */
static bool flat_grow(const method_world *w, void **p, size_t *capacity, size_t need, size_t size) {
    return need <= *capacity || heap_grow(w->heap, p, capacity, need + need / 8, size, 0);
}

/* Makes the flat search's list for the tree as measured (no FLAT_NEVER). False on out of
 * memory. */
bool oc_flat_build(const method_world *w, octree *t) {
    size_t nodes = t->node_count, leaves = t->leaves;
    if (!flat_grow(w, (void **)&t->fl_leaf, &t->fl_leaf_capacity, leaves + 1, sizeof(uint32_t)) ||
        !flat_grow(w, (void **)&t->fl_first, &t->fl_first_capacity, leaves + 2, sizeof(uint32_t)) ||
        !flat_grow(w, (void **)&t->fl_job, &t->fl_job_capacity, leaves + 2, sizeof(uint32_t)) ||
        !flat_grow(w, (void **)&t->fl_index, &t->fl_index_capacity, nodes + 1, sizeof(uint32_t)) ||
        !flat_grow(w, (void **)&t->fl_region, &t->fl_region_capacity, 6 * nodes + 6, sizeof(float)))
        return false;
    for (size_t n = 0; n < nodes; n++) t->fl_index[n] = NONE;
    t->fl_gen = t->fl_gen == UINT32_MAX ? 1 : t->fl_gen + 1; /* all leave the old list */
    t->fl_leaves = 0;
    t->fl_failed = false;
    flat_leaves(t, 0);
    if (!threads_scratch_reserve(w->scratch, w->workers)) return false;
    /* Each worker's room for its edges, up front: a quarter more than an even share of the last
     * list's room (an eighth above its count), or on the first build of about 14 a leaf in 3D
     * and 5 in 2D (a leaf among equal
     * ones meets 26 or 8, each edge found once). Grown as found, from nothing, the first list
     * of 1e6 objects took five copies a worker, onto 4 KB pages: 14-21 ms against 7 for the
     * same tasks once the room was there (NOTES row 213). */
    size_t expect = leaves * (t->dims == 3 ? 14 : 5);
    if (t->fl_cand_capacity > expect) expect = t->fl_cand_capacity;
    size_t share = expect / (size_t)w->workers;
    share += share / 4 + 64;
    for (int i = 0; i < w->workers; i++) {
        flat_edges *e =
            threads_scratch_get(w->scratch, i, sizeof(flat_edges) + share * sizeof(uint64_t));
        if (!e) return false;
        e->count = 0;
    }
    flat_task root = {w, t, 0, NONE};
    t->task_levels = w->workers > 1 && t->node_count > NODE_CHUNK ? (t->dims == 3 ? 2 : 3) : 0;
    if (t->task_levels > 0)
        threads_run_tasks(w->workers, flat_task_run, &root);
    else
        flat_task_run(&root, 0);
    if (t->fl_failed) {
        t->fl_gen = t->fl_gen == UINT32_MAX ? 1 : t->fl_gen + 1;
        return false;
    }
    /* Each leaf's later neighbours, grouped by a counting pass over the workers' edges, then put
     * in order (the workers found them in an order that depends on the thread count). */
    size_t count = 0;
    memset(t->fl_first, 0, (t->fl_leaves + 2) * sizeof(uint32_t));
    for (int i = 0; i < w->workers; i++) {
        const flat_edges *e = threads_scratch_get(w->scratch, i, sizeof(flat_edges));
        for (uint64_t k = 0; k < e->count; k++) t->fl_first[(e->edge[k] >> 32) + 2]++;
        count += e->count;
    }
    if (!flat_grow(w, (void **)&t->fl_cand, &t->fl_cand_capacity, count + 1, sizeof(uint32_t)))
        return false;
    for (size_t i = 2; i < t->fl_leaves + 2; i++) t->fl_first[i] += t->fl_first[i - 1];
    for (int i = 0; i < w->workers; i++) {
        const flat_edges *e = threads_scratch_get(w->scratch, i, sizeof(flat_edges));
        for (uint64_t k = 0; k < e->count; k++)
            t->fl_cand[t->fl_first[(e->edge[k] >> 32) + 1]++] = (uint32_t)e->edge[k];
    }
    for (size_t i = 0; i < t->fl_leaves; i++) {
        uint32_t *c = t->fl_cand + t->fl_first[i];
        size_t n = t->fl_first[i + 1] - t->fl_first[i];
        if (n > 32) {
            qsort(c, n, sizeof *c, by_u32);
            continue;
        }
        for (size_t k = 1; k < n; k++) {
            uint32_t v = c[k];
            size_t j = k;
            for (; j > 0 && c[j - 1] > v; j--) c[j] = c[j - 1];
            c[j] = v;
        }
    }
    /* Jobs: runs of leaves holding about per_job objects as the list is made; they depend on
     * the tree only, never on the thread count. */
    size_t per_job = t->slots.count / FLAT_JOBS_LEAST;
    per_job = per_job < FLAT_JOB_MIN   ? FLAT_JOB_MIN
              : per_job > FLAT_JOB_MAX ? FLAT_JOB_MAX
                                       : per_job;
    t->fl_jobs = 0;
    size_t held = 0;
    for (size_t i = 0; i < t->fl_leaves; i++) {
        if (held == 0) t->fl_job[t->fl_jobs++] = (uint32_t)i;
        const oc_node *node = &t->nodes[t->fl_leaf[i]];
        held += node->end - node->begin;
        if (held >= per_job) held = 0;
    }
    t->fl_job[t->fl_jobs] = (uint32_t)t->fl_leaves;
    t->flat_builds++;
    return true;
}
