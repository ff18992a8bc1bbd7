#!/usr/bin/env python3
"""Regenerates the checked-in flight-recorder dumps used by test_tools_trace.

Each scenario is a directory of <job>-rank<R>.jsonl files in the exact
format src/trace/dump.c writes (docs/trace.md). Timestamps are fixed so the
expected outputs are stable. Run from this directory: python3 make_data.py
"""
import json
import os
import shutil

BASE = 1700000000000000  # wall clock, microseconds
JOB = "train-42"


def header(rank, size, reason, t, recorded, gen=1, group=0, capacity=2048):
    return {"cohort_trace": 1, "job": JOB, "rank": rank, "size": size, "generation": gen,
            "group": group, "host": "node1", "pid": 1000 + rank, "reason": reason,
            "time_us": t, "capacity": capacity, "recorded": recorded}


def entry(seq, op, count, line, state="completed", status="COHORT_OK", rank=0, file="train.c",
          dtype="float32", redop="sum", root=-1, tag=0, t=None, dur=300):
    t0 = t if t is not None else BASE + seq * 10000 + rank * 7
    if op in ("barrier", "send", "recv", "broadcast", "all_gather"):
        redop = None
    if op == "barrier":
        count = 0
    done = state in ("completed", "failed")
    return {"seq": seq, "op": op, "dtype": dtype, "count": count, "redop": redop, "root": root,
            "tag": tag, "file": "/home/user/proj/" + file, "line": line, "state": state,
            "status": status, "t_issue_us": t0,
            "t_start_us": t0 + 5 if state != "issued" else 0,
            "t_end_us": t0 + dur if done else 0}


def loop(seq, rank, **kw):
    """Iteration body: odd calls at train.c:88 (1024), even at train.c:91 (2048)."""
    return entry(seq, "all_reduce", 1024 if seq % 2 else 2048, 88 if seq % 2 else 91, rank=rank,
                 **kw)


def write(scn, rank, hdr, entries, raw_tail=None, name=None):
    os.makedirs(scn, exist_ok=True)
    path = os.path.join(scn, name or f"{JOB}-rank{rank}.jsonl")
    with open(path, "w") as f:
        f.write(json.dumps(hdr, separators=(",", ":")) + "\n")
        for e in entries:
            if isinstance(e, str):
                f.write(e)  # deliberately damaged text
            else:
                f.write(json.dumps(e, separators=(",", ":")) + "\n")
        if raw_tail:
            f.write(raw_tail)


def main():
    for d in os.listdir("."):
        if os.path.isdir(d):
            shutil.rmtree(d)
    T = BASE + 200000

    # consistent: 4 ranks, 12 calls each, dumped on SIGUSR1.
    for r in range(4):
        write("consistent", r, header(r, 4, "SIGUSR1", T, 12), [loop(s, r) for s in range(1, 13)])

    # count_mismatch: rank 3 calls all_reduce #7 with 512 elements from line 90.
    for r in range(4):
        es = [loop(s, r) for s in range(1, 7)]
        if r == 3:
            es.append(entry(7, "all_reduce", 512, 90, "failed", "COHORT_ERR_CONTRACT", rank=r))
        else:
            es.append(loop(7, r, state="failed", status="COHORT_ERR_CONTRACT"))
        write("count_mismatch", r, header(r, 4, "all_reduce #7 (train.c:88): count differs: "
                                          "ranks 0-2 have 1024, rank 3 has 512 - look at rank 3's "
                                          "call at train.c:90", T, 7), es)

    # extra_call: async calls; rank 3 made an extra barrier (train.c:95) at #7.
    for r in range(4):
        es = [loop(s, r) for s in range(1, 7)]
        if r == 3:
            es.append(entry(7, "barrier", 0, 95, "failed", "COHORT_ERR_CONTRACT", rank=r))
            es.append(loop(8, r, state="failed", status="COHORT_ERR_ABORTED"))
            es[-1]["count"], es[-1]["line"] = 1024, 88
            es.append(loop(9, r, state="failed", status="COHORT_ERR_ABORTED"))
            es[-1]["count"], es[-1]["line"] = 2048, 91
        else:
            es.append(loop(7, r, state="failed", status="COHORT_ERR_CONTRACT"))
            es.append(loop(8, r, state="failed", status="COHORT_ERR_ABORTED"))
        write("extra_call", r, header(r, 4, "contract", T, len(es)), es)

    # missing_rank: rank 2 was killed; the others lost it during #7.
    for r in (0, 1, 3):
        es = [loop(s, r) for s in range(1, 7)]
        es.append(loop(7, r, state="failed", status="COHORT_ERR_PEER_LOST"))
        write("missing_rank", r, header(r, 4, "rank 2 (host node1, pid 1002) lost: connection "
                                        "closed", T, 7), es)

    # truncated: a consistent run, but rank 1's dump was damaged in transit
    # (a garbage line, a cut last line) and a stray file has no header.
    for r in range(4):
        es = [loop(s, r) for s in range(1, 13)]
        tail = None
        if r == 1:
            es.insert(5, "@@@ this is not json @@@\n")
            cut = json.dumps(es.pop(), separators=(",", ":"))
            tail = cut[: len(cut) // 2]  # no newline: the copy stopped here
        write("truncated", r, header(r, 4, "SIGUSR1", T, 12), es, raw_tail=tail)
    with open("truncated/notes.jsonl", "w") as f:
        f.write("these are my notes, not a dump\n")

    # stall: rank 3 never issued #7 (busy elsewhere); the others wait in it.
    for r in range(4):
        es = [loop(s, r) for s in range(1, 7)]
        if r != 3:
            es.append(loop(7, r, state="started", status="COHORT_OK"))
        write("stall", r, header(r, 4, "SIGUSR1", T, len(es)), es)

    # p2p_deadlock: both ranks of a pipeline stage wait to receive first.
    for r in range(2):
        es = [loop(s, r) for s in range(1, 4)]
        es.append(entry(1, "recv", 64, 20, "started", rank=r, file="pipe.c", dtype="float32",
                        root=1 - r, tag=3))
        write("p2p_deadlock", r, header(r, 2, "SIGUSR1", T, len(es)), es)


if __name__ == "__main__":
    main()
