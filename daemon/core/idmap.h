/* SPDX-License-Identifier: MIT */
/* A small open-addressing map from a 64-bit id to a pointer. */
#ifndef GG_IDMAP_H
#define GG_IDMAP_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
    uint64_t *keys;     /* 0: empty; UINT64_MAX: deleted */
    void **vals;
    size_t cap;         /* power of two */
    size_t count;
    size_t used;        /* count + tombstones */
} gg_idmap;

void gg_idmap_init(gg_idmap *m);
void gg_idmap_fini(gg_idmap *m);
int gg_idmap_put(gg_idmap *m, uint64_t id, void *val);   /* 0 or -ENOMEM; id != 0 */
void *gg_idmap_get(const gg_idmap *m, uint64_t id);
void *gg_idmap_del(gg_idmap *m, uint64_t id);
/* Iterate: start with *pos = 0; returns NULL at the end. */
void *gg_idmap_next(const gg_idmap *m, size_t *pos, uint64_t *id);

#endif
