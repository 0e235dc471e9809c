// Box2D 2.4's b2BroadPhase (a b2DynamicTree of enlarged, "fat", AABBs), 2D only, driven the way
// Box2D's own world drives it. The broadphase reports only pairs that may have started to
// overlap; Box2D's contact manager keeps the pairs across frames and drops them itself, so the
// adapter keeps that persistent set too. Proxies are made once; then each frame:
// - update: b2BroadPhase::MoveProxy on every proxy with its tight AABB and the motion of its
//   centre since the last frame (Box2D stretches the fat AABB along it). The tree re-inserts a
//   proxy only when the tight box has left its fat one (or the fat one has grown too large), and
//   buffers the re-inserted proxies;
// - search: b2BroadPhase::UpdatePairs queries the tree with each buffered proxy's fat AABB and
//   reports the proxies whose fat AABBs overlap it; those pairs go into the persistent set (a
//   hash set, below, where a pair already there is not added twice), as b2ContactManager::AddPair
//   does with its contact list;
// - output: the walk of b2ContactManager::Collide over the whole set: a pair whose fat AABBs no
//   longer overlap (b2BroadPhase::TestOverlap) is dropped, and a pair whose two tight boxes pass
//   the exact float test is written out. A fat AABB contains its tight box, so the set holds
//   every exactly overlapping pair, and a pair that passes the exact test needs no fat test (the
//   walk makes the cheaper, exact test first; the result is the same).
// Queries are b2BroadPhase::Query and RayCast, whose callbacks make the exact test, as
// b2World::QueryAABB and RayCast do with the fixtures'.
#include "peer_adapter.h"

#include <box2d/b2_broad_phase.h>

#include <algorithm>
#include <cfloat>
#include <cstdint>

namespace {

// The persistent pair set: keys a << 32 | b (a < b, object indices) in an open-addressing table
// with linear probing, at most half full, erasing by shifting the rest of the probe run back (no
// tombstones, so the walk never slows down as pairs come and go).
class pair_set {
  public:
    explicit pair_set(size_t expected) {
        size_t capacity = 16;
        while (capacity < 2 * expected) capacity *= 2;
        resize(capacity);
    }

    void insert(uint64_t key) {
        if (2 * (count_ + 1) > slots_.size()) resize(2 * slots_.size());
        size_t i = home(key);
        while (slots_[i] != empty) {
            if (slots_[i] == key) return;
            i = (i + 1) & mask_;
        }
        slots_[i] = key;
        count_++;
    }

    // Calls keep(key) once for every key and erases those for which it returns false. The walk
    // starts after an empty slot, so no probe run wraps past its start, and erasing at slot i
    // only moves keys from later in the walk into i, which is then looked at again.
    template <typename F> void retain(F keep) {
        size_t start = 0;
        while (slots_[start] != empty) start++; // the table is at most half full
        for (size_t step = 1; step < slots_.size(); step++) {
            size_t i = (start + step) & mask_;
            while (slots_[i] != empty && !keep(slots_[i])) erase_at(i);
        }
    }

  private:
    static constexpr uint64_t empty = UINT64_MAX; // not a key: a < b

    size_t home(uint64_t key) const {
        return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> shift_);
    }

    void erase_at(size_t hole) {
        for (size_t j = (hole + 1) & mask_; slots_[j] != empty; j = (j + 1) & mask_) {
            // The key at j may fill the hole unless its home lies after the hole, up to j.
            if (((j - home(slots_[j])) & mask_) >= ((j - hole) & mask_)) {
                slots_[hole] = slots_[j];
                hole = j;
            }
        }
        slots_[hole] = empty;
        count_--;
    }

    void resize(size_t capacity) {
        std::vector<uint64_t> old(capacity, empty);
        old.swap(slots_);
        mask_ = capacity - 1;
        shift_ = 64;
        for (size_t c = capacity; c > 1; c /= 2) shift_--;
        count_ = 0;
        for (uint64_t key : old) {
            if (key != empty) insert(key);
        }
    }

    std::vector<uint64_t> slots_;
    size_t mask_ = 0, count_ = 0;
    int shift_ = 64;
};

class box2d_peer final : public peer {
  public:
    box2d_peer(size_t count, const peer_boxes &in) : peer(2), pairs_(count) {
        boxes.resize(count);
        proxies_.resize(count);
        for (size_t i = 0; i < count; i++) {
            boxes[i] = peer_util::load(in, i, 2);
            // The user data carries the object's index; the first UpdatePairs reports every
            // pair, as CreateProxy buffers the new proxy as moved.
            proxies_[i] = broadphase_.CreateProxy(aabb(boxes[i]), reinterpret_cast<void *>(i));
        }
    }

    void frame(const peer_boxes &in) override {
        peer_util::phase_clock clock;
        for (size_t i = 0; i < proxies_.size(); i++) {
            peer_box b = peer_util::load(in, i, 2);
            const peer_box &old = boxes[i];
            b2Vec2 displacement(0.5f * ((b.lo[0] + b.hi[0]) - (old.lo[0] + old.hi[0])),
                                0.5f * ((b.lo[1] + b.hi[1]) - (old.lo[1] + old.hi[1])));
            boxes[i] = b;
            broadphase_.MoveProxy(proxies_[i], aabb(b), displacement);
        }
        times.update_ms = clock.lap();
        broadphase_.UpdatePairs(this);
        times.search_ms = clock.lap();
        pairs_.retain([this](uint64_t key) {
            uint32_t a = static_cast<uint32_t>(key >> 32), b = static_cast<uint32_t>(key);
            // Tight boxes that overlap have overlapping fat AABBs: the pair stays, and the fat
            // test is needed only for the rest.
            if (peer_util::overlap(boxes[a], boxes[b])) {
                keys.push_back(key);
                return true;
            }
            return broadphase_.TestOverlap(proxies_[a], proxies_[b]);
        });
        times.output_ms = clock.lap();
    }

    // b2BroadPhase::UpdatePairs' callback: a pair of proxies whose fat AABBs overlap, one of
    // them moved (re-inserted) this frame.
    void AddPair(void *user_a, void *user_b) {
        auto a = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(user_a));
        auto b = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(user_b));
        pairs_.insert(peer_util::key(a, b));
    }

    // Query reports the proxies whose fat AABBs overlap the box (a closed test in float).
    bool query_box(const peer_box &q) override {
        query_ = &q;
        broadphase_.Query(this, aabb(q));
        return true;
    }

    // Query's callback: true to go on.
    bool QueryCallback(int32 proxy) {
        uint32_t i = index(proxy);
        if (peer_util::overlap(boxes[i], *query_)) found.push_back(i);
        return true;
    }

    bool raycast(const peer_ray &r) override {
        cast(r, false);
        return true;
    }

    // The callback clips the cast at each better hit, as a closest-hit callback of b2World
    // does: the tree then skips what lies beyond.
    bool raycast_closest(const peer_ray &r, peer_ray_hit *best, bool *any) override {
        cast(r, true);
        *best = best_;
        *any = any_;
        return true;
    }

    // RayCast's callback, for each proxy whose fat AABB the (clipped) segment may meet: the
    // fraction to clip the segment at, or -1 to leave it. The segment runs to p1 + fraction *
    // (p2 - p1), and p2 - p1 is dir * scale_. A fat AABB (0.1 larger than its box on every side,
    // many units in the last place at the coordinates of the scenes here, below 1e5) keeps the
    // float tests conservative: a box the segment touches, or that ties with the best hit, is
    // still reported. 0 would end the cast, so a hit at t = 0 clips to the least
    // positive fraction, which still reaches every box holding the origin (ties at 0).
    float RayCastCallback(const b2RayCastInput &, int32 proxy) {
        uint32_t i = index(proxy);
        double t;
        if (!peer_util::ray_entry(*ray_, boxes[i], &t)) return -1.0f;
        peer_ray_hit hit{i, (float)t};
        if (!closest_) {
            hits.push_back(hit);
            return -1.0f;
        }
        if (any_ && !peer_util::hit_before(hit, best_)) return -1.0f;
        best_ = hit;
        any_ = true;
        return std::max(static_cast<float>(t / scale_), FLT_MIN);
    }

  private:
    // The segment origin + t * dir, 0 <= t <= max_t, as Box2D takes it: p1 the origin, p2 at
    // t = max_t (at t = 1 when max_t is 0, a zero-length segment being refused), and
    // maxFraction the share of p1 -> p2 to cast.
    void cast(const peer_ray &r, bool closest) {
        ray_ = &r;
        closest_ = closest;
        any_ = false;
        scale_ = r.max_t > 0.0f ? (double)r.max_t : 1.0;
        b2RayCastInput input;
        input.p1.Set(r.origin[0], r.origin[1]);
        input.p2.Set(static_cast<float>(r.o[0] + r.d[0] * scale_),
                     static_cast<float>(r.o[1] + r.d[1] * scale_));
        input.maxFraction = static_cast<float>(r.max_t / scale_);
        broadphase_.RayCast(this, input);
    }

    uint32_t index(int32 proxy) const {
        return static_cast<uint32_t>(reinterpret_cast<uintptr_t>(broadphase_.GetUserData(proxy)));
    }

    static b2AABB aabb(const peer_box &b) {
        b2AABB r;
        r.lowerBound.Set(b.lo[0], b.lo[1]);
        r.upperBound.Set(b.hi[0], b.hi[1]);
        return r;
    }

    b2BroadPhase broadphase_;
    std::vector<int32> proxies_; // by object index
    pair_set pairs_;
    // The query under way, for the callbacks.
    const peer_box *query_ = nullptr;
    const peer_ray *ray_ = nullptr;
    bool closest_ = false, any_ = false;
    peer_ray_hit best_{0, 0.0f};
    double scale_ = 1.0;
};

} // namespace

std::unique_ptr<peer> peer_make_box2d(size_t count, const peer_boxes &in) {
    return std::make_unique<box2d_peer>(count, in);
}
