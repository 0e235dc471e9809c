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
#include "peer_adapter.h"

#include <box2d/b2_broad_phase.h>

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

  private:
    static b2AABB aabb(const peer_box &b) {
        b2AABB r;
        r.lowerBound.Set(b.lo[0], b.lo[1]);
        r.upperBound.Set(b.hi[0], b.hi[1]);
        return r;
    }

    b2BroadPhase broadphase_;
    std::vector<int32> proxies_; // by object index
    pair_set pairs_;
};

} // namespace

std::unique_ptr<peer> peer_make_box2d(size_t count, const peer_boxes &in) {
    return std::make_unique<box2d_peer>(count, in);
}
