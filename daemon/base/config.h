/* SPDX-License-Identifier: MIT */
/* Daemon settings.  Precedence: command-line flags over environment over
 * config file over defaults.  Every value is validated where it is read; a
 * bad value stops the daemon at start with a message naming where it came
 * from. */
#ifndef GG_CONFIG_H
#define GG_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "base/log.h"

#define GG_MAX_BUCKETS 32
#define GG_PATH_MAX 108   /* sun_path */

typedef enum { GG_BACKEND_AUTO = 0, GG_BACKEND_CPU, GG_BACKEND_HIP } gg_backend_kind;
typedef enum { GG_REPLAY_STANDARD = 0, GG_REPLAY_ADAPTIVE, GG_REPLAY_HOT } gg_replay_mode;

/* GFXGRAPH_FAULT bits */
/* GFXGRAPH_FAULT: failures injected at one step.  capture, instantiate and
 * launch make the graph path fail (eager fallback); device makes a replay
 * find the device lost, as a sticky GPU error would (the daemon exits 3);
 * memory makes a captured graph's launch report a fault in the client's
 * memory once its kernels have run (the replay fails with EFAULT and is not
 * run again).  The bits in the order of their names (config.c). */
enum { GG_FAULT_CAPTURE = 1, GG_FAULT_INSTANTIATE = 2, GG_FAULT_LAUNCH = 4, GG_FAULT_DEVICE = 8,
       GG_FAULT_VALIDATE = 16, GG_FAULT_MEMORY = 32 };

/* The default of max-scratch-bytes-per-uid and max-program-bytes-per-uid,
 * "auto": sized from the machine once the device is open (core/quota.h,
 * gg_quota_scratch_limit, gg_quota_program_bytes_limit). */
#define GG_QUOTA_AUTO UINT64_MAX

/* Settings known by name (config-file spelling). */
#define GG_CFG_NKEYS 43

typedef struct {
    char socket_path[GG_PATH_MAX];
    char config_file[256];
    gg_backend_kind backend;
    gg_log_level log_level;
    gg_log_target log_target;

    size_t max_message;          /* bytes */
    unsigned max_inflight;       /* requests per connection */
    unsigned max_connections;
    unsigned max_conn_per_uid;   /* 0: no per-uid limit */
    bool max_conn_per_uid_set;   /* else derived from max_connections */
    unsigned request_timeout_ms; /* a started request must be complete; 0: off */
    size_t max_queued_bytes;     /* answers queued on one connection before its reading pauses */
    unsigned shutdown_timeout_ms;

    int buckets[GG_MAX_BUCKETS];
    int nbuckets;
    unsigned cache_entries;      /* LRU capacity */
    unsigned cache_idle_s;       /* evict entries unused this long; 0: never */
    double vram_cap;             /* fraction of device memory graphs may use */

    bool graphs_enabled;         /* GFXGRAPH=0 turns graphs off: all eager */
    bool validate;               /* GFXGRAPH=validate */
    bool fuse;                   /* GFXGRAPH_FUSE: fused launch plans (core/fuse.h) */
    gg_replay_mode replay_mode;
    unsigned trusted_replay_threshold;
    unsigned trusted_replay_sample_interval;
    unsigned adaptive_samples;     /* replay-mode adaptive: timed runs of each path */
    unsigned adaptive_recheck;     /* replays between re-measurements; 0: never */
    bool adaptive_fixed;           /* adaptive-timing: fixed figures instead of measured */
    double adaptive_graph_us, adaptive_eager_us;
    unsigned fault;              /* GG_FAULT_* */
    unsigned exec_update_limit;  /* re-instantiate after this many updates */
    unsigned workers;            /* executor threads; 0: automatic */
    int device_index;
    bool completion_hostfn;      /* hip: host functions instead of event polling */
    bool fastpath;               /* offer shared-memory rings (fastpath.open) */
    unsigned fastpath_spin_us;   /* a ring's thread busy-waits this long after activity */
    unsigned fastpath_max_regions; /* rings open at once, daemon-wide */
    int fastpath_completion;     /* 0 auto, 1 device, 2 daemon (fastpath/fp.h) */

    /* Per-uid quotas (core/quota.c): each 0 for no limit. */
    uint64_t quota_buffers;        /* max-buffers-per-uid */
    uint64_t quota_mapped_bytes;   /* max-mapped-bytes-per-uid */
    uint64_t quota_programs;       /* max-programs-per-uid */
    uint64_t quota_scratch_bytes;  /* max-scratch-bytes-per-uid; GG_QUOTA_AUTO */
    uint64_t quota_program_bytes;  /* max-program-bytes-per-uid; GG_QUOTA_AUTO */
    uint64_t quota_parked;         /* max-parked-graphs-per-uid */
    uint64_t quota_parked_bytes;   /* max-parked-bytes-per-uid */
    uint64_t quota_fp_regions;     /* max-fastpath-regions-per-uid */
    uint64_t quota_jobs;           /* max-jobs-per-uid: replays, prepares in the executor */
    char admin_group[64];          /* sees every uid in stats; "" none */
    unsigned stats_max_cache;      /* cache entries in one stats answer */

    /* Where each setting came from (gg_config_key_name order): "default",
     * "file PATH:LINE", "environment VAR" or the flag. */
    char sources[GG_CFG_NKEYS][96];
} gg_config;

void gg_config_defaults(gg_config *c);
/* Parse argv, env and the config file into c.  Returns 0, 1 when --help,
 * --version or a clean --check-config / --print-config was printed (exit
 * 0), 2 when --check-config found problems (exit 2; printed), or -EINVAL
 * with a message in err. */
int gg_config_load(gg_config *c, int argc, char **argv, char *err, size_t errlen);
/* Apply one "key = value" setting (the config-file spelling); used by the
 * file, env and flag layers alike. */
int gg_config_set(gg_config *c, const char *key, const char *value, char *err, size_t errlen);
/* The settings by index, 0 .. GG_CFG_NKEYS-1. */
const char *gg_config_key_name(int i);
/* Can this setting change on a reload (SIGHUP) without a restart? */
bool gg_config_key_live(int i);
/* The setting's value as the config file would spell it. */
void gg_config_value(const gg_config *c, int i, char *buf, size_t len);
/* Copy setting i (and what derives from it) from src into dst. */
void gg_config_copy_key(gg_config *dst, const gg_config *src, int i);
/* The config file these settings were read from (the default when none
 * was named). */
const char *gg_config_file_path(const gg_config *c);
/* Every setting, its value and where it came from (--print-config). */
void gg_config_print(const gg_config *c, FILE *out);
int gg_config_parse_buckets(const char *s, int *out, int *n, char *err, size_t errlen);
/* The admin group's gid: name is a number, or a name looked up in the group
 * database.  0, -ENOENT when the database has no such group, or another
 * negative errno when it could not be asked. */
int gg_config_group_gid(const char *name, gid_t *out);
const char *gg_backend_name(gg_backend_kind k);
const char *gg_replay_mode_name(gg_replay_mode m);
/* The default socket path for this user (see README).  0, or -ENAMETOOLONG
 * when it does not fit in len (a long $XDG_RUNTIME_DIR). */
int gg_config_default_socket(char *buf, size_t len);

#endif
