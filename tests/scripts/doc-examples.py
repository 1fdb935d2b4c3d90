#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The README's C example and docs/python.md's numpy example, as the docs
show them, against a daemon of the same uid and one of another uid.

    doc-examples.py --source SRC --daemon GFXGRAPHD --ctl GFXGRAPHCTL
                    --lib LIBGFXGRAPH_CLIENT --cc CC [--cflags FLAGS]
                    [--python PY] [--preload LIB]

The fenced blocks are taken from the docs at run time (the README's first
```c block under "Using the client library", docs/python.md's first
```python block under "API"), so what is tested is what a reader copies.
The C one is compiled against this build's libgfxgraph-client; the Python
one runs with PY (a python3 with numpy; skipped, said so, without one),
PYTHONPATH=SRC/python and GFXGRAPH_LIB, through doc-examples-run.py.

Each run is checked for: exit status 0; the output the docs promise (the
README's "It prints ..." lines; the replay dict in the Python block's
comment, and y against an rmsnorm computed here); the daemon's own account
of the run (replay and capture counters of a daemon nothing else uses, the
session's cache rows, and in its debug log the session's buffer registered
by name on the same uid, by descriptor after an EACCES on another uid); and
no shm object of the example's pid left in /dev/shm.  A third daemon whose
quota refuses the examples' buffers checks that a failing run exits 1 with
the daemon's code and still leaves nothing in /dev/shm.

The other uid is the user gfxgraph (the service's) when it exists, else
nobody; it needs root.  Without it the same-uid part runs and the test
exits 77 (skipped) once that part passed.
"""
import argparse
import ast
import json
import os
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

FAILS = 0
PASSES = 0
WAIT_S = 120          # a deadline for a state to show, not an expected time


def check(ok, what):
    global FAILS, PASSES
    if ok:
        PASSES += 1
        print("   ok: " + what)
    else:
        FAILS += 1
        print("FAIL: " + what)
    sys.stdout.flush()
    return ok


def note(what):
    print("     # " + what)
    sys.stdout.flush()


# ---- the docs -------------------------------------------------------------

def section(md, heading):
    """The text of the markdown section whose heading line is heading, up to
    the next heading of the same or a higher level."""
    lines = md.split("\n")
    level = len(heading) - len(heading.lstrip("#"))
    for i, ln in enumerate(lines):
        if ln.strip() == heading:
            out = []
            for ln2 in lines[i + 1:]:
                m = re.match(r"(#+) ", ln2)
                if m and len(m.group(1)) <= level and not in_fence(out):
                    break
                out.append(ln2)
            return "\n".join(out)
    raise SystemExit("FAIL: no section %r in the document" % heading)


def in_fence(lines):
    return sum(1 for ln in lines if ln.startswith("```")) % 2 == 1


def fenced(text, lang):
    """(the first ```lang block's code, the text after it)."""
    m = re.search(r"^```%s\n(.*?)^```$" % re.escape(lang), text, re.S | re.M)
    if not m:
        raise SystemExit("FAIL: no ```%s block in the section" % lang)
    return m.group(1), text[m.end():]


def readme_example(src):
    with open(os.path.join(src, "README.md"), encoding="utf-8") as f:
        sec = section(f.read(), "## Using the client library")
    code, after = fenced(sec, "c")
    # "It prints `batch 1: ...`, ..., `batch 5: ...`": the lines shown
    para = after.strip().split("\n\n")[0]
    if not para.startswith("It prints"):
        raise SystemExit("FAIL: the README's example is not followed by 'It prints ...'")
    shown = [" ".join(s.split()) for s in re.findall(r"`([^`]*)`", para)
             if s.startswith("batch ")]
    return code, shown


def python_example(src):
    with open(os.path.join(src, "docs", "python.md"), encoding="utf-8") as f:
        sec = section(f.read(), "## API")
    code, _ = fenced(sec, "python")
    # the replay's answer as the block's comment shows it
    m = re.search(r"^\s*r = prog\.replay\(.*#\s*(\{.*\})\s*$", code, re.M)
    if not m:
        raise SystemExit("FAIL: the python.md example has no 'r = prog.replay(...)  # {...}'")
    shown = ast.literal_eval(m.group(1).replace(", ...}", "}"))
    return code, shown


# ---- daemons --------------------------------------------------------------

def clean_env(extra=None):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("GFXGRAPH") and not k.startswith("HGB_")}
    env.update(extra or {})
    return env


class Daemon:
    def __init__(self, args, tmp, tag, user=None, sets=()):
        self.dir = tempfile.mkdtemp(prefix="gg%s." % tag, dir=tmp)
        self.sock = os.path.join(self.dir, "d.sock")
        self.log = os.path.join(self.dir, "d.log")
        self.ctl = args.ctl
        self.user = user
        kw = {}
        if user:
            os.chown(self.dir, user.pw_uid, user.pw_gid)
            kw = {"user": user.pw_uid, "group": user.pw_gid, "extra_groups": []}
        argv = [args.daemon, "--backend", "cpu", "--socket", self.sock, "--log-target",
                "stderr", "--log-level", "debug"]
        for s in sets:
            argv += ["--set", s]
        self.proc, self.ready, self.cannot = None, None, ""
        with open(self.log, "wb") as lf:
            try:
                self.proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=lf,
                                             stderr=lf, **kw,
                                             env=clean_env({"GFXGRAPH_CONFIG": "/dev/null"}))
            except PermissionError as e:
                # the other uid cannot reach the build (a 0700 home, say)
                self.cannot = "uid %d cannot run %s (%s)" % (user.pw_uid, args.daemon, e)
                return
        self.ready = self.wait_log(r"serving on ")

    def text(self):
        with open(self.log, encoding="utf-8", errors="replace") as f:
            return f.read()

    def wait_log(self, pattern):
        """The first match of pattern in the log, waited for (None when the
        daemon exits or the deadline passes first)."""
        deadline = time.monotonic() + WAIT_S
        while True:
            m = re.search(pattern, self.text(), re.M)
            if m or time.monotonic() > deadline:
                return m
            if self.proc.poll() is not None:
                return re.search(pattern, self.text(), re.M)
            time.sleep(0.05)

    def uid(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for ln in f:
                if ln.startswith("Uid:"):
                    return int(ln.split()[1])
        return -1

    def stats(self):
        r = subprocess.run([self.ctl, "--socket", self.sock, "--json", "stats"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=WAIT_S,
                           env=clean_env())
        if r.returncode != 0:
            print(r.stderr.decode(errors="replace"))
            return {}
        return json.loads(r.stdout)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(WAIT_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
        return rc


# ---- one run of an example ------------------------------------------------

def shm_of(pid):
    try:
        names = os.listdir("/dev/shm")
    except OSError:
        return []
    return sorted(n for n in names
                  if n == "example-%d" % pid or n.startswith("gfxgraph-py-%d-" % pid))


def run_example(d, argv, env, tag):
    """Run argv against d; (returncode, stdout, stderr, pid, session id or
    None), after the daemon logged the end of the run's session."""
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=clean_env(dict(env, GFXGRAPH_SOCKET=d.sock)))
    try:
        out, err = p.communicate(timeout=WAIT_S * 2)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    out, err = out.decode(errors="replace"), err.decode(errors="replace")
    print("     | " + "\n     | ".join((out + err).rstrip().split("\n")))
    m = d.wait_log(r"^.*session=(\d+) client connected: pid %d uid" % p.pid)
    sid = int(m.group(1)) if m else None
    check(sid is not None, "%s: the daemon logged the run's session (pid %d)" % (tag, p.pid))
    if sid is not None:
        check(d.wait_log(r"session=%d session ended" % sid) is not None,
              "%s: the daemon ended session %d" % (tag, sid))
    return p.returncode, out, err, p.pid, sid


def session_log(d, sid):
    return [ln for ln in d.text().split("\n") if " session=%d " % sid in ln]


def check_route(d, sid, tag, other_uid, names):
    """The session's buffers went by name (same uid) or by descriptor after
    the daemon's EACCES for the name (another uid)."""
    lines = session_log(d, sid)
    reg = [ln for ln in lines if re.search(r"buffer \d+ registered: ", ln)]
    refused = [ln for ln in lines if "buffer.register refused: EACCES" in ln]
    by_fd = [ln for ln in reg if "registered: fd:" in ln]
    if other_uid:
        check(len(reg) == names and len(by_fd) == names and len(refused) == names,
              "%s: each of its %d buffer(s) refused by name (EACCES) and registered by "
              "descriptor (%d refused, %d by fd)" % (tag, names, len(refused), len(by_fd)))
    else:
        check(len(reg) == names and not by_fd and not refused,
              "%s: its %d buffer(s) registered by name, nothing refused (%d registered)"
              % (tag, names, len(reg)))


def delta(s0, s1, key):
    return (s1.get(key) or 0) - (s0.get(key) or 0)


def c_case(d, exe, shown, tag, other_uid):
    s0 = d.stats()
    rc, out, err, pid, sid = run_example(d, [exe], {}, tag)
    s1 = d.stats()
    check(rc == 0 and err == "", "%s: exit status 0, nothing on stderr (%d)" % (tag, rc))
    lines = out.rstrip("\n").split("\n")
    got = [ln for ln in lines if ln.startswith("batch ")]
    check(len(got) == 5 and len(lines) == 5,
          "%s: five 'batch N: ...' lines, nothing else (%d lines)" % (tag, len(lines)))
    at = 0
    for want in shown:
        while at < len(got) and not (got[at] == want or got[at].startswith(want + " ")):
            at += 1
        check(at < len(got), "%s: prints %r, as the README says" % (tag, want))
        at += 1
    # a daemon of this test alone: its counters are the example's
    check(delta(s0, s1, "replay_count") == 5 and delta(s0, s1, "capture_count") == 4 and
          delta(s0, s1, "eager_count") == 0 and delta(s0, s1, "fallback_count") == 0,
          "%s: the daemon made the 5 replays (+%d), 4 captures (+%d), none eager (+%d)"
          % (tag, delta(s0, s1, "replay_count"), delta(s0, s1, "capture_count"),
             delta(s0, s1, "eager_count")))
    if sid is not None:
        check(any("program 'rmsnorm-silu' defined" in ln for ln in session_log(d, sid)),
              "%s: session %d defined 'rmsnorm-silu'" % (tag, sid))
        check_route(d, sid, tag, other_uid, 1)
    check(shm_of(pid) == [], "%s: nothing of pid %d left in /dev/shm %r" % (tag, pid, shm_of(pid)))


def py_case(d, args, code_path, shown, tag, other_uid):
    res = os.path.join(os.path.dirname(code_path), "result-%s.json" % tag.replace(" ", "-"))
    runner = os.path.join(os.path.dirname(os.path.abspath(__file__)), "doc-examples-run.py")
    env = {"PYTHONPATH": os.path.join(args.source, "python"), "GFXGRAPH_LIB": args.lib,
           "PYTHONDONTWRITEBYTECODE": "1"}
    if args.preload:
        env.update({"LD_PRELOAD": args.preload, "ASAN_OPTIONS": "detect_leaks=0"})
    s0 = d.stats()
    rc, out, err, pid, sid = run_example(d, [args.python, runner, code_path, res], env, tag)
    s1 = d.stats()
    check(rc == 0 and err == "", "%s: exit status 0, nothing on stderr (%d)" % (tag, rc))
    lines = out.rstrip("\n").split("\n")
    check(lines[0].startswith("cpu ") and len(lines) >= 2 and lines[1].startswith("[["),
          "%s: prints the backend (cpu), then y[:3] (%r)" % (tag, lines[0]))
    r = {}
    if os.path.exists(res):
        with open(res) as f:
            r = json.load(f)
    rep = r.get("r") or {}
    check(all(rep.get(k) == v for k, v in shown.items()),
          "%s: prog.replay(3) answered %r, as the comment shows (%r)" % (tag, rep, shown))
    check(r.get("y_ok") is True,
          "%s: y[:3] is rmsnorm(x[:3]) * w (max rel error %s)" % (tag, r.get("max_rel")))
    check(r.get("tail_untouched") is True, "%s: rows past bucket 4 untouched" % tag)
    check("\n".join(lines[1:]) == r.get("printed"), "%s: what it printed is y[:3]" % tag)
    check(delta(s0, s1, "replay_count") == 1 and delta(s0, s1, "capture_count") == 1 and
          delta(s0, s1, "eager_count") == 0,
          "%s: the daemon made the replay (+%d) and its capture (+%d)"
          % (tag, delta(s0, s1, "replay_count"), delta(s0, s1, "capture_count")))
    if sid is not None:
        rows = [e for e in s1.get("cache") or [] if e.get("session") == sid]
        check(len(rows) == 1 and rows[0].get("program_name") == "norm" and
              rows[0].get("bucket") == 4 and rows[0].get("replays") == 1 and
              rows[0].get("parked") is True,
              "%s: session %d's cache row: 'norm', bucket 4, 1 replay, parked at its end (%r)"
              % (tag, sid, rows))
        check_route(d, sid, tag, other_uid, 3)
    check(shm_of(pid) == [], "%s: nothing of pid %d left in /dev/shm %r" % (tag, pid, shm_of(pid)))


def failing_case(d, argv, env, tag):
    """A run the daemon refuses: exit 1, the daemon's code, nothing left."""
    rc, out, err, pid, sid = run_example(d, argv, env, tag)
    check(rc == 1 and "EDQUOT" in err,
          "%s: exit status 1 with the daemon's EDQUOT on stderr (%d)" % (tag, rc))
    check(shm_of(pid) == [], "%s: nothing of pid %d left in /dev/shm %r" % (tag, pid, shm_of(pid)))


# ---- main -----------------------------------------------------------------

def other_user():
    """The uid to run the second daemon as, or None (and why)."""
    if os.geteuid() != 0:
        return None, "not root: no other uid to run a daemon as"
    for name in ("gfxgraph", "nobody"):
        try:
            return pwd.getpwnam(name), ""
        except KeyError:
            continue
    return None, "no user gfxgraph or nobody"


def has_numpy(py):
    if not py or not shutil.which(py):
        return False
    return subprocess.run([py, "-c", "import numpy"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL).returncode == 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--ctl", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--cc", required=True)
    ap.add_argument("--cflags", default="")
    ap.add_argument("--python", default="")
    ap.add_argument("--preload", default="")
    args = ap.parse_args()

    ccode, cshown = readme_example(args.source)
    pcode, pshown = python_example(args.source)
    check(len(cshown) >= 3, "README: the C example's printed lines, %r" % cshown)
    check(pshown.get("path") == "graph", "python.md: the replay comment, %r" % pshown)

    tmp = tempfile.mkdtemp(prefix="ggdoc.")
    os.chmod(tmp, 0o755)      # the other uid's daemon lives in a folder here
    daemons = []
    try:
        src = os.path.join(tmp, "example.c")
        exe = os.path.join(tmp, "example")
        with open(src, "w") as f:
            f.write(ccode)
        lib = os.path.abspath(args.lib)
        inc = os.path.join(args.source, "client", "include")
        cc = [args.cc] + args.cflags.split() + ["-Wall", "-Wextra", "-Werror", "-I", inc, src,
                                                 "-o", exe, lib,
                                                 "-Wl,-rpath," + os.path.dirname(lib)]
        r = subprocess.run(cc, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        print(r.stdout.decode(errors="replace"), end="")
        built = check(r.returncode == 0, "the README's C example compiles with -Wall -Wextra "
                      "-Werror against this build's libgfxgraph-client")
        pypath = os.path.join(tmp, "example.py")
        with open(pypath, "w") as f:
            f.write(pcode)
        numpy_ok = has_numpy(args.python)
        if not numpy_ok:
            note("SKIP the numpy example: no python3 with numpy (%r)" % args.python)

        user, why = other_user()
        cases = [("same uid", None)] + ([("uid %s" % user.pw_name, user)] if user else [])
        for tag, u in cases:
            d = Daemon(args, tmp, "u" if u else "s", user=u)
            if d.cannot:
                user, why = None, d.cannot
                break
            daemons.append(d)
            if not check(d.ready is not None, "%s: the daemon serves on %s" % (tag, d.sock)):
                print(d.text())
                continue
            want = u.pw_uid if u else os.geteuid()
            check(d.uid() == want, "%s: the daemon runs as uid %d (%d)" % (tag, want, d.uid()))
            if built:
                c_case(d, exe, cshown, "C example, %s" % tag, u is not None)
            if numpy_ok:
                py_case(d, args, pypath, pshown, "numpy example, %s" % tag, u is not None)
            check(d.stop() == 0, "%s: the daemon stops with status 0" % tag)
        # an error on the way out: the quota refuses the buffers
        q = Daemon(args, tmp, "q", user=user, sets=("max-mapped-bytes-per-uid=4096",))
        daemons.append(q)
        if check(q.ready is not None, "quota daemon: serves"):
            if built:
                failing_case(q, [exe], {}, "C example, buffer refused")
            if numpy_ok:
                env = {"PYTHONPATH": os.path.join(args.source, "python"), "GFXGRAPH_LIB": args.lib}
                if args.preload:
                    env.update({"LD_PRELOAD": args.preload, "ASAN_OPTIONS": "detect_leaks=0"})
                failing_case(q, [args.python, pypath], env, "numpy example, buffer refused")
            check(q.stop() == 0, "quota daemon: stops with status 0")
        if not user:
            note("SKIP the other-uid daemon: %s" % why)
    finally:
        for d in daemons:
            if d.proc and d.proc.poll() is None:
                d.proc.kill()
                d.proc.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (PASSES, FAILS))
    if FAILS:
        return 1
    return 0 if user else 77


if __name__ == "__main__":
    sys.exit(main())
