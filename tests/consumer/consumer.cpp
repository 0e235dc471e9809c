// The header from C++: the same step as consumer.c, through the C API.
#include <broadphase.h>

#include <vector>

extern "C" int step_from_cpp(void);

extern "C" int step_from_cpp(void) {
    broadphase_config config = broadphase_config_default(2);
    broadphase_world *world = nullptr;
    if (broadphase_create(&config, &world) != BROADPHASE_OK) return 1;
    std::vector<float> x{0.0f, 0.5f, 5.0f}, r{1.0f, 1.0f, 1.0f}, y(3, 0.0f);
    broadphase_spheres spheres{x.data(), y.data(), nullptr, r.data()};
    std::vector<uint32_t> ids(3);
    broadphase_pairs pairs{};
    bool bad = broadphase_add_spheres(world, 3, &spheres, ids.data()) != BROADPHASE_OK ||
               broadphase_step(world, &pairs) != BROADPHASE_OK || pairs.count != 1 ||
               pairs.data[0].a != 0 || pairs.data[0].b != 1;
    broadphase_destroy(world);
    return bad ? 1 : 0;
}
