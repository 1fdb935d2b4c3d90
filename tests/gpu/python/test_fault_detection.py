#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The torch tests can fail: each test_torch_*.py, run against a daemon
whose every graph launch fails (GFXGRAPH_FAULT=launch: the daemon answers
each replay eagerly, fallback set, with the right values), must exit 1,
with its daemon-counter checks (_common.COUNTERS) among the failures.  A
test that passed there would not see a daemon that never replays a graph.

run.sh starts that second daemon and sets GFXGRAPH_FAULT_SOCKET (and
GFXGRAPH_FAULT_KIND, the fault it was started with)."""
import os
import re
import subprocess
import sys

from _common import COUNTERS, check, finish, need_torch_cuda

need_torch_cuda()
fsock = os.environ.get("GFXGRAPH_FAULT_SOCKET")
if not fsock:
    print("SKIP: GFXGRAPH_FAULT_SOCKET is not set (run.sh starts a daemon with GFXGRAPH_FAULT)")
    sys.exit(77)
kind = os.environ.get("GFXGRAPH_FAULT_KIND", "launch")
here = os.path.dirname(os.path.abspath(__file__))
# the HF families once each is enough to show their counters catch it
CASES = (("test_torch_cudagraph.py", {}), ("test_torch_compile.py", {}),
         ("test_torch_ipc.py", {}), ("test_torch_hf_families.py", {"GG_HF_ONLY": "llama:f32"}),
         ("test_torch_graph_runner.py", {}))
for name, extra in CASES:
    env = dict(os.environ, GFXGRAPH_SOCKET=fsock, **extra)
    p = subprocess.run([sys.executable, os.path.join(here, name)], env=env, cwd=here,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=600)
    out = p.stdout.decode("utf-8", "replace")
    fails = [ln for ln in out.splitlines() if ln.startswith("FAIL: ")]
    caught = [ln for ln in fails if COUNTERS in ln]
    other = [ln for ln in fails if COUNTERS not in ln]
    summary = re.findall(r"^\S+: \d+ passed, \d+ failed$", out, re.M)
    print("   %s against GFXGRAPH_FAULT=%s: exit %d, %s; %d counter checks failed, %d other"
          % (name, kind, p.returncode, summary[-1] if summary else "no summary", len(caught),
             len(other)))
    for ln in other[:5]:
        print("      (other) " + ln)
    check(p.returncode == 1 and caught,
          "%s fails against a daemon whose graph launches fail (GFXGRAPH_FAULT=%s), "
          "caught by its daemon counters: %s" % (name, kind, caught[0] if caught else
                                                  "NONE CAUGHT; its output:\n" + out[-3000:]))
finish("test_fault_detection")
