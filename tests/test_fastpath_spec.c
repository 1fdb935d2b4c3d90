/* SPDX-License-Identifier: MIT */
/* A fast-path client written from PROTOCOL.md alone, in another language:
 * tests/scripts/fastpath_spec_client.py (Python standard library only: its
 * own MessagePack, recvmsg for the memfd, mmap, struct, ctypes for the
 * futex).  This driver starts a cpu-backend daemon, runs the script against
 * its socket and checks that every check of the script passed, that the
 * daemon is still well afterwards and that the script's session and region
 * are gone.  SKIP (77) when python3 is missing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_fastpath_util.h"

#ifndef GG_FP_SPEC_CLIENT
#error "GG_FP_SPEC_CLIENT: the script's path (CMake sets it)"
#endif

int main(void)
{
    h_init("test_fastpath_spec", 120);
    if (!h_have_python()) {
        printf("SKIP: python3 is not available\n");
        return 77;
    }
    h_daemon d;
    if (h_daemon_start(&d, NULL, NULL) < 0)
        return h_finish();
    const char *argv[] = {"python3", GG_FP_SPEC_CLIENT, d.sock, NULL};
    char *out = NULL, *err = NULL;
    int code = h_run(argv, NULL, NULL, &out, &err, 60000);
    CHECKF(code == 0, "the spec client passed (exit %d)", code);
    if (code != 0 || getenv("GG_TEST_VERBOSE"))
        printf("--- fastpath_spec_client.py stdout:\n%s--- stderr:\n%s---\n", out ? out : "",
               err ? err : "");
    CHECK(out && strstr(out, " 0 failed"));
    CHECK(out && !strstr(out, "FAIL"));
    int passes = 0;
    for (const char *p = out; p && (p = strstr(p, "   ok: ")); p++)
        passes++;
    CHECKF(passes >= 60, "the script ran its checks (%d passed)", passes);
    free(out);
    free(err);
    gg_client *c = fp_socket_client(d.sock, "fp-spec-after");
    if (c) {
        CHECK_EQ(fp_wait_stat(c, "sessions_active", 1, 60000), 1);
        CHECK_EQ(fp_wait_stat(c, "fastpath_regions", 0, 10000), 0);
        const msgpack_object *hr = NULL;
        if (CHECK(gg_client_call(c, "health", NULL, 0, &hr) == 0))
            CHECK(h_get(hr, "ok") && h_get(hr, "ok")->via.boolean);
    }
    gg_client_close(c);
    CHECK_EQ(h_daemon_stop(&d), 0);
    return h_finish();
}
