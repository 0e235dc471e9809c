// Bullet's two broadphases as a Bullet world drives them: one proxy per object created once,
// then every frame setAabb on every proxy, calculateOverlappingPairs, and a walk over the
// overlapping-pair cache. Both caches hold more than the exact pairs (the dynamic tree keeps
// enlarged leaf volumes and drops stale pairs a few per frame; the sweep and prune compares
// quantised bounds), so the walk keeps the pairs that pass the exact float test.
#include "peer_adapter.h"

#include <btBulletCollisionCommon.h>

#include <algorithm>
#include <cstdint>

namespace {

btVector3 corner(const float v[3]) {
    return btVector3(v[0], v[1], v[2]);
}

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
    // O(N) each. The dynamic tree's proxies must be destroyed one by one, and each destroyProxy
    // scans the whole pair cache: emptying the cache first keeps teardown linear.
    ~bullet_peer() override {
        if (sweep_) return;
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

  private:
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
                                       const float world_max[3]) {
    bool sweep = engine == PEER_BULLET_SAP;
    std::unique_ptr<btBroadphaseInterface> broadphase;
    if (sweep) {
        // The ray-cast accelerator (a second, dynamic-tree broadphase kept in step with the
        // first) only serves ray queries, which the benchmark makes none of.
        broadphase.reset(new bt32BitAxisSweep3(corner(world_min), corner(world_max),
                                               static_cast<unsigned>(count + 1), nullptr, true));
    } else {
        broadphase.reset(new btDbvtBroadphase());
    }
    return std::make_unique<bullet_peer>(std::move(broadphase), sweep, dims, count, in);
}
