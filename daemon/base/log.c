/* Logging.  One lock around each record so that lines from the loop and the
 * executor threads never interleave. */
#define SD_JOURNAL_SUPPRESS_LOCATION
#include "base/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <syslog.h>
#include <systemd/sd-journal.h>
#include <time.h>

#include "proto.h"

static gg_log_level log_level = GG_LOG_INFO;
static gg_log_target log_target = GG_LOG_TARGET_STDERR;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_bool log_journal_failed;   /* the fallback notice was printed */

static const char *const log_names[] = {"debug", "info", "warn", "error"};

const char *gg_log_level_name(gg_log_level l)
{
    return (unsigned)l < 4 ? log_names[l] : "info";
}

int gg_log_level_parse(const char *s, gg_log_level *out)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(s, log_names[i]) == 0) {
            *out = (gg_log_level)i;
            return 0;
        }
    if (strcmp(s, "warning") == 0) {
        *out = GG_LOG_WARN;
        return 0;
    }
    return -EINVAL;
}

int gg_log_target_parse(const char *s, gg_log_target *out)
{
    if (strcmp(s, "auto") == 0)
        *out = GG_LOG_TARGET_AUTO;
    else if (strcmp(s, "stderr") == 0 || strcmp(s, "console") == 0)
        *out = GG_LOG_TARGET_STDERR;
    else if (strcmp(s, "journal") == 0)
        *out = GG_LOG_TARGET_JOURNAL;
    else
        return -EINVAL;
    return 0;
}

/* systemd sets JOURNAL_STREAM=<dev>:<ino> for a service whose stderr is the
 * journal; compare with stderr's own so a redirected stderr is honoured. */
static int log_stderr_is_journal(void)
{
    const char *js = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    struct stat st;
    if (!js || sscanf(js, "%llu:%llu", &dev, &ino) != 2 || fstat(2, &st) < 0)
        return 0;
    return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

/* sd_journal_sendv() reports success when there is no journal at all (it
 * drops the record silently), so look for journald's socket first. */
static int log_journal_present(void)
{
    struct stat st;
    return stat("/run/systemd/journal/socket", &st) == 0 && S_ISSOCK(st.st_mode);
}

void gg_log_init(gg_log_level level, gg_log_target target)
{
    log_level = level;
    if (target == GG_LOG_TARGET_AUTO)
        target = log_stderr_is_journal() ? GG_LOG_TARGET_JOURNAL : GG_LOG_TARGET_STDERR;
    if (target == GG_LOG_TARGET_JOURNAL && !log_journal_present()) {
        fprintf(stderr, "gfxgraphd: cannot write to the journal (no journald socket); "
                        "logging to stderr\n");
        atomic_store(&log_journal_failed, true);
        target = GG_LOG_TARGET_STDERR;
    }
    log_target = target;
}

gg_log_level gg_log_get_level(void)
{
    return log_level;
}

gg_log_target gg_log_get_target(void)
{
    return log_target;
}

static int log_priority(gg_log_level l)
{
    switch (l) {
    case GG_LOG_DEBUG: return LOG_DEBUG;
    case GG_LOG_INFO: return LOG_INFO;
    case GG_LOG_WARN: return LOG_WARNING;
    default: return LOG_ERR;
    }
}

void gg_log_write(gg_log_level level, const char *file, int line, const gg_log_fields *f,
                  const char *fmt, ...)
{
    char raw[1024], msg[1024];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(raw, sizeof(raw), fmt, ap);
    va_end(ap);
    /* Records quote client text and may have been cut mid-character: only
     * valid UTF-8 goes out, and no control character can start a line. */
    proto_utf8_clean(msg, sizeof(msg), raw,
                     len < 0 ? 0 : (size_t)len < sizeof(raw) ? (size_t)len : sizeof(raw) - 1);

    if (log_target == GG_LOG_TARGET_JOURNAL) {
        /* Native journal protocol: MESSAGE, PRIORITY, CODE_FILE, CODE_LINE,
         * SYSLOG_IDENTIFIER, and the GFXGRAPH_* fields that apply. */
        char fields[8][1100];
        struct iovec iov[8];
        int n = 0;
        snprintf(fields[n++], sizeof(fields[0]), "MESSAGE=%s", msg);
        snprintf(fields[n++], sizeof(fields[0]), "PRIORITY=%d", log_priority(level));
        snprintf(fields[n++], sizeof(fields[0]), "CODE_FILE=%s", file);
        snprintf(fields[n++], sizeof(fields[0]), "CODE_LINE=%d", line);
        snprintf(fields[n++], sizeof(fields[0]), "SYSLOG_IDENTIFIER=gfxgraphd");
        if (f && f->session)
            snprintf(fields[n++], sizeof(fields[0]), "GFXGRAPH_SESSION=%llu",
                     (unsigned long long)f->session);
        if (f && f->program)
            snprintf(fields[n++], sizeof(fields[0]), "GFXGRAPH_PROGRAM=%llu",
                     (unsigned long long)f->program);
        if (f && f->bucket)
            snprintf(fields[n++], sizeof(fields[0]), "GFXGRAPH_BUCKET=%d", f->bucket);
        for (int i = 0; i < n; i++) {
            iov[i].iov_base = fields[i];
            iov[i].iov_len = strlen(fields[i]);
        }
        int rc = sd_journal_sendv(iov, n);
        if (rc >= 0)
            return;
        /* No journal to talk to (journald not running, or not reachable
         * from here): the record goes to stderr instead of being lost. */
        if (!atomic_exchange(&log_journal_failed, true)) {
            pthread_mutex_lock(&log_lock);
            fprintf(stderr, "gfxgraphd: cannot write to the journal (%s); logging to stderr\n",
                    strerror(-rc));
            pthread_mutex_unlock(&log_lock);
        }
    }

    char ctx[96] = "";
    if (f && (f->session || f->program || f->bucket)) {
        int n = 0;
        if (f->session)
            n += snprintf(ctx + n, sizeof(ctx) - n, " session=%llu", (unsigned long long)f->session);
        if (f->program)
            n += snprintf(ctx + n, sizeof(ctx) - n, " program=%llu", (unsigned long long)f->program);
        if (f->bucket)
            snprintf(ctx + n, sizeof(ctx) - n, " bucket=%d", f->bucket);
    }
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    pthread_mutex_lock(&log_lock);
    fprintf(stderr, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ gfxgraphd %s:%s %s\n",
            tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
            ts.tv_nsec / 1000000, log_names[level], ctx, msg);
    pthread_mutex_unlock(&log_lock);
}
