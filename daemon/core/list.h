/* SPDX-License-Identifier: MIT */
/* An intrusive doubly linked list: the node sits inside the object it
 * links (a session's buffers, programs and events, the executor's jobs, the
 * cache's LRU), so linking never allocates. */
#ifndef GG_LIST_H
#define GG_LIST_H

#include <stdbool.h>
#include <stddef.h>

typedef struct gg_list {
    struct gg_list *prev, *next;
} gg_list;

static inline void gg_list_init(gg_list *l) { l->prev = l->next = l; }
static inline bool gg_list_empty(const gg_list *l) { return l->next == l; }
static inline void gg_list_add_tail(gg_list *head, gg_list *n)
{
    n->prev = head->prev;
    n->next = head;
    head->prev->next = n;
    head->prev = n;
}
static inline void gg_list_del(gg_list *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->prev = n->next = n;
}
#define gg_container_of(p, T, m) ((T *)((char *)(p) - offsetof(T, m)))

#endif
