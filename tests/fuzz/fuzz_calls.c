/* The call-sequence fuzzer: bytes decoded into a world (method, dimensions, update policy,
 * threads, events, rest, leaf size, an object cap, an allocation that fails) and a sequence of
 * API calls, valid and invalid: non-finite, inverted and huge boxes, negative radii, unknown,
 * removed and repeated ids, NULL arrays and columns, counts of 0, past the live objects, past the
 * cap and SIZE_MAX, queries with bad input. tests/drive.h makes each call beside its model and
 * checks it: a bad call gets its documented status and last_error_index and changes nothing, an
 * out-of-memory failure changes nothing, every step's pairs and events equal brute force, every
 * query the reference. The sequence then runs again at another thread count and must give the
 * same results, hashed.
 *
 * Built with libFuzzer (-DBROADPHASE_FUZZ=ON, clang) as fuzz_calls; built without it as
 * fuzz_replay, which runs the files named on its command line (the seed corpus in
 * tests/fuzz/corpus and every finding, kept in tests/fuzz/regressions) in every configuration
 * of the test suite. A failed check aborts, which libFuzzer reports as a crash. */
#include "drive.h"

#include <dirent.h>

/* tests/test.h's globals, which drive.h's checks use (there is no TEST_MAIN here). */
int test_failures = 0;
char test_context[512] = "";
test_case *test_registry = NULL;

/* ---- reading the bytes ------------------------------------------------------------------------
 */

typedef struct reader {
    const uint8_t *p;
    size_t n, at;
} reader;

static uint8_t next(reader *r) {
    return r->at < r->n ? r->p[r->at++] : 0;
}

static bool done(const reader *r) {
    return r->at >= r->n;
}

/* A coordinate: mostly on a half-unit grid (touching boxes are common), sometimes an edge. */
static float coord(reader *r) {
    uint8_t b = next(r);
    if (b < 200) return ((float)b - 100.0f) * 0.5f;
    switch (b % 14) {
    case 0:
        return NAN;
    case 1:
        return INFINITY;
    case 2:
        return -INFINITY;
    case 3:
        return 1e30f;
    case 4:
        return -1e30f;
    case 5:
        return -0.0f;
    case 6:
        return FLT_MAX;
    case 7:
        return -FLT_MAX;
    case 8:
        return 1e-40f; /* subnormal */
    case 9:
        return 3e7f; /* floats 2 apart */
    default:
        return ((float)b - 228.0f) * 0.125f;
    }
}

/* An extent: mostly small and non-negative; sometimes negative (an inverted box), zero, huge. */
static float extent(reader *r) {
    uint8_t b = next(r);
    if (b < 220) return (float)(b % 24) * 0.5f;
    switch (b % 6) {
    case 0:
        return -1.0f;
    case 1:
        return -0.0f;
    case 2:
        return 1e30f;
    case 3:
        return NAN;
    case 4:
        return INFINITY;
    default:
        return 0.0f;
    }
}

/* A batch length: mostly small; sometimes 0, past the live objects, or SIZE_MAX. */
static size_t batch_count(reader *r, size_t live) {
    uint8_t b = next(r);
    if (b < 232) return b % 9;
    if (b < 240) return 0;
    if (b < 248) return live + 1 + b % 3;
    return SIZE_MAX;
}

/* An id: mostly a live one; sometimes any small id (free or never issued), or far out. */
static uint32_t some_id(reader *r, const model *md) {
    uint8_t b = next(r);
    if (b < 200 && md->live > 0) {
        size_t want = b % md->live;
        for (uint32_t id = 0; id < md->m.cap; id++)
            if (md->m.alive[id] && want-- == 0) return id;
    }
    if (b < 248) return b % 64;
    return UINT32_MAX - (b % 4);
}

/* Arrays for a batch: `count` entries (at least 16, never read past an honest count). */
typedef struct batch_arrays {
    float *v[7];
    uint32_t *ids;
    broadphase_filter *filters;
    size_t len;
} batch_arrays;

static bool arrays_make(batch_arrays *a, size_t count) {
    a->len = count < 16 ? 16 : count;
    if (count > 4096) a->len = 16; /* a dishonest count: the world must not read the arrays */
    for (int k = 0; k < 7; k++) a->v[k] = calloc(a->len, sizeof(float));
    a->ids = calloc(a->len, sizeof *a->ids);
    a->filters = calloc(a->len, sizeof *a->filters);
    return true;
}

static void arrays_free(batch_arrays *a) {
    for (int k = 0; k < 7; k++) free(a->v[k]);
    free(a->ids);
    free(a->filters);
}

/* Shapes for the honest entries: boxes from a corner and extents, spheres from the same. */
static void fill_shapes(reader *r, batch_arrays *a, size_t count) {
    for (size_t i = 0; i < count && i < a->len; i++) {
        for (int k = 0; k < 3; k++) {
            a->v[k][i] = coord(r);
            a->v[3 + k][i] = a->v[k][i] + extent(r);
        }
        a->v[6][i] = extent(r);
    }
}

/* NULL pointers, from one byte: the whole struct, one column, or the ids. */
typedef struct nulls {
    bool all, column, ids;
    int which;
} nulls;

static nulls some_nulls(reader *r) {
    uint8_t b = next(r);
    nulls n = {b == 250, b >= 251 && b <= 253, b >= 254, b % 7};
    return n;
}

static broadphase_boxes boxes_of(batch_arrays *a, nulls n) {
    const float *c[6] = {a->v[0], a->v[1], a->v[2], a->v[3], a->v[4], a->v[5]};
    if (n.column) c[n.which % 6] = NULL;
    return (broadphase_boxes){c[0], c[1], c[2], c[3], c[4], c[5]};
}

static broadphase_spheres spheres_of(batch_arrays *a, nulls n) {
    const float *c[4] = {a->v[0], a->v[1], a->v[2], a->v[6]};
    if (n.column) c[n.which % 4] = NULL;
    return (broadphase_spheres){c[0], c[1], c[2], c[3]};
}

/* ---- the calls ----------------------------------------------------------------------------- */

static void fnv(uint64_t *h, const void *p, size_t n) {
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) *h = (*h ^ b[i]) * 0x100000001b3ull;
}

/* Queries with bad input: each must be refused with its status, and write nothing. */
static void bad_query(drive *d, reader *r) {
    uint8_t b = next(r);
    float lo[3] = {coord(r), coord(r), coord(r)}, hi[3] = {coord(r), coord(r), coord(r)};
    uint32_t out[4];
    size_t count = 0;
    broadphase_status s, want = BROADPHASE_OK;
    int dims = d->config.dimensions;
    bool nonfinite = false, inverted = false;
    for (int k = 0; k < dims; k++) {
        nonfinite |= !isfinite(lo[k]) || !isfinite(hi[k]);
        inverted |= lo[k] > hi[k];
    }
    switch (b % 4) {
    case 0: /* a box: non-finite, then inverted */
        want = nonfinite  ? BROADPHASE_ERROR_NONFINITE
               : inverted ? BROADPHASE_ERROR_INVERTED_BOX
                          : BROADPHASE_OK;
        s = broadphase_query_box(d->w, lo, hi, out, 0, &count);
        if (want == BROADPHASE_OK)
            want = s == BROADPHASE_OK ? s : BROADPHASE_ERROR_BUFFER_TOO_SMALL;
        break;
    case 1: { /* a sphere with the box's max x as radius */
        float radius = hi[0];
        bool bad_centre = false;
        for (int k = 0; k < dims; k++) bad_centre |= !isfinite(lo[k]);
        want = bad_centre || !isfinite(radius) ? BROADPHASE_ERROR_NONFINITE
               : radius < 0.0f                 ? BROADPHASE_ERROR_NEGATIVE_RADIUS
                                               : BROADPHASE_OK;
        s = broadphase_query_sphere(d->w, lo, radius, out, 0, &count);
        if (want == BROADPHASE_OK)
            want = s == BROADPHASE_OK ? s : BROADPHASE_ERROR_BUFFER_TOO_SMALL;
        break;
    }
    case 2: { /* NULL results with room claimed */
        const float origin[3] = {0.0f, 0.0f, 0.0f};
        want = BROADPHASE_ERROR_INVALID_ARGUMENT;
        s = broadphase_query_point(d->w, origin, NULL, 4, &count);
        break;
    }
    default: { /* a batch of SIZE_MAX */
        size_t offsets[2];
        broadphase_id_rows rows = {offsets, out, 4, 0, 0};
        broadphase_boxes bx = {lo, lo + 1, lo + 2, hi, hi + 1, hi + 2};
        want = BROADPHASE_ERROR_INVALID_ARGUMENT;
        s = broadphase_query_boxes(d->w, SIZE_MAX, &bx, &rows);
        break;
    }
    }
    d->calls++;
    /* Valid input may still run out of memory (catching up with changes allocates). */
    bool valid = want == BROADPHASE_OK || want == BROADPHASE_ERROR_BUFFER_TOO_SMALL;
    if (s != want && !(valid && s == BROADPHASE_ERROR_OUT_OF_MEMORY && d->faults))
        drive_fail(d, "bad query status", s, want);
}

static void one_call(drive *d, reader *r, uint64_t *hash) {
    uint8_t byte = next(r);
    /* The calls added after the corpus was made take the top byte values, so that most of what
     * the corpus and the regressions decode to stays as it was. */
    if (byte >= 250) {
        if (byte < 253) {
            drive_update(d);
        } else if (byte == 253) {
            /* every neighbourhood: k 0 to 7, a distance that may be 0, huge, NaN or negative */
            size_t k = next(r) % 8;
            float distance = extent(r);
            drive_neighbourhoods(d, k, distance);
            broadphase_neighbourhood_rows rows;
            if (d->w && broadphase_neighbourhoods(d->w, k, distance, &rows) == BROADPHASE_OK &&
                rows.count) {
                fnv(hash, rows.counts, rows.count * sizeof *rows.counts);
                for (size_t i = 0; i < rows.count; i++) {
                    fnv(hash, rows.ids + i * k, rows.counts[i] * sizeof *rows.ids);
                    fnv(hash, rows.dist2 + i * k, rows.counts[i] * sizeof *rows.dist2);
                }
            }
        } else {
            drive_neighbours(d);
            broadphase_neighbour_rows rows;
            if (d->w && broadphase_neighbours(d->w, &rows) == BROADPHASE_OK) {
                fnv(hash, rows.offsets, (rows.count + 1) * sizeof *rows.offsets);
                if (rows.offsets[rows.count])
                    fnv(hash, rows.ids, rows.offsets[rows.count] * sizeof *rows.ids);
            }
        }
        return;
    }
    uint8_t op = byte % 12;
    batch_arrays a;
    switch (op) {
    case 0:
    case 1: { /* add boxes / spheres */
        size_t count = batch_count(r, d->md.live);
        if (count == d->md.live + 1)
            count = d->w->config.max_objects - d->md.live + 1; /* the cap */
        nulls n = some_nulls(r);
        arrays_make(&a, count);
        fill_shapes(r, &a, count);
        broadphase_boxes b = boxes_of(&a, n);
        broadphase_spheres s = spheres_of(&a, n);
        drive_add(d, count, n.all ? NULL : &b, n.all ? NULL : &s, op == 1, n.ids);
        break;
    }
    case 2:
    case 3: { /* move boxes / spheres */
        size_t count = batch_count(r, d->md.live);
        nulls n = some_nulls(r);
        arrays_make(&a, count);
        for (size_t i = 0; i < count && i < a.len; i++) a.ids[i] = some_id(r, &d->md);
        fill_shapes(r, &a, count);
        broadphase_boxes b = boxes_of(&a, n);
        broadphase_spheres s = spheres_of(&a, n);
        const uint32_t *ids = n.ids ? NULL : a.ids;
        drive_move(d, count, ids, n.all ? NULL : &b, n.all ? NULL : &s, op == 3);
        break;
    }
    case 4:
    case 5:
    case 6: { /* remove, set filters, set static */
        size_t count = batch_count(r, d->md.live);
        nulls n = some_nulls(r);
        arrays_make(&a, count);
        for (size_t i = 0; i < count && i < a.len; i++) {
            a.ids[i] = some_id(r, &d->md);
            uint8_t f = next(r);
            a.filters[i] = (broadphase_filter){f & 3u ? 1u << (f & 3u) : 0xFFFFFFFFu,
                                               f & 4u ? 0xFFFFFFFFu : 0x3u, (f >> 3) & 3u};
        }
        const uint32_t *ids = n.ids ? NULL : a.ids;
        if (op == 4)
            drive_remove(d, count, ids);
        else if (op == 5)
            drive_set_filters(d, count, ids, n.all ? NULL : a.filters);
        else
            drive_set_static(d, count, ids, next(r) & 1);
        break;
    }
    case 7:
    case 8: /* steps are the most common call */
        drive_step(d);
        if (d->w) {
            broadphase_pairs p = broadphase_last_pairs(d->w);
            fnv(hash, &p.count, sizeof p.count);
            if (p.count) fnv(hash, p.data, p.count * sizeof *p.data);
        }
        return;
    case 9:
        drive_queries(d, 1, next(r));
        return;
    case 10:
        drive_batches(d, 1 + next(r) % 4, next(r));
        return;
    default:
        bad_query(d, r);
        return;
    }
    arrays_free(&a);
    size_t live = broadphase_object_count(d->w), index = broadphase_last_error_index(d->w);
    fnv(hash, &live, sizeof live);
    fnv(hash, &index, sizeof index);
}

/* One run of the sequence at `threads`; returns the hash of what it saw. */
static uint64_t run(const uint8_t *data, size_t size, int threads) {
    reader r = {data, size, 0};
    uint8_t h0 = next(&r), h1 = next(&r), h2 = next(&r);
    broadphase_config c = broadphase_config_default(2 + (h0 & 1));
    c.method = (broadphase_method)((h0 >> 1) % BROADPHASE_METHOD_COUNT);
    c.update = (broadphase_update_policy)((h0 >> 3) % 3);
    c.pair_events = h0 & 0x20;
    c.rest_share = h0 & 0x40 ? 0.5f : h0 & 0x80 ? 0.0f : c.rest_share;
    c.leaf_size = h1 % 4 == 0 ? 0 : 1 + h1 % 9;
    c.max_objects = h1 & 0x80 ? 40 : 0;
    c.threads = threads;
    fault_allocator f;
    atomic_init(&f.calls, 0);
    atomic_init(&f.failed, 0);
    atomic_init(&f.live, 0);
    atomic_init(&f.wrong_size, 0);
    f.fail_at = h2 < 128 ? 0 : h2 - 127; /* one of the first 128 allocations fails */
    drive d;
    uint64_t hash = 0xcbf29ce484222325ull;
    snprintf(test_context, sizeof test_context, "dims %d method %s policy %d threads %d",
             c.dimensions, broadphase_method_name(c.method), (int)c.update, threads);
    if (drive_open(&d, &c, &f)) {
        for (int calls = 0; calls < 64 && !done(&r) && !d.failed; calls++) one_call(&d, &r, &hash);
    }
    bool failed = d.failed;
    if (getenv("FUZZ_VERBOSE"))
        fprintf(stderr, "%s: %ld calls (%ld bad), %ld out of memory, %ld steps, %ld pairs\n",
                test_context, d.calls, d.bad_calls, d.out_of_memory, d.steps, d.checked_pairs);
    drive_close(&d);
    if (failed || d.failed) {
        fprintf(stderr, "fuzz_calls: a check failed [%s]\n", test_context);
        abort();
    }
    return hash;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 3) return 0;
    int threads = 1 + (data[2] & 1) + ((data[1] >> 4) & 1); /* 1..3 */
    uint64_t a = run(data, size, threads);
    uint64_t b = run(data, size, threads == 1 ? 3 : 1);
    if (a != b) {
        fprintf(stderr, "fuzz_calls: %d threads and %d differ\n", threads, threads == 1 ? 3 : 1);
        abort();
    }
    return 0;
}

#ifndef BROADPHASE_LIBFUZZER
/* fuzz_replay FILE|DIR...: runs every file (every file of every directory) once. */
static int replay_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "fuzz_replay: cannot open %s\n", path);
        return 1;
    }
    uint8_t buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, n);
    return 0;
}

int main(int argc, char **argv) {
    int files = 0, bad = 0;
    for (int i = 1; i < argc; i++) {
        DIR *dir = opendir(argv[i]);
        if (!dir) {
            bad += replay_file(argv[i]);
            files++;
            continue;
        }
        struct dirent *e;
        while ((e = readdir(dir))) {
            if (e->d_name[0] == '.') continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", argv[i], e->d_name);
            bad += replay_file(path);
            files++;
        }
        closedir(dir);
    }
    printf("fuzz_replay: %d inputs replayed, every check passed\n", files - bad);
    return bad || files == 0 ? 1 : 0;
}
#endif
