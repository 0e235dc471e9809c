// The C interface of peers.h over the C++ adapters: which libraries were compiled in and which
// queries they offer, world bounds, the query inputs and the sorting of their results, and a
// try/catch around every call so that no exception crosses into C.
#include "peer_adapter.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <new>

namespace {

const char *const engine_names[PEER_ENGINE_COUNT] = {"bullet-dbvt", "bullet-sap", "cgal", "fcl",
                                                     "box2d"};

std::unique_ptr<peer> make(peer_engine engine, int dims, size_t count, const peer_boxes &in,
                           const float world_min[3], const float world_max[3], bool queries) {
    switch (engine) {
#ifdef PEERS_HAVE_BULLET
    case PEER_BULLET_DBVT:
    case PEER_BULLET_SAP:
        return peer_make_bullet(engine, dims, count, in, world_min, world_max, queries);
#endif
#ifdef PEERS_HAVE_CGAL
    case PEER_CGAL:
        return peer_make_cgal(dims, count, in);
#endif
#ifdef PEERS_HAVE_FCL
    case PEER_FCL:
        return peer_make_fcl(dims, count, in);
#endif
#ifdef PEERS_HAVE_BOX2D
    case PEER_BOX2D:
        return peer_make_box2d(count, in);
#endif
    default:
        (void)dims, (void)count, (void)in, (void)world_min, (void)world_max, (void)queries;
        return nullptr;
    }
}

peer *create(peer_engine engine, int dimensions, size_t count, const peer_boxes *boxes,
             const float world_min[3], const float world_max[3], bool queries) {
    if (!peer_available(engine) || !peer_supports(engine, dimensions) || count > UINT32_MAX) {
        return nullptr;
    }
    try {
        std::unique_ptr<peer> p =
            make(engine, dimensions, count, *boxes, world_min, world_max, queries);
        if (p) p->keys.reserve(count);
        return p.release();
    } catch (const std::bad_alloc &) {
        return nullptr;
    }
}

// Insertion sort below a few dozen (most queries find a handful; the engine sorts its ids the
// same way), std::sort above.
template <typename T, typename Less> void sort_results(std::vector<T> &v, Less less) {
    if (v.size() >= 32) {
        std::sort(v.begin(), v.end(), less);
        return;
    }
    for (size_t i = 1; i < v.size(); i++) {
        T x = v[i];
        size_t j = i;
        for (; j > 0 && less(x, v[j - 1]); j--) v[j] = v[j - 1];
        v[j] = x;
    }
}

peer_ray make_ray(int dims, const float origin[3], const float dir[3], float max_t) {
    assert(std::isfinite(max_t) && max_t >= 0.0f); // the libraries cast finite segments
    peer_ray r;
    for (int k = 0; k < 3; k++) {
        r.origin[k] = k < dims ? origin[k] : 0.0f;
        r.dir[k] = k < dims ? dir[k] : 0.0f;
        r.o[k] = r.origin[k];
        r.d[k] = r.dir[k];
        r.inv[k] = r.d[k] != 0.0 ? 1.0 / r.d[k] : INFINITY;
    }
    r.max_t = max_t;
    return r;
}

} // namespace

extern "C" {

const char *peer_engine_name(peer_engine engine) {
    return (unsigned)engine < PEER_ENGINE_COUNT ? engine_names[engine] : "unknown";
}

bool peer_available(peer_engine engine) {
    switch (engine) {
#ifdef PEERS_HAVE_BULLET
    case PEER_BULLET_DBVT:
    case PEER_BULLET_SAP:
        return true;
#endif
#ifdef PEERS_HAVE_CGAL
    case PEER_CGAL:
        return true;
#endif
#ifdef PEERS_HAVE_FCL
    case PEER_FCL:
        return true;
#endif
#ifdef PEERS_HAVE_BOX2D
    case PEER_BOX2D:
        return true;
#endif
    default:
        return false;
    }
}

bool peer_supports(peer_engine engine, int dimensions) {
    if (dimensions != 2 && dimensions != 3) return false;
    return engine == PEER_BOX2D ? dimensions == 2 : (unsigned)engine < PEER_ENGINE_COUNT;
}

void peer_world_bounds(const peer_boxes *boxes, size_t count, int dimensions, float extent,
                       float world_min[3], float world_max[3]) {
    for (int k = 0; k < 3; k++) {
        float lo = 0.0f, hi = k < dimensions ? extent : 0.0f;
        for (size_t i = 0; k < dimensions && i < count; i++) {
            lo = std::min(lo, boxes->min[k][i]);
            hi = std::max(hi, boxes->max[k][i]);
        }
        float pad = 1.0f + 0.01f * (hi - lo);
        world_min[k] = lo - pad;
        world_max[k] = hi + pad;
    }
}

peer *peer_create(peer_engine engine, int dimensions, size_t count, const peer_boxes *boxes,
                  const float world_min[3], const float world_max[3]) {
    return create(engine, dimensions, count, boxes, world_min, world_max, false);
}

peer *peer_create_for_queries(peer_engine engine, int dimensions, size_t count,
                              const peer_boxes *boxes, const float world_min[3],
                              const float world_max[3]) {
    return create(engine, dimensions, count, boxes, world_min, world_max, true);
}

long long peer_frame(peer *p, const peer_boxes *boxes) {
    try {
        p->keys.clear();
        p->frame(*boxes);
        return (long long)p->keys.size();
    } catch (const std::bad_alloc &) {
        return -1;
    }
}

peer_times peer_last_times(const peer *p) {
    return p->times;
}

const uint64_t *peer_sorted_pairs(peer *p, size_t *count_out) {
    std::sort(p->keys.begin(), p->keys.end());
    *count_out = p->keys.size();
    return p->keys.data();
}

void peer_destroy(peer *p) {
    delete p;
}

bool peer_has_query(peer_engine engine, peer_query kind) {
    if (!peer_available(engine) || (unsigned)kind >= PEER_QUERY_KINDS) return false;
    switch (engine) {
    case PEER_BULLET_DBVT:
    case PEER_BULLET_SAP:
    case PEER_BOX2D:
        return true;
    case PEER_FCL:
        return kind == PEER_QUERY_BOX;
    default:
        return false;
    }
}

long long peer_query_box(peer *p, const float min[3], const float max[3],
                         const uint32_t **ids_out) {
    try {
        peer_box q{{min[0], min[1], 0.0f}, {max[0], max[1], 0.0f}};
        if (p->dims == 3) {
            q.lo[2] = min[2];
            q.hi[2] = max[2];
        }
        p->found.clear();
        if (!p->query_box(q)) return -1;
        sort_results(p->found, [](uint32_t a, uint32_t b) { return a < b; });
        *ids_out = p->found.data();
        return (long long)p->found.size();
    } catch (const std::bad_alloc &) {
        return -1;
    }
}

long long peer_raycast(peer *p, const float origin[3], const float dir[3], float max_t,
                       const peer_ray_hit **hits_out) {
    try {
        p->hits.clear();
        if (!p->raycast(make_ray(p->dims, origin, dir, max_t))) return -1;
        sort_results(p->hits, peer_util::hit_before);
        *hits_out = p->hits.data();
        return (long long)p->hits.size();
    } catch (const std::bad_alloc &) {
        return -1;
    }
}

int peer_raycast_closest(peer *p, const float origin[3], const float dir[3], float max_t,
                         peer_ray_hit *hit_out) {
    try {
        bool any = false;
        if (!p->raycast_closest(make_ray(p->dims, origin, dir, max_t), hit_out, &any)) return -1;
        return any ? 1 : 0;
    } catch (const std::bad_alloc &) {
        return -1;
    }
}

} // extern "C"
