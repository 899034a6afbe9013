/* objc_rt.c - see objc_rt.h. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "objc_rt.h"

void (*mq_objc_msg(const objc_rt *rt, const char *c_spelling))(void)
{
    if (rt->expect_signature)
        rt->expect_signature(c_spelling);
    return rt->msg;
}

id mq_objc_send0(const objc_rt *rt, id obj, const char *sel)
{
    return MSG0(rt, id)(obj, rt->sel(sel));
}

BOOL mq_objc_responds(const objc_rt *rt, id obj, const char *sel)
{
    return MSG(rt, BOOL, SEL)(obj, rt->sel("respondsToSelector:"), rt->sel(sel));
}

id mq_objc_nsstring(const objc_rt *rt, const char *s)
{
    return MSG(rt, id, const char *)(rt->get_class("NSString"), rt->sel("stringWithUTF8String:"),
                                     s);
}

const char *mq_objc_cstring(const objc_rt *rt, id str)
{
    return str ? MSG0(rt, const char *)(str, rt->sel("UTF8String")) : "";
}

const char *mq_objc_error_text(const objc_rt *rt, id error)
{
    return error ? mq_objc_cstring(rt, mq_objc_send0(rt, error, "localizedDescription")) : "no error object";
}

static void *open_first(const char *const *paths)
{
    for (int i = 0; paths[i]; i++) {
        void *h = dlopen(paths[i], RTLD_LAZY | RTLD_GLOBAL);
        if (h)
            return h;
    }
    return NULL;
}

#define FRAMEWORK(name) "/System/Library/Frameworks/" name ".framework/" name

/* The optional entry points: MTLCopyAllDevices, IOKit and CoreFoundation
 * (the core count), the stand-in's signature check. */
static void load_optional(objc_rt *rt)
{
    *(void **)&rt->copy_all_devices = dlsym(rt->metal, "MTLCopyAllDevices");
    *(void **)&rt->expect_signature = dlsym(rt->objc, "mq_objc_expect_signature");
    if (!rt->iokit || !rt->cf)
        return;
    *(void **)&rt->io_service_matching = dlsym(rt->iokit, "IOServiceMatching");
    *(void **)&rt->io_get_matching_service = dlsym(rt->iokit, "IOServiceGetMatchingService");
    *(void **)&rt->io_create_property = dlsym(rt->iokit, "IORegistryEntryCreateCFProperty");
    *(void **)&rt->io_release = dlsym(rt->iokit, "IOObjectRelease");
    *(void **)&rt->cf_string = dlsym(rt->cf, "CFStringCreateWithCString");
    *(void **)&rt->cf_number_value = dlsym(rt->cf, "CFNumberGetValue");
    *(void **)&rt->cf_type_id = dlsym(rt->cf, "CFGetTypeID");
    *(void **)&rt->cf_number_type_id = dlsym(rt->cf, "CFNumberGetTypeID");
    *(void **)&rt->cf_release = dlsym(rt->cf, "CFRelease");
}

int mq_objc_load(objc_rt *rt, char *why, size_t n)
{
    static const char *const objc_paths[] = {"/usr/lib/libobjc.A.dylib", "libobjc.A.dylib", NULL};
    static const char *const foundation_paths[] = {FRAMEWORK("Foundation"), NULL};
    static const char *const metal_paths[] = {FRAMEWORK("Metal"), NULL};
    static const char *const iokit_paths[] = {FRAMEWORK("IOKit"), NULL};
    static const char *const cf_paths[] = {FRAMEWORK("CoreFoundation"), NULL};
    /* a command-line tool's MTLCreateSystemDefaultDevice may return no
     * device unless CoreGraphics is loaded (Apple's MTLCreateSystemDefaultDevice
     * documentation; public reports from M1 command-line tools) */
    static const char *const cg_paths[] = {FRAMEWORK("CoreGraphics"), NULL};
    memset(rt, 0, sizeof *rt);
    const char *standin = getenv("MQ_OBJC_RUNTIME");
    if (standin && *standin) { /* one library stands in for all of them */
        void *h = dlopen(standin, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            snprintf(why, n, "unavailable: MQ_OBJC_RUNTIME=%s: %s", standin, dlerror());
            return -1;
        }
        rt->objc = rt->foundation = rt->metal = rt->iokit = rt->cf = h;
    } else {
        rt->metal = open_first(metal_paths);
        if (!rt->metal) {
            snprintf(why, n, "unavailable: no Metal framework (%s; Metal runs only on macOS with "
                             "an Apple GPU)",
                     metal_paths[0]);
            return -1;
        }
        rt->objc = open_first(objc_paths);
        rt->foundation = open_first(foundation_paths);
        rt->iokit = open_first(iokit_paths);
        rt->cf = open_first(cf_paths);
        (void)open_first(cg_paths);
        if (!rt->objc || !rt->foundation) {
            snprintf(why, n, "unavailable: Metal is present but %s is not",
                     rt->objc ? "Foundation" : "libobjc");
            return -1;
        }
    }
    *(void **)&rt->get_class = dlsym(rt->objc, "objc_getClass");
    *(void **)&rt->sel = dlsym(rt->objc, "sel_registerName");
    *(void **)&rt->msg = dlsym(rt->objc, "objc_msgSend");
    *(void **)&rt->pool_push = dlsym(rt->objc, "objc_autoreleasePoolPush");
    *(void **)&rt->pool_pop = dlsym(rt->objc, "objc_autoreleasePoolPop");
    *(void **)&rt->create_device = dlsym(rt->metal, "MTLCreateSystemDefaultDevice");
    if (!rt->get_class || !rt->sel || !rt->msg || !rt->pool_push || !rt->pool_pop ||
        !rt->create_device) {
        snprintf(why, n, "unavailable: the Objective-C runtime lacks an entry point");
        return -1;
    }
    load_optional(rt);
    return 0;
}

void mq_objc_release(const objc_rt *rt, id obj)
{
    if (obj)
        MSG0(rt, void)(obj, rt->sel("release"));
}

id mq_objc_metal_device(const objc_rt *rt)
{
    id dev = rt->create_device();
    if (dev || !rt->copy_all_devices)
        return dev;
    id all = rt->copy_all_devices(); /* +1, an NSArray */
    if (!all)
        return NULL;
    if (MSG0(rt, NSUInteger)(all, rt->sel("count")) > 0) {
        dev = MSG(rt, id, NSUInteger)(all, rt->sel("objectAtIndex:"), 0);
        MSG0(rt, id)(dev, rt->sel("retain")); /* ours, past the array's release */
    }
    mq_objc_release(rt, all);
    return dev;
}

int mq_objc_gpu_core_count(const objc_rt *rt)
{
    if (!rt->io_service_matching || !rt->io_get_matching_service || !rt->io_create_property ||
        !rt->io_release || !rt->cf_string || !rt->cf_number_value || !rt->cf_type_id ||
        !rt->cf_number_type_id || !rt->cf_release)
        return 0;
    /* IOServiceMatching's dictionary is consumed by IOServiceGetMatchingService;
     * the GPU is the AGXAccelerator service (philipturner/applegpuinfo reads
     * its gpu-core-count the same way) */
    id match = rt->io_service_matching("AGXAccelerator");
    uint32_t svc = match ? rt->io_get_matching_service(0 /* kIOMainPortDefault */, match) : 0;
    if (!svc)
        return 0;
    int cores = 0;
    id key = rt->cf_string(NULL, "gpu-core-count", 0x08000100u /* kCFStringEncodingUTF8 */);
    id v = key ? rt->io_create_property(svc, key, NULL, 0) : NULL;
    if (v && rt->cf_type_id(v) == rt->cf_number_type_id() &&
        !rt->cf_number_value(v, 3 /* kCFNumberSInt32Type */, &cores))
        cores = 0;
    if (v)
        rt->cf_release(v);
    if (key)
        rt->cf_release(key);
    rt->io_release(svc);
    return cores > 0 && cores < 4096 ? cores : 0;
}
