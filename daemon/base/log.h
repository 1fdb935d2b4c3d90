/* SPDX-License-Identifier: MIT */
/* Levelled logging to stderr or the systemd journal.  Records that concern a
 * session, program or bucket carry them as structured journal fields
 * (GFXGRAPH_SESSION=, GFXGRAPH_PROGRAM=, GFXGRAPH_BUCKET=) and as a prefix on
 * stderr. */
#ifndef GG_LOG_H
#define GG_LOG_H

#include <stdbool.h>
#include <stdint.h>

/* Records queued for the writer thread; past this they are dropped and
 * counted (gg_log_counts), never waited for. */
#define GG_LOG_QUEUE 256
/* Records about a client (a session field, above debug): at most
 * GG_LOG_RATE_BURST per session and GG_LOG_RATE_BURST_ALL for every session
 * together in each interval, the rest suppressed and counted. */
#define GG_LOG_RATE_INTERVAL_MS 10000
#define GG_LOG_RATE_BURST 20
#define GG_LOG_RATE_BURST_ALL 200
/* How long the exit waits for queued records to be written (a reader
 * that never reads cannot hold the exit longer). */
#define GG_LOG_EXIT_FLUSH_MS 2000

typedef enum { GG_LOG_DEBUG = 0, GG_LOG_INFO, GG_LOG_WARN, GG_LOG_ERROR } gg_log_level;
typedef enum { GG_LOG_TARGET_AUTO = 0, GG_LOG_TARGET_STDERR, GG_LOG_TARGET_JOURNAL } gg_log_target;

typedef struct {
    uint64_t session;   /* 0: none */
    uint64_t program;   /* 0: none */
    int bucket;         /* 0: none */
} gg_log_fields;

/* target AUTO picks the journal when stderr is the journal's stream
 * (JOURNAL_STREAM names stderr's device and inode). */
void gg_log_init(gg_log_level level, gg_log_target target);
gg_log_level gg_log_get_level(void);
gg_log_target gg_log_get_target(void);
int gg_log_level_parse(const char *s, gg_log_level *out);
int gg_log_target_parse(const char *s, gg_log_target *out);
const char *gg_log_level_name(gg_log_level l);

/* Wait up to timeout_ms for every queued record to be written; false:
 * some are still queued (the output is stuck). */
bool gg_log_flush(unsigned timeout_ms);
/* Records dropped for a full queue and suppressed by the rate limits,
 * since start. */
void gg_log_counts(uint64_t *dropped, uint64_t *suppressed);

/* Format and queue one record; never blocks on the output. */
void gg_log_write(gg_log_level level, const char *file, int line, const gg_log_fields *f,
                  const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#define GG_LOG(lvl, f, ...)                                                                 \
    do {                                                                                    \
        if ((lvl) >= gg_log_get_level())                                                    \
            gg_log_write((lvl), __FILE__, __LINE__, (f), __VA_ARGS__);                      \
    } while (0)
#define gg_debug(...) GG_LOG(GG_LOG_DEBUG, NULL, __VA_ARGS__)
#define gg_info(...) GG_LOG(GG_LOG_INFO, NULL, __VA_ARGS__)
#define gg_warn(...) GG_LOG(GG_LOG_WARN, NULL, __VA_ARGS__)
#define gg_error(...) GG_LOG(GG_LOG_ERROR, NULL, __VA_ARGS__)

#endif
