#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The EXAMPLES of the man pages in docs/man/, run and compared with what
each page shows.

    doc-examples-man.py --source SRC --daemon GFXGRAPHD --ctl GFXGRAPHCTL
                        --exporter GFXGRAPH_EXPORTER --lib LIBGFXGRAPH_CLIENT
                        [--preload LIB]

In an EXAMPLES section, a line "$ COMMAND" is a command and the lines after
it, up to the next command or the end of the block, the output the page
shows (standard output and standard error together).  The output must
match line for line, where a number in the page stands for any number
(its digits are not compared), a "..." word for any words and a "..." line
for any lines.  A number the page shows in one output and uses in a later
command (a session id) stands for the number actually printed there.

Each command runs in bash in a scratch folder, with the build's programs
first on PATH, sudo as a no-op (the daemon runs as this test's uid, which
the admin commands accept), GFXGRAPH_SOCKET naming a cpu daemon of this
test, /run/gfxgraph/gfxgraphd.sock read as that socket and
/etc/gfxgraph/gfxgraphd.conf as gfxgraphd.conf(5)'s EXAMPLE written to a
file.  A session named decoder-app holds program "decoder" (buckets 1, 2,
4, three replays) while gfxgraphctl(1)'s examples run.  The whole command
line must exit 0 (a page shows another status with "; echo ...$?").

What cannot run here is checked as far as it can: a server started with
"&" (gfxgraphd, gfxgraph-exporter) has its options parsed instead
(gfxgraphd --check-config, gfxgraph-exporter --help after them); a command
of another program (systemctl, journalctl, curl) is listed, not run;
a program missing here (jq) skips its examples, said so.
"""
import argparse
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import time

FAILS = 0
PASSES = 0
WAIT_S = 120          # a deadline for a state to show, not an expected time
OURS = ("gfxgraphctl", "gfxgraphd", "gfxgraph-exporter")


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


# ---- the pages ------------------------------------------------------------

def unroff(s):
    """Text of a roff line as the page shows it (the escapes used in
    docs/man: \\- \\(aq \\(dq \\e \\& \\% and font changes)."""
    s = re.sub(r"\\f[BIRP]", "", s)
    for a, b in (("\\-", "-"), ("\\(aq", "'"), ("\\(dq", '"'), ("\\&", ""), ("\\%", ""),
                 ("\\e", "\\")):
        s = s.replace(a, b)
    return s


def examples(path):
    """The no-fill blocks (.nf .. .fi, .EX .. .EE) of the EXAMPLES section:
    lists of text lines."""
    blocks, cur, inside, fill = [], None, False, True
    with open(path, encoding="utf-8") as f:
        for ln in f.read().split("\n"):
            if ln.startswith(".SH"):
                inside = ln.split(None, 1)[1].strip('"') in ("EXAMPLES", "EXAMPLE") \
                    if len(ln.split()) > 1 else False
                continue
            if not inside:
                continue
            if ln in (".nf", ".EX"):
                fill, cur = False, []
            elif ln in (".fi", ".EE"):
                fill = True
                blocks.append(cur)
                cur = None
            elif not fill and not ln.startswith(".") and not ln.startswith("'"):
                cur.append(unroff(ln))
    return blocks


def commands(blocks):
    """[(command, [shown output lines])] of blocks."""
    out = []
    for b in blocks:
        for ln in b:
            if ln.startswith("$ "):
                out.append((ln[2:], []))
            elif out:
                out[-1][1].append(ln)
    return out


# ---- matching -------------------------------------------------------------

NUM = re.compile(r"\d+(?:\.\d+)?")


def tok_match(shown, got, binds):
    if shown == got:
        return True
    if NUM.sub("#", shown) != NUM.sub("#", got) or not NUM.search(shown):
        return False
    if NUM.fullmatch(shown):
        binds.setdefault(shown, set()).add(got)
    return True


def line_match(shown, got, binds):
    s, g = shown.split(), got.split()

    def rec(i, j):
        if i == len(s):
            return j == len(g)
        if s[i] == "...":
            return any(rec(i + 1, k) for k in range(j, len(g) + 1))
        return j < len(g) and tok_match(s[i], g[j], binds) and rec(i + 1, j + 1)
    return rec(0, 0)


def output_match(shown, got, binds):
    """shown (lines, "..." lines free) against got; the first line that
    does not match (or None)."""
    def rec(i, j):
        if i == len(shown):
            return None if j == len(got) else "%d more line(s): %r" % (len(got) - j, got[j])
        if shown[i].strip() == "...":
            best = None
            for k in range(j, len(got) + 1):
                r = rec(i + 1, k)
                if r is None:
                    return None
                best = best or r
            return best
        if j < len(got) and line_match(shown[i], got[j], binds):
            return rec(i + 1, j + 1)
        return "page: %r, output: %r" % (shown[i], got[j] if j < len(got) else "(end)")
    return rec(0, 0)


# ---- a daemon and a client session for the examples -----------------------

HOLDER = r"""
import sys, gfxgraph
c = gfxgraph.Client(name="decoder-app")
m = gfxgraph.SharedMemory(2 * 4 * 64 * 4)
b = c.register(m)
p = c.define({"name": "decoder", "buckets": [1, 2, 4],
              "tensors": {"x": {"dtype": "f32", "shape": ["batch", 64], "buffer": b},
                          "y": {"dtype": "f32", "shape": ["batch", 64], "buffer": b,
                                "offset": 4 * 64 * 4}},
              "nodes": [{"op": "silu", "inputs": ["x"], "outputs": ["y"]}]})
for n in (1, 2, 3):
    p.replay(n)
print("ready", c.session, flush=True)
sys.stdin.read()
"""


def start_daemon(args, tmp):
    sock = os.path.join(tmp, "d.sock")
    log = open(os.path.join(tmp, "d.log"), "wb")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GFXGRAPH", "HGB_"))}
    env["GFXGRAPH_CONFIG"] = "/dev/null"
    p = subprocess.Popen([args.daemon, "--backend", "cpu", "--socket", sock, "--log-target",
                          "stderr"], stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline and p.poll() is None:
        r = subprocess.run([args.ctl, "--socket", sock, "--timeout", "5", "health"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if r.returncode == 0:
            break
        time.sleep(0.05)
    return p, sock


def start_holder(args, sock, tmp):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GFXGRAPH", "HGB_"))}
    env.update(GFXGRAPH_SOCKET=sock, GFXGRAPH_LIB=args.lib, PYTHONDONTWRITEBYTECODE="1",
               PYTHONPATH=os.path.join(args.source, "python"))
    if args.preload:
        env.update(LD_PRELOAD=args.preload, ASAN_OPTIONS="detect_leaks=0")
    p = subprocess.Popen([sys.executable, "-c", HOLDER], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=tmp)
    line = p.stdout.readline().decode(errors="replace")
    if not line.startswith("ready "):
        line += p.stdout.read().decode(errors="replace") if p.wait(WAIT_S) is not None else ""
    return p, line


# ---- running a page's commands --------------------------------------------

def shim_dir(args, tmp):
    d = os.path.join(tmp, "bin")
    os.mkdir(d)
    for name, target in (("gfxgraphctl", args.ctl), ("gfxgraphd", args.daemon),
                         ("gfxgraph-exporter", args.exporter)):
        os.symlink(os.path.abspath(target), os.path.join(d, name))
    with open(os.path.join(d, "sudo"), "w") as f:
        f.write('#!/bin/sh\nexec "$@"\n')
    os.chmod(os.path.join(d, "sudo"), 0o755)
    return d


def programs_of(cmd):
    """The programs a command line runs (the first word of each pipeline
    stage or list element, sudo and VAR=value skipped)."""
    lex = shlex.shlex(cmd, posix=True, punctuation_chars=True)
    lex.whitespace_split = True
    out, first = [], True
    for t in lex:
        if t in ("|", "||", "&&", ";", "&"):
            first = True
        elif first and t != "sudo" and not re.match(r"\w+=", t):
            out.append(t)
            first = False
    return out


def run_page(page, cmds, env, cwd, binds, args):
    for cmd, shown in cmds:
        progs = programs_of(cmd)
        if progs and progs[0] not in OURS:
            note("%s: not run here (%s is not one of ours): %s" % (page, progs[0], cmd))
            continue
        missing = [p for p in progs if p not in OURS + ("echo", "grep", "sudo", "head")
                   and not shutil.which(p)]
        if missing:
            note("%s: SKIP %r: %s not found" % (page, cmd, ", ".join(missing)))
            continue
        line = cmd
        for k, v in binds.items():
            if len(v) == 1:
                line = re.sub(r"(?<![\w.-])%s(?![\w.])" % re.escape(k), next(iter(v)), line)
            elif re.search(r"(?<![\w.-])%s(?![\w.])" % re.escape(k), line):
                check(False, "%s: %r: %s stands for several numbers %r" % (page, cmd, k, v))
        paths = (("/run/gfxgraph/gfxgraphd.sock", env["GFXGRAPH_SOCKET"]),
                 ("/etc/gfxgraph/gfxgraphd.conf", env["GG_CONF"]))
        for page_path, here in paths:
            line = line.replace(page_path, here)
        w = shlex.split(line.rstrip().rstrip("&"))
        if len(progs) == 1 and progs[0] in ("gfxgraphd", "gfxgraph-exporter") and \
                not set(w) & {"--check-config", "--print-config", "--help", "--version"}:
            # a server: its options parsed, not served
            if w[0] == "gfxgraphd":
                line = shlex.join(w + ["--check-config", "/dev/null"])
            else:
                line = shlex.join(w + ["--help"])
            shown = None
        r = subprocess.run(["bash", "-o", "pipefail", "-c", line], stdin=subprocess.DEVNULL,
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                           timeout=WAIT_S)
        got = r.stdout.decode(errors="replace").rstrip("\n").split("\n")
        if got == [""]:
            got = []
        for page_path, here in paths:
            got = [g.replace(here, page_path) for g in got]
        if r.returncode != 0 or shown:
            print("     $ " + line + "\n     | " + "\n     | ".join(got))
        if shown is None:
            check(r.returncode == 0, "%s: %s: the options parse (%s: exit %d)"
                  % (page, cmd, shlex.split(line)[-1], r.returncode))
            continue
        check(r.returncode == 0, "%s: %s: exit status 0 (%d)" % (page, cmd, r.returncode))
        if shown:
            why = output_match(shown, got, binds)
            check(why is None, "%s: %s: the output is the page's%s"
                  % (page, cmd, "" if why is None else " (" + why + ")"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--daemon", required=True)
    ap.add_argument("--ctl", required=True)
    ap.add_argument("--exporter", required=True)
    ap.add_argument("--lib", required=True)
    ap.add_argument("--preload", default="", help="sanitizer runtime for python's ctypes")
    args = ap.parse_args()
    for k in ("source", "daemon", "ctl", "exporter", "lib"):
        setattr(args, k, os.path.abspath(getattr(args, k)))
    man = os.path.join(args.source, "docs", "man")
    tmp = tempfile.mkdtemp(prefix="ggman.")
    procs = []
    try:
        bindir = shim_dir(args, tmp)
        # gfxgraphd.conf(5)'s example is the config file of gfxgraphd(8)'s
        conf_blocks = examples(os.path.join(man, "gfxgraphd.conf.5"))
        check(len(conf_blocks) == 1 and conf_blocks[0][:1] == ["[gfxgraphd]"],
              "gfxgraphd.conf(5): one EXAMPLE, a config file")
        conf = os.path.join(tmp, "gfxgraphd.conf")
        with open(conf, "w") as f:
            f.write("\n".join(conf_blocks[0] if conf_blocks else []) + "\n")
        r = subprocess.run([args.daemon, "--check-config", conf], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT)
        check(r.returncode == 0, "gfxgraphd.conf(5): its EXAMPLE passes gfxgraphd "
              "--check-config (%d: %s)" % (r.returncode, r.stdout.decode().strip()))

        d, sock = start_daemon(args, tmp)
        procs.append(d)
        if not check(d.poll() is None, "a cpu daemon serves on %s" % sock):
            return 1
        h, ready = start_holder(args, sock, tmp)
        procs.append(h)
        check(ready.startswith("ready "), "session decoder-app holds program decoder (%r)"
              % ready.strip())
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GFXGRAPH", "HGB_"))}
        env.update({"PATH": bindir + os.pathsep + os.environ.get("PATH", "/usr/bin:/bin"),
                    "GFXGRAPH_SOCKET": sock, "GFXGRAPH_CONFIG": "/dev/null", "GG_CONF": conf})
        for page in ("gfxgraphctl.1", "gfxgraphd.8", "gfxgraph-exporter.1"):
            cmds = commands(examples(os.path.join(man, page)))
            check(len(cmds) > 0, "%s: EXAMPLES shows commands (%d)" % (page, len(cmds)))
            run_page(page, cmds, env, tmp, {}, args)
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(WAIT_S)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    print("%d passed, %d failed" % (PASSES, FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
