/* test_objc_standin.c - the stand-in Objective-C/Metal runtime holds the
 * Metal backend to what a Mac would: every cast in backends/metal/metal.c and
 * backends/metal/objc_rt.c, read from the source, is a type Apple declares for its
 * selector (a planted wrong cast and an undeclared selector fail the same
 * check); objc_rt.h's Metal constants are the generated table's; the backend
 * opens through the stand-in and describes its device; and each misuse a
 * Mac punishes (a wrong or untyped cast, an unknown selector, an
 * over-release, a message to a released object, an autorelease with no
 * pool, setBytes over 4 KB, a buffer index past 30, threads over the
 * pipeline's maximum, an unbound buffer, the encoder and command-buffer
 * protocol broken) stops a child process with a message naming it. The
 * end-to-end runs of bench are tests/test_metal_standin.sh's. */
#include <ctype.h>
#include <dlfcn.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend.h"
#include "check.h"
#include "grow.h"
#include "objc_rt.h"

#ifndef MQ_SOURCE_DIR
#define MQ_SOURCE_DIR "."
#endif

/* ---- the static check of every cast in the sources --------------------------- */

typedef int (*check_cast_fn)(const char *sel, const char *c_spelling, char *why, size_t n);

/* The end of a parenthesized group starting at p ('('), or NULL. */
static const char *group_end(const char *p)
{
    int depth = 0;
    for (; *p; p++) {
        if (*p == '(')
            depth++;
        else if (*p == ')' && --depth == 0)
            return p;
        else if (*p == '"')
            for (p++; *p && *p != '"'; p++)
                p += *p == '\\';
    }
    return NULL;
}

/* Every MSG(rt, RET, ARGS...)(recv, rt->sel("SEL"), ...) and
 * MSG0(rt, RET)(recv, rt->sel("SEL")) with a literal selector in text,
 * checked; the casts counted in *n; failures reported under `what`.
 * Returns how many failed. */
static int check_casts_in(const char *text, const char *what, check_cast_fn check, int *n,
                          int report)
{
    int bad = 0;
    *n = 0;
    for (const char *p = text; (p = strstr(p, "MSG")) != NULL; p++) {
        int zero = p[3] == '0';
        const char *open = p + 3 + zero;
        const char *line = p;
        while (line > text && line[-1] != '\n')
            line--;
        while (*line == ' ')
            line++;
        if (*open != '(' || !strncmp(line, "#define", 7) ||
            (p > text && (isalnum((unsigned char)p[-1]) || p[-1] == '_')))
            continue;
        const char *close = group_end(open);
        if (!close || close[1] != '(')
            continue;
        /* the macro's arguments: rt, RET[, params] */
        char args[512];
        snprintf(args, sizeof args, "%.*s", (int)(close - open - 1), open + 1);
        char *comma = strchr(args, ',');
        if (!comma)
            continue;
        char spelling[600];
        char *ret = comma + 1, *params = zero ? NULL : strchr(ret, ',');
        if (params)
            *params++ = 0;
        snprintf(spelling, sizeof spelling, "%s(%s)", ret, params ? params : "");
        /* the call's selector, when it is a literal */
        const char *call_end = group_end(close + 1);
        const char *s = strstr(close + 1, "sel(\"");
        if (!call_end || !s || s > call_end)
            continue;
        char sel[128];
        if (sscanf(s + 5, "%127[^\"]", sel) != 1)
            continue;
        char why[512];
        (*n)++;
        if (check(sel, spelling, why, sizeof why)) {
            bad++;
            if (report)
                CHECK(0, "%s: %s", what, why);
        }
    }
    return bad;
}

/* A source file whole (NULL when it cannot be read); free() it. */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    mq_strbuf b = {0};
    int rc = mq_sb_read(&b, f);
    fclose(f);
    if (rc) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

static void test_sources(check_cast_fn check)
{
    const char *files[] = {"backends/metal/metal.c", "backends/metal/objc_rt.c"};
    int total = 0;
    for (int i = 0; i < 2; i++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", MQ_SOURCE_DIR, files[i]);
        char *text = slurp(path);
        CHECK(text != NULL, "%s readable", path);
        if (!text)
            continue;
        int n;
        int bad = check_casts_in(text, files[i], check, &n, 1);
        CHECK(bad == 0, "every cast in %s is Apple's type for its selector (%d of %d are not)",
              files[i], bad, n);
        total += n;
        free(text);
    }
    CHECK(total >= 35, "the casts with a literal selector were found (expected 35 or more, got %d)",
          total);
    /* the same check must fail on a planted wrong cast, an undeclared selector,
     * a class's selector with another's type */
    const char *planted[] = {
        "MSG(rt, id, int)(dev, rt->sel(\"newBufferWithLength:options:\"), 64);",
        "MSG0(rt, id)(dev, rt->sel(\"newBufferz\"));",
        "MSG(rt, void, NSUInteger)(opts, rt->sel(\"setMathMode:\"), 0);",
        "MSG0(rt, long)(cb, rt->sel(\"GPUEndTime\"));",
        "MSG(rt, void, id, int, NSUInteger)(enc, rt->sel(\"setBuffer:offset:atIndex:\"), b, 0, 1);",
    };
    for (size_t i = 0; i < sizeof planted / sizeof planted[0]; i++) {
        int n;
        int bad = check_casts_in(planted[i], "planted", check, &n, 0);
        CHECK(n == 1 && bad == 1, "the planted cast %s is found (%d) and refused (%d)", planted[i],
              n, bad);
    }
}

/* ---- objc_rt.h's constants against the generated table ------------------------ */

static const struct {
    const char *name;
    long value;
} decl_consts[] = {
#define MQ_DECL_CLASS(c, b)
#define MQ_DECL_METHOD(c, s, cm, sig)
#define MQ_DECL_FUNCTION(n, sig)
#define MQ_DECL_CONST(n, v) {n, v},
#include "objc_standin/apple_decls.inc"
};

static long decl_const(const char *name)
{
    for (size_t i = 0; i < sizeof decl_consts / sizeof decl_consts[0]; i++)
        if (!strcmp(decl_consts[i].name, name))
            return decl_consts[i].value;
    return -1;
}

static void test_constants(void)
{
    const struct {
        const char *name;
        long ours;
    } ours[] = {{"MTLCommandBufferStatusCompleted", MQ_MTL_STATUS_COMPLETED},
                {"MTLLanguageVersion3_0", MQ_MTL_LANGUAGE_3_0},
                {"MTLMathModeSafe", MQ_MTL_MATH_MODE_SAFE},
                {"MTLResourceStorageModeShared", MQ_MTL_STORAGE_SHARED}};
    for (size_t i = 0; i < sizeof ours / sizeof ours[0]; i++)
        CHECK(decl_const(ours[i].name) == ours[i].ours, "objc_rt.h's %s is Apple's %ld (got %ld)",
              ours[i].name, decl_const(ours[i].name), ours[i].ours);
}

/* ---- misuse stops the process, naming it -------------------------------------- */

typedef void (*misuse_fn)(const objc_rt *rt, id dev);

static id queue_of(const objc_rt *rt, id dev) { return mq_objc_send0(rt, dev, "newCommandQueue"); }

static id buffer_of(const objc_rt *rt, id dev, NSUInteger n)
{
    return MSG(rt, id, NSUInteger, NSUInteger)(dev, rt->sel("newBufferWithLength:options:"), n, 0);
}

/* A pipeline of a one-buffer kernel (compiled by the executor), +1. */
static id tiny_pipeline(const objc_rt *rt, id dev)
{
    const char *src = "#include <metal_stdlib>\nusing namespace metal;\n"
                      "kernel void tiny(device float *a [[buffer(0)]],\n"
                      "                 uint i [[thread_position_in_grid]]) { a[i] = 1.0f; }\n";
    id err = NULL;
    id opts = mq_objc_send0(rt, mq_objc_send0(rt, rt->get_class("MTLCompileOptions"), "alloc"), "init");
    id lib = MSG(rt, id, id, id, id *)(dev, rt->sel("newLibraryWithSource:options:error:"),
                                       mq_objc_nsstring(rt, src), opts, &err);
    if (!lib) {
        fprintf(stderr, "tiny kernel: %s\n", mq_objc_error_text(rt, err));
        _exit(91);
    }
    id fn = MSG(rt, id, id)(lib, rt->sel("newFunctionWithName:"), mq_objc_nsstring(rt, "tiny"));
    return MSG(rt, id, id, id *)(dev, rt->sel("newComputePipelineStateWithFunction:error:"), fn, &err);
}

static id encoder_of(const objc_rt *rt, id dev, id *cb)
{
    *cb = mq_objc_send0(rt, queue_of(rt, dev), "commandBuffer");
    return mq_objc_send0(rt, *cb, "computeCommandEncoder");
}

static void wrong_cast(const objc_rt *rt, id dev)
{
    MSG(rt, id, int)(dev, rt->sel("newBufferWithLength:options:"), 64);
}
static void unknown_selector(const objc_rt *rt, id dev) { MSG0(rt, id)(dev, rt->sel("newBufferz")); }
static void untyped_send(const objc_rt *rt, id dev)
{
    ((id(*)(id, SEL))rt->msg)(dev, rt->sel("name"));
}
static void class_selector_on_instance(const objc_rt *rt, id dev)
{
    MSG(rt, id, const char *)(dev, rt->sel("stringWithUTF8String:"), "x");
}
static void over_release(const objc_rt *rt, id dev)
{
    id b = buffer_of(rt, dev, 16);
    mq_objc_release(rt, b);
    mq_objc_release(rt, b);
}
static void message_to_released(const objc_rt *rt, id dev)
{
    id b = buffer_of(rt, dev, 16);
    mq_objc_release(rt, b);
    MSG0(rt, void *)(b, rt->sel("contents"));
}
static void autorelease_without_pool(const objc_rt *rt, id dev)
{
    (void)dev;
    rt->pool_pop((void *)(uintptr_t)1); /* the pool the child pushed */
    mq_objc_nsstring(rt, "leaks on a Mac");
}
static void set_bytes_over_4k(const objc_rt *rt, id dev)
{
    static char big[5000];
    id cb, enc = encoder_of(rt, dev, &cb);
    MSG(rt, void, const void *, NSUInteger, NSUInteger)(enc, rt->sel("setBytes:length:atIndex:"), big,
                                                        sizeof big, 0);
}
static void buffer_index_31(const objc_rt *rt, id dev)
{
    id cb, enc = encoder_of(rt, dev, &cb);
    MSG(rt, void, id, NSUInteger, NSUInteger)(enc, rt->sel("setBuffer:offset:atIndex:"),
                                              buffer_of(rt, dev, 16), 0, 31);
}
static void dispatch(const objc_rt *rt, id enc, NSUInteger threads)
{
    MSG(rt, void, MTLSize, MTLSize)(enc, rt->sel("dispatchThreadgroups:threadsPerThreadgroup:"),
                                    (MTLSize){1, 1, 1}, (MTLSize){threads, 1, 1});
}
static void set_pipeline(const objc_rt *rt, id enc, id pso)
{
    MSG(rt, void, id)(enc, rt->sel("setComputePipelineState:"), pso);
}
static void threads_over_max(const objc_rt *rt, id dev)
{
    id cb, enc = encoder_of(rt, dev, &cb);
    set_pipeline(rt, enc, tiny_pipeline(rt, dev));
    dispatch(rt, enc, 2048);
}
static void dispatch_without_pipeline(const objc_rt *rt, id dev)
{
    id cb, enc = encoder_of(rt, dev, &cb);
    dispatch(rt, enc, 32);
}
static void unbound_buffer(const objc_rt *rt, id dev)
{
    id cb, enc = encoder_of(rt, dev, &cb);
    set_pipeline(rt, enc, tiny_pipeline(rt, dev));
    dispatch(rt, enc, 32);
    MSG0(rt, void)(enc, rt->sel("endEncoding"));
    MSG0(rt, void)(cb, rt->sel("commit"));
}
static void commit_with_encoder_open(const objc_rt *rt, id dev)
{
    id cb;
    encoder_of(rt, dev, &cb);
    MSG0(rt, void)(cb, rt->sel("commit"));
}
static void commit_twice(const objc_rt *rt, id dev)
{
    id cb, enc = encoder_of(rt, dev, &cb);
    MSG0(rt, void)(enc, rt->sel("endEncoding"));
    MSG0(rt, void)(cb, rt->sel("commit"));
    MSG0(rt, void)(cb, rt->sel("commit"));
}
static void wait_before_commit(const objc_rt *rt, id dev)
{
    id cb, enc = encoder_of(rt, dev, &cb);
    MSG0(rt, void)(enc, rt->sel("endEncoding"));
    MSG0(rt, void)(cb, rt->sel("waitUntilCompleted"));
}
static void encode_after_end(const objc_rt *rt, id dev)
{
    id cb, enc = encoder_of(rt, dev, &cb);
    MSG0(rt, void)(enc, rt->sel("endEncoding"));
    set_pipeline(rt, enc, tiny_pipeline(rt, dev));
}
static void two_open_encoders(const objc_rt *rt, id dev)
{
    id cb;
    encoder_of(rt, dev, &cb);
    mq_objc_send0(rt, cb, "computeCommandEncoder");
}

/* Run fn in a child with the stand-in loaded, a pool pushed and a device;
 * it must abort with `text` in what it printed. */
static void expect_stop(const char *name, misuse_fn fn, const char *text)
{
    int fd[2];
    if (pipe(fd)) {
        CHECK(0, "%s: a pipe", name);
        return;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2);
        close(fd[0]);
        objc_rt rt;
        char why[512];
        if (mq_objc_load(&rt, why, sizeof why)) {
            fprintf(stderr, "load: %s\n", why);
            _exit(90);
        }
        rt.pool_push();
        fn(&rt, mq_objc_metal_device(&rt));
        _exit(0);
    }
    close(fd[1]);
    char out[4096] = "";
    size_t n = 0;
    ssize_t r;
    while (n + 1 < sizeof out && (r = read(fd[0], out + n, sizeof out - 1 - n)) > 0)
        n += (size_t)r;
    out[n] = 0;
    close(fd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && strstr(out, text) != NULL,
          "%s: expected an abort saying \"%s\"; got %s %d: %s", name, text,
          WIFSIGNALED(st) ? "signal" : "exit", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st),
          out);
}

static void test_misuse(void)
{
    expect_stop("wrong cast", wrong_cast, "cast as id(int)");
    expect_stop("unknown selector", unknown_selector, "declare no such method");
    expect_stop("untyped send", untyped_send, "without a typed cast");
    expect_stop("class method to an instance", class_selector_on_instance,
                "-[MTLDevice stringWithUTF8String:]");
    expect_stop("over-release", over_release, "a released MTLBuffer (over-release");
    expect_stop("message to a released object", message_to_released, "a released MTLBuffer");
    expect_stop("autorelease with no pool", autorelease_without_pool, "no pool in place");
    expect_stop("setBytes over 4 KB", set_bytes_over_4k, "at most 4096");
    expect_stop("buffer index 31", buffer_index_31, "buffer indices 0-30");
    expect_stop("threads over the pipeline's maximum", threads_over_max,
                "maxTotalThreadsPerThreadgroup is 1024");
    expect_stop("dispatch with no pipeline", dispatch_without_pipeline, "no compute pipeline set");
    expect_stop("an unbound buffer", unbound_buffer, "[[buffer(0)]] is not bound");
    expect_stop("commit with an encoder open", commit_with_encoder_open, "with an encoder open");
    expect_stop("commit twice", commit_twice, "already committed");
    expect_stop("wait before commit", wait_before_commit, "before commit");
    expect_stop("encoding after endEncoding", encode_after_end, "after endEncoding");
    expect_stop("two open encoders", two_open_encoders, "while another encoder is open");
}

/* ---- the backend through the stand-in -------------------------------------------- */

static void test_backend(void)
{
    mq_backend_opts o = {0};
    char note[512];
    mq_error err;
    mq_backend *b = mq_backend_open("metal", &o, note, sizeof note, &err);
    CHECK(b != NULL, "the metal backend opens through the stand-in (got: %s)", b ? "" : err.msg);
    if (!b)
        return;
    CHECK(!strcmp(b->device, "Apple M4 Max"), "device name Apple M4 Max, got '%s'", b->device);
    CHECK(!strcmp(b->arch, "applegpu_g16s"), "architecture applegpu_g16s, got '%s'", b->arch);
    CHECK(b->gpu_cores == 40, "the IORegistry's gpu-core-count 40, got %d", b->gpu_cores);
    mq_backend_close(b);
}

int main(int argc, char **argv)
{
    (void)argc;
    char self[4200], lib[4300];
    snprintf(self, sizeof self, "%s", argv[0]);
    const char *dir = dirname(self);
    snprintf(lib, sizeof lib, "%s/libobjc_standin.so", dir);
    if (access(lib, R_OK))
        snprintf(lib, sizeof lib, "%s/libobjc_standin.dylib", dir);
    setenv("MQ_OBJC_RUNTIME", lib, 1);
    unsetenv("MQ_STANDIN_FAULTS");
    unsetenv("MQ_STANDIN_GPU_CORES");
    unsetenv("MQ_STANDIN_REPORT");
    objc_rt rt;
    char why[512];
    int loaded = mq_objc_load(&rt, why, sizeof why) == 0;
    CHECK(loaded, "the stand-in loads from %s (%s)", lib, loaded ? "" : why);
    if (loaded) {
        check_cast_fn check;
        *(void **)&check = dlsym(rt.objc, "mq_standin_check_cast");
        CHECK(check != NULL, "the stand-in exports mq_standin_check_cast");
        if (check)
            test_sources(check);
        test_constants();
        test_misuse();
        test_backend();
    }
    return check_done("test_objc_standin");
}
