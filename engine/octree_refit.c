/* The octree's refit (see octree.c): each object's new bounds read into its slot and its node
 * decided (it stays, or climbs and sinks to the node that holds it); the movers sorted by
 * destination; emptied branches kept as spares, sparse subtrees merged, crowded nodes split; the
 * slots laid out anew when anything moved. */
#include "octree_internal.h"

#include <math.h>
#include <string.h>

enum {
    SMALL_BELOW = 65536,     /* the refit's chunks stay SMALL_CHUNK below this (NOTES, 89-90) */
    DEFER_SHARE = 64,        /* movers wait while they are at most 1/64 of the objects */
    WINDOW_DEFER_SHARE = 16, /* ... or 1/16 while windows take them (octree_windows.c) */
    TIGHTEN_EVERY = 8,       /* a relayout for additions tightens 1/8 of the slots, in turn */
    /* The other slot buffer is first touched over this many steps (tree_slots_warm), a slice
     * a step, before a light relayout (octree_windows.c) needs it all, which was every 8 steps:
     * a fixed 65,536 slots a step put the whole buffer of 1e5 objects in the next two steps,
     * the second step's 2.3 ms of page faults on a 3.6 ms frame, and left a 1e6 world's last
     * 40% to the first light relayout. */
    WARM_STEPS = 6,
};

/* ---- geometry -------------------------------------------------------------------------------- */

/* Does node n's cell contain the box's centre? */
static bool centre_in(const octree *t, const oc_node *n, const double umin[3],
                      const double umax[3]) {
    uint32_t cell[3];
    centre_cell(t, n->level, umin, umax, cell);
    for (int k = 0; k < t->dims; k++)
        if (cell[k] != n->cell[k]) return false;
    return true;
}

/* Is the level + 1 cell `sub` a child of cell `parent`? In a loose octree a cell holds objects
 * whose centre lies outside it, and those cannot sink into any of its children. */
static bool is_child_cell(const octree *t, const uint32_t parent[3], const uint32_t sub[3]) {
    for (int k = 0; k < t->dims; k++)
        if (sub[k] >> 1 != parent[k]) return false;
    return true;
}

/* ---- nodes ----------------------------------------------------------------------------------- */

/* Arrays indexed by node, for node_capacity nodes. */
bool oc_by_node_reserve(const method_world *w, octree *t) {
    size_t need = t->node_capacity + 1;
    if (need <= t->by_node_capacity) return true;
    size_t cap = t->by_node_capacity;
    /* Contents kept: a split may grow the nodes in the middle of a refit. */
    void **arrays[] = {(void **)&t->own_count, (void **)&t->new_begin, (void **)&t->arrive_first,
                       (void **)&t->arrivals,  (void **)&t->redirect,  (void **)&t->redirected,
                       (void **)&t->splits,    (void **)&t->free_nodes};
    enum { ARRAYS = sizeof arrays / sizeof arrays[0] };
    size_t sizes[ARRAYS];
    for (size_t i = 0; i < ARRAYS; i++) sizes[i] = sizeof(uint32_t);
    /* All grown or none: by_node_capacity must stay the size of every one (their frees pass it). */
    size_t got = cap;
    if (!heap_grow_together(w->heap, arrays, sizes, ARRAYS, &got, need, cap)) return false;
    for (size_t n = cap; n < got; n++) t->redirect[n] = NONE;
    t->by_node_capacity = got;
    t->free_capacity = got;
    return true;
}

/* A node from the free list or past the last one; NONE on out of memory. Outside the build. */
static uint32_t node_new(const method_world *w, octree *t) {
    if (t->free_count) return t->free_nodes[--t->free_count];
    if (t->node_count >= t->node_capacity) {
        if (!heap_grow(w->heap, (void **)&t->nodes, &t->node_capacity, (size_t)t->node_count + 1,
                       sizeof(oc_node), t->node_count) ||
            !oc_by_node_reserve(w, t))
            return NONE;
    }
    return t->node_count++;
}

/* Frees node n and its (spare) subtree. */
static void node_free_subtree(octree *t, uint32_t n) {
    oc_node *node = &t->nodes[n];
    for (int j = 0; j < t->nchild; j++)
        if (node->child[j] != NONE) node_free_subtree(t, node->child[j]);
    node->spare = true;
    node->begin = node->end = node->sub_end = 0;
    t->free_nodes[t->free_count++] = n;
}

/* Node n becomes the top of a spare branch: everything below it is spare already or becomes so
 * (their own objects leave: the caller redirects them). */
static void make_spare(octree *t, uint32_t n) {
    oc_node *node = &t->nodes[n];
    node->spare = true;
    node->life = node->lifespan;
    for (int j = 0; j < t->nchild; j++) {
        uint32_t c = node->child[j];
        if (c != NONE && !t->nodes[c].spare) make_spare(t, c);
    }
}

/* ---- refit ----------------------------------------------------------------------------------- */

/* From node n, the node that should hold the box: up to the first ancestor that holds it, then
 * down through live children as deep as it fits. NONE when even the root does not hold it. */
static uint32_t rehome(const octree *t, uint32_t n, const double umin[3], const double umax[3]) {
    const oc_node *nodes = t->nodes;
    while (!holds(t, nodes[n].level, nodes[n].cell, umin, umax)) {
        if (n == 0) return NONE;
        n = nodes[n].parent;
    }
    /* Up on to the first ancestor whose cell also contains the centre: a loose ancestor holds
     * objects whose centre has moved into a neighbouring cell, and they could never sink from
     * there, so that moving objects would drift up the tree, step after step, into nodes that
     * every descendant tests against. (Until it leaves the region or the slots are next laid
     * out, an object stays in its leaf even when its centre has crossed into a neighbour: see
     * tighten.) */
    while (n != 0 && !centre_in(t, &nodes[n], umin, umax)) n = nodes[n].parent;
    for (;;) {
        const oc_node *node = &nodes[n];
        if (node->level >= t->max_level) return n;
        uint32_t cell[3];
        centre_cell(t, node->level + 1, umin, umax, cell);
        if (!is_child_cell(t, node->cell, cell)) return n;
        uint32_t c = node->child[child_slot(t, cell)];
        if (c == NONE || nodes[c].spare || !holds(t, node->level + 1, cell, umin, umax)) return n;
        n = c;
    }
}

/* Slots [begin, end) of a chunk of the refit's passes over slots. */
static inline void chunk_slots(const octree *t, size_t chunk, size_t *begin, size_t *end) {
    *begin = chunk * t->refit_chunk;
    *end = *begin + t->refit_chunk < t->slots.count ? *begin + t->refit_chunk : t->slots.count;
}

/* Is the box inside node n's region (rounded inward: then the cell holds it)? */
static inline bool in_hold(const oc_node *n, const float mn[3], const float mx[3]) {
    return mn[0] >= n->hold_lo[0] && mn[1] >= n->hold_lo[1] && mn[2] >= n->hold_lo[2] &&
           mx[0] <= n->hold_hi[0] && mx[1] <= n->hold_hi[1] && mx[2] <= n->hold_hi[2];
}

/* Is the box inside node n's reach region (see FLAT_SLACK)? A mover that waits in its node
 * outside it would take the flat search away at this step (oc_measure's FLAT_ESCAPE). */
static inline bool in_reach(const oc_node *n, const float mn[3], const float mx[3]) {
    return mn[0] >= n->reach_lo[0] && mn[1] >= n->reach_lo[1] && mn[2] >= n->reach_lo[2] &&
           mx[0] <= n->reach_hi[0] && mx[1] <= n->reach_hi[1] && mx[2] <= n->reach_hi[2];
}

/* Reads every object's new bounds into its slot and decides the node it belongs in now. */
static void refit_slots(size_t chunk, int worker, void *p) {
    (void)worker;
    oc_ctx *c = p;
    const method_world *w = c->w;
    octree *t = c->t;
    int b = t->slots.cur;
    size_t begin, end;
    chunk_slots(t, chunk, &begin, &end);
    size_t movers = 0, kept = 0;
    uint32_t nodes = t->node_count;
    bool escaped = false, urgent = false, beyond = false;
    size_t ahead = t->ahead_begin, ahead_span = t->ahead_end - t->ahead_begin;
    uint32_t ahead_top = t->ahead_top, ahead_other = t->ahead_other;
    /* When streaming (see tree_slots_stream), the new values are gathered a block at a time
     * and streamed column by column. */
    bool stream = tree_slots_stream(w, &t->slots);
    tree_slot_block blk;
    for (size_t s0 = begin; s0 < end; s0 += TREE_SLOT_BLOCK) {
        size_t s1 = end - s0 < TREE_SLOT_BLOCK ? end : s0 + TREE_SLOT_BLOCK;
        for (size_t s = s0; s < s1; s++) {
            float mn[3], mx[3];
            tree_refit_read(w, &t->slots, b, &blk, s0, s, end, stream, mn, mx);
            if (mn[0] == INFINITY) { /* removed (see tree_refit_read) */
                t->dest[s] = DEAD;
                movers++;
                urgent = true;
                continue;
            }
            uint32_t n = t->slot_node[s];
            const oc_node *node = &t->nodes[n];
            /* The common case: still inside its leaf's region, it stays; unless the step before
             * tightened it into another leaf of the pair (octree_windows.c) that still holds it,
             * its centre still outside its cell (not a mover of the last step that came back). */
            if (node->leaf && in_hold(node, mn, mx)) {
                if (s - ahead < ahead_span) {
                    uint32_t to = t->dest[s];
                    int step[3];
                    if (to != n && to < nodes && t->nodes[to].leaf && !t->nodes[to].spare &&
                        in_hold(&t->nodes[to], mn, mx) &&
                        (oc_in_subtree(t, to, ahead_top) || oc_in_subtree(t, to, ahead_other)) &&
                        oc_centre_steps(t, node, (float)(t->cell_margin[node->level] / t->scale),
                                        mn, mx, step)) {
                        movers++;
                        kept++;
                        continue;
                    }
                }
                t->dest[s] = n;
                continue;
            }
            /* A mover waiting in its node (octree_windows.c): the leaf the slot was bound for at
             * the last step, while that leaf still holds it, without the grid arithmetic (a
             * slot laid out since holds another object, but any live leaf that holds the box
             * may have it). Its node's parent holding it too, it is not urgent. */
            uint32_t was = t->dest[s];
            if (was != n && was < nodes && t->nodes[was].leaf && !t->nodes[was].spare &&
                in_hold(&t->nodes[was], mn, mx) && node->parent != NONE &&
                in_hold(&t->nodes[node->parent], mn, mx)) {
                movers++;
                beyond |= !in_reach(node, mn, mx);
                continue;
            }
            double umin[3], umax[3];
            to_grid(t, mn, mx, umin, umax);
            uint32_t d = rehome(t, n, umin, umax);
            if (d == NONE) {
                escaped = true;
                d = n;
            }
            t->dest[s] = d;
            movers += d != n;
            /* A mover still inside its node's parent's region can wait (see DEFER_SHARE). */
            if (d != n) {
                beyond |= !in_reach(node, mn, mx);
                uint32_t up = node->parent;
                urgent |=
                    up == NONE || !holds(t, t->nodes[up].level, t->nodes[up].cell, umin, umax);
            }
        }
        if (stream) tree_slots_stream_block(&t->slots, b, s0, s1 - s0, &blk);
    }
    if (stream) simd_stream_fence();
    t->chunk_count[chunk] = movers;
    if (kept) __atomic_fetch_add(&t->ahead_kept, kept, __ATOMIC_RELAXED);
    if (escaped) __atomic_store_n(&t->escaped, true, __ATOMIC_RELAXED);
    if (urgent) __atomic_store_n(&t->urgent, true, __ATOMIC_RELAXED);
    if (beyond) __atomic_store_n(&t->beyond, true, __ATOMIC_RELAXED);
}

/* The leaf at node n's level whose cell is n's stepped by step[k] (-1, 0 or 1) along each axis,
 * when it exists and its region (rounded inward, see hold_region) holds [mn, mx]; else NONE.
 * Integer cells and float bounds only: the common move of tighten() without rehome()'s grid
 * arithmetic. */
static uint32_t neighbour_leaf(const octree *t, uint32_t n, const int step[3], const float mn[3],
                               const float mx[3]) {
    const oc_node *nodes = t->nodes;
    int level = nodes[n].level;
    uint64_t side = (uint64_t)1 << level;
    uint32_t cell[3] = {0, 0, 0};
    for (int k = 0; k < t->dims; k++) {
        int64_t at = (int64_t)nodes[n].cell[k] + step[k];
        if (at < 0 || (uint64_t)at >= side) return NONE;
        cell[k] = (uint32_t)at;
    }
    uint32_t a = n;
    for (;;) {
        int up = level - nodes[a].level;
        bool in = true;
        for (int k = 0; k < t->dims; k++) in &= cell[k] >> up == nodes[a].cell[k];
        if (in) break;
        if (a == 0) return NONE;
        a = nodes[a].parent;
    }
    while (nodes[a].level < level) {
        int down = level - nodes[a].level - 1, j = 0;
        for (int k = 0; k < t->dims; k++) j |= (int)(cell[k] >> down & 1u) << k;
        uint32_t c = nodes[a].child[j];
        if (c == NONE || nodes[c].spare) return NONE;
        a = c;
    }
    if (!nodes[a].leaf) return NONE;
    for (int k = 0; k < t->dims; k++)
        if (!(mn[k] >= nodes[a].hold_lo[k] && mx[k] <= nodes[a].hold_hi[k])) return NONE;
    return a;
}

/* When the slots are laid out anew anyway: a leaf's object whose centre has left the leaf's cell
 * (the refit keeps it while it stays inside the region) moves too, into the leaf its centre is
 * in, as a build would place it, when that is a leaf. Left alone, such objects drift to the edge
 * of the region and the leaves' bounds with them: at moving 1e5 the leaves reached 1.2 past
 * their cells after 40 frames against 0.44 built, and the search took 10-12% longer. The cell
 * edge is found in floats (the region less the margin): only the choice of movers depends on
 * it, and a mover goes only where it is held. */
/* Tightens slots [begin, end); with windows (not NONE), only into leaves of their subtrees.
 * Returns the movers it made. */
size_t oc_tighten_range(octree *t, size_t begin, size_t end, uint32_t window, uint32_t window2) {
    int b = t->slots.cur;
    float inset[64];
    for (int l = 0; l <= t->max_level && l < 64; l++)
        inset[l] = (float)(t->cell_margin[l] / t->scale);
    size_t movers = 0;
    for (size_t s = begin; s < end; s++) {
        uint32_t n = t->slot_node[s];
        if (t->dest[s] != n) continue;
        const oc_node *node = &t->nodes[n];
        if (!node->leaf) continue;
        int step[3];
        float mn[3], mx[3];
        for (int k = 0; k < 3; k++) {
            mn[k] = t->slots.smin[b][k][s];
            mx[k] = t->slots.smax[b][k][s];
        }
        if (!oc_centre_steps(t, node, inset[node->level], mn, mx, step)) continue;
        uint32_t d = neighbour_leaf(t, n, step, mn, mx);
        if (d == NONE) {
            double umin[3], umax[3];
            to_grid(t, mn, mx, umin, umax);
            d = rehome(t, n, umin, umax);
            if (d == NONE || !t->nodes[d].leaf) continue;
        }
        if (d == n || (window != NONE && !oc_in_subtree(t, d, window) &&
                       (window2 == NONE || !oc_in_subtree(t, d, window2))))
            continue;
        t->dest[s] = d;
        movers++;
    }
    return movers;
}

/* Tightens the chunks [first, first + the pass's chunk): every slot, or one part of them. */
typedef struct tighten_ctx {
    octree *t;
    size_t first;
} tighten_ctx;

static void tighten(size_t chunk, int worker, void *p) {
    (void)worker;
    const tighten_ctx *c = p;
    octree *t = c->t;
    size_t begin, end;
    chunk += c->first;
    chunk_slots(t, chunk, &begin, &end);
    t->chunk_count[chunk] += oc_tighten_range(t, begin, end, NONE, NONE);
}

/* The chunk's movers, as moves with their halves swapped (source << 32 | destination, DEAD as
 * node_count so that removed objects sort last), for gather_moves' sort; and each node's
 * departures, taken off its own count by the chunk holding its first slot, which follows the
 * node past its own end (a node's slots are consecutive), so that no two chunks write one node. */
static void collect_movers(size_t chunk, int worker, void *p) {
    (void)worker;
    oc_ctx *c = p;
    octree *t = c->t;
    size_t begin, end;
    chunk_slots(t, chunk, &begin, &end);
    if (begin >= end) return;
    uint32_t nodes = (uint32_t)t->node_count;
    uint64_t *out = t->moves_tmp + t->chunk_count[chunk];
    /* The node this chunk begins inside of, when it began in an earlier chunk: not ours. */
    uint32_t before =
        begin > 0 && t->slot_node[begin - 1] == t->slot_node[begin] ? t->slot_node[begin] : NONE;
    for (size_t s = begin; s < end; s++) {
        uint32_t d = t->dest[s], n = t->slot_node[s];
        if (d == n) continue;
        *out++ = (uint64_t)s << 32 | (d == DEAD ? nodes : d);
        if (n != before) t->own_count[n]--;
    }
    uint32_t last = t->slot_node[end - 1];
    if (last == before) return;
    for (size_t s = end; s < t->slots.count && t->slot_node[s] == last; s++)
        if (t->dest[s] != last) t->own_count[last]--;
}

static void count_movers(size_t chunk, int worker, void *p) {
    (void)worker;
    oc_ctx *c = p;
    octree *t = c->t;
    size_t begin, end;
    chunk_slots(t, chunk, &begin, &end);
    size_t movers = 0;
    for (size_t s = begin; s < end; s++) {
        uint32_t d = t->dest[s];
        if (d != DEAD && t->redirect[d] != NONE) {
            /* A merged node may itself have merged into an ancestor: follow the chain. */
            while (t->redirect[d] != NONE) d = t->redirect[d];
            t->dest[s] = d;
        }
        movers += d != t->slot_node[s];
    }
    t->chunk_count[chunk] = movers;
}

/* Every node's own count as laid out, no arrivals yet. */
static void reset_counts(size_t chunk, int worker, void *p) {
    (void)worker;
    oc_ctx *c = p;
    octree *t = c->t;
    size_t end = (chunk + 1) * t->node_chunk;
    if (end > t->node_count) end = t->node_count;
    for (size_t n = chunk * t->node_chunk; n < end; n++) {
        t->own_count[n] = t->nodes[n].end - t->nodes[n].begin;
        t->arrivals[n] = 0;
        t->arrive_first[n] = 0;
    }
    if (end == t->node_count) t->arrive_first[end] = 0;
}

/* Each node's arrivals, from the moves sorted by destination: its run of them gives their count
 * and where they begin, which is also where every node since the previous run begins (those
 * with none). The chunk holding a run's first move takes the whole run. */
static void count_arrivals(size_t chunk, int worker, void *p) {
    (void)worker;
    oc_ctx *c = p;
    octree *t = c->t;
    size_t count = t->move_count, begin = chunk * t->move_chunk, end = begin + t->move_chunk;
    if (end > count) end = count;
    uint32_t nodes = (uint32_t)t->node_count;
    const uint64_t *moves = t->moves;
    for (size_t m = begin; m < end;) {
        uint32_t d = (uint32_t)moves[m];
        uint32_t prev = m > 0 ? (uint32_t)moves[m - 1] : UINT32_MAX;
        if (prev == d) {
            m++; /* the run began in an earlier chunk */
            continue;
        }
        size_t e = m + 1;
        while (e < count && (uint32_t)moves[e] == d) e++;
        for (uint32_t n = prev + 1; n <= d; n++) t->arrive_first[n] = (uint32_t)m;
        if (d < nodes) {
            t->arrivals[d] = (uint32_t)(e - m);
            t->own_count[d] += (uint32_t)(e - m);
            if (e == count)
                for (uint32_t n = d + 1; n <= nodes; n++) t->arrive_first[n] = (uint32_t)e;
        }
        m = e;
    }
}

/* The moves (slots whose node changes, in slot order, then objects new to the tree), sorted by
 * destination, stably, as source << 32 | destination (removed objects last); every node's own
 * count and arrivals; and arrive_first, where each node's arrivals begin (arrive_first[nodes]:
 * the moves that stay in the tree). Every pass is parallel and the sort is the radix sort on the
 * destination's bits, so no serial pass over the moves grows with the objects, and the result is
 * the same for every worker count. */
static size_t gather_moves(const method_world *w, octree *t, size_t chunks) {
    size_t movers = threads_exclusive_scan(w->workers, t->chunk_count, chunks);
    oc_ctx c = {w, t};
    threads_for_chunks(w->workers, node_chunks(w, t), reset_counts, &c);
    threads_for_chunks(w->workers, chunks, collect_movers, &c);
    size_t count = movers;
    uint32_t nodes = (uint32_t)t->node_count;
    for (size_t i = 0; i < w->added_count; i++) {
        uint32_t d = t->add_dest[i];
        if (d != NONE)
            t->moves_tmp[count++] =
                (uint64_t)(TREE_ADDED | (uint32_t)i) << 32 | (d == DEAD ? nodes : d);
    }
    t->move_count = count;
    if (count == 0) return 0;
    int bits = 1;
    while (bits < 32 && (nodes >> bits) != 0) bits++;
    threads_radix_sort_u64(w->workers, t->moves_tmp, t->moves, count, bits, t->hist);
    uint64_t *sorted = t->moves_tmp;
    t->moves_tmp = t->moves;
    t->moves = sorted;
    t->move_chunk = threads_chunk_size(count, w->workers, SMALL_CHUNK, SLOT_CHUNK);
    threads_for_chunks(w->workers, threads_chunk_count(count, t->move_chunk), count_arrivals, &c);
    return count;
}

/* Every live node below n (n excluded) redirects its objects to `to` and becomes spare. */
static void redirect_below(octree *t, uint32_t n, uint32_t to) {
    oc_node *node = &t->nodes[n];
    for (int j = 0; j < t->nchild; j++) {
        uint32_t c = node->child[j];
        if (c == NONE || t->nodes[c].spare) continue;
        if (t->redirect[c] == NONE) t->redirected[t->redirected_count++] = c;
        t->redirect[c] = to;
        redirect_below(t, c, to);
    }
}

/* Post-order over the live tree: spare branches age (and are freed when their time is up),
 * emptied nodes become spare, subtrees holding no more than leaf_size objects merge into their
 * top node, and nodes holding too many objects are listed for splitting. Returns the subtree's
 * object count. */
static uint32_t restructure(const method_world *w, octree *t, uint32_t n) {
    uint32_t total = t->own_count[n];
    bool live_children = false;
    for (int j = 0; j < t->nchild; j++) {
        uint32_t c = t->nodes[n].child[j];
        if (c == NONE) continue;
        if (t->nodes[c].spare) {
            if (t->nodes[c].life == 0 || --t->nodes[c].life == 0) {
                node_free_subtree(t, c);
                t->nodes[n].child[j] = NONE;
            }
            continue;
        }
        uint32_t sub = restructure(w, t, c);
        if (sub == 0) {
            make_spare(t, c);
            redirect_below(t, c, n); /* nothing lives there; keeps the bookkeeping uniform */
            continue;
        }
        live_children = true;
        total += sub;
    }
    oc_node *node = &t->nodes[n];
    uint32_t leaf_size = (uint32_t)w->config->leaf_size;
    if (live_children && total <= leaf_size) {
        redirect_below(t, n, n);
        for (int j = 0; j < t->nchild; j++)
            if (node->child[j] != NONE && !t->nodes[node->child[j]].spare)
                make_spare(t, node->child[j]);
        live_children = false;
    }
    /* A crowded node splits; so does an internal node that objects arrived in, so that those
     * whose child cell is absent or spare sink into it instead of staying up here. */
    if ((t->own_count[n] > leaf_size || live_children) && node->level < t->max_level &&
        (t->arrivals[n] > 0 || (!live_children && !node->split_failed)))
        t->splits[t->split_count++] = n;
    return total;
}

/* Bounds in grid units of an object referred to by a split: a slot, or an entry of w->added. */
static void ref_grid(const method_world *w, const octree *t, uint32_t ref, double umin[3],
                     double umax[3]) {
    float mn[3], mx[3];
    if (ref < t->slots.count) {
        int b = t->slots.cur;
        for (int k = 0; k < 3; k++) {
            mn[k] = t->slots.smin[b][k][ref];
            mx[k] = t->slots.smax[b][k][ref];
        }
    } else {
        uint32_t id = w->added[ref - t->slots.count];
        for (int k = 0; k < 3; k++) {
            mn[k] = w->store->box[id].lo[k];
            mx[k] = w->store->box[id].hi[k];
        }
    }
    to_grid(t, mn, mx, umin, umax);
}

static uint32_t *ref_dest(octree *t, uint32_t ref) {
    return ref < t->slots.count ? &t->dest[ref] : &t->add_dest[ref - t->slots.count];
}

/* Node n holds refs[0, count) (more than leaf_size): each that fits the child cell of its centre
 * goes there, the child revived or made as needed; children left with too many split in turn.
 * scratch has room for count refs. False on out of memory. */
static bool split(const method_world *w, octree *t, uint32_t n, uint32_t *refs, uint32_t *scratch,
                  uint32_t count) {
    uint32_t per[8] = {0};
    int level = t->nodes[n].level + 1;
    uint32_t moved = 0;
    for (uint32_t i = 0; i < count; i++) {
        double umin[3], umax[3];
        ref_grid(w, t, refs[i], umin, umax);
        uint32_t cell[3];
        centre_cell(t, level, umin, umax, cell);
        if (!is_child_cell(t, t->nodes[n].cell, cell) || !holds(t, level, cell, umin, umax))
            continue;
        int j = child_slot(t, cell);
        uint32_t c = t->nodes[n].child[j];
        if (c == NONE) {
            c = node_new(w, t);
            if (c == NONE) return false;
            node_init(&t->nodes[c], n, level, cell);
            hold_region(t, &t->nodes[c]);
            t->nodes[n].child[j] = c;
        } else if (t->nodes[c].spare) {
            oc_node *cn = &t->nodes[c];
            cn->spare = false;
            cn->split_failed = false;
            cn->lifespan =
                (uint16_t)(cn->lifespan * 2 > LIFESPAN_CAP ? LIFESPAN_CAP : cn->lifespan * 2);
            /* Its children were spare already; now they are the tops of spare branches. */
            for (int q = 0; q < t->nchild; q++)
                if (cn->child[q] != NONE)
                    t->nodes[cn->child[q]].life = t->nodes[cn->child[q]].lifespan;
        }
        *ref_dest(t, refs[i]) = c;
        per[j]++;
        moved++;
    }
    t->nodes[n].split_failed = moved == 0;
    if (level >= t->max_level) return true;
    /* The movers grouped by child (a counting sort through scratch), then crowded children
     * split in turn, each within its own part of refs and scratch. */
    uint32_t start[9], at[8];
    start[0] = 0;
    for (int j = 0; j < 8; j++) start[j + 1] = start[j] + per[j];
    memcpy(at, start, sizeof at);
    for (uint32_t i = 0; i < count; i++) {
        uint32_t d = *ref_dest(t, refs[i]);
        if (d == n) continue;
        scratch[at[child_slot(t, t->nodes[d].cell)]++] = refs[i];
    }
    memcpy(refs, scratch, moved * sizeof(uint32_t));
    for (int j = 0; j < t->nchild; j++) {
        if (per[j] <= (uint32_t)w->config->leaf_size) continue;
        uint32_t c = t->nodes[n].child[j];
        if (!split(w, t, c, refs + start[j], scratch + start[j], per[j])) return false;
    }
    return true;
}

/* Lays live nodes out anew in preorder from their own counts; spare ones get empty ranges. */
static uint32_t relayout(octree *t, uint32_t n, uint32_t at) {
    oc_node *node = &t->nodes[n];
    t->new_begin[n] = at;
    at += t->own_count[n];
    for (int j = 0; j < t->nchild; j++) {
        uint32_t c = node->child[j];
        if (c == NONE) continue;
        if (t->nodes[c].spare) {
            t->own_count[c] = 0;
            t->new_begin[c] = at;
            continue;
        }
        at = relayout(t, c, at);
    }
    return at;
}

static void copy_nodes(size_t chunk, int worker, void *p) {
    (void)worker;
    oc_ctx *c = p;
    octree *t = c->t;
    size_t end_node = (chunk + 1) * t->node_chunk;
    if (end_node > t->node_count) end_node = t->node_count;
    for (size_t n = chunk * t->node_chunk; n < end_node; n++)
        tree_copy_node(c->w, &t->slots, t->dest, t->slot_node, t->node_of, t->moves, 32,
                       (uint32_t)n, t->nodes[n].begin, t->nodes[n].end, t->new_begin[n],
                       t->arrive_first[n], t->arrive_first[n + 1]);
}

/* Slots per chunk of the refit's passes: SMALL_CHUNK below SMALL_BELOW slots, else up to
 * SLOT_CHUNK, cut so that every worker has chunks to balance: 16 workers would otherwise find
 * 1e5 slots in 7 chunks of 16,384 (NOTES row 111). Whole cache lines of every column,
 * as the streamed writes want. The chunks only divide the work: the passes give the same result
 * for any chunking, so the thread count changes nothing but the time. */
static size_t refit_chunk_size(size_t slots, int workers) {
    return threads_chunk_size(slots, workers, SMALL_CHUNK,
                              slots < SMALL_BELOW ? SMALL_CHUNK : SLOT_CHUNK);
}

/* Room for a refit's passes, with `added` objects new to the tree, and for every object moving
 * at once. False on out of memory. */
static bool refit_reserve(const method_world *w, octree *t, size_t chunks, size_t added) {
    if (chunks == 0)
        chunks = threads_chunk_count(t->slots.count, refit_chunk_size(t->slots.count, w->workers));
    size_t need = t->slots.count + added + 1;
    if (!heap_grow(w->heap, (void **)&t->chunk_count, &t->chunk_capacity, chunks + 1,
                   sizeof(size_t), 0) ||
        !heap_grow(w->heap, (void **)&t->dest, &t->dest_capacity, t->slots.count + 1,
                   sizeof(uint32_t), 0) ||
        !heap_grow(w->heap, (void **)&t->slot_node, &t->slot_node_capacity, t->slots.capacity + 1,
                   sizeof(uint32_t), t->slots.count) ||
        !heap_grow(w->heap, (void **)&t->add_dest, &t->add_dest_capacity, added + 1,
                   sizeof(uint32_t), 0) ||
        !id_tables_reserve(w, t) || !oc_by_node_reserve(w, t))
        return false;
    /* Sized for every object moving at once (twice over for the splits' grouping), so that the
     * number of movers, which changes every step, never makes a step allocate. */
    if (need > t->move_capacity) {
        /* The four are made before any old one goes (their contents need not stay), so that
         * out of memory leaves each with the capacity its shared field says. */
        heap *h = w->heap;
        size_t c1 = t->move_capacity + t->move_capacity / 2;
        c1 = c1 < need ? need : c1 < 16 ? 16 : c1;
        size_t c3 = t->ref_capacity + t->ref_capacity / 2;
        c3 = c3 < 2 * c1 ? 2 * c1 : c3;
        if (c3 > SIZE_MAX / sizeof(uint64_t)) return false;
        uint64_t *m = heap_alloc(h, c1 * sizeof *m), *mt = heap_alloc(h, c1 * sizeof *mt);
        uint32_t *r = heap_alloc(h, c3 * sizeof *r), *rt = heap_alloc(h, c3 * sizeof *rt);
        if (!m || !mt || !r || !rt) {
            heap_free(h, m, c1 * sizeof *m);
            heap_free(h, mt, c1 * sizeof *mt);
            heap_free(h, r, c3 * sizeof *r);
            heap_free(h, rt, c3 * sizeof *rt);
            return false;
        }
        heap_free(h, t->moves, t->move_capacity * sizeof *t->moves);
        heap_free(h, t->moves_tmp, t->move_capacity * sizeof *t->moves_tmp);
        heap_free(h, t->refs, t->ref_capacity * sizeof *t->refs);
        heap_free(h, t->refs_tmp, t->ref_capacity * sizeof *t->refs_tmp);
        t->moves = m;
        t->moves_tmp = mt;
        t->refs = r;
        t->refs_tmp = rt;
        t->move_capacity = c1;
        t->ref_capacity = c3;
    }
    return true;
}

/* The objects new to the tree: each to the node that holds it, found from the root; on one that
 * the root does not hold, t->escaped (the caller gives the ids taken back). Returns how many it
 * placed (an id removed and added again before the step keeps its slot, and is not one). */
static size_t place_added(const method_world *w, octree *t) {
    size_t placed = 0;
    for (size_t i = 0; i < w->added_count; i++) {
        uint32_t id = w->added[i];
        t->add_dest[i] = NONE;
        if (!method_member(w, id) || t->node_of[id] != NONE) continue;
        float mn[3], mx[3];
        for (int k = 0; k < 3; k++) {
            mn[k] = w->store->box[id].lo[k];
            mx[k] = w->store->box[id].hi[k];
        }
        double umin[3], umax[3];
        to_grid(t, mn, mx, umin, umax);
        uint32_t d = rehome(t, 0, umin, umax);
        if (d == NONE) {
            t->escaped = true;
            break;
        }
        t->add_dest[i] = d;
        t->node_of[id] = d; /* taken, in case the id was added twice since the last step */
        placed++;
    }
    return placed;
}

/* The merged nodes' redirects undone (each reshape starts from none). */
static void clear_redirects(octree *t) {
    for (size_t i = 0; i < t->redirected_count; i++) t->redirect[t->redirected[i]] = NONE;
    t->redirected_count = 0;
}

/* The tree's shape for this step's moves (gathered in *count): spare branches age, emptied
 * nodes become spare, sparse subtrees merge, crowded nodes split; when any of that changed the
 * tree, the moves are gathered again. Out of memory leaves no redirect set: the rebuild that
 * follows keeps the nodes' array, and a redirect left there would send a later step's objects
 * to a merged node (found by the out-of-memory injection with steps after a failed split). */
static broadphase_status reshape(const method_world *w, octree *t, size_t chunks, size_t *count) {
    t->split_count = 0;
    t->redirected_count = 0;
    restructure(w, t, 0);
    bool changed = t->redirected_count > 0;
    if (t->split_count > 0) {
        /* Each crowded node's objects: those staying, then its arrivals (one run of the moves,
         * which gather_moves sorted by destination). */
        for (size_t i = 0; i < t->split_count; i++) {
            uint32_t n = t->splits[i];
            uint32_t k = 0;
            for (uint32_t s = t->nodes[n].begin; s < t->nodes[n].end; s++)
                if (t->dest[s] == n) t->refs[k++] = s;
            for (uint32_t a = t->arrive_first[n]; a < t->arrive_first[n] + t->arrivals[n]; a++) {
                uint32_t src = (uint32_t)(t->moves[a] >> 32);
                t->refs[k++] = src & TREE_ADDED ? t->slots.count + (src & ~TREE_ADDED) : src;
            }
            if (!split(w, t, n, t->refs, t->refs_tmp, k)) {
                clear_redirects(t);
                return BROADPHASE_ERROR_OUT_OF_MEMORY;
            }
        }
        changed = true;
    }
    if (!changed) return BROADPHASE_OK;
    /* Merged nodes hand their objects up; split ones have changed dest in place. */
    for (size_t i = 0; i < w->added_count; i++) {
        uint32_t d = t->add_dest[i];
        while (d != NONE && t->redirect[d] != NONE) d = t->redirect[d];
        t->add_dest[i] = d;
        if (t->add_dest[i] != NONE) t->node_of[w->added[i]] = t->add_dest[i];
    }
    if (!oc_by_node_reserve(w, t)) {
        clear_redirects(t);
        return BROADPHASE_ERROR_OUT_OF_MEMORY;
    }
    oc_ctx c = {w, t};
    threads_for_chunks(w->workers, chunks, count_movers, &c);
    *count = gather_moves(w, t, chunks);
    clear_redirects(t);
    return BROADPHASE_OK;
}

/* The slots laid out anew, into the other buffer, from every node's new own count. */
static void lay_out(const method_world *w, octree *t) {
    oc_ctx c = {w, t};
    size_t nodes = t->node_count;
    uint32_t total = relayout(t, 0, 0);
    tree_slots_ready(w, &t->slots, 1 - t->slots.cur, total);
    threads_for_chunks(w->workers, node_chunks(w, t), copy_nodes, &c);
    /* Spare and free nodes hold nothing: empty ranges (relayout does not reach inside
     * spare branches). */
    for (size_t n = 0; n < nodes; n++) {
        oc_node *node = &t->nodes[n];
        node->begin = node->spare ? 0 : t->new_begin[n];
        node->end = node->spare ? 0 : t->new_begin[n] + t->own_count[n];
        if (node->spare) node->sub_end = 0;
    }
    t->slots.cur = 1 - t->slots.cur;
    t->slots.count = total;
}

/* A chunk's movers bound for a node that is not a live leaf stay; the others are counted. */
static void light_movers(size_t chunk, int worker, void *p) {
    (void)worker;
    oc_ctx *c = p;
    octree *t = c->t;
    size_t begin, end;
    chunk_slots(t, chunk, &begin, &end);
    size_t movers = 0;
    for (size_t s = begin; s < end; s++) {
        uint32_t d = t->dest[s], n = t->slot_node[s];
        if (d == n) continue;
        if (d == DEAD || t->nodes[d].spare || !t->nodes[d].leaf)
            t->dest[s] = n;
        else
            movers++;
    }
    t->chunk_count[chunk] = movers;
}

/* The chunk's movers into moves_tmp, in slot order (source << 32 | destination). */
static void light_collect(size_t chunk, int worker, void *p) {
    (void)worker;
    oc_ctx *c = p;
    octree *t = c->t;
    size_t begin, end;
    chunk_slots(t, chunk, &begin, &end);
    uint64_t *out = t->moves_tmp + t->chunk_count[chunk];
    for (size_t s = begin; s < end; s++)
        if (t->dest[s] != t->slot_node[s]) *out++ = (uint64_t)s << 32 | t->dest[s];
}

/* The movers that waited (those the windows could not take, octree_windows.c) go to their
 * leaves, but nothing is tightened and the tree keeps its shape, so the flat list stays: when
 * oc_window_turn says so, and when a leaf's bounds left its reach region (the flat search could
 * not run). Laid out in place (octree_in_place.c): a hundred movers at moving2d 1e5 no longer
 * copy every slot into the other buffer, 0.34-0.48 ms of a 0.5-0.85 ms step (NOTES
 * rows 296-297); every slot is copied only where one segment of the in-place layout would hold
 * more than 3/4 of them. */
static void light_relayout(const method_world *w, octree *t, size_t chunks) {
    oc_ctx c = {w, t};
    t->light_layouts++;
    threads_for_chunks(w->workers, chunks, light_movers, &c);
    size_t moved = threads_exclusive_scan(w->workers, t->chunk_count, chunks);
    if (moved == 0) return;
    threads_for_chunks(w->workers, chunks, light_collect, &c);
    const uint32_t root = 0;
    if (oc_lay_out_in_place(w, t, &root, 1, moved, true)) return;
    threads_for_chunks(w->workers, chunks, light_movers, &c);
    if (gather_moves(w, t, chunks) > 0) lay_out(w, t);
}

/* How many movers may wait: more while windows take them in turn. */
static size_t pending_limit(const octree *t) {
    return t->slots.count / (t->window_pairs > 0 ? WINDOW_DEFER_SHARE : DEFER_SHARE);
}

void oc_refit_prepare(const method_world *w, octree *t) {
    if (w->config->update == BROADPHASE_UPDATE_REBUILD) return;
    /* (the objects the build took in are not new to it) */
    if (!refit_reserve(w, t, 0, 0)) return;
    tree_slots_warm(w, &t->slots, 1 - t->slots.cur, t->slots.capacity / WARM_STEPS + 1);
    /* What the first refit writes, once for arrays of a size, as the kd-tree's
     * (kd_refit_prepare) */
    if (t->touched_capacity == t->dest_capacity) return;
    tree_touch(w, t->dest, t->dest_capacity * sizeof *t->dest);
    tree_touch(w, t->moves, t->move_capacity / 8 * sizeof *t->moves);
    tree_touch(w, t->moves_tmp, t->move_capacity / 8 * sizeof *t->moves_tmp);
    t->touched_capacity = t->dest_capacity;
}

/* REFIT; *escaped (and nothing changed) when an object left the root. */
broadphase_status oc_refit(const method_world *w, octree *t, bool *escaped) {
    t->refit_chunk = refit_chunk_size(t->slots.count, w->workers);
    size_t chunks = threads_chunk_count(t->slots.count, t->refit_chunk);
    if (!refit_reserve(w, t, chunks, w->added_count)) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    oc_ctx c = {w, t};
    t->escaped = t->urgent = t->beyond = false;
    t->ahead_kept = 0;
    tree_slots_warm(w, &t->slots, 1 - t->slots.cur, t->slots.capacity / WARM_STEPS + 1);
    threads_for_chunks(w->workers, chunks, refit_slots, &c);
    /* The marks of a window tightened at the last step live for this refit only. */
    uint32_t ahead = t->ahead_end > t->ahead_begin ? t->ahead_top : NONE;
    t->ahead_begin = t->ahead_end = 0;
    size_t placed = place_added(w, t);
    if (t->escaped) {
        for (size_t i = 0; i < w->added_count; i++)
            if (t->add_dest[i] != NONE) t->node_of[w->added[i]] = NONE;
        *escaped = true;
        return BROADPHASE_OK;
    }

    /* Moving objects between nodes means laying every slot out anew, however few move. Those
     * that only drifted into a neighbour's region of the same parent wait in their node (its
     * measured bounds keep the search exact; they only widen a little) until they are more
     * than 1/DEFER_SHARE of the objects, or until anything else needs a new layout. */
    size_t pending = 0;
    for (size_t i = 0; i < chunks; i++) pending += t->chunk_count[i];
    pending -= t->ahead_kept; /* (marks kept are movers, but they need not be laid out now) */
    if (!t->urgent && placed == 0 && pending <= pending_limit(t)) {
        /* A mover that would wait outside its node's reach region (t->beyond) would take the
         * flat list away from this step's search, so the movers are laid out now; the same when
         * one did at the last step (a mover no light relayout can take). */
        if (t->beyond || (t->flat_state & FLAT_ESCAPE) || !oc_window_turn(w, t, ahead))
            light_relayout(w, t, chunks);
        oc_measure(t, w->workers, true);
        w->stats->refits++;
        return BROADPHASE_OK;
    }
    /* A relayout for more waiting movers than may wait tightens every leaf. One for additions
     * or removals (the movers still few enough to wait) tightens a TIGHTEN_EVERY-th of the slots,
     * the next part at the next such step: never run, leaves would loosen to their regions; run
     * over every slot at every step that adds, it moved objects between leaves at each and the
     * flat list was made again at most of them (NOTES row 133); over every slot at every
     * TIGHTEN_EVERY-th, that step cost 2.2 ms more than the others at 1e5 (NOTES row 271). */
    tighten_ctx tc = {t, 0};
    if (pending > pending_limit(t)) {
        threads_for_chunks(w->workers, chunks, tighten, &tc);
    } else {
        size_t part = t->tighten_turn++ % TIGHTEN_EVERY;
        tc.first = chunks * part / TIGHTEN_EVERY;
        threads_for_chunks(w->workers, chunks * (part + 1) / TIGHTEN_EVERY - tc.first, tighten,
                           &tc);
    }
    size_t count = gather_moves(w, t, chunks);
    broadphase_status s = reshape(w, t, chunks, &count);
    if (s != BROADPHASE_OK) return s;
    if (count > 0) {
        lay_out(w, t);
        t->full_layouts++;
    }
    oc_measure(t, w->workers, true);
    w->stats->refits++;
    return BROADPHASE_OK;
}
