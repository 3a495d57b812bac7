// Scheduling beyond the paper through the real stack: `orca serve` with two pipeline
// stages, chunked prefill, paged KV with preemption, prefix caching and priority order,
// against `orca serve` with the paper's defaults on the same model. Greedy completions
// with a shared prompt prefix must give the same tokens and logprobs (a differing token
// is allowed only where the reference's top two candidates tie within the tolerance),
// while the scheduler's metrics show that preemptions and prefix-cache hits happened.
//   ORCA_BIN_DIR=build/bin node --test tests/e2e/stack/beyond_paper.test.mjs
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { binDir, startPipelineServe, stopServe } from './stack.mjs';

const kTolerance = 1e-3;  // logprob difference allowed (f32 weights; chunked vs whole prompts sum in other orders)
const kNumRequests = 8;
const kMaxTokens = 24;

/** A shared 64-token prefix (4 blocks of 16), then 100 tokens unique to request i. */
function prompt(i) {
  const ids = [];
  for (let t = 0; t < 64; t++) ids.push(3 + ((t * 37) % 900));
  for (let t = 0; t < 100; t++) ids.push(3 + ((i * 131 + t * 53 + 7) % 900));
  return ids;
}

async function complete(s, body) {
  const r = await fetch(`${s.url}/v1/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
  });
  return { status: r.status, json: await r.json() };
}

async function greedy(s, i, extra = {}) {
  const { status, json } = await complete(s, {
    model: 'beyond-tiny', prompt: prompt(i), max_tokens: kMaxTokens, temperature: 0, ignore_eos: true,
    logprobs: 2, ...extra,
  });
  assert.equal(status, 200, JSON.stringify(json));
  return json.choices[0].logprobs;
}

async function scrape(url) {
  const page = await (await fetch(`${url}/metrics`)).text();
  const sum = (name) => [...page.matchAll(new RegExp(`^${name}\\{[^}]*\\} (\\S+)$`, 'gm'))]
    .reduce((a, m) => a + Number(m[1]), 0);
  const has = (name) => new RegExp(`^# TYPE ${name} counter$`, 'm').test(page);
  return { sum, has };
}

/** Same tokens and logprobs, up to a genuine tie in the reference. */
function assertSame(ref, got, i) {
  for (let t = 0; t < ref.tokens.length; t++) {
    if (ref.tokens[t] !== got.tokens[t]) {
      const top = Object.values(ref.top_logprobs[t]).sort((a, b) => b - a);
      assert.ok(top.length >= 2 && top[0] - top[1] <= kTolerance,
        `request ${i} token ${t}: ${JSON.stringify(got.tokens[t])} vs reference ${JSON.stringify(ref.tokens[t])} ` +
        `without a tie (top ${JSON.stringify(ref.top_logprobs[t])})`);
      return;  // past a tie the continuations may differ
    }
    assert.ok(Math.abs(ref.token_logprobs[t] - got.token_logprobs[t]) <= kTolerance,
      `request ${i} token ${t}: logprob ${got.token_logprobs[t]} vs reference ${ref.token_logprobs[t]}`);
  }
}

test('chunked prefill + paged KV + prefix caching + priority order over 2 pipeline stages = the paper policy', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'orca-beyond-model-'));
  const model = path.join(dir, 'beyond-tiny');
  const synth = spawnSync(path.join(binDir(), 'orca'), ['model', 'synth', '--preset', 'tiny', '--vocab-size', '1024',
    '--max-position', '1024', '--out', model], { encoding: 'utf8' });
  assert.equal(synth.status, 0, synth.stderr);
  let reference = null, beyond = null;
  try {
    // The paper's policy, one request at a time: the reference tokens and logprobs.
    reference = await startPipelineServe('orca-beyond-e2e-', model, []);
    const refs = [];
    for (let i = 0; i < kNumRequests; i++) refs.push(await greedy(reference, i));
    assert.equal(await stopServe(reference), 0, reference.stderr());
    reference = null;

    // 384 slots = 24 blocks of 16 per stage; 8 requests of 164 + 24 tokens need ~80
    // private blocks, so paged KV must preempt; the 64-token prefix is cached.
    // --max-prefill-slowdown: wherever the learned time budget cuts chunks, no token may change.
    beyond = await startPipelineServe('orca-beyond-e2e-', model, ['--policy=paged', '--max-num-batched-tokens=32', '--max-prefill-slowdown=1.5',
      '--enable-prefix-caching', '--kv-block-size=16', '--n-slots=384', '--max-bs=8', '--scheduling-order=priority']);
    // The scheduler's /ready shows its configuration only to a holder of the internal token.
    const ready = await fetch(`${beyond.sched}/ready`, { headers: { Authorization: `Bearer ${beyond.internalToken()}` } });
    assert.equal(ready.status, 200);
    const config = (await ready.json()).config;
    assert.equal(config.policy, 'paged');
    assert.equal(config.max_num_batched_tokens, 32);
    assert.equal(config.max_prefill_slowdown, 1.5);
    assert.equal(config.enable_prefix_caching, true);
    assert.equal(config.scheduling_order, 'priority');
    assert.equal(config.kv_block_size, 16);

    // Warm the prefix, then everything at once (mixed priorities).
    assertSame(refs[0], await greedy(beyond, 0), 0);
    const got = await Promise.all(refs.map((_, i) => greedy(beyond, i, { priority: i % 3 })));
    got.forEach((g, i) => assertSame(refs[i], g, i));

    const m = await scrape(beyond.sched);
    for (const name of ['orca:num_preemptions_total', 'orca:prefix_cache_queries_total', 'orca:prefix_cache_hits_total']) {
      assert.ok(m.has(name), `${name} is not exported as a counter`);
    }
    assert.ok(m.sum('orca:num_preemptions_total') > 0, 'no request was preempted');
    const hits = m.sum('orca:prefix_cache_hits_total'), queries = m.sum('orca:prefix_cache_queries_total');
    assert.ok(hits >= 64 * kNumRequests, `prefix cache hits ${hits} tokens (queries ${queries})`);
    assert.ok(queries >= hits);
    console.log(`preemptions ${m.sum('orca:num_preemptions_total')}, prefix cache hits ${hits} / queries ${queries} tokens`);

    // The request-level priority field: accepted in range, rejected precisely outside it.
    const bad = await complete(beyond, { model: 'beyond-tiny', prompt: prompt(0), max_tokens: 1, priority: 2000000 });
    assert.equal(bad.status, 400);
    assert.match(JSON.stringify(bad.json), /priority/);
    // Everything was returned: no block stays referenced by a finished request.
    const after = await scrape(beyond.sched);
    assert.equal(after.sum('orca:num_requests_running'), 0);
    assert.equal(after.sum('orca:kv_slots_used'), 0);
  } finally {
    if (reference) await stopServe(reference);
    if (beyond) assert.equal(await stopServe(beyond), 0, `orca serve did not stop cleanly:\n${beyond.stderr()}`);
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
