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

/* allow_host: a snapshot written by mq_chip_write may describe 'host' as
 * it was measured; the chips file itself may not. */
static int chips_load(const char *path, mq_chip_db *db, int allow_host, char *err, size_t errlen)
{
    memset(db, 0, sizeof *db);
    mq_csv_table t;
    if (mq_csv_read(path, &t, err, errlen))
        return -1;
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
        const char *name = r->fields[0], *field = r->fields[1], *value = r->fields[2];
        if (!*name || strlen(name) >= sizeof db->chips[0].name ||
            (!allow_host && !strcmp(name, "host"))) {
            snprintf(err, errlen, "%s:%d: bad chip name '%s'%s", path, r->line, name,
                     strcmp(name, "host") ? "" : " ('host' is measured, not described)");
            rc = -1;
            break;
        }
        mq_chip *c = chip_named(db, name);
        if (c)
            c->is_host = !strcmp(name, "host");
        if (!c) {
            snprintf(err, errlen, "%s: out of memory", path);
            rc = -1;
            break;
        }
        if (!strcmp(field, "arch")) {
            if (strlen(value) >= sizeof c->arch) {
                snprintf(err, errlen, "%s:%d: arch of %s is longer than %zu characters", path,
                         r->line, name, sizeof c->arch - 1);
                rc = -1;
                break;
            }
            snprintf(c->arch, sizeof c->arch, "%s", value);
            continue;
        }
        int f = 0;
        while (f < MQ_CHIP_NFIELDS && strcmp(field, mq_chip_field_names[f]))
            f++;
        char why[160];
        if (f == MQ_CHIP_NFIELDS) {
            snprintf(err, errlen, "%s:%d: unknown field '%.40s'", path, r->line, field);
            rc = -1;
        } else if (c->v[f] >= 0) {
            snprintf(err, errlen, "%s:%d: %s of %s is given twice", path, r->line, field, name);
            rc = -1;
        } else if (mq_parse_double(value, fields[f].lo, fields[f].hi, &c->v[f], why,
                                   sizeof why) ||
                   (fields[f].integral && c->v[f] != floor(c->v[f]) &&
                    snprintf(why, sizeof why, "'%s' is not a whole number", value))) {
            c->v[f] = -1;
            snprintf(err, errlen, "%s:%d: %s of %s: %s", path, r->line, field, name, why);
            rc = -1;
        } else if (strlen(r->fields[3]) >= sizeof c->source[f]) {
            snprintf(err, errlen, "%s:%d: the source of %s of %s is longer than %zu characters",
                     path, r->line, field, name, sizeof c->source[f] - 1);
            rc = -1;
        } else {
            snprintf(c->source[f], sizeof c->source[f], "%s", r->fields[3]);
        }
    }
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
        {MQ_CHIP_L2_BYTES, "sysfs cpu0 cache, level 2 (per core)"},
        {MQ_CHIP_SLC_BYTES, "sysfs cpu0 cache, level 3 (the last-level cache)"},
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

int mq_chip_from_device(const mq_chip_db *db, const char *device_name, const char *arch,
                        mq_chip *out, char *err, size_t errlen)
{
    /* "Apple M4 Max" -> "m4max", "NVIDIA H200" -> "h200": lower case, no
     * vendor, no spaces; else the name's first word ("NVIDIA H100 80GB
     * HBM3" -> "h100": the chips file's row describes that part) */
    char key[64] = "", first[64] = "";
    size_t k = 0, k1 = 0;
    const char *s = device_name ? device_name : "";
    if (!strncmp(s, "Apple ", 6))
        s += 6;
    else if (!strncmp(s, "NVIDIA ", 7))
        s += 7;
    int in_first = 1;
    for (; *s && k + 1 < sizeof key; s++) {
        char ch = (char)(*s >= 'A' && *s <= 'Z' ? *s - 'A' + 'a' : *s);
        if (*s == ' ') {
            in_first = 0;
            continue;
        }
        key[k++] = ch;
        if (in_first && k1 + 1 < sizeof first)
            first[k1++] = ch;
    }
    key[k] = 0;
    first[k1] = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < db->n; i++)
            if ((pass ? k1 : k) && !strcmp(db->chips[i].name, pass ? first : key)) {
                *out = db->chips[i];
                return 0;
            }
    /* else the one chip with the device's architecture name */
    int found = -1, count = 0;
    char names[256] = "";
    for (int i = 0; arch && *arch && i < db->n; i++)
        if (!strcmp(db->chips[i].arch, arch)) {
            found = i;
            size_t l = strlen(names);
            snprintf(names + l, sizeof names - l, "%s%s", count++ ? ", " : "", db->chips[i].name);
        }
    if (count == 1) {
        *out = db->chips[found];
        return 0;
    }
    if (count > 1)
        snprintf(err, errlen, "device '%s' (%s) could be %s: name the chip with --chip",
                 device_name ? device_name : "", arch, names);
    else
        snprintf(err, errlen, "device '%s' (%s) is not in the chips file: add it, or name a chip "
                              "with --chip",
                 device_name ? device_name : "", arch && *arch ? arch : "no architecture name");
    return -1;
}

mq_limits mq_chip_limits(const mq_chip *c)
{
    return mq_limits_of_figures(c->v);
}
