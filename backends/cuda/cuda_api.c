/* cuda_api.c - see cuda_api.h. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_api.h"

/* The first of the names that dlopen finds. */
static void *open_first(const char *env, const char *const *names, char *tried, size_t n)
{
    const char *e = getenv(env);
    if (e && *e) {
        void *h = dlopen(e, RTLD_NOW | RTLD_LOCAL);
        snprintf(tried, n, "%s", h ? "" : dlerror());
        return h;
    }
    size_t used = 0;
    tried[0] = 0;
    for (int i = 0; names[i]; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h)
            return h;
        if (used < n)
            used += (size_t)snprintf(tried + used, n - used, "%s%s", used ? ", " : "", names[i]);
    }
    return NULL;
}

/* Each entry point by its exported name (the _v2 ABI where the driver has one). */
#define SYM(lib, field, name)                                                                \
    do {                                                                                   \
        *(void **)&api->field = dlsym(api->lib, name);                                     \
        if (!api->field) {                                                                 \
            snprintf(why, n, "unavailable: lib%s has no %s", #lib, name);                  \
            goto fail;                                                                     \
        }                                                                                  \
    } while (0)

/* api->nvrtc: 0, or -1 and why. */
static int open_nvrtc(mq_cuda_api *api, char *why, size_t n)
{
    static const char *const nvrtc_names[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12",
                                              "libnvrtc.so.11.2", NULL};
    char tried[512];
    api->nvrtc = open_first("MQ_NVRTC_LIB", nvrtc_names, tried, sizeof tried);
    if (!api->nvrtc) {
        snprintf(why, n, "unavailable: no NVRTC (dlopen %s; set MQ_NVRTC_LIB to libnvrtc's path)",
                 tried);
        return -1;
    }
    return 0;
}

/* NVRTC's entry points from api->nvrtc: 0, or -1 and why. */
static int nvrtc_syms(mq_cuda_api *api, char *why, size_t n)
{
    SYM(nvrtc, Version, "nvrtcVersion");
    SYM(nvrtc, CreateProgram, "nvrtcCreateProgram");
    SYM(nvrtc, CompileProgram, "nvrtcCompileProgram");
    SYM(nvrtc, GetProgramLogSize, "nvrtcGetProgramLogSize");
    SYM(nvrtc, GetProgramLog, "nvrtcGetProgramLog");
    SYM(nvrtc, GetCUBINSize, "nvrtcGetCUBINSize");
    SYM(nvrtc, GetCUBIN, "nvrtcGetCUBIN");
    SYM(nvrtc, DestroyProgram, "nvrtcDestroyProgram");
    SYM(nvrtc, nvrtcErrorString, "nvrtcGetErrorString");
    return 0;
fail:
    return -1;
}

int mq_cuda_api_load(mq_cuda_api *api, char *why, size_t n)
{
    static const char *const cuda_names[] = {"libcuda.so.1", "libcuda.so", NULL};
    char tried[512];
    memset(api, 0, sizeof *api);
    api->cuda = open_first("MQ_CUDA_LIB", cuda_names, tried, sizeof tried);
    if (!api->cuda) {
        snprintf(why, n, "unavailable: no CUDA driver (dlopen %s)", tried);
        return -1;
    }
    if (open_nvrtc(api, why, n))
        goto fail;
    SYM(cuda, Init, "cuInit");
    SYM(cuda, DriverGetVersion, "cuDriverGetVersion");
    SYM(cuda, DeviceGetCount, "cuDeviceGetCount");
    SYM(cuda, DeviceGet, "cuDeviceGet");
    SYM(cuda, DeviceGetName, "cuDeviceGetName");
    SYM(cuda, DeviceGetAttribute, "cuDeviceGetAttribute");
    SYM(cuda, DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
    SYM(cuda, DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
    SYM(cuda, CtxSetCurrent, "cuCtxSetCurrent");
    SYM(cuda, CtxSynchronize, "cuCtxSynchronize");
    SYM(cuda, ModuleLoadData, "cuModuleLoadData");
    SYM(cuda, ModuleUnload, "cuModuleUnload");
    SYM(cuda, ModuleGetFunction, "cuModuleGetFunction");
    SYM(cuda, FuncGetAttribute, "cuFuncGetAttribute");
    SYM(cuda, MemAlloc, "cuMemAlloc_v2");
    SYM(cuda, MemFree, "cuMemFree_v2");
    SYM(cuda, MemcpyHtoD, "cuMemcpyHtoD_v2");
    SYM(cuda, MemcpyDtoH, "cuMemcpyDtoH_v2");
    SYM(cuda, MemsetD8, "cuMemsetD8_v2");
    SYM(cuda, LaunchKernel, "cuLaunchKernel");
    SYM(cuda, EventCreate, "cuEventCreate");
    SYM(cuda, EventDestroy, "cuEventDestroy_v2");
    SYM(cuda, EventRecord, "cuEventRecord");
    SYM(cuda, EventSynchronize, "cuEventSynchronize");
    *(void **)&api->EventElapsedTime = dlsym(api->cuda, "cuEventElapsedTime_v2");
    if (!api->EventElapsedTime)
        SYM(cuda, EventElapsedTime, "cuEventElapsedTime");
    SYM(cuda, GetErrorString, "cuGetErrorString");
    if (nvrtc_syms(api, why, n))
        goto fail;
    return 0;
fail:
    mq_cuda_api_unload(api);
    return -1;
}

int mq_nvrtc_api_load(mq_cuda_api *api, char *why, size_t n)
{
    memset(api, 0, sizeof *api);
    if (open_nvrtc(api, why, n) || nvrtc_syms(api, why, n)) {
        mq_cuda_api_unload(api);
        return -1;
    }
    return 0;
}

void mq_cuda_api_unload(mq_cuda_api *api)
{
    if (api->nvrtc)
        dlclose(api->nvrtc);
    if (api->cuda)
        dlclose(api->cuda);
    memset(api, 0, sizeof *api);
}

const char *mq_cuda_error(const mq_cuda_api *api, CUresult r)
{
    const char *s = NULL;
    if (!api->GetErrorString || api->GetErrorString(r, &s) || !s)
        return "unknown CUDA error";
    return s;
}
