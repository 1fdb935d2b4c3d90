/* SPDX-License-Identifier: MIT */
/* The program builder: a program built from its define and checked.
 *
 * The define arrives as core/program_spec.h has it.  Everything a replay
 * will touch is decided here: each tensor's buffer, offset, dtype and
 * shape, each node's op, operands and attributes, and the nodes call nodes
 * copy in.  A program is accepted only if every node passes its op's shape
 * rule at every bucket and every buffer tensor lies inside its buffer at
 * the largest bucket, so the executor never re-checks.
 * The spec is what the client sent, faults included: the checks run here
 * in one fixed order, so the first fault found is the one reported.  It
 * runs on the loop or, for a large define, on a pool thread: it reads the
 * core only through its gg_define_env.  It calls down only, into the
 * planner (fuse.c) and the layout queries (program_layout.c): the registry
 * (program.c) commits what it builds. */
#include "core/program.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/cache.h"
#include "core/core.h"
#include "core/fuse.h"
#include "core/quota.h"

/* ---- the spec's values, read as the request's arguments ---------------- */

bool gg_spec_str_eq(const gg_spec_val *v, const char *s)
{
    size_t n = strlen(s);
    return v->kind == GG_SPEC_STR && v->len == n && memcmp(v->s, s, n) == 0;
}

static bool spec_f64(const gg_spec_val *v, double *out)
{
    switch (v->kind) {
    case GG_SPEC_FLOAT:
        *out = v->f;
        return isfinite(*out);
    case GG_SPEC_UINT:
        *out = (double)v->u;
        return true;
    case GG_SPEC_INT:
        *out = (double)v->i;
        return true;
    default:
        return false;
    }
}

/* An argument's presence, as every typed read below sees it: absent (or
 * nil where it may be left out) is -ENOENT, or the error of a required
 * one. */
static int spec_find(const gg_spec_val *v, const char *key, bool required, proto_errbuf *e)
{
    if (v->kind == GG_SPEC_ABSENT || (v->kind == GG_SPEC_NIL && !required))
        return required ? proto_fail(e, -EINVAL, "missing required argument '%s'", key)
                        : -ENOENT;
    return 0;
}

static int spec_str(const gg_spec_val *v, const char *key, bool required, const char **s,
                    size_t *len, proto_errbuf *e)
{
    int rc = spec_find(v, key, required, e);
    if (rc < 0)
        return rc;
    if (v->kind != GG_SPEC_STR)
        return proto_fail(e, -EINVAL, "argument '%s' must be a string", key);
    *s = v->s;
    *len = v->len;
    return 0;
}

int gg_spec_u64(const gg_spec_val *v, const char *key, bool required, uint64_t *out,
                proto_errbuf *e)
{
    int rc = spec_find(v, key, required, e);
    if (rc < 0)
        return rc;
    if (v->kind != GG_SPEC_UINT)
        return proto_fail(e, -EINVAL, "argument '%s' must be a non-negative integer", key);
    *out = v->u;
    return 0;
}

static int spec_bool(const gg_spec_val *v, const char *key, bool required, bool *out,
                     proto_errbuf *e)
{
    int rc = spec_find(v, key, required, e);
    if (rc < 0)
        return rc;
    if (v->kind != GG_SPEC_BOOL)
        return proto_fail(e, -EINVAL, "argument '%s' must be true or false", key);
    *out = v->b;
    return 0;
}

/* A container argument of kind `kind` (GG_SPEC_ARRAY or GG_SPEC_MAP). */
static int spec_container(const gg_spec_val *v, const char *key, bool required, int kind,
                          proto_errbuf *e)
{
    int rc = spec_find(v, key, required, e);
    if (rc < 0)
        return rc;
    if (v->kind != kind)
        return proto_fail(e, -EINVAL, "argument '%s' must be %s", key,
                          kind == GG_SPEC_MAP ? "a map" : "an array");
    return 0;
}

/* A str value into a NUL-terminated buffer; -EINVAL if it does not fit. */
static int spec_strdup(const gg_spec_val *v, char *dst, size_t cap)
{
    if (v->kind != GG_SPEC_STR || v->len >= cap)
        return -EINVAL;
    memcpy(dst, v->s, v->len);
    dst[v->len] = '\0';
    return 0;
}

static int prog_name(const gg_spec_val *o, char *dst, size_t cap, const char *what,
                     proto_errbuf *e)
{
    /* names come back in program.list and stats: only valid UTF-8 */
    if (o->kind != GG_SPEC_STR || o->len == 0 || o->len >= cap || !proto_utf8_valid(o->s, o->len))
        return proto_fail(e, -EINVAL, "%s must be a UTF-8 string of 1 to %zu bytes", what,
                          cap - 1);
    memcpy(dst, o->s, o->len);
    dst[o->len] = '\0';
    return 0;
}

/* base: NULL, or (for a {view: name, shape} spec) the tensor viewed, with
 * index base_idx: same dtype, same bytes, same element count at every
 * bucket, "batch" dim 0 in both or in neither. */
static int prog_tensor(const gg_define_env *env, const gg_program_spec *ps, const char *name,
                       const gg_spec_tensor *spec, gg_ptensor *t, const gg_ptensor *base,
                       int base_idx, proto_errbuf *e)
{
    int rc;
    if (!spec->is_map)
        return proto_fail(e, -EINVAL, "tensor '%s' must be a map {buffer, offset, dtype, shape}, "
                          "{scratch: true, dtype, shape} or {view: name, shape}", name);
    snprintf(t->name, sizeof(t->name), "%s", name);
    t->view_of = -1;
    const char *dt = NULL;
    size_t dtlen = 0;
    char sub[160] = "";
    proto_errbuf se = {sub, sizeof(sub)};
    if ((rc = spec_str(&spec->dtype, "dtype", base == NULL, &dt, &dtlen, &se)) < 0 &&
        (base == NULL || rc != -ENOENT))
        return proto_fail(e, rc, "tensor '%s': %s", name, sub);
    if (rc == -ENOENT)
        t->desc.dtype = base->desc.dtype;
    else if (gg_dtype_parse(dt, dtlen, &t->desc.dtype) < 0)
        return proto_fail(e, -EINVAL, "tensor '%s': dtype '%.*s' is not one of f32, f16, bf16, i32, i64, bool",
                          name, (int)(dtlen > 16 ? 16 : dtlen), dt);
    if (base && t->desc.dtype != base->desc.dtype)
        return proto_fail(e, -EINVAL, "tensor '%s': a view has the dtype of the tensor it views "
                          "('%s' is %s)", name, base->name, gg_dtype_name(base->desc.dtype));
    const gg_spec_val *shape = &spec->shape;
    if ((rc = spec_container(shape, "shape", true, GG_SPEC_ARRAY, &se)) < 0)
        return proto_fail(e, rc, "tensor '%s': %s", name, sub);
    uint32_t nd = shape->len;
    if (nd < 1 || nd > GG_MAX_DIMS)
        return proto_fail(e, -EINVAL, "tensor '%s': shape must have 1 to %d dims, got %u", name,
                          GG_MAX_DIMS, nd);
    t->desc.ndim = (int)nd;
    t->batch_dim = -1;
    for (uint32_t i = 0; i < nd; i++) {
        const gg_spec_val *d = &ps->vals[shape->u + i];
        if (gg_spec_str_eq(d, "batch")) {
            /* Only a leading batch dim keeps the layout of the real rows the
             * same at every bucket, and keeps padding out of every reduction. */
            if (i != 0)
                return proto_fail(e, -EINVAL, "tensor '%s': \"batch\" may only be the first dim",
                                  name);
            t->batch_dim = (int)i;
            t->desc.dims[i] = 1;
        } else if (d->kind == GG_SPEC_UINT && d->u >= 1 && d->u <= (1u << 30)) {
            t->desc.dims[i] = (int64_t)d->u;
        } else {
            return proto_fail(e, -EINVAL, "tensor '%s': dim %u must be an integer from 1 to 2^30 "
                              "or \"batch\"", name, i);
        }
    }
    /* Bound the size at the largest batch so no size computation can wrap. */
    uint64_t bytes = gg_dtype_size(t->desc.dtype);
    for (int i = 0; i < t->desc.ndim; i++) {
        uint64_t d = i == t->batch_dim ? GG_MAX_BATCH : (uint64_t)t->desc.dims[i];
        if (__builtin_mul_overflow(bytes, d, &bytes) || bytes > GG_MAX_TENSOR_BYTES)
            return proto_fail(e, -EINVAL, "tensor '%s' is too large: at most %llu bytes at batch %d",
                              name, (unsigned long long)GG_MAX_TENSOR_BYTES, GG_MAX_BATCH);
    }
    if (base) {
        gg_tensor_desc d1 = gg_program_desc_at(t, 1), b1 = gg_program_desc_at(base, 1);
        if (spec->buffer.kind != GG_SPEC_ABSENT || spec->offset.kind != GG_SPEC_ABSENT ||
            spec->scratch.kind != GG_SPEC_ABSENT)
            return proto_fail(e, -EINVAL, "tensor '%s': a view takes only view, shape and "
                              "dtype; it lies where '%s' does", name, base->name);
        if ((t->batch_dim >= 0) != (base->batch_dim >= 0) ||
            gg_desc_numel(&d1) != gg_desc_numel(&b1))
            return proto_fail(e, -EINVAL, "tensor '%s': a view must have the element count of "
                              "'%s' at every bucket (the same count per batch row, and \"batch\" "
                              "as dim 0 in both or in neither)", name, base->name);
        t->buf = base->buf;
        t->offset = base->offset;
        t->view_of = base->view_of >= 0 ? base->view_of : base_idx;
        return 0;
    }
    bool scratch = false;
    rc = spec_bool(&spec->scratch, "scratch", false, &scratch, &se);
    if (rc < 0 && rc != -ENOENT)
        return proto_fail(e, rc, "tensor '%s': %s", name, sub);
    if (scratch) {
        if (spec->buffer.kind != GG_SPEC_ABSENT)
            return proto_fail(e, -EINVAL, "tensor '%s': a scratch tensor has no buffer", name);
        return 0;
    }
    uint64_t bid, off = 0;
    if ((rc = gg_spec_u64(&spec->buffer, "buffer", true, &bid, &se)) < 0)
        return proto_fail(e, rc, "tensor '%s': %s (or scratch: true)", name, sub);
    if ((rc = gg_spec_u64(&spec->offset, "offset", false, &off, &se)) < 0 && rc != -ENOENT)
        return proto_fail(e, rc, "tensor '%s': %s", name, sub);
    if ((rc = env->lookup(env, bid, &t->buf, &se)) < 0)
        return proto_fail(e, rc, "tensor '%s': %s", name, sub);
    size_t es = gg_dtype_size(t->desc.dtype);
    if (off % es)
        return proto_fail(e, -EINVAL, "tensor '%s': offset %llu is not a multiple of the %s "
                          "element size %zu", name, (unsigned long long)off,
                          gg_dtype_name(t->desc.dtype), es);
    t->offset = off;
    return 0;
}

/* Tensor names are hashed (FNV-1a) into an open-addressed table of at least
 * twice the tensors' number, so a node's operands are found in constant time
 * rather than by a scan of every tensor (a 102,400-node define held the loop
 * for seconds). */
static uint32_t prog_name_hash(const char *s, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 16777619u;
    }
    return h;
}

static int prog_index_init(gg_program *p, uint32_t ntens)
{
    uint32_t cap = 16;
    while (cap < 2 * ntens)
        cap *= 2;
    p->tindex = calloc(cap, sizeof(*p->tindex));
    if (!p->tindex)
        return -ENOMEM;
    p->tindex_mask = cap - 1;
    return 0;
}

/* Tensor t (its name set, not already in the table) becomes findable. */
static void prog_index_add(gg_program *p, int t)
{
    const char *name = p->tensors[t].name;
    uint32_t i = prog_name_hash(name, strlen(name)) & p->tindex_mask;
    while (p->tindex[i])
        i = (i + 1) & p->tindex_mask;
    p->tindex[i] = t + 1;
}

int gg_program_find_tensor(const gg_program *p, const gg_spec_val *o)
{
    if (o->kind != GG_SPEC_STR || !p->tindex)
        return -1;
    const char *s = o->s;
    size_t n = o->len;
    for (uint32_t i = prog_name_hash(s, n) & p->tindex_mask; p->tindex[i];
         i = (i + 1) & p->tindex_mask) {
        const char *name = p->tensors[p->tindex[i] - 1].name;
        if (strlen(name) == n && memcmp(name, s, n) == 0)
            return p->tindex[i] - 1;
    }
    return -1;
}

static int prog_operands(const gg_program *p, const gg_program_spec *ps, const gg_spec_val *arr,
                         int *idx, int min, int max, const char *what, int ni, const char *opname,
                         proto_errbuf *e)
{
    if (arr->kind == GG_SPEC_ABSENT && min == 0) /* an op of no inputs (fill, arange) may leave them out */
        return 0;
    if (arr->kind != GG_SPEC_ARRAY)
        return proto_fail(e, -EINVAL, "node %d (%s): '%s' must be an array of tensor names", ni,
                          opname, what);
    int n = (int)arr->len;
    if (n < min || n > max) {
        if (min == max)
            return proto_fail(e, -EINVAL, "node %d (%s): takes %d %s, got %d", ni, opname, min,
                              what, n);
        return proto_fail(e, -EINVAL, "node %d (%s): takes %d to %d %s, got %d", ni, opname, min,
                          max, what, n);
    }
    for (int i = 0; i < n; i++) {
        const gg_spec_val *o = &ps->vals[arr->u + (uint32_t)i];
        idx[i] = gg_program_find_tensor(p, o);
        if (idx[i] < 0) {
            if (o->kind == GG_SPEC_STR)
                return proto_fail(e, -EINVAL, "node %d (%s): unknown tensor '%.*s' in %s", ni,
                                  opname, (int)(o->len > 64 ? 64 : o->len), o->s, what);
            return proto_fail(e, -EINVAL, "node %d (%s): %s must be tensor names", ni, opname,
                              what);
        }
    }
    return n;
}

static int prog_attrs(const gg_op_def *op, const gg_program_spec *ps, const gg_spec_val *attrs,
                      gg_op_attrs *out, int ni, proto_errbuf *e)
{
    gg_ops_attr_defaults(op, out);
    if (attrs->kind == GG_SPEC_ABSENT || attrs->kind == GG_SPEC_NIL)
        return 0;
    if (attrs->kind != GG_SPEC_MAP)
        return proto_fail(e, -EINVAL, "node %d (%s): attrs must be a map", ni, op->name);
    for (uint32_t i = 0; i < attrs->len; i++) {
        const gg_spec_val *k = &ps->vals[attrs->u + 2 * i];
        const gg_spec_val *v = k + 1;
        char key[32];
        if (spec_strdup(k, key, sizeof(key)) < 0)
            return proto_fail(e, -EINVAL, "node %d (%s): attribute names are short strings", ni,
                              op->name);
        int a = gg_ops_attr_index(op, key);
        if (a < 0)
            return proto_fail(e, -EINVAL, "node %d (%s): unknown attribute '%s'", ni, op->name,
                              key);
        const gg_attr_spec *spec = &op->attrs[a];
        if (spec->kind == GG_ATTR_FLOAT) {
            /* fill's value and a scalar operand may be +-inf or NaN */
            if (spec->nonfinite && v->kind == GG_SPEC_FLOAT)
                out->v[a] = v->f;
            else if (!spec_f64(v, &out->v[a]))
                return proto_fail(e, -EINVAL, "node %d (%s): attribute '%s' must be a finite "
                                  "number", ni, op->name, key);
        } else {
            int found = -1;
            for (int c = 0; spec->choices[c]; c++)
                if (gg_spec_str_eq(v, spec->choices[c]))
                    found = c;
            if (found < 0)
                return proto_fail(e, -EINVAL, "node %d (%s): attribute '%s' must be one of the "
                                  "names the op accepts (e.g. \"%s\")", ni, op->name, key,
                                  spec->choices[0]);
            out->v[a] = found;
        }
    }
    return 0;
}

/* Ops whose output may alias an input exactly (each element reads only its
 * own position): the row says so (ops.h, inplace). */
static bool prog_elementwise(const gg_op_def *op)
{
    return op->inplace != 0;
}

/* No output of a node may overlap one of its inputs, except an exact alias
 * in an elementwise op. */
int gg_program_node_overlaps(const gg_program *p, const gg_pnode *n, int ni, proto_errbuf *e)
{
    int top = p->buckets[p->nbuckets - 1];
    for (int o = 0; o < n->nout; o++)
        for (int i = 0; i < n->nin; i++) {
            int ov = gg_program_overlap(p, n->out[o], n->in[i], top);
            if (ov == 1 || (ov == 2 && !prog_elementwise(n->op)))
                return proto_fail(e, -EINVAL, "node %d (%s): output '%s' overlaps input '%s'; %s",
                                  ni, n->op->name, p->tensors[n->out[o]].name,
                                  p->tensors[n->in[i]].name,
                                  ov == 1 ? "partial overlap is never allowed"
                                          : "only elementwise ops may write in place");
        }
    return 0;
}

/* A batch runs at its bucket, so an output with a batch dim is written up to
 * the bucket's rows: the rows past the batch are padding.  That padding must
 * not land on memory another tensor of the program names (a weight, an
 * input, another output's real rows), so such an output may share memory
 * with another buffer tensor only as an exact alias.  Checked by address, so
 * one allocation registered twice is caught too. */
int gg_program_padding_overlaps(const gg_program *p, proto_errbuf *e)
{
    int top = p->buckets[p->nbuckets - 1];
    bool *written = calloc((size_t)p->ntensors, sizeof(bool));
    if (!written)
        return proto_fail(e, -ENOMEM, "out of memory");
    for (int b = 0; b < p->nbranches; b++)
        for (int ni = 0; ni < p->branches[b].nnodes; ni++)
            for (int o = 0; o < p->branches[b].nodes[ni].nout; o++)
                written[p->branches[b].nodes[ni].out[o]] = true;
    int rc = 0;
    for (int w = 0; w < p->ntensors && rc == 0; w++) {
        const gg_ptensor *tw = &p->tensors[w];
        if (!written[w] || !tw->buf || tw->batch_dim < 0)
            continue;
        uint64_t ow[2], w0, w1;
        bool kw = gg_program_span(tw, top, ow, &w0, &w1);
        for (int t = 0; t < p->ntensors && rc == 0; t++) {
            const gg_ptensor *tt = &p->tensors[t];
            if (t == w || !tt->buf)
                continue;
            uint64_t ot[2], t0, t1;
            bool kt = gg_program_span(tt, top, ot, &t0, &t1);
            if (kt != kw || ot[0] != ow[0] || ot[1] != ow[1])
                continue;   /* other memory */
            if (w1 <= t0 || t1 <= w0 || (w0 == t0 && w1 == t1))
                continue;
            rc = proto_fail(e, -EINVAL, "tensor '%s' is written with batch rows up to the largest "
                            "bucket (%d), and those rows overlap tensor '%s': rows past a batch "
                            "are padding the daemon writes, so a written batch tensor may share "
                            "memory with another tensor only as an exact alias", tw->name, top,
                            tt->name);
        }
    }
    free(written);
    return rc;
}

/* ---- calls ------------------------------------------------------------- */

/* A node {op: "call", program: ID, branch?: N} runs another program of the
 * same session at the caller's bucket.  It is expanded here, at define: the
 * callee's nodes of that branch are copied into the caller's branch, and
 * its tensors into the caller's table (not findable by the caller's names),
 * so the caller's graphs hold the callee's kernels and one launch runs the
 * whole.  The callee keeps its own cache entries; the caller adds none for
 * it.  The copy is taken as the callee is bound now: a later program.rebind
 * of the callee changes the callee alone. */
static bool prog_is_call(const gg_spec_node *no)
{
    return no->is_map && gg_spec_str_eq(&no->op, "call");
}

/* The callee of call node ni, checked: this session's, same buckets,
 * branch in range. */
static int prog_callee(const gg_define_env *env, const gg_program *p, const gg_spec_node *no,
                       int ni, gg_program **out, int *branch, proto_errbuf *e)
{
    static const char *const not_call[] = {"inputs", "outputs", "attrs", NULL};
    const gg_spec_val *given[] = {&no->inputs, &no->outputs, &no->attrs};
    for (int i = 0; not_call[i]; i++)
        if (given[i]->kind != GG_SPEC_ABSENT)
            return proto_fail(e, -EINVAL, "node %d (call): a call takes 'program' and 'branch', "
                              "not '%s': its operands are the called program's tensors", ni,
                              not_call[i]);
    uint64_t id, b = 0;
    if (no->program.kind != GG_SPEC_UINT)
        return proto_fail(e, -EINVAL, "node %d (call): 'program' must be a program id", ni);
    id = no->program.u;
    if (no->branch.kind != GG_SPEC_ABSENT) {
        if (no->branch.kind != GG_SPEC_UINT)
            return proto_fail(e, -EINVAL, "node %d (call): 'branch' must be a branch index", ni);
        b = no->branch.u;
    }
    char sub[160] = "";
    proto_errbuf se = {sub, sizeof(sub)};
    int rc = env->program(env, id, out, &se);
    if (rc < 0)
        return proto_fail(e, rc, "node %d (call): %s", ni, sub);
    const gg_program *c = *out;
    if (b >= (uint64_t)c->nbranches)
        return proto_fail(e, -EINVAL, "node %d (call): program %llu ('%s') has %d branch(es); "
                          "branch %llu does not exist", ni, (unsigned long long)id, c->name,
                          c->nbranches, (unsigned long long)b);
    if (c->nbuckets != p->nbuckets ||
        memcmp(c->buckets, p->buckets, sizeof(int) * (size_t)p->nbuckets) != 0)
        return proto_fail(e, -EINVAL, "node %d (call): program %llu ('%s') has other buckets "
                          "than this program; a called program runs at its caller's bucket, so "
                          "both must have the same buckets", ni, (unsigned long long)id, c->name);
    *branch = (int)b;
    return 0;
}

/* Tensors and nodes the calls of one node list add (a call node itself
 * adds its callee's nodes less one). */
static int prog_calls_count(const gg_define_env *env, const gg_program *p,
                            const gg_program_spec *ps, const gg_spec_val *arr, uint32_t *tensors,
                            uint32_t *nodes, proto_errbuf *e)
{
    *nodes = 0;
    if (arr->kind != GG_SPEC_ARRAY)
        return 0;
    for (uint32_t i = 0; i < arr->len; i++) {
        const gg_spec_node *no = &ps->node[arr->u + i];
        if (!prog_is_call(no))
            continue;
        gg_program *c;
        int b, rc = prog_callee(env, p, no, (int)i, &c, &b, e);
        if (rc < 0)
            return rc;
        *tensors += (uint32_t)c->ntensors;
        *nodes += (uint32_t)c->branches[b].nnodes - 1;
    }
    return 0;
}

/* Copy callee c's tensors and branch b's nodes into p and br (room was
 * made by prog_calls_count); marks what they write. */
static int prog_call_expand(gg_program *p, const gg_program *c, int b, gg_branch *br,
                            bool *written)
{
    int base = p->ntensors;
    for (int t = 0; t < c->ntensors; t++) {
        gg_ptensor *nt = &p->tensors[base + t];
        *nt = c->tensors[t];
        snprintf(nt->name, sizeof(nt->name), "%.31s/%.31s", c->name, c->tensors[t].name);
        if (nt->view_of >= 0)
            nt->view_of += base;
    }
    p->ntensors += c->ntensors;
    if (c->max_batch < p->max_batch)
        p->max_batch = c->max_batch;
    if (c->batch_word)
        p->batch_word = true;
    const gg_branch *cb = &c->branches[b];
    for (int i = 0; i < cb->nnodes; i++) {
        gg_pnode *n = &br->nodes[br->nnodes++];
        *n = cb->nodes[i];
        for (int k = 0; k < n->nin; k++)
            n->in[k] += base;
        for (int k = 0; k < n->nout; k++) {
            n->out[k] += base;
            written[gg_program_root(p, n->out[k])] = true;
        }
    }
    return 0;
}

static int prog_nodes(const gg_define_env *env, gg_program *p, const gg_program_spec *ps,
                      const gg_spec_val *arr, gg_branch *br, int bi, proto_errbuf *e)
{
    if (arr->kind != GG_SPEC_ARRAY || arr->len == 0)
        return proto_fail(e, -EINVAL, "branch %d: nodes must be a non-empty array", bi);
    uint32_t ct = 0, cn = 0;
    int rc = prog_calls_count(env, p, ps, arr, &ct, &cn, e);
    if (rc < 0)
        return rc;
    uint64_t total = (uint64_t)arr->len + cn;
    if (total > GG_MAX_NODES)
        return proto_fail(e, -EINVAL, "branch %d: at most %d nodes (calls count the nodes of "
                          "the programs they call)", bi, GG_MAX_NODES);
    br->nnodes = 0;
    br->nodes = calloc((size_t)total, sizeof(*br->nodes));
    if (!br->nodes)
        return proto_fail(e, -ENOMEM, "out of memory");
    /* the tensor table has room for every branch's calls (gg_program_build) */
    bool *written = calloc((size_t)p->ntensors + ct, sizeof(bool));
    if (!written)
        return proto_fail(e, -ENOMEM, "out of memory");
    for (int ni = 0; ni < (int)arr->len && rc == 0; ni++) {
        const gg_spec_node *no = &ps->node[arr->u + (uint32_t)ni];
        if (!no->is_map) {
            rc = proto_fail(e, -EINVAL, "node %d must be a map {op, inputs, outputs, attrs?}", ni);
            break;
        }
        if (prog_is_call(no)) {
            gg_program *c;
            int cb;
            if ((rc = prog_callee(env, p, no, ni, &c, &cb, e)) == 0)
                rc = prog_call_expand(p, c, cb, br, written);
            continue;
        }
        gg_pnode *n = &br->nodes[br->nnodes++];
        char opname[32];
        if (spec_strdup(&no->op, opname, sizeof(opname)) < 0) {
            rc = proto_fail(e, -EINVAL, "node %d: 'op' must be an op name", ni);
            break;
        }
        n->op = gg_ops_find(opname);
        if (!n->op) {
            rc = proto_fail(e, -EINVAL, "node %d: unknown op '%s' (hello lists the ops)", ni,
                            opname);
            break;
        }
        if (no->program.kind != GG_SPEC_ABSENT || no->branch.kind != GG_SPEC_ABSENT) {
            rc = proto_fail(e, -EINVAL, "node %d (%s): 'program' and 'branch' belong to a call "
                            "node only", ni, opname);
            break;
        }
        int k = prog_operands(p, ps, &no->inputs, n->in, n->op->nin_min,
                              n->op->nin_max, "inputs", ni, opname, e);
        if (k < 0) { rc = k; break; }
        n->nin = k;
        k = prog_operands(p, ps, &no->outputs, n->out, n->op->nout, n->op->nout,
                          "outputs", ni, opname, e);
        if (k < 0) { rc = k; break; }
        n->nout = k;
        if ((rc = prog_attrs(n->op, ps, &no->attrs, &n->attrs, ni, e)) < 0)
            break;
        for (int i = 0; i < n->nin && rc == 0; i++)
            if (!p->tensors[n->in[i]].buf && !written[gg_program_root(p, n->in[i])])
                rc = proto_fail(e, -EINVAL, "node %d (%s): scratch tensor '%s' is read before "
                                "any node writes it", ni, opname, p->tensors[n->in[i]].name);
        if (rc < 0 || (rc = gg_program_node_overlaps(p, n, ni, e)) < 0)
            break;
        /* The shape rule at every bucket: a batch dim can meet a fixed one. */
        for (int b = 0; b < p->nbuckets && rc == 0; b++) {
            char why[256] = "";
            if (gg_program_node_check_rows(p, n, p->buckets[b], why, sizeof(why)) < 0)
                rc = proto_fail(e, -EINVAL, "node %d (%s) at bucket %d: %s", ni, opname,
                                p->buckets[b], why);
        }
        for (int o = 0; o < n->nout; o++)
            written[gg_program_root(p, n->out[o])] = true;
        if (n->op->wants_batch)
            p->batch_word = true;
    }
    free(written);
    return rc;
}

typedef struct {
    uint8_t *b;
    size_t n, cap;
    bool oom;
} prog_sigbuf;

static void sig_put(prog_sigbuf *sb, const void *p, size_t n)
{
    if (sb->oom)
        return;
    if (sb->n + n > sb->cap) {
        size_t cap = sb->cap ? sb->cap * 2 : 1024;
        while (cap < sb->n + n)
            cap *= 2;
        uint8_t *nb = realloc(sb->b, cap);
        if (!nb) {
            sb->oom = true;
            return;
        }
        sb->b = nb;
        sb->cap = cap;
    }
    memcpy(sb->b + sb->n, p, n);
    sb->n += n;
}

#define SIG_PUT(sb, v) sig_put((sb), &(v), sizeof(v))

/* Everything that shapes the captured graphs except where buffer tensors
 * live: two programs with equal signatures capture graphs of the same
 * topology, so one's graphs can be updated in place for the other. */
static int prog_signature(gg_program *p)
{
    prog_sigbuf sb = {0};
    sig_put(&sb, p->name, strlen(p->name) + 1);
    SIG_PUT(&sb, p->nbuckets);
    sig_put(&sb, p->buckets, sizeof(int) * (size_t)p->nbuckets);
    SIG_PUT(&sb, p->ntensors);
    for (int i = 0; i < p->ntensors; i++) {
        const gg_ptensor *t = &p->tensors[i];
        uint8_t scratch = t->buf == NULL;
        sig_put(&sb, t->name, strlen(t->name) + 1);
        SIG_PUT(&sb, scratch);
        SIG_PUT(&sb, t->desc);
        SIG_PUT(&sb, t->batch_dim);
        SIG_PUT(&sb, t->view_of);
    }
    SIG_PUT(&sb, p->nbranches);
    for (int b = 0; b < p->nbranches; b++) {
        SIG_PUT(&sb, p->branches[b].nnodes);
        for (int i = 0; i < p->branches[b].nnodes; i++) {
            const gg_pnode *n = &p->branches[b].nodes[i];
            SIG_PUT(&sb, n->op->id);
            SIG_PUT(&sb, n->nin);
            SIG_PUT(&sb, n->nout);
            sig_put(&sb, n->in, sizeof(int) * (size_t)n->nin);
            sig_put(&sb, n->out, sizeof(int) * (size_t)n->nout);
            sig_put(&sb, n->attrs.v, sizeof(double) * (size_t)n->op->nattrs);
        }
    }
    if (sb.oom) {
        free(sb.b);
        return -ENOMEM;
    }
    p->sig = sb.b;
    p->siglen = sb.n;
    return 0;
}

int gg_program_build(const gg_define_env *env, const gg_program_spec *ps, gg_program **out,
                     proto_errbuf *e)
{
    int rc;
    gg_program *p = calloc(1, sizeof(*p));
    if (!p)
        return proto_fail(e, -ENOMEM, "out of memory");
    p->sess = env->s;
    gg_list_init(&p->sess_link);

    if (ps->name.kind == GG_SPEC_ABSENT) {
        rc = proto_fail(e, -EINVAL, "missing required argument 'name'");
        goto fail;
    }
    if ((rc = prog_name(&ps->name, p->name, sizeof(p->name), "argument 'name'", e)) < 0)
        goto fail;

    /* buckets: the program's own, else the daemon's */
    const gg_spec_val *bk = &ps->buckets;
    rc = spec_container(bk, "buckets", false, GG_SPEC_ARRAY, e);
    if (rc == 0) {
        uint32_t nb = bk->len;
        if (nb < 1 || nb > GG_MAX_BUCKETS) {
            rc = proto_fail(e, -EINVAL, "buckets: give 1 to %d buckets", GG_MAX_BUCKETS);
            goto fail;
        }
        for (uint32_t i = 0; i < nb; i++) {
            const gg_spec_val *v = &ps->vals[bk->u + i];
            if (v->kind != GG_SPEC_UINT || v->u < 1 || v->u > GG_MAX_BATCH ||
                (i && (int)v->u <= p->buckets[i - 1])) {
                rc = proto_fail(e, -EINVAL, "buckets must be strictly increasing integers from 1 "
                                "to %d", GG_MAX_BATCH);
                goto fail;
            }
            p->buckets[i] = (int)v->u;
        }
        p->nbuckets = (int)nb;
    } else if (rc == -ENOENT) {
        memcpy(p->buckets, env->buckets, sizeof(p->buckets));
        p->nbuckets = env->nbuckets;
    } else {
        goto fail;
    }

    const gg_spec_val *tensors = &ps->tensors;
    if ((rc = spec_container(tensors, "tensors", true, GG_SPEC_MAP, e)) < 0)
        goto fail;
    if (tensors->len == 0 || tensors->len > GG_MAX_TENSORS) {
        rc = proto_fail(e, -EINVAL, "tensors: give 1 to %d tensors", GG_MAX_TENSORS);
        goto fail;
    }
    const gg_spec_tensor *tspec = &ps->tensor[tensors->u];
    const gg_spec_val *nodes = ps->nodes.kind != GG_SPEC_ABSENT ? &ps->nodes : NULL;
    const gg_spec_val *branches = ps->branches.kind != GG_SPEC_ABSENT ? &ps->branches : NULL;
    /* calls copy their callees' tensors into this program's table */
    uint32_t call_tensors = 0, call_nodes, call_nodes_all = 0;
    if (nodes && (rc = prog_calls_count(env, p, ps, nodes, &call_tensors, &call_nodes, e)) < 0)
        goto fail;
    if (nodes)
        call_nodes_all = call_nodes;
    if (branches && branches->kind == GG_SPEC_ARRAY)
        for (uint32_t b = 0; b < branches->len && b < GG_MAX_BRANCHES; b++) {
            if ((rc = prog_calls_count(env, p, ps, &ps->vals[branches->u + b], &call_tensors,
                                       &call_nodes, e)) < 0)
                goto fail;
            call_nodes_all += call_nodes;
        }
    if (call_nodes_all > GG_MAX_CALL_NODES) {
        rc = proto_fail(e, -EINVAL, "the programs this one calls add %u nodes over all its "
                        "branches; at most %d", call_nodes_all, GG_MAX_CALL_NODES);
        goto fail;
    }
    if (tensors->len + call_tensors > GG_MAX_TENSORS) {
        rc = proto_fail(e, -EINVAL, "with the tensors of the programs it calls this program has "
                        "%u tensors; at most %d", tensors->len + call_tensors,
                        GG_MAX_TENSORS);
        goto fail;
    }
    p->tensors = calloc(tensors->len + call_tensors, sizeof(*p->tensors));
    if (!p->tensors) {
        rc = proto_fail(e, -ENOMEM, "out of memory");
        goto fail;
    }
    int top = p->buckets[p->nbuckets - 1];
    p->max_batch = GG_MAX_BATCH;
    /* Tensors first, then views (of tensors or of views already placed), in
     * as many rounds as the chains of views need. */
    uint32_t ntens = tensors->len;
    bool *done = calloc(ntens, sizeof(bool));
    if (!done || prog_index_init(p, ntens) < 0) {
        free(done);
        rc = proto_fail(e, -ENOMEM, "out of memory");
        goto fail;
    }
    for (int round = 0; p->ntensors < (int)ntens; round++) {
        int before = p->ntensors;
        for (uint32_t i = 0; i < ntens; i++) {
            char name[64];
            const gg_spec_tensor *ts = &tspec[i];
            if (done[i])
                continue;
            int bidx = -1;
            if (ts->view.kind != GG_SPEC_ABSENT) {
                if (round == 0)
                    continue;
                bidx = gg_program_find_tensor(p, &ts->view);
                if (bidx < 0)
                    continue;   /* a later round, or never: said below */
            }
            if ((rc = prog_name(&ts->name, name, sizeof(name), "a tensor name", e)) < 0)
                break;
            if (gg_program_find_tensor(p, &ts->name) >= 0) {
                rc = proto_fail(e, -EINVAL, "tensor '%s' is defined twice", name);
                break;
            }
            gg_ptensor *t = &p->tensors[p->ntensors];
            if ((rc = prog_tensor(env, ps, name, ts, t, bidx >= 0 ? &p->tensors[bidx] : NULL,
                                  bidx, e)) < 0)
                break;
            done[i] = true;
            prog_index_add(p, p->ntensors);
            p->ntensors++;
            if (t->buf) {
                int64_t rows = gg_program_tensor_rows(t);
                gg_tensor_desc d1 = gg_program_desc_at(t, t->batch_dim >= 0 ? top : 1);
                if (rows < 0 || rows < top) {
                    rc = proto_fail(e, -ERANGE, "tensor '%s' does not fit in buffer %llu: it needs "
                                    "%zu bytes from offset %llu at batch %d, the buffer has %llu; "
                                    "register a larger buffer or pass smaller buckets", name,
                                    (unsigned long long)t->buf->id, gg_desc_bytes(&d1),
                                    (unsigned long long)t->offset, top,
                                    (unsigned long long)t->buf->size);
                    break;
                }
                if (rows < p->max_batch)
                    p->max_batch = (int)rows;
            }
        }
        if (rc < 0)
            break;
        if (round > 0 && p->ntensors == before) {
            for (uint32_t i = 0; i < ntens; i++)
                if (!done[i]) {
                    const gg_spec_val *vw = &tspec[i].view;
                    char name[64] = "?";
                    prog_name(&tspec[i].name, name, sizeof(name), "a tensor name", e);
                    rc = proto_fail(e, -EINVAL, "tensor '%s': view of '%.*s', which is not a "
                                    "tensor of this program (or the views form a cycle)", name,
                                    vw->kind == GG_SPEC_STR ? (int)(vw->len > 64 ? 64 : vw->len) : 0,
                                    vw->kind == GG_SPEC_STR ? vw->s : "");
                    break;
                }
            break;
        }
    }
    free(done);
    if (rc < 0)
        goto fail;

    p->max_batch = gg_program_layout_rows(p, p->max_batch);

    if ((nodes != NULL) == (branches != NULL)) {
        rc = proto_fail(e, -EINVAL, "give exactly one of 'nodes' or 'branches'");
        goto fail;
    }
    if (branches) {
        if (branches->kind != GG_SPEC_ARRAY || branches->len == 0 ||
            branches->len > GG_MAX_BRANCHES) {
            rc = proto_fail(e, -EINVAL, "branches must be an array of 1 to %d node lists",
                            GG_MAX_BRANCHES);
            goto fail;
        }
        p->nbranches = (int)branches->len;
    } else {
        p->nbranches = 1;
    }
    p->branches = calloc((size_t)p->nbranches, sizeof(*p->branches));
    if (!p->branches) {
        rc = proto_fail(e, -ENOMEM, "out of memory");
        goto fail;
    }
    for (int b = 0; b < p->nbranches; b++)
        if ((rc = prog_nodes(env, p, ps, branches ? &ps->vals[branches->u + (uint32_t)b] : nodes,
                             &p->branches[b], b, e)) < 0)
            goto fail;
    if (call_tensors)   /* the callees' buffer tensors may share buffers with ours */
        p->max_batch = gg_program_layout_rows(p, p->max_batch);
    if ((rc = gg_program_padding_overlaps(p, e)) < 0)
        goto fail;
    for (int b = 0; b < p->nbranches; b++)
        if (gg_fuse_plan(p, &p->branches[b], env->fuse) < 0 && !p->branches[b].nplan) {
            rc = proto_fail(e, -ENOMEM, "out of memory");
            goto fail;
        }

    p->entries = calloc((size_t)(p->nbranches * p->nbuckets), sizeof(*p->entries));
    if (!p->entries) {
        rc = proto_fail(e, -ENOMEM, "out of memory");
        goto fail;
    }
    if (prog_signature(p) < 0) {
        rc = proto_fail(e, -ENOMEM, "out of memory");
        goto fail;
    }
    /* One arena, sized for the largest bucket: a run at a smaller bucket
     * lays its scratch tensors out in fewer bytes (the layout only grows
     * with rows, program_layout.c). */
    if (!(p->arena = gg_arena_new(gg_program_scratch_bytes(p, top), top))) {
        rc = proto_fail(e, -ENOMEM, "out of memory");
        goto fail;
    }
    p->scratch_quota = gg_quota_scratch(p);
    *out = p;
    return 0;

fail:
    gg_program_discard(p);
    return rc;
}

/* What the build made, of a program built in full or in part; for a
 * committed one, program.c undoes the commit first. */
void gg_program_discard(gg_program *p)
{
    free(p->entries);
    gg_cache_arena_unref(p->sess->core->cache, p->arena);
    for (int b = 0; b < p->nbranches; b++) {
        free(p->branches[b].nodes);
        free(p->branches[b].plan);
        free(p->branches[b].stages);
    }
    free(p->branches);
    free(p->tensors);
    free(p->tindex);
    free(p->sig);
    free(p);
}
