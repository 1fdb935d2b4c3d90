/* SPDX-License-Identifier: MIT */
/* gfxgraphctl metrics against a real cpu-backend daemon: replays on the
 * socket (GFXGRAPH_FASTPATH=0) and on the fast path, some errors, then the
 * Prometheus text is checked by hand (counters equal the replays done,
 * every histogram's _bucket values are cumulative and end at +Inf = _count,
 * label values escaped) and, when Debian's python3-prometheus-client is
 * installed, by its parser (else that part is skipped with a note). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_client_util.h"

#ifndef GG_CTL_PATH
#error "GG_CTL_PATH must name the gfxgraphctl binary"
#endif

#define SOCK_PLAIN 6     /* socket replays at batch 1 (bucket 1) */
#define SOCK_PAD 3       /* at batch 3 (bucket 4) */
#define SOCK_OVER 2      /* at batch 9 (above the largest bucket: eager) */
#define FP_REPLAYS 20    /* fast-path replays at batch 2 */
#define WEIRD "we\"ird\\na\nme"

/* The value of the sample whose line starts with prefix (name and labels
 * as printed), -1 when there is none. */
static double sample(const char *text, const char *prefix)
{
    size_t n = strlen(prefix);
    for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
        if (strncmp(l, prefix, n) == 0 && l[n] == ' ')
            return strtod(l + n + 1, NULL);
    return -1;
}

/* Every _bucket run of a histogram family: non-decreasing, ending with
 * le="+Inf" equal to the series' _count.  Returns the sum of the _counts. */
static double check_hist(const char *text, const char *name)
{
    char bucket[128], count[128];
    snprintf(bucket, sizeof bucket, "%s_bucket{", name);
    snprintf(count, sizeof count, "%s_count{", name);
    double total = 0, prev = -1;
    int series = 0;
    for (const char *l = text; *l;) {
        const char *end = strchr(l, '\n');
        size_t len = end ? (size_t)(end - l) : strlen(l);
        char line[1024];
        snprintf(line, sizeof line, "%.*s", (int)(len < sizeof line ? len : sizeof line - 1), l);
        const char *sp = strrchr(line, ' ');
        double v = sp ? strtod(sp + 1, NULL) : -1;
        if (strncmp(line, bucket, strlen(bucket)) == 0) {
            CHECKF(v >= prev, "%s: cumulative (%g after %g)", line, v, prev);
            prev = v;
            if (strstr(line, "le=\"+Inf\"")) {
                /* the _count line follows the _sum line after this one */
                const char *sum = end ? end + 1 : "";
                const char *cnt = strchr(sum, '\n');
                char cline[1024] = "";
                if (cnt) {
                    const char *ce = strchr(cnt + 1, '\n');
                    size_t cl = ce ? (size_t)(ce - cnt - 1) : strlen(cnt + 1);
                    snprintf(cline, sizeof cline, "%.*s", (int)(cl < sizeof cline ? cl : 1023),
                             cnt + 1);
                }
                const char *csp = strrchr(cline, ' ');
                CHECKF(strncmp(cline, count, strlen(count)) == 0 && csp &&
                           strtod(csp + 1, NULL) == v,
                       "+Inf %g equals the next _count: '%s'", v, cline);
                total += v;
                series++;
                prev = -1;
            }
        }
        l += len + (end ? 1 : 0);
    }
    CHECKF(series > 0, "%s has series", name);
    return total;
}

/* The program's _count summed over its buckets. */
static double hist_program(const char *text, const char *name, const char *program_escaped)
{
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s_count{program=\"%s\",bucket=\"", name, program_escaped);
    double total = 0;
    for (const char *l = strstr(text, prefix); l; l = strstr(l + 1, prefix)) {
        const char *sp = strchr(l, ' ');
        total += sp ? strtod(sp + 1, NULL) : 0;
    }
    return total;
}

static const char py_check[] =
    "import sys\n"
    "try:\n"
    "    from prometheus_client.parser import text_string_to_metric_families\n"
    "except ImportError:\n"
    "    sys.exit(77)\n"
    "text = open(sys.argv[1]).read()\n"
    "want_replays, want_fp_prog, want_sock_prog = map(int, sys.argv[2:5])\n"
    "fams = {f.name: f for f in text_string_to_metric_families(text)}\n"
    "def total(name, **labels):\n"
    "    return sum(s.value for s in fams[name].samples\n"
    "               if s.name.endswith('_total') or fams[name].type != 'counter'\n"
    "               if all(s.labels.get(k) == v for k, v in labels.items()))\n"
    "assert fams['gfxgraph_replays'].type == 'counter', fams['gfxgraph_replays'].type\n"
    "r = total('gfxgraph_replays')\n"
    "assert r == want_replays, (r, want_replays)\n"
    "assert total('gfxgraph_errors', code='ENOENT') >= 2\n"
    "for h in ('gfxgraph_replay_round_trip_seconds', 'gfxgraph_replay_device_seconds'):\n"
    "    f = fams[h]\n"
    "    assert f.type == 'histogram', f.type\n"
    "    series = {}\n"
    "    for s in f.samples:\n"
    "        key = (s.labels['program'], s.labels['bucket'])\n"
    "        series.setdefault(key, {'b': [], 'count': None})\n"
    "        if s.name.endswith('_bucket'):\n"
    "            series[key]['b'].append((float(s.labels['le']), s.value))\n"
    "        elif s.name.endswith('_count'):\n"
    "            series[key]['count'] = s.value\n"
    "    n = 0\n"
    "    for key, v in series.items():\n"
    "        b = v['b']\n"
    "        assert [x[0] for x in b] == sorted(x[0] for x in b), key\n"
    "        assert all(b[i][1] <= b[i + 1][1] for i in range(len(b) - 1)), (key, b)\n"
    "        assert b[-1][0] == float('inf') and b[-1][1] == v['count'], (key, b, v)\n"
    "        n += v['count']\n"
    "    assert n == want_replays, (h, n, want_replays)\n"
    "    fp = sum(v['count'] for k, v in series.items() if k[0] == 'we\"ird\\\\na\\nme')\n"
    "    assert fp == want_fp_prog, (h, fp, want_fp_prog, list(series))\n"
    "    sp = sum(v['count'] for k, v in series.items() if k[0] == 'metrics-sock')\n"
    "    assert sp == want_sock_prog, (h, sp, want_sock_prog)\n"
    "for g in ('gfxgraph_sessions', 'gfxgraph_graphs_cached', 'gfxgraph_cache_bytes',\n"
    "          'gfxgraph_vram_total_bytes', 'gfxgraph_vram_free_bytes', 'gfxgraph_captures',\n"
    "          'gfxgraph_instantiations', 'gfxgraph_fallbacks', 'gfxgraph_validations',\n"
    "          'gfxgraph_validation_failures', 'gfxgraph_evictions'):\n"
    "    assert g in fams, g\n"
    "print('parsed: %d families' % len(fams))\n";

static int replays(gg_client *c, uint64_t prog, int batch, int n)
{
    int ok = 0;
    for (int i = 0; i < n; i++) {
        gg_replay_result r;
        int rc = gg_client_replay(c, prog, batch, -1, &r);
        CHECKF(rc == 0, "replay at batch %d: %s", batch, gg_client_last_error(c));
        ok += rc == 0;
    }
    return ok;
}

int main(void)
{
    h_init("test_metrics", 300);
    h_daemon d;
    if (h_daemon_start(&d, NULL, NULL) != 0)
        return h_finish();
    int done = 0, sock_prog = 0, fp_prog = 0;

    h_section("socket replays (GFXGRAPH_FASTPATH=0) and errors");
    setenv("GFXGRAPH_FASTPATH", "0", 1);
    gg_client *a = gg_client_new();
    tbuf ax, ay;
    memset(&ax, 0, sizeof ax);
    memset(&ay, 0, sizeof ay);
    if (CHECK(gg_client_connect(a, d.sock, "metrics-sock") == 0) && tbuf_new(a, &ax, 64) &&
        tbuf_new(a, &ay, 64)) {
        uint64_t p = t_define_silu2x(a, "metrics-sock", ax.id, ay.id, 4);
        sock_prog += replays(a, p, 1, SOCK_PLAIN);
        sock_prog += replays(a, p, 3, SOCK_PAD);
        sock_prog += replays(a, p, 9, SOCK_OVER);
        done += sock_prog;
        /* two errors: a program that does not exist */
        for (int i = 0; i < 2; i++)
            CHECK(gg_client_replay(a, 987654, 1, -1, NULL) == -ENOENT);
    }
    unsetenv("GFXGRAPH_FASTPATH");

    h_section("fast-path replays");
    gg_client *b = gg_client_new();
    tbuf bx, by;
    memset(&bx, 0, sizeof bx);
    memset(&by, 0, sizeof by);
    uint64_t fp_descs = 0;
    if (CHECK(gg_client_connect(b, d.sock, "metrics-fp") == 0) && tbuf_new(b, &bx, 64) &&
        tbuf_new(b, &by, 64)) {
        uint64_t p = t_define_silu2x(b, WEIRD, bx.id, by.id, 4);
        fp_prog += replays(b, p, 2, FP_REPLAYS);
        done += fp_prog;
        CHECK(gg_client_replay(b, 987655, 1, -1, NULL) == -ENOENT);
        fp_descs = t_stat(b, "fastpath_replays");
        CHECKF(fp_descs >= FP_REPLAYS, "the fast path took the replays (%llu descriptors)",
               (unsigned long long)fp_descs);
    }

    h_section("gfxgraphctl metrics");
    char *out = NULL, *err = NULL;
    const char *argv[] = {GG_CTL_PATH, "--socket", d.sock, "metrics", NULL};
    int code = h_run(argv, NULL, NULL, &out, &err, 60000);
    CHECKF(code == 0, "gfxgraphctl metrics exits 0 (%d): %s", code, err ? err : "");
    const char *text = out ? out : "";
    CHECK_CONTAINS(text, "# TYPE gfxgraph_replays_total counter\n");
    CHECK_CONTAINS(text, "# TYPE gfxgraph_replay_round_trip_seconds histogram\n");
    CHECK_CONTAINS(text, "# TYPE gfxgraph_sessions gauge\n");
    double g = sample(text, "gfxgraph_replays_total{path=\"graph\"}");
    double e = sample(text, "gfxgraph_replays_total{path=\"eager\"}");
    double f = sample(text, "gfxgraph_replays_total{path=\"fastpath\"}");
    CHECKF(g >= 0 && e >= 0 && f >= 0 && g + e + f == done,
           "replays by path %g + %g + %g = the %d done", g, e, f, done);
    CHECKF(e == SOCK_OVER, "eager replays %g = the %d oversize ones", e, SOCK_OVER);
    CHECKF(f > 0, "fast-path hits counted (%g)", f);
    CHECKF(sample(text, "gfxgraph_errors_total{code=\"ENOENT\"}") >= 3,
           "ENOENT errors counted (%g)", sample(text, "gfxgraph_errors_total{code=\"ENOENT\"}"));
    CHECKF(sample(text, "gfxgraph_fastpath_descriptors_total") >= (double)fp_descs,
           "fast-path descriptors %g", sample(text, "gfxgraph_fastpath_descriptors_total"));
    CHECK(sample(text, "gfxgraph_captures_total") >= 3);
    CHECK(sample(text, "gfxgraph_sessions") == 3);   /* a, b and gfxgraphctl */
    CHECK(sample(text, "gfxgraph_vram_total_bytes") > 0);
    CHECK(sample(text, "gfxgraph_graphs_cached") >= 3);
    CHECK_CONTAINS(text, "program=\"we\\\"ird\\\\na\\nme\"");
    for (int i = 0; i < 2; i++) {
        const char *h = i ? "gfxgraph_replay_device_seconds" : "gfxgraph_replay_round_trip_seconds";
        double n = check_hist(text, h);
        CHECKF(n == done, "%s: the _counts add up to the %d replays (%g)", h, done, n);
        CHECKF(hist_program(text, h, "metrics-sock") == sock_prog, "%s: metrics-sock %g", h,
               hist_program(text, h, "metrics-sock"));
        CHECKF(hist_program(text, h, "we\\\"ird\\\\na\\nme") == fp_prog, "%s: the fast one %g",
               h, hist_program(text, h, "we\\\"ird\\\\na\\nme"));
    }
    CHECK_CONTAINS(text, "gfxgraph_replay_device_seconds_bucket{program=\"metrics-sock\","
                         "bucket=\"oversize\",le=\"+Inf\"} 2\n");

    h_section("the real parser (python3-prometheus-client)");
    char path[256];
    snprintf(path, sizeof path, "%s/metrics.prom", d.dir);
    const char *oargv[] = {GG_CTL_PATH, "--socket", d.sock, "metrics", "--output", path, NULL};
    char *o2 = NULL, *e2 = NULL;
    CHECKF(h_run(oargv, NULL, NULL, &o2, &e2, 60000) == 0, "--output: %s", e2 ? e2 : "");
    free(o2);
    free(e2);
    char nd[16], nf[16], ns[16];
    snprintf(nd, sizeof nd, "%d", done);
    snprintf(nf, sizeof nf, "%d", fp_prog);
    snprintf(ns, sizeof ns, "%d", sock_prog);
    /* the python3 on PATH, then Debian's (a pyenv or venv python on PATH
     * does not see python3-prometheus-client) */
    const char *pys[] = {"python3", "/usr/bin/python3"};
    char *po = NULL, *pe = NULL;
    int pc = 77;
    for (int i = 0; i < 2 && pc == 77; i++) {
        free(po);
        free(pe);
        po = pe = NULL;
        const char *pargv[] = {pys[i], "-c", py_check, path, nd, nf, ns, NULL};
        pc = h_run(pargv, NULL, NULL, &po, &pe, 60000);
        if (pc < 0 || pc == 127)
            pc = 77;    /* no such interpreter */
    }
    if (pc == 77)
        h_note("SKIP the parse check: python3-prometheus-client is not installed");
    else
        CHECKF(pc == 0, "the parser accepts it and its counts agree (%d): %s%s", pc,
               po ? po : "", pe ? pe : "");
    free(po);
    free(pe);
    free(out);
    free(err);

    tbuf_free(&ax);
    tbuf_free(&ay);
    tbuf_free(&bx);
    tbuf_free(&by);
    gg_client_close(a);
    gg_client_close(b);
    h_daemon_stop(&d);
    return h_finish();
}
