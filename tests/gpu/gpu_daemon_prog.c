/* SPDX-License-Identifier: MIT */
/* Programs for the gfxgraphd GPU tests: see gpu_daemon_prog.h. */
#include "gpu_daemon_prog.h"
#include "gpu_compare.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FAIL_PRINTS 8               /* per program run */

static const int k_buckets[] = {1, 2, 4, 8, 16, 32};
_Static_assert(sizeof k_buckets / sizeof k_buckets[0] == NBK, "NBK is the bucket count");

/* ---- program specs ------------------------------------------------------------ */

const pspec P_CHAIN = {
    "chain",
    {{"x", T_IN, 0, 768, -2.0f, 2.0f},
     {"ln0.w", T_W, 0, 768, 0.8f, 1.2f},
     {"ln0.b", T_W, 0, 768, -0.2f, 0.2f},
     {"ln1.w", T_W, 0, 768, 0.8f, 1.2f},
     {"ln1.b", T_W, 0, 768, -0.2f, 0.2f},
     {"t0", T_SCR, 0, 768, 0, 0},
     {"h0", T_SCR, 0, 768, 0, 0},
     {"t1", T_SCR, 0, 768, 0, 0},
     {"y", T_OUT, 0, 768, 0, 0}},
    {{"layernorm", "x,ln0.w,ln0.b", "t0", "eps", 1e-5, NULL, NULL, 0},
     {"gelu", "t0", "h0", NULL, 0, NULL, NULL, 0},
     {"layernorm", "h0,ln1.w,ln1.b", "t1", "eps", 1e-5, NULL, NULL, 0},
     {"gelu", "t1", "y", NULL, 0, "approximate", "tanh", 0}},
};

const pspec P_MLP = {
    "mlp",
    {{"x", T_IN, 0, 256, -1.0f, 1.0f},
     {"up.w", T_W, 512, 256, -0.0625f, 0.0625f},
     {"up.b", T_W, 0, 512, -0.1f, 0.1f},
     {"down.w", T_W, 256, 512, -0.044f, 0.044f},
     {"down.b", T_W, 0, 256, -0.1f, 0.1f},
     {"h", T_SCR, 0, 512, 0, 0},
     {"g", T_SCR, 0, 512, 0, 0},
     {"y", T_OUT, 0, 256, 0, 0}},
    {{"linear", "x,up.w,up.b", "h", NULL, 0, NULL, NULL, 0},
     {"gelu", "h", "g", NULL, 0, NULL, NULL, 0},
     {"linear", "g,down.w,down.b", "y", NULL, 0, NULL, NULL, 0}},
};

const pspec P_RMS_SILU = {
    "rmsnorm+silu_mul",
    {{"x", T_IN, 0, 512, -2.0f, 2.0f},
     {"gate", T_IN, 0, 512, -2.0f, 2.0f},
     {"norm.w", T_W, 0, 512, 0.5f, 1.5f},
     {"h", T_SCR, 0, 512, 0, 0},
     {"y", T_OUT, 0, 512, 0, 0}},
    {{"rmsnorm", "x,norm.w", "h", "eps", 1e-6, NULL, NULL, 0},
     {"silu_mul", "h,gate", "y", NULL, 0, NULL, NULL, 0}},
};

const pspec P_SOFTMAX = {
    "softmax",
    {{"x", T_IN, 0, 1000, -6.0f, 6.0f}, {"y", T_OUT, 0, 1000, 0, 0}},
    {{"softmax", "x", "y", NULL, 0, NULL, NULL, 0}},
};

const pspec P_ADD = {
    "add-broadcast",
    {{"a", T_IN, 0, 384, -3.0f, 3.0f}, {"b", T_W, 0, 384, -1.0f, 1.0f},
     {"y", T_OUT, 0, 384, 0, 0}},
    {{"add", "a,b", "y", NULL, 0, NULL, NULL, 0}},
};

const pspec P_BRANCHES = {
    "branches",
    {{"x", T_IN, 0, 320, -3.0f, 3.0f}, {"t", T_SCR, 0, 320, 0, 0},
     {"y", T_OUT, 0, 320, 0, 0}},
    {{"gelu", "x", "y", NULL, 0, NULL, NULL, 0},
     {"softmax", "x", "t", NULL, 0, NULL, NULL, 1},
     {"scale", "t", "y", "scale", 100.0, NULL, NULL, 1}},
};

/* ---- setup and reference -------------------------------------------------------- */

#define IN_SKEW 768                        /* registered pointer into the input allocation */
#define OUT_BASE 256                       /* first output tensor offset in its buffer */

static uint64_t g_rng = 0x243f6a8885a308d3ull;

static float frand(float lo, float hi)
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return lo + (hi - lo) * (float)((double)(g_rng >> 40) * (1.0 / 16777216.0));
}

static double tolerance(gg_dtype dt)
{
    return dt == GG_DT_F32 ? 1e-4 : dt == GG_DT_F16 ? 3e-3 : 2e-2;
}

static int tindex(const prog_t *p, const char *name, size_t len)
{
    for (int i = 0; i < p->nt; i++)
        if (strlen(p->spec->t[i].name) == len && strncmp(p->spec->t[i].name, name, len) == 0)
            return i;
    return -1;
}

/* "a, b,c" -> indices; returns the count or -1 */
static int tlist(const prog_t *p, const char *list, int *idx)
{
    int n = 0;
    const char *s = list;
    while (*s) {
        while (*s == ' ' || *s == ',')
            s++;
        if (!*s)
            break;
        size_t len = strcspn(s, ", ");
        int k = tindex(p, s, len);
        if (k < 0 || n == GG_MAX_OPERANDS)
            return -1;
        idx[n++] = k;
        s += len;
    }
    return n;
}

static gg_tensor_desc tdesc(const prog_t *p, int i, int rows)
{
    const tspec *t = &p->spec->t[i];
    gg_tensor_desc d;
    memset(&d, 0, sizeof d);
    d.dtype = p->dt;
    if (t->kind == T_W && t->d0 == 0) {
        d.ndim = 1;
        d.dims[0] = t->d1;
    } else {
        d.ndim = 2;
        d.dims[0] = t->kind == T_W ? t->d0 : rows;
        d.dims[1] = t->d1;
    }
    return d;
}

static size_t align256(size_t v)
{
    return (v + 255) & ~(size_t)255;
}

void gd_prog_free(gg_client *c, prog_t *p)
{
    if (c && gg_client_connected(c)) {
        if (p->defined)
            gg_client_program_release(c, p->prog);
        if (p->reg_in)
            gg_client_buffer_release(c, p->id_in);
        if (p->reg_w)
            gg_client_buffer_release(c, p->id_w);
        if (p->reg_out)
            gg_client_buffer_release(c, p->id_out);
    }
    if (p->d_in)
        hipFree(p->d_in);
    if (p->d_w)
        hipFree(p->d_w);
    if (p->d_out)
        hipFree(p->d_out);
    for (int i = 0; i < MAXT; i++) {
        free(p->host[i]);
        free(p->ref[0][i]);
        free(p->ref[1][i]);
    }
    free(p->got);
    memset(p, 0, sizeof *p);
}

static void node_attrs(const gg_op_def *op, const nspec *n, gg_op_attrs *a)
{
    gg_ops_attr_defaults(op, a);
    if (n->akey) {
        int k = gg_ops_attr_index(op, n->akey);
        if (k >= 0)
            a->v[k] = n->aval;
    }
    if (n->skey) {
        int k = gg_ops_attr_index(op, n->skey);
        if (k >= 0 && op->attrs[k].choices)
            for (int j = 0; op->attrs[k].choices[j]; j++)
                if (strcmp(op->attrs[k].choices[j], n->sval) == 0)
                    a->v[k] = j;
    }
}

/* CPU reference for every branch over all MAXR rows. */
static int prog_reference(prog_t *p)
{
    for (int b = 0; b < p->nbranch; b++) {
        for (int ni = 0; ni < p->nn; ni++) {
            const nspec *n = &p->spec->n[ni];
            if (n->branch != b)
                continue;
            const gg_op_def *op = gg_ops_find(n->op);
            int ii[GG_MAX_OPERANDS], oi[GG_MAX_OPERANDS];
            int nin = tlist(p, n->in, ii), nout = tlist(p, n->out, oi);
            if (!op || nin < 0 || nout < 0) {
                gd_failf("%s: bad node spec %d", p->spec->name, ni);
                return -1;
            }
            gg_tensor in[GG_MAX_OPERANDS], out[GG_MAX_OPERANDS];
            for (int i = 0; i < nin; i++) {
                in[i].data = p->host[ii[i]];
                in[i].desc = tdesc(p, ii[i], MAXR);
            }
            for (int i = 0; i < nout; i++) {
                out[i].data = p->host[oi[i]];
                out[i].desc = tdesc(p, oi[i], MAXR);
            }
            gg_op_attrs a;
            node_attrs(op, n, &a);
            char why[256] = "";
            gg_tensor_desc din[GG_MAX_OPERANDS], dout[GG_MAX_OPERANDS];
            for (int i = 0; i < nin; i++)
                din[i] = in[i].desc;
            for (int i = 0; i < nout; i++)
                dout[i] = out[i].desc;
            if (op->check(op, din, nin, dout, nout, &a, why, sizeof why) < 0) {
                gd_failf("%s: reference node %d: %s", p->spec->name, ni, why);
                return -1;
            }
            gg_ops_run_cpu(op, in, nin, out, nout, &a);
        }
        for (int i = 0; i < p->nt; i++)
            if (p->spec->t[i].kind == T_OUT) {
                p->ref[b][i] = malloc(p->bytes[i]);
                if (!p->ref[b][i]) {
                    gd_failf("out of memory");
                    return -1;
                }
                memcpy(p->ref[b][i], p->host[i], p->bytes[i]);
            }
    }
    return 0;
}

int gd_prog_setup(gg_client *c, prog_t *p, const pspec *spec, gg_dtype dt, bool prepare)
{
    memset(p, 0, sizeof *p);
    p->spec = spec;
    p->dt = dt;
    p->es = gg_dtype_size(dt);
    while (p->nt < MAXT && spec->t[p->nt].kind != T_END)
        p->nt++;
    while (p->nn < MAXN && spec->n[p->nn].op)
        p->nn++;
    for (int i = 0; i < p->nn; i++)
        if (spec->n[i].branch + 1 > p->nbranch)
            p->nbranch = spec->n[i].branch + 1;

    size_t in_used = 0, w_used = 0, out_used = OUT_BASE, got_bytes = 0;
    for (int i = 0; i < p->nt; i++) {
        gg_tensor_desc d = tdesc(p, i, MAXR);
        p->bytes[i] = gg_desc_bytes(&d);
        p->host[i] = calloc(1, p->bytes[i]);
        if (!p->host[i]) {
            gd_failf("out of memory");
            return -1;
        }
        size_t *used = spec->t[i].kind == T_IN ? &in_used : spec->t[i].kind == T_W ? &w_used
                       : spec->t[i].kind == T_OUT ? &out_used : NULL;
        if (used) {
            p->off[i] = align256(*used);
            *used = p->off[i] + p->bytes[i];
        }
        if (spec->t[i].kind == T_OUT && p->bytes[i] > got_bytes)
            got_bytes = p->bytes[i];
        if (spec->t[i].kind == T_IN || spec->t[i].kind == T_W) {
            int64_t n = gg_desc_numel(&d);
            for (int64_t k = 0; k < n; k++)
                gg_store(p->host[i], dt, k, frand(spec->t[i].lo, spec->t[i].hi));
        }
    }
    p->got = malloc(got_bytes ? got_bytes : 1);
    if (!p->got) {
        gd_failf("out of memory");
        return -1;
    }
    if (prog_reference(p) < 0)
        return -1;

    p->in_bytes = in_used;
    p->w_bytes = w_used ? w_used : 256;
    p->out_bytes = out_used;
    HIP_OK(hipMalloc(&p->d_in, IN_SKEW + p->in_bytes + 4096));
    HIP_OK(hipMalloc(&p->d_w, p->w_bytes));
    HIP_OK(hipMalloc(&p->d_out, p->out_bytes));
    p->in_reg = (uint8_t *)p->d_in + IN_SKEW;
    for (int i = 0; i < p->nt; i++) {
        if (spec->t[i].kind == T_IN)
            HIP_OK(hipMemcpy(p->in_reg + p->off[i], p->host[i], p->bytes[i],
                             hipMemcpyHostToDevice));
        else if (spec->t[i].kind == T_W)
            HIP_OK(hipMemcpy((uint8_t *)p->d_w + p->off[i], p->host[i], p->bytes[i],
                             hipMemcpyHostToDevice));
    }
    HIP_OK(hipDeviceSynchronize());

    int rc = gg_client_buffer_register_device(c, p->in_reg, p->in_bytes, &p->id_in);
    if (!gd_check(rc == 0, "%s/%s: register inputs by a pointer %d bytes into the allocation: %s",
                  spec->name, gg_dtype_name(dt), IN_SKEW, rc ? gg_client_last_error(c) : "ok"))
        return -1;
    p->reg_in = true;
    if ((rc = gg_client_buffer_register_device(c, p->d_w, p->w_bytes, &p->id_w)) < 0) {
        gd_failf("%s: register weights: %s", spec->name, gg_client_last_error(c));
        return -1;
    }
    p->reg_w = true;
    if ((rc = gg_client_buffer_register_device(c, p->d_out, p->out_bytes, &p->id_out)) < 0) {
        gd_failf("%s: register outputs: %s", spec->name, gg_client_last_error(c));
        return -1;
    }
    p->reg_out = true;

    char pname[64];
    snprintf(pname, sizeof pname, "%s-%s", spec->name, gg_dtype_name(dt));
    gg_program_def *d = gg_program_def_new(pname);
    if (!d) {
        gd_failf("out of memory");
        return -1;
    }
    const char *dts = gg_dtype_name(dt);
    for (int i = 0; i < p->nt; i++) {
        const tspec *t = &spec->t[i];
        gg_tensor_desc dd = tdesc(p, i, MAXR);
        int64_t dims[2] = {dd.dims[0], dd.dims[1]};
        if (t->kind != T_W)
            dims[0] = GG_BATCH;
        if (t->kind == T_SCR)
            gg_program_def_scratch(d, t->name, dts, dd.ndim, dims);
        else
            gg_program_def_tensor(d, t->name,
                                  t->kind == T_IN ? p->id_in : t->kind == T_W ? p->id_w : p->id_out,
                                  p->off[i], dts, dd.ndim, dims);
    }
    int cur = 0;
    for (int ni = 0; ni < p->nn; ni++) {
        const nspec *n = &spec->n[ni];
        while (cur < n->branch)
            cur = gg_program_def_branch(d);
        gg_program_def_op(d, n->op, n->in, n->out);
        if (n->akey)
            gg_program_def_attr_f(d, n->akey, n->aval);
        if (n->skey)
            gg_program_def_attr_s(d, n->skey, n->sval);
    }
    gg_program_def_buckets(d, NBK, k_buckets);
    if (gg_program_def_error(d)[0]) {
        gd_failf("%s: program builder: %s", pname, gg_program_def_error(d));
        gg_program_def_free(d);
        return -1;
    }
    rc = gg_client_program_define(c, d, &p->prog);
    gg_program_def_free(d);
    if (!gd_check(rc == 0, "%s: program.define: %s", pname, rc ? gg_client_last_error(c) : "ok"))
        return -1;
    p->defined = true;
    if (prepare) {
        int ready = -1, failed = -1;
        rc = gg_client_program_prepare(c, p->prog, 0, NULL, -1, &ready, &failed);
        if (!gd_check(rc == 0 && ready == NBK * p->nbranch && failed == 0,
                      "%s: prepare every bucket: rc %d, ready %d of %d, failed %d (%s)", pname, rc,
                      ready, NBK * p->nbranch, failed, rc ? gg_client_last_error(c) : "-"))
            return -1;
    }
    return 0;
out:
    return -1;
}

/* ---- replays ------------------------------------------------------------------ */

static int bucket_for(int batch)
{
    for (int i = 0; i < NBK; i++)
        if (k_buckets[i] >= batch)
            return k_buckets[i];
    return 0;
}

int gd_bucket_slot(int bucket)
{
    for (int i = 0; i < NBK; i++)
        if (k_buckets[i] == bucket)
            return i;
    return -1;
}

int gd_replay_check(gg_client *c, prog_t *p, int batch, int branch, expect_t ex, bool want_captured,
                    int *printed, gg_replay_result *out_res)
{
    char pname[64], why[512] = "";
    size_t wl = 0;
    snprintf(pname, sizeof pname, "%s-%s", p->spec->name, gg_dtype_name(p->dt));
#define WHY(...)                                                                           \
    do {                                                                                   \
        if (wl < sizeof why)                                                               \
            wl += (size_t)snprintf(why + wl, sizeof why - wl, __VA_ARGS__);                \
    } while (0)
    HIP_OK(hipMemset(p->d_out, 0xff, p->out_bytes));
    HIP_OK(hipDeviceSynchronize());
    gg_replay_result r;
    memset(&r, 0, sizeof r);
    int rc = gg_client_replay(c, p->prog, batch, branch, &r);
    if (out_res)
        *out_res = r;
    if (rc < 0) {
        gd_failf("%s batch %d branch %d: replay: %s (%s)", pname, batch, branch,
                 gg_client_last_error(c), gg_client_last_error_code(c));
        return gg_client_connected(c) ? 1 : -1;
    }
    int want_bucket = bucket_for(batch);
    gg_replay_path want_path = (ex == EXPECT_NORMAL && want_bucket) ? GG_PATH_GRAPH : GG_PATH_EAGER;
    bool want_fallback = ex == EXPECT_FALLBACK && want_bucket != 0;
    if (r.path != want_path)
        WHY(" path %s (want %s: %s);", r.path == GG_PATH_GRAPH ? "graph" : "eager",
            want_path == GG_PATH_GRAPH ? "graph" : "eager", r.reason[0] ? r.reason : "-");
    if (r.bucket != want_bucket)
        WHY(" bucket %d (want %d);", r.bucket, want_bucket);
    if (r.fallback != want_fallback)
        WHY(" fallback %d (want %d);", r.fallback, want_fallback);
    if (want_fallback && !r.reason[0])
        WHY(" no reason given for the fallback;");
    if (ex == EXPECT_NORMAL && r.captured != want_captured)
        WHY(" captured %d (want %d);", r.captured, want_captured);
    if (r.batch != batch || r.branch != (branch < 0 ? 0 : branch))
        WHY(" echoed batch %d branch %d;", r.batch, r.branch);
    if (!(r.device_us >= 0))
        WHY(" device_us %g;", r.device_us);
    int b = branch < 0 ? 0 : branch;
    double worst = 0;
    for (int i = 0; i < p->nt; i++) {
        if (p->spec->t[i].kind != T_OUT)
            continue;
        gg_tensor_desc d = tdesc(p, i, batch);
        size_t nb = gg_desc_bytes(&d);
        HIP_OK(hipMemcpy(p->got, (uint8_t *)p->d_out + p->off[i], nb, hipMemcpyDeviceToHost));
        int64_t bad;
        double err = gt_rel_l2(p->got, p->ref[b][i], p->dt, gg_desc_numel(&d), &bad);
        if (bad >= 0)
            WHY(" %s: non-finite at %lld (%g, reference %g);", p->spec->t[i].name,
                (long long)bad, gg_load(p->got, p->dt, bad), gg_load(p->ref[b][i], p->dt, bad));
        else if (!(err <= tolerance(p->dt)))
            WHY(" %s: rel-L2 %.3g > %.0e;", p->spec->t[i].name, err, tolerance(p->dt));
        if (!(err <= worst))
            worst = err;
    }
    bool ok = wl == 0;
    gd_pass += ok;
    gd_fail += !ok;
    if (!ok && (*printed)++ < MAX_FAIL_PRINTS) {
        printf("FAIL [%s]: %s batch %d branch %d:%s\n", gd_scn, pname, batch, branch, why);
        fflush(stdout);
    } else if (ok && gd_verbose) {
        printf("ok   [%s]: %s batch %2d branch %d: %s bucket %2d%s%s rel-L2 %.2e device %.1f us\n",
               gd_scn, pname, batch, branch, r.path == GG_PATH_GRAPH ? "graph" : "eager", r.bucket,
               r.captured ? " captured" : "", r.fallback ? " fallback" : "", worst, r.device_us);
    }
    return ok ? 0 : 1;
#undef WHY
out:
    return 1;
}

int gd_prog_run(gg_client *c, prog_t *p, expect_t ex, bool prepared, run_counts *rcnt,
                const bool (*seen0)[NBK])
{
    bool seen[2][NBK];
    memset(seen, 0, sizeof seen);
    if (seen0)
        memcpy(seen, seen0, sizeof seen);
    int printed = 0, bad = 0;
    for (int batch = 1; batch <= MAXR; batch++)
        for (int b = 0; b < p->nbranch; b++) {
            int slot = gd_bucket_slot(bucket_for(batch));
            bool want_captured = !prepared && slot >= 0 && !seen[b][slot];
            gg_replay_result r;
            int rc = gd_replay_check(c, p, batch, p->nbranch > 1 ? b : -1, ex, want_captured,
                                     &printed, &r);
            if (rc < 0)
                return -1;
            bad += rc;
            if (slot >= 0)
                seen[b][slot] = true;
            if (rcnt) {
                rcnt->replays++;
                rcnt->graph += r.path == GG_PATH_GRAPH;
                rcnt->eager += r.path == GG_PATH_EAGER;
                rcnt->fallback += r.fallback;
            }
        }
    if (printed > MAX_FAIL_PRINTS)
        printf("FAIL [%s]: %s-%s: %d more mismatches not shown\n", gd_scn, p->spec->name,
               gg_dtype_name(p->dt), printed - MAX_FAIL_PRINTS);
    printf("#   %s-%s: %d of %d replays matched\n", p->spec->name, gg_dtype_name(p->dt),
           MAXR * p->nbranch - bad, MAXR * p->nbranch);
    return bad;
}
