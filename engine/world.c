/* The world's configuration and lifecycle: the default config, its validation, create and
 * destroy, and the counters any caller may read. */
#include "world.h"

#include "method.h"
#include "overlap.h"
#include "parallel.h"

#include <stdlib.h>
#include <string.h>

/* ---- config and lifecycle ------------------------------------------------------------------ */

broadphase_config broadphase_config_default(int dimensions) {
    broadphase_config c;
    memset(&c, 0, sizeof c);
    c.dimensions = dimensions;
    c.method = BROADPHASE_METHOD_KDTREE;
    c.update = BROADPHASE_UPDATE_AUTO;
    c.threads = 0;
    c.leaf_size = 0; /* the method's own: see broadphase.h */
    c.max_depth = 40;
    c.rebuild_threshold = 1.5f;
    c.initial_capacity = 0;
    c.looseness = 1.5f;
    c.rest_share = 0.125f;
    return c;
}

static bool config_valid(const broadphase_config *c) {
    if (c->dimensions != 2 && c->dimensions != 3) return false;
    if (!method_for(c->method)) return false;
    if (c->update != BROADPHASE_UPDATE_AUTO && c->update != BROADPHASE_UPDATE_REBUILD &&
        c->update != BROADPHASE_UPDATE_REFIT)
        return false;
    if (c->threads < 0 || c->threads > 1024) return false;
    if (c->leaf_size < 0 || c->leaf_size > 4096) return false;
    if (c->max_depth < 1 || c->max_depth > 64) return false;
    if (!(c->rebuild_threshold >= 1.0f && c->rebuild_threshold <= 1000.0f)) return false;
    if (c->initial_capacity > (size_t)UINT32_MAX - 1) return false;
    if (!(c->looseness >= 1.0f && c->looseness <= 4.0f)) return false;
    if (!(c->rest_share >= 0.0f && c->rest_share <= 1.0f)) return false;
    if (!c->allocator.alloc != !c->allocator.free) return false;
    if (c->max_objects > BROADPHASE_MAX_OBJECTS) return false;
    return true;
}

broadphase_status broadphase_create(const broadphase_config *config, broadphase_world **world_out) {
    if (!config || !world_out) return BROADPHASE_ERROR_INVALID_ARGUMENT;
    *world_out = NULL;
    if (!config_valid(config)) return BROADPHASE_ERROR_INVALID_CONFIG;
    /* The world itself is the heap's first allocation. */
    heap h = {0, 0, config->allocator};
    broadphase_world *w = heap_alloc(&h, sizeof *w);
    if (!w) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    memset(w, 0, sizeof *w);
    w->heap = h;
    w->scratch.allocator = (threads_allocator){heap_alloc_for, heap_free_for, &w->heap};
    w->config = *config;
    w->method = method_for(config->method);
    if (w->config.leaf_size == 0) w->config.leaf_size = (int)w->method->leaf_size;
    if (w->config.max_objects == 0) w->config.max_objects = BROADPHASE_MAX_OBJECTS;
    w->workers = threads_resolve(config->threads);
    team_init(&w->team, w->workers, config->fixed_threads);
    w->last_error_index = SIZE_MAX;
    w->store.free_sorted = true;
    w->epoch = w->step_epoch = 1;
    w->synced_generation = UINT64_MAX;
    query_state_init(&w->query);
    if (!store_reserve(w, config->initial_capacity)) {
        broadphase_destroy(w);
        return BROADPHASE_ERROR_OUT_OF_MEMORY;
    }
    *world_out = w;
    return BROADPHASE_OK;
}

void broadphase_destroy(broadphase_world *w) {
    if (!w) return;
    if (w->method) {
        w->method->destroy(world_method_view(w), w->method_state);
    }
    pairs_release(&w->pairs, &w->heap);
    events_release(&w->events, &w->heap);
    neighbours_release(&w->neighbours, &w->heap);
    neighbourhoods_release(&w->neighbourhoods, &w->heap);
    threads_scratch_free(&w->scratch);
    store_release(w);
    heap_free(&w->heap, w->added, w->added_capacity * sizeof(uint32_t));
    statics_release(w);
    rest_release(w);
    query_state_release(w);
    heap h = w->heap;
    heap_free(&h, w, sizeof *w);
}

size_t broadphase_object_count(const broadphase_world *w) {
    return w ? w->store.live_count : 0;
}

size_t broadphase_last_error_index(const broadphase_world *w) {
    return w ? w->last_error_index : SIZE_MAX;
}

const char *broadphase_simd_level(void) {
    return simd_level();
}
