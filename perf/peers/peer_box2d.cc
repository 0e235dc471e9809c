// Box2D 2.4's b2DynamicTree, 2D only. Box2D's own b2BroadPhase only reports pairs that start
// overlapping (its contact manager keeps the rest), so for the full pair list every frame the
// adapter does what a user of the bare tree does: MoveProxy every proxy with its tight AABB and
// its displacement, then Query each proxy's tight AABB. The tree stores enlarged ("fat") AABBs,
// so a query returns a superset; the callback keeps a hit only when its index is above the
// querying box's (each pair once) and the two float boxes pass the exact test.
#include "peer_adapter.h"

#include <box2d/b2_dynamic_tree.h>

#include <cstdint>

namespace {

class box2d_peer final : public peer {
  public:
    box2d_peer(size_t count, const peer_boxes &in) : peer(2) {
        boxes.resize(count);
        proxies_.resize(count);
        for (size_t i = 0; i < count; i++) {
            boxes[i] = peer_util::load(in, i, 2);
            proxies_[i] = tree_.CreateProxy(aabb(boxes[i]), nullptr);
            if ((size_t)proxies_[i] >= index_of_.size()) index_of_.resize(proxies_[i] + 1);
            index_of_[proxies_[i]] = static_cast<uint32_t>(i);
        }
    }

    void frame(const peer_boxes &in) override {
        peer_util::phase_clock clock;
        for (size_t i = 0; i < proxies_.size(); i++) {
            peer_box b = peer_util::load(in, i, 2);
            b2Vec2 displacement(b.lo[0] - boxes[i].lo[0], b.lo[1] - boxes[i].lo[1]);
            boxes[i] = b;
            tree_.MoveProxy(proxies_[i], aabb(b), displacement);
        }
        times.update_ms = clock.lap();
        for (size_t i = 0; i < proxies_.size(); i++) {
            query q{this, static_cast<uint32_t>(i)};
            tree_.Query(&q, aabb(boxes[i]));
        }
        times.search_ms = clock.lap();
        times.output_ms = 0.0;
    }

  private:
    struct query {
        box2d_peer *self;
        uint32_t index;
        bool QueryCallback(int32 proxy) {
            uint32_t other = self->index_of_[proxy];
            if (other > index && peer_util::overlap(self->boxes[index], self->boxes[other])) {
                self->keys.push_back(peer_util::key(index, other));
            }
            return true; // true: keep going
        }
    };

    static b2AABB aabb(const peer_box &b) {
        b2AABB r;
        r.lowerBound.Set(b.lo[0], b.lo[1]);
        r.upperBound.Set(b.hi[0], b.hi[1]);
        return r;
    }

    b2DynamicTree tree_;
    std::vector<int32> proxies_;
    std::vector<uint32_t> index_of_; // by proxy id
};

} // namespace

std::unique_ptr<peer> peer_make_box2d(size_t count, const peer_boxes &in) {
    return std::make_unique<box2d_peer>(count, in);
}
