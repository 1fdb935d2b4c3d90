# SPDX-License-Identifier: MIT
"""The PEP 517 build backend of the gfxgraph Python package.

It lives in the tree (pyproject.toml's ``backend-path``) and needs nothing
but the standard library, so ``pip install ./python`` works offline and in
a fresh venv: pip's isolated build environment has nothing to install.

The package is pure Python (it loads libgfxgraph-client with ctypes at
run time), so a wheel is a zip of ``gfxgraph/`` plus its ``.dist-info``.
The metadata comes from pyproject.toml's ``[project]`` table; the version is
the one ``project(gfxgraph VERSION ...)`` in the top-level CMakeLists.txt
sets (an sdist carries it in PKG-INFO), so the library, the Debian packages
and this package always agree.  The wheel's ``gfxgraph/_build_info.py``
records that version and no library path: the package finds the library
the way ``gfxgraph._lib`` describes.
"""

import base64
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile

__all__ = ["build_wheel", "build_sdist", "build_editable", "prepare_metadata_for_build_wheel",
           "prepare_metadata_for_build_editable", "get_requires_for_build_wheel",
           "get_requires_for_build_sdist", "get_requires_for_build_editable"]

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))   # python/
TAG = "py3-none-any"


def _toml_load(path):
    try:
        import tomllib
    except ImportError:
        try:
            import tomli as tomllib
        except ImportError:
            raise RuntimeError("building gfxgraph needs Python 3.11 or later (tomllib) or the "
                               "tomli module to read pyproject.toml") from None
    with open(path, "rb") as f:
        return tomllib.load(f)


def _version():
    """project(gfxgraph VERSION x.y.z) of the source tree, else PKG-INFO's
    Version (an unpacked sdist)."""
    cm = os.path.join(os.path.dirname(HERE), "CMakeLists.txt")
    if os.path.isfile(cm):
        with open(cm, encoding="utf-8") as f:
            m = re.search(r"^project\(gfxgraph\s+VERSION\s+([0-9][0-9.]*)", f.read(), re.M)
        if m:
            return m.group(1)
        raise RuntimeError("%s has no project(gfxgraph VERSION ...)" % cm)
    pkg_info = os.path.join(HERE, "PKG-INFO")
    if os.path.isfile(pkg_info):
        with open(pkg_info, encoding="utf-8") as f:
            m = re.search(r"^Version:\s*(\S+)", f.read(), re.M)
        if m:
            return m.group(1)
    raise RuntimeError("no version: neither %s nor %s" % (cm, pkg_info))


def _license_file():
    for p in (os.path.join(os.path.dirname(HERE), "LICENSE"), os.path.join(HERE, "LICENSE")):
        if os.path.isfile(p):
            return p
    return None


def _project():
    return _toml_load(os.path.join(HERE, "pyproject.toml"))["project"]


def _metadata(version):
    p = _project()
    lines = ["Metadata-Version: 2.1", "Name: " + p["name"], "Version: " + version,
             "Summary: " + p["description"]]
    lic = p.get("license", {})
    if "text" in lic:
        lines.append("License: " + lic["text"])
    if _license_file():
        lines.append("License-File: LICENSE")
    for c in p.get("classifiers", []):
        lines.append("Classifier: " + c)
    if "requires-python" in p:
        lines.append("Requires-Python: " + p["requires-python"])
    for d in p.get("dependencies", []):
        lines.append("Requires-Dist: " + d)
    for extra, deps in sorted(p.get("optional-dependencies", {}).items()):
        lines.append("Provides-Extra: " + extra)
        for d in deps:
            lines.append('Requires-Dist: %s; extra == "%s"' % (d, extra))
    body = ""
    readme = p.get("readme")
    if readme:
        lines.append("Description-Content-Type: text/markdown")
        with open(os.path.join(HERE, readme), encoding="utf-8") as f:
            body = f.read()
    return "\n".join(lines) + "\n\n" + body


def _entry_points():
    eps = _project().get("entry-points", {})
    out = []
    for group, items in sorted(eps.items()):
        out.append("[%s]" % group)
        out.extend("%s = %s" % kv for kv in sorted(items.items()))
        out.append("")
    return "\n".join(out)


def _build_info(version):
    return ('# Written by the wheel build (python/build_backend): the version of the\n'
            '# source tree it came from.  No library path: gfxgraph._lib looks for\n'
            '# libgfxgraph-client itself (GFXGRAPH_LIB, the system loader, the usual\n'
            '# install directories).\n'
            'VERSION = "%s"\n' % version)


def _package_files():
    """(archive name, path) of every file of the package, sorted."""
    root = os.path.join(HERE, "gfxgraph")
    out = []
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if x != "__pycache__")
        for f in sorted(files):
            if f.endswith(".py") or f == "py.typed":
                if f == "_build_info.py":
                    continue
                path = os.path.join(d, f)
                out.append((os.path.relpath(path, HERE).replace(os.sep, "/"), path))
    return out


def _dist_info_name(version):
    return "%s-%s.dist-info" % (_project()["name"].replace("-", "_"), version)


def _dist_info_files(version):
    """(name, bytes) of the .dist-info files other than RECORD."""
    files = [("METADATA", _metadata(version).encode()),
             ("WHEEL", ("Wheel-Version: 1.0\nGenerator: gfxgraph_build\n"
                        "Root-Is-Purelib: true\nTag: %s\n" % TAG).encode())]
    eps = _entry_points()
    if eps:
        files.append(("entry_points.txt", eps.encode()))
    lic = _license_file()
    if lic:
        with open(lic, "rb") as f:
            files.append(("LICENSE", f.read()))
    return files


def _epoch():
    # zip timestamps cannot be before 1980; SOURCE_DATE_EPOCH for reproducible builds
    return max(int(os.environ.get("SOURCE_DATE_EPOCH", time.time())), 315532800)


class _Wheel:
    def __init__(self, path):
        self.zf = zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED)
        self.record = []
        self.date = time.gmtime(_epoch())[:6]

    def add(self, name, data):
        info = zipfile.ZipInfo(name, self.date)
        info.external_attr = 0o644 << 16
        info.compress_type = zipfile.ZIP_DEFLATED
        self.zf.writestr(info, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        self.record.append("%s,sha256=%s,%d" % (name, digest, len(data)))

    def close(self, record_name):
        self.record.append(record_name + ",,")
        info = zipfile.ZipInfo(record_name, self.date)
        info.external_attr = 0o644 << 16
        self.zf.writestr(info, "\n".join(self.record) + "\n")
        self.zf.close()


def _write_wheel(wheel_directory, editable):
    version = _version()
    name = "%s-%s-%s.whl" % (_project()["name"].replace("-", "_"), version, TAG)
    w = _Wheel(os.path.join(wheel_directory, name))
    if editable:
        # a .pth naming python/: the installed package is the source tree's
        w.add("gfxgraph_editable.pth", (HERE + "\n").encode())
    else:
        for arc, path in _package_files():
            with open(path, "rb") as f:
                w.add(arc, f.read())
        w.add("gfxgraph/_build_info.py", _build_info(version).encode())
    di = _dist_info_name(version)
    for fname, data in _dist_info_files(version):
        w.add(di + "/" + fname, data)
    w.close(di + "/RECORD")
    return name


# ---- PEP 517 / PEP 660 hooks ----------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    version = _version()
    di = _dist_info_name(version)
    os.makedirs(os.path.join(metadata_directory, di), exist_ok=True)
    for fname, data in _dist_info_files(version):
        with open(os.path.join(metadata_directory, di, fname), "wb") as f:
            f.write(data)
    return di


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, editable=False)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    return _write_wheel(wheel_directory, editable=True)


def build_sdist(sdist_directory, config_settings=None):
    version = _version()
    base = "%s-%s" % (_project()["name"].replace("-", "_"), version)
    name = base + ".tar.gz"
    mtime = _epoch()

    def add(tf, arc, data, mode=0o644):
        info = tarfile.TarInfo(base + "/" + arc)
        info.size, info.mtime, info.mode = len(data), mtime, mode
        tf.addfile(info, io.BytesIO(data))

    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as tf:
        for arc in ("pyproject.toml", "README.md", "build_backend/gfxgraph_build.py"):
            with open(os.path.join(HERE, arc), "rb") as f:
                add(tf, arc, f.read())
        for arc, path in _package_files():
            with open(path, "rb") as f:
                add(tf, arc, f.read())
        lic = _license_file()
        if lic:
            with open(lic, "rb") as f:
                add(tf, "LICENSE", f.read())
        add(tf, "PKG-INFO", _metadata(version).encode())
    return name
