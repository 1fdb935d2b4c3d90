/* Issue 10 item 5: a define never stalls the loop.  A legal program.define
 * of N nodes (N = 1,024, 10,240 and 102,400: 25 branches of 4,096 nodes)
 * (copy ops) over 1,536 named tensors is checked while a second connection sends
 * health requests back to back; the time of each define and the longest
 * wait of a health answer are noted (the figures for the note), and the
 * test asserts counts only: every define is accepted, every health request
 * is answered, and health requests are answered while the large define is
 * on its way (before and after it at least).
 *
 * GG_DEFINE_SCALE_BENCH=1 repeats each size 5 times and notes the best. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "harness.h"

#define NT 1536   /* 102,400 unary nodes and these fit the 1 Mi values of one message */
#define TBYTES 16   /* f32 [4] */

static const char *g_sock;
static atomic_int g_stop;
static atomic_int g_probe_sent, g_probe_ok;
static atomic_llong g_probe_max_us;

static void tname(char *b, size_t n, int i)
{
    snprintf(b, n, "layer.activation.%05d", i);
}

static void pack_str(msgpack_packer *pk, const char *s)
{
    size_t n = strlen(s);
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, s, n);
}

/* params of a define with nnodes nodes over NT tensors of buffer bid */
static void pack_define(msgpack_sbuffer *sb, uint64_t bid, int nnodes, const char *name)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 3);
    pack_str(&pk, "name");
    pack_str(&pk, name);
    pack_str(&pk, "tensors");
    msgpack_pack_map(&pk, NT);
    char b[64];
    for (int i = 0; i < NT; i++) {
        tname(b, sizeof b, i);
        pack_str(&pk, b);
        msgpack_pack_map(&pk, 4);
        pack_str(&pk, "buffer");
        msgpack_pack_uint64(&pk, bid);
        pack_str(&pk, "offset");
        msgpack_pack_uint64(&pk, (uint64_t)i * TBYTES);
        pack_str(&pk, "dtype");
        pack_str(&pk, "f32");
        pack_str(&pk, "shape");
        msgpack_pack_array(&pk, 1);
        msgpack_pack_int(&pk, 4);
    }
    int per = 4096, nbr = (nnodes + per - 1) / per;
    if (nbr > 1) {
        pack_str(&pk, "branches");
        msgpack_pack_array(&pk, (size_t)nbr);
    } else {
        pack_str(&pk, "nodes");
    }
    int j = 0;
    for (int br = 0; br < nbr; br++) {
        int n = nnodes - br * per < per ? nnodes - br * per : per;
        msgpack_pack_array(&pk, (size_t)n);
        for (int k = 0; k < n; k++, j++) {
            msgpack_pack_map(&pk, 3);
            pack_str(&pk, "op");
            pack_str(&pk, "copy");
            pack_str(&pk, "inputs");
            msgpack_pack_array(&pk, 1);
            tname(b, sizeof b, (j * 7) % NT);
            pack_str(&pk, b);
            pack_str(&pk, "outputs");
            msgpack_pack_array(&pk, 1);
            tname(b, sizeof b, (j * 7 + 3) % NT);
            pack_str(&pk, b);
        }
    }
}

static void *probe(void *arg)
{
    (void)arg;
    h_conn c;
    if (h_conn_open(&c, g_sock) != 0)
        return NULL;
    for (uint32_t id = 1; !atomic_load(&g_stop); id++) {
        const msgpack_object *r, *err;
        int64_t t0 = h_now_ms();
        struct timespec a, z;
        clock_gettime(CLOCK_MONOTONIC, &a);
        atomic_fetch_add(&g_probe_sent, 1);
        int rc = h_conn_call(&c, id, "health", NULL, 0, &r, &err);
        clock_gettime(CLOCK_MONOTONIC, &z);
        (void)t0;
        if (rc == 1 && !err)
            atomic_fetch_add(&g_probe_ok, 1);
        long long us = (z.tv_sec - a.tv_sec) * 1000000LL + (z.tv_nsec - a.tv_nsec) / 1000;
        if (us > atomic_load(&g_probe_max_us))
            atomic_store(&g_probe_max_us, us);
        usleep(200);
    }
    h_conn_close(&c);
    return NULL;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

int main(void)
{
    h_init("test_define_scale", 240);
    const char *bench = getenv("GG_DEFINE_SCALE_BENCH");
    int reps = bench && *bench == '1' ? 5 : 1;
    h_daemon d;
    if (!CHECK(h_daemon_start(&d, NULL, NULL) == 0))
        return h_finish();
    g_sock = d.sock;

    char shm[64];
    h_unique(shm, sizeof shm, "/gg-defscale");
    int fd = shm_open(shm, O_RDWR | O_CREAT | O_EXCL, 0600);
    CHECK(fd >= 0 && ftruncate(fd, (off_t)NT * TBYTES) == 0);
    if (fd >= 0)
        close(fd);

    h_conn c;
    if (!CHECK(h_conn_open(&c, d.sock) == 0))
        goto out;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    msgpack_pack_map(&pk, 2);
    pack_str(&pk, "handle");
    msgpack_pack_bin(&pk, strlen(shm));
    msgpack_pack_bin_body(&pk, shm, strlen(shm));
    pack_str(&pk, "size");
    msgpack_pack_uint64(&pk, (uint64_t)NT * TBYTES);
    const msgpack_object *r, *err;
    uint64_t bid = 0;
    if (CHECK(h_conn_call(&c, 1, "buffer.register", sb.data, sb.size, &r, &err) == 1 && !err))
        bid = h_getu(r, "id");
    msgpack_sbuffer_clear(&sb);

    static const int sizes[] = {1024, 10240, 102400};
    uint32_t msgid = 10;
    for (size_t si = 0; si < sizeof sizes / sizeof *sizes; si++) {
        char name[32];
        snprintf(name, sizeof name, "scale%d", sizes[si]);
        msgpack_sbuffer_clear(&sb);
        pack_define(&sb, bid, sizes[si], name);
        double best = 1e30;
        long long max_wait = 0;
        int during = 0;
        for (int rep = 0; rep < reps; rep++) {
            atomic_store(&g_stop, 0);
            atomic_store(&g_probe_sent, 0);
            atomic_store(&g_probe_ok, 0);
            atomic_store(&g_probe_max_us, 0);
            pthread_t th;
            pthread_create(&th, NULL, probe, NULL);
            h_sleep_ms(30);
            int before = atomic_load(&g_probe_ok);
            double t0 = now_ms();
            int rc = h_conn_call(&c, msgid++, "program.define", sb.data, sb.size, &r, &err);
            double t1 = now_ms();
            char code[32] = "";
            if (!CHECKF(rc == 1 && !err, "define of %d nodes: rc %d %s", sizes[si], rc,
                       err ? h_err_code(err, code, sizeof code) : "")) {
                if (err) {
                    char m[512];
                    h_note("%s", h_gets(err, "message", m, sizeof m));
                }
            }
            uint64_t pid = rc == 1 && !err ? h_getu(r, "id") : 0;
            h_sleep_ms(30);
            atomic_store(&g_stop, 1);
            pthread_join(th, NULL);
            CHECKF(before > 0, "health answered before the define");
            CHECK_EQ(atomic_load(&g_probe_ok), atomic_load(&g_probe_sent));
            during += atomic_load(&g_probe_ok) - before;
            if (t1 - t0 < best)
                best = t1 - t0;
            if (atomic_load(&g_probe_max_us) > max_wait)
                max_wait = atomic_load(&g_probe_max_us);
            if (pid) {
                msgpack_sbuffer rs;
                msgpack_sbuffer_init(&rs);
                msgpack_packer rp;
                msgpack_packer_init(&rp, &rs, msgpack_sbuffer_write);
                msgpack_pack_map(&rp, 1);
                pack_str(&rp, "id");
                msgpack_pack_uint64(&rp, pid);
                CHECK(h_conn_call(&c, msgid++, "program.release", rs.data, rs.size, &r, &err) == 1
                      && !err);
                msgpack_sbuffer_destroy(&rs);
            }
        }
        h_note("define of %6d nodes (%d tensors, %zu bytes): %.1f ms (define call round trip, "
               "best of %d); longest health wait meanwhile %.2f ms; %d health answers after it "
               "began", sizes[si], NT, sb.size, best, reps, max_wait / 1000.0, during);
    }
    msgpack_sbuffer_destroy(&sb);
    h_conn_close(&c);
out:
    shm_unlink(shm);
    h_daemon_stop(&d);
    return h_finish();
}
