/* The runner's SVG pictures (perf/common/svg.c), read back element by element: one element per
 * object with its id, one per node broadphase_visit_nodes shows, and the highlighted objects
 * exactly the library's answers (the last step's pairs, a box query's hits and candidates, a ray's
 * hits and its first hit), for every method, in 2D and projected from 3D, with static objects and
 * objects at rest; and the option parsers. */
#include "test.h"

#include "broadphase.h"
#include "method.h"
#include "scenes.h"
#include "svg.h"

#include <math.h>

/* What an object's classes say, and that it was drawn (by id). */
enum {
    DRAWN = 1,
    IN_PAIR = 2,
    CANDIDATE = 4,
    HIT = 8,
    RAY_HIT = 16,
    FIRST_HIT = 32,
};

typedef struct picture {
    size_t objects;  /* elements with an object's id ("o<id>") */
    size_t nodes[3]; /* elements with a node's id, by structure ("t", "s", "r") */
    size_t wrong;    /* elements whose id and class disagree, or repeated ids */
    uint8_t *flags;  /* by object id */
    size_t id_limit;
} picture;

/* The value of attribute `name` of the element [begin, end) into out; false when absent. */
static bool attribute(const char *begin, const char *end, const char *name, char *out,
                      size_t size) {
    char key[32];
    snprintf(key, sizeof key, " %s=\"", name);
    size_t key_len = strlen(key);
    for (const char *p = begin; p + key_len < end; p++) {
        if (memcmp(p, key, key_len) != 0) continue;
        const char *value = p + key_len, *close = memchr(value, '"', (size_t)(end - value));
        if (!close || (size_t)(close - value) >= size) return false;
        memcpy(out, value, (size_t)(close - value));
        out[close - value] = '\0';
        return true;
    }
    return false;
}

static bool has_class(const char *classes, const char *name) {
    size_t n = strlen(name);
    for (const char *p = classes; (p = strstr(p, name)) != NULL; p += n) {
        bool starts = p == classes || p[-1] == ' ';
        bool ends = p[n] == '\0' || p[n] == ' ';
        if (starts && ends) return true;
    }
    return false;
}

/* Reads the elements of an SVG: the objects' classes by id, the nodes by structure. */
static void read_picture(const char *text, picture *pic) {
    static const char node_prefix[3] = {'t', 's', 'r'};
    static const char *const node_class[3] = {"cell", "sfield", "rfield"};
    static const struct {
        const char *name;
        uint8_t flag;
    } object_classes[] = {{"pair", IN_PAIR},
                          {"cand", CANDIDATE},
                          {"hit", HIT},
                          {"rhit", RAY_HIT},
                          {"closest", FIRST_HIT}};
    for (const char *p = text; (p = strchr(p, '<')) != NULL; p++) {
        const char *end = strchr(p, '>');
        if (!end) break;
        char id[32], classes[128];
        if (!attribute(p, end, "id", id, sizeof id)) continue;
        if (!attribute(p, end, "class", classes, sizeof classes)) classes[0] = '\0';
        if (id[0] == 'o') {
            unsigned long v = strtoul(id + 1, NULL, 10);
            pic->objects++;
            if (v >= pic->id_limit || (pic->flags[v] & DRAWN) || !has_class(classes, "obj")) {
                pic->wrong++;
                continue;
            }
            pic->flags[v] |= DRAWN;
            for (size_t c = 0; c < sizeof object_classes / sizeof object_classes[0]; c++) {
                if (has_class(classes, object_classes[c].name))
                    pic->flags[v] |= object_classes[c].flag;
            }
            continue;
        }
        for (int k = 0; k < 3; k++) {
            if (id[0] != node_prefix[k]) continue;
            pic->nodes[k]++;
            if (!has_class(classes, node_class[k])) pic->wrong++;
        }
    }
}

/* svg_write into memory, through a temporary file; NULL on failure (reported). */
static char *write_to_text(const broadphase_world *w, const scene *s, const uint32_t *ids,
                           const svg_options *o, svg_summary *sum) {
    FILE *f = tmpfile();
    CHECK(f != NULL);
    if (!f) return NULL;
    CHECK_EQ_INT(svg_write(f, w, s, ids, o, sum), BROADPHASE_OK);
    CHECK(!ferror(f));
    long size = ftell(f);
    char *text = size > 0 ? malloc((size_t)size + 1) : NULL;
    rewind(f);
    size_t got = text ? fread(text, 1, (size_t)size, f) : 0;
    fclose(f);
    CHECK(text != NULL && got == (size_t)size);
    if (!text || got != (size_t)size) {
        free(text);
        return NULL;
    }
    text[got] = '\0';
    return text;
}

static bool count_node(const broadphase_node *node, void *user) {
    size_t *per = user;
    per[node->structure]++;
    return true;
}

/* The box and the ray the picture queried, from the options as svg.h defines them. */
static void resolve_box(const svg_options *o, const scene *s, float lo[3], float hi[3]) {
    static const int axes[3][3] = {{0, 1, 2}, {0, 2, 1}, {1, 2, 0}};
    const int *a = axes[o->plane];
    if (o->box_count == 6) {
        memcpy(lo, o->box, 3 * sizeof *lo);
        memcpy(hi, o->box + 3, 3 * sizeof *hi);
        return;
    }
    lo[a[2]] = hi[a[2]] = 0.0f;
    for (size_t i = 0; i < s->count; i++) {
        lo[a[2]] = i == 0 || s->min[a[2]][i] < lo[a[2]] ? s->min[a[2]][i] : lo[a[2]];
        hi[a[2]] = i == 0 || s->max[a[2]][i] > hi[a[2]] ? s->max[a[2]][i] : hi[a[2]];
    }
    lo[a[0]] = o->box[0], lo[a[1]] = o->box[1];
    hi[a[0]] = o->box[2], hi[a[1]] = o->box[3];
}

/* The test gives 2D rays on xy (4 or 5 values) and 3D rays whole (6 or 7). */
static void resolve_ray(const svg_options *o, float origin[3], float dir[3], float *max_t) {
    bool whole = o->ray_count >= 6;
    int d = whole ? 3 : 2;
    for (int k = 0; k < 3; k++) {
        origin[k] = k < d ? o->ray[k] : 0.0f;
        dir[k] = k < d ? o->ray[d + k] : 0.0f;
    }
    *max_t = o->ray_count == 2 * d + 1 ? o->ray[2 * d] : INFINITY;
}

/* Marks `flag` on each id of a query's answer; returns the answer's size. */
static size_t mark_ids(uint8_t *flags, size_t id_limit, const uint32_t *ids, size_t count,
                       uint8_t flag) {
    for (size_t j = 0; j < count; j++) {
        CHECK(ids[j] < id_limit);
        if (ids[j] < id_limit) flags[ids[j]] |= flag;
    }
    return count;
}

/* A world of `kind` stepped with a static field and objects at rest; its picture against what
 * the library answers. */
static void check_picture(scene_kind kind, size_t count, broadphase_method method,
                          const svg_options *o) {
    TEST_CONTEXT("scene %s, n %zu, seed 7, method %d, plane %d, box of %d values, ray of %d "
                 "values",
                 scene_name(kind), count, (int)method, (int)o->plane, o->box_count, o->ray_count);
    scene s;
    REQUIRE(scene_make(&s, kind, count, 7));
    broadphase_config cfg = broadphase_config_default(s.dimensions);
    cfg.method = method;
    cfg.leaf_size = 8;
    broadphase_world *w = NULL;
    uint32_t *ids = malloc(count * sizeof *ids);
    picture pic = {.id_limit = count};
    pic.flags = calloc(count, 1);
    uint8_t *want = calloc(count, 1);
    uint32_t *answer = malloc(count * sizeof *answer);
    broadphase_ray_hit *hits = malloc(count * sizeof *hits);
    char *text = NULL;
    CHECK(ids && pic.flags && want && answer && hits);
    if (!ids || !pic.flags || !want || !answer || !hits) goto done;
    CHECK_EQ_INT(broadphase_create(&cfg, &w), BROADPHASE_OK);
    if (!w) goto done;
    CHECK_EQ_INT(scene_add_to_world(&s, w, ids), BROADPHASE_OK);
    for (size_t i = 0; i < count; i++) CHECK_EQ_INT(ids[i], i); /* ids index `want` */
    CHECK_EQ_INT(broadphase_step(w, NULL), BROADPHASE_OK);
    /* A static field (the first tenth), then another tenth of the objects moved (boxes; below
     * config.rest_share of the others) so that the rest come to rest: the picture draws the
     * tree and both fields' nodes. */
    CHECK_EQ_INT(broadphase_set_static(w, count / 10, ids, true), BROADPHASE_OK);
    CHECK_EQ_INT(broadphase_step(w, NULL), BROADPHASE_OK);
    for (size_t i = count / 3, moved = 0; i < count && moved < count / 10; i++) {
        if (s.is_sphere[i]) continue;
        moved++;
        s.min[0][i] += 0.25f, s.max[0][i] += 0.25f, s.center[0][i] += 0.25f;
        broadphase_boxes b = {s.min[0] + i, s.min[1] + i, s.min[2] + i,
                              s.max[0] + i, s.max[1] + i, s.max[2] + i};
        CHECK_EQ_INT(broadphase_move_boxes(w, 1, &ids[i], &b), BROADPHASE_OK);
    }
    CHECK_EQ_INT(broadphase_step(w, NULL), BROADPHASE_OK);

    svg_summary sum;
    text = write_to_text(w, &s, ids, o, &sum);
    if (!text) goto done;
    CHECK(strncmp(text, "<svg ", 5) == 0);
    size_t length = strlen(text);
    CHECK(length > 7 && strcmp(text + length - 7, "</svg>\n") == 0);
    read_picture(text, &pic);

    /* Every object once, every node once. */
    CHECK_EQ_INT(pic.wrong, 0);
    CHECK_EQ_INT(pic.objects, count);
    for (size_t id = 0; id < count; id++) CHECK(pic.flags[id] & DRAWN);
    size_t per[3] = {0, 0, 0};
    CHECK_EQ_INT(broadphase_visit_nodes(w, count_node, per), BROADPHASE_OK);
    for (int k = 0; k < 3; k++) CHECK_EQ_INT(pic.nodes[k], per[k]);
    CHECK_EQ_INT(sum.nodes, per[0] + per[1] + per[2]);
    if (method_for(method)->fill_levels != NULL) {     /* a method with a tree */
        CHECK(per[0] > 1 && per[1] > 0 && per[2] > 0); /* the test covers all three */
    }

    /* The objects in a pair are the objects of the last step's pairs. */
    broadphase_pairs pairs = broadphase_last_pairs(w);
    CHECK(pairs.count > 0);
    CHECK_EQ_INT(sum.pairs, pairs.count);
    for (size_t p = 0; p < pairs.count; p++) {
        want[pairs.data[p].a] |= IN_PAIR;
        want[pairs.data[p].b] |= IN_PAIR;
    }
    if (o->box_count) {
        float lo[3], hi[3];
        size_t n = 0;
        resolve_box(o, &s, lo, hi);
        CHECK_EQ_INT(broadphase_query_box(w, lo, hi, answer, count, &n), BROADPHASE_OK);
        CHECK(n > 0);
        CHECK_EQ_INT(sum.hits, mark_ids(want, count, answer, n, HIT));
        CHECK_EQ_INT(broadphase_query_box_candidates(w, lo, hi, answer, count, &n), BROADPHASE_OK);
        CHECK_EQ_INT(sum.candidates, mark_ids(want, count, answer, n, CANDIDATE));
    }
    if (o->ray_count) {
        float origin[3], dir[3], max_t;
        size_t n = 0;
        resolve_ray(o, origin, dir, &max_t);
        CHECK_EQ_INT(broadphase_raycast(w, origin, dir, max_t, hits, count, &n), BROADPHASE_OK);
        CHECK(n > 1);
        for (size_t j = 0; j < n; j++) want[hits[j].id] |= RAY_HIT;
        CHECK_EQ_INT(sum.ray_hits, n);
        broadphase_ray_hit first;
        bool found = false;
        CHECK_EQ_INT(broadphase_raycast_closest(w, origin, dir, max_t, &first, &found),
                     BROADPHASE_OK);
        if (found) want[first.id] |= FIRST_HIT;
        CHECK_EQ_INT(sum.closest, found ? first.id : UINT32_MAX);
    }
    size_t paired = 0;
    for (size_t id = 0; id < count; id++) {
        uint8_t got = pic.flags[id] & (uint8_t)~DRAWN;
        if (got != want[id]) {
            fprintf(stderr, "object %zu: drawn with flags %#x, the library says %#x\n", id, got,
                    want[id]);
        }
        CHECK_EQ_INT(got, want[id]);
        /* A hit is a candidate: the candidates are a superset of the hits. */
        if (pic.flags[id] & HIT) CHECK(pic.flags[id] & CANDIDATE);
        paired += (want[id] & IN_PAIR) != 0;
    }
    CHECK_EQ_INT(sum.paired_objects, paired);

done:
    free(text);
    free(hits);
    free(answer);
    free(want);
    free(pic.flags);
    free(ids);
    broadphase_destroy(w);
    scene_free(&s);
}

TEST(picture_2d_shows_the_library_answers) {
    /* shapes2d: boxes and circles in a square of side 50. */
    svg_options o = {
        .box_count = 4, .box = {15, 15, 30, 27}, .ray_count = 4, .ray = {1, 20, 1, 0.3f}};
    for (int m = 0; m < BROADPHASE_METHOD_COUNT; m++)
        check_picture(SCENE_SHAPES2D, 300, (broadphase_method)m, &o);
    svg_options bounded = {
        .box_count = 4, .box = {0, 0, 10, 50}, .ray_count = 5, .ray = {49, 1, -1, 1, 40}};
    for (int m = 0; m < BROADPHASE_METHOD_COUNT; m++)
        check_picture(SCENE_PLANE2D, 200, (broadphase_method)m, &bounded);
    svg_options plain = {.title = "no query"};
    for (int m = 0; m < BROADPHASE_METHOD_COUNT; m++)
        check_picture(SCENE_SHAPES2D, 150, (broadphase_method)m, &plain);
}

TEST(picture_3d_projects_onto_each_plane) {
    /* shapes: boxes and spheres in a cube of side 14.7. */
    for (int p = 0; p < 3; p++) {
        svg_options whole = {.plane = (svg_plane)p,
                             .box_count = 6,
                             .box = {3, 4, 5, 9, 10, 11},
                             .ray_count = 7,
                             .ray = {0, 7, 6, 1, 0.1f, 0.05f, 30}};
        for (int m = 0; m < BROADPHASE_METHOD_COUNT; m++)
            check_picture(SCENE_SHAPES, 250, (broadphase_method)m, &whole);
        /* A box given on the plane spans the objects along the third axis. */
        svg_options flat = {.plane = (svg_plane)p, .box_count = 4, .box = {5, 5, 9, 8}};
        for (int m = 0; m < BROADPHASE_METHOD_COUNT; m++)
            check_picture(SCENE_SHAPES, 250, (broadphase_method)m, &flat);
    }
}

TEST(empty_world_draws_an_empty_picture) {
    scene s;
    REQUIRE(scene_make(&s, SCENE_PLANE2D, 0, 1));
    broadphase_config cfg = broadphase_config_default(2);
    broadphase_world *w = NULL;
    CHECK_EQ_INT(broadphase_create(&cfg, &w), BROADPHASE_OK);
    CHECK_EQ_INT(broadphase_step(w, NULL), BROADPHASE_OK);
    svg_options o = {.box_count = 4, .box = {0, 0, 1, 1}};
    svg_summary sum;
    uint32_t no_ids[1] = {0};
    char *text = w ? write_to_text(w, &s, no_ids, &o, &sum) : NULL;
    CHECK(text != NULL);
    if (text) {
        picture pic = {.id_limit = 0};
        read_picture(text, &pic);
        CHECK_EQ_INT(pic.objects, 0);
        CHECK_EQ_INT(sum.hits, 0);
        CHECK(strstr(text, "nan") == NULL && strstr(text, "inf") == NULL);
    }
    free(text);
    broadphase_destroy(w);
    scene_free(&s);
}

TEST(options_parse_or_refuse) {
    svg_options o = {.box_count = 0};
    CHECK(svg_parse_box("1,2,3,4", &o) && o.box_count == 4 && o.box[3] == 4.0f);
    CHECK(svg_parse_box("-1.5,2,3e-1,4,5,6", &o) && o.box_count == 6 && o.box[0] == -1.5f);
    CHECK(svg_parse_box("0,0,0,0", &o)); /* a point is a box */
    const char *bad_boxes[] = {NULL,        "",          "1,2,3",      "1,2,3,4,5", "1,2,3,4,5,6,7",
                               "3,0,1,4",   "0,4,1,3",   "1,2,3,4,",   "1,,2,3",    "1;2;3;4",
                               "nan,0,1,1", "0,0,inf,1", "0,0,1e39,1", "1,2,3,4x"};
    for (size_t j = 0; j < sizeof bad_boxes / sizeof bad_boxes[0]; j++) {
        o.box_count = 0;
        CHECK(!svg_parse_box(bad_boxes[j], &o));
        CHECK_EQ_INT(o.box_count, 0); /* left alone */
    }
    CHECK(svg_parse_ray("0,0,1,0", &o) && o.ray_count == 4);
    CHECK(svg_parse_ray("0,0,1,0,0", &o) && o.ray_count == 5);
    CHECK(svg_parse_ray("0,0,0,1,0,0,2.5", &o) && o.ray_count == 7 && o.ray[6] == 2.5f);
    const char *bad_rays[] = {"0,0,1", "0,0,1,0,-1", "0,0,0,1,0,0,-2", "1,2,3,4,5,6,7,8",
                              "a",     "1,1,0,0",    "1,1,0,0,5",      "1,1,1,0,0,0"};
    for (size_t j = 0; j < sizeof bad_rays / sizeof bad_rays[0]; j++) {
        o.ray_count = 0;
        CHECK(!svg_parse_ray(bad_rays[j], &o));
        CHECK_EQ_INT(o.ray_count, 0);
    }
    svg_plane plane = SVG_PLANE_XY;
    CHECK(svg_parse_plane("yz", &plane) && plane == SVG_PLANE_YZ);
    CHECK(svg_parse_plane("xz", &plane) && plane == SVG_PLANE_XZ);
    CHECK(!svg_parse_plane("zx", &plane) && !svg_parse_plane(NULL, &plane));
    CHECK(plane == SVG_PLANE_XZ);
}

TEST_MAIN()
