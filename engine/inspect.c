/* broadphase_visit_nodes: the structures of the last step, node by node, through the same views
 * the queries walk (query.h). The rest field keeps the entries of objects that left the rest
 * until it is built again (rest.h); they are not shown, as the queries skip them. */
#include "method.h"
#include "query.h"
#include "world.h"

#include <math.h>
#include <string.h>

enum { VISIT_STACK = 2048 }; /* deeper than any structure's depth x 7 siblings */

typedef struct visit_entry {
    uint64_t handle;
    uint32_t depth, parent;
} visit_entry;

/* Bounds of the boxes at positions [begin, end) of a tree's slots. */
static void slot_bounds(const simd_boxes *b, uint32_t begin, uint32_t end, int dims, float lo[3],
                        float hi[3]) {
    for (int k = 0; k < dims; k++) {
        lo[k] = INFINITY;
        hi[k] = -INFINITY;
        for (uint32_t i = begin; i < end; i++) {
            lo[k] = fminf(lo[k], b->min[k][i]);
            hi[k] = fmaxf(hi[k], b->max[k][i]);
        }
    }
}

/* Visits one structure; false when the visitor stopped it. */
static bool visit_view(const broadphase_world *w, const query_view *v, broadphase_structure which,
                       broadphase_node_visitor visit, void *user) {
    int dims = w->config.dimensions;
    visit_entry stack[VISIT_STACK];
    int top = 0;
    uint32_t index = 0;
    stack[top++] = (visit_entry){v->root, 0, BROADPHASE_NO_NODE};
    while (top > 0) {
        visit_entry e = stack[--top];
        query_node n;
        v->node(v->structure, e.handle, &n);
        broadphase_node out = {.structure = which,
                               .index = index++,
                               .parent = e.parent,
                               .depth = e.depth,
                               .children = (uint32_t)n.children,
                               .has_cell = v->cell != NULL,
                               .object_count = n.own_end - n.own_begin,
                               .subtree_count = n.sub_end - n.sub_begin,
                               .ids = n.own_id + n.own_begin};
        if (v->cell) { /* a tree: its nodes' bounds are measured from its slots */
            v->cell(v->structure, e.handle, out.cell_min, out.cell_max);
            slot_bounds(&n.own, n.sub_begin, n.sub_end, dims, out.bounds_min, out.bounds_max);
        } else { /* a field: its nodes' bounds, the root's too (the top level's union) */
            memcpy(out.bounds_min, n.lo, sizeof n.lo);
            memcpy(out.bounds_max, n.hi, sizeof n.hi);
        }
        if (!v->cell) {
            memcpy(out.cell_min, out.bounds_min, sizeof out.cell_min);
            memcpy(out.cell_max, out.bounds_max, sizeof out.cell_max);
        }
        for (int k = dims; k < 3; k++)
            out.cell_min[k] = out.cell_max[k] = out.bounds_min[k] = out.bounds_max[k] = 0.0f;
        uint32_t kept[8];
        if (v->member == QUERY_MEMBER_REST) { /* not the entries of objects that left the rest */
            out.object_count = out.subtree_count = 0;
            for (uint32_t i = n.sub_begin; i < n.sub_end; i++)
                out.subtree_count += w->rest.at_rest[n.sub_id[i]];
            for (uint32_t i = n.own_begin; i < n.own_end && out.object_count < 8; i++)
                if (w->rest.at_rest[n.own_id[i]]) kept[out.object_count++] = n.own_id[i];
            out.ids = kept;
        }
        if (!visit(&out, user)) return false;
        if (top + n.children > VISIT_STACK) return false; /* cannot happen at these depths */
        for (int j = n.children - 1; j >= 0; j--)
            stack[top++] = (visit_entry){n.child[j], e.depth + 1, out.index};
    }
    return true;
}

broadphase_status broadphase_visit_nodes(const broadphase_world *w, broadphase_node_visitor visit,
                                         void *user) {
    if (!w || !visit) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    if (__atomic_load_n(&w->busy, __ATOMIC_ACQUIRE)) return BROADPHASE_ERROR_BUSY;
    if (!w->structures_ok) return BROADPHASE_OK;
    query_view v;
    const method_table *m = w->method;
    bool tree = m->query_view && w->method_state && m->query_view(w->method_state, &v);
    if (tree && !visit_view(w, &v, BROADPHASE_STRUCTURE_TREE, visit, user)) return BROADPHASE_OK;
    if (w->store.static_count > 0 && field_query_view(&w->statics.pyramid, QUERY_MEMBER_TREE, &v) &&
        !visit_view(w, &v, BROADPHASE_STRUCTURE_STATIC, visit, user))
        return BROADPHASE_OK;
    if (w->rest.count > 0 && field_query_view(&w->rest.field.pyramid, QUERY_MEMBER_REST, &v))
        visit_view(w, &v, BROADPHASE_STRUCTURE_REST, visit, user);
    return BROADPHASE_OK;
}
