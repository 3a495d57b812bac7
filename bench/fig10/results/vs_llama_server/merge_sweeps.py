#!/usr/bin/env python3
# Used for the decode-heavy runs of the twenty-second session (bench/README.md): a low-rate sweep with
# 16 requests a point and a high-rate one with 48, merged (the later file wins a rate both hold).
#   python3 merge_sweeps.py LOW/sweep.csv HIGH/sweep.csv
"""Merge sweep.csv files of orca bench sweep (same model, same trace, different rates) and
apply the sweep's own rule (core/loadgen/sweep_curve.cc): floor = lowest p50 normalized latency of
the baseline curves (llama-server); per target, best throughput at p50 <= target per system, points
in increasing rate, linear interpolation on a segment that crosses the target."""
import csv, sys, collections
curves = collections.defaultdict(dict)
for path in sys.argv[1:]:
    for r in csv.DictReader(open(path)):
        curves[r['label']][float(r['arrival_rate'])] = (float(r['throughput_rps']), float(r['norm_latency_p50_s']), r['completed'], r['failed'])
def at(points, target):
    best = None
    for i, (tp, lat) in enumerate(points):
        if lat <= target: best = max(best or 0, tp)
        if i + 1 < len(points):
            tq, lq = points[i + 1]
            if lat <= target < lq:
                best = max(best or 0, tp + (target - lat) / (lq - lat) * (tq - tp))
    return best
series = {l: [(v[0], v[1]) for _, v in sorted(d.items())] for l, d in curves.items()}
for l, d in curves.items():
    print(l, ' '.join(f'{rate:g}:{v[0]:.3f}req/s@{v[1]*1e3:.1f}ms({v[2]}/{int(v[2])+int(v[3])})' for rate, v in sorted(d.items())))
base = [l for l in series if l.startswith('llama-server')]
floor = min(lat for l in base for _, lat in series[l])
print(f'floor {floor*1e3:.2f} ms/token')
for m in (1.25, 1.5, 2, 3, 5):
    t = floor * m
    o = max((at(series[l], t) or 0) for l in series if l.startswith('orca'))
    b = max((at(series[l], t) or 0) for l in base)
    print(f'{m:>4}x floor {t*1e3:7.1f} ms: orca {o:.3f}  llama-server {b:.3f}  ratio {o/b if b else float("nan"):.2f}x')
