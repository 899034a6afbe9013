/* foundation.c - the stand-in's Foundation (NSObject's reference counting,
 * NSString, NSNumber, NSDictionary, NSArray, NSError) and the few
 * CoreFoundation and IOKit functions the GPU core count is read with.
 * Ownership follows Cocoa's rules: alloc/new/copy and CF's Create/Copy
 * return +1, everything else is autoreleased, so a caller that forgets a
 * release leaks (the report counts it) and one that releases what it does
 * not own over-releases (a violation). */
#include <stdlib.h>
#include <string.h>

#include "standin.h"

typedef struct {
    so_object o;
    char *utf8;
} so_string;

typedef struct {
    so_object o;
    long long v;
} so_number;

typedef struct {
    so_object o;
    int n;
    id *keys, *vals; /* retained */
} so_dict;

typedef struct {
    so_object o;
    int n;
    id *items; /* retained */
} so_array;

typedef struct {
    so_object o;
    id description; /* an NSString, retained */
} so_error;

/* ---- constructors the other files use -------------------------------------- */

static void string_dealloc(so_object *o) { free(((so_string *)o)->utf8); }

id so_string_new(const char *utf8)
{
    so_string *s = so_new("NSString", sizeof *s, string_dealloc);
    s->utf8 = strdup(utf8 ? utf8 : "");
    if (!s->utf8)
        so_violation("out of memory");
    return s;
}

const char *so_string_utf8(id s)
{
    return so_is(s, "NSString") ? ((so_string *)s)->utf8 : NULL;
}

id so_number_new(long long v)
{
    so_number *n = so_new("NSNumber", sizeof *n, NULL);
    n->v = v;
    return n;
}

int so_number_value(id n, long long *v)
{
    if (!so_is(n, "NSNumber"))
        return -1;
    *v = ((so_number *)n)->v;
    return 0;
}

static void error_dealloc(so_object *o) { so_release(((so_error *)o)->description); }

id so_error_new(const char *description)
{
    so_error *e = so_new("NSError", sizeof *e, error_dealloc);
    e->description = so_string_new(description);
    return e;
}

static void array_dealloc(so_object *o)
{
    so_array *a = (so_array *)o;
    for (int i = 0; i < a->n; i++)
        so_release(a->items[i]);
    free(a->items);
}

id so_array_new(const id *items, int n)
{
    so_array *a = so_new("NSArray", sizeof *a, array_dealloc);
    a->items = calloc((size_t)(n > 0 ? n : 1), sizeof *a->items);
    if (!a->items)
        so_violation("out of memory");
    for (int i = 0; i < n; i++)
        a->items[a->n++] = so_retain(items[i]);
    return a;
}

static void dict_dealloc(so_object *o)
{
    so_dict *d = (so_dict *)o;
    for (int i = 0; i < d->n; i++) {
        so_release(d->keys[i]);
        so_release(d->vals[i]);
    }
    free(d->keys);
    free(d->vals);
}

int so_dict_count(id d) { return so_is(d, "NSDictionary") ? ((so_dict *)d)->n : -1; }

void so_dict_at(id d, int i, id *key, id *value)
{
    *key = ((so_dict *)d)->keys[i];
    *value = ((so_dict *)d)->vals[i];
}

/* ---- NSObject ----------------------------------------------------------------- */

SO_PROTO0(obj_release, void);
SO_PROTO0(obj_retain, id);
SO_PROTO0(obj_autorelease, id);
SO_PROTO(obj_responds, BOOL, SEL);
SO_PROTO0(cls_alloc, id);
SO_PROTO0(obj_init, id);

static void obj_release(id self, SEL cmd) { (void)cmd, so_release(self); }
static id obj_retain(id self, SEL cmd) { return (void)cmd, so_retain(self); }
static id obj_autorelease(id self, SEL cmd) { return (void)cmd, so_autorelease(self); }

static BOOL obj_responds(id self, SEL cmd, SEL sel)
{
    (void)cmd;
    return (BOOL)so_responds(((so_object *)self)->cls, (const char *)sel);
}

static id cls_alloc(id self, SEL cmd)
{
    (void)cmd;
    const so_class *c = (const so_class *)self;
    size_t size = so_instance_size(c->name);
    if (!size)
        so_violation("+[%s alloc]: the stand-in makes no %s this way", c->name, c->name);
    return so_new(c->name, size, NULL); /* init sets what it holds */
}

/* init of a plain object: itself (MTLCompileOptions has its own, device.c). */
static id obj_init(id self, SEL cmd) { return (void)cmd, self; }

/* ---- NSString, NSNumber, NSDictionary, NSArray, NSError ------------------------ */

SO_PROTO(str_with_utf8, id, const char *);
SO_PROTO0(str_utf8, const char *);
SO_PROTO(num_with_int, id, int);
SO_PROTO(dict_with, id, const id *, const id *, NSUInteger);
SO_PROTO0(arr_count, NSUInteger);
SO_PROTO(arr_at, id, NSUInteger);
SO_PROTO0(err_description, id);

static id str_with_utf8(id self, SEL cmd, const char *s)
{
    (void)self, (void)cmd;
    return s ? so_autorelease(so_string_new(s)) : NULL;
}

static const char *str_utf8(id self, SEL cmd) { return (void)cmd, ((so_string *)self)->utf8; }

static id num_with_int(id self, SEL cmd, int v)
{
    (void)self, (void)cmd;
    return so_autorelease(so_number_new(v));
}

static id dict_with(id self, SEL cmd, const id *objects, const id *keys, NSUInteger n)
{
    (void)self, (void)cmd;
    so_dict *d = so_new("NSDictionary", sizeof *d, dict_dealloc);
    d->keys = calloc(n ? n : 1, sizeof *d->keys);
    d->vals = calloc(n ? n : 1, sizeof *d->vals);
    if (!d->keys || !d->vals)
        so_violation("out of memory");
    for (NSUInteger i = 0; i < n; i++) {
        if (!objects[i] || !keys[i])
            so_violation("+[NSDictionary dictionaryWithObjects:forKeys:count:]: a nil "
                         "%s at %lu (NSInvalidArgumentException)",
                         objects[i] ? "key" : "object", (unsigned long)i);
        d->keys[d->n] = so_retain(keys[i]);
        d->vals[d->n++] = so_retain(objects[i]);
    }
    return so_autorelease(d);
}

static NSUInteger arr_count(id self, SEL cmd) { return (void)cmd, (NSUInteger)((so_array *)self)->n; }

static id arr_at(id self, SEL cmd, NSUInteger i)
{
    (void)cmd;
    so_array *a = self;
    if (i >= (NSUInteger)a->n)
        so_violation("-[NSArray objectAtIndex:]: index %lu beyond bounds [0 .. %d] "
                     "(NSRangeException)", (unsigned long)i, a->n - 1);
    return a->items[i];
}

static id err_description(id self, SEL cmd)
{
    (void)cmd;
    return so_autorelease(so_retain(((so_error *)self)->description));
}

const so_method so_foundation_methods[] = {
    SO_ROW0("NSObject", "release", 0, obj_release, void),
    SO_ROW0("NSObject", "retain", 0, obj_retain, id),
    SO_ROW0("NSObject", "autorelease", 0, obj_autorelease, id),
    SO_ROW("NSObject", "respondsToSelector:", 0, obj_responds, BOOL, SEL),
    SO_ROW0("NSObject", "alloc", 1, cls_alloc, id),
    SO_ROW0("NSObject", "init", 0, obj_init, id),
    SO_ROW("NSString", "stringWithUTF8String:", 1, str_with_utf8, id, const char *),
    SO_ROW0("NSString", "UTF8String", 0, str_utf8, const char *),
    SO_ROW("NSNumber", "numberWithInt:", 1, num_with_int, id, int),
    SO_ROW("NSDictionary", "dictionaryWithObjects:forKeys:count:", 1, dict_with, id, const id *,
           const id *, NSUInteger),
    SO_ROW0("NSArray", "count", 0, arr_count, NSUInteger),
    SO_ROW("NSArray", "objectAtIndex:", 0, arr_at, id, NSUInteger),
    SO_ROW0("NSError", "localizedDescription", 0, err_description, id),
};
const int so_foundation_nmethods = sizeof so_foundation_methods / sizeof so_foundation_methods[0];

/* ---- CoreFoundation and IOKit: the IORegistry's gpu-core-count --------------- */

#define AGX_SERVICE 0x4147u /* the one service the stand-in's registry has */
static int services_open;

id IOServiceMatching(const char *name)
{
    return so_string_new(name); /* the "dictionary": what it matches */
}

uint32_t IOServiceGetMatchingService(uint32_t main_port, id matching)
{
    (void)main_port;
    const char *what = so_string_utf8(matching);
    int found = what && !strcmp(what, "AGXAccelerator") && so_cfg.gpu_cores > 0;
    so_release(matching); /* consumed, as IOKit does */
    services_open += found;
    return found ? AGX_SERVICE : 0;
}

id IORegistryEntryCreateCFProperty(uint32_t entry, id key, id allocator, uint32_t options)
{
    (void)allocator, (void)options;
    if (entry != AGX_SERVICE)
        so_violation("IORegistryEntryCreateCFProperty of %u, a service never returned", entry);
    const char *k = so_string_utf8(key);
    return k && !strcmp(k, "gpu-core-count") ? so_number_new(so_cfg.gpu_cores) : NULL;
}

int IOObjectRelease(uint32_t object)
{
    if (object != AGX_SERVICE || services_open <= 0)
        so_violation("IOObjectRelease of %u, not an open service (over-release)", object);
    services_open--;
    return 0;
}

id CFStringCreateWithCString(id allocator, const char *s, uint32_t encoding)
{
    (void)allocator;
    if (encoding != 0x08000100u)
        so_violation("CFStringCreateWithCString with encoding %#x (the stand-in reads UTF-8)",
                     encoding);
    return so_string_new(s);
}

unsigned long CFGetTypeID(id cf) { return (unsigned long)((so_object *)cf)->cls->cf_type; }
unsigned long CFNumberGetTypeID(void) { return (unsigned long)so_class_named("NSNumber")->cf_type; }

BOOL CFNumberGetValue(id number, long type, void *out)
{
    long long v;
    if (so_number_value(number, &v))
        so_violation("CFNumberGetValue of something that is not a number");
    if (type != 3 /* kCFNumberSInt32Type */)
        so_violation("CFNumberGetValue as type %ld (the stand-in has kCFNumberSInt32Type)", type);
    *(int32_t *)out = (int32_t)v;
    return 1;
}

void CFRelease(id cf)
{
    if (!cf)
        so_violation("CFRelease(NULL) (a crash on a Mac)");
    so_release(cf);
}

int so_services_open(void) { return services_open; }
