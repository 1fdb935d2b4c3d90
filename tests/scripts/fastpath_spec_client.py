#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A gfxgraphd fast-path client written from proto/PROTOCOL.md alone.

Python standard library only: a hand-written MessagePack encoder/decoder,
socket.recvmsg for the memfd that comes with fastpath.open's answer
(SCM_RIGHTS), mmap and struct for the region, ctypes for the futex.

    fastpath_spec_client.py SOCKET

Against a cpu-backend daemon: hello; a POSIX shm buffer created here under
/dev/shm and registered by name (section 11); y = scale(x, 2) over
[batch, 8] f32 with buckets 1, 2, 4; fastpath.open; the header checked
against section 15's table; descriptors written byte by byte (seq, release
order, sq_tail, the doorbell when sq_sleeping); completions awaited by
polling seq and once by sleeping on cq_wake; outputs checked in shm; then
bad descriptors and their error records; stats.  Prints one line per check
and exits 0 when all passed, 1 otherwise.
"""
import ctypes
import errno
import mmap
import os
import socket
import struct
import sys
import time

FAILS = 0
PASSES = 0


def check(ok, what):
    global FAILS, PASSES
    if ok:
        PASSES += 1
        print("   ok: " + what)
    else:
        FAILS += 1
        print("FAIL: " + what)
    return ok


# ---- MessagePack (the subset a client needs, both directions) ---------------

def pack(o, out):
    if o is None:
        out.append(0xC0)
    elif o is True:
        out.append(0xC3)
    elif o is False:
        out.append(0xC2)
    elif isinstance(o, int):
        if 0 <= o < 0x80:
            out.append(o)
        elif -32 <= o < 0:
            out.append(o & 0xFF)
        elif 0 <= o <= 0xFF:
            out += b"\xcc" + struct.pack(">B", o)
        elif 0 <= o <= 0xFFFF:
            out += b"\xcd" + struct.pack(">H", o)
        elif 0 <= o <= 0xFFFFFFFF:
            out += b"\xce" + struct.pack(">I", o)
        elif 0 <= o < 1 << 64:
            out += b"\xcf" + struct.pack(">Q", o)
        elif -(1 << 63) <= o < 0:
            out += b"\xd3" + struct.pack(">q", o)
        else:
            raise ValueError("integer out of range")
    elif isinstance(o, float):
        out += b"\xcb" + struct.pack(">d", o)
    elif isinstance(o, str):
        b = o.encode("utf-8")
        n = len(b)
        if n < 32:
            out.append(0xA0 | n)
        elif n <= 0xFF:
            out += b"\xd9" + struct.pack(">B", n)
        elif n <= 0xFFFF:
            out += b"\xda" + struct.pack(">H", n)
        else:
            out += b"\xdb" + struct.pack(">I", n)
        out += b
    elif isinstance(o, (bytes, bytearray)):
        n = len(o)
        if n <= 0xFF:
            out += b"\xc4" + struct.pack(">B", n)
        elif n <= 0xFFFF:
            out += b"\xc5" + struct.pack(">H", n)
        else:
            out += b"\xc6" + struct.pack(">I", n)
        out += o
    elif isinstance(o, (list, tuple)):
        n = len(o)
        if n < 16:
            out.append(0x90 | n)
        elif n <= 0xFFFF:
            out += b"\xdc" + struct.pack(">H", n)
        else:
            out += b"\xdd" + struct.pack(">I", n)
        for v in o:
            pack(v, out)
    elif isinstance(o, dict):
        n = len(o)
        if n < 16:
            out.append(0x80 | n)
        elif n <= 0xFFFF:
            out += b"\xde" + struct.pack(">H", n)
        else:
            out += b"\xdf" + struct.pack(">I", n)
        for k, v in o.items():
            pack(k, out)
            pack(v, out)
    else:
        raise TypeError("cannot pack %r" % type(o))
    return out


class Incomplete(Exception):
    pass


def unpack(b, i=0):
    """One value from b at i: (value, next index); Incomplete when b ends
    first."""
    def need(n):
        if i + n > len(b):
            raise Incomplete()

    need(1)
    t = b[i]
    i += 1
    if t <= 0x7F:
        return t, i
    if t >= 0xE0:
        return t - 0x100, i
    if 0xA0 <= t <= 0xBF:
        n = t & 0x1F
        need(n)
        return b[i:i + n].decode("utf-8"), i + n
    if 0x90 <= t <= 0x9F:
        return unpack_array(b, i, t & 0x0F)
    if 0x80 <= t <= 0x8F:
        return unpack_map(b, i, t & 0x0F)
    if t == 0xC0:
        return None, i
    if t == 0xC2:
        return False, i
    if t == 0xC3:
        return True, i
    fixed = {0xCC: ">B", 0xCD: ">H", 0xCE: ">I", 0xCF: ">Q",
             0xD0: ">b", 0xD1: ">h", 0xD2: ">i", 0xD3: ">q",
             0xCA: ">f", 0xCB: ">d"}
    if t in fixed:
        f = fixed[t]
        n = struct.calcsize(f)
        need(n)
        return struct.unpack_from(f, b, i)[0], i + n
    lens = {0xD9: (">B", "str"), 0xDA: (">H", "str"), 0xDB: (">I", "str"),
            0xC4: (">B", "bin"), 0xC5: (">H", "bin"), 0xC6: (">I", "bin"),
            0xDC: (">H", "arr"), 0xDD: (">I", "arr"),
            0xDE: (">H", "map"), 0xDF: (">I", "map"),
            0xC7: (">B", "ext"), 0xC8: (">H", "ext"), 0xC9: (">I", "ext")}
    if t in lens:
        f, kind = lens[t]
        n = struct.calcsize(f)
        need(n)
        ln = struct.unpack_from(f, b, i)[0]
        i += n
        if kind == "arr":
            return unpack_array(b, i, ln)
        if kind == "map":
            return unpack_map(b, i, ln)
        if kind == "ext":
            need(1 + ln)
            return ("ext", b[i], bytes(b[i + 1:i + 1 + ln])), i + 1 + ln
        need(ln)
        v = bytes(b[i:i + ln])
        return (v.decode("utf-8") if kind == "str" else v), i + ln
    if t in (0xD4, 0xD5, 0xD6, 0xD7, 0xD8):
        ln = {0xD4: 1, 0xD5: 2, 0xD6: 4, 0xD7: 8, 0xD8: 16}[t]
        need(1 + ln)
        return ("ext", b[i], bytes(b[i + 1:i + 1 + ln])), i + 1 + ln
    raise ValueError("not MessagePack: 0x%02x" % t)


def unpack_array(b, i, n):
    out = []
    for _ in range(n):
        v, i = unpack(b, i)
        out.append(v)
    return out, i


def unpack_map(b, i, n):
    out = {}
    for _ in range(n):
        k, i = unpack(b, i)
        v, i = unpack(b, i)
        if k not in out:        # duplicate keys: the first counts
            out[k] = v
    return out, i


# ---- the connection ----------------------------------------------------------

class Conn:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(30)
        self.s.connect(path)
        self.buf = b""
        self.msgid = 0
        self.fds = []            # descriptors that came with the bytes

    def _read(self):
        # always recvmsg with room for a descriptor: fastpath.open's answer
        # carries one on its first byte (section 15)
        data, anc, flags, _ = self.s.recvmsg(65536, socket.CMSG_SPACE(struct.calcsize("i")))
        for level, typ, cdata in anc:
            if level == socket.SOL_SOCKET and typ == socket.SCM_RIGHTS:
                n = len(cdata) // struct.calcsize("i")
                self.fds += list(struct.unpack("%di" % n, cdata[:n * 4]))
        if not data:
            raise ConnectionResetError("gfxgraphd closed the connection")
        self.buf += data

    def next_message(self):
        while True:
            try:
                v, n = unpack(self.buf, 0)
                self.buf = self.buf[n:]
                return v
            except Incomplete:
                self._read()

    def call(self, method, params=None):
        """(result, error) of one request; error is None or {code, message}."""
        self.msgid += 1
        msg = [0, self.msgid, method, [params] if params is not None else []]
        self.s.sendall(bytes(pack(msg, bytearray())))
        while True:
            m = self.next_message()
            # responses only; notifications ("error") are printed
            if isinstance(m, list) and len(m) == 4 and m[0] == 1 and m[1] == self.msgid:
                return m[3], m[2]
            if isinstance(m, list) and len(m) == 3 and m[0] == 2:
                print("   note: notification %r" % (m[1:],))


# ---- the region (section 15, "Layout") ---------------------------------------

HDR = {"magic": (0, "8s"), "version": (8, "=I"), "entries": (12, "=I"),
       "sqe_size": (16, "=I"), "cqe_size": (20, "=I"), "region_size": (24, "=Q"),
       "sq_offset": (32, "=I"), "cq_offset": (36, "=I"), "session": (40, "=Q"),
       "sq_tail": (64, "=I"), "sq_head": (128, "=I"), "sq_sleeping": (192, "=I"),
       "sq_wake": (196, "=I"), "cq_waiters": (256, "=I"), "cq_wake": (320, "=I"),
       "state": (324, "=I")}
SQE = "=QQQQIIIIQQ"      # seq program wait signal batch branch flags reserved user reserved
CQE_HEAD = "=QiIIIIIdQ"  # seq status flags bucket batch branch reserved device_us user_data
SQE_ASYNC, SQE_TIMED = 1, 2
CQE_EAGER, CQE_FALLBACK, CQE_CAPTURED, CQE_ASYNC, CQE_TIMED, CQE_GPU = 1, 2, 4, 8, 16, 32

SYS_FUTEX = {"x86_64": 202, "aarch64": 98}.get(os.uname().machine, 202)
FUTEX_WAIT, FUTEX_WAKE = 0, 1
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class Region:
    def __init__(self, fd, size):
        self.m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self.size = size
        self.entries = self.get("entries")
        self.sq_off = self.get("sq_offset")
        self.cq_off = self.get("cq_offset")
        self.next_seq = 1
        self._words = {}

    def get(self, name):
        off, f = HDR[name]
        return struct.unpack_from(f, self.m, off)[0]

    def put(self, name, v):
        off, f = HDR[name]
        struct.pack_into(f, self.m, off, v)

    def addr(self, name):
        # a ctypes view of the word, for the futex calls
        if name not in self._words:
            self._words[name] = ctypes.c_uint32.from_buffer(self.m, HDR[name][0])
        return ctypes.addressof(self._words[name])

    def futex(self, name, op, val, timeout_s=None):
        ts = None
        if timeout_s is not None:
            ts = ctypes.byref(Timespec(int(timeout_s), int((timeout_s % 1) * 1e9)))
        return libc.syscall(SYS_FUTEX, ctypes.c_void_p(self.addr(name)), op, val, ts, None, 0)

    def slot(self, seq):
        return (seq - 1) & (self.entries - 1)

    def doorbell(self):
        # "if sq_sleeping is not 0, add 1 to sq_wake and futex(FUTEX_WAKE, 1)"
        if self.get("sq_sleeping"):
            self.put("sq_wake", (self.get("sq_wake") + 1) & 0xFFFFFFFF)
            self.futex("sq_wake", FUTEX_WAKE, 1)

    def submit(self, program, batch, branch=0, flags=0, user_data=0, seq=None,
               reserved0=0, reserved1=0, wait_event=0, signal_event=0):
        """Write the next descriptor into its slot, then sq_tail, then ring
        the doorbell if the daemon sleeps.  Returns the slot's seq."""
        s = self.next_seq
        self.next_seq += 1
        off = self.sq_off + self.slot(s) * 64
        struct.pack_into(SQE, self.m, off, s if seq is None else seq, program, wait_event,
                         signal_event, batch, branch, flags, reserved0, user_data, reserved1)
        # x86 keeps stores in order, and each struct.pack_into is a separate
        # C call: the descriptor is in memory before sq_tail
        self.put("sq_tail", s & 0xFFFFFFFF)
        # Python has no full fence: a futex syscall is one, but only when it
        # is made.  wait() rings again while the daemon sleeps and has not
        # taken the descriptor (the re-check the spec's fence replaces)
        self.doorbell()
        return s

    def record(self, seq):
        off = self.cq_off + self.slot(seq) * 256
        (rseq, status, flags, bucket, batch, branch, _r, us, user) = struct.unpack_from(
            CQE_HEAD, self.m, off)
        reason = bytes(self.m[off + 64:off + 256]).split(b"\0", 1)[0].decode("utf-8")
        return {"seq": rseq, "status": status, "flags": flags, "bucket": bucket,
                "batch": batch, "branch": branch, "device_us": us, "user_data": user,
                "reason": reason}

    def done(self, seq):
        return struct.unpack_from("=Q", self.m, self.cq_off + self.slot(seq) * 256)[0] == seq

    def wait(self, seq, timeout_s=10.0, sleep=False):
        """Poll the record's seq; with sleep, the cq_waiters/cq_wake protocol.
        The record, or None (timed out / region closed)."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if self.done(seq):
                return self.record(seq)
            if self.get("state") == 2:
                return self.record(seq) if self.done(seq) else None
            # the descriptor not yet taken and the daemon asleep: ring again
            if ((self.get("sq_head") - seq) & 0xFFFFFFFF) >= 0x80000000 and self.get("sq_sleeping"):
                self.doorbell()
            if sleep:
                self.put("cq_waiters", self.get("cq_waiters") + 1)
                w = self.get("cq_wake")
                if not self.done(seq):
                    self.futex("cq_wake", FUTEX_WAIT, w, 0.05)
                self.put("cq_waiters", self.get("cq_waiters") - 1)
            else:
                time.sleep(0.0001)
        return None

    def close(self):
        self._words.clear()
        self.m.close()


# ---- the test ----------------------------------------------------------------

D = 8
ROWS = 4


def floats(m, n):
    return list(struct.unpack_from("=%df" % n, m, 0))


def main():
    if len(sys.argv) != 2:
        print("usage: fastpath_spec_client.py SOCKET")
        return 2
    c = Conn(sys.argv[1])
    hello, err = c.call("hello", {"protocol": 1, "client": "spec-client.py"})
    if not check(err is None and hello.get("protocol") == 1, "hello: protocol 1 (%r)" % (err,)):
        return 1
    fp = hello.get("fastpath", {})
    check(fp.get("available") is True, "hello: fastpath.available (%r)" % (fp,))
    check(fp.get("max_entries") == 4096, "hello: fastpath.max_entries 4096")
    check(fp.get("completion") == "cpu", "hello: completion cpu on the cpu backend")
    check(hello.get("backend") == "cpu", "backend cpu")
    session = hello["session"]

    # shm buffers of our own (section 11)
    names, maps, ids = [], [], []
    nbytes = ROWS * D * 4
    for what in ("x", "y"):
        name = "/ggspec-%d-%s" % (os.getpid(), what)
        fd = os.open("/dev/shm" + name, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        os.ftruncate(fd, nbytes)
        maps.append(mmap.mmap(fd, nbytes, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE))
        os.close(fd)
        names.append(name)
        r, err = c.call("buffer.register", {"handle": name, "size": nbytes})
        check(err is None and r["size"] == nbytes, "buffer.register %s (%r)" % (name, err))
        ids.append(r["id"] if r else 0)
    for name in names:
        os.unlink("/dev/shm" + name)     # the daemon keeps its mapping
    mx, my = maps
    xs = [float(i % 11) - 5.0 for i in range(ROWS * D)]
    struct.pack_into("=%df" % (ROWS * D), mx, 0, *xs)

    prog, err = c.call("program.define", {
        "name": "spec-double",
        "tensors": {"x": {"dtype": "f32", "shape": ["batch", D], "buffer": ids[0]},
                    "y": {"dtype": "f32", "shape": ["batch", D], "buffer": ids[1]}},
        "nodes": [{"op": "scale", "inputs": ["x"], "outputs": ["y"], "attrs": {"scale": 2.0}}],
        "buckets": [1, 2, 4]})
    if not check(err is None, "program.define (%r)" % (err,)):
        return 1
    pid = prog["id"]
    check(prog["max_batch"] == ROWS, "max_batch %d (%r)" % (ROWS, prog["max_batch"]))

    # a bad entries count first
    r, err = c.call("fastpath.open", {"entries": 3})
    check(err is not None and err["code"] == "EINVAL" and not c.fds,
          "fastpath.open entries 3: EINVAL, no descriptor (%r)" % (err,))

    r, err = c.call("fastpath.open", {"entries": 8})
    if not check(err is None, "fastpath.open (%r)" % (err,)):
        return 1
    check(len(c.fds) == 1, "one descriptor came with the answer (%d)" % len(c.fds))
    rfd = c.fds.pop(0)
    size = os.fstat(rfd).st_size
    check(size == r["region_size"], "the memfd's size is region_size (%d, %r)" % (size, r))
    check(r["entries"] == 8 and r["sqe_size"] == 64 and r["cqe_size"] == 256 and
          r["sq_offset"] == 512 and r["cq_offset"] == 512 + 8 * 64 and r["completion"] == "cpu",
          "fastpath.open's result (%r)" % (r,))
    reg = Region(rfd, size)
    os.close(rfd)
    for k, want in (("magic", b"GGFPATH1"), ("version", 1), ("entries", 8), ("sqe_size", 64),
                    ("cqe_size", 256), ("region_size", size), ("sq_offset", 512),
                    ("cq_offset", 512 + 8 * 64), ("session", session), ("state", 1)):
        check(reg.get(k) == want, "header %s == %r (%r)" % (k, want, reg.get(k)))
    r, err = c.call("fastpath.open", {"entries": 8})
    check(err is not None and err["code"] == "EEXIST", "a second open: EEXIST (%r)" % (err,))

    # good descriptors
    struct.pack_into("=%df" % (ROWS * D), my, 0, *([-1.0] * (ROWS * D)))
    s = reg.submit(pid, 3, user_data=0x1234)
    q = reg.wait(s)
    if check(q is not None, "descriptor 1 completes"):
        check(q["status"] == 0 and q["bucket"] == 4 and q["batch"] == 3 and
              q["user_data"] == 0x1234 and q["reason"] == "",
              "descriptor 1: status 0, bucket 4, batch 3, user_data (%r)" % (q,))
        check(q["flags"] & CQE_CAPTURED and not q["flags"] & (CQE_EAGER | CQE_GPU),
              "descriptor 1: a graph, captured (flags %#x)" % q["flags"])
        ys = floats(my, ROWS * D)
        check(all(ys[i] == 2.0 * xs[i] for i in range(3 * D)), "y = 2x in the batch's rows")
    xs = [0.5 * v + 1.0 for v in xs]
    struct.pack_into("=%df" % (ROWS * D), mx, 0, *xs)
    s = reg.submit(pid, 4, user_data=99)
    q = reg.wait(s, sleep=True)
    if check(q is not None, "descriptor 2 completes (waiting on cq_wake)"):
        check(q["status"] == 0 and not q["flags"] & (CQE_CAPTURED | CQE_EAGER),
              "descriptor 2: a hit (flags %#x)" % q["flags"])
        ys = floats(my, ROWS * D)
        check(all(ys[i] == 2.0 * xs[i] for i in range(ROWS * D)), "y = 2x again, new input")

    # the daemon's thread goes to sleep when idle; the doorbell wakes it
    t_end = time.monotonic() + 5
    while reg.get("sq_sleeping") == 0 and time.monotonic() < t_end:
        time.sleep(0.01)
    check(reg.get("sq_sleeping") == 1, "an idle daemon thread sleeps (sq_sleeping 1)")
    wake0 = reg.get("sq_wake")
    s = reg.submit(pid, 1, user_data=5)
    check(reg.get("sq_wake") != wake0, "the doorbell was rung (sq_wake bumped)")
    q = reg.wait(s)
    check(q is not None and q["status"] == 0, "the woken daemon completes it (%r)" % (q,))

    # a pipelined full ring
    seqs = [reg.submit(pid, 1 + i % 4, user_data=100 + i) for i in range(8)]
    qs = [reg.wait(x) for x in seqs]
    check(all(q is not None and q["status"] == 0 and q["user_data"] == 100 + i and
              q["batch"] == 1 + i % 4 for i, q in enumerate(qs)),
          "8 descriptors in flight (a full ring) complete in their slots")
    check(reg.get("sq_head") == seqs[-1], "sq_head == the last seq (%d)" % reg.get("sq_head"))

    # errors (section 15, "Errors in a descriptor")
    cases = [
        ("batch 0", dict(batch=0), -errno.EINVAL),
        ("batch 65537", dict(batch=65537), -errno.EINVAL),
        ("unknown flag 4", dict(flags=4), -errno.EINVAL),
        ("reserved at 44", dict(reserved0=1), -errno.EINVAL),
        ("reserved at 56", dict(reserved1=1), -errno.EINVAL),
        ("branch 1", dict(branch=1), -errno.EINVAL),
        ("unknown program", dict(program=7777777), -errno.ENOENT),
        ("unknown event", dict(wait_event=7777778), -errno.ENOENT),
        ("batch 9 above max_batch", dict(batch=9), -errno.ERANGE),
        ("wrong seq", dict(seq=12345), -errno.EPROTO),
    ]
    for what, kw, want in cases:
        args = dict(program=pid, batch=1, user_data=0xE000)
        args.update(kw)
        s = reg.submit(**args)
        q = reg.wait(s)
        if check(q is not None, "%s: a record" % what):
            check(q["status"] == want and q["seq"] == s and q["reason"] != "" and
                  q["user_data"] == 0xE000,
                  "%s: status %d, seq %d, a reason (got %d, %d, %r)" %
                  (what, want, s, q["status"], q["seq"], q["reason"]))
    s = reg.submit(pid, 2, user_data=7)
    q = reg.wait(s)
    check(q is not None and q["status"] == 0, "a good descriptor after the errors (%r)" % (q,))

    st, err = c.call("stats")
    if check(err is None, "stats"):
        me = [x for x in st["sessions"] if x["id"] == session]
        check(len(me) == 1 and me[0]["fastpath"] is True, "stats: this session has a region")
        check(st["fastpath_regions"] == 1, "stats: fastpath_regions 1")
        check(st["fastpath_replays"] >= 12, "stats: fastpath_replays (%d)" % st["fastpath_replays"])
        check(me and me[0]["errors"] >= len(cases), "stats: the session's errors (%r)" %
              (me[0]["errors"] if me else None))
    reg.close()
    c.s.close()
    for m in maps:
        m.close()
    print("%d passed, %d failed" % (PASSES, FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
