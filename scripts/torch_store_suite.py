#!/usr/bin/env python3
"""Runs the TCPStore cases of PyTorch's own test/distributed/test_store.py
against cohort-store's TCPStore listener (docs/torch-store.md#torchs-own-tests).

usage: torch_store_suite.py COHORT_STORE PATH/TO/test_store.py [unittest -k patterns...]

Every TCPStore the tests create as the master (is_master=True) is replaced
by a client of a fresh cohort-store (one per store, so each test starts from
an empty keyspace, as with torch's server); clients of it (is_master=False,
the same port) are torch's unchanged client. Nothing of the test file is
changed: it is loaded from the given path. Prints one line per case and the
counts; exit 0 when every selected case passed.
"""
import atexit
import importlib.util
import inspect
import os
import subprocess
import sys
import unittest

STORE, TEST = sys.argv[1], sys.argv[2]
os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

REAL = dist.TCPStore
SERVERS = []
LOG = open(os.environ.get("COHORT_SUITE_LOG", os.devnull), "a")


def cohort_store():
    p = subprocess.Popen([STORE, "--listen", "127.0.0.1:0", "--torch-listen", "127.0.0.1:0"],
                         stdout=subprocess.PIPE, stderr=LOG, text=True,
                         env=dict(os.environ, COHORT_LOG="warn"))
    p.stdout.readline()
    line = p.stdout.readline()
    if not line.startswith("torch listening on"):
        raise RuntimeError(f"cohort-store did not start: {line!r}")
    SERVERS.append(p)
    return int(line.rsplit(":", 1)[1])


@atexit.register
def _stop():
    for p in SERVERS:
        p.terminate()
    for p in SERVERS:
        p.wait()


_SIG = inspect.signature(lambda host_name, port, world_size=None, is_master=False,
                         timeout=None, wait_for_workers=True, multi_tenant=False,
                         master_listen_fd=None, use_libuv=None: None)


def TCPStore(*args, **kw):
    b = _SIG.bind(*args, **kw)
    b.apply_defaults()
    a = dict(b.arguments)
    if not a["is_master"]:
        return REAL(*args, **kw)
    # The master: cohort-store serves, torch's client talks to it.
    port = cohort_store()
    opts = {"is_master": False, "wait_for_workers": a["wait_for_workers"]}
    if a["timeout"] is not None:
        opts["timeout"] = a["timeout"]
    if a["use_libuv"] is not None:
        opts["use_libuv"] = a["use_libuv"]
    if a["world_size"] is not None:
        opts["world_size"] = a["world_size"]
    return REAL(a["host_name"], port, **opts)


# Every name under which the tests and torch's helpers reach the class.
dist.TCPStore = TCPStore
for modname in ("torch.distributed.rendezvous", "torch.distributed.distributed_c10d"):
    m = sys.modules.get(modname) or importlib.import_module(modname)
    if getattr(m, "TCPStore", None) is REAL:
        m.TCPStore = TCPStore

spec = importlib.util.spec_from_file_location("torch_test_store", TEST)
mod = importlib.util.module_from_spec(spec)
sys.argv = [TEST]
spec.loader.exec_module(mod)

# The TCPStore cases: classes whose stores are TCPStores.
CLASSES = ["TCPStoreTest", "LibUvTCPStoreTest", "PrefixTCPStoreTest", "RendezvousTCPTest",
           "RendezvousEnvTest", "TimeoutTest", "TestMultiThreadedWait"]
loader = unittest.TestLoader()
suite = unittest.TestSuite()
for name in CLASSES:
    cls = getattr(mod, name, None)
    if cls is None:
        print(f"(no class {name} in this test_store.py)")
        continue
    for t in loader.loadTestsFromTestCase(cls):
        tid = t.id().split(".", 1)[1]
        if name == "TestMultiThreadedWait" and "tcp" not in tid:
            continue
        suite.addTest(t)


class Result(unittest.TextTestResult):
    def addSuccess(self, test):
        super().addSuccess(test)
        print(f"PASS {test.id().split('.', 1)[1]}", flush=True)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        print(f"FAIL {test.id().split('.', 1)[1]}: {str(err[1]).splitlines()[0][:200]}",
              flush=True)

    def addError(self, test, err):
        super().addError(test, err)
        print(f"ERROR {test.id().split('.', 1)[1]}: {str(err[1]).splitlines()[0][:200]}",
              flush=True)

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        print(f"SKIP {test.id().split('.', 1)[1]}: {reason}", flush=True)


r = unittest.TextTestRunner(stream=open(os.devnull, "w"), resultclass=Result,
                            verbosity=0).run(suite)
n_fail = len(r.failures) + len(r.errors)
print(f"torch {torch.__version__}: {r.testsRun} cases, {r.testsRun - n_fail - len(r.skipped)} "
      f"passed, {len(r.failures)} failed, {len(r.errors)} errors, {len(r.skipped)} skipped")
sys.exit(1 if n_fail else 0)
