/* The octree's slots laid out anew in the current buffer itself (see octree_windows.c, which
 * lays a pair of windows out this way, and octree_refit.c's light relayout, the whole tree):
 * only the movers and the slots at the ends of nodes that shift are written, where a copy into
 * the other buffer writes every slot (and a copy back, for a pair of windows, writes it again).
 *
 * The movers are in moves_tmp, in slot order (source << 32 | destination, a live leaf; no
 * object is added or removed). Each subtree laid out keeps its total, and its slots: only its
 * nodes' counts and places change. Its nodes, in preorder, are cut into segments at nodes that
 * keep their first slot: a segment's old and new slots are then the same range, and the
 * segments are laid out on the workers at once. The result is the same for any cut (the
 * stayers' order within a node is free, the arrivals' is the moves' order), so the thread
 * count changes nothing but the time. */
#include "octree_internal.h"

enum {
    SEGMENTS_MOST = 64,  /* segments at most */
    SEGMENTS_WANT = 16,  /* a segment ends, where it may, once it holds 1/16 of the slots ... */
    SEGMENT_LEAST = 4096 /* ... or this many, if more */
};

/* Node n's objects that stay, in slots [begin, begin + stay), to [to, to + stay): since their
 * order within the node is free, only the part that does not land on itself moves, from one
 * end to the other (at most as many slots as the node shifts by). */
static void shift_node(octree *t, uint32_t n, uint32_t begin, uint32_t stay, uint32_t to) {
    uint32_t by = to < begin ? begin - to : to - begin, count = by < stay ? by : stay;
    if (count == 0) return;
    int b = t->slots.cur;
    if (to < begin)
        tree_copy_run(&t->slots, b, b, begin + stay - count, begin + stay, to, t->slot_node, n);
    else
        tree_copy_run(&t->slots, b, b, begin, begin + count, to + stay - count, t->slot_node, n);
}

/* What the passes read: the nodes, list (preorder), and each segment's part of it,
 * list[node_at[k], node_at[k + 1]), and of the movers, moves_tmp[move_at[k], move_at[k + 1]). */
typedef struct in_place_ctx {
    octree *t;
    const uint32_t *list;
    size_t node_at[SEGMENTS_MOST + 1], move_at[SEGMENTS_MOST + 1];
} in_place_ctx;

/* A segment's own part: its movers into the other buffer at their places in moves_tmp
 * (scratch: the next full relayout writes that buffer before it is read); in each node, the
 * objects that stay packed to its front, the last ones into the holes the movers left; then the
 * nodes' packed objects shifted to their new slots, first those that shift down in slot order,
 * in order, then those that shift up, last first, so that none lands on objects that have not
 * moved yet (at each shift, the new slots of the node's stayers lie between where the earlier
 * nodes' stayers and the later nodes' stayers are at that moment; the arrivals, which fill the
 * gaps, come after every segment's shifts). */
static void in_place_segment(size_t k, int worker, void *p) {
    (void)worker;
    const in_place_ctx *c = p;
    octree *t = c->t;
    tree_slots *sl = &t->slots;
    int cur = sl->cur;
    size_t m = c->move_at[k], moved = c->move_at[k + 1];
    for (size_t q = m; q < moved; q++)
        tree_move_slot(sl, cur, (uint32_t)(t->moves_tmp[q] >> 32), 1 - cur, (uint32_t)q);
    size_t first = c->node_at[k], last = c->node_at[k + 1];
    for (size_t i = first; i < last; i++) {
        uint32_t n = c->list[i];
        const oc_node *node = &t->nodes[n];
        uint32_t front = node->begin + t->own_count[n] - t->arrivals[n], from = node->end;
        for (; m < moved && (uint32_t)(t->moves_tmp[m] >> 32) < node->end; m++) {
            uint32_t hole = (uint32_t)(t->moves_tmp[m] >> 32);
            if (hole >= front) continue;
            do from--;
            while (t->dest[from] != n);
            tree_move_slot(sl, cur, from, cur, hole);
        }
        /* (dest is left as it is, as after any relayout: the next refit reads it as a hint) */
    }
    for (size_t i = first; i < last; i++) {
        uint32_t n = c->list[i];
        if (t->new_begin[n] < t->nodes[n].begin)
            shift_node(t, n, t->nodes[n].begin, t->own_count[n] - t->arrivals[n], t->new_begin[n]);
    }
    for (size_t i = last; i-- > first;) {
        uint32_t n = c->list[i];
        if (t->new_begin[n] > t->nodes[n].begin)
            shift_node(t, n, t->nodes[n].begin, t->own_count[n] - t->arrivals[n], t->new_begin[n]);
    }
}

/* A segment's arrivals, from the other buffer, behind the objects that stayed in their nodes;
 * then its nodes take their new slots. */
static void in_place_arrivals(size_t k, int worker, void *p) {
    (void)worker;
    const in_place_ctx *c = p;
    octree *t = c->t;
    tree_slots *sl = &t->slots;
    int cur = sl->cur;
    for (size_t i = c->node_at[k]; i < c->node_at[k + 1]; i++) {
        uint32_t n = c->list[i];
        uint32_t at = t->new_begin[n] + t->own_count[n] - t->arrivals[n];
        for (uint32_t q = t->arrive_first[n]; q < t->arrive_first[n] + t->arrivals[n]; q++, at++) {
            tree_move_slot(sl, 1 - cur, (uint32_t)(t->moves[q] >> 32), cur, at);
            t->slot_node[at] = n;
            t->node_of[sl->sid[cur][at]] = n;
        }
        oc_node *node = &t->nodes[n];
        node->begin = t->new_begin[n];
        node->end = node->begin + t->own_count[n];
    }
}

/* The live nodes of n's subtree into list[k...] in preorder, the order of the layout; returns
 * the new end of the list. */
static size_t subtree_nodes(const octree *t, uint32_t n, uint32_t *list, size_t k) {
    list[k++] = n;
    for (int j = 0; j < t->nchild; j++) {
        uint32_t c = t->nodes[n].child[j];
        if (c != NONE && !t->nodes[c].spare) k = subtree_nodes(t, c, list, k);
    }
    return k;
}

bool oc_lay_out_in_place(const method_world *w, octree *t, const uint32_t *tops, size_t top_count,
                         size_t moved, bool may_refuse) {
    /* Every node's count and arrivals; where each begins anew, each subtree from its own first
     * slot; the moves grouped by destination in the order of the list (moves: the entry of
     * moves_tmp << 32 | node). */
    uint32_t *list = t->splits; /* by node; no split is under way */
    size_t nodes = 0, top_at[SEGMENTS_MOST + 1];
    for (size_t k = 0; k < top_count; k++) {
        top_at[k] = nodes;
        nodes = subtree_nodes(t, tops[k], list, nodes);
    }
    top_at[top_count] = nodes;
    for (size_t i = 0; i < nodes; i++) {
        uint32_t n = list[i];
        t->own_count[n] = t->nodes[n].end - t->nodes[n].begin;
        t->arrivals[n] = 0;
    }
    for (size_t m = 0; m < moved; m++) {
        uint32_t s = (uint32_t)(t->moves_tmp[m] >> 32), d = (uint32_t)t->moves_tmp[m];
        t->own_count[t->slot_node[s]]--;
        t->own_count[d]++;
        t->arrivals[d]++;
    }
    uint32_t first = 0;
    for (size_t k = 0; k < top_count; k++) {
        uint32_t at = t->nodes[tops[k]].begin;
        for (size_t i = top_at[k]; i < top_at[k + 1]; i++) {
            uint32_t n = list[i];
            t->new_begin[n] = at;
            at += t->own_count[n];
            t->arrive_first[n] = first;
            first += t->arrivals[n];
            t->arrivals[n] = 0;
        }
    }
    for (size_t m = 0; m < moved; m++) {
        uint32_t d = (uint32_t)t->moves_tmp[m];
        t->moves[t->arrive_first[d] + t->arrivals[d]++] = (uint64_t)m << 32 | d;
    }

    /* The segments: each subtree's start, then nodes that keep their first slot, once the
     * segment so far holds its share of the slots (a few a worker, SEGMENT_LEAST at least). */
    size_t slots = 0;
    for (size_t k = 0; k < top_count; k++)
        slots += t->nodes[tops[k]].sub_end - t->nodes[tops[k]].begin;
    /* (from the slots alone, not the workers: whether the caller copies instead must not
     * depend on the thread count, since the copy keeps a node's stayers in slot order and this
     * layout does not) */
    size_t share = slots / SEGMENTS_WANT > SEGMENT_LEAST ? slots / SEGMENTS_WANT : SEGMENT_LEAST;
    in_place_ctx c = {.t = t, .list = list};
    size_t segments = 0, largest = 0;
    for (size_t k = 0; k < top_count; k++) {
        uint32_t from = t->nodes[tops[k]].begin;
        for (size_t i = top_at[k]; i < top_at[k + 1]; i++) {
            uint32_t n = list[i];
            bool cut = i == top_at[k] ||
                       (t->new_begin[n] == t->nodes[n].begin && t->nodes[n].begin - from >= share &&
                        segments + (top_count - k) <= SEGMENTS_MOST);
            if (!cut) continue;
            if (i != top_at[k] && t->nodes[n].begin - from > largest)
                largest = t->nodes[n].begin - from;
            c.node_at[segments++] = i;
            from = t->nodes[n].begin;
        }
        uint32_t end = t->nodes[tops[k]].sub_end;
        if (end - from > largest) largest = end - from;
    }
    c.node_at[segments] = nodes;
    /* Each segment's movers: those from its slots (moves_tmp is in slot order). */
    size_t m = 0;
    for (size_t k = 0; k < segments; k++) {
        uint32_t begin = t->nodes[list[c.node_at[k]]].begin;
        while (m < moved && (uint32_t)(t->moves_tmp[m] >> 32) < begin) m++;
        c.move_at[k] = m;
    }
    c.move_at[segments] = moved;
    /* One segment holding most of the slots would leave the other workers idle: the caller may
     * rather copy every slot into the other buffer, in parallel (on one worker as well, for the
     * same layout on every thread count). */
    if (may_refuse && largest > slots / 4 * 3) return false;
    threads_for_chunks(w->workers, segments, in_place_segment, &c);
    threads_for_chunks(w->workers, segments, in_place_arrivals, &c);
    return true;
}
