/* A user's program: three boxes, one step, the pairs checked; and the same from C++
 * (consumer.cpp). It defines functions with the names of the engine's internal ones, which must
 * not clash with the library (static or shared). */
#include <broadphase.h>

#include <stdio.h>
#include <string.h>

int world_alloc(void);
int tree_emit(void);
int simd_level(void);
int world_alloc(void) {
    return 1;
}
int tree_emit(void) {
    return 2;
}
int simd_level(void) {
    return 3;
}

int step_from_cpp(void); /* consumer.cpp */

static int step_from_c(void) {
    broadphase_config config = broadphase_config_default(3);
    broadphase_world *world = NULL;
    if (broadphase_create(&config, &world) != BROADPHASE_OK) return 1;
    /* 0 and 1 overlap, 2 stands apart */
    const float min_x[] = {0, 1.5f, 10}, max_x[] = {2, 3, 11}, lo[] = {0, 0, 0}, hi[] = {1, 1, 1};
    broadphase_boxes boxes = {min_x, lo, lo, max_x, hi, hi};
    uint32_t ids[3];
    broadphase_pairs pairs;
    int bad = broadphase_add_boxes(world, 3, &boxes, ids) != BROADPHASE_OK ||
              broadphase_step(world, &pairs) != BROADPHASE_OK || pairs.count != 1 ||
              pairs.data[0].a != 0 || pairs.data[0].b != 1;
    broadphase_destroy(world);
    return bad;
}

int main(void) {
    uint32_t v = broadphase_version();
    printf("broadphase %u.%u.%u (header %s), simd %s\n", v >> 16, v >> 8 & 255, v & 255,
           BROADPHASE_VERSION_STRING, broadphase_simd_level());
    if (v != BROADPHASE_VERSION) {
        printf("FAIL: built against %u, runs with %u\n", (unsigned)BROADPHASE_VERSION, v);
        return 1;
    }
    if (world_alloc() + tree_emit() + simd_level() != 6) return 1;
    int bad = step_from_c() + step_from_cpp();
    printf(bad ? "FAIL\n" : "pairs ok (C and C++)\n");
    return bad ? 1 : 0;
}
