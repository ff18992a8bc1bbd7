# cohort-perf --json on stdin -> "side pair c2c op in_place size avg p50 p99" rows
# (ab.sh's format), argv: side pair c2c; used by near_ab2.sh and near_big.sh
import json, sys
d = json.load(sys.stdin)
for x in d["results"]:
    print(sys.argv[1], sys.argv[2], sys.argv[3], x["op"], int(bool(x["in_place"])), x["size"],
          "%.3f %.3f %.3f" % (x["avg_us"], x["p50_us"], x["p99_us"]))
