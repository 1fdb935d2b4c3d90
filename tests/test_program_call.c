/* SPDX-License-Identifier: MIT */
/* Programs that call programs ({op: "call"}): a caller runs its callee's
 * nodes at its own bucket, in one graph; results checked against a double
 * reference; the callee's cache entries are its own; calls of calls,
 * branches, a released callee; every refusal with its code and message. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_client_util.h"

#define D 5          /* odd row width */
#define ROWS 4       /* the largest bucket */
#define TOL 1e-5

static const int buckets[] = {1, 2, 4};

typedef struct {
    tbuf in, x, y, out, fin;
    uint64_t layer, model, top;
} calls;

/* model: x = 3 * in; call layer (y = silu(x) * 2 + x); out = y + in.
 * top: call model; fin = 0.5 * out. */
static int define_model(gg_client *c, calls *k, uint64_t callee, int callee_branch,
                        uint64_t *out_id)
{
    gg_program_def *p = gg_program_def_new("model");
    int64_t s[2] = {GG_BATCH, D};
    gg_program_def_buckets(p, 3, buckets);
    gg_program_def_tensor(p, "in", k->in.id, 0, "f32", 2, s);
    gg_program_def_tensor(p, "x", k->x.id, 0, "f32", 2, s);
    gg_program_def_tensor(p, "y", k->y.id, 0, "f32", 2, s);
    gg_program_def_tensor(p, "out", k->out.id, 0, "f32", 2, s);
    gg_program_def_op(p, "scale", "in", "x");
    gg_program_def_attr_f(p, "scale", 3.0);
    gg_program_def_call(p, callee, callee_branch);
    gg_program_def_op(p, "add", "y, in", "out");
    int rc = gg_client_program_define(c, p, out_id);
    gg_program_def_free(p);
    return rc;
}

static void fill_in(calls *k)
{
    for (int i = 0; i < ROWS * D; i++)
        k->in.f[i] = 0.37f * (float)((i * 7) % 11) - 1.6f;
    tbuf_fill(&k->out, NAN);
    tbuf_fill(&k->fin, NAN);
}

/* out (and fin) for the first batch rows against the reference; branch 1
 * of the layer computes y = x * 4 instead. */
static int wrong_rows(const calls *k, int batch, int layer_branch, bool top)
{
    int bad = 0;
    for (int i = 0; i < batch * D; i++) {
        double in = k->in.f[i], x = 3.0 * in;
        double y = layer_branch == 0 ? t_silu2x_ref(x) : 4.0 * x;
        double out = y + in;
        if (!t_close(k->out.f[i], out, TOL))
            bad++;
        if (top && !t_close(k->fin.f[i], 0.5 * out, TOL))
            bad++;
    }
    return bad;
}

static bool setup(gg_client *c, calls *k)
{
    memset(k, 0, sizeof *k);
    if (!tbuf_new(c, &k->in, ROWS * D) || !tbuf_new(c, &k->x, ROWS * D) ||
        !tbuf_new(c, &k->y, ROWS * D) || !tbuf_new(c, &k->out, ROWS * D) ||
        !tbuf_new(c, &k->fin, ROWS * D))
        return false;
    /* layer, branch 0: y = silu(x) * 2 + x; branch 1: y = 4 x */
    gg_program_def *p = gg_program_def_new("layer");
    int64_t s[2] = {GG_BATCH, D};
    gg_program_def_buckets(p, 3, buckets);
    gg_program_def_tensor(p, "x", k->x.id, 0, "f32", 2, s);
    gg_program_def_tensor(p, "y", k->y.id, 0, "f32", 2, s);
    gg_program_def_scratch(p, "a", "f32", 2, s);
    gg_program_def_scratch(p, "b", "f32", 2, s);
    gg_program_def_op(p, "silu", "x", "a");
    gg_program_def_op(p, "scale", "a", "b");
    gg_program_def_attr_f(p, "scale", 2.0);
    gg_program_def_op(p, "add", "b, x", "y");
    gg_program_def_branch(p);
    gg_program_def_op(p, "scale", "x", "y");
    gg_program_def_attr_f(p, "scale", 4.0);
    int rc = gg_client_program_define(c, p, &k->layer);
    gg_program_def_free(p);
    return CHECKF(rc == 0, "define layer: %s", gg_client_last_error(c));
}

static void free_bufs(calls *k)
{
    tbuf_free(&k->in);
    tbuf_free(&k->x);
    tbuf_free(&k->y);
    tbuf_free(&k->out);
    tbuf_free(&k->fin);
}

/* program.list's entry for id: its node count, -1 when absent. */
static int64_t listed_nodes(gg_client *c, uint64_t id)
{
    const msgpack_object *r = NULL;
    if (!CHECKF(gg_client_call(c, "program.list", NULL, 0, &r) == 0, "program.list: %s",
                gg_client_last_error(c)))
        return -1;
    const msgpack_object *list = h_get(r, "programs");
    for (uint32_t i = 0; list && list->type == MSGPACK_OBJECT_ARRAY && i < list->via.array.size;
         i++)
        if (h_getu(&list->via.array.ptr[i], "id") == id)
            return h_geti(&list->via.array.ptr[i], "nodes");
    return -1;
}

static void test_results(const h_daemon *d)
{
    h_section("a call runs the callee's nodes at the caller's bucket");
    gg_client *c = t_connect(d, "call-test");
    calls k;
    if (!c || !setup(c, &k))
        goto out;
    CHECKF(define_model(c, &k, k.layer, 0, &k.model) == 0, "define model: %s",
           gg_client_last_error(c));
    CHECK_EQ(listed_nodes(c, k.model), 5);     /* scale, 3 of the layer's, add */

    for (int batch = 1; batch <= ROWS; batch++) {
        fill_in(&k);
        gg_replay_result r;
        int rc = gg_client_replay(c, k.model, batch, 0, &r);
        CHECKF(rc == 0, "replay model batch %d: %s", batch, gg_client_last_error(c));
        CHECKF(wrong_rows(&k, batch, 0, false) == 0, "model batch %d: rows right", batch);
        CHECK_EQ(r.path, GG_PATH_GRAPH);
    }
    /* The caller's graphs hold the callee's kernels: the callee has no
     * cache entry until it is replayed itself, and then its own. */
    const msgpack_object *st = t_stats(c);
    CHECK_EQ(t_entries_of(st, k.model), 3);
    CHECK_EQ(t_entries_of(st, k.layer), 0);
    gg_replay_result r;
    fill_in(&k);
    for (int i = 0; i < ROWS * D; i++)
        k.x.f[i] = k.in.f[i];
    CHECK(gg_client_replay(c, k.layer, 2, 0, &r) == 0);
    for (int i = 0; i < 2 * D; i++)
        CHECKF(t_close(k.y.f[i], t_silu2x_ref(k.in.f[i]), TOL), "layer alone, element %d", i);
    st = t_stats(c);
    CHECK_EQ(t_entries_of(st, k.layer), 1);
    CHECK_EQ(t_entries_of(st, k.model), 3);

    h_section("a call of a call; a callee's other branch");
    gg_program_def *p = gg_program_def_new("top");
    int64_t s[2] = {GG_BATCH, D};
    gg_program_def_buckets(p, 3, buckets);
    gg_program_def_tensor(p, "out", k.out.id, 0, "f32", 2, s);
    gg_program_def_tensor(p, "fin", k.fin.id, 0, "f32", 2, s);
    gg_program_def_call(p, k.model, 0);
    gg_program_def_op(p, "scale", "out", "fin");
    gg_program_def_attr_f(p, "scale", 0.5);
    CHECKF(gg_client_program_define(c, p, &k.top) == 0, "define top: %s", gg_client_last_error(c));
    gg_program_def_free(p);
    CHECK_EQ(listed_nodes(c, k.top), 6);
    fill_in(&k);
    CHECKF(gg_client_replay(c, k.top, 3, 0, &r) == 0, "replay top: %s", gg_client_last_error(c));
    CHECKF(wrong_rows(&k, 3, 0, true) == 0, "top batch 3: rows right");

    uint64_t model1 = 0;
    CHECKF(define_model(c, &k, k.layer, 1, &model1) == 0, "define model on branch 1: %s",
           gg_client_last_error(c));
    CHECK_EQ(listed_nodes(c, model1), 3);
    fill_in(&k);
    CHECK(gg_client_replay(c, model1, 4, 0, &r) == 0);
    CHECKF(wrong_rows(&k, 4, 1, false) == 0, "model on layer branch 1: rows right");

    h_section("a caller outlives its callee's release");
    CHECK(gg_client_program_release(c, k.layer) == 0);
    CHECK(gg_client_program_release(c, k.model) == 0);
    fill_in(&k);
    CHECKF(gg_client_replay(c, k.top, 4, 0, &r) == 0, "replay top after releases: %s",
           gg_client_last_error(c));
    CHECKF(wrong_rows(&k, 4, 0, true) == 0, "top after its callees' release: rows right");
    /* above the largest bucket the call runs eager, still inside its rows */
    CHECK(gg_client_replay(c, k.top, ROWS + 1, 0, &r) < 0);
    CHECK_CONTAINS(gg_client_last_error(c), "batch");
out:
    free_bufs(&k);
    gg_client_close(c);
}

static void expect_refused(gg_client *c, gg_program_def *p, int code, const char *needle)
{
    uint64_t id = 0;
    int rc = gg_client_program_define(c, p, &id);
    CHECKF(rc == code, "define refused with %d (got %d: %s)", code, rc, gg_client_last_error(c));
    CHECK_CONTAINS(gg_client_last_error(c), needle);
    gg_program_def_free(p);
}

static void test_refusals(const h_daemon *d)
{
    h_section("calls that are refused");
    gg_client *c = t_connect(d, "call-refusals");
    gg_client *other = t_connect(d, "call-other");
    calls k, ko;
    memset(&ko, 0, sizeof ko);
    if (!c || !other || !setup(c, &k) || !setup(other, &ko))
        goto out;
    int64_t s[2] = {GG_BATCH, D};

    gg_program_def *p = gg_program_def_new("bad");
    gg_program_def_buckets(p, 3, buckets);
    gg_program_def_tensor(p, "in", k.in.id, 0, "f32", 2, s);
    gg_program_def_call(p, 987654, 0);
    expect_refused(c, p, -ENOENT, "no program with id 987654");

    p = gg_program_def_new("bad");
    gg_program_def_buckets(p, 3, buckets);
    gg_program_def_tensor(p, "in", k.in.id, 0, "f32", 2, s);
    gg_program_def_call(p, ko.layer, 0);
    expect_refused(c, p, -EACCES, "another session");

    p = gg_program_def_new("bad");
    static const int other_buckets[] = {1, 2, 4, 8};
    gg_program_def_buckets(p, 4, other_buckets);
    gg_program_def_tensor(p, "in", k.in.id, 0, "f32", 2, s);
    gg_program_def_call(p, k.layer, 0);
    expect_refused(c, p, -EINVAL, "same buckets");

    p = gg_program_def_new("bad");
    gg_program_def_buckets(p, 3, buckets);
    gg_program_def_tensor(p, "in", k.in.id, 0, "f32", 2, s);
    gg_program_def_call(p, k.layer, 2);
    expect_refused(c, p, -EINVAL, "branch 2 does not exist");

    p = gg_program_def_new("bad");
    gg_program_def_call(p, k.layer, 0);
    CHECK(gg_program_def_attr_f(p, "scale", 1.0) == -EINVAL);
    CHECK_CONTAINS(gg_program_def_error(p), "takes no attributes");
    gg_program_def_free(p);

    /* the wire form with operands, and program on an ordinary node */
    const char *const args[] = {NULL};
    (void)args;
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    for (int form = 0; form < 2; form++) {
        msgpack_sbuffer_clear(&sb);
        msgpack_pack_map(&pk, 4);
        msgpack_pack_str_with_body(&pk, "name", 4);
        msgpack_pack_str_with_body(&pk, "bad", 3);
        msgpack_pack_str_with_body(&pk, "buckets", 7);
        msgpack_pack_array(&pk, 3);
        for (int i = 0; i < 3; i++)
            msgpack_pack_int(&pk, buckets[i]);
        msgpack_pack_str_with_body(&pk, "tensors", 7);
        msgpack_pack_map(&pk, 1);
        msgpack_pack_str_with_body(&pk, "in", 2);
        msgpack_pack_map(&pk, 3);
        msgpack_pack_str_with_body(&pk, "buffer", 6);
        msgpack_pack_uint64(&pk, k.in.id);
        msgpack_pack_str_with_body(&pk, "dtype", 5);
        msgpack_pack_str_with_body(&pk, "f32", 3);
        msgpack_pack_str_with_body(&pk, "shape", 5);
        msgpack_pack_array(&pk, 2);
        msgpack_pack_str_with_body(&pk, "batch", 5);
        msgpack_pack_int(&pk, D);
        msgpack_pack_str_with_body(&pk, "nodes", 5);
        msgpack_pack_array(&pk, 1);
        msgpack_pack_map(&pk, 3);
        msgpack_pack_str_with_body(&pk, "op", 2);
        if (form == 0) {
            msgpack_pack_str_with_body(&pk, "call", 4);
            msgpack_pack_str_with_body(&pk, "program", 7);
            msgpack_pack_uint64(&pk, k.layer);
            msgpack_pack_str_with_body(&pk, "inputs", 6);
            msgpack_pack_array(&pk, 1);
            msgpack_pack_str_with_body(&pk, "in", 2);
        } else {
            msgpack_pack_str_with_body(&pk, "scale", 5);
            msgpack_pack_str_with_body(&pk, "program", 7);
            msgpack_pack_uint64(&pk, k.layer);
            msgpack_pack_str_with_body(&pk, "outputs", 7);
            msgpack_pack_array(&pk, 1);
            msgpack_pack_str_with_body(&pk, "in", 2);
        }
        const msgpack_object *r = NULL;
        int rc = gg_client_call(c, "program.define", sb.data, sb.size, &r);
        CHECKF(rc == -EINVAL, "wire form %d refused with EINVAL (got %d)", form, rc);
        CHECK_CONTAINS(gg_client_last_error(c),
                       form == 0 ? "a call takes 'program' and 'branch', not 'inputs'"
                                 : "belong to a call node only");
    }
    msgpack_sbuffer_destroy(&sb);
    /* a node without 'op' (the cost estimate and the call check both look
     * for one): refused, and the daemon goes on */
    static const char *const no_op[] = {
        "{\"name\": \"bad\", \"buckets\": [1, 2, 4], \"tensors\": {\"s\": {\"scratch\": true, \"dtype\": \"f32\", \"shape\": [\"batch\", 4]}}, \"nodes\": [{}]}",
        "{\"name\": \"bad\", \"buckets\": [1, 2, 4], \"tensors\": {\"s\": {\"scratch\": true, \"dtype\": \"f32\", \"shape\": [\"batch\", 4]}}, \"nodes\": [{\"a\": 1}]}",
        "{\"name\": \"bad\", \"buckets\": [1, 2, 4], \"tensors\": {\"s\": {\"scratch\": true, \"dtype\": \"f32\", \"shape\": [\"batch\", 4]}}, \"branches\": [[{}], [7]]}",
    };
    for (size_t i = 0; i < sizeof no_op / sizeof no_op[0]; i++) {
        char *out = NULL;
        int rc = gg_client_call_json(c, "program.define", no_op[i], &out);
        CHECKF(rc == -EINVAL, "a node without op (%zu) refused with EINVAL (got %d: %s)", i, rc,
               gg_client_last_error(c));
        CHECK_CONTAINS(gg_client_last_error(c), "node 0");
        gg_client_free_json(out);
    }
    /* the session is still fine */
    uint64_t id = 0;
    CHECK(define_model(c, &k, k.layer, 0, &id) == 0);
out:
    free_bufs(&k);
    free_bufs(&ko);
    gg_client_close(c);
    gg_client_close(other);
}

int main(void)
{
    h_init("test_program_call", 300);
    h_daemon d;
    if (h_daemon_start(&d, NULL, NULL) == 0) {
        test_results(&d);
        test_refusals(&d);
        h_daemon_stop(&d);
    }
    return h_finish();
}
