/* SPDX-License-Identifier: MIT */
/* gg_hip.h: the project's one vendor header.
 *
 * The project is written against HIP.  On AMD this header includes the HIP
 * runtime; on NVIDIA it includes the CUDA runtime and maps every HIP name the
 * project uses onto CUDA (the direction opposite to llama.cpp's
 * ggml-cuda/vendors/hip.h).  HIP's own NVIDIA headers are not used: Debian's
 * are too old for CUDA 13.
 *
 *   GFXGRAPH_HIP_AMD   hipcc (HIP C++), or gcc/clang in C with
 *                      -D__HIP_PLATFORM_AMD__; ROCm 5.2 (Debian 12) .. 7.x.
 *   GFXGRAPH_HIP_CUDA  nvcc (CUDA C++ compiling the .hip files), or gcc/clang
 *                      in C with the CUDA include dir; CUDA 12 .. 13.
 *
 * Compiles as C11 (the daemon) and as C++ (the kernels).  Only API present in
 * both ROCm 5.2..7.x and CUDA 12..13 is named here; where the two differ the
 * mapping is a static inline function with a comment, elsewhere a #define.
 *
 * Runtime, not source, differences the callers must still know:
 *   - hipRuntimeGetVersion: HIP encodes major*10000000 + minor*100000 + patch,
 *     CUDA major*1000 + minor*10.  gg_hip_runtime_string() formats either.
 *   - hipDeviceProp_t is cudaDeviceProp on NVIDIA: it has no gcnArchName, and
 *     CUDA 13 removed clockRate, memoryClockRate and friends from it.  Use
 *     hipDeviceGetAttribute() for numbers and gg_hip_arch_name() for the
 *     architecture.
 *   - hipIpcMemLazyEnablePeerAccess is 0 on ROCm 5.x and 1 on CUDA; always pass
 *     the name, never a number.
 *   - hipMemGetAddressRange: see its mapping below (CUDA driver entry point). */
#ifndef GG_HIP_H
#define GG_HIP_H

#if defined(GFXGRAPH_HIP_AMD) && defined(GFXGRAPH_HIP_CUDA)
#error "gg_hip.h: define only one of GFXGRAPH_HIP_AMD and GFXGRAPH_HIP_CUDA"
#endif
#if !defined(GFXGRAPH_HIP_AMD) && !defined(GFXGRAPH_HIP_CUDA)
#if defined(__HIP_PLATFORM_AMD__) || defined(__HIP_PLATFORM_HCC__)
#define GFXGRAPH_HIP_AMD 1
#elif defined(__CUDACC__)
#define GFXGRAPH_HIP_CUDA 1
#else
#error "gg_hip.h: define GFXGRAPH_HIP_AMD or GFXGRAPH_HIP_CUDA (the gg_gpu target does)"
#endif
#endif

#include <stddef.h>
#include <stdio.h>
#include <string.h>

/* True while compiling HIP/CUDA C++ (kernels), as opposed to host-only C. */
#if defined(__cplusplus) && (defined(__HIPCC__) || defined(__HIP__) || defined(__CUDACC__))
#define GG_HIP_DEVICE_COMPILER 1
#endif

/* ======================================================================== */
#if defined(GFXGRAPH_HIP_AMD)

/* hip_runtime_api.h picks the AMD or NVIDIA half from this macro; hipcc sets
 * it, a plain C compiler needs it from the build (the gg_gpu target exports
 * it).  Set it here too so a stray C file cannot pick the NVIDIA half. */
#if !defined(__HIP_PLATFORM_AMD__) && !defined(__HIP_PLATFORM_HCC__)
#define __HIP_PLATFORM_AMD__ 1
#endif

#if defined(GG_HIP_DEVICE_COMPILER)
#include <hip/hip_runtime.h>
#include <hip/hip_fp16.h>
#else
#include <hip/hip_runtime_api.h>
#endif
#include <hip/hip_version.h>

#define GG_HIP_PLATFORM_NAME "hip-amd"

/* ROCm 5.2 (Debian 12's libamdhip64 5.2.3) declares hipLaunchHostFunc but
 * does not export it: a program that calls it does not link.  On ROCm 5.x,
 * route it through hipStreamAddCallback (exported by every ROCm) with a small
 * heap trampoline, freed by the callback.  Like CUDA's cudaStreamAddCallback
 * this must not be used while the stream is capturing (the daemon only
 * notifies outside capture); ROCm 6+ uses the real function. */
#if HIP_VERSION_MAJOR < 6
#include <stdlib.h>

typedef struct {
    hipHostFn_t fn;
    void *arg;
} gg_hip_host_fn_tramp_;

static inline void gg_hip_host_fn_cb_(hipStream_t stream, hipError_t status, void *p)
{
    gg_hip_host_fn_tramp_ t = *(gg_hip_host_fn_tramp_ *)p;
    (void)stream;
    (void)status;
    free(p);
    t.fn(t.arg);
}

static inline hipError_t gg_hip_launch_host_func_(hipStream_t stream, hipHostFn_t fn, void *arg)
{
    gg_hip_host_fn_tramp_ *t = (gg_hip_host_fn_tramp_ *)malloc(sizeof *t);
    if (!t)
        return hipErrorOutOfMemory;
    t->fn = fn;
    t->arg = arg;
    hipError_t e = hipStreamAddCallback(stream, gg_hip_host_fn_cb_, t, 0);
    if (e != hipSuccess)
        free(t);
    return e;
}
#define hipLaunchHostFunc gg_hip_launch_host_func_
#endif

/* Everything is native.  The few things the NVIDIA half provides beyond a
 * name mapping get the same spelling here. */
static inline int gg_hip_arch_name(int device, char *buf, size_t len)
{
    hipDeviceProp_t p;
    if (len)
        buf[0] = '\0';
    hipError_t e = hipGetDeviceProperties(&p, device);
    if (e != hipSuccess)
        return (int)e;
    /* "gfx1030:sramecc-:xnack-" -> "gfx1030" */
    size_t n = strcspn(p.gcnArchName, ":");
    if (len) {
        if (n >= len)
            n = len - 1;
        memcpy(buf, p.gcnArchName, n);
        buf[n] = '\0';
    }
    return 0;
}

/* Errors after which the context cannot be trusted again (every later call
 * fails the same way).  ROCm 5.2 names fewer of them than CUDA: a GPU memory
 * fault on ROCm surfaces as an illegal address or a launch failure. */
static inline int gg_hip_error_is_sticky(hipError_t e)
{
    return e == hipErrorIllegalAddress || e == hipErrorLaunchFailure ||
           e == hipErrorLaunchTimeOut || e == hipErrorAssert || e == hipErrorECCNotCorrectable ||
           e == hipErrorContextIsDestroyed || e == hipErrorNoDevice ||
           e == hipErrorInvalidContext || e == hipErrorDeinitialized;
}

static inline void gg_hip_runtime_string(char *buf, size_t len)
{
    int v = 0;
    if (hipRuntimeGetVersion(&v) != hipSuccess)
        v = HIP_VERSION;
    snprintf(buf, len, "HIP %d.%d.%d", v / 10000000, (v / 100000) % 100, v % 100000);
}

/* ======================================================================== */
#elif defined(GFXGRAPH_HIP_CUDA)

#if defined(GG_HIP_DEVICE_COMPILER)
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#else
#include <cuda_runtime_api.h>
#endif

/* The version guard for every mapping below: CUDA 12 changed the signatures
 * of cudaGraphInstantiate, cudaGraphExecUpdate and cudaStreamGetCaptureInfo,
 * and only the CUDA 12+ forms are mapped. */
#if !defined(CUDART_VERSION) || CUDART_VERSION < 12000
#error "gg_hip.h: the NVIDIA build needs CUDA 12 or newer"
#endif

#define GG_HIP_PLATFORM_NAME "hip-cuda"

/* ---- types ---------------------------------------------------------------- */
typedef cudaError_t hipError_t;
typedef cudaStream_t hipStream_t;
typedef cudaEvent_t hipEvent_t;
typedef cudaGraph_t hipGraph_t;
typedef cudaGraphExec_t hipGraphExec_t;
typedef cudaGraphNode_t hipGraphNode_t;
typedef cudaIpcMemHandle_t hipIpcMemHandle_t;
typedef cudaIpcEventHandle_t hipIpcEventHandle_t;
typedef cudaHostFn_t hipHostFn_t;
typedef struct cudaDeviceProp hipDeviceProp_t;
typedef enum cudaStreamCaptureStatus hipStreamCaptureStatus;
typedef enum cudaStreamCaptureMode hipStreamCaptureMode;
typedef enum cudaGraphExecUpdateResult hipGraphExecUpdateResult;
typedef enum cudaMemcpyKind hipMemcpyKind;
typedef enum cudaDeviceAttr hipDeviceAttribute_t;
/* HIP's hipDeviceptr_t is void *; CUDA's CUdeviceptr (driver API) is an
 * integer.  The project only meets it in hipMemGetAddressRange, kept void *. */
typedef void *hipDeviceptr_t;

/* ---- error codes (same numbers in CUDA's runtime and driver enums) -------- */
#define hipSuccess cudaSuccess
#define hipErrorInvalidValue cudaErrorInvalidValue
#define hipErrorOutOfMemory cudaErrorMemoryAllocation
#define hipErrorMemoryAllocation cudaErrorMemoryAllocation
#define hipErrorInitializationError cudaErrorInitializationError
#define hipErrorNotInitialized cudaErrorInitializationError
#define hipErrorInsufficientDriver cudaErrorInsufficientDriver
#define hipErrorNoDevice cudaErrorNoDevice
#define hipErrorInvalidDevice cudaErrorInvalidDevice
#define hipErrorInvalidContext cudaErrorDeviceUninitialized
#define hipErrorMapFailed cudaErrorMapBufferObjectFailed
#define hipErrorAlreadyMapped cudaErrorAlreadyMapped
#define hipErrorInvalidHandle cudaErrorInvalidResourceHandle
#define hipErrorInvalidResourceHandle cudaErrorInvalidResourceHandle
#define hipErrorNotFound cudaErrorSymbolNotFound
#define hipErrorNotReady cudaErrorNotReady
#define hipErrorIllegalAddress cudaErrorIllegalAddress
#define hipErrorPeerAccessAlreadyEnabled cudaErrorPeerAccessAlreadyEnabled
#define hipErrorContextIsDestroyed cudaErrorContextIsDestroyed
#define hipErrorLaunchFailure cudaErrorLaunchFailure
#define hipErrorNotSupported cudaErrorNotSupported
#define hipErrorStreamCaptureUnsupported cudaErrorStreamCaptureUnsupported
#define hipErrorStreamCaptureInvalidated cudaErrorStreamCaptureInvalidated
#define hipErrorStreamCaptureMerge cudaErrorStreamCaptureMerge
#define hipErrorStreamCaptureUnmatched cudaErrorStreamCaptureUnmatched
#define hipErrorStreamCaptureUnjoined cudaErrorStreamCaptureUnjoined
#define hipErrorStreamCaptureIsolation cudaErrorStreamCaptureIsolation
#define hipErrorStreamCaptureImplicit cudaErrorStreamCaptureImplicit
#define hipErrorCapturedEvent cudaErrorCapturedEvent
#define hipErrorStreamCaptureWrongThread cudaErrorStreamCaptureWrongThread
#define hipErrorGraphExecUpdateFailure cudaErrorGraphExecUpdateFailure
#define hipErrorUnknown cudaErrorUnknown

/* ---- constants ------------------------------------------------------------ */
#define HIP_IPC_HANDLE_SIZE CUDA_IPC_HANDLE_SIZE
#define hipIpcMemLazyEnablePeerAccess cudaIpcMemLazyEnablePeerAccess
#define hipMemcpyHostToHost cudaMemcpyHostToHost
#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define hipMemcpyDefault cudaMemcpyDefault
#define hipStreamDefault cudaStreamDefault
#define hipStreamNonBlocking cudaStreamNonBlocking
#define hipEventDefault cudaEventDefault
#define hipEventBlockingSync cudaEventBlockingSync
#define hipEventDisableTiming cudaEventDisableTiming
#define hipEventInterprocess cudaEventInterprocess
#define hipStreamCaptureModeGlobal cudaStreamCaptureModeGlobal
#define hipStreamCaptureModeThreadLocal cudaStreamCaptureModeThreadLocal
#define hipStreamCaptureModeRelaxed cudaStreamCaptureModeRelaxed
#define hipStreamCaptureStatusNone cudaStreamCaptureStatusNone
#define hipStreamCaptureStatusActive cudaStreamCaptureStatusActive
#define hipStreamCaptureStatusInvalidated cudaStreamCaptureStatusInvalidated
#define hipGraphExecUpdateSuccess cudaGraphExecUpdateSuccess
#define hipGraphExecUpdateError cudaGraphExecUpdateError
#define hipGraphExecUpdateErrorTopologyChanged cudaGraphExecUpdateErrorTopologyChanged
#define hipGraphExecUpdateErrorNodeTypeChanged cudaGraphExecUpdateErrorNodeTypeChanged
#define hipGraphExecUpdateErrorFunctionChanged cudaGraphExecUpdateErrorFunctionChanged
#define hipGraphExecUpdateErrorParametersChanged cudaGraphExecUpdateErrorParametersChanged
#define hipGraphExecUpdateErrorNotSupported cudaGraphExecUpdateErrorNotSupported
#define hipGraphExecUpdateErrorUnsupportedFunctionChange \
    cudaGraphExecUpdateErrorUnsupportedFunctionChange

/* Device attributes: HIP's names differ from CUDA's in spelling only. */
#define hipDeviceAttributeMaxThreadsPerBlock cudaDevAttrMaxThreadsPerBlock
#define hipDeviceAttributeMaxSharedMemoryPerBlock cudaDevAttrMaxSharedMemoryPerBlock
#define hipDeviceAttributeWarpSize cudaDevAttrWarpSize
#define hipDeviceAttributeClockRate cudaDevAttrClockRate
#define hipDeviceAttributeMultiprocessorCount cudaDevAttrMultiProcessorCount
#define hipDeviceAttributeIntegrated cudaDevAttrIntegrated
#define hipDeviceAttributeCanMapHostMemory cudaDevAttrCanMapHostMemory
#define hipDeviceAttributeConcurrentKernels cudaDevAttrConcurrentKernels
#define hipDeviceAttributePciBusId cudaDevAttrPciBusId
#define hipDeviceAttributePciDeviceId cudaDevAttrPciDeviceId
#define hipDeviceAttributePciDomainID cudaDevAttrPciDomainId
#define hipDeviceAttributeMemoryClockRate cudaDevAttrMemoryClockRate
#define hipDeviceAttributeMemoryBusWidth cudaDevAttrGlobalMemoryBusWidth
#define hipDeviceAttributeL2CacheSize cudaDevAttrL2CacheSize
#define hipDeviceAttributeMaxThreadsPerMultiProcessor cudaDevAttrMaxThreadsPerMultiProcessor
#define hipDeviceAttributeUnifiedAddressing cudaDevAttrUnifiedAddressing
#define hipDeviceAttributeComputeCapabilityMajor cudaDevAttrComputeCapabilityMajor
#define hipDeviceAttributeComputeCapabilityMinor cudaDevAttrComputeCapabilityMinor
#define hipDeviceAttributeManagedMemory cudaDevAttrManagedMemory

/* ---- functions with the same signature on both -------------------------- */
#define hipGetDeviceCount cudaGetDeviceCount
#define hipSetDevice cudaSetDevice
#define hipGetDevice cudaGetDevice
#define hipGetDeviceProperties cudaGetDeviceProperties
#define hipDeviceGetAttribute cudaDeviceGetAttribute
#define hipOccupancyMaxActiveBlocksPerMultiprocessor cudaOccupancyMaxActiveBlocksPerMultiprocessor
#define hipDeviceGetPCIBusId cudaDeviceGetPCIBusId
#define hipDeviceSynchronize cudaDeviceSynchronize
#define hipMemGetInfo cudaMemGetInfo
#define hipRuntimeGetVersion cudaRuntimeGetVersion
#define hipDriverGetVersion cudaDriverGetVersion
#define hipGetErrorString cudaGetErrorString
#define hipGetErrorName cudaGetErrorName
#define hipGetLastError cudaGetLastError
#define hipPeekAtLastError cudaPeekAtLastError
#define hipMalloc cudaMalloc
#define hipFree cudaFree
#define hipMemcpy cudaMemcpy
#define hipMemcpyAsync cudaMemcpyAsync
#define hipMemset cudaMemset
#define hipMemsetAsync cudaMemsetAsync
#define hipIpcGetMemHandle cudaIpcGetMemHandle
#define hipIpcOpenMemHandle cudaIpcOpenMemHandle
#define hipIpcCloseMemHandle cudaIpcCloseMemHandle
#define hipIpcGetEventHandle cudaIpcGetEventHandle
#define hipIpcOpenEventHandle cudaIpcOpenEventHandle
#define hipEventCreate cudaEventCreate
#define hipEventCreateWithFlags cudaEventCreateWithFlags
#define hipEventRecord cudaEventRecord
#define hipEventQuery cudaEventQuery
#define hipEventSynchronize cudaEventSynchronize
#define hipEventElapsedTime cudaEventElapsedTime
#define hipEventDestroy cudaEventDestroy
#define hipStreamCreate cudaStreamCreate
#define hipStreamCreateWithFlags cudaStreamCreateWithFlags
#define hipStreamDestroy cudaStreamDestroy
#define hipStreamSynchronize cudaStreamSynchronize
#define hipStreamQuery cudaStreamQuery
#define hipStreamWaitEvent cudaStreamWaitEvent
#define hipStreamBeginCapture cudaStreamBeginCapture
#define hipStreamEndCapture cudaStreamEndCapture
#define hipStreamIsCapturing cudaStreamIsCapturing
#define hipThreadExchangeStreamCaptureMode cudaThreadExchangeStreamCaptureMode
#define hipGraphLaunch cudaGraphLaunch
#define hipGraphDestroy cudaGraphDestroy
#define hipGraphExecDestroy cudaGraphExecDestroy
#define hipGraphGetNodes cudaGraphGetNodes
#define hipLaunchHostFunc cudaLaunchHostFunc
#define hipLaunchKernelGGL(kernel, grid, block, shmem, stream, ...) \
    kernel<<<(grid), (block), (shmem), (stream)>>>(__VA_ARGS__)

/* ---- functions whose signatures differ ----------------------------------- */

/* HIP keeps CUDA 11's form (error node, log buffer).  CUDA 12 replaced it with
 * cudaGraphInstantiate(exec, graph, flags): no error node or log, so report
 * none. */
static inline hipError_t hipGraphInstantiate(hipGraphExec_t *exec, hipGraph_t graph,
                                             hipGraphNode_t *errNode, char *logBuffer,
                                             size_t bufferSize)
{
    if (errNode)
        *errNode = NULL;
    if (logBuffer && bufferSize)
        logBuffer[0] = '\0';
    return cudaGraphInstantiate(exec, graph, 0); /* CUDART_VERSION >= 12000 (checked above) */
}

/* HIP 5.2: (exec, graph, &errNode, &result).  CUDA 12 folds the two outputs
 * into cudaGraphExecUpdateResultInfo. */
static inline hipError_t hipGraphExecUpdate(hipGraphExec_t exec, hipGraph_t graph,
                                            hipGraphNode_t *errNode,
                                            hipGraphExecUpdateResult *result)
{
    cudaGraphExecUpdateResultInfo info; /* CUDART_VERSION >= 12000 (checked above) */
    info.result = cudaGraphExecUpdateError;
    info.errorNode = NULL;
    info.errorFromNode = NULL;
    cudaError_t rc = cudaGraphExecUpdate(exec, graph, &info);
    if (errNode)
        *errNode = info.errorNode;
    if (result)
        *result = info.result;
    return rc;
}

/* HIP: (stream, &status, &id).  CUDA 12 added graph and dependency outputs
 * (the former _v2), CUDA 13 also edge data (the former _v3); pass NULL. */
static inline hipError_t hipStreamGetCaptureInfo(hipStream_t stream,
                                                 hipStreamCaptureStatus *status,
                                                 unsigned long long *id)
{
#if CUDART_VERSION >= 13000
    return cudaStreamGetCaptureInfo(stream, status, id, NULL, NULL, NULL, NULL);
#else
    return cudaStreamGetCaptureInfo(stream, status, id, NULL, NULL, NULL);
#endif
}

/* hipMemGetAddressRange(&base, &size, ptr): the allocation that holds ptr.
 * The CUDA runtime has no equivalent (cudaPointerGetAttributes gives neither
 * base nor size), only the driver's cuMemGetAddressRange.  Rather than link
 * libcuda, fetch that entry point through the runtime
 * (cudaGetDriverEntryPointByVersion, CUDA 12.5+; cudaGetDriverEntryPoint
 * before, which CUDA 13 deprecates) and call it with the runtime's primary
 * context made current on this thread.  The driver's CUresult codes are the
 * runtime's cudaError_t numbers for every code it returns here. */
typedef int (*gg_hip_cuMemGetAddressRange_fn)(unsigned long long *base, size_t *size,
                                              unsigned long long ptr);

static inline hipError_t hipMemGetAddressRange(hipDeviceptr_t *base, size_t *size,
                                               hipDeviceptr_t ptr)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    int dev = 0;
    cudaError_t rc = cudaGetDevice(&dev);
    if (rc == cudaSuccess)
        rc = cudaSetDevice(dev); /* CUDA 12+: initialises the primary context and binds it */
    if (rc != cudaSuccess)
        return rc;
#if CUDART_VERSION >= 12050
    rc = cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000, cudaEnableDefault,
                                          &q);
#else
    rc = cudaGetDriverEntryPoint("cuMemGetAddressRange", &fn, cudaEnableDefault, &q);
#endif
    if (rc != cudaSuccess)
        return rc;
    if (q != cudaDriverEntryPointSuccess || !fn)
        return cudaErrorNotSupported;
    unsigned long long b = 0;
    size_t s = 0;
    gg_hip_cuMemGetAddressRange_fn call;
    memcpy(&call, &fn, sizeof call); /* ISO C has no object-to-function pointer cast */
    int r = call(&b, &s, (unsigned long long)(size_t)ptr);
    if (r != 0)
        return (cudaError_t)r;
    if (base)
        *base = (hipDeviceptr_t)(size_t)b;
    if (size)
        *size = s;
    return cudaSuccess;
}

/* Mapped pinned host memory: the fast path's shared region is registered so
 * the device can write completion words straight into it. */
#define hipHostRegisterDefault cudaHostRegisterDefault
#define hipHostRegisterPortable cudaHostRegisterPortable
#define hipHostRegisterMapped cudaHostRegisterMapped
#define hipHostRegister cudaHostRegister
#define hipHostUnregister cudaHostUnregister
#define hipHostGetDevicePointer cudaHostGetDevicePointer

/* A driver entry point fetched through the runtime (rather than linking
 * libcuda), for the driver calls the runtime lacks: *fn, or an error. */
static inline cudaError_t gg_hip_driver_entry_(const char *name, void **fn)
{
    enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
#if CUDART_VERSION >= 12050
    cudaError_t rc = cudaGetDriverEntryPointByVersion(name, fn, 12000, cudaEnableDefault, &q);
#else
    cudaError_t rc = cudaGetDriverEntryPoint(name, fn, cudaEnableDefault, &q);
#endif
    if (rc != cudaSuccess)
        return rc;
    return q == cudaDriverEntryPointSuccess && *fn ? cudaSuccess : cudaErrorNotSupported;
}

/* hipStreamWriteValue64/32(stream, ptr, value, flags): the device writes
 * value to ptr once the stream's earlier work is done.  The CUDA runtime has
 * no such call, only the driver's cuStreamWriteValue64/32 (stream memory
 * operations, always available from CUDA 12 on); each entry point is looked
 * up once per process. */
typedef int (*gg_hip_cuStreamWriteValue64_fn)(void *stream, unsigned long long addr,
                                              unsigned long long value, unsigned int flags);
typedef int (*gg_hip_cuStreamWriteValue32_fn)(void *stream, unsigned long long addr,
                                              unsigned int value, unsigned int flags);

static inline hipError_t hipStreamWriteValue64(hipStream_t stream, void *ptr, unsigned long long value,
                                               unsigned int flags)
{
    static gg_hip_cuStreamWriteValue64_fn call;
    if (!call) {
        void *fn = NULL;
        cudaError_t rc = gg_hip_driver_entry_("cuStreamWriteValue64", &fn);
        if (rc != cudaSuccess)
            return rc;
        memcpy(&call, &fn, sizeof call);   /* ISO C has no object-to-function pointer cast */
    }
    int r = call((void *)stream, (unsigned long long)(size_t)ptr, value, flags);
    return r == 0 ? cudaSuccess : (cudaError_t)r;
}

static inline hipError_t hipStreamWriteValue32(hipStream_t stream, void *ptr, unsigned int value,
                                               unsigned int flags)
{
    static gg_hip_cuStreamWriteValue32_fn call;
    if (!call) {
        void *fn = NULL;
        cudaError_t rc = gg_hip_driver_entry_("cuStreamWriteValue32", &fn);
        if (rc != cudaSuccess)
            return rc;
        memcpy(&call, &fn, sizeof call);
    }
    int r = call((void *)stream, (unsigned long long)(size_t)ptr, value, flags);
    return r == 0 ? cudaSuccess : (cudaError_t)r;
}

/* Errors after which the context cannot be trusted again: CUDA's "sticky"
 * errors (the process must exit to recover) and a device gone. */
static inline int gg_hip_error_is_sticky(cudaError_t e)
{
    switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorLaunchTimeout:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorECCUncorrectable:
    case cudaErrorContextIsDestroyed:
    case cudaErrorNoDevice:
    case cudaErrorDeviceUninitialized:
        return 1;
    default:
        return 0;
    }
}

/* "sm_90" */
static inline int gg_hip_arch_name(int device, char *buf, size_t len)
{
    int major = 0, minor = 0;
    if (len)
        buf[0] = '\0';
    cudaError_t e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    if (e == cudaSuccess)
        e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
    if (e != cudaSuccess)
        return (int)e;
    snprintf(buf, len, "sm_%d%d", major, minor);
    return 0;
}

static inline void gg_hip_runtime_string(char *buf, size_t len)
{
    int v = 0;
    if (cudaRuntimeGetVersion(&v) != cudaSuccess)
        v = CUDART_VERSION;
    snprintf(buf, len, "CUDA %d.%d", v / 1000, (v % 1000) / 10);
}

#endif /* GFXGRAPH_HIP_CUDA */

/* ======================================================================== */
/* BLASLt: a matmul with a fused epilogue, written in hipBLASLt's dialect.
 * Only where the build found a BLASLt (GFXGRAPH_HAVE_BLASLT, which
 * kernels/gpu.cmake defines for the kernel objects alone, never for C):
 * hipBLASLt on AMD, cuBLASLt (always there) on NVIDIA.  The names are those
 * of hipBLASLt's public header as ROCm 6.x has it (hipblaslt 0.6+, where
 * hipDataType and hipblasComputeType_t replaced its own type enums; the
 * hipblasStatus_t/hipblasOperation_t names come from hipBLAS or, ROCm 6.3+,
 * hipblas-common).  On NVIDIA each maps onto its cuBLASLt twin: the same
 * signatures (layouts take uint64_t rows and cols and an int64_t ld on both),
 * the same attribute value types, and the same epilogue numbers (DEFAULT 1,
 * BIAS 4, GELU 32, GELU_BIAS 36).  Both GELU epilogues compute the tanh
 * form 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), never the erf one:
 * hipBLASLt's own client checks its GELU against that formula, and
 * tests/gpu/test_gpu_fused checks cuBLASLt's against the tanh reference.  So
 * the one source in gpu_fused.hip is what an AMD build compiles and what the
 * NVIDIA build runs.  Only the subset gpu_fused.hip uses is mapped. */
#if defined(GFXGRAPH_HAVE_BLASLT)
#if defined(GFXGRAPH_HIP_AMD)
#if !defined(__cplusplus)
#error "gg_hip.h: hipblaslt.h is C++; GFXGRAPH_HAVE_BLASLT is for the kernel objects only"
#endif
#include <hipblaslt/hipblaslt.h>
#define GG_BLASLT_NAME "hipblaslt"
#else
#include <cublasLt.h>
#define GG_BLASLT_NAME "cublaslt"

typedef cublasStatus_t hipblasStatus_t;
typedef cublasOperation_t hipblasOperation_t;
typedef cublasComputeType_t hipblasComputeType_t;
typedef cudaDataType_t hipDataType;
typedef cublasLtHandle_t hipblasLtHandle_t;
typedef cublasLtMatmulDesc_t hipblasLtMatmulDesc_t;
typedef cublasLtMatrixLayout_t hipblasLtMatrixLayout_t;
typedef cublasLtMatmulPreference_t hipblasLtMatmulPreference_t;
typedef cublasLtMatmulAlgo_t hipblasLtMatmulAlgo_t;
typedef cublasLtMatmulHeuristicResult_t hipblasLtMatmulHeuristicResult_t;
typedef cublasLtEpilogue_t hipblasLtEpilogue_t;

#define HIPBLAS_STATUS_SUCCESS CUBLAS_STATUS_SUCCESS
#define HIPBLAS_OP_N CUBLAS_OP_N
#define HIPBLAS_OP_T CUBLAS_OP_T
#define HIPBLAS_COMPUTE_32F CUBLAS_COMPUTE_32F
#define HIP_R_32F CUDA_R_32F
#define HIP_R_16F CUDA_R_16F
#define HIP_R_16BF CUDA_R_16BF

#define HIPBLASLT_EPILOGUE_DEFAULT CUBLASLT_EPILOGUE_DEFAULT
#define HIPBLASLT_EPILOGUE_BIAS CUBLASLT_EPILOGUE_BIAS
#define HIPBLASLT_EPILOGUE_GELU CUBLASLT_EPILOGUE_GELU
#define HIPBLASLT_EPILOGUE_GELU_BIAS CUBLASLT_EPILOGUE_GELU_BIAS
#define HIPBLASLT_MATMUL_DESC_TRANSA CUBLASLT_MATMUL_DESC_TRANSA
#define HIPBLASLT_MATMUL_DESC_TRANSB CUBLASLT_MATMUL_DESC_TRANSB
#define HIPBLASLT_MATMUL_DESC_EPILOGUE CUBLASLT_MATMUL_DESC_EPILOGUE
#define HIPBLASLT_MATMUL_DESC_BIAS_POINTER CUBLASLT_MATMUL_DESC_BIAS_POINTER
#define HIPBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES

#define hipblasLtCreate cublasLtCreate
#define hipblasLtDestroy cublasLtDestroy
#define hipblasLtMatmulDescCreate cublasLtMatmulDescCreate
#define hipblasLtMatmulDescDestroy cublasLtMatmulDescDestroy
#define hipblasLtMatmulDescSetAttribute cublasLtMatmulDescSetAttribute
#define hipblasLtMatrixLayoutCreate cublasLtMatrixLayoutCreate
#define hipblasLtMatrixLayoutDestroy cublasLtMatrixLayoutDestroy
#define hipblasLtMatmulPreferenceCreate cublasLtMatmulPreferenceCreate
#define hipblasLtMatmulPreferenceDestroy cublasLtMatmulPreferenceDestroy
#define hipblasLtMatmulPreferenceSetAttribute cublasLtMatmulPreferenceSetAttribute
#define hipblasLtMatmulAlgoGetHeuristic cublasLtMatmulAlgoGetHeuristic
#define hipblasLtMatmul cublasLtMatmul
#endif
#endif /* GFXGRAPH_HAVE_BLASLT */

/* ======================================================================== */
/* Device-side helpers for the kernels (HIP/CUDA C++ only).  Everything that
 * differs between the two device dialects goes through these. */
#if defined(GG_HIP_DEVICE_COMPILER)
#include <stdint.h>

/* Butterfly exchange across the whole wave/warp.  CUDA requires the _sync
 * form with a lane mask (all lanes: the kernels only call it with full
 * warps); ROCm 5.x has no _sync variants.  warpSize is 32 on NVIDIA and
 * 32 or 64 on AMD (RDNA: 32 by default, GCN/CDNA: 64); callers use the
 * device's warpSize, never a constant. */
static __device__ __forceinline__ float gg_shfl_xor(float v, int mask)
{
#if defined(GFXGRAPH_HIP_CUDA)
    return __shfl_xor_sync(0xffffffffu, v, mask);
#else
    return __shfl_xor(v, mask);
#endif
}

static __device__ __forceinline__ float gg_warp_sum(float v)
{
    for (int off = warpSize / 2; off > 0; off >>= 1)
        v += gg_shfl_xor(v, off);
    return v;
}

static __device__ __forceinline__ float gg_warp_max(float v)
{
    for (int off = warpSize / 2; off > 0; off >>= 1)
        v = fmaxf(v, gg_shfl_xor(v, off));
    return v;
}

/* f16 / bf16 as raw 16-bit storage, converted in registers.  f16 uses the
 * vendor intrinsics (same names on both: cuda_fp16.h / hip_fp16.h); bf16 is
 * done by hand because ROCm 5.2 has no __hip_bfloat16 and its hip_bfloat16
 * class is not CUDA's __nv_bfloat16.  Both round to nearest even, like the CPU
 * reference (ops_dtype.c). */
static __device__ __forceinline__ float gg_f16_bits_to_f32(uint16_t h)
{
    return __half2float(__ushort_as_half(h));
}

static __device__ __forceinline__ uint16_t gg_f32_to_f16_bits(float f)
{
    return __half_as_ushort(__float2half_rn(f));
}

static __device__ __forceinline__ float gg_bf16_bits_to_f32(uint16_t b)
{
    return __uint_as_float((uint32_t)b << 16);
}

static __device__ __forceinline__ uint16_t gg_f32_to_bf16_bits(float f)
{
    uint32_t x = __float_as_uint(f);
    if ((x & 0x7fffffffu) > 0x7f800000u) { /* NaN stays NaN */
        uint16_t r = (uint16_t)(x >> 16);
        return (r & 0x7fu) ? r : (uint16_t)(r | 0x40u);
    }
    x += 0x7fffu + ((x >> 16) & 1u);
    return (uint16_t)(x >> 16);
}

/* Two floats to a packed pair (lo in the low half), rounded to nearest even
 * as the scalar forms above.  NVIDIA sm_80+ converts a pair in one
 * instruction (cvt.rn.{f16x2,bf16x2}.f32 takes the high half first); a
 * streaming kernel that converts each element alone spends a fifth of its
 * instructions on it.  The bf16 pair gives the canonical NaN for a NaN. */
static __device__ __forceinline__ uint32_t gg_f32x2_to_f16x2_bits(float lo, float hi)
{
#if defined(GFXGRAPH_HIP_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    uint32_t r;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
#else
    return (uint32_t)gg_f32_to_f16_bits(lo) | ((uint32_t)gg_f32_to_f16_bits(hi) << 16);
#endif
}

static __device__ __forceinline__ uint32_t gg_f32x2_to_bf16x2_bits(float lo, float hi)
{
#if defined(GFXGRAPH_HIP_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
#else
    return (uint32_t)gg_f32_to_bf16_bits(lo) | ((uint32_t)gg_f32_to_bf16_bits(hi) << 16);
#endif
}

/* Thread-block clusters (NVIDIA sm_90+): blocks of a cluster run at once
 * and read each other's shared memory.  Elsewhere the launch answers
 * hipErrorNotSupported (callers fall back to a plain launch) and the device
 * helpers do nothing, since no cluster launch reaches them. */
#if defined(GFXGRAPH_HIP_CUDA)
template <typename... P, typename... A>
static inline hipError_t gg_hip_launch_cluster(void (*k)(P...), dim3 grid, dim3 block,
                                               size_t shm, hipStream_t s, unsigned cluster,
                                               A... args)
{
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[1];
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = shm;
    cfg.stream = s;
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = cluster;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, k, args...);
}

/* Clusters of more than 8 blocks (the portable limit): 16 on the H100. */
static inline hipError_t gg_hip_allow_big_cluster(const void *k)
{
    return cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
}

/* The virtual architecture kernel k was compiled from (90 for compute_90),
 * 0 when unknown.  A build for compute_80 run on an H100 is JIT-compiled
 * there and takes a cluster launch, but its cluster helpers below are the
 * pre-sm_90 fallbacks: only code from compute_90 on may be launched so. */
static inline int gg_hip_func_ptx_arch(const void *k)
{
    cudaFuncAttributes a;
    if (cudaFuncGetAttributes(&a, k) != cudaSuccess)
        return 0;
    return a.ptxVersion;
}
#else
template <typename... P, typename... A>
static inline hipError_t gg_hip_launch_cluster(void (*k)(P...), dim3 grid, dim3 block,
                                               size_t shm, hipStream_t s, unsigned cluster,
                                               A... args)
{
    (void)k, (void)grid, (void)block, (void)shm, (void)s, (void)cluster;
    ((void)args, ...);
    return hipErrorNotSupported;
}

static inline hipError_t gg_hip_allow_big_cluster(const void *k)
{
    (void)k;
    return hipErrorNotSupported;
}

static inline int gg_hip_func_ptx_arch(const void *k)
{
    (void)k;
    return 0;
}
#endif

/* The lanes of a warp meet, and see each other's shared-memory writes made
 * before (an AMD wave runs in lockstep: nothing to do). */
static __device__ __forceinline__ void gg_syncwarp(void)
{
#if defined(GFXGRAPH_HIP_CUDA)
    __syncwarp();
#endif
}

/* The hardware exp2, one MUFU instruction on NVIDIA: exp2f adds a range
 * test and two multiplies around it for denormal results, which the
 * kernels that call this have no use for (an exp2 that small is added to 1,
 * or is a softmax weight under 2^-126).  exp2(-inf) is +0. */
static __device__ __forceinline__ float gg_ex2(float x)
{
#if defined(GFXGRAPH_HIP_CUDA)
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
    return r;
#else
    return exp2f(x);
#endif
}

/* 16 bytes of data no thread writes while the kernel runs and that it reads
 * once (attention's K and V): through the non-coherent path, not kept in L1
 * (H100: attention past L2 3-5% faster than with plain loads).  AMD: a plain
 * load. */
static __device__ __forceinline__ uint4 gg_ld_stream16(const uint4 *p)
{
#if defined(GFXGRAPH_HIP_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
    uint4 u;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(u.x), "=r"(u.y), "=r"(u.z), "=r"(u.w)
                 : "l"(p));
    return u;
#else
    return *p;
#endif
}

/* A load that does not go through the (non-coherent) L1: data other blocks
 * of the running kernel wrote (attention's partials). */
static __device__ __forceinline__ float gg_ld_cg(const float *p)
{
#if defined(GFXGRAPH_HIP_CUDA)
    return __ldcg(p);
#else
    return *(const volatile float *)p;
#endif
}

/* Whether p holds on any lane of the warp (every lane calls it). */
static __device__ __forceinline__ bool gg_warp_any(bool p)
{
#if defined(GFXGRAPH_HIP_CUDA)
    return __any_sync(0xffffffffu, p);
#else
    return __any(p);
#endif
}

/* Every thread of every block of the cluster arrives; shared-memory writes
 * before it are seen by reads after it in any block of the cluster. */
static __device__ __forceinline__ void gg_cluster_sync(void)
{
#if defined(GFXGRAPH_HIP_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("barrier.cluster.arrive.release.aligned;\n"
                 "barrier.cluster.wait.acquire.aligned;\n" ::
                     : "memory");
#endif
}

/* This block's rank in its cluster (0 outside one). */
static __device__ __forceinline__ unsigned gg_cluster_rank(void)
{
#if defined(GFXGRAPH_HIP_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
#else
    return 0;
#endif
}

/* *p in the shared memory of block `rank` of the cluster (p: this block's
 * address of the same variable). */
static __device__ __forceinline__ float gg_cluster_ld(const float *p, unsigned rank)
{
#if defined(GFXGRAPH_HIP_CUDA) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    unsigned a = (unsigned)__cvta_generic_to_shared(p), r;
    float v;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(a), "r"(rank));
    asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(r));
    return v;
#else
    (void)rank;
    return *p;
#endif
}
#endif /* GG_HIP_DEVICE_COMPILER */

#endif /* GG_HIP_H */
