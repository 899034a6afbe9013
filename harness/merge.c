/* merge.c - see merge.h. */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "merge.h"
#include "results.h"
#include "shard.h"

typedef struct {
    const mq_result *r;
    int input, order; /* the input it came from; its place among all rows */
    int dropped;
} entry;

static int by_key_then_order(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    int c = mq_result_key_cmp(x->r, y->r);
    return c ? c : (x->order > y->order) - (x->order < y->order);
}

static int by_order(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    return (x->order > y->order) - (x->order < y->order);
}

/* The first pair of rows that differ in what they must share (the build,
 * or the schema): 1 and the two rows' inputs, else 0. */
/* Results schemas that mean the same per column: 2 is 1 plus idle_s, 3 is 2
 * plus kernel_build, so their rows merge (the output is schema 3; a row of
 * an older schema keeps its number and its columns stay empty). */
static int schema_family(int schema)
{
    return schema <= 3 ? 1 : schema;
}

static int differ(const entry *e, int n, int schema, int *i0, int *i1)
{
    for (int i = 1; i < n; i++) {
        const mq_result *a = e[0].r, *b = e[i].r;
        int d = schema ? schema_family(a->schema) != schema_family(b->schema)
                       : strcmp(a->tool_version, b->tool_version) || strcmp(a->git_rev, b->git_rev);
        if (d) {
            *i0 = 0;
            *i1 = i;
            return 1;
        }
    }
    return 0;
}

/* The rows a unit accounts for among the kept rows (in key order): rows of
 * its chip, backend and problem, and of its candidate unless the unit is a
 * whole problem. */
static int unit_rows(const entry *kept, int n, const char *chip, const char *backend,
                     const mq_work_unit *u)
{
    mq_result k;
    memset(&k, 0, sizeof k);
    snprintf(k.chip, sizeof k.chip, "%s", chip);
    snprintf(k.backend, sizeof k.backend, "%s", backend);
    k.p = u->p;
    k.c = u->c;
    int (*cmp)(const mq_result *, const mq_result *) =
        u->whole ? mq_result_problem_cmp : mq_result_key_cmp;
    int lo = 0, hi = n;
    while (lo < hi) { /* the first row not before the unit */
        int mid = lo + (hi - lo) / 2;
        if (cmp(kept[mid].r, &k) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    int rows = 0;
    while (lo + rows < n && cmp(kept[lo + rows].r, &k) == 0)
        rows++;
    return rows;
}

static void describe_unit(const mq_work_unit *u, char *buf, size_t n)
{
    char c[128] = "every candidate the tuner times";
    if (!u->whole)
        mq_candidate_str(&u->c, c, sizeof c);
    snprintf(buf, n, "%s M=%d N=%d K=%d group %d, %s", mq_format_name(u->p.format), u->p.M,
             u->p.N, u->p.K, u->p.group, c);
}

typedef struct {
    uint64_t id;
    int shard, at; /* at: the manifest's place among ms */
} mkey;

static int by_sweep_shard(const void *a, const void *b)
{
    const mkey *x = a, *y = b;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    if (x->shard != y->shard)
        return x->shard < y->shard ? -1 : 1;
    return (x->at > y->at) - (x->at < y->at);
}

/* Two manifests of one sweep that cannot both be its writer's: they
 * disagree on what the sweep is (its shard count, kind, chip, backend or
 * unit count), or hold one shard with different units. A message naming
 * both files, or NULL. */
static int disagree(const mq_manifest *a, const mq_manifest *b, char *err, size_t errlen)
{
    const char *what = a->nshards != b->nshards            ? "its shard count"
                       : strcmp(a->kind, b->kind)          ? "its kind (bench or tune)"
                       : strcmp(a->chip, b->chip)          ? "its chip"
                       : strcmp(a->backend, b->backend)    ? "its backend"
                       : a->sweep_units != b->sweep_units  ? "its unit count"
                       : a->shard == b->shard &&
                               (a->n != b->n ||
                                memcmp(a->u, b->u, sizeof *a->u * (size_t)a->n))
                           ? "the units of a shard both hold"
                           : NULL;
    if (what)
        snprintf(err, errlen, "%s (shard %d of %d, %s, chip %s, backend %s, %d units) and %s "
                              "(shard %d of %d, %s, chip %s, backend %s, %d units): manifests "
                              "of sweep %016llx that disagree on %s",
                 a->path, a->shard, a->nshards, a->kind, a->chip, a->backend, a->n, b->path,
                 b->shard, b->nshards, b->kind, b->chip, b->backend, b->n,
                 (unsigned long long)a->id, what);
    return what != NULL;
}

/* Every sweep's manifests among the inputs agree (disagree() above), and
 * a sweep with every shard here has, over its shards, the units its
 * comment lines count. A shard given twice with the same units (rerun on
 * another machine) is fine: its rows are duplicates, handled as such.
 * Checked before anything is reported, so a bad set is one error. 0, or -1
 * with the message. */
static int check_manifests(const mq_manifest *ms, int nm, char *err, size_t errlen)
{
    mkey *k = malloc(sizeof *k * (size_t)(nm ? nm : 1));
    if (!k) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int i = 0; i < nm; i++)
        k[i] = (mkey){ms[i].id, ms[i].shard, i};
    qsort(k, (size_t)nm, sizeof *k, by_sweep_shard);
    int rc = 0;
    for (int g = 0, e; g < nm && rc == 0; g = e) {
        const mq_manifest *first = &ms[k[g].at];
        int shards = 0;
        long units = 0;
        for (e = g; e < nm && k[e].id == k[g].id && rc == 0; e++) {
            const mq_manifest *m = &ms[k[e].at];
            int again = e > g && k[e - 1].shard == k[e].shard;
            if (disagree(again ? &ms[k[e - 1].at] : first, m, err, errlen))
                rc = -1;
            else if (!again) {
                shards++;
                units += m->n;
            }
        }
        if (rc == 0 && shards == first->nshards && units != first->sweep_units) {
            snprintf(err, errlen, "%s and the other %d manifests of sweep %016llx: its %d shards "
                                  "own %ld units, but the comment lines say the sweep has %d",
                     first->path, shards - 1, (unsigned long long)first->id, shards, units,
                     first->sweep_units);
            rc = -1;
        }
    }
    free(k);
    return rc;
}

/* The gaps of every sweep whose manifests are among the manifests: missing
 * shards, and units without their rows among the kept rows (sorted). The
 * manifests agree (check_manifests), and a shard outside 1..N is skipped
 * all the same. -1 on out of memory. */
static int report_gaps(mq_manifest *ms, int nm, const entry *kept, int nk, FILE *rep,
                       mq_merge_summary *sum)
{
    for (int i = 0; i < nm; i++) {
        int first = 1;
        for (int j = 0; j < i && first; j++)
            first = ms[j].id != ms[i].id;
        if (!first)
            continue;
        sum->sweeps++;
        int N = ms[i].nshards, have = 0;
        char *seen = calloc((size_t)N + 1, 1);
        if (!seen)
            return -1;
        for (int j = i; j < nm; j++)
            if (ms[j].id == ms[i].id && ms[j].shard >= 1 && ms[j].shard <= N &&
                !seen[ms[j].shard]) {
                seen[ms[j].shard] = 1;
                have++;
            }
        fprintf(rep, "sweep %016llx (%s, chip %s, backend %s): %d of %d shard%s among the "
                     "inputs\n",
                (unsigned long long)ms[i].id, ms[i].kind, ms[i].chip, ms[i].backend, have, N,
                N == 1 ? "" : "s");
        int listed = 0;
        for (int s = 1; s <= N; s++)
            if (!seen[s]) {
                sum->shards_missing++;
                if (listed++ < 20)
                    fprintf(rep, "  shard %d/%d: missing (no results file with its manifest "
                                 "among the inputs)\n",
                            s, N);
            }
        if (listed > 20)
            fprintf(rep, "  ... and %d more missing shards\n", listed - 20);
        free(seen);
        for (int j = i; j < nm; j++) {
            if (ms[j].id != ms[i].id)
                continue;
            int missing = 0, rows = 0, first_gap = -1;
            for (int k = 0; k < ms[j].n; k++) {
                int got = unit_rows(kept, nk, ms[j].chip, ms[j].backend, &ms[j].u[k]);
                rows += got < ms[j].u[k].rows ? got : ms[j].u[k].rows;
                if (got < ms[j].u[k].rows && missing++ == 0)
                    first_gap = k;
            }
            if (missing) {
                char what[256];
                describe_unit(&ms[j].u[first_gap], what, sizeof what);
                sum->shards_incomplete++;
                sum->units_missing += missing;
                fprintf(rep, "  shard %d/%d (%s): incomplete: %d of %d units lack rows (%d rows "
                             "here); the first: %s\n",
                        ms[j].shard, N, ms[j].path, missing, ms[j].n, rows, what);
            } else {
                fprintf(rep, "  shard %d/%d (%s): complete, %d units\n", ms[j].shard, N,
                        ms[j].path, ms[j].n);
            }
        }
    }
    return 0;
}

/* Rows per (host, chip, backend, build), with their dates. */
static void report_provenance(const entry *e, int n, FILE *rep)
{
    for (int i = 0; i < n; i++) {
        const mq_result *a = e[i].r;
        int first = 1;
        for (int j = 0; j < i && first; j++) {
            const mq_result *b = e[j].r;
            first = strcmp(a->host, b->host) || strcmp(a->chip, b->chip) ||
                    strcmp(a->backend, b->backend) || strcmp(a->git_rev, b->git_rev);
        }
        if (!first)
            continue;
        int rows = 0;
        const char *d0 = a->date, *d1 = a->date;
        for (int j = i; j < n; j++) {
            const mq_result *b = e[j].r;
            if (strcmp(a->host, b->host) || strcmp(a->chip, b->chip) ||
                strcmp(a->backend, b->backend) || strcmp(a->git_rev, b->git_rev))
                continue;
            rows++;
            d0 = strcmp(b->date, d0) < 0 ? b->date : d0;
            d1 = strcmp(b->date, d1) > 0 ? b->date : d1;
        }
        fprintf(rep, "  host %s, chip %s, backend %s, build %s %s: %d rows, %s .. %s\n", a->host,
                a->chip, a->backend, a->tool_version, a->git_rev, rows, d0, d1);
    }
}

/* The duplicates: runs of one key in key order (e sorted so here), each
 * reported with its rows' files, all but the kept row of each marked
 * dropped (none with MQ_KEEP_ALL). */
static void mark_duplicates(entry *e, int total, const mq_merge_opts *o,
                            const char *const *inputs, FILE *rep, mq_merge_summary *sum)
{
    qsort(e, (size_t)total, sizeof *e, by_key_then_order);
    int shown = 0;
    for (int i = 0; i < total;) {
        int j = i + 1;
        while (j < total && mq_result_key_cmp(e[i].r, e[j].r) == 0)
            j++;
        if (j - i > 1) {
            int keep = i; /* first: the earliest in input order */
            for (int q = i + 1; o->keep == MQ_KEEP_NEWEST && q < j; q++)
                if (strcmp(e[q].r->date, e[keep].r->date) >= 0)
                    keep = q; /* newest; of equal dates the later input */
            for (int q = i; o->keep != MQ_KEEP_ALL && q < j; q++)
                if (q != keep) {
                    e[q].dropped = 1;
                    sum->dup_rows_dropped++;
                }
            sum->dup_keys++;
            if (shown++ < 10) {
                char c[128];
                mq_candidate_str(&e[i].r->c, c, sizeof c);
                fprintf(rep, "duplicate: %s %s %s M=%d N=%d K=%d %s: %d rows (", e[i].r->chip,
                        e[i].r->backend, mq_format_name(e[i].r->p.format), e[i].r->p.M,
                        e[i].r->p.N, e[i].r->p.K, c, j - i);
                for (int q = i; q < j; q++)
                    fprintf(rep, "%s%s %s %s%s", q > i ? "; " : "", inputs[e[q].input],
                            e[q].r->host, e[q].r->date,
                            o->keep != MQ_KEEP_ALL && q == keep ? " kept" : "");
                fprintf(rep, ")\n");
            }
        }
        i = j;
    }
    if (shown > 10)
        fprintf(rep, "... and %d more duplicate keys\n", shown - 10);
}

/* An output that would be taken for something else: none, or a shard
 * manifest's name (merge would replace an input's manifest with rows). */
static int bad_out(const char *out, char *err, size_t errlen)
{
    size_t len = strlen(out), sl = strlen(".manifest.csv");
    if (len == 0)
        return snprintf(err, errlen, "--out '': an empty path"), -1;
    if (len >= sl && !strcmp(out + len - sl, ".manifest.csv"))
        return snprintf(err, errlen, "--out '%.300s': the name of a shard manifest (merge "
                                     "writes results; a manifest is read beside them)",
                        out),
               -1;
    return 0;
}

int mq_merge(const char *const *inputs, int n, const char *out, const mq_merge_opts *o,
             FILE *rep_out, mq_merge_summary *sum, char *err, size_t errlen)
{
    memset(sum, 0, sizeof *sum);
    sum->inputs = n;
    mq_results *rs = calloc((size_t)(n ? n : 1), sizeof *rs);
    mq_manifest *ms = calloc((size_t)(n ? n : 1), sizeof *ms);
    entry *e = NULL;
    const mq_result **rows = NULL;
    int rc = 2, nm = 0, total = 0;
    /* the report is held until the merge is done: an error leaves rep_out
     * untouched, its one line the whole of what the caller shows */
    char *rbuf = NULL;
    size_t rlen = 0;
    FILE *rep = open_memstream(&rbuf, &rlen);
    if (!rs || !ms || !rep) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    if (bad_out(out, err, errlen))
        goto done;
    for (int i = 0; i < n; i++) {
        char mpath[4200], note[4400];
        struct stat sb, sb2;
        for (int j = 0; j < i; j++)
            if (stat(inputs[i], &sb) == 0 && stat(inputs[j], &sb2) == 0 &&
                sb.st_dev == sb2.st_dev && sb.st_ino == sb2.st_ino) {
                snprintf(err, errlen, "%s is given twice (as %s too)", inputs[i], inputs[j]);
                goto done;
            }
        if (mq_results_load(inputs[i], &rs[i], err, errlen))
            goto done;
        if (mq_results_torn_note(&rs[i], inputs[i], note, sizeof note))
            fprintf(rep, "merge: %s\n", note);
        total += rs[i].n;
        mq_manifest_path(inputs[i], mpath, sizeof mpath);
        if (stat(mpath, &sb) == 0 && mq_manifest_load(mpath, &ms[nm++], err, errlen))
            goto done;
    }
    if (check_manifests(ms, nm, err, errlen))
        goto done;
    sum->rows_in = total;
    sum->manifests = nm;
    e = calloc((size_t)(total ? total : 1), sizeof *e);
    rows = calloc((size_t)(total ? total : 1), sizeof *rows);
    if (!e || !rows) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    int k = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < rs[i].n; j++, k++)
            e[k] = (entry){&rs[i].r[j], i, k, 0};
    int a, b;
    if (!o->allow_mixed_schemas && differ(e, total, 1, &a, &b)) {
        snprintf(err, errlen, "%s has rows of schema %d, %s of schema %d: refusing to mix "
                              "schemas (--allow-mixed-schemas to merge them)",
                 inputs[e[a].input], e[a].r->schema, inputs[e[b].input], e[b].r->schema);
        goto done;
    }
    if (!o->allow_mixed_builds && differ(e, total, 0, &a, &b)) {
        snprintf(err, errlen, "%s has rows of build %s %s, %s of build %s %s: refusing to mix "
                              "builds (--allow-mixed-builds to merge them)",
                 inputs[e[a].input], e[a].r->tool_version, e[a].r->git_rev, inputs[e[b].input],
                 e[b].r->tool_version, e[b].r->git_rev);
        goto done;
    }
    mark_duplicates(e, total, o, inputs, rep, sum);
    /* the gaps, on the kept rows in key order */
    int nk = 0;
    for (int i = 0; i < total; i++)
        if (!e[i].dropped)
            e[nk++] = e[i];
    if (report_gaps(ms, nm, e, nk, rep, sum)) {
        snprintf(err, errlen, "out of memory");
        goto done;
    }
    qsort(e, (size_t)nk, sizeof *e, by_order); /* the inputs' own order */
    for (int i = 0; i < nk; i++)
        rows[i] = e[i].r;
    sum->rows_out = nk;
    fprintf(rep, "provenance:\n");
    report_provenance(e, nk, rep);
    if (mq_results_write(out, rows, nk, err, errlen))
        goto done;
    fprintf(rep, "merged %d rows of %d file%s into %s (%d duplicate key%s, %d row%s dropped)\n",
            nk, n, n == 1 ? "" : "s", out, sum->dup_keys, sum->dup_keys == 1 ? "" : "s",
            sum->dup_rows_dropped, sum->dup_rows_dropped == 1 ? "" : "s");
    rc = sum->shards_missing || sum->shards_incomplete ? 1 : 0;
done:
    if (rep)
        fclose(rep); /* rbuf then holds what was printed */
    if (rc != 2 && rbuf)
        fwrite(rbuf, 1, rlen, rep_out);
    free(rbuf);
    for (int i = 0; rs && i < n; i++)
        mq_results_free(&rs[i]);
    for (int i = 0; ms && i < nm; i++)
        mq_manifest_free(&ms[i]);
    free(rs);
    free(ms);
    free(e);
    free(rows);
    return rc;
}
