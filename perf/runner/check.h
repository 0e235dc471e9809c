/* The scene run's check (--check): every frame's pairs in order and unique, then equal to a
 * brute-force world's (up to RUNNER_FULL_CHECK_LIMIT objects) or, above, the pairs of sampled
 * objects equal to the exact predicates' over the scene. The first difference is named. */
#pragma once

#include "runner.h"

typedef struct pair_list {
    broadphase_pair *data;
    size_t count, capacity;
} pair_list;

typedef struct checker {
    const options *opt;
    const scene *s;
    const uint32_t *ids;
    uint32_t *index_of_id; /* id -> object index, for messages and the sampled check */
    size_t id_limit;
    /* Sampled check: objects sorted by min x, and the few widest objects kept apart so that
     * they do not widen the sweep window for everybody. */
    uint32_t *order, *order_tmp, *big;
    uint32_t *keys, *keys_tmp;
    float *sorted_min[3], *sorted_max[3];
    size_t small_count, big_count;
    double max_small_extent;
    uint8_t *sampled; /* by id */
    uint32_t *samples;
    pair_list want, got;
    char message[1024];
} checker;

/* Ready for a scene added to the world under `ids`: false when out of memory. */
bool checker_init(checker *c, const options *o, const scene *s, const uint32_t *ids);
void checker_free(checker *c);
/* The frame's pairs sorted and unique; false (the reason in c->message) when not. */
bool check_order(checker *c, size_t frame, const broadphase_pairs *p);
/* got (ours) against want (the reference, named `reference`): false and the first pair one has
 * and the other lacks in c->message when they differ. */
bool compare_lists(checker *c, size_t frame, const broadphase_pair *got, size_t got_n,
                   const broadphase_pair *want, size_t want_n, const char *reference);
/* The sampled objects' pairs against the exact predicates: nonzero when equal. */
int check_sampled(checker *c, size_t frame, const broadphase_pairs *got);
