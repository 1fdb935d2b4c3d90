/* SPDX-License-Identifier: MIT */
/* The standard process_* metrics from /proc (metrics.h).
 *
 * Names, types and units follow Prometheus' client libraries, so the usual
 * dashboards and rules (restarts from process_start_time_seconds, CPU from
 * rate(process_cpu_seconds_total)) work on gfxgraphd unchanged. */
#include "core/metrics.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

/* The fields of /proc/self/stat that follow the command name, split at
 * spaces (the name itself may hold spaces and parentheses, so the split
 * starts after its last ')').  fields[0] is field 3, the state. */
#define PROC_STAT_FIELDS 24

static int proc_stat_fields(unsigned long long *f)
{
    char buf[1024];
    FILE *fp = fopen("/proc/self/stat", "re");
    if (!fp)
        return -1;
    size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    char *p = strrchr(buf, ')');
    if (!p)
        return -1;
    p++;
    int i = 0;
    while (i < PROC_STAT_FIELDS) {
        while (*p == ' ')
            p++;
        if (!*p || *p == '\n')
            break;
        char *end;
        f[i++] = strtoull(p, &end, 10);
        if (end == p)   /* the state letter: not a number, skipped */
            while (*end && *end != ' ')
                end++;
        p = end;
    }
    return i == PROC_STAT_FIELDS ? 0 : -1;
}

/* btime from /proc/stat: the boot time in Unix seconds. */
static int proc_boot_time(unsigned long long *btime)
{
    FILE *fp = fopen("/proc/stat", "re");
    if (!fp)
        return -1;
    char line[256];
    int rc = -1;
    while (fgets(line, sizeof line, fp))
        if (sscanf(line, "btime %llu", btime) == 1) {
            rc = 0;
            break;
        }
    fclose(fp);
    return rc;
}

static int proc_open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0, own = dirfd(d);
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.' && atoi(e->d_name) != own)
            n++;
    closedir(d);
    return n;
}

static void proc_one(gg_metrics_buf *b, const char *name, const char *type, const char *help,
                     double v)
{
    gg_metrics_head(b, name, type, help);
    gg_metrics_sample(b, name, NULL, NULL, v);
}

void gg_metrics_process(gg_metrics_buf *b)
{
    long tick = sysconf(_SC_CLK_TCK);
    long page = sysconf(_SC_PAGESIZE);
    unsigned long long f[PROC_STAT_FIELDS], btime;
    if (tick > 0 && page > 0 && proc_stat_fields(f) == 0) {
        /* fields 14 utime, 15 stime, 22 starttime, 23 vsize, 24 rss */
        proc_one(b, "process_cpu_seconds_total", "counter",
                 "Total user and system CPU time spent in seconds.",
                 (double)(f[11] + f[12]) / (double)tick);
        if (proc_boot_time(&btime) == 0)
            proc_one(b, "process_start_time_seconds", "gauge",
                     "Start time of the process since unix epoch in seconds.",
                     (double)btime + (double)f[19] / (double)tick);
        proc_one(b, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.",
                 (double)f[20]);
        proc_one(b, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.",
                 (double)f[21] * (double)page);
    }
    int fds = proc_open_fds();
    if (fds >= 0)
        proc_one(b, "process_open_fds", "gauge", "Number of open file descriptors.", fds);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        proc_one(b, "process_max_fds", "gauge", "Maximum number of open file descriptors.",
                 rl.rlim_cur == RLIM_INFINITY ? -1 : (double)rl.rlim_cur);
    if (getrlimit(RLIMIT_AS, &rl) == 0)
        proc_one(b, "process_virtual_memory_max_bytes", "gauge",
                 "Maximum amount of virtual memory available in bytes.",
                 rl.rlim_cur == RLIM_INFINITY ? -1 : (double)rl.rlim_cur);
}
