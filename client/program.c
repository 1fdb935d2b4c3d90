/* SPDX-License-Identifier: MIT */
/* Buffers, the program builder, define / release / prepare (replay: submit.c). */
#include "priv.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define DEF_MAX_DIMS 8
#define DEF_MAX_OPERANDS 16

/* ---- buffers ------------------------------------------------------------- */

typedef struct {
    const char *method;
    uint64_t *id;
} read_id_arg;

static int read_id(gg_client *c, const msgpack_object *r, void *arg)
{
    read_id_arg *a = arg;
    const msgpack_object *o = proto_map_get(r, "id");
    uint64_t v;
    if (!o || !proto_obj_u64(o, &v))
        return client_fail(c, -EPROTO, "gfxgraphd answered '%s' without an id", a->method);
    if (a->id)
        *a->id = v;
    return 0;
}

static int call_get_id(gg_client *c, const char *method, client_params *p, uint64_t *id)
{
    read_id_arg a = {method, id};
    return client_call_params(c, method, p, read_id, &a);
}

static int buffer_register(gg_client *c, bool bin, const void *handle, size_t len,
                           uint64_t offset, uint64_t size, uint64_t *id)
{
    client_params p;
    client_params_init(&p);
    msgpack_pack_map(&p.pk, 3);
    proto_pack_key(&p.pk, "handle");
    if (bin) {
        msgpack_pack_bin(&p.pk, len);
        msgpack_pack_bin_body(&p.pk, handle, len);
    } else {
        proto_pack_strn(&p.pk, handle, len);
    }
    proto_pack_kv_u64(&p.pk, "offset", offset);
    proto_pack_kv_u64(&p.pk, "size", size);
    int rc = call_get_id(c, "buffer.register", &p, id);
    client_params_free(&p);
    return rc;
}

int gg_client_buffer_register_shm(gg_client *c, const char *shm_name, uint64_t offset,
                                  uint64_t size, uint64_t *id)
{
    if (!c)
        return -EINVAL;
    if (!shm_name || !*shm_name)
        return client_fail_locked(c, -EINVAL, "buffer.register: the shm name is empty");
    int rc = buffer_register(c, false, shm_name, strlen(shm_name), offset, size, id);
    if (rc != -EACCES)
        return rc;
    /* A daemon of another uid (the system service runs as gfxgraph) cannot
     * open a 0600 object by name; the same object sent by descriptor needs
     * no permission of its own, so the caller's code works either way. */
    int fd = shm_open(shm_name, O_RDWR | O_CLOEXEC, 0);
    if (fd < 0) {
        int e = errno;
        pthread_mutex_lock(&c->mu);
        char was[sizeof c->err];
        snprintf(was, sizeof was, "%s", c->err);
        client_fail(c, -EACCES, "%s; this process cannot open %s either (%s): pass the memory "
                    "by descriptor (gg_client_memfd_create, gg_client_buffer_register_fd)", was,
                    shm_name, strerror(e));
        pthread_mutex_unlock(&c->mu);
        return -EACCES;
    }
    rc = gg_client_buffer_register_fd(c, fd, offset, size, id);
    close(fd);
    return rc;
}

int gg_client_buffer_register(gg_client *c, const void *handle, size_t handle_len,
                              uint64_t offset, uint64_t size, uint64_t *id)
{
    if (!c)
        return -EINVAL;
    if (!handle || !handle_len)
        return client_fail_locked(c, -EINVAL, "buffer.register: the handle is empty");
    return buffer_register(c, true, handle, handle_len, offset, size, id);
}

int gg_client_buffer_register_fd(gg_client *c, int fd, uint64_t offset, uint64_t size,
                                 uint64_t *id)
{
    if (!c)
        return -EINVAL;
    if (fd < 0)
        return client_fail_locked(c, -EBADF, "buffer.register: fd %d is not a file "
                                  "descriptor", fd);
    client_params p;
    client_params_init(&p);
    msgpack_pack_map(&p.pk, 3);
    proto_pack_kv_bool(&p.pk, "fd", true);
    proto_pack_kv_u64(&p.pk, "offset", offset);
    proto_pack_kv_u64(&p.pk, "size", size);
    const msgpack_object *r;
    read_id_arg a = {"buffer.register", id};
    pthread_mutex_lock(&c->mu);
    int rc = client_call_locked_fd(c, "buffer.register", p.sb.data, p.sb.size, fd, &r);
    if (rc == 0)
        rc = read_id(c, r, &a);
    pthread_mutex_unlock(&c->mu);
    client_params_free(&p);
    return rc;
}

static int release_by_id(gg_client *c, const char *method, uint64_t id)
{
    if (!c)
        return -EINVAL;
    client_params p;
    client_params_init(&p);
    msgpack_pack_map(&p.pk, 1);
    proto_pack_kv_u64(&p.pk, "id", id);
    int rc = client_call_params(c, method, &p, NULL, NULL);
    client_params_free(&p);
    return rc;
}

int gg_client_buffer_release(gg_client *c, uint64_t id)
{
    return release_by_id(c, "buffer.release", id);
}

int gg_client_event_register(gg_client *c, const void *handle, size_t handle_len, uint64_t *id)
{
    if (!c)
        return -EINVAL;
    if (!handle || !handle_len)
        return client_fail_locked(c, -EINVAL, "event.register: the handle is empty");
    client_params p;
    client_params_init(&p);
    msgpack_pack_map(&p.pk, 1);
    proto_pack_key(&p.pk, "handle");
    msgpack_pack_bin(&p.pk, handle_len);
    msgpack_pack_bin_body(&p.pk, handle, handle_len);
    int rc = call_get_id(c, "event.register", &p, id);
    client_params_free(&p);
    return rc;
}

int gg_client_event_release(gg_client *c, uint64_t id)
{
    return release_by_id(c, "event.release", id);
}

int gg_client_program_rebind(gg_client *c, uint64_t program, const char *tensor, uint64_t buffer,
                             uint64_t offset)
{
    if (!c)
        return -EINVAL;
    if (!tensor || !*tensor)
        return client_fail_locked(c, -EINVAL, "program.rebind: the tensor name is empty");
    client_params p;
    client_params_init(&p);
    msgpack_pack_map(&p.pk, 2);
    proto_pack_kv_u64(&p.pk, "id", program);
    proto_pack_key(&p.pk, "tensors");
    msgpack_pack_map(&p.pk, 1);
    proto_pack_key(&p.pk, tensor);
    msgpack_pack_map(&p.pk, 2);
    proto_pack_kv_u64(&p.pk, "buffer", buffer);
    proto_pack_kv_u64(&p.pk, "offset", offset);
    int rc = client_call_params(c, "program.rebind", &p, NULL, NULL);
    client_params_free(&p);
    return rc;
}

int gg_client_program_release(gg_client *c, uint64_t id)
{
    return release_by_id(c, "program.release", id);
}

/* ---- program builder ----------------------------------------------------- */

typedef struct {
    char *name;
    bool scratch;
    uint64_t buffer, offset;
    char dtype[16];
    int ndim;
    int64_t dims[DEF_MAX_DIMS];
    char *view;         /* a view of this tensor (same dtype and bytes), or NULL */
} def_tensor;

typedef struct {
    char *key;
    char *s;            /* NULL: number */
    double f;
} def_attr;

typedef struct {
    char *op;           /* "call": callee and callee_branch, no operands */
    uint64_t callee;
    int callee_branch;
    int branch;
    int nin, nout;
    char **names;       /* nin inputs then nout outputs */
    def_attr *attrs;
    int nattrs;
} def_node;

struct gg_program_def {
    char *name;
    def_tensor *tensors;
    int ntensors, captensors;
    def_node *nodes;
    int nnodes, capnodes;
    int branch;         /* current branch */
    int *buckets;
    int nbuckets;
    int rc;             /* first failure */
    char err[256];
};

static int def_fail(gg_program_def *d, int rc, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int def_fail(gg_program_def *d, int rc, const char *fmt, ...)
{
    if (d->rc == 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(d->err, sizeof d->err, fmt, ap);
        va_end(ap);
        d->rc = rc;
    }
    return d->rc;
}

static bool def_grow(void **p, int *cap, int need, size_t elem)
{
    if (need <= *cap)
        return true;
    int n = *cap ? *cap * 2 : 8;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, (size_t)n * elem);
    if (!q)
        return false;
    memset((char *)q + (size_t)*cap * elem, 0, (size_t)(n - *cap) * elem);
    *p = q;
    *cap = n;
    return true;
}

gg_program_def *gg_program_def_new(const char *name)
{
    gg_program_def *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    d->name = strdup(name ? name : "");
    if (!d->name) {
        free(d);
        return NULL;
    }
    if (!*d->name)
        def_fail(d, -EINVAL, "the program needs a name");
    return d;
}

static void def_node_free(def_node *n)
{
    free(n->op);
    for (int i = 0; i < n->nin + n->nout; i++)
        free(n->names[i]);
    free(n->names);
    for (int i = 0; i < n->nattrs; i++) {
        free(n->attrs[i].key);
        free(n->attrs[i].s);
    }
    free(n->attrs);
}

void gg_program_def_free(gg_program_def *d)
{
    if (!d)
        return;
    for (int i = 0; i < d->ntensors; i++)
    {
        free(d->tensors[i].name);
        free(d->tensors[i].view);
    }
    free(d->tensors);
    for (int i = 0; i < d->nnodes; i++)
        def_node_free(&d->nodes[i]);
    free(d->nodes);
    free(d->buckets);
    free(d->name);
    free(d);
}

const char *gg_program_def_error(const gg_program_def *d)
{
    return d ? d->err : "no program definition (NULL)";
}

static int def_add_tensor(gg_program_def *d, const char *name, bool scratch, uint64_t buffer,
                          uint64_t offset, const char *dtype, int ndim, const int64_t *dims)
{
    if (!d)
        return -EINVAL;
    if (d->rc)
        return d->rc;
    if (!name || !*name)
        return def_fail(d, -EINVAL, "a tensor needs a name");
    for (int i = 0; i < d->ntensors; i++)
        if (strcmp(d->tensors[i].name, name) == 0)
            return def_fail(d, -EINVAL, "tensor '%s' is defined twice", name);
    if (!dtype || !*dtype || strlen(dtype) >= sizeof d->tensors[0].dtype)
        return def_fail(d, -EINVAL,
                        "tensor '%s': dtype must be \"f32\", \"f16\", \"bf16\", \"i32\", "
                        "\"i64\" or \"bool\"",
                        name);
    if (ndim < 1 || ndim > DEF_MAX_DIMS || !dims)
        return def_fail(d, -EINVAL, "tensor '%s': ndim is %d; it must be 1..%d", name, ndim,
                        DEF_MAX_DIMS);
    int nbatch = 0;
    for (int i = 0; i < ndim; i++) {
        if (dims[i] == GG_BATCH)
            nbatch++;
        else if (dims[i] <= 0)
            return def_fail(d, -EINVAL, "tensor '%s': dim %d is %lld; dims are > 0 or "
                            "GG_BATCH", name, i, (long long)dims[i]);
    }
    if (nbatch > 1)
        return def_fail(d, -EINVAL, "tensor '%s' has %d GG_BATCH dims; at most one", name,
                        nbatch);
    if (!def_grow((void **)&d->tensors, &d->captensors, d->ntensors + 1, sizeof(def_tensor)))
        return def_fail(d, -ENOMEM, "out of memory");
    def_tensor *t = &d->tensors[d->ntensors];
    t->name = strdup(name);
    if (!t->name)
        return def_fail(d, -ENOMEM, "out of memory");
    t->view = NULL;
    t->scratch = scratch;
    t->buffer = buffer;
    t->offset = offset;
    snprintf(t->dtype, sizeof t->dtype, "%s", dtype);
    t->ndim = ndim;
    memcpy(t->dims, dims, (size_t)ndim * sizeof dims[0]);
    d->ntensors++;
    return 0;
}

int gg_program_def_tensor(gg_program_def *d, const char *name, uint64_t buffer, uint64_t offset,
                          const char *dtype, int ndim, const int64_t *dims)
{
    return def_add_tensor(d, name, false, buffer, offset, dtype, ndim, dims);
}

int gg_program_def_view(gg_program_def *d, const char *name, const char *of, int ndim,
                        const int64_t *dims)
{
    if (d && !d->rc && (!of || !*of))
        return def_fail(d, -EINVAL, "view '%s': name the tensor it views", name ? name : "");
    int rc = def_add_tensor(d, name, true, 0, 0, "view", ndim, dims);
    if (rc == 0 && !(d->tensors[d->ntensors - 1].view = strdup(of)))
        return def_fail(d, -ENOMEM, "out of memory");
    return rc;
}

int gg_program_def_scratch(gg_program_def *d, const char *name, const char *dtype, int ndim,
                           const int64_t *dims)
{
    return def_add_tensor(d, name, true, 0, 0, dtype, ndim, dims);
}

int gg_program_def_node(gg_program_def *d, const char *op, int nin, const char *const *inputs,
                        int nout, const char *const *outputs)
{
    if (!d)
        return -EINVAL;
    if (d->rc)
        return d->rc;
    if (!op || !*op)
        return def_fail(d, -EINVAL, "node %d: the op name is empty", d->nnodes);
    if (nin < 0 || nin > DEF_MAX_OPERANDS || nout < 1 || nout > DEF_MAX_OPERANDS ||
        (nin && !inputs) || !outputs)
        return def_fail(d, -EINVAL, "node %d (%s): %d inputs and %d outputs; 0..%d inputs "
                        "and 1..%d outputs", d->nnodes, op, nin, nout, DEF_MAX_OPERANDS,
                        DEF_MAX_OPERANDS);
    for (int i = 0; i < nin + nout; i++) {
        const char *s = i < nin ? inputs[i] : outputs[i - nin];
        if (!s || !*s)
            return def_fail(d, -EINVAL, "node %d (%s): %s %d has no name", d->nnodes, op,
                            i < nin ? "input" : "output", i < nin ? i : i - nin);
    }
    if (!def_grow((void **)&d->nodes, &d->capnodes, d->nnodes + 1, sizeof(def_node)))
        return def_fail(d, -ENOMEM, "out of memory");
    def_node *n = &d->nodes[d->nnodes];
    memset(n, 0, sizeof *n);
    n->op = strdup(op);
    n->names = calloc((size_t)(nin + nout), sizeof(char *));
    bool ok = n->op && n->names;
    for (int i = 0; ok && i < nin + nout; i++) {
        n->names[i] = strdup(i < nin ? inputs[i] : outputs[i - nin]);
        ok = n->names[i] != NULL;
        if (ok && i < nin)
            n->nin++;
        else if (ok)
            n->nout++;
    }
    if (!ok) {
        def_node_free(n);
        return def_fail(d, -ENOMEM, "out of memory");
    }
    n->branch = d->branch;
    d->nnodes++;
    return 0;
}

int gg_program_def_call(gg_program_def *d, uint64_t program, int branch)
{
    if (!d)
        return -EINVAL;
    if (d->rc)
        return d->rc;
    if (branch < 0)
        return def_fail(d, -EINVAL, "node %d (call): branch %d; branches are >= 0", d->nnodes,
                        branch);
    if (!def_grow((void **)&d->nodes, &d->capnodes, d->nnodes + 1, sizeof(def_node)))
        return def_fail(d, -ENOMEM, "out of memory");
    def_node *n = &d->nodes[d->nnodes];
    memset(n, 0, sizeof *n);
    if (!(n->op = strdup("call")))
        return def_fail(d, -ENOMEM, "out of memory");
    n->callee = program;
    n->callee_branch = branch;
    n->branch = d->branch;
    d->nnodes++;
    return 0;
}

/* Split "a, b,c" into at most max trimmed names in buf (modified). */
static int def_split(char *buf, const char **names, int max)
{
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        while (*t == ' ' || *t == '\t')
            t++;
        char *e = t + strlen(t);
        while (e > t && (e[-1] == ' ' || e[-1] == '\t'))
            *--e = '\0';
        if (n == max)
            return -1;
        names[n++] = t;
    }
    return n;
}

int gg_program_def_op(gg_program_def *d, const char *op, const char *inputs,
                      const char *outputs)
{
    if (!d)
        return -EINVAL;
    if (d->rc)
        return d->rc;
    char *ib = strdup(inputs ? inputs : ""), *ob = strdup(outputs ? outputs : "");
    int rc;
    if (!ib || !ob) {
        rc = def_fail(d, -ENOMEM, "out of memory");
    } else {
        const char *in[DEF_MAX_OPERANDS], *out[DEF_MAX_OPERANDS];
        int nin = def_split(ib, in, DEF_MAX_OPERANDS);
        int nout = def_split(ob, out, DEF_MAX_OPERANDS);
        if (nin < 0 || nout < 0)
            rc = def_fail(d, -EINVAL, "node %d (%s): more than %d inputs or outputs",
                          d->nnodes, op ? op : "", DEF_MAX_OPERANDS);
        else
            rc = gg_program_def_node(d, op, nin, in, nout, out);
    }
    free(ib);
    free(ob);
    return rc;
}

static int def_add_attr(gg_program_def *d, const char *key, const char *s, double f)
{
    if (!d)
        return -EINVAL;
    if (d->rc)
        return d->rc;
    if (d->nnodes == 0 || d->nodes[d->nnodes - 1].branch != d->branch)
        return def_fail(d, -EINVAL, "attribute '%s' given before any node", key ? key : "");
    def_node *n = &d->nodes[d->nnodes - 1];
    if (!n->names)
        return def_fail(d, -EINVAL, "node %d (call): a call takes no attributes", d->nnodes - 1);
    if (!key || !*key)
        return def_fail(d, -EINVAL, "node %d (%s): an attribute needs a name", d->nnodes - 1,
                        n->op);
    for (int i = 0; i < n->nattrs; i++)
        if (strcmp(n->attrs[i].key, key) == 0)
            return def_fail(d, -EINVAL, "node %d (%s): attribute '%s' given twice",
                            d->nnodes - 1, n->op, key);
    def_attr *a = realloc(n->attrs, (size_t)(n->nattrs + 1) * sizeof *a);
    if (!a)
        return def_fail(d, -ENOMEM, "out of memory");
    n->attrs = a;
    a = &n->attrs[n->nattrs];
    a->key = strdup(key);
    a->s = s ? strdup(s) : NULL;
    a->f = f;
    if (!a->key || (s && !a->s)) {
        free(a->key);
        free(a->s);
        return def_fail(d, -ENOMEM, "out of memory");
    }
    n->nattrs++;
    return 0;
}

int gg_program_def_attr_f(gg_program_def *d, const char *key, double value)
{
    return def_add_attr(d, key, NULL, value);
}

int gg_program_def_attr_s(gg_program_def *d, const char *key, const char *value)
{
    return def_add_attr(d, key, value ? value : "", 0);
}

int gg_program_def_branch(gg_program_def *d)
{
    if (!d)
        return -EINVAL;
    if (d->rc)
        return d->rc;
    if (d->nnodes && d->nodes[d->nnodes - 1].branch == d->branch)
        d->branch++;
    return d->branch;
}

int gg_program_def_buckets(gg_program_def *d, int n, const int *buckets)
{
    if (!d)
        return -EINVAL;
    if (d->rc)
        return d->rc;
    if (n < 0 || (n && !buckets))
        return def_fail(d, -EINVAL, "buckets: %d given", n);
    int *b = NULL;
    if (n) {
        b = malloc((size_t)n * sizeof *b);
        if (!b)
            return def_fail(d, -ENOMEM, "out of memory");
        memcpy(b, buckets, (size_t)n * sizeof *b);
    }
    free(d->buckets);
    d->buckets = b;
    d->nbuckets = n;
    return 0;
}

/* ---- define -------------------------------------------------------------- */

static void def_pack_tensor(msgpack_packer *pk, const def_tensor *t)
{
    proto_pack_key(pk, t->name);
    if (t->view) {
        msgpack_pack_map(pk, 2);
        proto_pack_kv_str(pk, "view", t->view);
    } else {
        msgpack_pack_map(pk, t->scratch ? 3 : 4);
    }
    if (t->view) {
    } else if (t->scratch) {
        proto_pack_kv_bool(pk, "scratch", true);
    } else {
        proto_pack_kv_u64(pk, "buffer", t->buffer);
        proto_pack_kv_u64(pk, "offset", t->offset);
    }
    if (!t->view)
        proto_pack_kv_str(pk, "dtype", t->dtype);
    proto_pack_key(pk, "shape");
    msgpack_pack_array(pk, (size_t)t->ndim);
    for (int i = 0; i < t->ndim; i++) {
        if (t->dims[i] == GG_BATCH)
            proto_pack_str(pk, "batch");
        else
            msgpack_pack_int64(pk, t->dims[i]);
    }
}

static void def_pack_node(msgpack_packer *pk, const def_node *n)
{
    if (!n->names) {                /* a call */
        msgpack_pack_map(pk, 3);
        proto_pack_kv_str(pk, "op", n->op);
        proto_pack_kv_u64(pk, "program", n->callee);
        proto_pack_kv_i64(pk, "branch", n->callee_branch);
        return;
    }
    msgpack_pack_map(pk, n->nattrs ? 4 : 3);
    proto_pack_kv_str(pk, "op", n->op);
    proto_pack_key(pk, "inputs");
    msgpack_pack_array(pk, (size_t)n->nin);
    for (int i = 0; i < n->nin; i++)
        proto_pack_str(pk, n->names[i]);
    proto_pack_key(pk, "outputs");
    msgpack_pack_array(pk, (size_t)n->nout);
    for (int i = 0; i < n->nout; i++)
        proto_pack_str(pk, n->names[n->nin + i]);
    if (n->nattrs) {
        proto_pack_key(pk, "attrs");
        msgpack_pack_map(pk, (size_t)n->nattrs);
        for (int i = 0; i < n->nattrs; i++) {
            if (n->attrs[i].s)
                proto_pack_kv_str(pk, n->attrs[i].key, n->attrs[i].s);
            else
                proto_pack_kv_f64(pk, n->attrs[i].key, n->attrs[i].f);
        }
    }
}

static void def_pack(msgpack_packer *pk, const gg_program_def *d)
{
    /* branches in use: 0..last, where the last may be an empty one just
     * started (not sent) */
    int nbranches = d->nnodes ? d->nodes[d->nnodes - 1].branch + 1 : 1;
    msgpack_pack_map(pk, 3 + (d->nbuckets ? 1 : 0));
    proto_pack_kv_str(pk, "name", d->name);
    proto_pack_key(pk, "tensors");
    msgpack_pack_map(pk, (size_t)d->ntensors);
    for (int i = 0; i < d->ntensors; i++)
        def_pack_tensor(pk, &d->tensors[i]);
    if (nbranches == 1) {
        proto_pack_key(pk, "nodes");
        msgpack_pack_array(pk, (size_t)d->nnodes);
        for (int i = 0; i < d->nnodes; i++)
            def_pack_node(pk, &d->nodes[i]);
    } else {
        proto_pack_key(pk, "branches");
        msgpack_pack_array(pk, (size_t)nbranches);
        for (int b = 0, i = 0; b < nbranches; b++) {
            int n = 0;
            for (int j = i; j < d->nnodes && d->nodes[j].branch == b; j++)
                n++;
            msgpack_pack_array(pk, (size_t)n);
            for (int j = 0; j < n; j++)
                def_pack_node(pk, &d->nodes[i + j]);
            i += n;
        }
    }
    if (d->nbuckets) {
        proto_pack_key(pk, "buckets");
        msgpack_pack_array(pk, (size_t)d->nbuckets);
        for (int i = 0; i < d->nbuckets; i++)
            msgpack_pack_int64(pk, d->buckets[i]);
    }
}

int gg_client_program_define(gg_client *c, const gg_program_def *d, uint64_t *id)
{
    if (!c)
        return -EINVAL;
    if (!d)
        return client_fail_locked(c, -EINVAL, "program.define: no program definition (NULL)");
    if (d->rc)
        return client_fail_locked(c, d->rc, "program '%s': %s", d->name, d->err);
    client_params p;
    client_params_init(&p);
    def_pack(&p.pk, d);
    int rc = call_get_id(c, "program.define", &p, id);
    client_params_free(&p);
    return rc;
}

typedef struct {
    int ready, failed;
} prepare_counts;

static int read_prepared(gg_client *c, const msgpack_object *r, void *arg)
{
    prepare_counts *n = arg;
    const msgpack_object *list = proto_map_get(r, "prepared");
    if (!list || list->type != MSGPACK_OBJECT_ARRAY)
        return client_fail(c, -EPROTO, "gfxgraphd answered program.prepare without a "
                           "'prepared' list");
    for (uint32_t i = 0; i < list->via.array.size; i++) {
        const msgpack_object *st = proto_map_get(&list->via.array.ptr[i], "state");
        if (st && proto_str_eq(st, "ready"))
            n->ready++;
        else
            n->failed++;
    }
    return 0;
}

int gg_client_program_prepare(gg_client *c, uint64_t id, int n, const int *buckets, int branch,
                              int *ready, int *failed)
{
    if (!c)
        return -EINVAL;
    if (n < 0 || (n && !buckets))
        return client_fail_locked(c, -EINVAL, "program.prepare: %d buckets given", n);
    client_params p;
    client_params_init(&p);
    msgpack_pack_map(&p.pk, 1 + (n ? 1 : 0) + (branch >= 0 ? 1 : 0));
    proto_pack_kv_u64(&p.pk, "id", id);
    if (n) {
        proto_pack_key(&p.pk, "buckets");
        msgpack_pack_array(&p.pk, (size_t)n);
        for (int i = 0; i < n; i++)
            msgpack_pack_int64(&p.pk, buckets[i]);
    }
    if (branch >= 0)
        proto_pack_kv_i64(&p.pk, "branch", branch);
    prepare_counts cnt = {0, 0};
    int rc = client_call_params(c, "program.prepare", &p, read_prepared, &cnt);
    client_params_free(&p);
    if (rc < 0)
        return rc;
    if (ready)
        *ready = cnt.ready;
    if (failed)
        *failed = cnt.failed;
    return 0;
}
