// Issue 45's load test: many streams at once through the real stack (2 pipeline workers, the
// scheduler, the gateway with --api-keys), some clients that never read their stream, and hostile
// requests mixed in. Asserted: every well-behaved stream completes with its tokens and [DONE];
// every hostile request gets its 4xx (or, for a framing attack, a closed connection); the
// gateway's buffered output never exceeded its budget and the non-readers were paused, then
// cancelled; no process exited. Reported, not asserted (timings belong in benchmarks): /health
// latency (p50/p99/max, a new connection every 25 ms through the whole run) and the gateway's
// peak resident memory; bench/README.md quotes them.
//
//   ORCA_BIN_DIR=build/bin node --test tests/e2e/stack/hostile_load.test.mjs
//   ORCA_HOSTILE_STREAMS=2000 ORCA_HOSTILE_NON_READERS=50   (the defaults)
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startStack } from './stack.mjs';

const kStreams = Number(process.env.ORCA_HOSTILE_STREAMS ?? 2000);
const kNonReaders = Number(process.env.ORCA_HOSTILE_NON_READERS ?? 50);
const kHostileEvery = 40;  // one stream in 40 is replaced by a hostile request
const kApiKey = 'hostile-load-key-0123456789';
const kBudgetBytes = 16 << 20;  // --max-buffered-output-bytes: small, so the non-readers exceed it
const kMaxPauseSeconds = 5;

const kTemplate = `{%- if mode == 'loop' -%}{%- for i in range(1000000) -%}{%- for j in range(1000000) -%}{%- endfor -%}{%- endfor -%}
{%- elif mode == 'grow' -%}{%- set ns = namespace(s='x') -%}{%- for i in range(64) -%}{%- set ns.s = ns.s ~ ns.s -%}{%- endfor -%}{{ ns.s | length }}
{%- else -%}{%- for m in messages -%}<|{{ m.role }}|>{{ m.content }}{%- endfor -%}{%- if add_generation_prompt -%}<|assistant|>{%- endif -%}
{%- endif -%}`;

const auth = { Authorization: `Bearer ${kApiKey}`, 'Content-Type': 'application/json' };
const nested = (depth, key = 'a') => `{"${key}":`.repeat(depth) + '{}' + '}'.repeat(depth);
const chatBody = (extra) => JSON.stringify({ model: 'e2e-tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, ...extra });

/** The hostile requests, round robin: [name, route, body, expected status]. */
const kHostile = [
  ['deep chat_template_kwargs', '/v1/chat/completions', chatBody({}).replace(/}$/, `,"chat_template_kwargs":${nested(20000)}}`), 400],
  ['deep tool parameters', '/v1/chat/completions',
    chatBody({}).replace(/}$/, `,"tools":[{"type":"function","function":{"name":"f","parameters":${nested(20000, 'properties')}}}]}`), 400],
  ['nested regex groups', '/v1/completions',
    JSON.stringify({ model: 'e2e-tiny', prompt: 'x', max_tokens: 4, guided_regex: '('.repeat(100000) + 'a' + ')'.repeat(100000) }), 400],
  ['endless template loop', '/v1/chat/completions', chatBody({ chat_template_kwargs: { mode: 'loop' } }), 400],
  ['doubling template string', '/v1/chat/completions', chatBody({ chat_template_kwargs: { mode: 'grow' } }), 400],
  ['temperature out of range', '/v1/completions', JSON.stringify({ model: 'e2e-tiny', prompt: 'x', temperature: 50 }), 400],
  ['a 3.6 MB /tokenize', '/tokenize', JSON.stringify({ model: 'e2e-tiny', prompt: 'lorem ipsum '.repeat(300000) }), 200],
  ['smuggling', null, null, null],
];

function percentile(sorted, p) {
  return sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

/** One well-behaved streaming completion, read to its end. */
async function wellBehaved(baseUrl, i) {
  const r = await fetch(`${baseUrl}/v1/completions`, {
    method: 'POST', headers: auth,
    body: JSON.stringify({ model: 'e2e-tiny', prompt: `stream ${i} says`, max_tokens: 8, temperature: 0, ignore_eos: true, stream: true }),
  });
  const text = await r.text();
  if (r.status !== 200) return `status ${r.status}: ${text.slice(0, 200)}`;
  if (!text.trimEnd().endsWith('data: [DONE]')) return `no [DONE]: ${text.slice(-200)}`;
  if (text.includes('"error"')) return `error event: ${text.slice(0, 300)}`;
  if (!text.includes('"finish_reason":"length"')) return `no finish_reason length: ${text.slice(-300)}`;
  return null;
}

/** A client that sends a long streaming chat request and never reads a byte. */
function nonReader(port) {
  // ~7.6 MB of output (4 choices × 1,000 tokens × 20 top logprobs): more than the kernel's
  // socket buffers on loopback take (~2 MB here), so the rest is the gateway's to hold or pause.
  const body = JSON.stringify({ model: 'e2e-tiny', messages: [{ role: 'user', content: 'talk' }], max_tokens: 1000, n: 4,
    ignore_eos: true, stream: true, logprobs: true, top_logprobs: 20 });
  const socket = net.connect(port, '127.0.0.1');
  socket.on('error', () => {});
  socket.pause();  // never read: the kernel's buffers fill, then the gateway's
  socket.write(`POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${kApiKey}\r\n` +
               `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  return socket;
}

/** A request-smuggling attempt: must be refused and its connection closed. */
function smuggle(port) {
  const hidden = 'GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n';
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let got = '';
    const timer = setTimeout(() => { socket.destroy(); resolve(`not closed: ${got.slice(0, 100)}`); }, 10000);
    socket.on('data', (d) => { got += d; });
    socket.on('error', () => {});
    socket.on('close', () => {
      clearTimeout(timer);
      const responses = (got.match(/^HTTP\/1\.1 /gm) || []).length;
      resolve(/^HTTP\/1\.1 (400|501) /.test(got) && responses === 1 ? null : `smuggling answered: ${got.slice(0, 200)}`);
    });
    socket.write(`POST /health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: xchunked\r\nContent-Length: ${hidden.length}\r\n\r\n${hidden}`);
  });
}

async function hostile(baseUrl, port, k) {
  const [name, route, body, status] = kHostile[k % kHostile.length];
  if (route === null) return smuggle(port).then((e) => (e ? `${name}: ${e}` : null));
  const r = await fetch(`${baseUrl}${route}`, { method: 'POST', headers: auth, body });
  const text = await r.text();
  return r.status === status ? null : `${name}: status ${r.status} (want ${status}): ${text.slice(0, 200)}`;
}

function rssKiB(pid, field) {
  const m = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm'));
  return m ? Number(m[1]) : NaN;
}

test(`${kStreams} streams, ${kNonReaders} never reading, hostile requests mixed in`, { timeout: 900000 }, async () => {
  const work = fs.mkdtempSync(path.join(process.env.TMPDIR ?? '/tmp', 'orca-hostile-load-'));
  const templatePath = path.join(work, 'load.jinja');
  fs.writeFileSync(templatePath, kTemplate);
  const stack = await startStack({
    pipeline: 2, apiKey: kApiKey,
    gatewayArgs: [`--max-buffered-output-bytes=${kBudgetBytes}`, `--max-output-pause-seconds=${kMaxPauseSeconds}`,
                  `--chat-template=${templatePath}`],
    // Every stream queues at once: room for all of them in the scheduler's queue (default 1,024).
    schedulerArgs: ['--max-bs=64', `--max-queued-requests=${kStreams + 64}`],
  });
  const gatewayPid = stack.pid('gateway');
  const rssBefore = rssKiB(gatewayPid, 'VmRSS');
  const health = [];
  let probing = true;
  const prober = (async () => {
    while (probing) {
      const t0 = performance.now();
      // A new connection each time, as a kubelet probe makes it.
      const r = await fetch(`${stack.baseUrl}/health`, { headers: { Connection: 'close' } }).catch(() => null);
      if (r) await r.text();
      health.push(r && r.status === 200 ? performance.now() - t0 : Infinity);
      await new Promise((res) => setTimeout(res, 25));
    }
  })();
  let rssPeak = rssBefore;
  const rssTimer = setInterval(() => { rssPeak = Math.max(rssPeak, rssKiB(gatewayPid, 'VmRSS')); }, 100);

  const t0 = Date.now();
  const nonReaders = [];
  const jobs = [];
  const failures = [];
  let hostileCount = 0, wellCount = 0;
  const readerEvery = Math.max(1, Math.floor(kStreams / Math.max(1, kNonReaders)));
  try {
    for (let i = 0; i < kStreams; i++) {
      if (nonReaders.length < kNonReaders && i % readerEvery === readerEvery - 1) {
        nonReaders.push(nonReader(stack.gatewayPort));
      } else if (i % kHostileEvery === kHostileEvery / 2) {
        const k = hostileCount++;
        jobs.push(hostile(stack.baseUrl, stack.gatewayPort, k).then((e) => e && failures.push(`hostile #${k} ${e}`)));
      } else {
        wellCount++;
        jobs.push(wellBehaved(stack.baseUrl, i).then((e) => e && failures.push(`stream ${i}: ${e}`),
                                                    (e) => failures.push(`stream ${i}: ${e}`)));
      }
      if (i % 100 === 99) await new Promise((res) => setImmediate(res));
    }
    await Promise.all(jobs);
    const served = (Date.now() - t0) / 1000;
    // The non-readers' streams are cancelled once paused past --max-output-pause-seconds.
    await new Promise((res) => setTimeout(res, (kMaxPauseSeconds + 2) * 1000));
    const ready = await (await fetch(`${stack.baseUrl}/ready`, { headers: auth })).json();
    const budget = ready.output_budget;
    for (const s of nonReaders) s.destroy();
    probing = false;
    await prober;
    clearInterval(rssTimer);
    const sorted = health.filter(Number.isFinite).sort((a, b) => a - b);
    const failedProbes = health.length - sorted.length;
    const cpu = (fs.readFileSync('/proc/cpuinfo', 'utf8').match(/^model name\s*:\s*(.*)$/m) || [])[1];
    console.log(`# ${wellCount} well-behaved streams, ${nonReaders.length} non-readers, ${hostileCount} hostile requests ` +
                `in ${served.toFixed(1)} s (${cpu}, load average ${fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')})`);
    console.log(`# /health: ${sorted.length} probes, p50 ${percentile(sorted, 50).toFixed(2)} ms, ` +
                `p99 ${percentile(sorted, 99).toFixed(2)} ms, max ${sorted.at(-1)?.toFixed(2)} ms, ${failedProbes} failed`);
    console.log(`# gateway RSS: ${(rssBefore / 1024).toFixed(0)} MiB before, peak ${(rssPeak / 1024).toFixed(0)} MiB ` +
                `(VmHWM ${(rssKiB(gatewayPid, 'VmHWM') / 1024).toFixed(0)} MiB); output budget ${JSON.stringify(budget)}`);

    assert.deepEqual(failures.slice(0, 20), [], `${failures.length} failures`);
    assert.deepEqual(stack.exited(), [], 'no process may exit');
    assert.equal(failedProbes, 0, '/health must answer every probe');
    assert.ok(budget && budget.max_bytes === kBudgetBytes, JSON.stringify(budget));
    assert.ok(budget.peak_bytes <= budget.max_bytes, `buffered output peaked at ${budget.peak_bytes} > ${budget.max_bytes}`);
    assert.ok(budget.pauses > 0, 'the non-readers must have been paused');
    assert.ok(budget.pause_cancels > 0, 'a paused non-reader must have been cancelled');
    // Every KV slot comes back once the load is gone.
    const deadline = Date.now() + 15000;
    let used = -1;
    while (Date.now() < deadline) {
      const page = await (await fetch(`http://127.0.0.1:${stack.schedulerHttpPort}/metrics`)).text();
      used = Number(page.match(/^orca:kv_slots_used\{[^}]*\} (\S+)$/m)?.[1]);
      if (used === 0) break;
      await new Promise((res) => setTimeout(res, 250));
    }
    assert.equal(used, 0, 'KV slots still reserved after the load');
  } finally {
    probing = false;
    clearInterval(rssTimer);
    for (const s of nonReaders) s.destroy();
    await stack.stop();
    fs.rmSync(work, { recursive: true, force: true });
  }
});
