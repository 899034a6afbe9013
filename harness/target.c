/* target.c - see target.h. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "measure.h"
#include "probes.h"
#include "target.h"

static void note(mq_target *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(mq_target *t, const char *fmt, ...)
{
    size_t used = strlen(t->notes);
    if (used + 2 >= sizeof t->notes)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->notes + used, sizeof t->notes - used - 1, fmt, ap);
    va_end(ap);
    used = strlen(t->notes);
    t->notes[used] = '\n';
    t->notes[used + 1] = '\0';
}

static int measure_host(mq_target *t, int threads, char *err, size_t errlen)
{
    if (threads < 1)
        threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    return mq_chip_find(NULL, "host", threads > 0 ? threads : 1, &t->chip, err, errlen);
}

/* "Apple M4 Max (32 GPU cores)", or the name alone where the system did not
 * tell the count: binned parts share the name, so the count says which. */
static const char *device_desc(const mq_backend *be, char *buf, size_t n)
{
    if (be->gpu_cores > 0)
        snprintf(buf, n, "%s (%d GPU cores)", be->device, be->gpu_cores);
    else
        snprintf(buf, n, "%s", be->device);
    return buf;
}

/* Where the device's chip was taken with its core count unknown, the note
 * says which part was assumed (a binned part would be another row). */
static void note_assumed(mq_target *t, const mq_chip_db *db, const mq_backend *be,
                         const mq_chip *dc)
{
    if (be->gpu_cores <= 0 && mq_chip_has_binned_parts(db, dc->name))
        note(t, "GPU core count unknown: assumed the %d-core %s", (int)dc->v[MQ_CHIP_GPU_CORES],
             dc->name);
}

/* tune: the first device backend that is the chip, else the CPU model; the
 * notes say why the chip is predicted. */
static int open_chip_backend(const mq_target_opts *o, const mq_chip_db *db, mq_target *t,
                             const mq_backend_opts *bo, char *err, size_t errlen)
{
    int host = !strcmp(o->chip, "host");
    for (int i = 0; !host && i < mq_backend_nkinds; i++) {
        const mq_backend_kind *k = &mq_backend_kinds[i];
        if (!strcmp(k->name, "cpu"))
            continue;
        mq_error e;
        mq_chip dc;
        char why[512];
        mq_backend *be = k->open(bo, &e);
        if (be && be->verify_only) { /* it times nothing: never a chip's measurements */
            mq_backend_close(be);
            continue;
        }
        if (!be) {
            note(t, "%s is predicted (%s: %s)", o->chip, k->name, e.msg);
            continue;
        }
        char desc[160];
        device_desc(be, desc, sizeof desc);
        int known =
            mq_chip_from_device(db, be->device, be->arch, be->gpu_cores, &dc, why, sizeof why) == 0;
        if (known && !strcmp(dc.name, o->chip)) {
            t->be = be;
            t->measured = 1;
            t->notes[0] = '\0';
            note(t, "measuring %s on %s (%s)", o->chip, k->name, desc);
            note_assumed(t, db, be, &dc);
            return 0;
        }
        if (known) {
            note(t, "%s is predicted (%s: the device, %s, is %s, not %s)", o->chip, k->name, desc,
                 dc.name, o->chip);
            note_assumed(t, db, be, &dc);
        } else {
            note(t, "%s is predicted (%s: %s)", o->chip, k->name, why);
        }
        mq_backend_close(be);
    }
    mq_error e;
    t->be = mq_backend_cpu_open(bo, &e);
    if (!t->be) {
        snprintf(err, errlen, "cpu: %s", e.msg);
        return -1;
    }
    t->measured = host;
    return 0;
}

/* bench: the backend asked for; on a device, the chip is the device's. */
static int open_any_backend(const mq_target_opts *o, const mq_chip_db *db, mq_target *t,
                            const mq_backend_opts *bo, char *err, size_t errlen)
{
    char passed[1024];
    mq_error e;
    t->be = mq_backend_open(o->backend ? o->backend : "auto", bo, passed, sizeof passed, &e);
    if (!t->be) {
        snprintf(err, errlen, "backend %s", e.msg);
        return -1;
    }
    if (passed[0])
        note(t, "%s", passed);
    if (t->be->verify_only) {
        t->measured = 0;
        note(t, "%s verifies %s's candidates (%s); it takes no times", t->be->name, o->chip,
             t->be->device);
        return 0;
    }
    if (!mq_backend_is_device(t->be)) {
        t->measured = !strcmp(o->chip, "host");
        if (!t->measured)
            note(t, "%s's candidate space timed on the CPU model: the times are the CPU's, not "
                    "%s's",
                 o->chip, o->chip);
        return 0;
    }
    mq_chip dc;
    char why[512], desc[160];
    device_desc(t->be, desc, sizeof desc);
    int known = mq_chip_from_device(db, t->be->device, t->be->arch, t->be->gpu_cores, &dc, why,
                                    sizeof why) == 0;
    if (!strcmp(o->chip, "host")) {
        if (!known) {
            snprintf(err, errlen, "%s: %s", t->be->name, why); /* names the device and file */
            return -1;
        }
        t->chip = dc;
        t->measured = 1;
        note(t, "%s on %s: chip %s", t->be->name, desc, dc.name);
        note_assumed(t, db, t->be, &dc);
    } else {
        t->measured = known && !strcmp(dc.name, o->chip);
        if (known && !t->measured) /* a binned part timed as its full part, say */
            note(t, "%s on %s, which is chip %s: the times are %s's, not %s's", t->be->name,
                 desc, dc.name, dc.name, o->chip);
        if (known)
            note_assumed(t, db, t->be, &dc);
    }
    return 0;
}

int mq_target_open(const mq_target_opts *o, mq_target *t, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    const char *name = o->chip ? o->chip : "host";
    mq_target_opts oo = *o;
    oo.chip = name;
    mq_chip_db db = {0};
    int host = !strcmp(name, "host"), rc = 0;
    struct stat sb;
    if (o->snapshot && stat(o->snapshot, &sb) == 0) {
        if (mq_chip_snapshot_load(o->snapshot, &t->chip, err, errlen))
            return -1;
        if (strcmp(t->chip.name, name)) {
            snprintf(err, errlen, "%s describes chip '%s', not '%s'", o->snapshot, t->chip.name,
                     name);
            return -1;
        }
        t->from_snapshot = 1;
    }
    /* the chips file: for a described chip, and to know what a device is */
    int need_db = (!host && !t->from_snapshot) || o->use != MQ_TARGET_NO_BACKEND;
    if (need_db && mq_chips_load(o->chips_path, &db, err, errlen))
        return -1;
    if (!host && !t->from_snapshot && mq_chip_find(&db, name, 0, &t->chip, err, errlen)) {
        mq_chips_free(&db);
        return -1;
    }
    mq_backend_opts bo = {o->threads};
    if (host && t->from_snapshot) { /* the snapshot's worker count, so times compare */
        int cores = (int)t->chip.v[MQ_CHIP_GPU_CORES];
        if (o->threads && o->threads != cores) {
            snprintf(err, errlen, "--threads %d differs from the %d workers of %s", o->threads,
                     cores, o->snapshot);
            mq_chips_free(&db);
            return -1;
        }
        bo.threads = cores;
    }
    if (o->use == MQ_TARGET_CHIP_BACKEND)
        rc = open_chip_backend(&oo, &db, t, &bo, err, errlen);
    else if (o->use == MQ_TARGET_ANY_BACKEND)
        rc = open_any_backend(&oo, &db, t, &bo, err, errlen);
    else
        t->measured = host;
    mq_chips_free(&db);
    /* host is this machine as measured now, on the backend's workers */
    if (rc == 0 && host && !t->from_snapshot && !mq_backend_is_device(t->be) &&
        !(t->be && t->be->verify_only))
        rc = measure_host(t, t->be ? t->be->threads : bo.threads, err, errlen);
    if (rc) {
        mq_target_close(t);
        return -1;
    }
    /* the chip's limits, narrowed once to the device's threadgroup memory
     * where it has less (every tool plans under t->chip.lim) */
    if (t->be && t->be->tg_mem_bytes > 0 && t->be->tg_mem_bytes < t->chip.lim.tg_mem_bytes) {
        note(t, "threadgroup memory: the device's %d bytes, not the %s row's %d",
             t->be->tg_mem_bytes, t->chip.name, t->chip.lim.tg_mem_bytes);
        t->chip.lim.tg_mem_bytes = t->be->tg_mem_bytes;
    }
    /* the CPU model's device is this host: its last-level cache, which its
     * sized read probe rotates copies past as the harness rotates weights */
    if (t->be && !t->be->cache_bytes && !mq_backend_is_device(t->be) && mq_cache_bytes(3) > 0)
        t->be->cache_bytes = (size_t)mq_cache_bytes(3);
    mq_bench_set_device_cache(t->be ? t->be->cache_bytes : 0);
    return 0;
}

void mq_target_print_notes(const mq_target *t, const char *tool)
{
    const char *s = t->notes;
    while (*s) {
        size_t n = strcspn(s, "\n");
        fprintf(stderr, "%s: %.*s\n", tool, (int)n, s);
        s += n + (s[n] == '\n');
    }
}

void mq_target_close(mq_target *t)
{
    mq_backend_close(t->be);
    t->be = NULL;
}
