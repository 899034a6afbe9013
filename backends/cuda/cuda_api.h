/* cuda_api.h - the CUDA driver API and NVRTC as the cuda backend reaches
 * them: loaded at run time with dlopen (libcuda.so.1, libnvrtc.so), so the
 * project builds and runs where CUDA is absent, as metal.c reaches
 * Objective-C. Only the calls the backend makes, with the driver API's
 * documented C signatures (the CUDA Driver API and NVRTC reference
 * manuals); handles are opaque pointers, device addresses 64-bit. */
#ifndef MQ_CUDA_API_H
#define MQ_CUDA_API_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult; /* 0: CUDA_SUCCESS */
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUevent_st *CUevent;
typedef struct CUstream_st *CUstream;
typedef uint64_t CUdeviceptr;
typedef int nvrtcResult; /* 0: NVRTC_SUCCESS */
typedef struct _nvrtcProgram *nvrtcProgram;

/* cuDeviceGetAttribute's attributes (CUdevice_attribute) */
enum {
    MQ_CU_MAX_THREADS_PER_BLOCK = 1,
    MQ_CU_MAX_SHARED_PER_BLOCK = 8,
    MQ_CU_WARP_SIZE = 10,
    MQ_CU_CLOCK_KHZ = 13,
    MQ_CU_SM_COUNT = 16,
    MQ_CU_MEMORY_CLOCK_KHZ = 36,
    MQ_CU_BUS_WIDTH = 37,
    MQ_CU_L2_BYTES = 38,
    MQ_CU_MAX_THREADS_PER_SM = 39,
    MQ_CU_CC_MAJOR = 75,
    MQ_CU_CC_MINOR = 76,
    MQ_CU_MAX_SHARED_PER_SM = 81,
    MQ_CU_MAX_BLOCKS_PER_SM = 106,
};
/* cuFuncGetAttribute's (CUfunction_attribute) */
enum { MQ_CU_FUNC_NUM_REGS = 4, MQ_CU_FUNC_LOCAL_BYTES = 3 };

typedef struct {
    void *cuda, *nvrtc;
    CUresult (*Init)(unsigned);
    CUresult (*DriverGetVersion)(int *);
    CUresult (*DeviceGetCount)(int *);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DeviceGetName)(char *, int, CUdevice);
    CUresult (*DeviceGetAttribute)(int *, int, CUdevice);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*DevicePrimaryCtxRelease)(CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*CtxSynchronize)(void);
    CUresult (*ModuleLoadData)(CUmodule *, const void *);
    CUresult (*ModuleUnload)(CUmodule);
    CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*FuncGetAttribute)(int *, int, CUfunction);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
    CUresult (*MemsetD8)(CUdeviceptr, unsigned char, size_t);
    CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, CUstream, void **, void **);
    CUresult (*EventCreate)(CUevent *, unsigned);
    CUresult (*EventDestroy)(CUevent);
    CUresult (*EventRecord)(CUevent, CUstream);
    CUresult (*EventSynchronize)(CUevent);
    CUresult (*EventElapsedTime)(float *, CUevent, CUevent);
    CUresult (*GetErrorString)(CUresult, const char **);
    nvrtcResult (*Version)(int *, int *);
    nvrtcResult (*CreateProgram)(nvrtcProgram *, const char *, const char *, int,
                                 const char *const *, const char *const *);
    nvrtcResult (*CompileProgram)(nvrtcProgram, int, const char *const *);
    nvrtcResult (*GetProgramLogSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetProgramLog)(nvrtcProgram, char *);
    nvrtcResult (*GetCUBINSize)(nvrtcProgram, size_t *);
    nvrtcResult (*GetCUBIN)(nvrtcProgram, char *);
    nvrtcResult (*DestroyProgram)(nvrtcProgram *);
    const char *(*nvrtcErrorString)(nvrtcResult);
} mq_cuda_api;

/* Load both libraries and every entry point: 0, or -1 and "unavailable:
 * WHY" (no libcuda.so.1, no NVRTC, a missing symbol). $MQ_CUDA_LIB and
 * $MQ_NVRTC_LIB name other files. */
int mq_cuda_api_load(mq_cuda_api *api, char *why, size_t n);
/* NVRTC alone (no driver, no GPU needed: compiling only, e.g. CI's check
 * of every program, tests/test_nvrtc.c): the nvrtc fields, api->cuda NULL;
 * 0, or -1 and "unavailable: WHY". */
int mq_nvrtc_api_load(mq_cuda_api *api, char *why, size_t n);
void mq_cuda_api_unload(mq_cuda_api *api);

/* "CUDA_ERROR_X: text" for a driver result. */
const char *mq_cuda_error(const mq_cuda_api *api, CUresult r);

#endif
