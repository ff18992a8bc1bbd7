import json, sys
d = json.load(sys.stdin)
for x in d["results"]:
    if x["in_place"]: continue
    print(sys.argv[1], sys.argv[2], x["op"], x["size"], "%.3f %.3f" % (x["p50_us"], x["p99_us"]))
