#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Run a docs example (a Python file) as a program would, then write what
doc-examples.py checks to a JSON file:

    doc-examples-run.py EXAMPLE.py RESULT.json

The example runs unchanged as __main__, printing what it prints; its
globals are then read: r (the replay's answer), x, w and y, with y[:3]
against rmsnorm(x[:3]) * w in float64 (eps 1e-6, as the example defines
it), the rows past the replay's bucket, and y[:3] as print() writes it.
"""
import json
import sys


def main():
    path, out = sys.argv[1], sys.argv[2]
    with open(path, encoding="utf-8") as f:
        code = compile(f.read(), path, "exec")
    ns = {"__name__": "__main__", "__file__": path}
    exec(code, ns)
    sys.stdout.flush()
    import numpy as np
    x = np.asarray(ns["x"], dtype=np.float64)
    w = np.asarray(ns["w"], dtype=np.float64)
    y = np.asarray(ns["y"])
    r = dict(ns["r"])
    n = r.get("batch", 0)
    ref = x[:n] / np.sqrt(np.mean(x[:n] ** 2, axis=1, keepdims=True) + 1e-6) * w
    rel = float(np.max(np.abs(y[:n] - ref) / np.maximum(np.abs(ref), 1e-6))) if n else None
    res = {
        "r": r,
        "max_rel": rel,
        "y_ok": bool(n == 3 and rel is not None and rel < 1e-5),
        "tail_untouched": bool(not y[r.get("bucket", 0):].any()),
        "printed": str(ns["y"][:3]),
    }
    with open(out, "w") as f:
        json.dump(res, f)


if __name__ == "__main__":
    main()
