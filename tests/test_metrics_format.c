/* SPDX-License-Identifier: MIT */
/* The Prometheus text the daemon renders (core/metrics.c, metrics_proc.c),
 * in-process: HELP and TYPE before each family's samples and every sample
 * of a declared family, label values escaped, each histogram's _bucket run
 * cumulative up to le="+Inf" with _sum and _count, the buckets from 1 us to
 * 10 s, every error code's series at zero before any error, the process_*
 * metrics of this process, and the worst-case size the protocol promises.
 * With python3-prometheus-client installed the same text also goes through
 * its parser (skipped with a note otherwise). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/metrics.h"
#include "harness.h"

/* The value of the line that starts with prefix then a space; NAN if none. */
static double value_of(const char *text, const char *prefix)
{
    size_t n = strlen(prefix);
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (strncmp(l, prefix, n) == 0 && l[n] == ' ')
            return strtod(l + n + 1, NULL);
    return NAN;
}

static int count_lines(const char *text, const char *prefix)
{
    int k = 0;
    size_t n = strlen(prefix);
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        k += strncmp(l, prefix, n) == 0;
    return k;
}

/* Every line is "# HELP name ...", "# TYPE name type" (right after its
 * HELP, once per name) or a sample of the family last declared (its name,
 * or name_bucket/_sum/_count for a histogram) with a value; no empty line. */
static bool check_structure(const char *text, const char *what)
{
    char family[128] = "", type[32] = "", help_of[128] = "";
    char seen[256][128];
    int nseen = 0, bad = 0, samples = 0;
    for (const char *l = text; *l;) {
        const char *e = strchr(l, '\n');
        if (!e) {
            CHECKF(0, "%s: the text ends with a newline", what);
            return false;
        }
        char line[1024];
        snprintf(line, sizeof line, "%.*s", (int)(e - l < 1023 ? e - l : 1023), l);
        l = e + 1;
        char name[128], t[32];
        if (sscanf(line, "# HELP %127s", name) == 1) {
            snprintf(help_of, sizeof help_of, "%s", name);
            continue;
        }
        if (sscanf(line, "# TYPE %127s %31s", name, t) == 2) {
            bad += !CHECKF(strcmp(help_of, name) == 0, "%s: TYPE %s follows its HELP", what, name);
            for (int i = 0; i < nseen; i++)
                bad += !CHECKF(strcmp(seen[i], name) != 0, "%s: %s declared once", what, name);
            if (nseen < 256)
                snprintf(seen[nseen++], sizeof seen[0], "%s", name);
            snprintf(family, sizeof family, "%s", name);
            snprintf(type, sizeof type, "%s", t);
            continue;
        }
        samples++;
        size_t fl = strlen(family);
        const char *rest = line + fl;
        bool ok = fl && strncmp(line, family, fl) == 0;
        if (ok && strcmp(type, "histogram") == 0)
            ok = strncmp(rest, "_bucket{", 8) == 0 || strncmp(rest, "_sum", 4) == 0 ||
                 strncmp(rest, "_count", 6) == 0;
        else if (ok)
            ok = *rest == ' ' || *rest == '{';
        const char *sp = strrchr(line, ' ');
        char *end = NULL;
        if (ok && sp)
            strtod(sp + 1, &end);
        ok = ok && sp && end && *end == '\0' && end != sp + 1;
        if (!ok)
            bad += !CHECKF(0, "%s: '%s' is a sample of the declared family %s", what, line,
                           family);
    }
    CHECKF(samples > 0, "%s: has samples (%d)", what, samples);
    return bad == 0;
}

static char *render(const gg_metrics *m)
{
    gg_metrics_buf b = {0};
    gg_metrics_render(m, &b);
    CHECK(!b.oom);
    return b.data ? b.data : strdup("");
}

static void test_helpers(void)
{
    h_section("head, sample and escaping");
    gg_metrics_buf b = {0};
    gg_metrics_head(&b, "x_total", "counter", "Things.");
    gg_metrics_sample(&b, "x_total", "name", "a\\b\"c\nd", 3);
    gg_metrics_sample(&b, "x_total", NULL, NULL, 0.25);
    gg_metrics_sample(&b, "x_total", NULL, NULL, 1795903387.66);
    gg_metrics_sample(&b, "x_total", NULL, NULL, INFINITY);
    CHECK_STR(b.data, "# HELP x_total Things.\n# TYPE x_total counter\n"
                      "x_total{name=\"a\\\\b\\\"c\\nd\"} 3\n"
                      "x_total 0.25\n"
                      "x_total 1795903387.66\n"
                      "x_total +Inf\n");
    free(b.data);
}

static void test_empty(void)
{
    h_section("a daemon that has done nothing");
    gg_metrics *m = calloc(1, sizeof *m);
    char *t = render(m);
    check_structure(t, "empty");
    CHECK_EQ(value_of(t, "gfxgraph_replays_total{path=\"graph\"}"), 0);
    CHECK_EQ(value_of(t, "gfxgraph_replays_total{path=\"fastpath\"}"), 0);
    /* every code the wire names (the protocol's own table), at zero, and no
     * other series */
    int ncodes = 0;
    for (const char *code; (code = proto_errno_code_at((size_t)ncodes)); ncodes++) {
        char p[96];
        snprintf(p, sizeof p, "gfxgraph_errors_total{code=\"%s\"}", code);
        CHECKF(value_of(t, p) == 0, "%s present at 0 (%g)", p, value_of(t, p));
    }
    CHECKF(ncodes > 0, "the protocol names %d error codes", ncodes);
    CHECK_EQ(count_lines(t, "gfxgraph_errors_total{"), ncodes);
    CHECK_EQ(count_lines(t, "gfxgraph_replay_round_trip_seconds_bucket"), 0);
    free(t);
    free(m);
}

static void test_histogram(void)
{
    h_section("histograms: buckets up to seconds, cumulative, +Inf = _count");
    gg_metrics *m = calloc(1, sizeof *m);
    /* round trips (us): 0.5, 3, 1.5 s, 20 s; device times 1 us each */
    const double rtt[] = {0.5, 3, 1.5e6, 2e7};
    for (int i = 0; i < 4; i++)
        gg_metrics_replay(m, i ? GG_PATH_GRAPH : GG_PATH_FASTPATH, "p\"1", 2, rtt[i], 1);
    gg_metrics_replay(m, GG_PATH_EAGER, "p\"1", 0, 7, 7);
    gg_metrics_error(m, -ENOENT);
    gg_metrics_error(m, -ENOENT);
    gg_metrics_error(m, -ENOTBLK);  /* no name on the wire: EIO */
    char *t = render(m);
    check_structure(t, "histogram");
    CHECK_EQ(value_of(t, "gfxgraph_replays_total{path=\"graph\"}"), 3);
    CHECK_EQ(value_of(t, "gfxgraph_replays_total{path=\"fastpath\"}"), 1);
    CHECK_EQ(value_of(t, "gfxgraph_replays_total{path=\"eager\"}"), 1);
    CHECK_EQ(value_of(t, "gfxgraph_errors_total{code=\"ENOENT\"}"), 2);
    CHECK_EQ(value_of(t, "gfxgraph_errors_total{code=\"EIO\"}"), 1);
    CHECK_EQ(value_of(t, "gfxgraph_errors_total{code=\"EINVAL\"}"), 0);
#define RTT "gfxgraph_replay_round_trip_seconds"
#define LBL "{program=\"p\\\"1\",bucket=\"2\""
    CHECK_EQ(value_of(t, RTT "_bucket" LBL ",le=\"1e-06\"}"), 1);
    CHECK_EQ(value_of(t, RTT "_bucket" LBL ",le=\"2e-06\"}"), 1);
    CHECK_EQ(value_of(t, RTT "_bucket" LBL ",le=\"5e-06\"}"), 2);
    CHECK_EQ(value_of(t, RTT "_bucket" LBL ",le=\"1\"}"), 2);
    CHECK_EQ(value_of(t, RTT "_bucket" LBL ",le=\"2\"}"), 3);
    CHECK_EQ(value_of(t, RTT "_bucket" LBL ",le=\"10\"}"), 3);
    CHECK_EQ(value_of(t, RTT "_bucket" LBL ",le=\"+Inf\"}"), 4);
    CHECK_EQ(value_of(t, RTT "_count" LBL "}"), 4);
    double sum = value_of(t, RTT "_sum" LBL "}");
    CHECKF(fabs(sum - (0.5 + 3 + 1.5e6 + 2e7) / 1e6) < 1e-6, "_sum %.9g s", sum);
    /* 22 finite bounds then +Inf, in order, for each series */
    CHECK_EQ(count_lines(t, RTT "_bucket" LBL), GG_METRICS_NBOUNDS + 1);
    CHECK_EQ(count_lines(t, RTT "_bucket{program=\"p\\\"1\",bucket=\"oversize\""),
             GG_METRICS_NBOUNDS + 1);
    CHECK_EQ(value_of(t, "gfxgraph_replay_device_seconds_bucket" LBL ",le=\"1e-06\"}"), 4);
    CHECKF(gg_metrics_bounds_us[GG_METRICS_NBOUNDS - 1] == 1e7, "the largest bound is 10 s");
    for (int i = 1; i < GG_METRICS_NBOUNDS; i++)
        CHECKF(gg_metrics_bounds_us[i] > gg_metrics_bounds_us[i - 1], "bounds increase at %d", i);
    /* the le values print in increasing order */
    const char *p = strstr(t, RTT "_bucket" LBL);
    double prev = -1;
    for (int i = 0; p && i <= GG_METRICS_NBOUNDS; i++) {
        const char *le = strstr(p, "le=\"");
        double v = strncmp(le + 4, "+Inf", 4) == 0 ? INFINITY : strtod(le + 4, NULL);
        CHECKF(v > prev, "le %g after %g", v, prev);
        prev = v;
        p = strchr(p, '\n') + 1;
    }
#undef RTT
#undef LBL
    FILE *f = fopen("metrics_format.prom", "w");
    if (f) {
        fputs(t, f);
        fclose(f);
    }
    free(t);
    free(m);
}

static void test_worst_size(void)
{
    h_section("the largest text: every series with the longest escaped name");
    gg_metrics *m = calloc(1, sizeof *m);
    char name[64];
    for (int i = 0; i < GG_METRICS_MAX_SERIES + GG_MAX_BUCKETS + 4; i++) {
        memset(name, '\\', sizeof name - 1);
        snprintf(name + sizeof name - 5, 5, "%04d", i);
        for (int bk = 0; bk <= GG_MAX_BUCKETS; bk++)
            gg_metrics_replay(m, GG_PATH_GRAPH, name, bk, 1e300, 1e300);
    }
    CHECK_EQ(m->nseries, GG_METRICS_MAX_SERIES);
    for (int e = 1; e < GG_METRICS_MAX_ERRNO; e++)
        m->errors[e] = UINT64_MAX / 2;
    char *t = render(m);
    size_t len = strlen(t);
    h_note("worst-case text: %zu bytes", len);
    CHECKF(len < 1536 * 1024, "under 1.5 MB (%zu bytes)", len);
    check_structure(t, "worst case");
    free(t);
    free(m);
}

static void test_process(void)
{
    h_section("process_* of this process");
    time_t t0 = time(NULL);
    gg_metrics_buf b = {0};
    gg_metrics_process(&b);
    CHECK(!b.oom && b.data);
    if (!b.data)
        return;
    check_structure(b.data, "process");
    double start = value_of(b.data, "process_start_time_seconds");
    /* this test started moments ago; /proc gives the boot time in whole
     * seconds, hence the margin */
    CHECKF(start <= (double)t0 + 1 && start > (double)t0 - 120,
           "process_start_time_seconds %.2f near now %lld", start, (long long)t0);
    CHECKF(value_of(b.data, "process_resident_memory_bytes") > 0, "resident memory");
    CHECKF(value_of(b.data, "process_virtual_memory_bytes") >=
               value_of(b.data, "process_resident_memory_bytes"), "virtual >= resident");
    CHECKF(value_of(b.data, "process_cpu_seconds_total") >= 0, "cpu seconds");
    CHECKF(value_of(b.data, "process_max_fds") != 0, "max fds");
    double fds = value_of(b.data, "process_open_fds");
    int extra[3];
    for (int i = 0; i < 3; i++)
        extra[i] = open("/dev/null", O_RDONLY);
    gg_metrics_buf b2 = {0};
    gg_metrics_process(&b2);
    CHECKF(value_of(b2.data, "process_open_fds") == fds + 3, "three more open fds: %g then %g",
           fds, value_of(b2.data, "process_open_fds"));
    for (int i = 0; i < 3; i++)
        close(extra[i]);
    CHECK_CONTAINS(b.data, "# TYPE process_cpu_seconds_total counter\n");
    CHECK_CONTAINS(b.data, "# TYPE process_start_time_seconds gauge\n");
    free(b.data);
    free(b2.data);
}

static const char py_check[] =
    "import sys\n"
    "try:\n"
    "    from prometheus_client.parser import text_string_to_metric_families\n"
    "except ImportError:\n"
    "    sys.exit(77)\n"
    "fams = {f.name: f for f in text_string_to_metric_families(open(sys.argv[1]).read())}\n"
    "h = fams['gfxgraph_replay_round_trip_seconds']\n"
    "assert h.type == 'histogram'\n"
    "les = [s.labels['le'] for s in h.samples if s.name.endswith('_bucket')\n"
    "       and s.labels['bucket'] == '2']\n"
    "assert len(les) == 23 and les[-1] == '+Inf' and float(les[-2]) == 10, les\n"
    "assert {s.labels['program'] for s in h.samples} == {'p\"1'}\n"
    "e = fams['gfxgraph_errors']\n"
    "assert e.type == 'counter' and len(e.samples) == int(sys.argv[2]), len(e.samples)\n"
    "print('parsed: %d families' % len(fams))\n";

static void test_parser(void)
{
    h_section("prometheus_client's parser");
    FILE *f = fopen("metrics_format.py", "w");
    if (!CHECK(f))
        return;
    fputs(py_check, f);
    fclose(f);
    size_t ncodes = 0;
    while (proto_errno_code_at(ncodes))
        ncodes++;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "python3 metrics_format.py metrics_format.prom %zu", ncodes);
    int rc = system(cmd);
    if (rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 77)
        h_note("SKIP part: python3-prometheus-client is not installed");
    else
        CHECKF(rc != -1 && WIFEXITED(rc) && WEXITSTATUS(rc) == 0, "the parser accepts the text");
    unlink("metrics_format.py");
    unlink("metrics_format.prom");
}

int main(void)
{
    h_init("test_metrics_format", 120);
    test_helpers();
    test_empty();
    test_histogram();
    test_worst_size();
    test_process();
    test_parser();
    return h_finish();
}
