/* The kd-tree's refit: the planes stay; objects that left their node's cell (or now fit a child)
 * are re-homed, the nodes laid out anew in preorder with their arrivals, all from one prefix sum,
 * and the sweep nodes sorted again, each node's arrivals merged into the objects that stayed. */
#include "kdtree_internal.h"

#include "parallel.h"
#include "tree.h"
#include "method.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The child an object sinks into from n, or NONE when it stays (straddles, leaf, or the child on
 * its side is absent). */
static uint32_t sink_step(const kd_node *n, const float mn[3], const float mx[3]) {
    if (is_leaf(n)) return NONE;
    if (mx[n->axis] < n->plane) return n->child[0];
    if (mn[n->axis] > n->plane) return n->child[1];
    return NONE;
}

static uint32_t rehome(const kd_node *nodes, uint32_t n, const float mn[3], const float mx[3],
                       int dims) {
    while (n != 0 && !in_cell(&nodes[n], mn, mx, dims)) n = nodes[n].parent;
    for (;;) {
        uint32_t c = sink_step(&nodes[n], mn, mx);
        if (c == NONE) return n;
        n = c;
    }
}

/* The first position whose node begins at `slot` or later (begins rise with the position). */
static uint32_t first_position_at(const kdtree *t, size_t slot) {
    uint32_t lo = 0, hi = t->node_count;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (t->nodes[t->order[mid]].begin < slot)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Positions [*first, *last) of the nodes whose own objects begin in chunk `chunk` of slot_chunk
 * slots (the last chunk takes every node after), so that passes over nodes are cut by the work
 * in them, not by node count: the top levels hold many objects in few nodes. */
static void slot_chunk_positions(const kdtree *t, size_t chunk, size_t chunks, uint32_t *first,
                                 uint32_t *last) {
    *first = chunk == 0 ? 0 : first_position_at(t, chunk * t->slot_chunk);
    *last = chunk + 1 >= chunks ? t->node_count : first_position_at(t, (chunk + 1) * t->slot_chunk);
}

/* Chunks of slot_chunk slots (at least one, which an empty tree's passes over nodes need). */
static size_t slot_chunks(const kdtree *t, uint32_t slots) {
    return slots == 0 ? 1 : threads_chunk_count(slots, t->slot_chunk);
}

/* Reads every object's new bounds into its slot and decides the node it belongs in now. */
static void refit_slots(size_t chunk, int worker, void *p) {
    (void)worker;
    kd_pass_ctx *c = p;
    const method_world *w = c->w;
    kdtree *t = c->t;
    int b = t->slots.cur, dims = w->config->dimensions;
    size_t begin = chunk * t->slot_chunk, end = begin + t->slot_chunk;
    if (end > t->slots.count) end = t->slots.count;
    size_t movers = 0;
    /* When streaming (see tree_slots_stream), the new values are gathered a block at a time
     * and streamed column by column. */
    bool stream = tree_slots_stream(w, &t->slots);
    tree_slot_block blk;
    for (size_t s0 = begin; s0 < end; s0 += TREE_SLOT_BLOCK) {
        size_t s1 = end - s0 < TREE_SLOT_BLOCK ? end : s0 + TREE_SLOT_BLOCK;
        for (size_t s = s0; s < s1; s++) {
            float mn[3], mx[3];
            tree_refit_read(w, &t->slots, b, &blk, s0, s, end, stream, mn, mx);
            /* Removed (see tree_refit_read): the kind column need not be read, one cache line
             * fewer per object. */
            if (mn[0] == INFINITY) {
                t->dest[s] = DEAD;
                movers++;
                continue;
            }
            uint32_t n = t->slot_node[s];
            uint32_t d = n;
            if (!in_cell(&t->nodes[n], mn, mx, dims) || sink_step(&t->nodes[n], mn, mx) != NONE)
                d = rehome(t->nodes, n, mn, mx, dims);
            t->dest[s] = d;
            movers += d != n;
        }
        if (stream) tree_slots_stream_block(&t->slots, b, s0, s1 - s0, &blk);
    }
    if (stream) simd_stream_fence();
    t->chunk_count[chunk] = movers;
}

static void collect_movers(size_t chunk, int worker, void *p) {
    (void)worker;
    kd_pass_ctx *c = p;
    kdtree *t = c->t;
    size_t begin = chunk * t->slot_chunk, end = begin + t->slot_chunk;
    if (end > t->slots.count) end = t->slots.count;
    tree_collect_moves(t->dest, t->slot_node, begin, end, t->moves + t->chunk_count[chunk]);
}

/* Own counts before the moves: what each node holds; arrivals counted from zero. */
static void start_counts(size_t chunk, int worker, void *p) {
    (void)worker;
    kdtree *t = ((kd_pass_ctx *)p)->t;
    uint32_t first, last;
    position_range(t, chunk, &first, &last); /* here by node index */
    for (uint32_t n = first; n < last; n++) {
        t->own_count[n] = t->nodes[n].end - t->nodes[n].begin;
        t->arrive_first[n] = 0;
    }
}

static void move_range(const kd_pass_ctx *c, size_t chunk, size_t *first, size_t *last) {
    *first = chunk * MOVE_CHUNK;
    *last = *first + MOVE_CHUNK < c->moves ? *first + MOVE_CHUNK : c->moves;
}

/* Own counts after the moves, and arrivals by node (atomic: movers from anywhere meet). */
static void count_moves(size_t chunk, int worker, void *p) {
    (void)worker;
    kd_pass_ctx *c = p;
    kdtree *t = c->t;
    size_t first, last;
    move_range(c, chunk, &first, &last);
    uint32_t most = 0;
    for (size_t m = first; m < last; m++) {
        uint32_t d = (uint32_t)(t->moves[m] >> 32), src = (uint32_t)t->moves[m];
        if (!(src & TREE_ADDED))
            __atomic_fetch_sub(&t->own_count[t->slot_node[src]], 1u, __ATOMIC_RELAXED);
        if (d == DEAD) continue;
        __atomic_fetch_add(&t->own_count[d], 1u, __ATOMIC_RELAXED);
        uint32_t a = __atomic_add_fetch(&t->arrive_first[d], 1u, __ATOMIC_RELAXED);
        most = a > most ? a : most;
    }
    uint32_t seen = __atomic_load_n(&c->most, __ATOMIC_RELAXED);
    while (most > seen && !__atomic_compare_exchange_n(&c->most, &seen, most, true,
                                                       __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
    }
}

/* Each arrival takes a place in its node's run; the run's order is settled in copy_nodes. */
static void scatter_moves(size_t chunk, int worker, void *p) {
    (void)worker;
    kd_pass_ctx *c = p;
    kdtree *t = c->t;
    size_t first, last;
    move_range(c, chunk, &first, &last);
    for (size_t m = first; m < last; m++) {
        uint32_t d = (uint32_t)(t->moves[m] >> 32);
        if (d == DEAD) continue;
        t->moves_tmp[__atomic_fetch_add(&t->arrive_end[d], 1u, __ATOMIC_RELAXED)] = t->moves[m];
    }
}

static int compare_moves(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* A node's arrivals in move order (slots ascending, then w->added), whatever order the threads
 * placed them in: the layout does not depend on the thread count. */
static void sort_run(uint64_t *run, size_t k) {
    if (k > 16) {
        qsort(run, k, sizeof *run, compare_moves);
        return;
    }
    for (size_t i = 1; i < k; i++) {
        uint64_t v = run[i];
        size_t j = i;
        for (; j > 0 && run[j - 1] > v; j--) run[j] = run[j - 1];
        run[j] = v;
    }
}

/* One prefix sum lays out both the nodes and the arrivals' runs: each position packs its node's
 * new own count above its arrival count (both below 2^32, so the low half never carries). */
static void pack_counts(size_t chunk, int worker, void *p) {
    (void)worker;
    kdtree *t = ((kd_pass_ctx *)p)->t;
    uint32_t first, last;
    position_range(t, chunk, &first, &last);
    for (uint32_t i = first; i < last; i++) {
        uint32_t n = t->order[i];
        t->scan[i] = (size_t)t->own_count[n] << 32 | t->arrive_first[n];
    }
}

static void unpack_starts(size_t chunk, int worker, void *p) {
    (void)worker;
    kdtree *t = ((kd_pass_ctx *)p)->t;
    uint32_t first, last;
    position_range(t, chunk, &first, &last);
    for (uint32_t i = first; i < last; i++) {
        uint32_t n = t->order[i];
        t->new_begin[n] = (uint32_t)(t->scan[i] >> 32);
        t->arrive_first[n] = t->arrive_end[n] = (uint32_t)t->scan[i];
    }
}

static void copy_nodes(size_t chunk, int worker, void *p) {
    (void)worker;
    kd_pass_ctx *c = p;
    kdtree *t = c->t;
    uint32_t first, last;
    slot_chunk_positions(t, chunk, c->chunks, &first, &last);
    for (uint32_t i = first; i < last; i++) {
        uint32_t n = t->order[i];
        sort_run(t->moves + t->arrive_first[n], t->arrive_end[n] - t->arrive_first[n]);
        tree_copy_node(c->w, &t->slots, t->dest, t->slot_node, t->node_of, t->moves, 0, n,
                       t->nodes[n].begin, t->nodes[n].end, t->new_begin[n], t->arrive_first[n],
                       t->arrive_end[n]);
    }
}

/* Insertion sort of slots [begin, end) by min on axis s (the order barely changes from one step
 * to the next, so each object moves a place or two). */
static void insertion_sort_slots(tree_slots *sl, uint32_t begin, uint32_t end, int s) {
    int b = sl->cur;
    float *key = sl->smin[b][s];
    for (uint32_t i = begin + 1; i < end; i++) {
        if (key[i - 1] <= key[i]) continue;
        float mn[3], mx[3];
        for (int a = 0; a < 3; a++) {
            mn[a] = sl->smin[b][a][i];
            mx[a] = sl->smax[b][a][i];
        }
        uint32_t id = sl->sid[b][i], j = i;
        for (; j > begin && key[j - 1] > mn[s]; j--) {
            for (int a = 0; a < 3; a++) {
                sl->smin[b][a][j] = sl->smin[b][a][j - 1];
                sl->smax[b][a][j] = sl->smax[b][a][j - 1];
            }
            sl->sid[b][j] = sl->sid[b][j - 1];
        }
        for (int a = 0; a < 3; a++) {
            sl->smin[b][a][j] = mn[a];
            sl->smax[b][a][j] = mx[a];
        }
        sl->sid[b][j] = id;
    }
}

/* A refit copies a node's arrivals after the objects that stayed, both runs in no particular
 * order of their own: inserting each arrival into the sorted stayers would shift the whole node
 * once per arrival (hundreds of arrivals into thousands of objects at the top of the tree), so
 * the arrivals are sorted on their own in `tmp` (7 columns of `k` entries) and merged in from
 * the back, stayers first among equal keys. */
static void merge_arrivals(tree_slots *sl, uint32_t begin, uint32_t mid, uint32_t end, int s,
                           uint32_t *tmp) {
    int b = sl->cur;
    uint32_t k = end - mid;
    float *tcol[6];
    for (int a = 0; a < 6; a++) tcol[a] = (float *)(tmp + (size_t)a * k);
    uint32_t *tid = tmp + (size_t)6 * k;
    for (int a = 0; a < 3; a++) {
        memcpy(tcol[a], sl->smin[b][a] + mid, k * sizeof(float));
        memcpy(tcol[3 + a], sl->smax[b][a] + mid, k * sizeof(float));
    }
    memcpy(tid, sl->sid[b] + mid, k * sizeof(uint32_t));
    for (uint32_t i = 1; i < k; i++) { /* arrivals are few: insertion sort */
        float v[6];
        for (int a = 0; a < 6; a++) v[a] = tcol[a][i];
        uint32_t id = tid[i], j = i;
        for (; j > 0 && tcol[s][j - 1] > v[s]; j--) {
            for (int a = 0; a < 6; a++) tcol[a][j] = tcol[a][j - 1];
            tid[j] = tid[j - 1];
        }
        for (int a = 0; a < 6; a++) tcol[a][j] = v[a];
        tid[j] = id;
    }
    const float *key = sl->smin[b][s];
    uint32_t i = mid, j = k, out = end;
    while (j > 0) {
        out--;
        if (i > begin && key[i - 1] > tcol[s][j - 1]) {
            i--;
            for (int a = 0; a < 3; a++) {
                sl->smin[b][a][out] = sl->smin[b][a][i];
                sl->smax[b][a][out] = sl->smax[b][a][i];
            }
            sl->sid[b][out] = sl->sid[b][i];
        } else {
            j--;
            for (int a = 0; a < 3; a++) {
                sl->smin[b][a][out] = tcol[a][j];
                sl->smax[b][a][out] = tcol[3 + a][j];
            }
            sl->sid[b][out] = tid[j];
        }
    }
}

/* Objects move between steps: sweep nodes are sorted again and their reach and slab measured
 * again. */
static void resort_sweep_nodes(size_t chunk, int worker, void *p) {
    const kd_pass_ctx *c = p;
    kdtree *t = c->t;
    int b = t->slots.cur;
    uint32_t first, last;
    slot_chunk_positions(t, chunk, c->chunks, &first, &last);
    for (uint32_t pos = first; pos < last; pos++) {
        uint32_t n = t->order[pos];
        kd_node *node = &t->nodes[n];
        if (node->sweep == NO_SWEEP) continue;
        int s = node->sweep;
        float reach = 0.0f;
        for (uint32_t i = node->begin; i < node->end; i++) {
            float e = t->slots.smax[b][s][i] - t->slots.smin[b][s][i];
            reach = e > reach ? e : reach;
        }
        node->reach = nextafterf(reach, INFINITY);
        if (!is_leaf(node)) {
            float lo = INFINITY, hi = -INFINITY;
            const float *mn = t->slots.smin[b][node->axis], *mx = t->slots.smax[b][node->axis];
            for (uint32_t i = node->begin; i < node->end; i++) {
                lo = mn[i] < lo ? mn[i] : lo;
                hi = mx[i] > hi ? mx[i] : hi;
            }
            node->slab_lo = lo;
            node->slab_hi = hi;
        }
        uint32_t arrived = c->new_ranges ? t->arrive_end[n] - t->arrive_first[n] : 0;
        uint32_t *tmp = arrived > 1 ? threads_scratch_get(c->w->scratch, worker,
                                                          (size_t)7 * arrived * sizeof(uint32_t))
                                    : NULL;
        if (!tmp) { /* no arrivals, or no memory for them: one insertion sort still sorts */
            insertion_sort_slots(&t->slots, node->begin, node->end, s);
            continue;
        }
        insertion_sort_slots(&t->slots, node->begin, node->end - arrived, s);
        merge_arrivals(&t->slots, node->begin, node->end - arrived, node->end, s, tmp);
    }
}

/* Room for a refit's passes with `added` objects new to the tree (the node arrays for the pool,
 * as in the build: room that seldom grows), and for every object moving at once, so that the
 * count of movers, which changes every step, never makes a step allocate. False on out of
 * memory. */
static bool refit_reserve(const method_world *w, kdtree *t, size_t chunks, size_t added) {
    size_t pool = t->node_capacity;
    size_t need = t->slots.count + added + 1;
    return heap_grow(w->heap, (void **)&t->chunk_count, &t->chunk_capacity, chunks + 1,
                     sizeof(size_t), 0) &&
           heap_grow(w->heap, (void **)&t->dest, &t->dest_capacity, t->slots.capacity + 1,
                     sizeof(uint32_t), 0) &&
           heap_grow(w->heap, (void **)&t->slot_node, &t->slot_node_capacity, t->slots.capacity + 1,
                     sizeof(uint32_t), t->slots.count) &&
           heap_grow(w->heap, (void **)&t->own_count, &t->own_count_capacity, pool + 1,
                     sizeof(uint32_t), 0) &&
           heap_grow(w->heap, (void **)&t->new_begin, &t->new_begin_capacity, pool + 1,
                     sizeof(uint32_t), 0) &&
           heap_grow(w->heap, (void **)&t->arrive_first, &t->arrive_first_capacity, pool + 1,
                     sizeof(uint32_t), 0) &&
           heap_grow(w->heap, (void **)&t->arrive_end, &t->arrive_end_capacity, pool + 1,
                     sizeof(uint32_t), 0) &&
           id_tables_reserve(w, t) && threads_scratch_reserve(w->scratch, w->workers) &&
           heap_grow(w->heap, (void **)&t->moves, &t->move_capacity, need, sizeof(uint64_t), 0) &&
           heap_grow(w->heap, (void **)&t->moves_tmp, &t->moves_tmp_capacity, need,
                     sizeof(uint64_t), 0);
}

void kd_refit_prepare(const method_world *w, kdtree *t) {
    if (w->config->update == BROADPHASE_UPDATE_REBUILD) return;
    size_t chunks =
        threads_chunk_count(t->slots.count, kd_slot_chunk_size(t->slots.count, w->workers));
    /* (the objects the build took in are not new to it) */
    if (!refit_reserve(w, t, chunks, 0)) return;
    /* (The other slot buffer is not readied here: the build used it as scratch, so its pages
     * are touched, and the first relayout writes the sentinels past what it lays out. Readying
     * it here wrote all of it again at every build, 28 MB at 1e6 objects.) */
    /* What the first refit writes, once for arrays of a size: every slot's destination, the
     * movers (usually far fewer than an eighth in a step) and their grouping. */
    if (t->touched_capacity == t->dest_capacity) return;
    tree_touch(w, t->dest, t->dest_capacity * sizeof *t->dest);
    tree_touch(w, t->moves, t->move_capacity / 8 * sizeof *t->moves);
    tree_touch(w, t->moves_tmp, t->moves_tmp_capacity / 8 * sizeof *t->moves_tmp);
    t->touched_capacity = t->dest_capacity;
}

broadphase_status kd_refit(const method_world *w, kdtree *t) {
    int dims = w->config->dimensions;
    t->slot_chunk = kd_slot_chunk_size(t->slots.count, w->workers);
    size_t chunks = threads_chunk_count(t->slots.count, t->slot_chunk);
    size_t nodes = t->node_count;
    if (!refit_reserve(w, t, chunks, w->added_count)) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    kd_pass_ctx c = {w, t, slot_chunks(t, t->slots.count), false, 0, 0};
    threads_for_chunks(w->workers, chunks, refit_slots, &c);
    size_t movers = threads_exclusive_scan(w->workers, t->chunk_count, chunks);
    threads_for_chunks(w->workers, chunks, collect_movers, &c);

    /* Moves (see tree.h) come in a fixed order (slots ascending, then w->added), which the
     * grouping by node below keeps. */
    size_t count = movers;
    for (size_t i = 0; i < w->added_count; i++) {
        uint32_t id = w->added[i];
        if (!method_member(w, id) || t->node_of[id] != NONE) continue;
        float mn[3], mx[3];
        for (int k = 0; k < 3; k++) {
            mn[k] = w->store->box[id].lo[k];
            mx[k] = w->store->box[id].hi[k];
        }
        uint32_t d = rehome(t->nodes, 0, mn, mx, dims);
        t->node_of[id] = d; /* taken, in case the id was added twice since the last step */
        t->moves[count++] = (uint64_t)d << 32 | TREE_ADDED | (uint32_t)i;
    }
    size_t node_chunk_count = kd_node_chunks(w, t, t->slots.count);
    if (count == 0) {
        threads_for_chunks(w->workers, c.chunks, resort_sweep_nodes, &c);
        return BROADPHASE_OK;
    }

    /* The nodes are laid out anew in preorder from their new own counts, and the arrivals
     * grouped by node into runs in the same order, all from one prefix sum over positions;
     * every pass is parallel, over nodes or over moves. */
    threads_for_chunks(w->workers, node_chunk_count, start_counts, &c);
    c.moves = count;
    size_t move_chunks = threads_chunk_count(count, MOVE_CHUNK);
    threads_for_chunks(w->workers, move_chunks, count_moves, &c);
    uint32_t most = c.most;
    /* The resort's room for one node's arrivals, in every worker, grown here in powers of two
     * from ARRIVAL_ROOM so that steady steps allocate nothing. */
    size_t room = ARRIVAL_ROOM;
    while (room < most) room *= 2;
    for (int i = 0; i < w->workers; i++)
        if (!threads_scratch_get(w->scratch, i, 7 * room * sizeof(uint32_t)))
            return BROADPHASE_ERROR_OUT_OF_MEMORY;
    threads_for_chunks(w->workers, node_chunk_count, pack_counts, &c);
    size_t total = threads_exclusive_scan(w->workers, t->scan, nodes);
    t->scan[nodes] = total;
    threads_for_chunks(w->workers, node_chunk_count, unpack_starts, &c);
    threads_for_chunks(w->workers, move_chunks, scatter_moves, &c);
    uint64_t *sorted = t->moves_tmp;
    size_t sorted_capacity = t->moves_tmp_capacity;
    t->moves_tmp = t->moves;
    t->moves_tmp_capacity = t->move_capacity;
    t->moves = sorted;
    t->move_capacity = sorted_capacity;
    tree_slots_ready(w, &t->slots, 1 - t->slots.cur, (size_t)(total >> 32));
    threads_for_chunks(w->workers, c.chunks, copy_nodes, &c); /* cut by the old layout */
    c.new_ranges = true;
    threads_for_chunks(w->workers, node_chunk_count, kd_set_ranges, &c);
    t->slots.cur = 1 - t->slots.cur;
    t->slots.count = (uint32_t)(total >> 32);
    c.chunks = slot_chunks(t, t->slots.count);
    threads_for_chunks(w->workers, c.chunks, resort_sweep_nodes, &c);
    return BROADPHASE_OK;
}
