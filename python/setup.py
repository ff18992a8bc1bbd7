"""Builds cohort._cohort against the libcohort of this repository.

The library is configured and built with the repository's own CMake (a
position-independent static libcohort.a, no tests, no tools) under the
setuptools build directory, and linked into the extension. COHORT_SOURCE_DIR
points at another checkout; COHORT_CMAKE_ARGS adds CMake arguments;
COHORT_BUILD_JOBS sets the build's parallelism (default: the CPU count);
COHORT_LIB_BUILD_DIR puts libcohort's build elsewhere (e.g. a sanitizer build).
"""
import os
import shlex
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.environ.get("COHORT_SOURCE_DIR") or os.path.join(HERE, ".."))


def pkg_config(*args):
    try:
        out = subprocess.run(["pkg-config", *args], check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return shlex.split(out.stdout)


class CMakeBuildExt(build_ext):
    def run(self):
        if not os.path.exists(os.path.join(ROOT, "include", "cohort.h")):
            sys.exit(f"cohort: no libcohort sources at {ROOT} (set COHORT_SOURCE_DIR)")
        bdir = os.environ.get("COHORT_LIB_BUILD_DIR") or os.path.join(
            os.path.abspath(self.build_temp), "libcohort")
        os.makedirs(bdir, exist_ok=True)
        etcd = pkg_config("--exists", "libcurl", "jansson") is not None
        cfg = ["cmake", "-S", ROOT, "-B", bdir, "-DCMAKE_BUILD_TYPE=Release",
               "-DCOHORT_TESTS=OFF", "-DCOHORT_TOOLS=OFF", "-DCOHORT_FUZZ=OFF",
               "-DCOHORT_PYTHON_CHECK=OFF",
               "-DCOHORT_SANITIZER=", f"-DCOHORT_ETCD={'ON' if etcd else 'OFF'}"]
        cfg += shlex.split(os.environ.get("COHORT_CMAKE_ARGS", ""))
        jobs = os.environ.get("COHORT_BUILD_JOBS") or str(os.cpu_count() or 2)
        subprocess.run(cfg, check=True, stdout=subprocess.DEVNULL)
        subprocess.run(["cmake", "--build", bdir, "-j", jobs, "--target", "cohort_static"],
                       check=True)
        libs = ["libsodium"] + (["libcurl", "jansson"] if etcd else [])
        link = pkg_config("--libs", *libs)
        if link is None:
            sys.exit("cohort: pkg-config cannot find " + " ".join(libs))
        for ext in self.extensions:
            ext.include_dirs += [os.path.join(ROOT, "include")]
            ext.extra_objects += [os.path.join(bdir, "libcohort.a")]
            # libcohort's symbols stay private to the extension
            ext.extra_link_args += ["-Wl,--exclude-libs,ALL"] + link + ["-pthread"]
        # one build directory serves every interpreter (same tag, e.g. cp311):
        # always recompile the extension against the running one's headers
        self.force = True
        super().run()


ext = Extension(
    "cohort._cohort",
    sources=[os.path.join("src", f) for f in
             ("module.c", "errors.c", "buffer.c", "group.c", "interrupt.c", "store.c",
              "check.c")],
    depends=[os.path.join("src", "cohort_py.h")],
    extra_compile_args=["-std=c11", "-D_GNU_SOURCE", "-Wall", "-Wextra", "-Werror",
                        "-Wno-unused-parameter", "-Wno-missing-field-initializers",
                        "-Wno-cast-function-type"],
)

setup(ext_modules=[ext], cmdclass={"build_ext": CMakeBuildExt})
