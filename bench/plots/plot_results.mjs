#!/usr/bin/env node
// Draws the plots of bench/README.md as SVG, from the raw outputs the benchmark scripts write
// (no plotting library: Node.js alone, which the project already needs for its tests).
//
//   node bench/plots/plot_results.mjs batch  SUMMARY.tsv OUT.svg [TITLE]
//       tokens/s against batch size, Orca and llama.cpp, one pair of lines per model file, from
//       scripts/bench/vs_llama_cpp.sh's summary.tsv (its "decode B=1" and "batched decode B=N"
//       rows; with several rounds, the median of the rounds).
//   node bench/plots/plot_results.mjs load   SWEEP.csv [SWEEP.csv ...] OUT.svg [--title T]
//       median normalized latency (s/token, log scale) against throughput (requests/s), one line
//       per curve label, from `orca bench sweep`'s sweep.csv or its printed output (the paper's
//       Fig. 10 axes).
import fs from 'node:fs';

const COLORS = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2', '#17becf'];

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

function escapeXml(s) {
  return String(s).replace(/[<>&"]/g, (c) => ({ '<': '&lt;', '>': '&gt;', '&': '&amp;', '"': '&quot;' })[c]);
}

// "Nice" tick values covering [lo, hi] on a linear axis.
function linearTicks(lo, hi, n = 6) {
  const span = hi - lo || 1;
  const step0 = span / n;
  const mag = 10 ** Math.floor(Math.log10(step0));
  const step = [1, 2, 5, 10].map((f) => f * mag).find((s) => s >= step0);
  const ticks = [];
  for (let v = Math.ceil(lo / step) * step; v <= hi + 1e-9 * span; v += step) ticks.push(+v.toPrecision(12));
  return ticks;
}

function logTicks(lo, hi) {
  const ticks = [];
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); ++e) {
    for (const f of [1, 2, 5]) {
      const v = f * 10 ** e;
      if (v >= lo * 0.999 && v <= hi * 1.001) ticks.push(v);
    }
  }
  return ticks;
}

function fmt(v) {
  if (v === 0) return '0';
  if (Math.abs(v) >= 1000) return `${+(v / 1000).toPrecision(3)}k`;
  return `${+v.toPrecision(3)}`;
}

// series: [{name, color, dash, points: [[x, y], ...]}]; axes: {xlabel, ylabel, xlog, ylog}.
function svgChart({ title, xlabel, ylabel, xlog = false, ylog = false, series }) {
  const W = 720, H = 440, L = 70, R = 220, T = 40, B = 50;
  const pw = W - L - R, ph = H - T - B;
  const xs = series.flatMap((s) => s.points.map((p) => p[0]));
  const ys = series.flatMap((s) => s.points.map((p) => p[1]));
  if (xs.length === 0) throw new Error('nothing to plot');
  let [x0, x1] = [Math.min(...xs), Math.max(...xs)];
  let [y0, y1] = [Math.min(...ys), Math.max(...ys)];
  if (!ylog) y0 = Math.min(0, y0);
  if (!xlog) x0 = Math.min(0, x0);
  if (ylog) { y0 /= 1.3; y1 *= 1.3; } else { y1 *= 1.08; }
  if (xlog) { x0 /= 1.3; x1 *= 1.3; } else { x1 *= 1.04; }
  const tx = (v) => L + (xlog ? (Math.log(v) - Math.log(x0)) / (Math.log(x1) - Math.log(x0))
                              : (v - x0) / (x1 - x0 || 1)) * pw;
  const ty = (v) => T + ph - (ylog ? (Math.log(v) - Math.log(y0)) / (Math.log(y1) - Math.log(y0))
                                   : (v - y0) / (y1 - y0 || 1)) * ph;
  const out = [];
  out.push(`<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" font-family="sans-serif" font-size="12">`);
  out.push(`<rect width="${W}" height="${H}" fill="white"/>`);
  out.push(`<text x="${L + pw / 2}" y="22" text-anchor="middle" font-size="14">${escapeXml(title)}</text>`);
  const xt = xlog ? logTicks(x0, x1) : linearTicks(x0, x1);
  const yt = ylog ? logTicks(y0, y1) : linearTicks(y0, y1);
  for (const v of xt) {
    const x = tx(v);
    out.push(`<line x1="${x}" y1="${T}" x2="${x}" y2="${T + ph}" stroke="#eee"/>`);
    out.push(`<text x="${x}" y="${T + ph + 16}" text-anchor="middle">${fmt(v)}</text>`);
  }
  for (const v of yt) {
    const y = ty(v);
    out.push(`<line x1="${L}" y1="${y}" x2="${L + pw}" y2="${y}" stroke="#eee"/>`);
    out.push(`<text x="${L - 6}" y="${y + 4}" text-anchor="end">${fmt(v)}</text>`);
  }
  out.push(`<rect x="${L}" y="${T}" width="${pw}" height="${ph}" fill="none" stroke="#444"/>`);
  out.push(`<text x="${L + pw / 2}" y="${H - 12}" text-anchor="middle">${escapeXml(xlabel)}</text>`);
  out.push(`<text transform="translate(16 ${T + ph / 2}) rotate(-90)" text-anchor="middle">${escapeXml(ylabel)}</text>`);
  series.forEach((s, i) => {
    // A point's optional third value orders the line (a sweep's arrival rate: throughput need not grow with it).
    const pts = [...s.points].sort((a, b) => (a[2] ?? a[0]) - (b[2] ?? b[0]));
    const d = pts.map((p, j) => `${j ? 'L' : 'M'}${tx(p[0]).toFixed(1)},${ty(p[1]).toFixed(1)}`).join(' ');
    const dash = s.dash ? ' stroke-dasharray="6 4"' : '';
    out.push(`<path d="${d}" fill="none" stroke="${s.color}" stroke-width="2"${dash}/>`);
    for (const p of pts) out.push(`<circle cx="${tx(p[0]).toFixed(1)}" cy="${ty(p[1]).toFixed(1)}" r="3" fill="${s.color}"/>`);
    const ly = T + 10 + i * 20;
    out.push(`<line x1="${L + pw + 14}" y1="${ly}" x2="${L + pw + 40}" y2="${ly}" stroke="${s.color}" stroke-width="2"${dash}/>`);
    out.push(`<text x="${L + pw + 46}" y="${ly + 4}">${escapeXml(s.name)}</text>`);
  });
  out.push('</svg>');
  return out.join('\n') + '\n';
}

// vs_llama_cpp.sh's summary.tsv: round, file, measure, llama.cpp, orca, ratio, load_start.
export function batchSeries(tsv) {
  const rows = tsv.trim().split('\n').slice(1).map((l) => l.split('\t'));
  const byFile = new Map();
  for (const [, file, measure, llama, orca] of rows) {
    const m = /^(?:batched decode B=(\d+)|decode B=(1) tg\d+)$/.exec(measure);
    if (!m) continue;
    const b = Number(m[1] ?? m[2]);
    if (m[2] && rows.some((r) => r[1] === file && r[2] === 'batched decode B=1')) continue;  // one B=1 source per file
    const f = byFile.get(file) ?? new Map();
    byFile.set(file, f);
    const cell = f.get(b) ?? { llama: [], orca: [] };
    f.set(b, cell);
    if (Number(llama) > 0) cell.llama.push(Number(llama));
    if (Number(orca) > 0) cell.orca.push(Number(orca));
  }
  const series = [];
  [...byFile.entries()].forEach(([file, f], i) => {
    const color = COLORS[i % COLORS.length];
    const name = file.replace(/\.gguf$/, '');
    const pick = (k) => [...f.entries()].filter(([, c]) => c[k].length).map(([b, c]) => [b, median(c[k])]);
    series.push({ name: `${name} Orca`, color, points: pick('orca') });
    series.push({ name: `${name} llama.cpp`, color, dash: true, points: pick('llama') });
  });
  return series.filter((s) => s.points.length > 0);
}

function parseCsv(text) {
  const lines = text.trim().split('\n');
  const split = (l) => [...l.matchAll(/("([^"]*)"|[^,]*)(,|$)/g)].map((m) => m[2] ?? m[1]).slice(0, -1);
  const head = split(lines[0]);
  return lines.slice(1).map((l) => Object.fromEntries(split(l).map((v, i) => [head[i], v])));
}

// A sweep's points, from its sweep.csv or from the "Fig. 10 points" table it prints (the raw
// outputs kept in bench/fig10/results/ are the latter): [{label, rate, rps, p50}] with the median
// normalized latency in seconds per token.
export function sweepPoints(text) {
  if (text.startsWith('label,')) {
    return parseCsv(text).map((r) => ({ label: r.label, rate: Number(r.arrival_rate), rps: Number(r.throughput_rps),
                                        p50: Number(r.norm_latency_p50_s) }));
  }
  const lines = text.split('\n');
  const start = lines.findIndex((l) => l.startsWith('Fig. 10 points'));
  if (start < 0) throw new Error('neither a sweep.csv nor a sweep\'s printed "Fig. 10 points" table');
  const points = [];
  for (const l of lines.slice(start + 1)) {
    // config  rate  throughput  done/all  p50_norm(ms/tok) ...
    const m = /^(\S.*?)\s+([\d.]+)\s+([\d.]+)\s+\d+\/\d+\s+([\d.]+)\s/.exec(l);
    if (m) points.push({ label: m[1], rate: Number(m[2]), rps: Number(m[3]), p50: Number(m[4]) / 1000 });
    else if (points.length > 0 && l.trim() === '') break;
  }
  return points;
}

export function loadSeries(texts) {
  const byLabel = new Map();
  for (const text of texts) {
    for (const p of sweepPoints(text)) {
      if (!(p.rps > 0 && p.p50 > 0)) continue;
      const list = byLabel.get(p.label) ?? [];
      list.push([p.rps, p.p50, p.rate]);
      byLabel.set(p.label, list);
    }
  }
  return [...byLabel.entries()].map(([name, points], i) => ({ name, color: COLORS[i % COLORS.length], points }));
}

function main(argv) {
  const [kind, ...rest] = argv;
  if (kind === 'batch' && rest.length >= 2) {
    const [tsv, out, title] = rest;
    const series = batchSeries(fs.readFileSync(tsv, 'utf8'));
    fs.writeFileSync(out, svgChart({ title: title ?? 'Decode tokens/s against batch size', xlabel: 'batch size (sequences)',
                                     ylabel: 'decode tokens/s (all sequences)', xlog: true, ylog: true, series }));
    return;
  }
  if (kind === 'load' && rest.length >= 2) {
    const ti = rest.indexOf('--title');
    const title = ti >= 0 ? rest.splice(ti, 2)[1] : 'Median normalized latency against load';
    const out = rest.pop();
    const series = loadSeries(rest.map((f) => fs.readFileSync(f, 'utf8')));
    fs.writeFileSync(out, svgChart({ title, xlabel: 'throughput (requests/s)', ylabel: 'median normalized latency (s/token)',
                                     ylog: true, series }));
    return;
  }
  console.error('usage: plot_results.mjs batch SUMMARY.tsv OUT.svg [TITLE] | load SWEEP.csv... OUT.svg [--title T]');
  process.exit(2);
}

if (import.meta.url === `file://${process.argv[1]}`) main(process.argv.slice(2));
