"""setup.py — builds the maskpos wheel with libmaskpos.so inside it (read by pyproject.toml's
setuptools backend; the metadata is in pyproject.toml).

The shared library comes from, in this order:
  - $MASKPOS_BUILD_LIB: a libmaskpos.so.0 built beforehand (copied as it is);
  - the maskpos source tree this folder sits in (python/..): `make build/libmaskpos.so` there (the
    objects make already built are reused; BUILD=... in the environment picks another folder).
It is copied into the package as maskpos/libmaskpos.so.0, where maskpos/_lib.py looks after
$MASKPOS_LIB. The wheel is platform-specific (linux_x86_64 / aarch64); the library links Debian's
cairo, jansson, pcre2, utf8proc and libgomp, which must be installed where it runs.

    python3 -m venv --system-site-packages .venv
    .venv/bin/pip install --no-build-isolation --no-index ./python       (offline; README.md)
    python3 -m pip wheel --no-build-isolation --no-index ./python -w dist
"""
import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution

HERE = os.path.dirname(os.path.abspath(__file__))


def _library():
    pre = os.environ.get("MASKPOS_BUILD_LIB")
    if pre:
        if not os.path.isfile(pre):
            raise SystemExit("maskpos setup: MASKPOS_BUILD_LIB=%s: no such file" % pre)
        return pre
    root = os.path.dirname(HERE)
    if not os.path.isfile(os.path.join(root, "Makefile")) or not os.path.isdir(os.path.join(root, "src")):
        raise SystemExit("maskpos setup: not inside the maskpos source tree (no ../Makefile); build libmaskpos.so "
                         "with `make` there and set MASKPOS_BUILD_LIB=/path/to/libmaskpos.so.0")
    build = os.environ.get("BUILD", "build")
    jobs = os.environ.get("MASKPOS_MAKE_JOBS", "2")
    cmd = ["make", "-C", root, "-j" + jobs, "BUILD=" + build, build + "/libmaskpos.so"]
    print("maskpos setup: " + " ".join(cmd))
    subprocess.run(cmd, check=True)
    return os.path.realpath(os.path.join(root, build, "libmaskpos.so"))


class BuildPyWithLibrary(build_py):
    """The Python files, then the shared library beside them."""

    def run(self):
        super().run()
        lib = _library()
        dst = os.path.join(self.build_lib, "maskpos", "libmaskpos.so.0")
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copyfile(lib, dst)
        os.chmod(dst, 0o755)


class BinaryDistribution(Distribution):
    """A wheel with a compiled library: tagged for this platform, never 'any'."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build_py": BuildPyWithLibrary}, distclass=BinaryDistribution)
