# groups.py: exclusive instructions per call (N2 run / calls) of cohort's code by part, main vs lane2
# from the <op>.excl.<rank>.<build>.txt files of cg_percall.sh (clock pinned, cgall.sh)
import re, sys
parts = [("api", r"src/group/api\.c"), ("engine", r"src/engine/"), ("trace", r"src/trace/"),
         ("select", r"src/coll/select\.c"), ("algos", r"src/coll/algos\.c|src/coll/lane\.h"),
         ("clock", r"util\.c:coh_trace_us|clock_gettime|vdso"),
         ("shm", r"src/(coll|transport)/shm/|shm_seg\.h|contract/hdr\.h|sched_getcpu"),
         ("reduce", r"src/reduce/")]
print("op rank build: " + " ".join(p for p, _ in parts) + " | entry (api..algos)")
for op in ["broadcast", "scatter", "gather", "reduce", "all_reduce"]:
    for r in ["rank0", "rank1"]:
        for b in ["main", "lane2", "lane2b"]:
            acc = dict.fromkeys([p for p, _ in parts], 0.0)
            for line in open(f"{op}.excl.{r}.{b}.txt"):
                m = re.match(r"\s*([\d.]+)\s+(.*)", line)
                if not m or "=>" in line or "PROGRAM" in line: continue
                for p, rx in parts:
                    if re.search(rx, m.group(2)):
                        acc[p] += float(m.group(1)); break
            e = sum(acc[p] for p in ["api", "engine", "trace", "select", "algos"])
            print(f"{op:10s} {r} {b:5s}: " + " ".join(f"{acc[p]:6.0f}" for p, _ in parts) + f" | {e:5.0f}")
