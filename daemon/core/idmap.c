/* SPDX-License-Identifier: MIT */
#include "core/idmap.h"

#include <errno.h>
#include <stdlib.h>

#define IDMAP_TOMB UINT64_MAX

void gg_idmap_init(gg_idmap *m)
{
    m->keys = NULL;
    m->vals = NULL;
    m->cap = m->count = m->used = 0;
}

void gg_idmap_fini(gg_idmap *m)
{
    free(m->keys);
    free(m->vals);
    gg_idmap_init(m);
}

static size_t idmap_hash(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (size_t)k;
}

static int idmap_grow(gg_idmap *m)
{
    size_t ncap = m->cap ? m->cap * 2 : 64;
    if (m->count * 4 < m->cap)   /* mostly tombstones: rehash at the same size */
        ncap = m->cap;
    uint64_t *nk = calloc(ncap, sizeof(*nk));
    void **nv = calloc(ncap, sizeof(*nv));
    if (!nk || !nv) {
        free(nk);
        free(nv);
        return -ENOMEM;
    }
    for (size_t i = 0; i < m->cap; i++) {
        uint64_t k = m->keys[i];
        if (k == 0 || k == IDMAP_TOMB)
            continue;
        size_t j = idmap_hash(k) & (ncap - 1);
        while (nk[j])
            j = (j + 1) & (ncap - 1);
        nk[j] = k;
        nv[j] = m->vals[i];
    }
    free(m->keys);
    free(m->vals);
    m->keys = nk;
    m->vals = nv;
    m->cap = ncap;
    m->used = m->count;
    return 0;
}

int gg_idmap_put(gg_idmap *m, uint64_t id, void *val)
{
    if ((m->used + 1) * 4 >= m->cap * 3) {
        int rc = idmap_grow(m);
        if (rc < 0)
            return rc;
    }
    size_t j = idmap_hash(id) & (m->cap - 1);
    while (m->keys[j] && m->keys[j] != IDMAP_TOMB && m->keys[j] != id)
        j = (j + 1) & (m->cap - 1);
    if (m->keys[j] != id) {
        if (m->keys[j] == 0)
            m->used++;
        m->count++;
        m->keys[j] = id;
    }
    m->vals[j] = val;
    return 0;
}

static size_t idmap_find(const gg_idmap *m, uint64_t id)
{
    if (!m->cap || id == 0 || id == IDMAP_TOMB)
        return SIZE_MAX;
    size_t j = idmap_hash(id) & (m->cap - 1);
    while (m->keys[j]) {
        if (m->keys[j] == id)
            return j;
        j = (j + 1) & (m->cap - 1);
    }
    return SIZE_MAX;
}

void *gg_idmap_get(const gg_idmap *m, uint64_t id)
{
    size_t j = idmap_find(m, id);
    return j == SIZE_MAX ? NULL : m->vals[j];
}

void *gg_idmap_del(gg_idmap *m, uint64_t id)
{
    size_t j = idmap_find(m, id);
    if (j == SIZE_MAX)
        return NULL;
    void *v = m->vals[j];
    m->keys[j] = IDMAP_TOMB;
    m->vals[j] = NULL;
    m->count--;
    return v;
}

void *gg_idmap_next(const gg_idmap *m, size_t *pos, uint64_t *id)
{
    while (*pos < m->cap) {
        size_t j = (*pos)++;
        if (m->keys[j] && m->keys[j] != IDMAP_TOMB) {
            if (id)
                *id = m->keys[j];
            return m->vals[j];
        }
    }
    return NULL;
}
