// CGAL's box_self_intersection_d as it is used: no structure kept between calls, so every frame
// writes the boxes afresh (the call reorders them) and runs the segment-tree algorithm on them,
// with closed boxes. It compares the float coordinates themselves, so its pairs are already
// exact; the adapter only turns them into keys.
#include "peer_adapter.h"

#include <CGAL/box_intersection_d.h>

#include <array>
#include <cstdint>

namespace {

// A box as CGAL's BoxHandle concept wants it, with the object's index as its id (ids break ties
// between equal coordinates and must be unique).
template <int N> struct cgal_box {
    using NT = float;
    using ID = uint32_t;
    std::array<float, N> lo, hi;
    uint32_t index;

    static int dimension() {
        return N;
    }
    float min_coord(int d) const {
        return lo[d];
    }
    float max_coord(int d) const {
        return hi[d];
    }
    ID id() const {
        return index;
    }
};

template <int N> class cgal_peer final : public peer {
  public:
    cgal_peer(size_t count) : peer(N), work_(count) {}

    void frame(const peer_boxes &in) override {
        peer_util::phase_clock clock;
        for (size_t i = 0; i < work_.size(); i++) {
            for (int k = 0; k < N; k++) {
                work_[i].lo[k] = in.min[k][i];
                work_[i].hi[k] = in.max[k][i];
            }
            work_[i].index = static_cast<uint32_t>(i);
        }
        times.update_ms = clock.lap();
        std::vector<uint64_t> *out = &keys;
        CGAL::box_self_intersection_d(
            work_.begin(), work_.end(),
            [out](const cgal_box<N> &a, const cgal_box<N> &b) {
                out->push_back(peer_util::key(a.index, b.index));
            },
            std::ptrdiff_t(10), CGAL::Box_intersection_d::CLOSED);
        times.search_ms = clock.lap();
        times.output_ms = 0.0;
    }

  private:
    std::vector<cgal_box<N>> work_;
};

} // namespace

std::unique_ptr<peer> peer_make_cgal(int dims, size_t count, const peer_boxes &) {
    if (dims == 2) return std::make_unique<cgal_peer<2>>(count);
    return std::make_unique<cgal_peer<3>>(count);
}
