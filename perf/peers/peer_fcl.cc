// FCL's DynamicAABBTreeCollisionManager (double precision, FCL's default) as a robotics or game
// loop drives it: one CollisionObject per box, an fcl::Box shape translated to the box's centre,
// registered once; every frame setTranslation + computeAABB on every object, update() (copies
// the AABBs, refits and rebalances the tree), then the self-collide with a callback per pair of
// overlapping AABBs. FCL computes the AABBs in double from centre and size, which may round them
// inside the float box, so each shape's size is kept large enough that its AABB contains the box
// (checked every frame, grown by a few units in the last place when needed), and the callback
// keeps only the pairs that pass the exact float test.
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
            place(i);
            registered[i] = objects_[i].get();
        }
        manager_.registerObjects(registered);
        manager_.setup();
    }

    void frame(const peer_boxes &in) override {
        peer_util::phase_clock clock;
        for (size_t i = 0; i < objects_.size(); i++) {
            boxes[i] = peer_util::load(in, i, dims);
            place(i);
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

    static uint32_t index(const fcl::CollisionObjectd *object) {
        return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(object->getUserData()));
    }

    // Moves object i to its box's centre, and grows its shape until the AABB FCL computes holds
    // the float box (rarely more than once per object: only when the box's float width grows).
    void place(size_t i) {
        const peer_box &b = boxes[i];
        fcl::CollisionObjectd &object = *objects_[i];
        fcl::Vector3d centre;
        for (int k = 0; k < 3; k++) centre[k] = 0.5 * ((double)b.lo[k] + (double)b.hi[k]);
        object.setTranslation(centre);
        object.computeAABB();
        while (!contains(object.getAABB(), b)) {
            fcl::Boxd &shape = *shapes_[i];
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
};

} // namespace

std::unique_ptr<peer> peer_make_fcl(int dims, size_t count, const peer_boxes &in) {
    return std::make_unique<fcl_peer>(dims, count, in);
}
