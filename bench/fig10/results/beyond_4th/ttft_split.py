# TTFT decomposition per (config, rate) from a sweep dir with --log-level=info logs:
# client ttft (requests.csv) vs gateway first_output_ms vs scheduler ttft_ms.
import csv,re,sys,os,glob,statistics as st
d=sys.argv[1]
def blocks(path, marker):
    out=[]; cur=None
    for line in open(path, errors='replace'):
        if marker in line:
            cur=[]; out.append(cur); continue
        if cur is not None: cur.append(line)
    return out
def p(v,q): v=sorted(v); return v[min(len(v)-1,int(q/100*len(v)))] if v else float('nan')
for cfgdir in sorted(glob.glob(f'{d}/*/')):
    cfg=os.path.basename(cfgdir.rstrip('/'))
    if cfg=='logs': continue
    rates=sorted([x for x in os.listdir(cfgdir) if x.startswith('rate-')], key=lambda x: float(x[5:]))
    sb=blocks(f'{d}/logs/{cfg}/scheduler.log','engine pipeline ready')
    gwl=[l for l in open(f'{d}/logs/{cfg}/gateway.log', errors='replace') if 'request finished' in l]
    gw={}
    for l in gwl:
        kv=dict(re.findall(r'(\w+)=(\S+)',l)); gw[kv['request_id']]=kv
    for bi,rate in enumerate(rates):
        if bi>=len(sb): break
        sch={}
        for l in sb[bi]:
            if 'request finished' not in l: continue
            kv=dict(re.findall(r'(\w+)=(\S+)',l)); sch[int(kv['engine_request_id'])]=kv
        rows=[]
        for r in csv.DictReader(open(f'{cfgdir}/{rate}/requests.csv')):
            i=int(r['index'])+3
            if r['outcome']!='ok' or i not in sch: continue
            s=sch[i]
            if int(s['prompt_tokens'])!=int(r['prompt_tokens']): continue
            g=gw.get(s['request_id'])
            if g is None or 'first_output_ms' not in g: continue
            rows.append((float(r['ttft_s'])*1e3, float(g['first_output_ms']), float(s['ttft_ms'])))
        if not rows: continue
        c=[x[0] for x in rows]; g=[x[1] for x in rows]; s=[x[2] for x in rows]
        print(f"{cfg:40s} {rate:9s} n={len(rows):3d} client {p(c,50):6.2f} | gateway {p(g,50):6.2f} | scheduler {p(s,50):6.2f} | HTTP {p([a-b for a,b,_ in rows],50):5.2f} | hops {p([b-x for _,b,x in rows],50):5.2f}  (p50 ms)")
