// A real Prometheus (Debian's package) on loopback scrapes the real stack
// (gateway, scheduler, two workers); after traffic, Prometheus's HTTP API must
// show every target up and the counters moved by exactly what was sent. Every
// service's /metrics page also passes `promtool check metrics`.
import { test, after, before } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import OpenAI from 'openai';
import { freePort, startStack } from '../stack/stack.mjs';

const SCRAPE_INTERVAL_S = 1;
let stack, prom, promUrl;

async function query(expr) {
  const r = await fetch(`${promUrl}/api/v1/query?query=${encodeURIComponent(expr)}`);
  const body = await r.json();
  assert.equal(body.status, 'success', JSON.stringify(body));
  return body.data.result;
}

async function scalar(expr) {
  const res = await query(expr);
  return res.length ? Number(res[0].value[1]) : 0;
}

// Waits until every target has been scraped after `since` (unix seconds).
async function freshScrape(since) {
  for (let i = 0; i < 100; i++) {
    const r = await (await fetch(`${promUrl}/api/v1/targets`)).json();
    const active = r.data.activeTargets;
    if (active.length === 4 && active.every((t) => t.health === 'up' && Date.parse(t.lastScrape) / 1000 > since)) return active;
    await new Promise((res) => setTimeout(res, 200));
  }
  throw new Error('Prometheus did not scrape every target');
}

before(async () => {
  stack = await startStack({ pipeline: 2, logJson: true });
  const port = await freePort();
  promUrl = `http://127.0.0.1:${port}`;
  const targets = [`127.0.0.1:${stack.gatewayPort}`, `127.0.0.1:${stack.schedulerHttpPort}`,
                   ...stack.workerHttpPorts.map((p) => `127.0.0.1:${p}`)];
  const cfg = path.join(stack.workDir, 'prometheus.yml');
  fs.writeFileSync(cfg, [
    'global:', `  scrape_interval: ${SCRAPE_INTERVAL_S}s`, `  scrape_timeout: ${SCRAPE_INTERVAL_S}s`,
    'scrape_configs:', '  - job_name: orca', '    static_configs:', `      - targets: [${targets.map((t) => `'${t}'`).join(', ')}]`, '',
  ].join('\n'));
  prom = spawn('prometheus', [`--config.file=${cfg}`, `--web.listen-address=127.0.0.1:${port}`,
                              `--storage.tsdb.path=${path.join(stack.workDir, 'tsdb')}`, '--log.level=warn'],
               { stdio: ['ignore', 'ignore', 'pipe'] });
  let promErr = '';
  prom.stderr.on('data', (d) => { promErr += d; });
  for (let i = 0; i < 100; i++) {
    try { if ((await fetch(`${promUrl}/-/ready`)).status === 200) return; } catch {}
    if (prom.exitCode !== null) throw new Error(`prometheus exited: ${promErr}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`prometheus not ready: ${promErr}`);
});

after(async () => {
  prom?.kill('SIGTERM');
  await stack?.stop();
});

test('every service page passes promtool check metrics', async () => {
  const pages = { gateway: stack.gatewayPort, scheduler: stack.schedulerHttpPort,
                  ...Object.fromEntries(stack.workerHttpPorts.map((p, i) => [`worker-${i}`, p])) };
  for (const [name, port] of Object.entries(pages)) {
    const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    assert.match(text, /# TYPE orca:/, `${name} exposes Orca metrics`);
    const r = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
    // promtool 2.42 lints the colon of recording-rule-style names (`orca:`, like `vllm:`) — the
    // naming the dashboards use on purpose. That one lint is the only line allowed.
    const problems = (r.stdout + r.stderr).split('\n').filter((l) => l.trim() && !/ metric names should not contain ':'$/.test(l));
    assert.deepEqual(problems, [], `${name}: promtool reported problems`);
    // With the prefix spelt `orca_`, promtool must be silent and succeed.
    const clean = spawnSync('promtool', ['check', 'metrics'], { input: text.replaceAll('orca:', 'orca_'), encoding: 'utf8' });
    assert.equal(clean.status, 0, `${name}: ${clean.stdout}${clean.stderr}`);
  }
});

test('Prometheus sees every target up and counters move by exactly what was sent', async () => {
  await freshScrape(Date.now() / 1000);
  const before = {
    success: await scalar('sum(orca:request_success_total{finished_reason="length"})'),
    gen: await scalar('sum(orca:generation_tokens_total)'),
    prompt: await scalar('sum(orca:prompt_tokens_total)'),
    http: await scalar('sum(orca:http_requests_total{route="/v1/completions",method="POST",status="200"})'),
    e2e: await scalar('sum(orca:e2e_request_latency_seconds_count)'),
  };
  const client = new OpenAI({ baseURL: `${stack.baseUrl}/v1`, apiKey: 'unused' });
  const N = 6, maxTokens = 7;
  let promptTokens = 0;
  for (let i = 0; i < N; i++) {
    const r = await client.completions.create({ model: stack.modelName, prompt: `request number ${i} says hello`,
                                                max_tokens: maxTokens, temperature: 0, ignore_eos: true });
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.equal(r.usage.completion_tokens, maxTokens);
    promptTokens += r.usage.prompt_tokens;
  }
  const targets = await freshScrape(Date.now() / 1000);
  assert.equal(targets.length, 4);
  const up = await query('up{job="orca"}');
  assert.equal(up.length, 4);
  for (const t of up) assert.equal(t.value[1], '1', `${t.metric.instance} is down`);
  assert.equal(await scalar('sum(orca:request_success_total{finished_reason="length"})') - before.success, N);
  assert.equal(await scalar('sum(orca:generation_tokens_total)') - before.gen, N * maxTokens);
  assert.equal(await scalar('sum(orca:prompt_tokens_total)') - before.prompt, promptTokens);
  assert.equal(await scalar('sum(orca:http_requests_total{route="/v1/completions",method="POST",status="200"})') - before.http, N);
  assert.equal(await scalar('sum(orca:e2e_request_latency_seconds_count)') - before.e2e, N);
  // Each worker stage reports its compute time per iteration.
  const stages = await query('orca:stage_compute_seconds_count');
  assert.deepEqual(stages.map((s) => s.metric.stage).sort(), ['0', '1']);
});

test('JSON logs carry the request id from the gateway to the scheduler', async () => {
  const r = await fetch(`${stack.baseUrl}/v1/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: stack.modelName, prompt: 'trace me', max_tokens: 3 }),
  });
  assert.equal(r.status, 200);
  const { id } = await r.json();
  const linesWith = (name) => fs.readFileSync(stack.logFile(name), 'utf8').split('\n').filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l)).filter((o) => o.request_id === id);
  for (let i = 0; i < 50; i++) {
    if (linesWith('gateway').length && linesWith('scheduler').length) break;
    await new Promise((res) => setTimeout(res, 100));
  }
  const gw = linesWith('gateway'), sched = linesWith('scheduler');
  assert.ok(gw.length >= 1, `no gateway log line with request_id ${id}`);
  assert.ok(sched.length >= 1, `no scheduler log line with request_id ${id}`);
  assert.equal(sched[0].component, 'scheduler');
  assert.equal(sched[0].finish, 'length');
  assert.equal(sched[0].generated_tokens, '3');
  for (const o of [...gw, ...sched]) for (const k of ['ts', 'level', 'component', 'msg']) assert.ok(k in o, `missing ${k}`);
});
