/* chips.c - see chips.h. The file is long-form CSV (chip,field,value,source)
 * so a new field or chip needs no code change beyond the field list. */
#include <csv.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "atomic_file.h"
#include "chips.h"
#include "csvfile.h"
#include "numparse.h"
#include "probes.h"

#ifndef MQ_SOURCE_DIR
#define MQ_SOURCE_DIR "."
#endif

/* Every field (mq_chip_field_names) with the values it may take: limits that feed the planner
 * are integers, rates are positive and finite, caches may be 0 (unknown).
 * The bounds are wide (no chip is near them); they keep NaN, infinities and
 * absurd figures out of the arithmetic that uses them. */
static const struct {
    double lo, hi;
    int integral;
    int optional; /* missing: 0 */
} fields[MQ_CHIP_NFIELDS] = {
    [MQ_CHIP_GPU_CORES] = {1, 4096, 1, 0},
    [MQ_CHIP_TG_MEM_BYTES] = {1024, 1 << 20, 1, 0},
    [MQ_CHIP_MAX_THREADS_PER_TG] = {32, 4096, 1, 0},
    [MQ_CHIP_SIMD_WIDTH] = {1, 128, 1, 0},
    [MQ_CHIP_RESIDENT_TGS_PER_CORE] = {1, 1024, 1, 0},
    [MQ_CHIP_MEM_BW_GBS] = {0.001, 1e6, 0, 0},
    [MQ_CHIP_FP32_TFLOPS] = {1e-6, 1e5, 0, 0},
    [MQ_CHIP_FP16_TFLOPS] = {1e-6, 1e5, 0, 0},
    [MQ_CHIP_L2_BYTES] = {0, 1e13, 1, 0},
    [MQ_CHIP_SLC_BYTES] = {0, 1e13, 1, 0},
    [MQ_CHIP_TG_MEM_PER_CORE_BYTES] = {0, 1 << 24, 1, 1},
    [MQ_CHIP_MAX_THREADS_PER_CORE] = {0, 65536, 1, 1},
    [MQ_CHIP_TENSOR_FP16_TFLOPS] = {0, 1e5, 0, 1},
    [MQ_CHIP_ASYNC_COPY_STAGES] = {0, 5, 1, 1}, /* the prelude waits for 0-3 pending groups */
    [MQ_CHIP_DECODE_BW_REL] = {0, 1, 0, 1},
    [MQ_CHIP_PREFILL_REL] = {0, 1, 0, 1},
};

const char *mq_chips_default_path(void)
{
    const char *env = getenv("MQ_CHIPS");
    return env && *env ? env : MQ_SOURCE_DIR "/harness/chips.csv";
}

static mq_chip *chip_named(mq_chip_db *db, const char *name)
{
    for (int i = 0; i < db->n; i++)
        if (strcmp(db->chips[i].name, name) == 0)
            return &db->chips[i];
    mq_chip *c = realloc(db->chips, sizeof *c * (size_t)(db->n + 1));
    if (!c)
        return NULL;
    db->chips = c;
    memset(&c[db->n], 0, sizeof c[db->n]);
    snprintf(c[db->n].name, sizeof c[db->n].name, "%s", name);
    for (int f = 0; f < MQ_CHIP_NFIELDS; f++)
        c[db->n].v[f] = -1; /* missing */
    return &c[db->n++];
}

static int chip_index(const mq_chip_db *db, const char *name)
{
    for (int i = 0; i < db->n; i++)
        if (!strcmp(db->chips[i].name, name))
            return i;
    return -1;
}

/* A chip's name is a directory (results/NAME/) and part of C identifiers
 * (table.h's mq_table_NAME_rows), and the key a device name becomes is
 * lower case: lower-case letters, digits and '_' only. */
static int chip_name_ok(const char *s)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '_'))
            return 0;
    return 1;
}

/* One row's field of chip c: a text field (arch, like) or a figure, each
 * given once. -1 and the message on error. */
static int set_field(const char *path, const mq_csv_row *r, mq_chip *c, char *err, size_t errlen)
{
    const char *name = r->fields[0], *field = r->fields[1], *value = r->fields[2];
    char *text = !strcmp(field, "arch") ? c->arch : !strcmp(field, "like") ? c->like : NULL;
    if (text) { /* both are sizeof c->arch */
        if (text[0])
            snprintf(err, errlen, "%s:%d: %s of %s is given twice", path, r->line, field, name);
        else if (strlen(value) >= sizeof c->arch)
            snprintf(err, errlen, "%s:%d: %s of %s is longer than %zu characters", path, r->line,
                     field, name, sizeof c->arch - 1);
        else {
            snprintf(text, sizeof c->arch, "%s", value);
            return 0;
        }
        return -1;
    }
    int f = 0;
    while (f < MQ_CHIP_NFIELDS && strcmp(field, mq_chip_field_names[f]))
        f++;
    char why[160];
    if (f == MQ_CHIP_NFIELDS) {
        snprintf(err, errlen, "%s:%d: unknown field '%.40s'", path, r->line, field);
    } else if (c->v[f] >= 0) {
        snprintf(err, errlen, "%s:%d: %s of %s is given twice", path, r->line, field, name);
    } else if (mq_parse_double(value, fields[f].lo, fields[f].hi, &c->v[f], why, sizeof why) ||
               (fields[f].integral && c->v[f] != floor(c->v[f]) &&
                snprintf(why, sizeof why, "'%s' is not a whole number", value))) {
        c->v[f] = -1;
        snprintf(err, errlen, "%s:%d: %s of %s: %s", path, r->line, field, name, why);
    } else if (strlen(r->fields[3]) >= sizeof c->source[f]) {
        snprintf(err, errlen, "%s:%d: the source of %s of %s is longer than %zu characters", path,
                 r->line, field, name, sizeof c->source[f] - 1);
    } else {
        snprintf(c->source[f], sizeof c->source[f], "%s", r->fields[3]);
        return 0;
    }
    return -1;
}

/* The line of chip's like row (for messages: a chip's rows may be anywhere). */
static int like_line(const mq_csv_table *t, const char *chip)
{
    for (int i = 1; i < t->nrows; i++)
        if (!strcmp(t->rows[i].fields[0], chip) && !strcmp(t->rows[i].fields[1], "like"))
            return t->rows[i].line;
    return 0;
}

/* A cycle of likes as "PATH:LINE: a is like b, which is like a: a cycle",
 * from a chip on it (start) round to start. */
static void cycle_message(const char *path, const mq_csv_table *t, const mq_chip_db *db,
                          const int *base, int start, char *err, size_t errlen)
{
    size_t used = (size_t)snprintf(err, errlen, "%s:%d: %s", path,
                                   like_line(t, db->chips[start].name), db->chips[start].name);
    int i = start, first = 1;
    do {
        i = base[i];
        if (used < errlen)
            used += (size_t)snprintf(err + used, errlen - used, "%s like %s",
                                     first ? " is" : ", which is", db->chips[i].name);
        first = 0;
    } while (i != start);
    if (used < errlen)
        snprintf(err + used, errlen - used, ": a cycle");
}

/* Inheritance: a chip like another takes every figure (with its source)
 * and the arch it does not give itself from that chip, once that chip is
 * complete itself - so a chain resolves from its end whatever the order of
 * the rows. What never completes is on a cycle or leads into one. */
static int resolve_likes(const char *path, const mq_csv_table *t, mq_chip_db *db, char *err,
                         size_t errlen)
{
    int *base = malloc(sizeof *base * (size_t)(db->n + 1)), left = 0, rc = 0;
    char *done = calloc((size_t)db->n + 1, 1);
    if (!base || !done) {
        snprintf(err, errlen, "%s: out of memory", path);
        rc = -1;
    }
    for (int i = 0; rc == 0 && i < db->n; i++) {
        mq_chip *c = &db->chips[i];
        base[i] = c->like[0] ? chip_index(db, c->like) : -1;
        done[i] = !c->like[0];
        left += !done[i];
        if (c->like[0] && base[i] < 0) {
            snprintf(err, errlen, "%s:%d: %s is like '%s', which is not a chip of this file",
                     path, like_line(t, c->name), c->name, c->like);
            rc = -1;
        }
    }
    for (int progress = 1; rc == 0 && left && progress;) {
        progress = 0;
        for (int i = 0; i < db->n; i++) {
            if (done[i] || !done[base[i]])
                continue;
            mq_chip *c = &db->chips[i];
            const mq_chip *b = &db->chips[base[i]];
            for (int f = 0; f < MQ_CHIP_NFIELDS; f++)
                if (c->v[f] < 0 && b->v[f] >= 0) {
                    c->v[f] = b->v[f];
                    memcpy(c->source[f], b->source[f], sizeof c->source[f]);
                }
            if (!c->arch[0])
                memcpy(c->arch, b->arch, sizeof c->arch);
            done[i] = 1;
            left--;
            progress = 1;
        }
    }
    if (rc == 0 && left) { /* n steps from an unfinished chip end on its cycle */
        int i = 0;
        while (done[i])
            i++;
        for (int s = 0; s < db->n; s++)
            i = base[i];
        cycle_message(path, t, db, base, i, err, errlen);
        rc = -1;
    }
    free(base);
    free(done);
    return rc;
}

/* allow_host: a snapshot written by mq_chip_write may describe 'host' as
 * it was measured; the chips file itself may not. */
static int chips_load(const char *path, mq_chip_db *db, int allow_host, char *err, size_t errlen)
{
    memset(db, 0, sizeof *db);
    mq_csv_table t;
    if (mq_csv_read(path, &t, err, errlen))
        return -1;
    snprintf(db->path, sizeof db->path, "%s", path);
    int rc = 0;
    if (t.nrows == 0 || t.rows[0].nfields != 4 || strcmp(t.rows[0].fields[0], "chip") ||
        strcmp(t.rows[0].fields[1], "field")) {
        snprintf(err, errlen, "%s:%d: expected the header chip,field,value,source", path,
                 t.nrows ? t.rows[0].line : 1);
        rc = -1;
    }
    for (int i = 1; rc == 0 && i < t.nrows; i++) {
        mq_csv_row *r = &t.rows[i];
        if (r->nfields != 4) {
            snprintf(err, errlen, "%s:%d: expected 4 fields (chip,field,value,source), got %d",
                     path, r->line, r->nfields);
            rc = -1;
            break;
        }
        const char *name = r->fields[0];
        if (!chip_name_ok(name) || strlen(name) >= sizeof db->chips[0].name ||
            (!allow_host && !strcmp(name, "host"))) {
            snprintf(err, errlen, "%s:%d: bad chip name '%.40s'%s", path, r->line, name,
                     !strcmp(name, "host") ? " ('host' is measured, not described)"
                     : chip_name_ok(name)  ? " (longer than 31 characters)"
                                           : " (lower-case letters, digits and '_' only)");
            rc = -1;
            break;
        }
        mq_chip *c = chip_named(db, name);
        if (!c) {
            snprintf(err, errlen, "%s: out of memory", path);
            rc = -1;
            break;
        }
        c->is_host = !strcmp(name, "host");
        rc = set_field(path, r, c, err, errlen);
    }
    if (rc == 0)
        rc = resolve_likes(path, &t, db, err, errlen);
    for (int i = 0; rc == 0 && i < db->n; i++)
        for (int f = 0; f < MQ_CHIP_NFIELDS; f++)
            if (db->chips[i].v[f] < 0 && fields[f].optional) {
                db->chips[i].v[f] = 0;
                snprintf(db->chips[i].source[f], sizeof db->chips[i].source[f], "not given");
            } else if (db->chips[i].v[f] < 0) {
                snprintf(err, errlen, "%s: chip %s has no %s", path, db->chips[i].name,
                         mq_chip_field_names[f]);
                rc = -1;
                break;
            }
    mq_csv_free(&t);
    for (int i = 0; rc == 0 && i < db->n; i++)
        mq_chip_set_limits(&db->chips[i]);
    if (rc)
        mq_chips_free(db);
    return rc;
}

int mq_chips_load(const char *path, mq_chip_db *db, char *err, size_t errlen)
{
    return chips_load(path, db, 0, err, errlen);
}

int mq_chip_snapshot_load(const char *path, mq_chip *out, char *err, size_t errlen)
{
    mq_chip_db db;
    if (chips_load(path, &db, 1, err, errlen))
        return -1;
    int rc = 0;
    if (db.n != 1) {
        snprintf(err, errlen, "%s: expected one chip, found %d", path, db.n);
        rc = -1;
    } else {
        *out = db.chips[0];
    }
    mq_chips_free(&db);
    return rc;
}

int mq_chip_write(const char *path, const mq_chip *c, char *err, size_t errlen)
{
    char tmp[4200];
    FILE *f = mq_atomic_open(path, tmp, sizeof tmp, err, errlen);
    if (!f)
        return -1;
    fprintf(f, "# the chip %s as the tool saw it (the model's features depend on it)\n"
               "chip,field,value,source\n",
            c->name);
    if (c->arch[0])
        fprintf(f, "%s,arch,%s,chips file\n", c->name, c->arch);
    for (int i = 0; i < MQ_CHIP_NFIELDS; i++) {
        char v[64];
        snprintf(v, sizeof v, "%.10g", c->v[i]);
        const char *cells[4] = {c->name, mq_chip_field_names[i], v, c->source[i]};
        for (int j = 0; j < 4; j++) {
            csv_fwrite(f, cells[j], strlen(cells[j]));
            fputc(j == 3 ? '\n' : ',', f);
        }
    }
    return mq_atomic_commit(f, tmp, path, err, errlen);
}

void mq_chips_free(mq_chip_db *db)
{
    free(db->chips);
    memset(db, 0, sizeof *db);
}

int mq_chip_host(int threads, mq_chip *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "host");
    out->is_host = 1;
    mq_machine_probe mp = {0};
    if (!mq_probes_skip() && mq_probe_machine(threads, 0, 3, &mp))
        return -1;
    long l2 = mq_cache_bytes(2), l3 = mq_cache_bytes(3);
    static const struct {
        int f;
        const char *src;
    } srcs[] = {
        {MQ_CHIP_GPU_CORES, "measured: worker threads of the CPU model (one per core)"},
        {MQ_CHIP_TG_MEM_BYTES, "CPU model: the Apple budget, so candidates match the GPU's"},
        {MQ_CHIP_MAX_THREADS_PER_TG, "CPU model: the Apple limit"},
        {MQ_CHIP_SIMD_WIDTH, "CPU model: the Apple SIMD width"},
        {MQ_CHIP_RESIDENT_TGS_PER_CORE, "CPU model: a worker runs one threadgroup at a time"},
        {MQ_CHIP_MEM_BW_GBS, "measured: streaming-read probe, best of 3"},
        {MQ_CHIP_FP32_TFLOPS, "measured: FP32 FMA probe, best of 3"},
        {MQ_CHIP_FP16_TFLOPS, "CPU model: FP16 is converted to FP32, same peak"},
        {MQ_CHIP_L2_BYTES, "the OS: cpu0 cache level 2 (sysfs; sysctl hw.perflevel0.l2cachesize on macOS)"},
        {MQ_CHIP_SLC_BYTES, "the OS: cpu0 cache level 3 (sysfs; 0 on Apple Silicon, which reports none)"},
    };
    double v[MQ_CHIP_NFIELDS] = {
        [MQ_CHIP_GPU_CORES] = threads, [MQ_CHIP_TG_MEM_BYTES] = 32768,
        [MQ_CHIP_MAX_THREADS_PER_TG] = 1024, [MQ_CHIP_SIMD_WIDTH] = 32,
        [MQ_CHIP_RESIDENT_TGS_PER_CORE] = 1, [MQ_CHIP_MEM_BW_GBS] = mp.read_gbs,
        [MQ_CHIP_FP32_TFLOPS] = mp.fma_gflops / 1000, [MQ_CHIP_FP16_TFLOPS] = mp.fma_gflops / 1000,
        [MQ_CHIP_L2_BYTES] = l2 > 0 ? (double)l2 : 0, [MQ_CHIP_SLC_BYTES] = l3 > 0 ? (double)l3 : 0,
    };
    memcpy(out->v, v, sizeof v);
    for (size_t i = 0; i < sizeof srcs / sizeof srcs[0]; i++)
        snprintf(out->source[srcs[i].f], sizeof out->source[0], "%s",
                 mq_probes_skip() && !out->v[srcs[i].f] ? "not measured (--no-probes)"
                                                         : srcs[i].src);
    mq_chip_set_limits(out);
    return 0;
}

int mq_chip_find(const mq_chip_db *db, const char *name, int threads, mq_chip *out, char *err,
                 size_t errlen)
{
    if (name && !strcmp(name, "host")) {
        if (mq_chip_host(threads, out)) {
            snprintf(err, errlen, "could not measure the host (out of memory for the probes)");
            return -1;
        }
        return 0;
    }
    for (int i = 0; name && i < db->n; i++)
        if (!strcmp(db->chips[i].name, name)) {
            *out = db->chips[i];
            return 0;
        }
    size_t used = (size_t)snprintf(err, errlen, "unknown chip '%s' (known: host",
                                   name ? name : "(null)");
    for (int i = 0; i < db->n && used < errlen; i++)
        used += (size_t)snprintf(err + used, errlen - used, ", %s", db->chips[i].name);
    if (used < errlen)
        snprintf(err + used, errlen - used, ")");
    return -1;
}

int mq_chip_load_named(const char *path, const char *name, mq_chip *out, char *err,
                       size_t errlen)
{
    mq_chip_db db;
    if (mq_chips_load(path, &db, err, errlen))
        return -1;
    int rc = mq_chip_find(&db, name, 0, out, err, errlen);
    mq_chips_free(&db);
    return rc;
}

/* "Apple M4 Max" -> key "m4max", "NVIDIA H200" -> "h200": lower case, no
 * vendor, no spaces; first: the name's first word ("NVIDIA H100 80GB HBM3"
 * -> "h100": the chips file's row describes that part). */
static void device_keys(const char *device_name, char key[64], char first[64])
{
    size_t k = 0, k1 = 0;
    const char *s = device_name ? device_name : "";
    if (!strncmp(s, "Apple ", 6))
        s += 6;
    else if (!strncmp(s, "NVIDIA ", 7))
        s += 7;
    int in_first = 1;
    for (; *s && k + 1 < 64; s++) {
        char ch = (char)(*s >= 'A' && *s <= 'Z' ? *s - 'A' + 'a' : *s);
        if (*s == ' ') {
            in_first = 0;
            continue;
        }
        key[k++] = ch;
        if (in_first && k1 + 1 < 64)
            first[k1++] = ch;
    }
    key[k] = 0;
    first[k1] = 0;
}

/* What a device may be: the family of the chip its name matched (full >= 0:
 * that chip and the chips like it whose names start with key), else the
 * chips of its architecture name. */
typedef struct {
    int full;
    const char *key, *arch;
    const int *base; /* each chip's like as an index (-1: none) */
} family;

static int in_family(const mq_chip_db *db, int j, const family *f)
{
    if (f->full < 0)
        return f->arch && *f->arch && !strcmp(db->chips[j].arch, f->arch);
    if (strncmp(db->chips[j].name, f->key, strlen(f->key)))
        return 0;
    for (int steps = 0; j >= 0 && steps <= db->n; steps++) { /* up the chain of likes */
        if (j == f->full)
            return 1;
        j = f->base[j];
    }
    return 0;
}

/* The member of family f that is the device: the one with its core count,
 * or with the count unknown, the full part (by name) or the only full part
 * of the architecture. Messages list the members (and their counts), so
 * the user sees which row to add or which chip to name. */
static int pick_member(const mq_chip_db *db, const family *f, const char *dev, int cores,
                       mq_chip *out, char *err, size_t errlen)
{
    int found = -1, count = 0, members = 0;
    char names[512] = "", counts[512] = "", all[512] = "";
    for (int j = 0; j < db->n; j++) {
        if (!in_family(db, j, f))
            continue;
        const mq_chip *c = &db->chips[j];
        size_t l = strlen(counts), la = strlen(all);
        snprintf(counts + l, sizeof counts - l, "%s%s with %d", members ? ", " : "", c->name,
                 (int)c->v[MQ_CHIP_GPU_CORES]);
        snprintf(all + la, sizeof all - la, "%s%s", members++ ? ", " : "", c->name);
        if (cores > 0 ? c->v[MQ_CHIP_GPU_CORES] == cores : f->full >= 0 ? j == f->full
                                                                         : !c->like[0]) {
            l = strlen(names);
            snprintf(names + l, sizeof names - l, "%s%s", count++ ? ", " : "", c->name);
            found = j;
        }
    }
    if (count == 1) {
        *out = db->chips[found];
        return 0;
    }
    char what[200], cs[64] = "";
    if (f->full >= 0)
        snprintf(what, sizeof what, "device '%s'", dev);
    else
        snprintf(what, sizeof what, "device '%s' (%s)", dev,
                 f->arch && *f->arch ? f->arch : "no architecture name");
    if (cores > 0)
        snprintf(cs, sizeof cs, " has %d GPU cores", cores);
    const char *file = db->path[0] ? db->path : "the chips file";
    if (count > 1 || (members && cores <= 0))
        snprintf(err, errlen, "%s%s%s could be %s: name the chip with --chip", what, cs,
                 cs[0] ? ": it" : "", count ? names : all);
    else if (members)
        snprintf(err, errlen, "%s%s; %s has %s: add a row, or name a chip with --chip", what, cs,
                 file, counts);
    else
        snprintf(err, errlen, "%s is not in the chips file%s%s: add it, or name a chip with "
                              "--chip",
                 what, db->path[0] ? " " : "", db->path);
    return -1;
}

int mq_chip_from_device(const mq_chip_db *db, const char *device_name, const char *arch,
                        int gpu_cores, mq_chip *out, char *err, size_t errlen)
{
    char key[64], first[64];
    device_keys(device_name, key, first);
    const char *dev = device_name ? device_name : "";
    const char *keys[2] = {key, first};
    for (int pass = 0; pass < 2; pass++) {
        int full = keys[pass][0] ? chip_index(db, keys[pass]) : -1;
        if (full < 0)
            continue;
        /* the likes as indices once, so that a family costs n chain walks, not n*n lookups */
        int *base = malloc(sizeof *base * (size_t)(db->n + 1));
        if (!base) {
            snprintf(err, errlen, "device '%s': out of memory", dev);
            return -1;
        }
        for (int j = 0; j < db->n; j++)
            base[j] = db->chips[j].like[0] ? chip_index(db, db->chips[j].like) : -1;
        family f = {full, keys[pass], NULL, base};
        int rc = pick_member(db, &f, dev, gpu_cores, out, err, errlen);
        free(base);
        return rc;
    }
    family f = {-1, NULL, arch, NULL}; /* else the chips of the device's architecture name */
    return pick_member(db, &f, dev, gpu_cores, out, err, errlen);
}

void mq_chip_set_limits(mq_chip *c)
{
    c->lim = mq_limits_of_figures(c->v);
}

int mq_chip_has_binned_parts(const mq_chip_db *db, const char *full)
{
    for (int i = 0; i < db->n; i++)
        if (!strcmp(db->chips[i].like, full))
            return 1;
    return 0;
}
