import re,sys,statistics as st
rows=[]
for line in open(sys.argv[1]):
    if 'iteration done' not in line: continue
    d=dict(re.findall(r'(\w+)=(\d+)',line.split('iteration done')[1]))
    rows.append({k:int(v) for k,v in d.items()})
def pct(v,p):
    v=sorted(v); return v[min(len(v)-1,int(p/100*len(v)))] if v else 0
def show(name,sel):
    rt=[r['round_trip_us'] for r in sel]; cu=[r['compute_us'] for r in sel]
    if not sel: return
    print(f"{name:28s} n={len(sel):5d} rt p50={pct(rt,50):6d} p90={pct(rt,90):6d} p99={pct(rt,99):6d} | compute p50={pct(cu,50):6d} p90={pct(cu,90):6d} p99={pct(cu,99):6d} | overhead p50={pct([a-b for a,b in zip(rt,cu)],50)} p99={pct([a-b for a,b in zip(rt,cu)],99)}")
show('all',rows)
show('decode only',[r for r in rows if r['prompt_tokens']==0])
show('with prompt',[r for r in rows if r['prompt_tokens']>0])
for lo,hi in [(1,8),(9,16),(17,24),(25,32),(33,64),(65,128),(129,256),(257,600)]:
    show(f'prompt {lo}-{hi}',[r for r in rows if lo<=r['prompt_tokens']<=hi])
for lo,hi in [(1,2),(3,4),(5,8),(9,16)]:
    show(f'decode-only bs {lo}-{hi}',[r for r in rows if r['prompt_tokens']==0 and lo<=r['decodes']<=hi])
# fraction of decode-carrying iterations that have prompt
dec=[r for r in rows if r['decodes']>0]
print('decode-carrying iterations with prompt tokens: %.1f%%'%(100*sum(1 for r in dec if r['prompt_tokens']>0)/max(1,len(dec))))
