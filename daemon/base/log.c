/* SPDX-License-Identifier: MIT */
/* Logging that never blocks its caller.  A record is formatted where it is
 * made and queued; one writer thread of its own takes records off the
 * queue and writes them (stderr or the journal), so a log pipe nobody
 * reads stalls only that thread.  When the queue is full a record is
 * dropped and counted; once the output drains, one line says how many
 * went.  Records about a client (a session field) are rate-limited, per
 * session and for all clients together, as journald does per service
 * (RateLimitIntervalSec=, RateLimitBurst=): past the burst they are
 * suppressed until the interval ends, then one line says how many were. */
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
#include <signal.h>
#include <time.h>

#include "proto.h"

static gg_log_level log_level = GG_LOG_INFO;
static gg_log_target log_target = GG_LOG_TARGET_STDERR;
static atomic_bool log_journal_failed;   /* the fallback notice was printed */

/* ---- the queue ---------------------------------------------------------- */

typedef struct {
    gg_log_level level;
    int line;
    const char *file;        /* __FILE__: static */
    gg_log_fields f;
    char msg[1024];
} log_rec;

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t log_more = PTHREAD_COND_INITIALIZER;    /* the writer waits */
static pthread_cond_t log_empty = PTHREAD_COND_INITIALIZER;   /* gg_log_flush waits */
static log_rec log_q[GG_LOG_QUEUE];
static unsigned log_qhead, log_qlen;
static bool log_writing;                 /* the writer holds a record it took */
static pthread_once_t log_once = PTHREAD_ONCE_INIT;
static bool log_thread_ok;
static _Atomic uint64_t log_dropped;     /* ever */
static uint64_t log_dropped_told;        /* of those, said in a line */
static _Atomic uint64_t log_suppressed;  /* ever, by the rate limits */

/* ---- rate limits -------------------------------------------------------- */

typedef struct {
    uint64_t key;            /* session id; 0 free */
    uint64_t start_ms;       /* the interval's start */
    unsigned count;          /* records in this interval */
    uint64_t suppressed;     /* in this interval, not yet said */
} log_bucket;

/* Sessions tracked at once; a new one takes the slot of the oldest
 * interval, so the table stays small whatever the clients do (the
 * all-clients bucket still bounds them together). */
#define LOG_SESSION_SLOTS 64
static log_bucket log_sessions[LOG_SESSION_SLOTS];
static log_bucket log_clients;           /* every session together */
static pthread_mutex_t log_rl_lock = PTHREAD_MUTEX_INITIALIZER;

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

static uint64_t log_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void log_enqueue(gg_log_level level, const char *file, int line, const gg_log_fields *f,
                        const char *msg);

/* One interval of bucket b at now: the records it suppressed in the last
 * one are said (into note), and the count starts again. */
static void log_bucket_roll(log_bucket *b, uint64_t now, const char *who, char *note,
                            size_t len)
{
    if (now - b->start_ms < GG_LOG_RATE_INTERVAL_MS)
        return;
    if (b->suppressed && note[0] == '\0')
        snprintf(note, len, "%s: suppressed %llu message(s) over the last interval (at most %u "
                 "every %u ms)", who, (unsigned long long)b->suppressed,
                 b == &log_clients ? GG_LOG_RATE_BURST_ALL : GG_LOG_RATE_BURST,
                 GG_LOG_RATE_INTERVAL_MS);
    b->start_ms = now;
    b->count = 0;
    b->suppressed = 0;
}

/* Whether a record about session `sid` may go out now; a note about what
 * the limit suppressed before is put in note1/note2 (empty: none). */
static bool log_rate_ok(uint64_t sid, char *note1, char *note2, size_t len)
{
    uint64_t now = log_now_ms();
    note1[0] = note2[0] = '\0';
    pthread_mutex_lock(&log_rl_lock);
    log_bucket *b = NULL, *oldest = NULL;
    for (int i = 0; i < LOG_SESSION_SLOTS && !b; i++) {
        log_bucket *x = &log_sessions[i];
        if (x->key == sid)
            b = x;
        else if (!oldest || (oldest->key && (!x->key || x->start_ms < oldest->start_ms)))
            oldest = x;
    }
    if (!b) {
        b = oldest;
        if (b->key && b->suppressed)
            snprintf(note1, len, "session %llu: suppressed %llu message(s)",
                     (unsigned long long)b->key, (unsigned long long)b->suppressed);
        *b = (log_bucket){.key = sid, .start_ms = now};
    }
    char who[48];
    snprintf(who, sizeof(who), "session %llu", (unsigned long long)sid);
    log_bucket_roll(b, now, who, note1, len);
    log_bucket_roll(&log_clients, now, "all clients", note2, len);
    bool ok = b->count < GG_LOG_RATE_BURST && log_clients.count < GG_LOG_RATE_BURST_ALL;
    if (ok) {
        b->count++;
        log_clients.count++;
    } else {
        if (b->count >= GG_LOG_RATE_BURST)
            b->suppressed++;
        else
            log_clients.suppressed++;
        atomic_fetch_add(&log_suppressed, 1);
    }
    pthread_mutex_unlock(&log_rl_lock);
    return ok;
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
    /* Debug records are asked for by whoever runs the daemon; the rest
     * about a client are what a client can make without limit. */
    if (f && f->session && level > GG_LOG_DEBUG) {
        char n1[160], n2[160];
        bool ok = log_rate_ok(f->session, n1, n2, sizeof(n1));
        if (n1[0])
            log_enqueue(GG_LOG_WARN, __FILE__, __LINE__, NULL, n1);
        if (n2[0])
            log_enqueue(GG_LOG_WARN, __FILE__, __LINE__, NULL, n2);
        if (!ok)
            return;
    }
    log_enqueue(level, file, line, f, msg);
}

static void log_out(const log_rec *r)
{
    const gg_log_fields *f = r->f.session || r->f.program || r->f.bucket ? &r->f : NULL;
    if (log_target == GG_LOG_TARGET_JOURNAL) {
        /* Native journal protocol: MESSAGE, PRIORITY, CODE_FILE, CODE_LINE,
         * SYSLOG_IDENTIFIER, and the GFXGRAPH_* fields that apply. */
        char fields[8][1100];
        struct iovec iov[8];
        int n = 0;
        snprintf(fields[n++], sizeof(fields[0]), "MESSAGE=%s", r->msg);
        snprintf(fields[n++], sizeof(fields[0]), "PRIORITY=%d", log_priority(r->level));
        snprintf(fields[n++], sizeof(fields[0]), "CODE_FILE=%s", r->file);
        snprintf(fields[n++], sizeof(fields[0]), "CODE_LINE=%d", r->line);
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
        if (!atomic_exchange(&log_journal_failed, true))
            fprintf(stderr, "gfxgraphd: cannot write to the journal (%s); logging to stderr\n",
                    strerror(-rc));
    }

    char ctx[96] = "";
    if (f) {
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
    fprintf(stderr, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ gfxgraphd %s:%s %s\n",
            tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
            ts.tv_nsec / 1000000, log_names[r->level], ctx, r->msg);
    fflush(stderr);
}

static void *log_thread_main(void *arg)
{
    (void)arg;
    log_rec r;
    pthread_mutex_lock(&log_lock);
    for (;;) {
        while (log_qlen == 0) {
            uint64_t d = atomic_load(&log_dropped);
            if (d != log_dropped_told) {
                /* drained after drops: say how many went */
                r = (log_rec){.level = GG_LOG_WARN, .file = __FILE__, .line = __LINE__};
                snprintf(r.msg, sizeof(r.msg), "log output fell behind: %llu line(s) dropped "
                         "(%llu in all since start)",
                         (unsigned long long)(d - log_dropped_told), (unsigned long long)d);
                log_dropped_told = d;
                log_writing = true;
                pthread_mutex_unlock(&log_lock);
                log_out(&r);
                pthread_mutex_lock(&log_lock);
                log_writing = false;
                continue;
            }
            pthread_cond_broadcast(&log_empty);
            pthread_cond_wait(&log_more, &log_lock);
        }
        r = log_q[log_qhead];
        log_qhead = (log_qhead + 1) % GG_LOG_QUEUE;
        log_qlen--;
        log_writing = true;
        pthread_mutex_unlock(&log_lock);
        log_out(&r);
        pthread_mutex_lock(&log_lock);
        log_writing = false;
    }
    return NULL;
}

static void log_flush_at_exit(void)
{
    gg_log_flush(GG_LOG_EXIT_FLUSH_MS);
}

static void log_start(void)
{
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&at, 256 * 1024);
    /* signals are for the loop's thread, never the writer */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    log_thread_ok = pthread_create(&t, &at, log_thread_main, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&at);
    if (log_thread_ok)
        atexit(log_flush_at_exit);
}

static void log_enqueue(gg_log_level level, const char *file, int line, const gg_log_fields *f,
                        const char *msg)
{
    pthread_once(&log_once, log_start);
    log_rec *r;
    pthread_mutex_lock(&log_lock);
    if (!log_thread_ok) {
        /* no thread to write for us: write here, as a last resort */
        log_rec tmp = {.level = level, .file = file, .line = line};
        if (f)
            tmp.f = *f;
        snprintf(tmp.msg, sizeof(tmp.msg), "%s", msg);
        log_out(&tmp);
        pthread_mutex_unlock(&log_lock);
        return;
    }
    if (log_qlen == GG_LOG_QUEUE) {
        atomic_fetch_add(&log_dropped, 1);
        pthread_mutex_unlock(&log_lock);
        return;
    }
    r = &log_q[(log_qhead + log_qlen) % GG_LOG_QUEUE];
    r->level = level;
    r->file = file;
    r->line = line;
    r->f = f ? *f : (gg_log_fields){0};
    snprintf(r->msg, sizeof(r->msg), "%s", msg);
    log_qlen++;
    pthread_cond_signal(&log_more);
    pthread_mutex_unlock(&log_lock);
}

bool gg_log_flush(unsigned timeout_ms)
{
    pthread_mutex_lock(&log_lock);
    if (!log_thread_ok) {
        pthread_mutex_unlock(&log_lock);
        return true;
    }
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
    if (dl.tv_nsec >= 1000000000) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000;
    }
    int rc = 0;
    while ((log_qlen || log_writing || atomic_load(&log_dropped) != log_dropped_told) &&
           rc != ETIMEDOUT)
        rc = pthread_cond_timedwait(&log_empty, &log_lock, &dl);
    bool done = !log_qlen && !log_writing;
    pthread_mutex_unlock(&log_lock);
    return done;
}

void gg_log_counts(uint64_t *dropped, uint64_t *suppressed)
{
    *dropped = atomic_load(&log_dropped);
    *suppressed = atomic_load(&log_suppressed);
}
