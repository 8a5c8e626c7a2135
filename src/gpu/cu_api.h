/*
 * cu_api.h -- the part of the CUDA driver API redjit uses, declared by hand
 * and resolved with dlsym, so that nothing needs CUDA headers to build and
 * nothing needs a driver to run until a GPU is used.  The library's GPU
 * backend (src/gpu) and the GPU benchmark programs (bench/) share it.
 */
#ifndef RED_CU_API_H
#define RED_CU_API_H

#include <dlfcn.h>
#include <stddef.h>

typedef int CUresult;
typedef int CUdevice;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef void *CUevent;      /* void *: gpu.h keeps events without this header */
typedef unsigned long long CUdeviceptr;

#define CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT 16
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76
#define CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING 41
#define CU_POINTER_ATTRIBUTE_MEMORY_TYPE 2
#define CU_MEMORYTYPE_DEVICE 2
#define CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN 97
#define CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES 1
#define CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES 8
#define CUDA_ERROR_OUT_OF_MEMORY 2
#define CUDA_ERROR_INVALID_IMAGE 200
#define CUDA_ERROR_NOT_READY 600
#define CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES 701

typedef struct cu_api {
    CUresult (*Init)(unsigned);
    CUresult (*DeviceGetCount)(int *);
    CUresult (*DeviceGet)(CUdevice *, int);
    CUresult (*DeviceGetAttribute)(int *, int, CUdevice);
    CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*DevicePrimaryCtxRelease)(CUdevice);
    CUresult (*CtxSetCurrent)(CUcontext);
    CUresult (*CtxSynchronize)(void);
    CUresult (*ModuleLoadData)(CUmodule *, const void *);
    CUresult (*ModuleUnload)(CUmodule);
    CUresult (*ModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, CUstream, void **, void **);
    CUresult (*MemAlloc)(CUdeviceptr *, size_t);
    CUresult (*MemFree)(CUdeviceptr);
    CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
    CUresult (*MemsetD8)(CUdeviceptr, unsigned char, size_t);
    CUresult (*GetErrorName)(CUresult, const char **);
    CUresult (*OccupancyMaxActiveBlocksPerMultiprocessor)(int *, CUfunction, int, size_t);
    CUresult (*PointerGetAttribute)(void *, int, CUdeviceptr);
    CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*MemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*MemcpyDtoD)(CUdeviceptr, CUdeviceptr, size_t);
    CUresult (*MemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
    CUresult (*StreamCreate)(CUstream *, unsigned);
    CUresult (*StreamSynchronize)(CUstream);
    CUresult (*MemHostAlloc)(void **, size_t, unsigned);
    CUresult (*StreamQuery)(CUstream);
    CUresult (*MemFreeHost)(void *);
    CUresult (*MemHostRegister)(void *, size_t, unsigned);
    CUresult (*MemHostUnregister)(void *);
    CUresult (*EventCreate)(CUevent *, unsigned);
    CUresult (*EventRecord)(CUevent, CUstream);
    CUresult (*EventSynchronize)(CUevent);
    CUresult (*EventElapsedTime)(float *, CUevent, CUevent);
    CUresult (*EventDestroy)(CUevent);
    CUresult (*FuncSetAttribute)(CUfunction, int, int);
    CUresult (*FuncGetAttribute)(int *, int, CUfunction);
    /* optional (NULL where the driver or the stand-in lacks them): */
    CUresult (*CtxGetDevice)(CUdevice *);   /* the current context's device */
    CUresult (*StreamDestroy)(CUstream);
} cu_api;

static inline void *cu_api_sym(void *h, const char *a, const char *b)
{
    void *p = dlsym(h, a);
    if (!p && b) p = dlsym(h, b);
    return p;
}

/* Fill `c` from libcuda.so.1: 0, or -1 when there is no driver, -2 when it
 * lacks one of the functions (too old). */
static inline int cu_api_load(cu_api *c)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return -1;
#define CUS(f, a, b) *(void **)&c->f = cu_api_sym(h, a, b)
    CUS(Init, "cuInit", NULL);
    CUS(DeviceGetCount, "cuDeviceGetCount", NULL);
    CUS(DeviceGet, "cuDeviceGet", NULL);
    CUS(DeviceGetAttribute, "cuDeviceGetAttribute", NULL);
    CUS(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", NULL);
    CUS(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease");
    CUS(CtxSetCurrent, "cuCtxSetCurrent", NULL);
    CUS(CtxSynchronize, "cuCtxSynchronize", NULL);
    CUS(ModuleLoadData, "cuModuleLoadData", NULL);
    CUS(ModuleUnload, "cuModuleUnload", NULL);
    CUS(ModuleGetFunction, "cuModuleGetFunction", NULL);
    CUS(LaunchKernel, "cuLaunchKernel", NULL);
    CUS(MemAlloc, "cuMemAlloc_v2", "cuMemAlloc");
    CUS(MemFree, "cuMemFree_v2", "cuMemFree");
    CUS(MemcpyHtoD, "cuMemcpyHtoD_v2", "cuMemcpyHtoD");
    CUS(MemcpyDtoH, "cuMemcpyDtoH_v2", "cuMemcpyDtoH");
    CUS(MemsetD8, "cuMemsetD8_v2", "cuMemsetD8");
    CUS(GetErrorName, "cuGetErrorName", NULL);
    CUS(OccupancyMaxActiveBlocksPerMultiprocessor, "cuOccupancyMaxActiveBlocksPerMultiprocessor", NULL);
    CUS(PointerGetAttribute, "cuPointerGetAttribute", NULL);
    CUS(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", "cuMemcpyHtoDAsync");
    CUS(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", "cuMemcpyDtoHAsync");
    CUS(MemcpyDtoD, "cuMemcpyDtoD_v2", "cuMemcpyDtoD");
    CUS(MemsetD8Async, "cuMemsetD8Async", NULL);
    CUS(StreamCreate, "cuStreamCreate", NULL);
    CUS(StreamSynchronize, "cuStreamSynchronize", NULL);
    CUS(MemHostAlloc, "cuMemHostAlloc", NULL);
    CUS(StreamQuery, "cuStreamQuery", NULL);
    CUS(MemFreeHost, "cuMemFreeHost", NULL);
    CUS(MemHostRegister, "cuMemHostRegister_v2", "cuMemHostRegister");
    CUS(MemHostUnregister, "cuMemHostUnregister", NULL);
    CUS(EventCreate, "cuEventCreate", NULL);
    CUS(EventRecord, "cuEventRecord", NULL);
    CUS(EventSynchronize, "cuEventSynchronize", NULL);
    CUS(EventElapsedTime, "cuEventElapsedTime_v2", "cuEventElapsedTime");
    CUS(EventDestroy, "cuEventDestroy_v2", "cuEventDestroy");
    CUS(FuncSetAttribute, "cuFuncSetAttribute", NULL);
    CUS(FuncGetAttribute, "cuFuncGetAttribute", NULL);
    CUS(CtxGetDevice, "cuCtxGetDevice", NULL);
    CUS(StreamDestroy, "cuStreamDestroy_v2", "cuStreamDestroy");
#undef CUS
    void **fp = (void **)c;
    for (size_t i = 0; i < offsetof(cu_api, CtxGetDevice) / sizeof(void *); i++)
        if (!fp[i]) return -2;
    return 0;
}

#endif
