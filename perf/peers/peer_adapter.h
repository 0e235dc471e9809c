// What every peer adapter shares: the base class behind the C handle, the boxes of the current
// frame as an array of structs (copied while the positions are pushed, so that the exact filter
// reads one cache line per box), the pair keys, the exact tests of pairs and queries, the phase
// clock, and the factories that peers.cc calls for the libraries CMake found.
#pragma once

#include "peers.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

struct peer_box {
    float lo[3], hi[3];
};

// A query's segment origin + t * dir, 0 <= t <= max_t: the float inputs (z zero in 2D), and the
// same in double with the direction's reciprocal (infinite where it is zero), as
// engine/query_math.h's qm_ray holds them.
struct peer_ray {
    float origin[3], dir[3], max_t;
    double o[3], d[3], inv[3];
};

struct peer {
    explicit peer(int dimensions) : dims(dimensions) {}
    virtual ~peer() = default;
    peer(const peer &) = delete;
    peer &operator=(const peer &) = delete;

    // Pushes the positions, updates the structure and fills `keys`, timing the phases.
    virtual void frame(const peer_boxes &in) = 0;

    // The queries of peers.h, on the structure as of the last frame: each appends the exact
    // results, in the structure's order, to `found` or `hits` (the closest ray cast leaves the
    // least (t, id) in *best and sets *any), or returns false when the library has no such
    // query.
    virtual bool query_box(const peer_box &) {
        return false;
    }
    virtual bool raycast(const peer_ray &) {
        return false;
    }
    virtual bool raycast_closest(const peer_ray &, peer_ray_hit *, bool *) {
        return false;
    }

    int dims;
    std::vector<peer_box> boxes;
    std::vector<uint64_t> keys; // unsorted, a < b
    peer_times times{};
    std::vector<uint32_t> found;    // the last box query's ids
    std::vector<peer_ray_hit> hits; // the last ray cast's hits
};

namespace peer_util {

// Box i of the input; z is 0 in 2D, so that a 3D peer sees flat boxes and the 3D test below is
// the 2D test.
inline peer_box load(const peer_boxes &in, size_t i, int dims) {
    peer_box b{{in.min[0][i], in.min[1][i], 0.0f}, {in.max[0][i], in.max[1][i], 0.0f}};
    if (dims == 3) {
        b.lo[2] = in.min[2][i];
        b.hi[2] = in.max[2][i];
    }
    return b;
}

// The contract: closed intervals on every axis, compared in float.
inline bool overlap(const peer_box &a, const peer_box &b) {
    return a.lo[0] <= b.hi[0] && b.lo[0] <= a.hi[0] && a.lo[1] <= b.hi[1] && b.lo[1] <= a.hi[1] &&
           a.lo[2] <= b.hi[2] && b.lo[2] <= a.hi[2];
}

// The segment's entry t into the closed box (0 when the origin is inside), when they meet: the
// slab test of engine/query_math.h's qm_ray_box, the same operations in the same order, so that
// t is the engine's to the bit. 2D boxes and rays are flat (z zero), which the z slab passes.
inline bool ray_entry(const peer_ray &r, const peer_box &b, double *t) {
    double t0 = 0.0, t1 = r.max_t;
    for (int k = 0; k < 3; k++) {
        if (!(b.lo[k] <= b.hi[k])) return false;
        if (r.d[k] == 0.0) {
            if (r.o[k] < b.lo[k] || r.o[k] > b.hi[k]) return false;
            continue;
        }
        double lo = ((double)b.lo[k] - r.o[k]) * r.inv[k];
        double hi = ((double)b.hi[k] - r.o[k]) * r.inv[k];
        if (lo > hi) std::swap(lo, hi);
        t0 = lo > t0 ? lo : t0;
        t1 = hi < t1 ? hi : t1;
        if (!(t0 <= t1)) return false;
    }
    *t = t0;
    return true;
}

// Whether hit a comes before hit b: least t, then least id (broadphase_raycast's order).
inline bool hit_before(const peer_ray_hit &a, const peer_ray_hit &b) {
    return a.t < b.t || (a.t == b.t && a.id < b.id);
}

inline uint64_t key(uint32_t a, uint32_t b) {
    return a < b ? (uint64_t)a << 32 | b : (uint64_t)b << 32 | a;
}

// Milliseconds between successive laps.
class phase_clock {
  public:
    phase_clock() : last_(std::chrono::steady_clock::now()) {}
    double lap() {
        auto now = std::chrono::steady_clock::now();
        double ms = std::chrono::duration<double, std::milli>(now - last_).count();
        last_ = now;
        return ms;
    }

  private:
    std::chrono::steady_clock::time_point last_;
};

} // namespace peer_util

// One per library, defined only when it was found (see CMakeLists.txt); each returns a peer
// whose structure holds box i as object i, or throws (std::bad_alloc).
// queries: the structure will be queried (peer_create_for_queries).
std::unique_ptr<peer> peer_make_bullet(peer_engine engine, int dims, size_t count,
                                       const peer_boxes &in, const float world_min[3],
                                       const float world_max[3], bool queries);
std::unique_ptr<peer> peer_make_cgal(int dims, size_t count, const peer_boxes &in);
std::unique_ptr<peer> peer_make_fcl(int dims, size_t count, const peer_boxes &in);
std::unique_ptr<peer> peer_make_box2d(size_t count, const peer_boxes &in);
