/* SPDX-License-Identifier: MIT */
/* Per-uid quotas (quota.h). */
#include "core/quota.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/arena.h"
#include "core/buffer.h"
#include "core/cache.h"
#include "core/core.h"
#include "core/program.h"

static uint64_t quota_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

uint64_t gg_quota_mapped(uint64_t offset, uint64_t size)
{
    uint64_t pg = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t start = offset & ~(pg - 1);
    uint64_t end = quota_add(quota_add(offset, size), pg - 1) & ~(pg - 1);
    return end - start;
}

uint64_t gg_quota_scratch(const gg_program *p)
{
    return p->arena ? p->arena->bytes : 0;
}

uint64_t gg_quota_program_bytes(const gg_program *p)
{
    uint64_t b = sizeof(*p) + (uint64_t)p->ntensors * sizeof(gg_ptensor) + p->siglen;
    if (p->tindex)
        b += ((uint64_t)p->tindex_mask + 1) * sizeof(int);
    b += (uint64_t)p->nbranches * sizeof(gg_branch);
    b += (uint64_t)p->nbranches * (uint64_t)p->nbuckets * sizeof(*p->entries);
    for (int i = 0; i < p->nbranches; i++) {
        const gg_branch *br = &p->branches[i];
        /* plan and stages are allocated with the nodes' capacity */
        uint64_t per = sizeof(gg_pnode) + (br->plan ? sizeof(gg_pnode) : 0) +
                       (br->stages ? sizeof(gg_pstage) : 0);
        b = quota_add(b, (uint64_t)br->nnodes * per);
    }
    return b;
}

uint64_t gg_quota_program_bytes_limit(const gg_core *core)
{
    uint64_t lim = core->cfg->quota_program_bytes;
    if (lim != GG_QUOTA_AUTO)
        return lim;
    /* The structures live on the host heap whatever the backend.  An
     * eighth of RAM: with the cpu backend's scratch at a quarter, one user
     * at both limits still leaves most of the host to the others. */
    long pages = sysconf(_SC_PHYS_PAGES), pg = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || pg <= 0)
        return 0;
    return (uint64_t)pages * (uint64_t)pg / 8;
}

uint64_t gg_quota_scratch_limit(const gg_core *core)
{
    uint64_t lim = core->cfg->quota_scratch_bytes;
    if (lim != GG_QUOTA_AUTO)
        return lim;
    /* A quarter of the memory scratch lives in (RAM on the cpu backend,
     * VRAM on a GPU): four users at their limit fill it, one cannot. */
    uint64_t total = core->devinfo.mem_total;
    return total ? total / 4 : 0;
}

void gg_quota_usage(gg_core *core, uid_t uid, gg_quota_use *out)
{
    memset(out, 0, sizeof(*out));
    size_t pos = 0;
    uint64_t id;
    const gg_buffer *b;
    while ((b = gg_idmap_next(&core->buffers, &pos, &id)) != NULL)
        if (b->sess->uid == uid) {
            out->buffers++;
            out->mapped_bytes = quota_add(out->mapped_bytes, gg_quota_mapped(b->offset, b->size));
        }
    pos = 0;
    const gg_program *p;
    while ((p = gg_idmap_next(&core->programs, &pos, &id)) != NULL)
        if (p->sess->uid == uid) {
            out->programs++;
            out->scratch_bytes = quota_add(out->scratch_bytes, p->scratch_quota);
            out->program_bytes = quota_add(out->program_bytes, gg_quota_program_bytes(p));
        }
    if (core->cache)
        gg_cache_parked_usage(core->cache, uid, &out->parked, &out->parked_bytes);
}

int gg_quota_fail(proto_errbuf *e, uid_t uid, const char *what, uint64_t have, uint64_t add,
                  uint64_t limit, const char *setting, const char *hint)
{
    return proto_fail(e, -EDQUOT,
                      "uid %u over its quota of %s: %llu held + %llu more is past the limit "
                      "of %llu (%s); %s",
                      (unsigned)uid, what, (unsigned long long)have, (unsigned long long)add,
                      (unsigned long long)limit, setting, hint);
}

int gg_quota_buffer(gg_core *core, uid_t uid, uint64_t offset, uint64_t size, proto_errbuf *e)
{
    const gg_config *cfg = core->cfg;
    if (!cfg->quota_buffers && !cfg->quota_mapped_bytes)
        return 0;
    gg_quota_use u;
    gg_quota_usage(core, uid, &u);
    if (cfg->quota_buffers && u.buffers + 1 > cfg->quota_buffers)
        return gg_quota_fail(e, uid, "registered buffers", u.buffers, 1, cfg->quota_buffers,
                             "max-buffers-per-uid", "release some buffers first");
    uint64_t m = gg_quota_mapped(offset, size);
    if (cfg->quota_mapped_bytes && quota_add(u.mapped_bytes, m) > cfg->quota_mapped_bytes)
        return gg_quota_fail(e, uid, "mapped bytes", u.mapped_bytes, m, cfg->quota_mapped_bytes,
                             "max-mapped-bytes-per-uid",
                             "release some buffers, or register smaller ranges");
    return 0;
}

int gg_quota_program(gg_core *core, uid_t uid, const gg_program *p, proto_errbuf *e)
{
    const gg_config *cfg = core->cfg;
    uint64_t slim = gg_quota_scratch_limit(core);
    uint64_t blim = gg_quota_program_bytes_limit(core);
    if (!cfg->quota_programs && !slim && !blim)
        return 0;
    gg_quota_use u;
    gg_quota_usage(core, uid, &u);
    if (cfg->quota_programs && u.programs + 1 > cfg->quota_programs)
        return gg_quota_fail(e, uid, "programs", u.programs, 1, cfg->quota_programs,
                             "max-programs-per-uid", "release some programs first");
    if (slim && quota_add(u.scratch_bytes, p->scratch_quota) > slim)
        return gg_quota_fail(e, uid, "scratch bytes (each program: one arena, its scratch at its "
                             "largest bucket)", u.scratch_bytes, p->scratch_quota,
                             slim, cfg->quota_scratch_bytes == GG_QUOTA_AUTO
                                 ? "max-scratch-bytes-per-uid, auto: a quarter of the "
                                   "device's memory" : "max-scratch-bytes-per-uid",
                             "release some programs, or define this one with a smaller largest "
                             "bucket");
    uint64_t pb = gg_quota_program_bytes(p);
    if (blim && quota_add(u.program_bytes, pb) > blim)
        return gg_quota_fail(e, uid, "program bytes (each program: its tensors, nodes, plan and "
                             "stages, a called program's copied in)", u.program_bytes, pb, blim,
                             cfg->quota_program_bytes == GG_QUOTA_AUTO
                                 ? "max-program-bytes-per-uid, auto: an eighth of RAM"
                                 : "max-program-bytes-per-uid",
                             "release some programs, or call fewer or smaller programs");
    return 0;
}

int gg_quota_regions(gg_core *core, uid_t uid, uint64_t open, proto_errbuf *e)
{
    uint64_t lim = core->cfg->quota_fp_regions;
    if (lim && open + 1 > lim)
        return gg_quota_fail(e, uid, "fast-path regions", open, 1, lim,
                             "max-fastpath-regions-per-uid",
                             "close another session's region, or use the socket path");
    return 0;
}

int gg_quota_jobs(gg_core *core, uid_t uid, unsigned have, proto_errbuf *e)
{
    uint64_t lim = core->cfg->quota_jobs;
    if (lim && have + 1 > lim)
        return gg_quota_fail(e, uid, "replays and prepares in the executor", have, 1, lim,
                             "max-jobs-per-uid",
                             "wait for some to finish (those of sessions that have closed "
                             "count until they end)");
    return 0;
}

/* Is gid one of uid's groups in the group database (its passwd entry's
 * primary group and every group that lists it)?  From the credentials the
 * kernel gave for the socket, never from /proc: ProtectProc=invisible
 * hides other users' processes there, and a pid may be reused by then. */
static bool quota_uid_in_group(uid_t uid, gid_t gid)
{
    long sz = sysconf(_SC_GETPW_R_SIZE_MAX);
    size_t cap = sz > 0 ? (size_t)sz : 16384;
    struct passwd pw, *res = NULL;
    char *buf = NULL;
    for (;;) {
        char *nb = realloc(buf, cap);
        if (!nb)
            break;
        buf = nb;
        int rc = getpwuid_r(uid, &pw, buf, cap, &res);
        if (rc == ERANGE && cap < (1u << 20)) {
            cap *= 2;
            continue;
        }
        break;
    }
    if (!res) {
        free(buf);
        return false;   /* a uid with no passwd entry has no supplementary groups */
    }
    bool found = pw.pw_gid == gid;
    int n = 64;
    gid_t *groups = NULL;
    while (!found) {
        gid_t *ng = realloc(groups, (size_t)n * sizeof(*groups));
        if (!ng)
            break;
        groups = ng;
        int want = n;
        if (getgrouplist(pw.pw_name, pw.pw_gid, groups, &want) < 0) {
            /* want now holds the number needed */
            if (want <= n || want > 65536)
                break;
            n = want;
            continue;
        }
        for (int i = 0; i < want && !found; i++)
            found = groups[i] == gid;
        break;
    }
    free(groups);
    free(buf);
    return found;
}

bool gg_quota_sees_all(const gg_core *core, uid_t uid, gid_t gid)
{
    if (uid == 0 || uid == geteuid())
        return true;
    const char *name = core->cfg->admin_group;
    gid_t ag;
    if (!name[0] || gg_config_group_gid(name, &ag) != 0)
        return false;
    return gid == ag || quota_uid_in_group(uid, ag);
}
