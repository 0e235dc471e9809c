// Bullet's two broadphases as a Bullet world drives them: one proxy per object created once,
// then every frame setAabb on every proxy, calculateOverlappingPairs, and a walk over the
// overlapping-pair cache. Both caches hold more than the exact pairs (the dynamic tree keeps
// enlarged leaf volumes and drops stale pairs a few per frame; the sweep and prune compares
// quantised bounds), so the walk keeps the pairs that pass the exact float test.
// Queries go through btBroadphaseInterface's aabbTest and rayTest with a callback that makes the
// exact test, as btCollisionWorld's do (bt32BitAxisSweep3 answers both from its ray-cast
// accelerator, a btDbvtBroadphase that mirrors its proxies: see peers.h).
#include "peer_adapter.h"

#include <btBulletCollisionCommon.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace {

btVector3 corner(const float v[3]) {
    return btVector3(v[0], v[1], v[2]);
}

// bt32BitAxisSweep3, showing its ray-cast accelerator, whose proxies Bullet leaves behind: the
// sweep's destructor frees the accelerator's tree but not the proxies in it (a world destroys
// every proxy first, which costs the sweep O(N) each).
class sweep_broadphase final : public bt32BitAxisSweep3 {
  public:
    using bt32BitAxisSweep3::bt32BitAxisSweep3;
    btDbvtBroadphase *accelerator() const {
        return m_raycastAccelerator;
    }
};

class bullet_peer final : public peer {
  public:
    bullet_peer(std::unique_ptr<btBroadphaseInterface> broadphase, bool sweep, int dims,
                size_t count, const peer_boxes &in)
        : peer(dims), broadphase_(std::move(broadphase)), sweep_(sweep) {
        boxes.resize(count);
        proxies_.resize(count);
        for (size_t i = 0; i < count; i++) boxes[i] = peer_util::load(in, i, dims);
        for (size_t i : creation_order(sweep)) {
            // The client object carries the index (plus one, keeping it non-null).
            proxies_[i] = broadphase_->createProxy(
                corner(boxes[i].lo), corner(boxes[i].hi), BOX_SHAPE_PROXYTYPE,
                reinterpret_cast<void *>(static_cast<uintptr_t>(i + 1)),
                btBroadphaseProxy::DefaultFilter, btBroadphaseProxy::AllFilter, nullptr);
        }
    }

    // The sweep and prune frees its handles with itself, and removing one by one would cost
    // O(N) each; its accelerator's proxies go one by one (linear: the accelerator's pair cache
    // is a null one). The dynamic tree's proxies must be destroyed one by one, and each
    // destroyProxy scans the whole pair cache: emptying the cache first keeps teardown linear.
    ~bullet_peer() override {
        if (sweep_) {
            btDbvtBroadphase *accelerator =
                static_cast<sweep_broadphase *>(broadphase_.get())->accelerator();
            for (size_t i = 0; accelerator && i < proxies_.size(); i++) {
                auto *handle = static_cast<sweep_broadphase::Handle *>(proxies_[i]);
                accelerator->destroyProxy(handle->m_dbvtProxy, nullptr);
            }
            return;
        }
        struct remove_all final : btOverlapCallback {
            bool processOverlap(btBroadphasePair &) override {
                return true;
            }
        } remove;
        broadphase_->getOverlappingPairCache()->processAllOverlappingPairs(&remove, nullptr);
        for (btBroadphaseProxy *proxy : proxies_) broadphase_->destroyProxy(proxy, nullptr);
    }

    void frame(const peer_boxes &in) override {
        peer_util::phase_clock clock;
        for (size_t i = 0; i < proxies_.size(); i++) {
            boxes[i] = peer_util::load(in, i, dims);
            broadphase_->setAabb(proxies_[i], corner(boxes[i].lo), corner(boxes[i].hi), nullptr);
        }
        times.update_ms = clock.lap();
        // No dispatcher: there are no collision algorithms attached to pairs to free.
        broadphase_->calculateOverlappingPairs(nullptr);
        times.search_ms = clock.lap();
        const btBroadphasePairArray &pairs =
            broadphase_->getOverlappingPairCache()->getOverlappingPairArray();
        for (int k = 0; k < pairs.size(); k++) {
            uint32_t a = index(pairs[k].m_pProxy0), b = index(pairs[k].m_pProxy1);
            if (peer_util::overlap(boxes[a], boxes[b])) keys.push_back(peer_util::key(a, b));
        }
        times.output_ms = clock.lap();
    }

    // aabbTest reports the proxies whose leaf volumes (the boxes, or boxes enlarged by a
    // margin once they have moved) overlap the query as closed boxes in float: a superset.
    bool query_box(const peer_box &q) override {
        struct collect final : btBroadphaseAabbCallback {
            collect(bullet_peer &self, const peer_box &q) : self(self), q(q) {}
            bool process(const btBroadphaseProxy *proxy) override {
                uint32_t i = index(proxy);
                if (peer_util::overlap(self.boxes[i], q)) self.found.push_back(i);
                return true;
            }
            bullet_peer &self;
            const peer_box &q;
        } callback(*this, q);
        broadphase_->aabbTest(corner(q.lo), corner(q.hi), callback);
        return true;
    }

    bool raycast(const peer_ray &r) override {
        ray_callback callback(*this, r, false);
        cast(r, callback);
        return true;
    }

    // rayTest reads m_lambda_max once per tree (by value), so the shrinking bound below prunes
    // only the second of btDbvtBroadphase's two trees (moving and resting proxies); a Bullet
    // world's closest-hit callback does not shrink it at all.
    bool raycast_closest(const peer_ray &r, peer_ray_hit *best, bool *any) override {
        ray_callback callback(*this, r, true);
        cast(r, callback);
        *best = callback.best;
        *any = callback.any;
        return true;
    }

  private:
    // The exact test of every proxy rayTest reports: all hits into `hits`, or the least
    // (t, id), lowering m_lambda_max (a length along the unit direction) to it.
    struct ray_callback final : btBroadphaseRayCallback {
        ray_callback(bullet_peer &self, const peer_ray &r, bool closest)
            : self(self), r(r), closest(closest) {}
        bool process(const btBroadphaseProxy *proxy) override {
            uint32_t i = index(proxy);
            double t;
            if (!peer_util::ray_entry(r, self.boxes[i], &t)) return true;
            peer_ray_hit hit{i, (float)t};
            if (!closest) {
                self.hits.push_back(hit);
            } else if (!any || peer_util::hit_before(hit, best)) {
                best = hit;
                any = true;
                m_lambda_max = static_cast<btScalar>(t * length);
            }
            return true;
        }
        bullet_peer &self;
        const peer_ray &r;
        bool closest, any = false;
        peer_ray_hit best{0, 0.0f};
        double length = 0.0; // |dir|: t * length is the distance along the unit direction
    };

    // The ray as btCollisionWorld::rayTest sets it up: a unit direction, its reciprocal (a large
    // number where it is zero) and signs, m_lambda_max the segment's length. Bullet's slab test
    // runs in float and rejects a node whose entry equals lambda_max (or whose exit is the
    // origin), which would lose boxes that the segment only touches: the swept-box margin that
    // rayTest takes (Bullet's convex sweeps use it) enlarges every node by far more than the
    // rounding (1e-5 of the coordinates), and the exact test drops what it lets in.
    void cast(const peer_ray &r, ray_callback &callback) {
        double length = std::sqrt(r.d[0] * r.d[0] + r.d[1] * r.d[1] + r.d[2] * r.d[2]);
        btVector3 from = corner(r.origin), dir;
        btScalar scale = std::fabs(r.origin[0]);
        for (int k = 0; k < 3; k++) {
            dir[k] = static_cast<btScalar>(r.d[k] / length);
            callback.m_rayDirectionInverse[k] =
                dir[k] == btScalar(0) ? btScalar(BT_LARGE_FLOAT) : btScalar(1) / dir[k];
            callback.m_signs[k] = callback.m_rayDirectionInverse[k] < btScalar(0);
            scale = std::max(scale, std::fabs(r.origin[k]));
        }
        callback.length = length;
        callback.m_lambda_max = static_cast<btScalar>(r.max_t * length);
        btScalar margin = btScalar(1e-5) * (1 + scale + callback.m_lambda_max);
        broadphase_->rayTest(from, from + dir * callback.m_lambda_max, callback,
                             btVector3(-margin, -margin, -margin),
                             btVector3(margin, margin, margin));
    }

    // The sweep and prune inserts each new proxy's edges at the top of every axis and sorts
    // them down, crossing every edge above: O(N) per proxy. Creating the proxies in order of
    // their lowest z makes the z axis, the one where crossings test and add pairs, cheap; the
    // x and y axes still cost O(N^2) swaps in all (set-up only, not timed).
    std::vector<size_t> creation_order(bool sweep) const {
        std::vector<size_t> order(boxes.size());
        for (size_t i = 0; i < order.size(); i++) order[i] = i;
        if (sweep) {
            std::stable_sort(order.begin(), order.end(), [this](size_t a, size_t b) {
                return boxes[a].lo[2] < boxes[b].lo[2];
            });
        }
        return order;
    }

    static uint32_t index(const btBroadphaseProxy *proxy) {
        return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(proxy->m_clientObject) - 1);
    }

    std::unique_ptr<btBroadphaseInterface> broadphase_;
    bool sweep_;
    std::vector<btBroadphaseProxy *> proxies_;
};

} // namespace

std::unique_ptr<peer> peer_make_bullet(peer_engine engine, int dims, size_t count,
                                       const peer_boxes &in, const float world_min[3],
                                       const float world_max[3], bool queries) {
    bool sweep = engine == PEER_BULLET_SAP;
    std::unique_ptr<btBroadphaseInterface> broadphase;
    if (sweep) {
        // The ray-cast accelerator (a second, dynamic-tree broadphase kept in step with the
        // first) only serves queries: without it, aabbTest tests every proxy's box and rayTest
        // hands every proxy to the callback.
        broadphase.reset(new sweep_broadphase(corner(world_min), corner(world_max),
                                              static_cast<unsigned>(count + 1), nullptr, !queries));
    } else {
        broadphase.reset(new btDbvtBroadphase());
    }
    return std::make_unique<bullet_peer>(std::move(broadphase), sweep, dims, count, in);
}
