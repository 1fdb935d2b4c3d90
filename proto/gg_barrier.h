/* SPDX-License-Identifier: MIT */
/* Memory ordering of the fast path, for the client library and the daemon
 * alike: every load, store, read-modify-write and fence on a word that
 * another thread or process reads at the same time goes through these, so
 * the ordering each word needs is written in one vocabulary and can be
 * audited in one place (proto/fastpath.h says which side writes which word).
 *
 * They work on plain objects (uint32_t, uint64_t, int), never on _Atomic
 * ones: the shared region's words are plain in proto/fastpath.h, which a
 * client in another language maps too, and compilers differ on the GNU
 * builtins applied to _Atomic types.  A word accessed through these must be
 * accessed only through these.
 *
 * The orders are the C11 ones: acquire pairs with release (a reader that
 * sees the released value sees every store made before it); seq_cst is for
 * the two-sided sleep handshakes (one side stores "I sleep" then loads the
 * other's word, the other stores its word then loads "sleeps"), where
 * acquire/release alone lets both miss each other. */
#ifndef GG_PROTO_BARRIER_H
#define GG_PROTO_BARRIER_H

/* loads */
#define gg_load_relaxed(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define gg_load_acquire(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define gg_load_seq_cst(p) __atomic_load_n((p), __ATOMIC_SEQ_CST)

/* stores */
#define gg_store_relaxed(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)
#define gg_store_release(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define gg_store_seq_cst(p, v) __atomic_store_n((p), (v), __ATOMIC_SEQ_CST)

/* read-modify-write: each returns the value before */
#define gg_fetch_add_relaxed(p, v) __atomic_fetch_add((p), (v), __ATOMIC_RELAXED)
#define gg_fetch_add_seq_cst(p, v) __atomic_fetch_add((p), (v), __ATOMIC_SEQ_CST)
#define gg_fetch_sub_release(p, v) __atomic_fetch_sub((p), (v), __ATOMIC_RELEASE)
#define gg_fetch_sub_seq_cst(p, v) __atomic_fetch_sub((p), (v), __ATOMIC_SEQ_CST)
#define gg_exchange_seq_cst(p, v) __atomic_exchange_n((p), (v), __ATOMIC_SEQ_CST)

/* a full fence: no load or store moves across it either way */
#define gg_smp_mb() __atomic_thread_fence(__ATOMIC_SEQ_CST)

/* One round of a spin-wait: tells the CPU that this is a spin (the sibling
 * hyperthread gets the core's resources, the loop exit is not mispredicted)
 * and is a compiler barrier, so the loop re-reads what it waits on. */
static inline void gg_cpu_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
    __asm__ __volatile__("" ::: "memory");
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#else
    __asm__ __volatile__("" ::: "memory");
#endif
}

#endif
