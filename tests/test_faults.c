/* Out-of-memory injection: a scripted sequence of calls (create, add, move, remove, statics,
 * filters, events, steps through a root growth, a rebuild and a relayout, every query and
 * batched query, neighbour rows and neighbourhoods, destroy) run again and again with an allocator
 * that fails the k-th allocation, for k = 1, 2, ... until the script runs to its end without
 * reaching k. Every call must return OK or BROADPHASE_ERROR_OUT_OF_MEMORY; after an out-of-memory
 * failure the world's objects are exactly as before the call (tests/drive.h compares the store),
 * the call made again succeeds, every step's pairs equal brute force, and every block is given back
 * at destroy (the ASan build checks the C library's side too).
 * The sanitizer builds, ten times slower, stop each run at the end of the third successful step
 * after its failed allocation (FAULTS_STEPS_AFTER_FAILURE, set by CMakeLists.txt); they and the
 * portable build (one thread) leave out the script's long stretch of small steps
 * (FAULTS_STEADY_STEPS) and with it the chooser's test, whose trials come only after it (under
 * ASan, with the stretch: 512 s of processor time). The release build runs every script whole,
 * to its end. */
#include "drive.h"

#ifndef FAULTS_STEPS_AFTER_FAILURE
#define FAULTS_STEPS_AFTER_FAILURE 0 /* 0: every run to the script's end */
#endif
#ifndef FAULTS_STEADY_STEPS
#define FAULTS_STEADY_STEPS 72 /* the script's stretch of small steps; 0: none */
#endif

/* Columns for a batch of boxes or spheres. */
typedef struct shapes {
    float v[7][256];
    uint32_t ids[256];
    size_t n;
} shapes;

static broadphase_boxes shapes_boxes(shapes *s) {
    return (broadphase_boxes){s->v[0], s->v[1], s->v[2], s->v[3], s->v[4], s->v[5]};
}

static broadphase_spheres shapes_spheres(shapes *s) {
    return (broadphase_spheres){s->v[0], s->v[1], s->v[2], s->v[6]};
}

/* One random shape at index i, around `at` within `spread`. */
static void shape_at(shapes *s, size_t i, uint64_t *rng, const float at[3], float spread) {
    for (int k = 0; k < 3; k++) {
        float c = at[k] + (scene_uniform(rng) - 0.5f) * spread;
        float h = 0.5f + 3.0f * scene_uniform(rng);
        s->v[k][i] = c - h;
        s->v[3 + k][i] = c + h;
    }
    s->v[6][i] = 0.5f + 3.0f * scene_uniform(rng);
}

/* The scene's side: about as dense in 3D as in 2D. */
static float extent(const drive *d) {
    return d->config.dimensions == 3 ? 30.0f : 100.0f;
}

static void add_random(drive *d, size_t n, bool spheres, uint64_t *rng) {
    shapes *s = calloc(1, sizeof *s);
    float e = extent(d);
    const float mid[3] = {e / 2, e / 2, e / 2};
    for (size_t i = 0; i < n; i++) shape_at(s, i, rng, mid, e);
    broadphase_boxes b = shapes_boxes(s);
    broadphase_spheres sp = shapes_spheres(s);
    drive_add(d, n, &b, &sp, spheres, false);
    free(s);
}

/* Moves every live object of one kind whose id is `offset` modulo `stride`: by up to `jitter`
 * (centre moves; the shape is made again), or anywhere in the scene when scramble is set, or
 * `far` away. */
static void move_kind(drive *d, bool spheres, size_t stride, size_t offset, float jitter,
                      bool scramble, float far, uint64_t *rng) {
    shapes *s = calloc(1, sizeof *s);
    const model *md = &d->md;
    for (uint32_t id = 0; id < md->m.cap && s->n < 256; id++) {
        if (!md->m.alive[id] || md->m.sphere[id] != spheres || id % stride != offset) continue;
        float at[3];
        for (int k = 0; k < 3; k++) {
            float c = spheres ? md->m.c[id][k] : 0.5f * (md->m.lo[id][k] + md->m.hi[id][k]);
            at[k] = scramble ? extent(d) * scene_uniform(rng) : c + far;
        }
        shape_at(s, s->n, rng, at, scramble ? 0.0f : jitter);
        s->ids[s->n++] = id;
    }
    broadphase_boxes b = shapes_boxes(s);
    broadphase_spheres sp = shapes_spheres(s);
    drive_move(d, s->n, s->ids, &b, &sp, spheres);
    free(s);
}

/* n unit boxes along x, 80 apart, from (0, 15, 15): in 3D, with an infinite distance, a grid of
 * their centres would need more runs a search than it takes (NEIGHBOURHOODS_MOST_RUNS), and the
 * neighbourhoods fall back on the method's batched nearest search. */
static void add_line(drive *d, size_t n) {
    shapes *s = calloc(1, sizeof *s);
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 3; k++) {
            float c = k == 0 ? 80.0f * (float)i : 15.0f;
            s->v[k][i] = c - 0.5f;
            s->v[3 + k][i] = c + 0.5f;
        }
    broadphase_boxes b = shapes_boxes(s);
    broadphase_spheres sp = shapes_spheres(s);
    drive_add(d, n, &b, &sp, false, false);
    free(s);
}

static void move_all_of(drive *d, size_t stride, size_t offset, float jitter, bool scramble,
                        float far, uint64_t *rng) {
    move_kind(d, false, stride, offset, jitter, scramble, far, rng);
    move_kind(d, true, stride, offset, jitter, scramble, far, rng);
}

/* The live ids whose id is `offset` modulo `stride`, at most `max`. */
static size_t pick(const drive *d, size_t stride, size_t offset, size_t max, uint32_t *ids) {
    size_t n = 0;
    for (uint32_t id = 0; id < d->md.m.cap && n < max; id++)
        if (d->md.m.alive[id] && id % stride == offset) ids[n++] = id;
    return n;
}

/* The script: every kind of call, with steps that refit, rebuild, grow the root and lay the
 * octree out again, updates without pairs and neighbour rows, and a world emptied down to one
 * object at the end. */
static void script(drive *d, uint64_t seed) {
    uint64_t rng = seed;
    uint32_t ids[256];
    broadphase_filter filters[256];
    add_random(d, 6, false, &rng); /* a first step on a handful: little scratch yet */
    drive_step(d);
    add_random(d, 40, false, &rng);
    add_random(d, 40, true, &rng);
    drive_step(d);
    /* Small moves, step after step: the chooser's first round of trials comes after 64 steps,
     * so that the calls below meet its trials (the candidates' builds and the way back); every
     * method meets a failure in its refits with many steps after it (which found an octree's
     * merge redirects left set after a failed split). */
    for (int frame = 0; frame < FAULTS_STEADY_STEPS; frame++) {
        move_all_of(d, 1, 0, 0.5f, false, 0.0f, &rng);
        drive_step(d);
    }
    size_t n = pick(d, 7, 3, 256, ids);
    for (size_t i = 0; i < n; i++)
        filters[i] =
            (broadphase_filter){1u << (i % 3), i % 2 ? 0xFFFFFFFFu : 0x5u, (uint32_t)(i % 4 == 0)};
    drive_set_filters(d, n, ids, filters);
    drive_set_static(d, pick(d, 9, 1, 256, ids), ids, true);
    drive_step(d);
    drive_queries(d, 2, seed + 1);
    for (int frame = 0; frame < 3 && !d->failed; frame++) { /* everything drifts: refits */
        move_all_of(d, 1, 0, 3.0f, false, 0.0f, &rng);
        drive_step(d);
    }
    move_all_of(d, 2, 1, 2.0f, false, 0.0f, &rng); /* a frame that only queries */
    drive_update(d);
    drive_queries(d, 1, seed + 5);
    drive_step(d); /* on the structures the update left */
    drive_neighbours(d);
    drive_neighbourhoods(d, 4, 3.0f);
    drive_neighbourhoods(d, 3, INFINITY); /* the k nearest: searches that reach the grid's edges */
    move_all_of(d, 23, 5, 0.0f, false, 4000.0f, &rng); /* teleports far away: the root grows */
    drive_step(d);
    move_all_of(d, 1, 0, 0.0f, true, 0.0f, &rng); /* everything anywhere: AUTO rebuilds */
    drive_step(d);
    drive_remove(d, pick(d, 4, 1, 256, ids), ids);
    add_random(d, 12, true, &rng); /* ids handed out again */
    drive_update(d);               /* taken in before the step that reports them */
    add_random(d, 12, false, &rng);
    drive_step(d);
    drive_neighbours(d);
    for (int frame = 0; frame < 3 && !d->failed; frame++) { /* few move: the others rest */
        move_all_of(d, 17, (size_t)frame, 1.0f, false, 0.0f, &rng);
        drive_step(d);
    }
    drive_set_static(d, pick(d, 18, 1, 256, ids), ids, false);
    n = pick(d, 5, 2, 256, ids);
    for (size_t i = 0; i < n; i++) filters[i] = (broadphase_filter){1u, 0xFFFFFFFFu, 0u};
    drive_set_filters(d, n, ids, filters);
    move_all_of(d, 3, 0, 2.0f, false, 0.0f, &rng);
    drive_step(d);
    drive_queries(d, 3, seed + 2);
    drive_batches(d, 6, seed + 3);
    drive_batches(d, 300, seed + 7); /* in Morton order: the order's memory too, then kept */
    drive_remove(d, pick(d, 1, 0, 256, ids) - 1, ids); /* down to one object */
    drive_step(d);
    drive_queries(d, 1, seed + 4);
    add_line(d, 24);
    drive_neighbourhoods(d, 3, INFINITY); /* 3D: the fallback; 2D: the grid on a line */
}

typedef struct run_result {
    long calls, failed, out_of_memory;
    bool ok, stopped; /* stopped: FAULTS_STEPS_AFTER_FAILURE steps after the failure */
} run_result;

static run_result run_once(const broadphase_config *c, long fail_at, uint64_t seed) {
    fault_allocator f;
    atomic_init(&f.calls, 0);
    atomic_init(&f.failed, 0);
    atomic_init(&f.live, 0);
    atomic_init(&f.wrong_size, 0);
    f.fail_at = fail_at;
    drive d;
    run_result r = {0, 0, 0, false, false};
    if (drive_open(&d, c, &f)) {
        d.steps_after_fault = FAULTS_STEPS_AFTER_FAILURE;
        script(&d, seed);
    }
    r.out_of_memory = d.out_of_memory;
    r.stopped = d.stopped;
    r.ok = !d.failed;
    drive_close(&d);
    r.ok = r.ok && !d.failed;
    r.calls = atomic_load(&f.calls);
    r.failed = atomic_load(&f.failed);
    return r;
}

/* For one method and dimension: every update policy (1, 2 and 3 threads), each with every k. */
static void inject_every_allocation(broadphase_method method, int dims) {
    long injected = 0, reported = 0, runs = 0, stopped = 0;
    /* {policy, threads, leaf size, rest share}: every policy, and the refit once more with
     * more objects at rest and the leaves and threads of the fuzzer's finding (a step that ran
     * out of memory after its update). */
    static const struct {
        int policy, threads, leaf;
        float rest;
    } variants[] = {{0, 1, 4, 0.125f}, {1, 2, 4, 0.125f}, {2, 3, 4, 0.125f}, {2, 2, 7, 0.5f}};
    for (size_t vi = 0; vi < sizeof variants / sizeof variants[0]; vi++) {
        int policy = variants[vi].policy;
        if (!method_has_tree(method) && vi > 0) break; /* policies and leaves: a tree's */
        broadphase_config c =
            test_config(dims, method, (broadphase_update_policy)policy, variants[vi].threads, 0.0f);
        c.pair_events = vi < 3;
        c.leaf_size = variants[vi].leaf; /* small leaves: a deeper tree from few objects */
        c.rest_share = variants[vi].rest;
        uint64_t seed = 0x5eed0000u + (uint64_t)(dims * 10 + policy);
        TEST_CONTEXT("method %s dims %d policy %s threads %d", method_name(method), dims,
                     policy_names[policy], c.threads);
        run_result clean = run_once(&c, 0, seed);
        REQUIRE(clean.ok && clean.failed == 0);
        REQUIRE(clean.calls > 10);
        long k = 1;
        for (;; k++) {
            TEST_CONTEXT("method %s dims %d policy %s threads %d: allocation %ld fails",
                         method_name(method), dims, policy_names[policy], c.threads, k);
            run_result r = run_once(&c, k, seed);
            runs++;
            REQUIRE(r.ok);
            if (r.failed == 0) break; /* the script never reached allocation k */
            /* One allocation failed: the call reported it, or did without (the statics'
             * search cache is optional: the search then walks) and still got every check
             * right. */
            REQUIRE(r.out_of_memory <= 1);
            injected++;
            reported += r.out_of_memory;
            stopped += r.stopped;
        }
        /* With one thread the order of allocations is fixed: the script completes at exactly
         * the clean run's count. Not with the chooser, whose trials end by the clock. */
        if (c.threads == 1 && method != BROADPHASE_METHOD_AUTO) CHECK_EQ_INT(k, clean.calls + 1);
    }
    printf("method %s, %dD: %ld allocations failed and survived (%ld reported as out of memory, "
           "the rest done without), %ld runs, %ld of them stopped %d steps after the failure\n",
           method_name(method), dims, injected, reported, runs, stopped,
           FAULTS_STEPS_AFTER_FAILURE);
    CHECK(injected > 50);
    /* The runs stop early where asked to, and only there. */
    CHECK(FAULTS_STEPS_AFTER_FAILURE > 0 ? stopped > injected / 4 : stopped == 0);
}

/* Every method of the one list, 3D and 2D: out_of_memory_<name>_3d and _2d. */
#define OUT_OF_MEMORY_TESTS_(id, name)                                                             \
    TEST(out_of_memory_##name##_3d) {                                                              \
        inject_every_allocation(id, 3);                                                            \
    }                                                                                              \
    TEST(out_of_memory_##name##_2d) {                                                              \
        inject_every_allocation(id, 2);                                                            \
    }
BROADPHASE_METHOD_LIST(OUT_OF_MEMORY_TESTS_)
#undef OUT_OF_MEMORY_TESTS_

#if FAULTS_STEADY_STEPS >= 72
/* The chooser (BROADPHASE_METHOD_AUTO), whose trials build a second structure beside the first:
 * a candidate that cannot be built is passed over, and the steps go on. Its trials begin after
 * 64 steps: only with the stretch of small steps (not in the sanitizer builds). */
TEST(out_of_memory_auto_3d) {
    inject_every_allocation(BROADPHASE_METHOD_AUTO, 3);
}
#endif

/* The script itself must cover what the issue names: a root growth, a rebuild after refits, a
 * relayout, objects at rest and statics, or the injection above proves less than it says. */
TEST(script_reaches_every_path) {
    for (int dims = 2; dims <= 3; dims++) {
        broadphase_config c =
            test_config(dims, BROADPHASE_METHOD_OCTREE, BROADPHASE_UPDATE_AUTO, 1, 0.0f);
        c.pair_events = true;
        c.leaf_size = 4;
        TEST_CONTEXT("octree %dD", dims);
        drive d;
        REQUIRE(drive_open(&d, &c, NULL));
        script(&d, 0x5eed0000u + (uint64_t)(dims * 10));
        broadphase_stats st;
        /* the script ends on one object: look at the figures it kept */
        CHECK(!d.failed);
        CHECK_EQ_INT(broadphase_get_stats(d.w, &st), BROADPHASE_OK);
        CHECK(st.root_growths > 0);
        CHECK(st.rebuilds > 1);
        CHECK(st.refits > 0);
        CHECK(st.static_builds > 0);
        CHECK(st.rest_builds > 0);
        CHECK(d.steps >= 14);
        CHECK(d.checked_pairs > 100);
        printf("%dD: %ld calls (%ld bad), %ld steps, %ld pairs checked\n", dims, d.calls,
               d.bad_calls, d.steps, d.checked_pairs);
        drive_close(&d);
    }
}

TEST_MAIN()
