/* SPDX-License-Identifier: MIT */
/* Replays ordered with the client's own GPU work, pipelined: the client
 * writes each input on its own stream, records an IPC event the replay waits
 * on, and takes an async answer (as soon as the work is enqueued); the
 * daemon records a second event after the work, and the client's stream
 * waits on it before saving the output and writing the next input.  No host
 * wait anywhere until the end, so each replay starts on the daemon while the
 * previous one may still be running, captures included.
 *
 * Run against three daemons: completion by event polling (the default), by
 * host functions, and with validation of every graph replay (GFXGRAPH=
 * validate), whose snapshots must see the inputs the replay is meant to
 * read.  Every saved output is checked against the reference.  SKIP (77)
 * when the hip backend does not start (no device). */
#include <math.h>
#include <stdlib.h>

#include "gg_hip.h"
#include "test_client_util.h"

enum { D = 256, ROWS = 4, N = 24 };
#define ONE (ROWS * D)

static const char *g_sock;

static int batch_of(int i)
{
    return 1 + (i * 3) % ROWS;   /* 1 4 3 2 1 ...: every bucket, captures early */
}

#define HIPOK(call) CHECKF((call) == hipSuccess, "%s", #call)

static void client_pipeline(void)
{
    gg_client *c = gg_client_new();
    hipStream_t cs = NULL;
    hipEvent_t evw = NULL, evs = NULL;
    float *x = NULL, *y = NULL, *xall = NULL, *ylog = NULL;
    float *hx = malloc(sizeof(float) * ONE * N), *hy = malloc(sizeof(float) * ONE * N);
    uint64_t bx = 0, by = 0, idw = 0, ids = 0;
    if (!CHECK(hx && hy) || !CHECK(gg_client_connect(c, g_sock, "pipeline") == 0))
        goto out;
    for (int i = 0; i < ONE * N; i++)
        hx[i] = (float)((i * 37 + i / ONE) % 41) / 8.0f - 2.5f;
    if (!HIPOK(hipStreamCreateWithFlags(&cs, hipStreamNonBlocking)) ||
        !HIPOK(hipEventCreateWithFlags(&evw, hipEventInterprocess | hipEventDisableTiming)) ||
        !HIPOK(hipEventCreateWithFlags(&evs, hipEventInterprocess | hipEventDisableTiming)) ||
        !HIPOK(hipMalloc((void **)&x, sizeof(float) * ONE)) ||
        !HIPOK(hipMalloc((void **)&y, sizeof(float) * ONE)) ||
        !HIPOK(hipMalloc((void **)&xall, sizeof(float) * ONE * N)) ||
        !HIPOK(hipMalloc((void **)&ylog, sizeof(float) * ONE * N)) ||
        /* on cs, ahead of the copies that read xall and write ylog: cs is
         * non-blocking, so a plain hipMemcpy or hipMemset (the legacy default
         * stream) is not ordered before them (a pageable hipMemcpy may return
         * with its last DMA in flight, hipMemset returns at once) */
        !HIPOK(hipMemcpyAsync(xall, hx, sizeof(float) * ONE * N, hipMemcpyHostToDevice, cs)) ||
        !HIPOK(hipMemsetAsync(ylog, 0xff, sizeof(float) * ONE * N, cs)))   /* NaN: unsaved shows */
        goto out;
    if (!CHECKF(gg_client_buffer_register_device(c, x, sizeof(float) * ONE, &bx) == 0 &&
                    gg_client_buffer_register_device(c, y, sizeof(float) * ONE, &by) == 0,
                "register buffers: %s", gg_client_last_error(c)) ||
        !CHECKF(gg_client_event_register_device(c, (void *)evw, &idw) == 0 &&
                    gg_client_event_register_device(c, (void *)evs, &ids) == 0,
                "register events: %s", gg_client_last_error(c)))
        goto out;
    uint64_t prog = t_define_silu2x(c, "pipeline", bx, by, D);
    if (!prog)
        goto out;
    int ok = 0;
    for (int i = 0; i < N; i++) {
        HIPOK(hipMemcpyAsync(x, xall + (size_t)i * ONE, sizeof(float) * ONE,
                             hipMemcpyDeviceToDevice, cs));
        HIPOK(hipEventRecord(evw, cs));
        gg_replay_opts o = {.wait_event = idw, .signal_event = ids, .async = true};
        gg_replay_result r;
        int rc = gg_client_replay_ex(c, prog, batch_of(i), -1, &o, &r);
        if (CHECKF(rc == 0, "replay %d: %s", i, gg_client_last_error(c)))
            ok += r.path == GG_PATH_GRAPH && !r.fallback;
        HIPOK(hipStreamWaitEvent(cs, evs, 0));
        HIPOK(hipMemcpyAsync(ylog + (size_t)i * ONE, y, sizeof(float) * ONE,
                             hipMemcpyDeviceToDevice, cs));
    }
    CHECKF(ok == N, "every replay ran as a graph (%d of %d)", ok, N);
    HIPOK(hipMemcpyAsync(hy, ylog, sizeof(float) * ONE * N, hipMemcpyDeviceToHost, cs));
    HIPOK(hipStreamSynchronize(cs));
    int bad = 0, first = -1, first_k = -1;
    for (int i = 0; i < N; i++)
        for (int k = 0; k < batch_of(i) * D; k++) {
            size_t at = (size_t)i * ONE + (size_t)k;
            if (!t_close(hy[at], t_silu2x_ref(hx[at]), 1e-4)) {
                bad++;
                if (first < 0) {
                    first = i;
                    first_k = k;
                }
            }
        }
    const size_t fa = first < 0 ? 0 : (size_t)first * ONE + (size_t)first_k;
    CHECKF(bad == 0, "every replay read its own input and its output was saved before the "
           "next (%d wrong values, first in replay %d at element %d: y %g, want %g for x %g)",
           bad, first, first_k, (double)hy[fa], (double)t_silu2x_ref(hx[fa]), (double)hx[fa]);
    const msgpack_object *st;
    if (CHECK(gg_client_call(c, "stats", NULL, 0, &st) == 0)) {
        CHECK_EQ(h_getu(st, "fallback_count"), 0);
        CHECK_EQ(h_getu(st, "validation_failures"), 0);
    }
    CHECK(gg_client_program_release(c, prog) == 0);
    CHECK(gg_client_event_release(c, idw) == 0 && gg_client_event_release(c, ids) == 0);
out:
    gg_client_close(c);
    if (cs)
        hipStreamSynchronize(cs);
    hipFree(x);
    hipFree(y);
    hipFree(xall);
    hipFree(ylog);
    if (evw)
        hipEventDestroy(evw);
    if (evs)
        hipEventDestroy(evs);
    if (cs)
        hipStreamDestroy(cs);
    free(hx);
    free(hy);
}

/* One daemon, one client process (the GPU runtime is touched only there).
 * Returns false when the daemon did not start (no device). */
static bool run_mode(const char *what, const char *const *env, uint64_t want_validations_min)
{
    h_section(what);
    h_daemon d;
    if (h_daemon_start_hip(&d, NULL, env) < 0)
        return false;
    g_sock = d.sock;
    h_in_child(what, client_pipeline);
    if (want_validations_min) {
        h_conn hc;
        const msgpack_object *r, *e;
        if (CHECK(h_conn_open(&hc, d.sock) == 0)) {
            if (CHECK(h_conn_call(&hc, 1, "stats", NULL, 0, &r, &e) == 1 && !e))
                CHECKF(h_getu(r, "validations") >= want_validations_min,
                       "graph replays were validated (%llu)",
                       (unsigned long long)h_getu(r, "validations"));
            h_conn_close(&hc);
        }
    }
    CHECK_EQ(h_daemon_stop(&d), 0);
    return true;
}

int main(void)
{
    h_init("test_gpu_async", 300);
    if (!run_mode("completion by event polling", NULL, 0))
        return 77;
    static const char *const hostfn[] = {"GFXGRAPH_COMPLETION=hostfn", NULL};
    run_mode("completion by host functions", hostfn, 0);
    static const char *const validate[] = {"GFXGRAPH=validate", NULL};
    run_mode("validation of every graph replay", validate, N / 2);
    return h_finish();
}
