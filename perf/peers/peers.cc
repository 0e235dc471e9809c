// The C interface of peers.h over the C++ adapters: which libraries were compiled in, world
// bounds, and a try/catch around every call so that no exception crosses into C.
#include "peer_adapter.h"

#include <algorithm>
#include <cmath>
#include <new>

namespace {

const char *const engine_names[PEER_ENGINE_COUNT] = {"bullet-dbvt", "bullet-sap", "cgal", "fcl",
                                                     "box2d"};

std::unique_ptr<peer> make(peer_engine engine, int dims, size_t count, const peer_boxes &in,
                           const float world_min[3], const float world_max[3]) {
    switch (engine) {
#ifdef PEERS_HAVE_BULLET
    case PEER_BULLET_DBVT:
    case PEER_BULLET_SAP:
        return peer_make_bullet(engine, dims, count, in, world_min, world_max);
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
        (void)dims, (void)count, (void)in, (void)world_min, (void)world_max;
        return nullptr;
    }
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
    if (!peer_available(engine) || !peer_supports(engine, dimensions) || count > UINT32_MAX) {
        return nullptr;
    }
    try {
        std::unique_ptr<peer> p = make(engine, dimensions, count, *boxes, world_min, world_max);
        if (p) p->keys.reserve(count);
        return p.release();
    } catch (const std::bad_alloc &) {
        return nullptr;
    }
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

} // extern "C"
