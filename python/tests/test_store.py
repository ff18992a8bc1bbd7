"""cohort.Store against an in-process cohort.StoreServer (one process)."""
import threading
import time

import pytest

import cohort

JOB, TOKEN = "pytest-job", "s3cret-token-for-tests"


@pytest.fixture
def server():
    with cohort.StoreServer(JOB, TOKEN) as s:
        yield s


def url(server):
    return f"127.0.0.1:{server.port}"


def test_every_call(server):
    with cohort.Store(url(server), JOB, TOKEN) as s:
        s.set("a", b"1")
        s.set(b"bin\x00key", bytearray(b"\x00\xff"))
        assert s.get("a") == b"1"
        assert s.get(b"bin\x00key") == b"\x00\xff"
        assert s.add("n", 5) == 5 and s.add("n", -2) == 3
        # compare_set: create when missing, swap when equal, report when not
        assert s.compare_set("cs", None, b"x") == b"x"
        assert s.compare_set("cs", b"x", b"y") == b"y"
        assert s.compare_set("cs", b"nope", b"z") == b"y"
        assert s.check(["a", "n"]) and not s.check(["a", "missing"])
        s.wait(["a", "cs"], timeout=1)
        s.append("log", b"ab")
        s.append("log", b"cd")
        assert s.get("log") == b"abcd"
        assert s.list("") == sorted(["a", "bin\x00key", "n", "cs", "log"])
        assert s.num_keys() == 5
        assert s.delete("a") and not s.delete("a")
        p = s.prefixed("sub/")
        p.set("k", b"v")
        assert s.get("sub/k") == b"v"
        p.close()


def test_get_waits_for_a_later_set(server):
    with cohort.Store(url(server), JOB, TOKEN) as s, cohort.Store(url(server), JOB, TOKEN) as s2:
        setter = threading.Timer(0.3, s2.set, args=("late", b"here"))
        # t0 before the timer starts: the set comes >= 0.3 s after t0 however
        # late this thread runs on (taken after start, a thread descheduled
        # for 0.15 s there measured 0.16 s)
        t0 = time.monotonic()
        setter.start()
        assert s.get("late", timeout=10) == b"here"
        assert 0.2 < time.monotonic() - t0 < 5
        setter.join()  # its set may still await the reply: close s2 after it


def test_timeout(server):
    with cohort.Store(url(server), JOB, TOKEN) as s:
        with pytest.raises(cohort.CohortTimeoutError) as e:
            s.get("never", timeout=0.2)
        assert isinstance(e.value, TimeoutError)
        assert e.value.status_name == "COHORT_ERR_TIMEOUT"
        with pytest.raises(cohort.CohortTimeoutError):
            s.wait(["never"], timeout=0.2)


def test_barrier_between_threads(server):
    done = []

    def member(i):
        with cohort.Store(url(server), JOB, TOKEN) as s:
            s.barrier("b1", 3, timeout=10)
            done.append(i)
    ts = [threading.Thread(target=member, args=(i,)) for i in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(20)
    assert sorted(done) == [0, 1, 2]


def test_wrong_token_is_refused(server):
    with pytest.raises(cohort.AuthError) as e:
        cohort.Store(url(server), JOB, "not-the-token", timeout=2)
    assert e.value.status == 6


def test_no_server(server):
    port = server.port
    server.stop()
    with pytest.raises((cohort.StoreError, cohort.CohortTimeoutError)):
        cohort.Store(f"127.0.0.1:{port}", JOB, TOKEN, timeout=0.5)


def test_closed_store_and_bad_keys(server):
    s = cohort.Store(url(server), JOB, TOKEN)
    with pytest.raises(TypeError):
        s.set(1, b"x")
    s.close()
    with pytest.raises(cohort.InvalidArgumentError):
        s.get("a")


def test_store_errors_after_server_stops(server):
    s = cohort.Store(url(server), JOB, TOKEN)
    s.set("k", b"v")
    server.stop()
    with pytest.raises(cohort.StoreError):
        s.get("k", timeout=1)
    s.close()
