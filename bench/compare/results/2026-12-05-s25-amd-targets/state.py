import sys, os, re, glob, statistics as st
sys.path.insert(0, '/work/main/bench/compare')
import summarize as S, hoststate as H
R = sys.argv[1]; cfgs = sys.argv[2].split(','); cells = [(c.split(':')[0], int(c.split(':')[1])) for c in sys.argv[3].split(',')]
def state(path):
    b = a = None
    for line in open(path):
        m = re.match(r'# c2c (before|after): c2c \d+ \d+ (\d+)', line)
        if m:
            if m.group(1) == 'before': b = float(m.group(2))
            else: a = float(m.group(2))
    if b is None or a is None: return '?'
    cb, ca = H.cls(b), H.cls(a)
    return cb if cb == ca else 'mixed'
for cfg in cfgs:
    rows = {}
    for path in sorted(glob.glob(f'{R}/raw/{cfg}/*.txt')):
        m = re.match(r'^([a-z_]+)\.(\d+)\.txt$', os.path.basename(path))
        if not m: continue
        lib = m.group(1); js = path[:-4] + '.json'
        d = S.load_cohort_json(js) if os.path.exists(js) else S.load_peer_txt(path)
        if not d: continue
        s = state(path)
        for (op, b) in cells:
            recs = d.get((op, b))
            if recs: rows.setdefault((op, b), []).append((lib, s, recs[0]['lat']))
    for (op, b), rs in rows.items():
        out = f'{cfg} {op} {b}:'
        for s in ('fast', 'mid', 'slow', 'mixed'):
            parts = []
            for lib in ('cohort', 'ompi', 'mpich'):
                xs = sorted(x for l, ss, x in rs if l == lib and ss == s)
                if xs: parts.append(f'{lib} {st.median(xs):.3g} (n{len(xs)})')
            if parts: out += f'\n   {s:5}: ' + ', '.join(parts)
        print(out)
