/* test_moe_files.c - the MoE block's files (issue 38): a recorded routing
 * read whole and every problem named by file and line (a token on one
 * expert twice, gaps, repeated slots, bad numbers, no header, an empty
 * file); moe-bench's results written and read back by one module, text
 * fields with a quote, a comma, a backslash and a newline surviving the
 * trip through the writer, its reader and plot moe's; rows refused that
 * lack the header's field count or hold an unreadable number; the results
 * file never followed through a link, and a second writer (another
 * process, the moe-bench tool itself) refused while one holds it; the
 * candidate column's text read back into every candidate of the space. */
#include <fcntl.h>
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"
#include "moe_bench.h"
#include "moe_data.h"
#include "moe_results.h"
#include "msl_program.h"

static char dir[] = "/tmp/mq-test-moe-files-XXXXXX";
static char tool[4200]; /* the moe-bench tool next to this test's directory */

static const char *at(const char *name)
{
    static char p[4][4200];
    static int k;
    k = (k + 1) % 4;
    snprintf(p[k], sizeof p[k], "%s/%s", dir, name);
    return p[k];
}

static void put(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* The whole file (static buffer; "" when absent). */
static const char *slurp(const char *path)
{
    static char buf[65536];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f)
        fclose(f);
    buf[n] = '\0';
    return buf;
}

/* A routing file with text gives an error containing want (NULL: loads). */
static void routing_case(const char *text, const char *want, const char *what)
{
    const char *path = at("route.csv");
    put(path, text);
    mq_moe_routing_file rf;
    char err[1024] = "";
    int rc = mq_moe_routing_read(path, 8, &rf, err, sizeof err);
    if (!want) {
        CHECK(rc == 0, "%s: loads, got '%s'", what, err);
        mq_moe_routing_file_free(&rf);
        return;
    }
    CHECK(rc != 0 && strstr(err, want) && strstr(err, path) && !strchr(err, '\n'),
          "%s: one line naming the file and '%s', got '%s'", what, want, err);
    CHECK(!rf.ids && !rf.probs, "%s: nothing left allocated", what);
}

static void test_routing(void)
{
    routing_case("token,slot,expert,prob\n1,1,4,0.25\n0,0,3,0.5\n1,0,7,0.75\n0,1,2,0.5\n", NULL,
                 "rows in any order");
    mq_moe_routing_file rf;
    char err[512];
    if (mq_moe_routing_read(at("route.csv"), 8, &rf, err, sizeof err) == 0) {
        CHECK(rf.tokens == 2 && rf.top_k == 2 && rf.ids[0] == 3 && rf.ids[1] == 2 &&
                  rf.ids[2] == 7 && rf.ids[3] == 4 && rf.probs[3] == 0.25f,
              "placed by token and slot: %d tokens x %d, ids %d %d %d %d", rf.tokens, rf.top_k,
              rf.ids[0], rf.ids[1], rf.ids[2], rf.ids[3]);
        mq_moe_routing_file_free(&rf);
    }
    routing_case("token,slot,expert,prob\n0,0,3,0.6\n0,1,3,0.4\n",
                 ":3: token 0 routes to expert 3 twice (slot 1 here, slot 0 at line 2)",
                 "a token routed twice to one expert");
    routing_case("token,slot,expert,prob\n0,0,3,0.6\n0,0,4,0.4\n",
                 ":3: token 0 slot 0 given twice (first at line 2)", "a slot given twice");
    routing_case("token,slot,expert,prob\n0,0,3,1\n2,0,4,1\n", ":3: token 1 slot 0 has no row",
                 "a token missing between two");
    routing_case("token,slot,expert,prob\n0,0,3,.5\n0,1,4,.5\n1,0,4,1\n",
                 ":4: token 1 slot 1 has no row", "the last token short of a slot");
    routing_case("token,slot,expert,prob\n0,0,3,nan\n", ":2: prob: 'nan' is not a finite",
                 "a NaN probability");
    routing_case("token,slot,expert,prob\n0,0,3,-0.5\n", ":2: prob: '-0.5' is out of range",
                 "a negative probability");
    routing_case("token,slot,expert,prob\n0,0,3,inf\n", ":2: prob: 'inf' is not a finite",
                 "an infinite probability");
    routing_case("token,slot,expert,prob\n0,0,8,1\n", ":2: expert '8' is not in 0..7",
                 "an expert past the model's");
    routing_case("token,slot,expert,prob\n0,0,-1,1\n", ":2: expert '-1' is not in 0..7",
                 "a negative expert");
    routing_case("token,slot,expert,prob\n0,1.5,3,1\n", ":2: slot: '1.5' is not an integer",
                 "a fractional slot");
    routing_case("token,slot,expert,prob\n65536,0,3,1\n", ":2: token: '65536' is out of range",
                 "a token past the MoE block's 65536");
    routing_case("token,slot,expert,prob\n0,0,3\n", ":2: 3 fields, the header has 4",
                 "a row short of a field");
    routing_case("", ": empty (a routing CSV starts with the header", "an empty file");
    routing_case("0,0,3,1\n", ":1: no 'token' column in the header", "no header");
    routing_case("token,slot,expert,prob\n", ":1: no routing rows after the header",
                 "a header alone");
    routing_case("token,slot,expert,prob\n0,0,3,1", ":2: truncated last line",
                 "a last line cut short");
}

/* A row of the writer's, every text field odd. */
static mq_moe_result odd_row(const char *routing, int fused, double median)
{
    mq_moe_result r = {
        .schema = MQ_MOE_RESULTS_SCHEMA, .tool_version = "0.2.0", .git_rev = "abc\\def",
        .host = "h,o\"st", .date = "2026-01-01T00:00:00Z", .model = "m\"1",
        .format = MQ_FMT_TRELLIS3, .tokens = 4, .experts = 8, .top_k = 2, .hidden = 64,
        .inter = 96, .group = 32, .routing = routing, .route_max_tokens = 2,
        .route_mean_tokens = 1, .route_touched = 5, .threads = 2, .fused = fused,
        .candidate = "c,\"x\"", .status = "ok", .error = "line one\nline two\r\\n",
        .median_s = median, .p10_s = median / 2, .p90_s = median * 2, .reps = 5,
        .touched_gbs = 1.5, .worst_of_bound = 0.25, .backend = "cpu", .device = "d\ne\"v",
        .read_probe_gbs = 10, .kernel_build = "k,\"b\""};
    return r;
}

static void test_results_roundtrip(void)
{
    const char *path = at("sub/r.csv"), *routing = "my \"rec\",ord\nings\\x.csv";
    char err[1024] = "";
    int fd = mq_moe_results_open(path, err, sizeof err);
    CHECK(fd >= 0, "a new results file (and its directory) opens: %s", err);
    if (fd < 0)
        return;
    mq_moe_result a = odd_row(routing, 1, 1e-3), b = odd_row(routing, 0, 2e-3);
    CHECK(mq_moe_results_append(fd, path, &a, err, sizeof err) == 0 &&
              mq_moe_results_append(fd, path, &b, err, sizeof err) == 0,
          "two rows appended: %s", err);
    close(fd);
    const char *text = slurp(path);
    int lines = 0;
    for (const char *c = text; *c; c++)
        lines += *c == '\n';
    CHECK(lines == 4, "the schema line, the header and one line per row: %d lines", lines);
    CHECK(strstr(text, ",\"my \"\"rec\"\",ord\\nings\\\\x.csv\",") != NULL,
          "the routing CSV-quoted, its newline and backslash escaped: %s", text);
    mq_moe_results rs;
    if (mq_moe_results_load(path, &rs, err, sizeof err)) {
        CHECK(0, "the file loads back: %s", err);
        return;
    }
    CHECK(rs.n == 2 && rs.schema == 3, "2 rows of schema 3, got %d of %d", rs.n, rs.schema);
    for (int i = 0; i < rs.n; i++) {
        const mq_moe_result *r = &rs.r[i], *w = i ? &b : &a;
        CHECK(!strcmp(r->routing, routing) && !strcmp(r->host, w->host) &&
                  !strcmp(r->git_rev, w->git_rev) && !strcmp(r->model, w->model) &&
                  !strcmp(r->candidate, w->candidate) && !strcmp(r->error, w->error) &&
                  !strcmp(r->device, w->device) && !strcmp(r->status, "ok") &&
                  !strcmp(r->kernel_build, w->kernel_build),
              "row %d: every text field as written (routing '%s', error '%s')", i, r->routing,
              r->error);
        CHECK(r->fused == w->fused && r->tokens == 4 && r->median_s == w->median_s &&
                  r->format == MQ_FMT_TRELLIS3 && r->line == 3 + i,
              "row %d: the numbers as written, line %d", i, r->line);
    }
    mq_moe_results_free(&rs);
    FILE *data = tmpfile();
    mq_plot_moe_info info;
    const char *paths[] = {path};
    int rc = data ? mq_plot_moe_data(paths, 1, data, &info, err, sizeof err) : -1;
    CHECK(rc == 0 && !strcmp(info.routing, routing) && !strcmp(info.host, "h,o\"st") &&
              info.nseries == 1 && info.rows == 2,
          "plot moe's reader takes the file, the routing whole: rc %d '%s' (%s)", rc,
          rc ? "" : info.routing, err);
    if (data)
        fclose(data);
    /* appending again: the header is not written twice, a torn row is cut off */
    FILE *f = fopen(path, "a");
    if (f) {
        fputs("2,\"0.2.0\",\"torn", f);
        fclose(f);
    }
    fd = mq_moe_results_open(path, err, sizeof err);
    CHECK(fd >= 0, "an existing file with a torn last row opens: %s", err);
    if (fd >= 0) {
        CHECK(mq_moe_results_append(fd, path, &a, err, sizeof err) == 0, "appends: %s", err);
        close(fd);
    }
    CHECK(mq_moe_results_load(path, &rs, err, sizeof err) == 0 && rs.n == 3 &&
              rs.torn_line == 0,
          "then 3 whole rows and nothing torn (%s)", err);
    mq_moe_results_free(&rs);
}

/* text's results file must be refused by the reader with want in its
 * error, and by the writer before anything is appended. */
static void reader_case(const char *text, const char *want, const char *what)
{
    const char *path = at("bad.csv");
    put(path, text);
    mq_moe_results rs;
    char err[1024] = "";
    int rc = mq_moe_results_load(path, &rs, err, sizeof err);
    CHECK(rc != 0 && strstr(err, want) && strstr(err, path) && rs.r == NULL,
          "%s: refused naming '%s', got '%s'", what, want, err);
    FILE *data = tmpfile();
    mq_plot_moe_info info;
    const char *paths[] = {path};
    char perr[1024] = "";
    rc = data ? mq_plot_moe_data(paths, 1, data, &info, perr, sizeof perr) : 0;
    CHECK(rc != 0 && !strcmp(perr, err), "%s: plot moe refuses it the same way, got '%s'", what,
          perr);
    if (data)
        fclose(data);
    int fd = mq_moe_results_open(path, err, sizeof err);
    CHECK(fd < 0 && !strcmp(slurp(path), text), "%s: nothing appended to it", what);
    if (fd >= 0)
        close(fd);
}

static void test_results_reader(void)
{
    char head1[1024], head2[1024], row1[1024], row2[1024], t[8192];
    /* a schema-1 row and a schema-2 row, as the committed results hold them */
    snprintf(head1, sizeof head1, "schema,tool_version,git_rev,host,date,model,format,tokens,"
                                  "experts,top_k,hidden,inter,group,routing,route_max_tokens,"
                                  "route_mean_tokens,route_touched,threads,path,candidate,status,"
                                  "error,median_s,p10_s,p90_s,reps,touched_gbs,worst_of_bound\n");
    snprintf(head2, sizeof head2, "%.*s,backend,device,read_probe_gbs\n",
             (int)strlen(head1) - 1, head1);
    snprintf(row1, sizeof row1, "1,0.2.0,r,vm,d,qwen3-30b-a3b,trellis3,1,128,8,2048,768,128,"
                                "\"uniform\",1,0.062,8,16,fused,\"c\",ok,\"\",0.00063904,"
                                "0.0005332098,0.0010734726,135,24.42,0.000656\n");
    snprintf(row2, sizeof row2, "2%.*s,cuda,\"NVIDIA H100\",1290\n", (int)strlen(row1) - 2,
             row1 + 1);
    snprintf(t, sizeof t, "%s%s", head2, row2);
    put(at("ok2.csv"), t);
    mq_moe_results rs;
    char err[1024];
    CHECK(mq_moe_results_load(at("ok2.csv"), &rs, err, sizeof err) == 0 && rs.n == 1 &&
              !strcmp(rs.r[0].device, "NVIDIA H100") && rs.r[0].threads == 16,
          "a schema-2 row loads: %s", err);
    mq_moe_results_free(&rs);
    snprintf(t, sizeof t, "%s%s", head2, row1);
    reader_case(t, "bad.csv:2: 28 fields, the header has 31", "a 28-field row under 31 columns");
    snprintf(t, sizeof t, "x,y,z,a,b,c,d,e,f,g,%s%s", head1, row1);
    reader_case(t, "bad.csv: not a moe-bench results file (line 1",
                "the columns read shifted past the 28th");
    snprintf(t, sizeof t, "%s%sx\n", head1, row1);
    reader_case(t, "bad.csv:3: 1 field, the header has 28", "a 1-field row");
    snprintf(t, sizeof t, "%s%s", head1, row1);
    char *p = strstr(t + strlen(head1), ",16,fused");
    if (p) {
        memcpy(p, ",na", 3);
        reader_case(t, "bad.csv:2: threads: 'na' is not an integer", "a threads that is no number");
    }
    const char *swaps[][3] = {
        {",16,fused", ",inf,fused", "bad.csv:2: threads: 'inf' is not an integer"},
        {",1,128,8,", ",1.5,128,8,", "bad.csv:2: tokens: '1.5' is not an integer"},
        {"0.00063904,", "nan,", "bad.csv:2: median_s: 'nan' is not a finite number"},
        {"24.42,", "inf,", "bad.csv:2: touched_gbs: 'inf' is not a finite number"},
        {",0.000656", ",nan", "bad.csv:2: worst_of_bound: nan in a row that passed"},
        {",ok,", ",fine,", "bad.csv:2: status: 'fine' is not ok"},
        {",fused,", ",both,", "bad.csv:2: path: 'both' is neither"},
        {",trellis3,", ",trellis9,", "bad.csv:2: format: unknown format 'trellis9'"},
        {"1,0.2.0", "2,0.2.0", "bad.csv:2: schema: not the header's"},
        {",1,128,8,", ",1,128,200,", "bad.csv:2: top_k: more than experts"},
        {"0.00063904,", "0,", "bad.csv:2: median_s: 0 in a row that is ok"},
    };
    for (size_t i = 0; i < sizeof swaps / sizeof swaps[0]; i++) {
        char r[1024], *q = strstr(row1, swaps[i][0]);
        if (!q)
            continue;
        snprintf(r, sizeof r, "%.*s%s%s", (int)(q - row1), row1, swaps[i][1],
                 q + strlen(swaps[i][0]));
        snprintf(t, sizeof t, "%s%s", head1, r);
        reader_case(t, swaps[i][2], swaps[i][2]);
    }
    /* a wrong row may hold a worst ratio that is not a number */
    char r[1024], *q = strstr(row1, ",ok,");
    snprintf(r, sizeof r, "%.*s,wrong,%.*snan\n", (int)(q - row1), row1,
             (int)(strlen(q + 4) - strlen("0.000656\n")), q + 4);
    snprintf(t, sizeof t, "%s%s", head1, r);
    put(at("wrong.csv"), t);
    CHECK(mq_moe_results_load(at("wrong.csv"), &rs, err, sizeof err) == 0 && rs.n == 1 &&
              isnan(rs.r[0].worst_of_bound),
          "a wrong row's worst ratio may be nan: %s", err);
    mq_moe_results_free(&rs);
    /* schema 1 is read, never appended to */
    snprintf(t, sizeof t, "%s%s", head1, row1);
    put(at("one.csv"), t);
    int fd = mq_moe_results_open(at("one.csv"), err, sizeof err);
    CHECK(fd < 0 && strstr(err, "of schema 1: rows of schema 3 cannot be appended") &&
              !strcmp(slurp(at("one.csv")), t),
          "a schema-1 file is not appended to, got '%s'", err);
    if (fd >= 0)
        close(fd);
    /* the writer refuses a row its readers would refuse */
    fd = mq_moe_results_open(at("w.csv"), err, sizeof err);
    mq_moe_result bad = odd_row("uniform", 1, NAN);
    CHECK(fd >= 0 && mq_moe_results_append(fd, at("w.csv"), &bad, err, sizeof err) != 0 &&
              strstr(err, "median_s") &&
              mq_moe_results_load(at("w.csv"), &rs, err, sizeof err) == 0 && rs.n == 0,
          "a row with a NaN median is not written: %s", err);
    mq_moe_results_free(&rs);
    /* an infinite worst ratio would print as inf (refused): written as 1e300 */
    mq_moe_result huge = odd_row("uniform", 1, 1e-3);
    huge.status = "wrong";
    huge.worst_of_bound = INFINITY;
    CHECK(fd >= 0 && mq_moe_results_append(fd, at("w.csv"), &huge, err, sizeof err) == 0 &&
              mq_moe_results_load(at("w.csv"), &rs, err, sizeof err) == 0 && rs.n == 1 &&
              rs.r[0].worst_of_bound == 1e300,
          "an infinite worst ratio is written as 1e300: %s", err);
    mq_moe_results_free(&rs);
    if (fd >= 0)
        close(fd);
}

/* The writer's lock and links. */
static void test_results_open(void)
{
    char err[1024] = "", path[4200];
    snprintf(path, sizeof path, "%s", at("locked.csv")); /* at() reuses its buffers */
    int fd = mq_moe_results_open(path, err, sizeof err);
    CHECK(fd >= 0, "a new file opens: %s", err);
    const char *before = strdup(slurp(path));
    pid_t pid = fork();
    if (pid == 0) { /* another process: refused while the first holds it */
        char e[1024];
        int f2 = mq_moe_results_open(path, e, sizeof e);
        _exit(f2 < 0 && strstr(e, "another process is appending to it") ? 0 : 1);
    }
    int status = -1;
    if (pid > 0)
        waitpid(pid, &status, 0);
    CHECK(pid > 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "a second process is refused while the first appends");
    /* the moe-bench tool itself, refused before it measures anything */
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "'%s' --tokens 1 --max-candidates 1 --budget 0.001 --out '%s' "
                              ">'%s' 2>'%s'", tool, path, at("tool.out"), at("tool.err"));
    int rc = access(tool, X_OK) ? -1 : system(cmd);
    CHECK(rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 2 &&
              strstr(slurp(at("tool.err")), "another process is appending to it") &&
              !slurp(at("tool.out"))[0],
          "moe-bench (%s) on a file another holds exits 2 naming it: %d '%s'", tool, rc,
          slurp(at("tool.err")));
    CHECK(before && !strcmp(slurp(path), before), "and the file is as it was");
    if (fd >= 0)
        close(fd);
    free((void *)before);
    /* a link is not followed: its target keeps its bytes */
    put(at("target.csv"), "precious\n");
    CHECK(symlink(at("target.csv"), at("link.csv")) == 0, "a link made");
    fd = mq_moe_results_open(at("link.csv"), err, sizeof err);
    CHECK(fd < 0 && strstr(err, "link.csv: cannot open for appending: it is a symbolic link") &&
              !strcmp(slurp(at("target.csv")), "precious\n"),
          "a results file that is a link is refused, its target untouched: '%s'", err);
    if (fd >= 0)
        close(fd);
    /* refused before anything is made: no file, no directory */
    fd = mq_moe_results_open(at("target.csv/x.csv"), err, sizeof err);
    CHECK(fd < 0, "a file in the way of the directory: '%s'", err);
}

/* The candidate column's text (mq_moe_candidate_str) read back
 * (mq_moe_candidate_parse, moe-bench --candidate and tune --moe-results):
 * every candidate of the MSL space of a decode and a prefill problem, the
 * lane block's parts and a down tile among them, comes back field for
 * field; text that is not one whole candidate is refused naming it. */
static void test_candidate_text(void)
{
    mq_error e;
    mq_moe_problem ps[2] = {{MQ_FMT_TRELLIS3, 1, 256, 384, 8, 2, 128},
                            {MQ_FMT_TRELLIS3, 40, 256, 384, 8, 2, 128}};
    int total = 0, bad = 0;
    for (int k = 0; k < 2; k++) {
        mq_moe_weights mw;
        if (mq_moe_weights_alloc(&mw, &ps[k], &e)) {
            CHECK(0, "weights: %s", e.msg);
            continue;
        }
        mq_moe_candidate cs[400];
        int n = mq_msl_moe_space(&ps[k], &mw, NULL, 0, 1, cs, 398);
        if (n < 1) {
            CHECK(0, "expected a non-empty MSL space at %d tokens", ps[k].tokens);
            mq_moe_weights_free(&mw);
            continue;
        }
        cs[n] = cs[n - 1]; /* and one with its own down tile */
        cs[n].down_tile_n = 32;
        cs[n++].down_tile_k = 256;
        for (int i = 0; i < n; i++, total++) {
            char s[256];
            mq_moe_candidate back;
            mq_moe_candidate_str(&cs[i], s, sizeof s);
            if (mq_moe_candidate_parse(s, &back, &e) || memcmp(&back, &cs[i], sizeof back)) {
                if (!bad++)
                    CHECK(0, "expected '%s' read back field for field: %s", s, e.msg);
            }
        }
        mq_moe_weights_free(&mw);
    }
    CHECK(bad == 0 && total > 100, "expected every candidate of the space read back (%d of %d)",
          total - bad, total);
    static const char *const refused[] = {
        "",
        "gemm_trellis_moe[lane_trellis tm=8 tn=64 tk=256 tg=0 sk=4] i_split=1",
        "gemm_trellis_moe[lane_trellis tm=8 tn=64 tk=256 tg=0 sk=4] i_split=1 fuse_gate_up=0 x",
        "gemm_trellis_moe[no_such tm=8 tn=64 tk=256 tg=0 sk=4] i_split=1 fuse_gate_up=0",
        ("gemm_trellis_moe[lane_trellis tm=8 tn=64 tk=256 tg=0 sk=4] i_split=1 fuse_gate_up=0 "
         "down=0x128"),
        "lane_trellis 8 64 256 0 4",
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        mq_moe_candidate c;
        e.msg[0] = 0;
        CHECK(mq_moe_candidate_parse(refused[i], &c, &e) != MQ_OK && e.msg[0],
              "expected '%s' refused with a reason, got '%s'", refused[i], e.msg);
    }
}

int main(int argc, char **argv)
{
    (void)argc;
    char self[4096];
    snprintf(self, sizeof self, "%s", argv[0]);
    snprintf(tool, sizeof tool, "%s/../moe-bench", dirname(self));
    if (!mkdtemp(dir))
        return 1;
    test_routing();
    test_results_roundtrip();
    test_results_reader();
    test_results_open();
    test_candidate_text();
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    return check_done("moe_files");
}
