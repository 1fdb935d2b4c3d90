/* SPDX-License-Identifier: MIT */
/* Where a program's tensors may lie, and what runs above the largest bucket:
 *  - a batch above the largest bucket runs eager at its own row count, so
 *    the op rules are checked again there: a batch dim that met a fixed one
 *    at the bucket size is refused (ERANGE), nothing is written, the daemon
 *    stays up;
 *  - an output with a batch dim is written up to its bucket's rows (padding),
 *    so it may share memory with another tensor only as an exact alias:
 *    refused at define and at rebind (EINVAL), allowed for exact in-place
 *    aliases and for fixed-shape outputs inside a larger tensor. */
#include <stdlib.h>

#include "test_client_util.h"

#define D 4
#define SENT -7.0f

static gg_client *A;

static int define(gg_program_def *p, uint64_t *id)
{
    uint64_t tmp;
    int rc = gg_client_program_define(A, p, id ? id : &tmp);
    gg_program_def_free(p);
    return rc;
}

static void fill_rows(tbuf *b, size_t from, size_t n, float base)
{
    for (size_t i = 0; i < n; i++)
        b->f[from + i] = base + (float)i;
}

static void test_rows_above_top(void)
{
    h_section("shapes above the largest bucket");
    tbuf x, y;
    if (!tbuf_new(A, &x, 100 * D) || !tbuf_new(A, &y, D * D))
        return;
    /* copy x[batch, 4] -> y[4, 4]: equal shapes at the only bucket, 4 */
    gg_program_def *p = gg_program_def_new("batch-meets-fixed");
    static const int b4[] = {4};
    gg_program_def_buckets(p, 1, b4);
    int64_t sx[2] = {GG_BATCH, D}, sy[2] = {D, D};
    gg_program_def_tensor(p, "x", x.id, 0, "f32", 2, sx);
    gg_program_def_tensor(p, "y", y.id, 0, "f32", 2, sy);
    gg_program_def_op(p, "copy", "x", "y");
    uint64_t prog = 0;
    if (!CHECKF(define(p, &prog) == 0, "define: %s", gg_client_last_error(A)))
        goto out;
    fill_rows(&x, 0, 100 * D, 1.0f);
    tbuf_fill(&y, SENT);
    gg_replay_result res;
    CHECK(gg_client_replay(A, prog, 4, -1, &res) == 0);
    int bad = 0;
    for (int i = 0; i < D * D; i++)
        bad += y.f[i] != x.f[i];
    CHECKF(bad == 0, "batch 4: y holds x's 4 rows (%d wrong)", bad);
    /* batch 50 would run eager with x at 50 rows against y's fixed 4 */
    tbuf_fill(&y, SENT);
    CHECK_FAILS(gg_client_replay(A, prog, 50, -1, &res), A, "ERANGE");
    CHECK_CONTAINS(gg_client_last_error(A), "largest bucket");
    CHECK_CONTAINS(gg_client_last_error(A), "copy");
    bad = 0;
    for (int i = 0; i < D * D; i++)
        bad += y.f[i] != SENT;
    CHECKF(bad == 0, "nothing was written (%d changed)", bad);
    CHECK(gg_client_replay(A, prog, 3, -1, &res) == 0 && res.bucket == 4);
    CHECK(gg_client_program_release(A, prog) == 0);

    /* the same with y[batch, 4]: above the bucket it runs eager, right */
    tbuf y2;
    if (tbuf_new(A, &y2, 100 * D)) {
        p = gg_program_def_new("batch-everywhere");
        gg_program_def_buckets(p, 1, b4);
        gg_program_def_tensor(p, "x", x.id, 0, "f32", 2, sx);
        gg_program_def_tensor(p, "y", y2.id, 0, "f32", 2, sx);
        gg_program_def_op(p, "copy", "x", "y");
        if (CHECKF(define(p, &prog) == 0, "define: %s", gg_client_last_error(A))) {
            tbuf_fill(&y2, SENT);
            CHECK(gg_client_replay(A, prog, 50, -1, &res) == 0 && res.path == GG_PATH_EAGER);
            bad = 0;
            for (int i = 0; i < 100 * D; i++)
                bad += y2.f[i] != (i < 50 * D ? x.f[i] : SENT);
            CHECKF(bad == 0, "batch 50: 50 rows copied, the rest untouched (%d wrong)", bad);
            CHECK(gg_client_program_release(A, prog) == 0);
        }
        CHECK(gg_client_buffer_release(A, y2.id) == 0);
    }
    tbuf_free(&y2);
out:
    CHECK(gg_client_buffer_release(A, x.id) == 0);
    CHECK(gg_client_buffer_release(A, y.id) == 0);
    tbuf_free(&x);
    tbuf_free(&y);
}

/* x1 -> y1 and x2 -> y2 in one buffer; offsets in rows of D floats */
static gg_program_def *def_two_copies(uint64_t buf, int x1, int y1, int x2, int y2)
{
    gg_program_def *p = gg_program_def_new("two-copies");
    static const int b[] = {1, 2, 4};
    gg_program_def_buckets(p, 3, b);
    int64_t s[2] = {GG_BATCH, D};
    const size_t row = D * sizeof(float);
    gg_program_def_tensor(p, "x1", buf, (uint64_t)x1 * row, "f32", 2, s);
    gg_program_def_tensor(p, "y1", buf, (uint64_t)y1 * row, "f32", 2, s);
    gg_program_def_tensor(p, "x2", buf, (uint64_t)x2 * row, "f32", 2, s);
    gg_program_def_tensor(p, "y2", buf, (uint64_t)y2 * row, "f32", 2, s);
    gg_program_def_op(p, "copy", "x1", "y1");
    gg_program_def_op(p, "copy", "x2", "y2");
    return p;
}

static void test_padding_overlaps(void)
{
    h_section("padding rows may not land on another tensor");
    tbuf m;
    if (!tbuf_new(A, &m, 64 * D))
        return;
    /* y1 rows 4..7 at bucket 4; x2 starts at row 7: batch 3 would pad row 7 */
    CHECK_FAILS(define(def_two_copies(m.id, 0, 4, 7, 16), NULL), A, "EINVAL");
    CHECK_CONTAINS(gg_client_last_error(A), "'y1'");
    CHECK_CONTAINS(gg_client_last_error(A), "'x2'");
    CHECK_CONTAINS(gg_client_last_error(A), "padding");
    /* an output's padding over a weight another node reads */
    gg_program_def *p = gg_program_def_new("over-weight");
    static const int b[] = {1, 2, 4};
    gg_program_def_buckets(p, 3, b);
    int64_t s[2] = {GG_BATCH, D}, v[1] = {D};
    gg_program_def_tensor(p, "x", m.id, 0, "f32", 2, s);
    gg_program_def_tensor(p, "w", m.id, 8 * D * sizeof(float), "f32", 1, v);
    gg_program_def_tensor(p, "y", m.id, 6 * D * sizeof(float), "f32", 2, s);
    gg_program_def_tensor(p, "z", m.id, 20 * D * sizeof(float), "f32", 2, s);
    gg_program_def_op(p, "copy", "x", "y");
    gg_program_def_op(p, "add", "x, w", "z");
    CHECK_FAILS(define(p, NULL), A, "EINVAL");
    CHECK_CONTAINS(gg_client_last_error(A), "'w'");

    /* apart at the largest bucket: accepted, and padding stays in place */
    uint64_t prog = 0;
    if (CHECKF(define(def_two_copies(m.id, 0, 4, 8, 12), &prog) == 0, "define: %s",
               gg_client_last_error(A))) {
        fill_rows(&m, 0, 4 * D, 10.0f);
        fill_rows(&m, 8 * D, 4 * D, 50.0f);
        for (int i = 4 * D; i < 8 * D; i++)
            m.f[i] = SENT;
        gg_replay_result res;
        CHECK(gg_client_replay(A, prog, 3, -1, &res) == 0 && res.bucket == 4);
        int bad = 0;
        for (int i = 0; i < 3 * D; i++)
            bad += m.f[4 * D + i] != m.f[i] || m.f[12 * D + i] != m.f[8 * D + i];
        CHECKF(bad == 0, "both copies right (%d wrong)", bad);
        bad = 0;
        for (int i = 0; i < 4 * D; i++)
            bad += m.f[8 * D + i] != 50.0f + (float)i;
        CHECKF(bad == 0, "x2 untouched by y1's padding (%d changed)", bad);
        /* rebinding x2 onto y1's padding is refused; the old layout stays */
        CHECK_FAILS(gg_client_program_rebind(A, prog, "x2", m.id, 7 * D * sizeof(float)), A,
                    "EINVAL");
        CHECK_CONTAINS(gg_client_last_error(A), "padding");
        CHECK(gg_client_replay(A, prog, 4, -1, &res) == 0);
        bad = 0;
        for (int i = 0; i < 4 * D; i++)
            bad += m.f[12 * D + i] != 50.0f + (float)i;
        CHECKF(bad == 0, "after the refused rebind x2 is still read from row 8 (%d wrong)", bad);
        CHECK(gg_client_program_release(A, prog) == 0);
    }

    /* exact in place, and a fixed-shape slot written inside a larger tensor */
    p = gg_program_def_new("in-place");
    gg_program_def_buckets(p, 3, b);
    gg_program_def_tensor(p, "x", m.id, 0, "f32", 2, s);
    gg_program_def_op(p, "scale", "x", "x");
    gg_program_def_attr_f(p, "scale", 2.0);
    CHECKF(define(p, NULL) == 0, "an exact in-place alias is accepted: %s",
           gg_client_last_error(A));
    p = gg_program_def_new("slot");
    gg_program_def_buckets(p, 3, b);
    int64_t cache[2] = {8, D}, one[2] = {1, D};
    gg_program_def_tensor(p, "cache", m.id, 16 * D * sizeof(float), "f32", 2, cache);
    gg_program_def_tensor(p, "new", m.id, 0, "f32", 2, one);
    gg_program_def_tensor(p, "slot", m.id, 19 * D * sizeof(float), "f32", 2, one);
    gg_program_def_tensor(p, "x", m.id, 32 * D * sizeof(float), "f32", 2, s);
    gg_program_def_tensor(p, "y", m.id, 40 * D * sizeof(float), "f32", 2, s);
    gg_program_def_op(p, "copy", "new", "slot");
    gg_program_def_op(p, "copy", "x", "y");
    CHECKF(define(p, NULL) == 0, "a fixed-shape output inside another tensor is accepted: %s",
           gg_client_last_error(A));
    tbuf_free(&m);
}

int main(void)
{
    h_init("test_client_layout", 300);
    h_daemon d;
    if (h_daemon_start(&d, NULL, NULL) < 0)
        return h_finish();
    A = gg_client_new();
    if (CHECK(gg_client_connect(A, d.sock, "layout") == 0)) {
        test_rows_above_top();
        test_padding_overlaps();
        const msgpack_object *hr;
        if (CHECK(gg_client_call(A, "health", NULL, 0, &hr) == 0))
            CHECK(h_get(hr, "ok") && h_get(hr, "ok")->via.boolean);
    }
    gg_client_close(A);
    CHECK_EQ(h_daemon_stop(&d), 0);
    return h_finish();
}
