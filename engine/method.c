/* The methods' registry: the one place that maps config.method to a method's table. */
#include "method.h"

#include "brute_force.h"
#include "kdtree.h"
#include "octree.h"

static const method_table *const methods[] = {&kdtree_method, &octree_method, &brute_force_method};

enum { METHOD_COUNT = sizeof methods / sizeof methods[0] };

const method_table *method_for(broadphase_method id) {
    for (size_t i = 0; i < METHOD_COUNT; i++)
        if (methods[i]->id == id) return methods[i];
    return NULL;
}

size_t methods_count(void) {
    return METHOD_COUNT;
}

const method_table *methods_at(size_t i) {
    return i < METHOD_COUNT ? methods[i] : NULL;
}
