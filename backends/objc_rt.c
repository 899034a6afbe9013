/* objc_rt.c - see objc_rt.h. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "objc_rt.h"

id mq_objc_send0(const objc_rt *rt, id obj, const char *sel)
{
    return MSG0(rt, id)(obj, rt->sel(sel));
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

int mq_objc_load(objc_rt *rt, char *why, size_t n)
{
    static const char *const objc_paths[] = {"/usr/lib/libobjc.A.dylib", "libobjc.A.dylib", NULL};
    static const char *const foundation_paths[] = {
        "/System/Library/Frameworks/Foundation.framework/Foundation", NULL};
    static const char *const metal_paths[] = {"/System/Library/Frameworks/Metal.framework/Metal",
                                              NULL};
    memset(rt, 0, sizeof *rt);
    rt->metal = open_first(metal_paths);
    if (!rt->metal) {
        snprintf(why, n, "unavailable: no Metal framework (%s; Metal runs only on macOS with an "
                         "Apple GPU)",
                 metal_paths[0]);
        return -1;
    }
    rt->objc = open_first(objc_paths);
    rt->foundation = open_first(foundation_paths);
    if (!rt->objc || !rt->foundation) {
        snprintf(why, n, "unavailable: Metal is present but %s is not",
                 rt->objc ? "Foundation" : "libobjc");
        return -1;
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
    return 0;
}

void mq_objc_release(const objc_rt *rt, id obj)
{
    if (obj)
        MSG0(rt, void)(obj, rt->sel("release"));
}

