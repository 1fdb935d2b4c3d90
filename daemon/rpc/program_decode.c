/* SPDX-License-Identifier: MIT */
/* program.define and program.rebind decoded into core/program_spec.h.
 *
 * One pass over the request: each map's keys are read once, the first of
 * a repeated key wins (as a lookup by key would find it), and a key that
 * is not taken is refused at once.  Nothing else is judged here: a value
 * of the wrong kind is kept as what it is, so the core reports the faults
 * of a define in one order wherever they are.  Elements are kept only
 * where the core reads them: a shape, an operand list or the buckets past
 * their limits are refused by their length alone. */
#include "rpc/program_decode.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/program.h"
#include "ops.h"

/* The keys a tensor and a node of program.define may hold: any other is
 * refused, naming it, rather than ignored (a misspelt "ofset" would place
 * the tensor at 0). */
static const char *const decode_tensor_keys[] = {"buffer", "offset", "dtype", "shape", "scratch",
                                                 "view", NULL};
static const char *const decode_node_keys[] = {"op", "inputs", "outputs", "attrs", "program",
                                               "branch", NULL};
static const char *const decode_rebind_keys[] = {"buffer", "offset", NULL};

typedef struct {
    gg_spec_val *vals;
    uint32_t n, cap;
} decode_pool;

static void decode_val(const msgpack_object *o, gg_spec_val *v)
{
    v->u = 0;
    v->len = 0;
    switch (o->type) {
    case MSGPACK_OBJECT_NIL:
        v->kind = GG_SPEC_NIL;
        break;
    case MSGPACK_OBJECT_BOOLEAN:
        v->kind = GG_SPEC_BOOL;
        v->b = o->via.boolean;
        break;
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        v->kind = GG_SPEC_UINT;
        v->u = o->via.u64;
        break;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        v->kind = GG_SPEC_INT;
        v->i = o->via.i64;
        break;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        v->kind = GG_SPEC_FLOAT;
        v->f = o->via.f64;
        break;
    case MSGPACK_OBJECT_STR:
        v->kind = GG_SPEC_STR;
        v->s = o->via.str.ptr;
        v->len = o->via.str.size;
        break;
    case MSGPACK_OBJECT_ARRAY:
        v->kind = GG_SPEC_ARRAY;
        v->len = o->via.array.size;
        break;
    case MSGPACK_OBJECT_MAP:
        v->kind = GG_SPEC_MAP;
        v->len = o->via.map.size;
        break;
    default:
        v->kind = GG_SPEC_OTHER;
        break;
    }
}

/* Room for n more values; the index of the first, or -1. */
static int64_t decode_room(decode_pool *pl, uint32_t n)
{
    if (pl->cap - pl->n < n) {
        uint64_t cap = pl->cap ? pl->cap : 256;
        while (cap - pl->n < n)
            cap *= 2;
        if (cap > UINT32_MAX)
            return -1;
        gg_spec_val *nv = realloc(pl->vals, sizeof(*nv) * cap);
        if (!nv)
            return -1;
        pl->vals = nv;
        pl->cap = (uint32_t)cap;
    }
    uint32_t first = pl->n;
    pl->n += n;
    return first;
}

/* v (decoded from o) keeps the elements of array o when it has at most
 * max of them: at v->u. */
static int decode_elems(decode_pool *pl, const msgpack_object *o, gg_spec_val *v, uint32_t max)
{
    if (v->kind != GG_SPEC_ARRAY || v->len > max)
        return 0;
    int64_t at = decode_room(pl, v->len);
    if (at < 0)
        return -ENOMEM;
    v->u = (uint64_t)at;
    for (uint32_t i = 0; i < v->len; i++)
        decode_val(&o->via.array.ptr[i], &pl->vals[at + i]);
    return 0;
}

/* key is one of keys: its index, or -1. */
static int decode_key(const msgpack_object *k, const char *const *keys)
{
    if (k->type != MSGPACK_OBJECT_STR)
        return -1;
    for (int i = 0; keys[i]; i++)
        if (strlen(keys[i]) == k->via.str.size && memcmp(keys[i], k->via.str.ptr, k->via.str.size) == 0)
            return i;
    return -1;
}

/* The fields of map o named by keys into out[] (first occurrence), each
 * kept as its msgpack object too where objs is given.  A key not in keys:
 * -EINVAL, the message of proto_check_keys with `what`. */
static int decode_fields(const msgpack_object *o, const char *const *keys, gg_spec_val *const *out,
                         const msgpack_object **objs, const char *(*what)(char *, size_t, const void *),
                         const void *ctx, proto_errbuf *e)
{
    for (uint32_t i = 0; i < o->via.map.size; i++) {
        const msgpack_object_kv *kv = &o->via.map.ptr[i];
        int k = decode_key(&kv->key, keys);
        if (k < 0) {
            char w[96];
            return proto_check_keys(o, keys, what(w, sizeof(w), ctx), e);
        }
        if (out[k]->kind != GG_SPEC_ABSENT)
            continue;
        decode_val(&kv->val, out[k]);
        if (objs)
            objs[k] = &kv->val;
    }
    return 0;
}

static const char *decode_tensor_what(char *w, size_t n, const void *ctx)
{
    const msgpack_object *key = ctx;
    char name[65] = "?";
    if (key->type == MSGPACK_OBJECT_STR)
        proto_utf8_clean(name, sizeof(name), key->via.str.ptr, key->via.str.size);
    snprintf(w, n, "tensor '%s'", name);
    return w;
}

/* A tensors map: every entry's keys checked, and kept (name, fields) when
 * there are at most max, at tensor[0..). */
static int decode_tensors(decode_pool *pl, const msgpack_object *map, const char *const *keys,
                          uint32_t max, gg_spec_tensor *tensor, gg_rebind_tensor *rebind,
                          proto_errbuf *e)
{
    bool keep = map->via.map.size <= max;
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object_kv *kv = &map->via.map.ptr[i];
        gg_spec_tensor scratch_t;
        gg_rebind_tensor scratch_r;
        gg_spec_tensor *t = keep && tensor ? &tensor[i] : &scratch_t;
        gg_rebind_tensor *r = keep && rebind ? &rebind[i] : &scratch_r;
        memset(t, 0, sizeof(*t));
        memset(r, 0, sizeof(*r));
        if (kv->val.type != MSGPACK_OBJECT_MAP) {
            decode_val(&kv->key, tensor ? &t->name : &r->name);
            continue;
        }
        int rc;
        if (tensor) {
            gg_spec_val *const out[] = {&t->buffer, &t->offset, &t->dtype, &t->shape, &t->scratch,
                                        &t->view};
            const msgpack_object *objs[6] = {0};
            if ((rc = decode_fields(&kv->val, keys, out, objs, decode_tensor_what, &kv->key, e)) < 0)
                return rc;
            decode_val(&kv->key, &t->name);
            t->is_map = true;
            if (keep && objs[3] && (rc = decode_elems(pl, objs[3], &t->shape, GG_MAX_DIMS)) < 0)
                return rc;
        } else {
            gg_spec_val *const out[] = {&r->buffer, &r->offset};
            if ((rc = decode_fields(&kv->val, keys, out, NULL, decode_tensor_what, &kv->key, e)) < 0)
                return rc;
            decode_val(&kv->key, &r->name);
            r->is_map = true;
        }
    }
    return 0;
}

/* A list of names into buf: "a, b, c" ("none" when empty). */
static const char *decode_names(char *buf, size_t len, const char *const *names, int n)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int i = 0; (n < 0 ? names[i] != NULL : i < n) && k < len; i++)
        k += (size_t)snprintf(buf + k, len - k, "%s%s", i ? ", " : "", names[i]);
    if (!buf[0])
        snprintf(buf, len, "none");
    return buf;
}

typedef struct {
    int bi, ni;
    bool branches;
} decode_at;

static const char *decode_node_where(char *w, size_t n, const void *ctx)
{
    const decode_at *at = ctx;
    if (at->branches)
        snprintf(w, n, "branch %d node %d", at->bi, at->ni);
    else
        snprintf(w, n, "node %d", at->ni);
    return w;
}

/* A node's attributes' names and choices against its op's, each error
 * listing what is accepted. */
static int decode_node_attrs(const msgpack_object *opo, const msgpack_object *attrs,
                             const decode_at *at, proto_errbuf *e)
{
    char opname[32];
    const gg_op_def *op;
    if (!opo || proto_strdup_obj(opo, opname, sizeof(opname)) < 0 || !(op = gg_ops_find(opname)) ||
        !attrs || attrs->type != MSGPACK_OBJECT_MAP)
        return 0;
    char where[48], what[96], list[512];
    const char *names[GG_MAX_ATTRS];
    for (int a = 0; a < op->nattrs; a++)
        names[a] = op->attrs[a].name;
    for (uint32_t i = 0; i < attrs->via.map.size; i++) {
        const msgpack_object *k = &attrs->via.map.ptr[i].key;
        const msgpack_object *v = &attrs->via.map.ptr[i].val;
        char key[65] = "";
        if (k->type == MSGPACK_OBJECT_STR)
            proto_utf8_clean(key, sizeof(key), k->via.str.ptr, k->via.str.size);
        int a = k->type == MSGPACK_OBJECT_STR && k->via.str.size < 32
                    ? gg_ops_attr_index(op, key) : -1;
        if (a < 0) {
            snprintf(what, sizeof(what), "%s (%s)", decode_node_where(where, sizeof(where), at),
                     op->name);
            return proto_fail(e, -EINVAL, "%s: unknown attribute '%s' (%s's attributes: %s)",
                              what, key, op->name, decode_names(list, sizeof(list), names,
                                                                op->nattrs));
        }
        const gg_attr_spec *spec = &op->attrs[a];
        if (spec->kind != GG_ATTR_CHOICE)
            continue;               /* a number: the core checks it */
        bool found = false;
        for (int ch = 0; spec->choices[ch] && !found; ch++)
            found = proto_str_eq(v, spec->choices[ch]);
        if (!found)
            return proto_fail(e, -EINVAL, "%s (%s): attribute '%s' must be one of: %s",
                              decode_node_where(where, sizeof(where), at), op->name, key,
                              decode_names(list, sizeof(list), spec->choices, -1));
    }
    return 0;
}

static int decode_node(decode_pool *pl, const msgpack_object *no, gg_spec_node *sn,
                       const decode_at *at, proto_errbuf *e)
{
    memset(sn, 0, sizeof(*sn));
    if (no->type != MSGPACK_OBJECT_MAP)
        return 0;
    sn->is_map = true;
    gg_spec_val *const out[] = {&sn->op, &sn->inputs, &sn->outputs, &sn->attrs, &sn->program,
                                &sn->branch};
    const msgpack_object *objs[6] = {0};
    int rc = decode_fields(no, decode_node_keys, out, objs, decode_node_where, at, e);
    if (rc < 0 || (rc = decode_node_attrs(objs[0], objs[3], at, e)) < 0)
        return rc;
    if ((objs[1] && (rc = decode_elems(pl, objs[1], &sn->inputs, GG_MAX_OPERANDS)) < 0) ||
        (objs[2] && (rc = decode_elems(pl, objs[2], &sn->outputs, GG_MAX_OPERANDS)) < 0))
        return rc;
    if (sn->attrs.kind == GG_SPEC_MAP) {
        const msgpack_object *attrs = objs[3];
        int64_t first = decode_room(pl, 2 * sn->attrs.len);
        if (first < 0)
            return -ENOMEM;
        sn->attrs.u = (uint64_t)first;
        for (uint32_t i = 0; i < sn->attrs.len; i++) {
            decode_val(&attrs->via.map.ptr[i].key, &pl->vals[first + 2 * i]);
            decode_val(&attrs->via.map.ptr[i].val, &pl->vals[first + 2 * i + 1]);
        }
    }
    return 0;
}

/* A node list (o, decoded into v): its nodes at node[*next..). */
static int decode_nodes(decode_pool *pl, const msgpack_object *o, gg_spec_val *v,
                        gg_program_spec *spec, int bi, bool branches, proto_errbuf *e)
{
    if (v->kind != GG_SPEC_ARRAY)
        return 0;
    v->u = spec->nnode;
    for (uint32_t i = 0; i < v->len; i++) {
        decode_at at = {bi, (int)i, branches};
        int rc = decode_node(pl, &o->via.array.ptr[i], &spec->node[spec->nnode++], &at, e);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int gg_decode_define(const msgpack_object *params, gg_program_spec *spec, proto_errbuf *e)
{
    memset(spec, 0, sizeof(*spec));
    if (!params || params->type != MSGPACK_OBJECT_MAP)
        return 0;
    static const char *const keys[] = {"name", "buckets", "tensors", "nodes", "branches", NULL};
    gg_spec_val *const out[] = {&spec->name, &spec->buckets, &spec->tensors, &spec->nodes,
                                &spec->branches};
    const msgpack_object *objs[5] = {0};
    for (uint32_t i = 0; i < params->via.map.size; i++) {
        const msgpack_object_kv *kv = &params->via.map.ptr[i];
        int k = decode_key(&kv->key, keys);
        if (k >= 0 && out[k]->kind == GG_SPEC_ABSENT) {
            decode_val(&kv->val, out[k]);
            objs[k] = &kv->val;
        }
    }
    /* the nodes of every list, counted so their table is allocated once */
    uint64_t nnodes = spec->nodes.kind == GG_SPEC_ARRAY ? spec->nodes.len : 0;
    const msgpack_object *br = objs[4];
    if (spec->branches.kind == GG_SPEC_ARRAY)
        for (uint32_t b = 0; b < spec->branches.len; b++)
            if (br->via.array.ptr[b].type == MSGPACK_OBJECT_ARRAY)
                nnodes += br->via.array.ptr[b].via.array.size;
    const msgpack_object *tm = objs[2];
    uint32_t ntens = spec->tensors.kind == GG_SPEC_MAP && spec->tensors.len <= GG_MAX_TENSORS
                         ? spec->tensors.len : 0;
    decode_pool pl = {0};
    int rc = -ENOMEM;
    /* room for the usual shapes and operands at once, grown past them */
    uint64_t guess = 4 * (uint64_t)ntens + 3 * nnodes + 64;
    if ((ntens && !(spec->tensor = calloc(ntens, sizeof(*spec->tensor)))) ||
        (nnodes && !(spec->node = malloc(sizeof(*spec->node) * nnodes))) ||
        guess > UINT32_MAX || decode_room(&pl, (uint32_t)guess) < 0)
        goto out;
    pl.n = 0;
    /* the keys: the tensors', then each node's in order */
    if (spec->tensors.kind == GG_SPEC_MAP &&
        (rc = decode_tensors(&pl, tm, decode_tensor_keys, GG_MAX_TENSORS, spec->tensor, NULL, e)) < 0)
        goto out;
    spec->ntensor = ntens;
    if (objs[1] && (rc = decode_elems(&pl, objs[1], &spec->buckets, GG_MAX_BUCKETS)) < 0)
        goto out;
    if (objs[3] && (rc = decode_nodes(&pl, objs[3], &spec->nodes, spec, 0, false, e)) < 0)
        goto out;
    if (spec->branches.kind == GG_SPEC_ARRAY) {
        int64_t first = decode_room(&pl, spec->branches.len);
        rc = -ENOMEM;
        if (first < 0)
            goto out;
        spec->branches.u = (uint64_t)first;
        for (uint32_t b = 0; b < spec->branches.len; b++) {
            const msgpack_object *o = &br->via.array.ptr[b];
            decode_val(o, &pl.vals[first + b]);
            /* the pool may move while a list is decoded: its head by index */
            gg_spec_val head = pl.vals[first + b];
            if ((rc = decode_nodes(&pl, o, &head, spec, (int)b, true, e)) < 0)
                goto out;
            pl.vals[first + b] = head;
        }
    }
    rc = 0;
out:
    spec->vals = pl.vals;
    spec->nvals = pl.n;
    if (rc == -ENOMEM)
        proto_fail(e, rc, "out of memory");
    return rc;
}

void gg_decode_define_free(gg_program_spec *spec)
{
    free(spec->tensor);
    free(spec->node);
    free(spec->vals);
    memset(spec, 0, sizeof(*spec));
}

int gg_decode_rebind(const msgpack_object *tensors, gg_rebind_spec *spec, proto_errbuf *e)
{
    memset(spec, 0, sizeof(*spec));
    if (!tensors)
        return 0;
    decode_val(tensors, &spec->tensors);
    if (tensors->type != MSGPACK_OBJECT_MAP)
        return 0;
    if (spec->tensors.len && !(spec->tensor = calloc(spec->tensors.len, sizeof(*spec->tensor))))
        return proto_fail(e, -ENOMEM, "out of memory");
    return decode_tensors(NULL, tensors, decode_rebind_keys, UINT32_MAX, NULL, spec->tensor, e);
}

void gg_decode_rebind_free(gg_rebind_spec *spec)
{
    free(spec->tensor);
    memset(spec, 0, sizeof(*spec));
}
