// FCL's DynamicAABBTreeCollisionManager (double precision, FCL's default) as a robotics or game
// loop drives it: one CollisionObject per box, an fcl::Box shape translated to the box's centre,
// registered once; every frame setTranslation + computeAABB on every object, update() (copies
// the AABBs, refits and rebalances the tree), then the self-collide with a callback per pair of
// overlapping AABBs. FCL computes the AABBs in double from centre and size, which may round them
// inside the float box, so each shape's size is kept large enough that its AABB contains the box
// (checked every frame, grown by a few units in the last place when needed), and the callback
// keeps only the pairs that pass the exact float test. A box query is FCL's: collide(object,
// callback) with a box object placed at the query box the same way; the manager has no ray
// cast.
#include "peer_adapter.h"

#include <fcl/broadphase/broadphase_dynamic_AABB_tree.h>
#include <fcl/geometry/shape/box.h>
#include <fcl/narrowphase/collision_object.h>

#include <cmath>
#include <cstdint>

namespace {

class fcl_peer final : public peer {
  public:
    fcl_peer(int dims, size_t count, const peer_boxes &in) : peer(dims) {
        boxes.resize(count);
        shapes_.reserve(count);
        objects_.reserve(count);
        std::vector<fcl::CollisionObjectd *> registered(count);
        for (size_t i = 0; i < count; i++) {
            boxes[i] = peer_util::load(in, i, dims);
            shapes_.push_back(std::make_shared<fcl::Boxd>(0.0, 0.0, 0.0));
            objects_.push_back(std::make_unique<fcl::CollisionObjectd>(shapes_[i]));
            objects_[i]->setUserData(reinterpret_cast<void *>(static_cast<uintptr_t>(i)));
            place(*objects_[i], *shapes_[i], boxes[i]);
            registered[i] = objects_[i].get();
        }
        manager_.registerObjects(registered);
        manager_.setup();
    }

    // The query object takes the query box's size (then grows as the objects' shapes do), so
    // that its AABB holds the query box.
    bool query_box(const peer_box &q) override {
        query_ = &q;
        for (int k = 0; k < 3; k++) query_shape_->side[k] = (double)q.hi[k] - (double)q.lo[k];
        query_shape_->computeLocalAABB();
        place(query_object_, *query_shape_, q);
        manager_.collide(&query_object_, this, &fcl_peer::query_candidate);
        return true;
    }

    void frame(const peer_boxes &in) override {
        peer_util::phase_clock clock;
        for (size_t i = 0; i < objects_.size(); i++) {
            boxes[i] = peer_util::load(in, i, dims);
            place(*objects_[i], *shapes_[i], boxes[i]);
        }
        manager_.update();
        times.update_ms = clock.lap();
        manager_.collide(this, &fcl_peer::candidate);
        times.search_ms = clock.lap();
        times.output_ms = 0.0;
    }

  private:
    static bool candidate(fcl::CollisionObjectd *o1, fcl::CollisionObjectd *o2, void *data) {
        auto *self = static_cast<fcl_peer *>(data);
        uint32_t a = index(o1), b = index(o2);
        if (peer_util::overlap(self->boxes[a], self->boxes[b])) {
            self->keys.push_back(peer_util::key(a, b));
        }
        return false; // false: keep going
    }

    // collide(object)'s callback: a registered object whose AABB overlaps the query object's
    // (either argument may be the query object).
    static bool query_candidate(fcl::CollisionObjectd *o1, fcl::CollisionObjectd *o2, void *data) {
        auto *self = static_cast<fcl_peer *>(data);
        uint32_t i = index(o1 == &self->query_object_ ? o2 : o1);
        if (peer_util::overlap(self->boxes[i], *self->query_)) self->found.push_back(i);
        return false;
    }

    static uint32_t index(const fcl::CollisionObjectd *object) {
        return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(object->getUserData()));
    }

    // Moves the object to its box's centre, and grows its shape until the AABB FCL computes
    // holds the float box (rarely more than once per object: only when the box's float width
    // grows).
    static void place(fcl::CollisionObjectd &object, fcl::Boxd &shape, const peer_box &b) {
        fcl::Vector3d centre;
        for (int k = 0; k < 3; k++) centre[k] = 0.5 * ((double)b.lo[k] + (double)b.hi[k]);
        object.setTranslation(centre);
        object.computeAABB();
        while (!contains(object.getAABB(), b)) {
            for (int k = 0; k < 3; k++) {
                double need = 2.0 * std::fmax(centre[k] - b.lo[k], b.hi[k] - centre[k]);
                double grown = std::nextafter(std::nextafter(shape.side[k], INFINITY), INFINITY);
                shape.side[k] = std::fmax(need, grown);
            }
            shape.computeLocalAABB();
            object.computeAABB();
        }
    }

    static bool contains(const fcl::AABBd &aabb, const peer_box &b) {
        for (int k = 0; k < 3; k++) {
            if (!(aabb.min_[k] <= b.lo[k] && aabb.max_[k] >= b.hi[k])) return false;
        }
        return true;
    }

    std::vector<std::shared_ptr<fcl::Boxd>> shapes_;
    std::vector<std::unique_ptr<fcl::CollisionObjectd>> objects_;
    fcl::DynamicAABBTreeCollisionManagerd manager_;
    std::shared_ptr<fcl::Boxd> query_shape_ = std::make_shared<fcl::Boxd>(0.0, 0.0, 0.0);
    fcl::CollisionObjectd query_object_{query_shape_};
    const peer_box *query_ = nullptr; // the query under way, for the callback
};

} // namespace

std::unique_ptr<peer> peer_make_fcl(int dims, size_t count, const peer_boxes &in) {
    return std::make_unique<fcl_peer>(dims, count, in);
}
