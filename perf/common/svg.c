/* SVG pictures of a world (svg.h). What is drawn is what the library answers: the nodes of
 * broadphase_visit_nodes, the pairs of the last step, broadphase_query_box and its candidates,
 * broadphase_raycast; only the shapes come from the scene, which the library does not give back.
 * Pixels with two decimals and CSS classes instead of per-element styles keep the files small. */
#include "svg.h"

#include "broadphase.h"
#include "scenes.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

enum {
    SVG_MARGIN = 12,     /* pixels around the drawn area */
    SVG_LINE = 17,       /* caption line height */
    SVG_MIN_WIDTH = 720, /* room for the caption */
    SVG_CAPTION = 320    /* longest caption line, in bytes */
};

/* Per object (scene index): what the picture highlights. */
enum {
    SVG_PAIR = 1,
    SVG_CANDIDATE = 2,
    SVG_HIT = 4,
    SVG_RAY_HIT = 8,
    SVG_CLOSEST = 16,
};

/* Classes: an object's fill tells its part in the query (candidate, hit, ray hit), its outline
 * whether it is in a pair; the query and the ray are drawn over everything. */
static const char svg_style[] =
    "text{font-family:sans-serif;font-size:12px;fill:#222}\n"
    ".bg{fill:#fff}\n"
    ".cell{fill:none;stroke:#8d99ae;stroke-width:.7}\n"
    ".top{stroke:#5c677d;stroke-width:1.5}\n"
    ".sfield{fill:none;stroke:#2a9d8f;stroke-width:1;stroke-dasharray:5 3}\n"
    ".rfield{fill:none;stroke:#9c6644;stroke-width:1;stroke-dasharray:2 2}\n"
    ".obj{fill:#dde3ea;fill-opacity:.75;stroke:#5c677d;stroke-width:.6}\n"
    ".pair{fill:#fbe4e0;stroke:#d62828;stroke-width:1.2}\n"
    ".link{fill:none;stroke:#d62828;stroke-width:.8}\n"
    ".cand{fill:#ffd23f;fill-opacity:.9}\n"
    ".hit{fill:#7b2cbf}\n"
    ".rhit{fill:#48cae4;fill-opacity:.9}\n"
    ".closest{fill:#0077b6}\n"
    ".halo{fill:none;stroke:#fff;stroke-width:4}\n"
    ".query{fill:none;stroke:#7b2cbf;stroke-width:2;stroke-dasharray:6 3}\n"
    ".ray{stroke:#0077b6;stroke-width:1.5}\n"
    ".mark{fill:#0077b6}\n"
    ".first{fill:#d62828;stroke:#fff}\n";

bool svg_parse_plane(const char *text, svg_plane *out) {
    static const char *const names[] = {"xy", "xz", "yz"};
    for (int p = 0; p < 3; p++) {
        if (text && strcmp(text, names[p]) == 0) {
            *out = (svg_plane)p;
            return true;
        }
    }
    return false;
}

/* Up to `max` comma-separated finite numbers; false on anything else. */
static bool parse_numbers(const char *text, float *out, int max, int *count_out) {
    int n = 0;
    const char *p = text;
    if (!p || !*p) return false;
    for (;;) {
        if (n == max) return false;
        char *end;
        float v = strtof(p, &end); /* too large: infinity; too small: rounded, which is fine */
        if (end == p || !isfinite(v)) return false;
        out[n++] = v;
        if (*end == '\0') break;
        if (*end != ',') return false;
        p = end + 1;
    }
    *count_out = n;
    return true;
}

bool svg_parse_box(const char *text, svg_options *o) {
    float v[6];
    int n = 0;
    if (!parse_numbers(text, v, 6, &n) || (n != 4 && n != 6)) return false;
    int half = n / 2;
    for (int k = 0; k < half; k++) {
        if (v[k] > v[half + k]) return false;
    }
    memcpy(o->box, v, (size_t)n * sizeof *v);
    o->box_count = n;
    return true;
}

bool svg_parse_ray(const char *text, svg_options *o) {
    float v[7];
    int n = 0;
    if (!parse_numbers(text, v, 7, &n) || n < 4) return false;
    if ((n == 5 || n == 7) && v[n - 1] < 0.0f) return false;
    int d = n < 6 ? 2 : 3; /* the direction follows the origin's d values */
    bool moves = false;
    for (int k = 0; k < d; k++) moves |= v[d + k] != 0.0f;
    if (!moves) return false;
    memcpy(o->ray, v, (size_t)n * sizeof *v);
    o->ray_count = n;
    return true;
}

/* ---- gathering what the library says --------------------------------------------------------- */

typedef struct node_list {
    broadphase_node *data;
    size_t count, capacity;
    bool out_of_memory;
} node_list;

static bool collect_node(const broadphase_node *node, void *user) {
    node_list *l = user;
    if (l->count == l->capacity) {
        size_t cap = l->capacity ? l->capacity * 2 : 64;
        broadphase_node *p = realloc(l->data, cap * sizeof *p);
        if (!p) {
            l->out_of_memory = true;
            return false;
        }
        l->data = p;
        l->capacity = cap;
    }
    l->data[l->count] = *node;
    l->data[l->count++].ids = NULL; /* valid during the call only */
    return true;
}

typedef broadphase_status (*svg_box_query)(const broadphase_world *, const float[3], const float[3],
                                           uint32_t *, size_t, size_t *);

/* A box query's whole answer in a new array (freed by the caller, also on error). */
static broadphase_status query_ids(svg_box_query query, const broadphase_world *w,
                                   const float lo[3], const float hi[3], uint32_t **ids_out,
                                   size_t *count_out) {
    size_t n = 0;
    broadphase_status st = query(w, lo, hi, NULL, 0, &n);
    if (st != BROADPHASE_OK && st != BROADPHASE_ERROR_BUFFER_TOO_SMALL) return st;
    *ids_out = malloc((n ? n : 1) * sizeof **ids_out);
    if (!*ids_out) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    *count_out = n;
    return query(w, lo, hi, *ids_out, n, count_out);
}

static broadphase_status ray_hits(const broadphase_world *w, const float origin[3],
                                  const float dir[3], float max_t, broadphase_ray_hit **hits_out,
                                  size_t *count_out) {
    size_t n = 0;
    broadphase_status st = broadphase_raycast(w, origin, dir, max_t, NULL, 0, &n);
    if (st != BROADPHASE_OK && st != BROADPHASE_ERROR_BUFFER_TOO_SMALL) return st;
    *hits_out = malloc((n ? n : 1) * sizeof **hits_out);
    if (!*hits_out) return BROADPHASE_ERROR_OUT_OF_MEMORY;
    *count_out = n;
    return broadphase_raycast(w, origin, dir, max_t, *hits_out, n, count_out);
}

/* ---- drawing --------------------------------------------------------------------------------- */

/* The drawn area [lo, hi] (world units, on the plane's axes u and v) and where it lands. */
typedef struct canvas {
    FILE *f;
    int u, v;
    double lo[2], hi[2];
    double scale;     /* pixels per world unit */
    double left, top; /* pixel position of the area's corner (lo u, hi v): y grows downwards */
    double width, height;
} canvas;

static double px(const canvas *c, double u) {
    return c->left + (u - c->lo[0]) * c->scale;
}

static double py(const canvas *c, double v) {
    return c->top + (c->hi[1] - v) * c->scale;
}

static double clamp(double x, double lo, double hi) {
    return x < lo ? lo : x > hi ? hi : x;
}

/* Two decimals, trailing zeros dropped ("12.5", "3"), never "-0". */
static void put_num(FILE *f, double v) {
    char text[32];
    if (!(fabs(v) < 1e9)) v = v < 0.0 ? -1e9 : 1e9; /* NaN too: the picture stays valid */
    snprintf(text, sizeof text, "%.2f", v);
    size_t n = strlen(text);
    while (text[n - 1] == '0') n--;
    if (text[n - 1] == '.') n--;
    text[n] = '\0';
    fputs(strcmp(text, "-0") == 0 ? "0" : text, f);
}

static void put_attr(FILE *f, const char *name, double v) {
    fprintf(f, " %s=\"", name);
    put_num(f, v);
    fputc('"', f);
}

/* The world box [lo, hi] (plane coordinates) as a rect; `id` is omitted when NULL. */
static void put_rect(const canvas *c, const char *cls, const char *id, const double lo[2],
                     const double hi[2]) {
    fprintf(c->f, "<rect class=\"%s\"", cls);
    if (id) fprintf(c->f, " id=\"%s\"", id);
    put_attr(c->f, "x", px(c, lo[0]));
    put_attr(c->f, "y", py(c, hi[1]));
    put_attr(c->f, "width", (hi[0] - lo[0]) * c->scale);
    put_attr(c->f, "height", (hi[1] - lo[1]) * c->scale);
    fputs("/>\n", c->f);
}

static void put_text(FILE *f, double x, double y, const char *text) {
    fputs("<text", f);
    put_attr(f, "x", x);
    put_attr(f, "y", y);
    fputc('>', f);
    for (const char *p = text; *p; p++) {
        if (*p == '<') {
            fputs("&lt;", f);
        } else if (*p == '&') {
            fputs("&amp;", f);
        } else {
            fputc(*p, f);
        }
    }
    fputs("</text>\n", f);
}

static void grow(double lo[2], double hi[2], double u0, double v0, double u1, double v1) {
    lo[0] = fmin(lo[0], u0);
    lo[1] = fmin(lo[1], v0);
    hi[0] = fmax(hi[0], u1);
    hi[1] = fmax(hi[1], v1);
}

/* The plane coordinates of an object's centre. */
static void object_centre(const scene *s, size_t i, int u, int v, double out[2]) {
    if (s->is_sphere[i]) {
        out[0] = s->center[u][i];
        out[1] = s->center[v][i];
    } else {
        out[0] = 0.5 * ((double)s->min[u][i] + (double)s->max[u][i]);
        out[1] = 0.5 * ((double)s->min[v][i] + (double)s->max[v][i]);
    }
}

static void draw_nodes(const canvas *c, const node_list *nodes) {
    static const char *const classes[] = {[BROADPHASE_STRUCTURE_TREE] = "cell",
                                          [BROADPHASE_STRUCTURE_STATIC] = "sfield",
                                          [BROADPHASE_STRUCTURE_REST] = "rfield"};
    static const char prefixes[] = {[BROADPHASE_STRUCTURE_TREE] = 't',
                                    [BROADPHASE_STRUCTURE_STATIC] = 's',
                                    [BROADPHASE_STRUCTURE_REST] = 'r'};
    for (size_t j = 0; j < nodes->count; j++) {
        const broadphase_node *n = &nodes->data[j];
        /* Cells for the trees (the kd-tree's are unbounded outwards: clipped to the area),
         * bounds for the fields, which have no cells. An empty field node has nothing to draw. */
        const float *a = n->has_cell ? n->cell_min : n->bounds_min;
        const float *b = n->has_cell ? n->cell_max : n->bounds_max;
        if (!(a[c->u] <= b[c->u] && a[c->v] <= b[c->v])) continue;
        double lo[2], hi[2];
        for (int k = 0; k < 2; k++) {
            int axis = k == 0 ? c->u : c->v;
            lo[k] = clamp(a[axis], c->lo[k], c->hi[k]);
            hi[k] = clamp(b[axis], c->lo[k], c->hi[k]);
        }
        char id[16];
        snprintf(id, sizeof id, "%c%u", prefixes[n->structure], n->index);
        /* The first two levels' cells are drawn heavier, so that the division reads at once. */
        bool top = n->structure == BROADPHASE_STRUCTURE_TREE && n->depth <= 1;
        put_rect(c, top ? "cell top" : classes[n->structure], id, lo, hi);
    }
}

static void draw_object(const canvas *c, const scene *s, uint32_t object_id, size_t i,
                        uint8_t flags) {
    static const struct {
        uint8_t flag;
        const char *name;
    } extra[] = {{SVG_PAIR, " pair"},
                 {SVG_CANDIDATE, " cand"},
                 {SVG_HIT, " hit"},
                 {SVG_RAY_HIT, " rhit"},
                 {SVG_CLOSEST, " closest"}};
    char cls[64] = "obj", id[16];
    for (size_t e = 0; e < sizeof extra / sizeof extra[0]; e++) {
        if (flags & extra[e].flag) strcat(cls, extra[e].name);
    }
    snprintf(id, sizeof id, "o%u", object_id);
    if (s->is_sphere[i]) {
        double centre[2];
        object_centre(s, i, c->u, c->v, centre);
        fprintf(c->f, "<circle class=\"%s\" id=\"%s\"", cls, id);
        put_attr(c->f, "cx", px(c, centre[0]));
        put_attr(c->f, "cy", py(c, centre[1]));
        put_attr(c->f, "r", s->radius[i] * c->scale);
        fputs("/>\n", c->f);
    } else {
        const double lo[2] = {s->min[c->u][i], s->min[c->v][i]};
        const double hi[2] = {s->max[c->u][i], s->max[c->v][i]};
        put_rect(c, cls, id, lo, hi);
    }
}

static void draw_objects(const canvas *c, const scene *s, const uint32_t *ids,
                         const uint8_t *flags) {
    /* Plain objects first, then by their highest flag, so that the highlighted ones lie on top
     * (in 3D projections above all). */
    for (int rank = 0; rank <= 5; rank++) {
        for (size_t i = 0; i < s->count; i++) {
            int r = 0;
            for (unsigned f = flags[i]; f; f >>= 1) r++;
            if (r == rank) draw_object(c, s, ids[i], i, flags[i]);
        }
    }
}

/* Every pair's centres joined, in one path: the pairs need no element of their own. */
static void draw_links(const canvas *c, const scene *s, const uint32_t *index_of_id,
                       size_t id_limit, broadphase_pairs pairs) {
    if (pairs.count == 0) return;
    fputs("<path class=\"link\" d=\"", c->f);
    for (size_t p = 0; p < pairs.count; p++) {
        uint32_t a = pairs.data[p].a, b = pairs.data[p].b;
        if (a >= id_limit || b >= id_limit) continue;
        double ca[2], cb[2];
        object_centre(s, index_of_id[a], c->u, c->v, ca);
        object_centre(s, index_of_id[b], c->u, c->v, cb);
        fputc('M', c->f);
        put_num(c->f, px(c, ca[0]));
        fputc(' ', c->f);
        put_num(c->f, py(c, ca[1]));
        fputc('L', c->f);
        put_num(c->f, px(c, cb[0]));
        fputc(' ', c->f);
        put_num(c->f, py(c, cb[1]));
    }
    fputs("\"/>\n", c->f);
}

static void put_marker(const canvas *c, const char *cls, double u, double v, double r) {
    fprintf(c->f, "<circle class=\"%s\"", cls);
    put_attr(c->f, "cx", px(c, u));
    put_attr(c->f, "cy", py(c, v));
    put_attr(c->f, "r", r);
    fputs("/>\n", c->f);
}

/* One legend entry: a swatch drawn with the entry's classes, and its words. */
typedef struct legend_entry {
    const char *classes;
    bool circle;
    const char *words;
} legend_entry;

/* Lays the entries out in rows of the picture's width from (x0, y0); returns the rows used.
 * Draws only when `c` is not NULL, so that a first call measures. */
static int draw_legend(const canvas *c, const legend_entry *e, size_t count, double width,
                       double x0, double y0) {
    double x = x0;
    int rows = count ? 1 : 0;
    for (size_t j = 0; j < count; j++) {
        /* About 6.5 pixels per character at 12 px. */
        double w = 22.0 + 6.5 * (double)strlen(e[j].words) + 14.0;
        if (x + w > width - x0 && x > x0) {
            x = x0;
            rows++;
        }
        double y = y0 + (rows - 1) * SVG_LINE;
        if (c) {
            if (e[j].circle) {
                fprintf(c->f, "<circle class=\"%s\"", e[j].classes);
                put_attr(c->f, "cx", x + 7.0);
                put_attr(c->f, "cy", y - 4.0);
                put_attr(c->f, "r", 5.0);
            } else {
                fprintf(c->f, "<rect class=\"%s\"", e[j].classes);
                put_attr(c->f, "x", x);
                put_attr(c->f, "y", y - 10.0);
                put_attr(c->f, "width", 14.0);
                put_attr(c->f, "height", 12.0);
            }
            fputs("/>\n", c->f);
            put_text(c->f, x + 20.0, y, e[j].words);
        }
        x += w;
    }
    return rows;
}

/* ---- the picture ----------------------------------------------------------------------------- */

typedef struct svg_state {
    node_list nodes;
    uint32_t *index_of_id;
    uint8_t *flags;
    uint32_t *hits, *candidates;
    broadphase_ray_hit *ray;
} svg_state;

static void state_free(svg_state *st) {
    free(st->nodes.data);
    free(st->index_of_id);
    free(st->flags);
    free(st->hits);
    free(st->candidates);
    free(st->ray);
}

static void caption_numbers(char *out, size_t size, const char *what, const float *v, int n) {
    size_t used = (size_t)snprintf(out, size, "%s", what);
    for (int k = 0; k < n && used < size; k++)
        used += (size_t)snprintf(out + used, size - used, "%s%g", k ? ", " : "", (double)v[k]);
}

int svg_write(FILE *out, const broadphase_world *w, const scene *s, const uint32_t *ids,
              const svg_options *o, svg_summary *summary_out) {
    static const int axes[3][3] = {{0, 1, 2}, {0, 2, 1}, {1, 2, 0}}; /* u, v, the third */
    svg_summary sum = {.objects = s->count, .closest = UINT32_MAX, .closest_t = INFINITY};
    svg_state st = {.index_of_id = NULL};
    broadphase_status status = BROADPHASE_OK;
    int u = axes[o->plane][0], v = axes[o->plane][1], third = axes[o->plane][2];
    const size_t n = s->count;

    /* Ids to scene indices, for the pairs and the queries' answers. */
    size_t id_limit = 0;
    for (size_t i = 0; i < n; i++) {
        if ((size_t)ids[i] + 1 > id_limit) id_limit = (size_t)ids[i] + 1;
    }
    st.index_of_id = malloc((id_limit ? id_limit : 1) * sizeof *st.index_of_id);
    st.flags = calloc(n ? n : 1, 1);
    if (!st.index_of_id || !st.flags) {
        status = BROADPHASE_ERROR_OUT_OF_MEMORY;
        sum.failed_call = "malloc";
        goto done;
    }
    for (size_t id = 0; id < id_limit; id++) st.index_of_id[id] = UINT32_MAX;
    for (size_t i = 0; i < n; i++) st.index_of_id[ids[i]] = (uint32_t)i;
#define SVG_FLAG_(id, flag)                                                                        \
    do {                                                                                           \
        if ((id) < id_limit && st.index_of_id[id] != UINT32_MAX)                                   \
            st.flags[st.index_of_id[id]] |= (flag);                                                \
    } while (0)

    status = broadphase_visit_nodes(w, collect_node, &st.nodes);
    if (status == BROADPHASE_OK && st.nodes.out_of_memory) status = BROADPHASE_ERROR_OUT_OF_MEMORY;
    if (status != BROADPHASE_OK) {
        sum.failed_call = "broadphase_visit_nodes";
        goto done;
    }
    sum.nodes = st.nodes.count;
    broadphase_pairs pairs = broadphase_last_pairs(w);
    sum.pairs = pairs.count;
    for (size_t p = 0; p < pairs.count; p++) {
        SVG_FLAG_(pairs.data[p].a, SVG_PAIR);
        SVG_FLAG_(pairs.data[p].b, SVG_PAIR);
    }
    for (size_t i = 0; i < n; i++) sum.paired_objects += (st.flags[i] & SVG_PAIR) != 0;

    /* The objects' extent: the third axis of a 3D query given on the plane, and the drawn area
     * with the queries. Cells are clipped to it: the kd-tree's reach out to infinity, and the
     * octree's root may be twice the objects' size. */
    float ext_lo[3] = {0, 0, 0}, ext_hi[3] = {0, 0, 0};
    for (size_t i = 0; i < n; i++) {
        for (int k = 0; k < 3; k++) {
            ext_lo[k] = i == 0 || s->min[k][i] < ext_lo[k] ? s->min[k][i] : ext_lo[k];
            ext_hi[k] = i == 0 || s->max[k][i] > ext_hi[k] ? s->max[k][i] : ext_hi[k];
        }
    }
    double lo[2] = {INFINITY, INFINITY}, hi[2] = {-INFINITY, -INFINITY};
    if (n) grow(lo, hi, ext_lo[u], ext_lo[v], ext_hi[u], ext_hi[v]);

    float qlo[3], qhi[3];
    if (o->box_count) {
        bool full = o->box_count == 6;
        for (int k = 0; k < 3; k++) {
            qlo[k] = full ? o->box[k] : ext_lo[k];
            qhi[k] = full ? o->box[3 + k] : ext_hi[k];
        }
        if (!full) {
            qlo[u] = o->box[0], qlo[v] = o->box[1];
            qhi[u] = o->box[2], qhi[v] = o->box[3];
        }
        grow(lo, hi, qlo[u], qlo[v], qhi[u], qhi[v]);
        status = query_ids(broadphase_query_box, w, qlo, qhi, &st.hits, &sum.hits);
        if (status != BROADPHASE_OK) {
            sum.failed_call = "broadphase_query_box";
            goto done;
        }
        status = query_ids(broadphase_query_box_candidates, w, qlo, qhi, &st.candidates,
                           &sum.candidates);
        if (status != BROADPHASE_OK) {
            sum.failed_call = "broadphase_query_box_candidates";
            goto done;
        }
        for (size_t j = 0; j < sum.candidates; j++) SVG_FLAG_(st.candidates[j], SVG_CANDIDATE);
        for (size_t j = 0; j < sum.hits; j++) SVG_FLAG_(st.hits[j], SVG_HIT);
    }

    float origin[3] = {0, 0, 0}, dir[3] = {0, 0, 0}, max_t = INFINITY;
    if (o->ray_count) {
        if (o->ray_count >= 6) {
            memcpy(origin, o->ray, sizeof origin);
            memcpy(dir, o->ray + 3, sizeof dir);
            if (o->ray_count == 7) max_t = o->ray[6];
        } else {
            origin[u] = o->ray[0], origin[v] = o->ray[1];
            origin[third] = 0.5f * ext_lo[third] + 0.5f * ext_hi[third];
            dir[u] = o->ray[2], dir[v] = o->ray[3];
            if (o->ray_count == 5) max_t = o->ray[4];
        }
        grow(lo, hi, origin[u], origin[v], origin[u], origin[v]);
        if (isfinite(max_t)) {
            double eu = origin[u] + (double)max_t * dir[u], ev = origin[v] + (double)max_t * dir[v];
            grow(lo, hi, eu, ev, eu, ev);
        }
        status = ray_hits(w, origin, dir, max_t, &st.ray, &sum.ray_hits);
        if (status != BROADPHASE_OK) {
            sum.failed_call = "broadphase_raycast";
            goto done;
        }
        broadphase_ray_hit first;
        bool found = false;
        status = broadphase_raycast_closest(w, origin, dir, max_t, &first, &found);
        if (status != BROADPHASE_OK) {
            sum.failed_call = "broadphase_raycast_closest";
            goto done;
        }
        for (size_t j = 0; j < sum.ray_hits; j++) SVG_FLAG_(st.ray[j].id, SVG_RAY_HIT);
        if (found) {
            sum.closest = first.id;
            sum.closest_t = first.t;
            SVG_FLAG_(first.id, SVG_CLOSEST);
        }
    }
#undef SVG_FLAG_

    /* The area and its scale: the longer side gets size_px pixels; a flat side keeps a sliver. */
    if (!(lo[0] <= hi[0])) lo[0] = lo[1] = 0.0, hi[0] = hi[1] = 1.0;
    double span = fmax(hi[0] - lo[0], hi[1] - lo[1]);
    if (!(span > 0.0)) span = fmax(fmax(fabs(lo[0]), fabs(lo[1])) * 1e-3, 1.0);
    for (int k = 0; k < 2; k++) {
        double pad = 0.5 * fmax(0.02 * span - (hi[k] - lo[k]), 0.0);
        lo[k] -= pad;
        hi[k] += pad;
    }
    double size_px = o->size_px > 0.0 ? o->size_px : 800.0;
    canvas c = {.f = out, .u = u, .v = v, .lo = {lo[0], lo[1]}, .hi = {hi[0], hi[1]}};
    c.scale = size_px / span;
    double drawn_w = (hi[0] - lo[0]) * c.scale, drawn_h = (hi[1] - lo[1]) * c.scale;
    c.width = fmax(drawn_w + 2.0 * SVG_MARGIN, SVG_MIN_WIDTH);
    c.left = 0.5 * (c.width - drawn_w);

    /* The caption: what was drawn and the library's counts, then a legend of the colours. */
    static const char *const plane_names[] = {"xy", "xz", "yz"};
    char lines[4][SVG_CAPTION];
    int line_count = 0;
    snprintf(lines[line_count++], SVG_CAPTION, "%s%s%s", o->title ? o->title : "broadphase",
             s->dimensions == 3 ? ", projected onto " : "",
             s->dimensions == 3 ? plane_names[o->plane] : "");
    size_t per[3] = {0, 0, 0};
    for (size_t j = 0; j < st.nodes.count; j++) per[st.nodes.data[j].structure]++;
    char fields[96] = "";
    if (per[1] || per[2])
        snprintf(fields, sizeof fields,
                 " (%zu of the tree, %zu of the static field, %zu of the rest field)", per[0],
                 per[1], per[2]);
    snprintf(lines[line_count++], SVG_CAPTION,
             "%zu objects; %zu nodes%s; %zu pairs, among %zu objects", n, sum.nodes, fields,
             sum.pairs, sum.paired_objects);
    if (o->box_count) {
        char box[160];
        caption_numbers(box, sizeof box, "query box ", o->box, o->box_count);
        snprintf(lines[line_count++], SVG_CAPTION,
                 "%s: %zu candidates (the objects of the nodes it reaches), %zu hits", box,
                 sum.candidates, sum.hits);
    }
    if (o->ray_count) {
        char ray[160], first[80] = "";
        caption_numbers(ray, sizeof ray, "ray ", o->ray, o->ray_count);
        if (sum.closest != UINT32_MAX)
            snprintf(first, sizeof first, ", the first object %u at t = %g", sum.closest,
                     (double)sum.closest_t);
        snprintf(lines[line_count++], SVG_CAPTION, "%s: %zu hits%s", ray, sum.ray_hits, first);
    }
    legend_entry legend[10];
    size_t legend_count = 0;
    if (per[0]) legend[legend_count++] = (legend_entry){"cell", false, "tree cell"};
    if (per[1]) legend[legend_count++] = (legend_entry){"sfield", false, "static field node"};
    if (per[2]) legend[legend_count++] = (legend_entry){"rfield", false, "rest field node"};
    legend[legend_count++] = (legend_entry){"obj", false, "object"};
    if (sum.pairs) legend[legend_count++] = (legend_entry){"obj pair", false, "in a pair"};
    if (o->box_count) {
        legend[legend_count++] = (legend_entry){"obj cand", false, "candidate"};
        legend[legend_count++] = (legend_entry){"obj hit", false, "hit"};
    }
    if (o->ray_count) {
        legend[legend_count++] = (legend_entry){"obj rhit", false, "ray hit"};
        legend[legend_count++] = (legend_entry){"obj closest", false, "first ray hit"};
        legend[legend_count++] = (legend_entry){"mark first", true, "where the ray enters it"};
    }
    int legend_rows = draw_legend(NULL, legend, legend_count, c.width, SVG_MARGIN, 0.0);
    double header = SVG_MARGIN + (line_count + legend_rows) * SVG_LINE;
    c.top = header + SVG_MARGIN;
    c.height = c.top + drawn_h + SVG_MARGIN;

    fprintf(out, "<svg xmlns=\"http://www.w3.org/2000/svg\"");
    put_attr(out, "width", ceil(c.width));
    put_attr(out, "height", ceil(c.height));
    fprintf(out, " viewBox=\"0 0 ");
    put_num(out, ceil(c.width));
    fputc(' ', out);
    put_num(out, ceil(c.height));
    fprintf(out, "\">\n<style>\n%s</style>\n", svg_style);
    fputs("<rect class=\"bg\" width=\"100%\" height=\"100%\"/>\n", out);
    draw_nodes(&c, &st.nodes);
    draw_objects(&c, s, ids, st.flags);
    draw_links(&c, s, st.index_of_id, id_limit, pairs);
    if (o->box_count) {
        const double blo[2] = {qlo[u], qlo[v]}, bhi[2] = {qhi[u], qhi[v]};
        put_rect(&c, "halo", NULL, blo, bhi); /* keeps the box visible over its hits */
        put_rect(&c, "query", NULL, blo, bhi);
    }
    if (o->ray_count) {
        /* An endless ray is drawn to where it leaves the area. */
        double t_end = max_t;
        if (!isfinite(t_end)) {
            t_end = 0.0;
            bool first_axis = true;
            for (int k = 0; k < 2; k++) {
                int axis = k == 0 ? u : v;
                if (dir[axis] == 0.0f) continue;
                double t = ((dir[axis] > 0.0f ? c.hi[k] : c.lo[k]) - origin[axis]) / dir[axis];
                t_end = first_axis || t < t_end ? t : t_end;
                first_axis = false;
            }
            t_end = fmax(t_end, 0.0);
        }
        fputs("<line class=\"ray\"", out);
        put_attr(out, "x1", px(&c, origin[u]));
        put_attr(out, "y1", py(&c, origin[v]));
        put_attr(out, "x2", px(&c, origin[u] + t_end * dir[u]));
        put_attr(out, "y2", py(&c, origin[v] + t_end * dir[v]));
        fputs("/>\n", out);
        for (size_t j = 0; j < sum.ray_hits; j++) {
            double t = st.ray[j].t;
            put_marker(&c, j == 0 ? "mark first" : "mark", origin[u] + t * dir[u],
                       origin[v] + t * dir[v], j == 0 ? 4.5 : 2.5);
        }
    }
    for (int l = 0; l < line_count; l++)
        put_text(out, SVG_MARGIN, SVG_MARGIN + (l + 1) * SVG_LINE - 4.0, lines[l]);
    draw_legend(&c, legend, legend_count, c.width, SVG_MARGIN,
                SVG_MARGIN + (line_count + 1) * SVG_LINE - 4.0);
    fputs("</svg>\n", out);

done:
    state_free(&st);
    if (summary_out) *summary_out = sum;
    return (int)status;
}
