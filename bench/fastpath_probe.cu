/* SPDX-License-Identifier: MIT */
// Probe: how fast can a graph replay round trip between two processes be, on this GPU?
// The floor the daemon's fast path is measured against (tests/gpu/run-on-device.sh
// runs it in the same device run as bench_fastpath; bench/README.md).
// Client and server share one anonymous page (doorbell, completion). Variants:
//   inproc-sync   : one process, cudaGraphLaunch + cudaStreamSynchronize (torch-like floor)
//   inproc-spin   : one process, launch + GPU writes a host-mapped word, host spins on it
//   xproc-write   : server spins on the doorbell, launches, cuStreamWriteValue64 -> client spins
//   xproc-kernel  : same, completion written by a 1-thread signal kernel
//   xproc-gpuwait : server pre-enqueues [cuStreamWaitValue64(doorbell>=i); graph; write(i)]
//                   up to 32 ahead: no server CPU on the critical path
// Build: nvcc -O2 -arch=sm_90 fastpath_probe.cu -lcuda -o probe;  ./probe NODES ITERS
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <algorithm>
#include <vector>

#define CK(x) do { cudaError_t e_ = (x); if (e_) { fprintf(stderr, "%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e_)); exit(1); } } while (0)
#define CD(x) do { CUresult e_ = (x); if (e_) { fprintf(stderr, "%s:%d CUresult %d\n", __FILE__, __LINE__, (int)e_); exit(1); } } while (0)

struct Shared { volatile unsigned long long doorbell; char pad[56]; volatile unsigned long long done; char pad2[56]; volatile int mode; volatile int ready; };

__global__ void tiny(float *x) { x[threadIdx.x] = x[threadIdx.x] * 1.0001f + 1.0f; }
__global__ void signal_k(volatile unsigned long long *p, unsigned long long v) { __threadfence_system(); *p = v; __threadfence_system(); }

static double now_us() { timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e6 + t.tv_nsec / 1e3; }

static cudaGraphExec_t make_graph(cudaStream_t s, float *buf, int nodes) {
    cudaGraph_t g; cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < nodes; i++) tiny<<<1, 256, 0, s>>>(buf);
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    return ge;
}

static void report(const char *name, std::vector<double> &v) {
    std::sort(v.begin(), v.end());
    printf("%-14s p50 %7.1f us  p90 %7.1f  p99 %7.1f  min %6.1f\n", name, v[v.size() / 2], v[v.size() * 9 / 10], v[v.size() * 99 / 100], v[0]);
    fflush(stdout);
}

int main(int argc, char **argv) {
    int nodes = argc > 1 ? atoi(argv[1]) : 1, iters = argc > 2 ? atoi(argv[2]) : 5000;
    Shared *sh = (Shared *)mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    memset((void *)sh, 0, 4096);
    printf("nodes %d iters %d\n", nodes, iters);
    for (int mode = 2; mode <= 4; mode++) {
        sh->doorbell = 0; sh->done = 0; sh->mode = mode; sh->ready = 0;
        pid_t pid = fork();
        if (pid == 0) {  // server
            CK(cudaSetDevice(0)); CD(cuInit(0));
            CK(cudaHostRegister((void *)sh, 4096, cudaHostRegisterMapped | cudaHostRegisterPortable));
            unsigned long long *d_done, *d_bell;
            CK(cudaHostGetDevicePointer((void **)&d_done, (void *)&sh->done, 0));
            CK(cudaHostGetDevicePointer((void **)&d_bell, (void *)&sh->doorbell, 0));
            cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
            float *buf; CK(cudaMalloc(&buf, 1024 * 4)); CK(cudaMemset(buf, 0, 4096));
            cudaGraphExec_t ge = make_graph(s, buf, nodes);
            CK(cudaGraphLaunch(ge, s)); CK(cudaStreamSynchronize(s));
            __atomic_store_n(&sh->ready, 1, __ATOMIC_RELEASE);
            unsigned long long total = iters + 200;
            if (mode == 4) {
                unsigned long long next = 1;
                while (next <= total) {
                    while (next <= total && next <= sh->done + 32) {
                        CD(cuStreamWaitValue64((CUstream)s, (CUdeviceptr)d_bell, next, CU_STREAM_WAIT_VALUE_GEQ));
                        CK(cudaGraphLaunch(ge, s));
                        CD(cuStreamWriteValue64((CUstream)s, (CUdeviceptr)d_done, next, CU_STREAM_WRITE_VALUE_DEFAULT));
                        next++;
                    }
                }
            } else {
                for (unsigned long long i = 1; i <= total; i++) {
                    while (__atomic_load_n(&sh->doorbell, __ATOMIC_ACQUIRE) < i) { }
                    CK(cudaGraphLaunch(ge, s));
                    if (mode == 2) CD(cuStreamWriteValue64((CUstream)s, (CUdeviceptr)d_done, i, CU_STREAM_WRITE_VALUE_DEFAULT));
                    else signal_k<<<1, 1, 0, s>>>(d_done, i);
                }
            }
            CK(cudaStreamSynchronize(s));
            _exit(0);
        }
        while (!__atomic_load_n(&sh->ready, __ATOMIC_ACQUIRE)) usleep(100);
        std::vector<double> v;
        for (unsigned long long i = 1; i <= (unsigned long long)iters + 200; i++) {
            double t0 = now_us();
            __atomic_store_n(&sh->doorbell, i, __ATOMIC_RELEASE);
            while (__atomic_load_n(&sh->done, __ATOMIC_ACQUIRE) < i) { }
            if (i > 200) v.push_back(now_us() - t0);
        }
        int st; waitpid(pid, &st, 0);
        report(mode == 2 ? "xproc-write" : mode == 3 ? "xproc-kernel" : "xproc-gpuwait", v);
    }
    // in-process baselines (CUDA initialised only now, after the forks)
    {
        CK(cudaSetDevice(0));
        CK(cudaHostRegister((void *)sh, 4096, cudaHostRegisterMapped | cudaHostRegisterPortable));
        unsigned long long *d_done; CK(cudaHostGetDevicePointer((void **)&d_done, (void *)&sh->done, 0));
        cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
        float *buf; CK(cudaMalloc(&buf, 4096)); CK(cudaMemset(buf, 0, 4096));
        cudaGraphExec_t ge = make_graph(s, buf, nodes);
        std::vector<double> a, b, dv;
        cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
        for (int i = 0; i < iters + 200; i++) {
            double t0 = now_us(); CK(cudaGraphLaunch(ge, s)); CK(cudaStreamSynchronize(s));
            if (i >= 200) a.push_back(now_us() - t0);
        }
        sh->done = 0;
        for (unsigned long long i = 1; i <= (unsigned long long)iters + 200; i++) {
            double t0 = now_us(); CK(cudaGraphLaunch(ge, s)); CD(cuStreamWriteValue64((CUstream)s, (CUdeviceptr)d_done, i, 0));
            while (__atomic_load_n(&sh->done, __ATOMIC_ACQUIRE) < i) { }
            if (i > 200) b.push_back(now_us() - t0);
        }
        for (int i = 0; i < 500; i++) {
            CK(cudaEventRecord(e0, s)); CK(cudaGraphLaunch(ge, s)); CK(cudaEventRecord(e1, s)); CK(cudaEventSynchronize(e1));
            float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); dv.push_back(ms * 1e3);
        }
        report("inproc-sync", a); report("inproc-spin", b); report("device-only", dv);
    }
    return 0;
}
