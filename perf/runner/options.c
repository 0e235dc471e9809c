/* The runner's command line (runner.h): every option, its default and its range. */
#include "runner.h"

#include "crowd_run.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const update_names[] = {
    [BROADPHASE_UPDATE_AUTO] = "auto",
    [BROADPHASE_UPDATE_REBUILD] = "rebuild",
    [BROADPHASE_UPDATE_REFIT] = "refit",
};

const char *runner_update_name(broadphase_update_policy update) {
    return update_names[update];
}

static void usage(FILE *out) {
    fprintf(out, "usage: broadphase-run [options]\n"
                 "  --scene NAME          scene to build (default moving):\n"
                 "                        ");
    for (int k = 0; k < SCENE_KIND_COUNT; k++) {
        fprintf(out, "%s%s", scene_name((scene_kind)k), k + 1 < SCENE_KIND_COUNT ? " " : "\n");
    }
    fprintf(out,
            "  --n N                 objects (default 100000; 1e6 is accepted)\n"
            "  --frames F            frames to step (default 100)\n"
            "  --method M            a method of the library's list, or auto (the chooser), or a\n"
            "                        prefix that names one alone (default kdtree): ");
    for (int m = 0; m < BROADPHASE_METHOD_COUNT; m++)
        fprintf(out, "%s | ", broadphase_method_name((broadphase_method)m));
    fprintf(out, "%s\n", broadphase_method_name(BROADPHASE_METHOD_AUTO));
    fprintf(
        out,
        "  --threads T           worker threads, 0 = all hardware threads (default 0)\n"
        "  --update U            auto | rebuild | refit (default auto)\n"
        "  --seed S              scene seed (default 1)\n"
        "  --leaf-size L         kd-tree leaf capacity; octree: a node splits above L objects\n"
        "                        (default: the library's)\n"
        "  --max-depth D         tree depth limit, root = 0 (default: the library's)\n"
        "  --rebuild-threshold X AUTO rebuild factor (default: the library's)\n"
        "  --looseness F         octree cell enlargement, 1 = strict (default: the library's,\n"
        "                        1.5); passed to the library as is, which accepts 1..4\n"
        "  --check               compare every frame with brute force; exit 1 on a difference\n"
        "  --check-full-limit N  up to N objects the check steps a second, brute-force world\n"
        "                        and compares everything (default %d); above, it samples\n"
        "  --check-sample K      objects per frame whose pairs the sampled check recomputes\n"
        "                        with the exact predicates (default 1000)\n"
        "  --quiet               no per-frame lines\n"
        "  --events              pair events on (config.pair_events; their merge is part of\n"
        "                        the step): counts of pairs begun and ended are printed\n"
        "  --verbose             per-frame lines even for more than %d frames, and --levels\n"
        "  --levels              after the summary, the tree level by level as of the last\n"
        "                        step: nodes, leaves and objects held at each depth\n"
        "  --svg FILE            after the run, an SVG picture of the world as the last\n"
        "                        step left it (with --frames 0, after one step): the tree's\n"
        "                        cells, the static and rest fields' node bounds, the objects\n"
        "                        (those in a pair outlined in red, joined centre to centre)\n"
        "                        and a caption; meant for up to a few thousand objects\n"
        "  --svg-box X0,Y0,X1,Y1 a box query in the picture: the box, its candidates (the\n"
        "                        objects of the nodes it reaches) and its hits. 3D: either\n"
        "                        X0,Y0,Z0,X1,Y1,Z1, or 4 numbers on the --svg-plane's axes,\n"
        "                        the box then spanning the objects along the third axis\n"
        "  --svg-ray OX,OY,DX,DY[,MAX_T]\n"
        "                        a ray in the picture: its hits, where it enters each, the\n"
        "                        first marked; endless without MAX_T. 3D: OX,OY,OZ,DX,DY,DZ\n"
        "                        [,MAX_T], or 4 or 5 numbers on the plane's axes, the origin\n"
        "                        then halfway through the objects along the third axis\n"
        "  --svg-plane P         xy | xz | yz: the plane a 3D world is projected onto, along\n"
        "                        the third axis (default xy; 2D scenes: xy only)\n"
        "  --soak                the soak (moving scene, 3D): every frame 1%% of the objects\n"
        "                        removed and added again, 0.1%% teleported, 0.05%% made static\n"
        "                        or not, 0.05%% given a new filter, events on; pairs checked\n"
        "                        against brute force for --soak-sample objects every frame and\n"
        "                        in full every 1000 frames, when memory (bytes in use, resident)\n"
        "                        is sampled: after frame 1000 it must stay within 5%%. Exit 1\n"
        "                        on a difference or a drift. Uses --n, --frames, --method,\n"
        "                        --update, --threads, --seed, --quiet\n"
        "  --crowd               a crowd instead of a scene: --n agents in a disc walking\n"
        "                        through its middle to the opposite side and back (0.5 a\n"
        "                        frame), each frame every agent's k nearest others within the\n"
        "                        neighbour distance found by each route (rows: step and\n"
        "                        broadphase_neighbours; balls: update and query_spheres;\n"
        "                        nearest: update and nearest_many_within; seed: the seed's\n"
        "                        array kd-tree), the routes compared with one another (and\n"
        "                        with brute force on 1000 agents with --check), their times\n"
        "                        summarised; --svg draws the last frame. Uses --n, --frames,\n"
        "                        --threads, --seed, --check, --svg, --quiet\n"
        "  --crowd-route R       rows | balls | nearest | neighbourhoods | seed; repeat for\n"
        "                        several (default all five)\n"
        "  --crowd-dims D        2 or 3 (default 2)\n"
        "  --crowd-k K           neighbours kept (default 10)\n"
        "  --crowd-distance R    neighbour distance (default 15)\n"
        "  --crowd-density P     agents within R of one, on average (default 20)\n"
        "  --fixed-threads       every step on all --threads, even while other work takes\n"
        "                        cores (config.fixed_threads; default: fewer then)\n"
        "  --load K              K processes spinning beside the run (other work taking the\n"
        "                        cores), from before the world is made to after the last\n"
        "                        frame (default 0)\n"
        "  --gauge               after every step, the host gauge (perf/common/machine.h): the "
        "same\n"
        "                        fixed work on --threads threads, timed; a column, and in\n"
        "                        the summary how steady the host kept it\n"
        "  --soak-sample K       objects checked per frame in the soak (default 16)\n"
        "  --soak-csv FILE       the soak's memory and step figures every 1000 frames, as CSV\n"
        "  --help                this text\n"
        "exit status: 0 on success; 1 on a failed --check (the first difference is named on\n"
        "stderr) or a library error; 2 on a bad option or a configuration the library\n"
        "refuses\n",
        RUNNER_FULL_CHECK_LIMIT, RUNNER_PER_FRAME_LINES_MAX);
}

static bool parse_count(const char *text, size_t max, size_t *out) {
    if (!text || !*text || *text == '-') return false;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (*end != '\0') {
        /* Scientific notation for counts ("1e6") when it names a whole number. */
        double d = strtod(text, &end);
        if (*end != '\0' || !(d >= 0.0) || d > (double)max || d != floor(d)) return false;
        v = (unsigned long long)d;
    }
    if (errno || v > max) return false;
    *out = (size_t)v;
    return true;
}

static bool parse_int(const char *text, int lo, int hi, int *out) {
    size_t v;
    if (!parse_count(text, (size_t)hi, &v) || (long long)v < lo) return false;
    *out = (int)v;
    return true;
}

static bool parse_name(const char *text, const char *const *names, int count, int *out) {
    for (int i = 0; i < count; i++) {
        if (text && strcmp(text, names[i]) == 0) {
            *out = i;
            return true;
        }
    }
    return false;
}

/* A method by its name in the library's list or "auto", or by a prefix that only one name
 * starts with ("brute" for brute_force). */
static bool parse_method(const char *text, broadphase_method *out) {
    if (!text || !*text) return false;
    int found = -1, matches = 0;
    for (int i = 0; i <= BROADPHASE_METHOD_COUNT; i++) {
        int m = i < BROADPHASE_METHOD_COUNT ? i : BROADPHASE_METHOD_AUTO;
        const char *name = broadphase_method_name((broadphase_method)m);
        if (strcmp(text, name) == 0) {
            *out = (broadphase_method)m;
            return true;
        }
        if (strncmp(text, name, strlen(text)) == 0) {
            found = m;
            matches++;
        }
    }
    if (matches != 1) return false;
    *out = (broadphase_method)found;
    return true;
}

int runner_parse_options(int argc, char **argv, options *o) {
    *o = (options){.scene = SCENE_MOVING,
                   .count = 100000,
                   .frames = 100,
                   .method = BROADPHASE_METHOD_KDTREE,
                   .update = BROADPHASE_UPDATE_AUTO,
                   .seed = 1,
                   .check_sample = 1000,
                   .soak_sample = 16,
                   .crowd_dims = 2,
                   .crowd_k = 10,
                   .crowd_distance = 15.0f,
                   .crowd_density = 20.0f,
                   .check_full_limit = RUNNER_FULL_CHECK_LIMIT};
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            usage(stdout);
            return 1;
        }
        if (strcmp(arg, "--check") == 0) {
            o->check = true;
            continue;
        }
        if (strcmp(arg, "--quiet") == 0) {
            o->quiet = true;
            continue;
        }
        if (strcmp(arg, "--events") == 0) {
            o->events = true;
            continue;
        }
        if (strcmp(arg, "--verbose") == 0) {
            o->verbose = true;
            o->levels = true;
            continue;
        }
        if (strcmp(arg, "--gauge") == 0) {
            o->gauge = true;
            continue;
        }
        if (strcmp(arg, "--fixed-threads") == 0) {
            o->fixed_threads = true;
            continue;
        }
        if (strcmp(arg, "--crowd") == 0) {
            o->crowd = true;
            continue;
        }
        if (strcmp(arg, "--soak") == 0) {
            o->soak = true;
            continue;
        }
        if (strcmp(arg, "--levels") == 0) {
            o->levels = true;
            continue;
        }
        /* Every other option takes a value, as "--opt value" or "--opt=value". */
        char name[32];
        const char *value;
        const char *eq = strchr(arg, '=');
        if (eq && (size_t)(eq - arg) < sizeof name) {
            memcpy(name, arg, (size_t)(eq - arg));
            name[eq - arg] = '\0';
            value = eq + 1;
        } else {
            snprintf(name, sizeof name, "%s", arg);
            value = i + 1 < argc ? argv[++i] : NULL;
        }
        bool ok;
        int choice = 0;
        size_t big = 0;
        if (strcmp(name, "--scene") == 0) {
            ok = scene_parse(value, &o->scene);
        } else if (strcmp(name, "--n") == 0) {
            ok = parse_count(value, UINT32_MAX - 1, &o->count);
        } else if (strcmp(name, "--frames") == 0) {
            ok = parse_count(value, SIZE_MAX / 64, &o->frames);
        } else if (strcmp(name, "--method") == 0) {
            ok = parse_method(value, &o->method);
        } else if (strcmp(name, "--update") == 0) {
            ok = parse_name(value, update_names, 3, &choice);
            o->update = (broadphase_update_policy)choice;
        } else if (strcmp(name, "--threads") == 0) {
            ok = parse_int(value, 0, 1024, &o->threads);
        } else if (strcmp(name, "--seed") == 0) {
            ok = parse_count(value, SIZE_MAX, &big);
            o->seed = big;
        } else if (strcmp(name, "--leaf-size") == 0) {
            ok = parse_int(value, 1, 4096, &o->leaf_size);
        } else if (strcmp(name, "--max-depth") == 0) {
            ok = parse_int(value, 1, 64, &o->max_depth);
        } else if (strcmp(name, "--rebuild-threshold") == 0) {
            char *end = NULL;
            o->rebuild_threshold = value ? strtof(value, &end) : 0.0f;
            ok = value && *value && *end == '\0' && o->rebuild_threshold >= 1.0f &&
                 o->rebuild_threshold <= 1000.0f;
        } else if (strcmp(name, "--looseness") == 0) {
            /* Any number is passed on: the range is the library's to enforce (and report). */
            char *end = NULL;
            o->looseness = value ? strtof(value, &end) : 0.0f;
            o->looseness_set = ok = value && *value && *end == '\0';
        } else if (strcmp(name, "--check-full-limit") == 0) {
            ok = parse_count(value, SIZE_MAX, &o->check_full_limit);
        } else if (strcmp(name, "--svg") == 0) {
            o->svg_path = value;
            ok = value && *value;
        } else if (strcmp(name, "--svg-box") == 0) {
            ok = svg_parse_box(value, &o->svg);
        } else if (strcmp(name, "--svg-ray") == 0) {
            ok = svg_parse_ray(value, &o->svg);
        } else if (strcmp(name, "--svg-plane") == 0) {
            o->svg_plane_set = ok = svg_parse_plane(value, &o->svg.plane);
        } else if (strcmp(name, "--crowd-route") == 0) {
            const char *routes[CROWD_ROUTES];
            for (int q = 0; q < CROWD_ROUTES; q++) routes[q] = crowd_route_name((crowd_route)q);
            ok = parse_name(value, routes, CROWD_ROUTES, &choice);
            if (ok) o->crowd_routes[choice] = o->crowd_routes_set = true;
        } else if (strcmp(name, "--crowd-dims") == 0) {
            ok = parse_int(value, 2, 3, &o->crowd_dims);
        } else if (strcmp(name, "--crowd-k") == 0) {
            ok = parse_count(value, 1024, &o->crowd_k) && o->crowd_k > 0;
        } else if (strcmp(name, "--crowd-distance") == 0 || strcmp(name, "--crowd-density") == 0) {
            char *end = NULL;
            float v = value ? strtof(value, &end) : 0.0f;
            ok = value && *value && *end == '\0' && v > 0.0f && isfinite(v);
            *(strcmp(name, "--crowd-distance") == 0 ? &o->crowd_distance : &o->crowd_density) = v;
        } else if (strcmp(name, "--load") == 0) {
            ok = parse_int(value, 0, 64, &o->load);
        } else if (strcmp(name, "--soak-sample") == 0) {
            ok = parse_count(value, 1u << 20, &o->soak_sample);
        } else if (strcmp(name, "--soak-csv") == 0) {
            ok = value != NULL;
            o->soak_csv = value;
        } else if (strcmp(name, "--check-sample") == 0) {
            ok = parse_count(value, SIZE_MAX, &o->check_sample) && o->check_sample > 0;
        } else {
            fprintf(stderr, "broadphase-run: unknown option '%s' (see --help)\n", arg);
            return 2;
        }
        if (!ok) {
            fprintf(stderr, "broadphase-run: bad or missing value for %s%s%s (see --help)\n", name,
                    value ? ": " : "", value ? value : "");
            return 2;
        }
    }
    if (!o->svg_path && (o->svg.box_count || o->svg.ray_count || o->svg_plane_set)) {
        fprintf(stderr, "broadphase-run: --svg-box, --svg-ray and --svg-plane need --svg FILE\n");
        return 2;
    }
    return 0;
}

broadphase_config runner_config(const options *o, int dimensions) {
    broadphase_config cfg = broadphase_config_default(dimensions);
    cfg.method = o->method;
    cfg.update = o->update;
    cfg.threads = o->threads;
    if (o->leaf_size) cfg.leaf_size = o->leaf_size;
    if (o->max_depth) cfg.max_depth = o->max_depth;
    if (o->rebuild_threshold > 0.0f) cfg.rebuild_threshold = o->rebuild_threshold;
    if (o->looseness_set) cfg.looseness = o->looseness;
    cfg.initial_capacity = o->count;
    cfg.pair_events = o->events;
    cfg.fixed_threads = o->fixed_threads;
    return cfg;
}
