/* runtime.c - the stand-in's Objective-C runtime: classes with Apple's
 * hierarchy (tests/objc_standin/apple_decls.inc, generated from Apple's
 * metal-cpp headers), interned selectors, reference counts with zombies,
 * autorelease pools, and the lookup objc_msgSend (msgsend.S) calls for
 * every message. The lookup is where a message is held to what a Mac
 * would do: the receiver must be a live object (or nil), Apple must declare
 * the selector on its class or a superclass, the caller's cast (objc_rt.h's
 * MSG passes its C spelling first) must be Apple's declared C type, and the
 * stand-in must implement it. */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "grow.h"
#include "standin.h"

/* ---- Apple's declarations ------------------------------------------------ */

typedef struct {
    const char *cls, *base;
} decl_class;
typedef struct {
    const char *cls, *sel;
    int class_method;
    const char *sig;
} decl_method;

#define MQ_DECL_CLASS(c, b) {c, b},
#define MQ_DECL_METHOD(c, s, cm, sig)
#define MQ_DECL_FUNCTION(n, sig)
#define MQ_DECL_CONST(n, v)
static const decl_class decl_classes[] = {
#include "apple_decls.inc"
};
#undef MQ_DECL_CLASS
#undef MQ_DECL_METHOD
#define MQ_DECL_CLASS(c, b)
#define MQ_DECL_METHOD(c, s, cm, sig) {c, s, cm, sig},
static const decl_method decl_methods[] = {
#include "apple_decls.inc"
};
#undef MQ_DECL_CLASS
#undef MQ_DECL_METHOD
#undef MQ_DECL_FUNCTION
#undef MQ_DECL_CONST

#define NDECL_CLASSES ((int)(sizeof decl_classes / sizeof decl_classes[0]))
#define NDECL_METHODS ((int)(sizeof decl_methods / sizeof decl_methods[0]))

/* Classes objc_getClass finds: Apple's classes among the names metal.c
 * could ask for; the rest (MTLDevice, MTLBuffer, ...) are protocols, and
 * objc_getClass returns nil for them on a Mac too. */
static const char *const allocatable[] = {"NSObject", "NSString", "NSNumber", "NSDictionary",
                                          "NSArray", "NSError", "MTLCompileOptions", NULL};

static so_class *classes;
static int nclasses;
static so_object *all_objects;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

so_config so_cfg;
so_counters so_count;

double so_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void report_write(const char *why);

_Noreturn void so_violation(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "objc stand-in: %s\n", msg);
    report_write(msg);
    abort();
}

so_class *so_class_named(const char *name)
{
    for (int i = 0; i < nclasses; i++)
        if (!strcmp(classes[i].name, name))
            return &classes[i];
    return NULL;
}

/* The class table, from Apple's declarations (two passes: names, then bases). */
static void make_classes(void)
{
    classes = calloc((size_t)NDECL_CLASSES, sizeof *classes);
    if (!classes)
        so_violation("out of memory");
    for (int i = 0; i < NDECL_CLASSES; i++) {
        so_class *c = &classes[nclasses++];
        c->hdr.magic = SO_CLASS;
        snprintf(c->name, sizeof c->name, "%s", decl_classes[i].cls);
        for (int k = 0; allocatable[k]; k++)
            c->allocatable |= !strcmp(allocatable[k], c->name);
        c->cf_type = nclasses; /* CFGetTypeID's answer (CFNumber is NSNumber's twin) */
    }
    for (int i = 0; i < nclasses; i++) {
        const char *base = decl_classes[i].base;
        classes[i].super = base && *base ? so_class_named(base) : NULL;
        if (base && *base && !classes[i].super)
            so_violation("apple_decls.inc: %s's base %s is not declared", classes[i].name, base);
    }
    const char *need[] = {"NSObject", "NSString", "NSNumber", "NSDictionary", "NSArray",
                          "NSError", "MTLDevice", "MTLBuffer", "MTLCommandBuffer", NULL};
    for (int k = 0; need[k]; k++)
        if (!so_class_named(need[k]))
            so_violation("apple_decls.inc declares no class %s", need[k]);
}

/* ---- objects ------------------------------------------------------------- */

void *so_new(const char *cls, size_t size, void (*dealloc)(so_object *))
{
    so_class *c = so_class_named(cls);
    if (!c)
        so_violation("the stand-in made an object of %s, a class Apple does not declare", cls);
    so_object *o = calloc(1, size);
    if (!o)
        so_violation("out of memory");
    o->magic = SO_ALIVE;
    o->cls = c;
    o->refs = 1;
    o->dealloc = dealloc;
    pthread_mutex_lock(&lock);
    o->next_all = all_objects;
    all_objects = o;
    pthread_mutex_unlock(&lock);
    return o;
}

static so_object *live(const void *p, const char *what)
{
    const so_object *o = p;
    if (!o || (o->magic != SO_ALIVE && o->magic != SO_DEAD && o->magic != SO_CLASS))
        so_violation("%s %p, which is not an object", what, p);
    if (o->magic == SO_DEAD)
        so_violation("%s a released %s (over-release, or a message to a freed object)", what,
                     o->cls->name);
    return (so_object *)o;
}

int so_is(const void *p, const char *cls)
{
    const so_object *o = p;
    if (!o || o->magic != SO_ALIVE)
        return 0;
    for (const so_class *c = o->cls; c; c = c->super)
        if (!strcmp(c->name, cls))
            return 1;
    return 0;
}

void *so_retain(void *obj)
{
    so_object *o = live(obj, "retain of");
    if (o->magic == SO_ALIVE)
        o->refs++;
    return obj;
}

void so_release(void *obj)
{
    so_object *o = live(obj, "release of");
    if (o->magic != SO_ALIVE || --o->refs > 0)
        return;
    if (o->dealloc)
        o->dealloc(o);
    o->magic = SO_DEAD; /* a zombie: kept so a later message is caught */
}

/* ---- autorelease pools --------------------------------------------------- */

static _Thread_local so_object **pool_objs;
static _Thread_local int pool_n, pool_cap;
static _Thread_local int pool_marks[256];
static _Thread_local int pool_depth;

void *so_autorelease(void *obj)
{
    live(obj, "autorelease of");
    if (pool_depth == 0)
        so_violation("autorelease of a %s with no pool in place (it leaks on a Mac)",
                     ((so_object *)obj)->cls->name);
    if (pool_n == pool_cap && mq_grow(&pool_objs, &pool_cap, pool_n + 1, sizeof *pool_objs, 256))
        so_violation("out of memory");
    pool_objs[pool_n++] = obj;
    return obj;
}

void *objc_autoreleasePoolPush(void)
{
    if (pool_depth == 256)
        so_violation("autorelease pools nested 256 deep");
    pool_marks[pool_depth++] = pool_n;
    return (void *)(uintptr_t)pool_depth; /* the token: this pool's depth */
}

void objc_autoreleasePoolPop(void *token)
{
    int depth = (int)(uintptr_t)token;
    if (depth < 1 || depth > pool_depth)
        so_violation("pop of autorelease pool %d, but %d are in place", depth, pool_depth);
    int mark = pool_marks[depth - 1];
    while (pool_n > mark)
        so_release(pool_objs[--pool_n]); /* releases may autorelease more: re-read n */
    pool_depth = depth - 1;
}

/* ---- selectors and classes ------------------------------------------------ */

static char **selectors;
static int nselectors, cap_selectors;

SEL sel_registerName(const char *name)
{
    pthread_mutex_lock(&lock);
    for (int i = 0; i < nselectors; i++)
        if (!strcmp(selectors[i], name)) {
            pthread_mutex_unlock(&lock);
            return selectors[i];
        }
    if (nselectors == cap_selectors &&
        mq_grow(&selectors, &cap_selectors, nselectors + 1, sizeof *selectors, 64))
        so_violation("out of memory");
    char *s = strdup(name);
    if (!s)
        so_violation("out of memory");
    selectors[nselectors++] = s;
    pthread_mutex_unlock(&lock);
    return s;
}

id objc_getClass(const char *name)
{
    so_class *c = so_class_named(name);
    return c && c->allocatable ? (id)c : NULL;
}

/* ---- the message lookup ------------------------------------------------------ */

static _Thread_local const char *pending[64]; /* casts announced, innermost last */
static _Thread_local int npending;

/* objc_rt.c's MSG: the C spelling of the cast the next message is sent through. */
void mq_objc_expect_signature(const char *c_spelling)
{
    if (npending == 64)
        so_violation("64 casts announced and no message sent");
    pending[npending++] = c_spelling;
}

static const decl_method *declared(const so_class *c, const char *sel, int class_method)
{
    for (; c; c = c->super)
        for (int i = 0; i < NDECL_METHODS; i++)
            if (decl_methods[i].class_method == class_method && !strcmp(decl_methods[i].sel, sel) &&
                !strcmp(decl_methods[i].cls, c->name))
                return &decl_methods[i];
    return NULL;
}

/* A declaration of sel on any class, with this signature (a message to nil:
 * the receiver's class is unknown). */
static const decl_method *declared_anywhere(const char *sel, const char *canon)
{
    for (int i = 0; i < NDECL_METHODS; i++)
        if (!strcmp(decl_methods[i].sel, sel) && !strcmp(decl_methods[i].sig, canon))
            return &decl_methods[i];
    return NULL;
}

static IMP implemented(const so_class *c, const char *sel, int class_method)
{
    static const struct {
        const so_method *m;
        const int *n;
    } tables[] = {{so_foundation_methods, &so_foundation_nmethods},
                  {so_device_methods, &so_device_nmethods},
                  {so_command_methods, &so_command_nmethods}};
    for (; c; c = c->super)
        for (size_t t = 0; t < sizeof tables / sizeof tables[0]; t++)
            for (int i = 0; i < *tables[t].n; i++) {
                const so_method *m = &tables[t].m[i];
                if (m->class_method == class_method && !strcmp(m->sel, sel) &&
                    !strcmp(m->cls, c->name))
                    return m->imp;
            }
    return NULL;
}

static long nil_long(void) { return 0; }
static double nil_double(void) { return 0; }

/* Called by objc_msgSend (msgsend.S) with the receiver and the selector;
 * returns the implementation it jumps to with the caller's arguments. */
IMP mq_standin_lookup(id self, SEL sel)
{
    if (npending == 0)
        so_violation("[%s] sent without a typed cast: every message goes through objc_rt.h's "
                     "MSG with the method's C type", (const char *)sel);
    const char *cast = pending[--npending];
    char canon[256];
    if (so_canonical_signature(cast, canon, sizeof canon))
        so_violation("[%s] cast as %s: a type Apple's declarations have no name for",
                     (const char *)sel, cast);
    so_count.messages++;
    so_count.casts_checked++;
    if (!self) { /* messaging nil returns zero, as on a Mac */
        if (!declared_anywhere(sel, canon))
            so_violation("[nil %s] cast as %s: no Apple class declares that selector with "
                         "that type", (const char *)sel, canon);
        return strncmp(canon, "double(", 7) ? (IMP)nil_long : (IMP)nil_double;
    }
    so_object *o = live(self, "message to");
    int class_method = o->magic == SO_CLASS;
    const so_class *c = class_method ? (const so_class *)o : o->cls;
    const decl_method *d = declared(c, sel, class_method);
    if (!d)
        so_violation("%c[%s %s]: Apple's headers declare no such method on %s or its "
                     "superclasses (unrecognized selector)",
                     class_method ? '+' : '-', c->name, (const char *)sel, c->name);
    if (strcmp(d->sig, canon))
        so_violation("%c[%s %s] cast as %s (%s); Apple declares %s on %s",
                     class_method ? '+' : '-', c->name, (const char *)sel, canon, cast, d->sig,
                     d->cls);
    IMP imp = implemented(c, sel, class_method);
    if (!imp)
        so_violation("%c[%s %s]: declared by Apple, not implemented by the stand-in",
                     class_method ? '+' : '-', c->name, (const char *)sel);
    return imp;
}

/* For the test suite's static check of every cast in the sources: 0 when
 * some class of Apple's declares sel with the cast's type; -1 and why. */
int mq_standin_check_cast(const char *sel, const char *c_spelling, char *why, size_t n)
{
    char canon[256];
    if (so_canonical_signature(c_spelling, canon, sizeof canon)) {
        snprintf(why, n, "%s: the cast %s has a type Apple's declarations have no name for", sel,
                 c_spelling);
        return -1;
    }
    if (declared_anywhere(sel, canon))
        return 0;
    const decl_method *any = NULL;
    for (int i = 0; i < NDECL_METHODS && !any; i++)
        if (!strcmp(decl_methods[i].sel, sel))
            any = &decl_methods[i];
    if (any)
        snprintf(why, n, "%s cast as %s (%s); Apple declares %s on %s", sel, canon, c_spelling,
                 any->sig, any->cls);
    else
        snprintf(why, n, "%s: no class of Apple's declares that selector", sel);
    return -1;
}

/* Does an instance of c answer sel (respondsToSelector:)? */
int so_responds(const so_class *c, const char *sel)
{
    if (so_cfg.macos < 15 && !strcmp(sel, "setMathMode:"))
        return 0; /* macOS 14 has no MTLCompileOptions.mathMode */
    return declared(c, sel, 0) && implemented(c, sel, 0);
}

/* Every method the stand-in implements must be Apple's, with Apple's type. */
static void check_own_methods(void)
{
    const so_method *tables[] = {so_foundation_methods, so_device_methods, so_command_methods};
    const int n[] = {so_foundation_nmethods, so_device_nmethods, so_command_nmethods};
    for (int t = 0; t < 3; t++)
        for (int i = 0; i < n[t]; i++) {
            const so_method *m = &tables[t][i];
            char canon[256];
            const so_class *c = so_class_named(m->cls);
            const decl_method *d = c ? declared(c, m->sel, m->class_method) : NULL;
            if (so_canonical_signature(m->c_spelling, canon, sizeof canon) || !d ||
                strcmp(d->sig, canon))
                so_violation("the stand-in's %c[%s %s] is typed %s; Apple declares %s",
                             m->class_method ? '+' : '-', m->cls, m->sel, m->c_spelling,
                             d ? d->sig : "no such method");
        }
}

/* ---- configuration and report ------------------------------------------------ */

static long env_long(const char *name, long dflt)
{
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 0) : dflt;
}

static void parse_faults(const char *list)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", list ? list : "");
    for (char *save = NULL, *f = strtok_r(buf, ",", &save); f; f = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(f, '=');
        long v = eq ? strtol(eq + 1, NULL, 0) : 0;
        if (eq)
            *eq = 0;
        if (!strcmp(f, "no-default-device"))
            so_cfg.no_default_device = 1;
        else if (!strcmp(f, "no-device"))
            so_cfg.no_device = 1;
        else if (!strcmp(f, "compile-error"))
            so_cfg.compile_error = 1;
        else if (!strcmp(f, "pipeline-max"))
            so_cfg.pipeline_max = v;
        else if (!strcmp(f, "simd-width"))
            so_cfg.simd_width = v;
        else if (!strcmp(f, "cb-fail"))
            so_cfg.cb_fail = v;
        else if (!strcmp(f, "cb-fail-from"))
            so_cfg.cb_fail_from = v;
        else if (!strcmp(f, "alloc-fail"))
            so_cfg.alloc_fail = v;
        else if (!strcmp(f, "alloc-fail-from"))
            so_cfg.alloc_fail_from = v;
        else
            so_violation("MQ_STANDIN_FAULTS: unknown fault '%s'", f);
    }
}

static void report_write(const char *why)
{
    const char *path = getenv("MQ_STANDIN_REPORT");
    long alive = 0;
    char kinds[512] = "";
    for (so_object *o = all_objects; o; o = o->next_all)
        if (o->magic == SO_ALIVE) {
            alive++;
            size_t l = strlen(kinds);
            if (l < sizeof kinds - 64)
                snprintf(kinds + l, sizeof kinds - l, " %s", o->cls->name);
        }
    if (alive && !why)
        fprintf(stderr, "objc stand-in: %ld objects never released:%s\n", alive, kinds);
    FILE *f = path && *path ? fopen(path, "w") : NULL;
    if (!f)
        return;
    fprintf(f, "violation=%s\nmessages=%ld\ncasts_checked=%ld\nobjects_alive=%ld\n"
               "objects_alive_kinds=%s\ncompiles=%ld\ncompiles_fast_math=%ld\n"
               "language_version=%ld\ncommand_buffers=%ld\nfailed_command_buffers=%ld\n"
               "dispatches=%ld\nbuffers_made=%ld\nbuffers_failed=%ld\nbuffer_bytes=%llu\n"
               "peak_buffer_bytes=%llu\nbuffer_bytes_made=%llu\nworking_set=%llu\npools_open=%d\n"
               "services_open=%d\n",
            why ? why : "", so_count.messages, so_count.casts_checked, alive, kinds,
            so_count.compiles, so_count.compiles_fast_math, so_count.language_version,
            so_count.command_buffers, so_count.failed_command_buffers, so_count.dispatches,
            so_count.buffers_made, so_count.buffers_failed,
            (unsigned long long)so_count.buffer_bytes,
            (unsigned long long)so_count.peak_buffer_bytes,
            (unsigned long long)so_count.buffer_bytes_made, (unsigned long long)so_cfg.working_set,
            pool_depth, so_services_open());
    fclose(f);
}

static void report_at_exit(void) { report_write(NULL); }

__attribute__((constructor)) static void standin_init(void)
{
    make_classes();
    check_own_methods();
    const char *dev = getenv("MQ_STANDIN_DEVICE"), *arch = getenv("MQ_STANDIN_ARCH");
    snprintf(so_cfg.device, sizeof so_cfg.device, "%s", dev && *dev ? dev : "Apple M4 Max");
    snprintf(so_cfg.arch, sizeof so_cfg.arch, "%s", arch && *arch ? arch : "applegpu_g16s");
    so_cfg.gpu_cores = (int)env_long("MQ_STANDIN_GPU_CORES", 40);
    so_cfg.macos = (int)env_long("MQ_STANDIN_MACOS", 15);
    so_cfg.working_set = (uint64_t)env_long("MQ_STANDIN_WORKING_SET", 48L << 30);
    so_cfg.tg_mem = (uint64_t)env_long("MQ_STANDIN_TG_MEM", 32768);
    parse_faults(getenv("MQ_STANDIN_FAULTS"));
    atexit(report_at_exit);
}
