# SPDX-License-Identifier: MIT
"""gfxgraph.Error: every failure the package reports."""

import errno as _errno
from typing import Any, Optional, Tuple


class Error(Exception):
    """A failure of a gfxgraph call.

    ``code`` is the symbolic code: the daemon's (``"EINVAL"``, ``"ENOENT"``,
    ... as in proto/PROTOCOL.md section 7), or the client library's local
    errno name (``"ENOTCONN"``, ``"ECONNREFUSED"``, ...), or ``"ELIBACC"``
    when libgfxgraph-client cannot be loaded.  ``message`` is for people;
    ``errno`` is the positive errno value when there is one (else 0).
    """

    def __init__(self, code: Optional[str], message: Optional[str], errno: int = 0) -> None:
        self.code: str = code or "EIO"
        self.message: str = message or ""
        if not errno:
            errno = getattr(_errno, self.code, 0)
        self.errno: int = errno
        super().__init__("%s: %s" % (self.code, self.message) if self.message else self.code)

    def __reduce__(self) -> Tuple[Any, Tuple[str, str, int]]:
        return (type(self), (self.code, self.message, self.errno))


def from_client(lib: Any, c: Any, rc: int, what: Optional[str] = None) -> "Error":
    """The Error for a failed call (rc < 0) on client c: the client's last
    error code and message, read right after the call."""
    code = lib.gg_client_last_error_code(c) if c else None
    msg = lib.gg_client_last_error(c) if c else None
    code = code.decode("utf-8", "replace") if code else ""
    msg = msg.decode("utf-8", "replace") if msg else ""
    if not code:
        code = _errno.errorcode.get(-rc, "EIO")
    if not msg:
        import os
        msg = os.strerror(-rc) if rc < 0 else "failed"
    if what:
        msg = "%s: %s" % (what, msg)
    return Error(code, msg, -rc if rc < 0 else 0)
