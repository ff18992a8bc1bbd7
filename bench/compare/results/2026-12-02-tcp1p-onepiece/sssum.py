import re,sys
for f in sys.argv[1:]:
    D={}
    for l in open(f):
        x=l.split()
        if len(x)<5: continue
        key=(x[2],x[3]); rq,sq=int(x[0]),int(x[1])
        m=re.search(r'skmem:\(r\d+,rb(\d+),t\d+,tb(\d+)',l); rb,tb=(int(m.group(1)),int(m.group(2))) if m else (0,0)
        D.setdefault(key,[]).append((rq,sq,rb,tb))
    print("==",f)
    def q(v):
        v=sorted(v); return f"p10={v[len(v)//10]} p50={v[len(v)//2]} p90={v[int(len(v)*.9)]} max={v[-1]}"
    for k,v in D.items():
        if len(v)<20: continue
        print(k,len(v)); 
        for i,n in enumerate(("RecvQ","SendQ","rb","tb")): print("   ",n,q([t[i] for t in v]))
