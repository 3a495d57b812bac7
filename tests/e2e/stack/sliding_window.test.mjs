// Sliding-window layers' KV as memory, through the real stack: `orca serve` with two pipeline
// stages on a Gemma-3-shaped model (2 of 3 layers local, a 16-token window) and a local KV pool
// of 256 slots (16 blocks) — room for two 60-token prompts' windows at once, while 8 requests
// arrive together and decode 80 tokens each, far past the window. The scheduler must count the
// workers' local blocks exactly (a miscount is an iteration the workers refuse: a failed
// request), make the others wait, and report the pool in /metrics; every request completes, and
// its greedy tokens are those of a stack whose local layers keep every position (--swa-full).
// A functional check, bounded in time; no timing is asserted.
//   ORCA_BIN_DIR=build/bin node --test tests/e2e/stack/sliding_window.test.mjs
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { binDir, startPipelineServe, stopServe } from './stack.mjs';

const kRequests = 8, kPrompt = 60, kNew = 80, kLocalSlots = 256;

async function gauge(s, name) {
  const page = await (await fetch(`${s.sched}/metrics`)).text();
  const m = page.match(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm'));
  return m ? Number(m[1]) : NaN;
}

async function complete(s, prompt) {
  const r = await fetch(`${s.url}/v1/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: 'swa-tiny', prompt, max_tokens: kNew, temperature: 0, ignore_eos: true,
      return_token_ids: true }),
  });
  const json = await r.json();
  assert.equal(r.status, 200, JSON.stringify(json));
  const ids = json.choices[0].token_ids;
  assert.ok(Array.isArray(ids) && ids.length === kNew, `token_ids ${JSON.stringify(ids)}`);
  return ids;
}

// All requests at once; the most local slots the scheduler reported in use meanwhile.
async function runAll(s, prompts) {
  let peak = 0, polling = true;
  const poller = (async () => {
    while (polling) {
      try {
        peak = Math.max(peak, await gauge(s, 'orca:kv_local_slots_used'));
      } catch { /* the stack is stopping: a failed request ended the test */ }
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  try {
    return { outputs: await Promise.all(prompts.map((p) => complete(s, p))), peak };
  } finally {
    polling = false;
    await poller;
  }
}

test('a small sliding-window pool serves requests decoding past the window, as keeping every position does', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'orca-swa-model-'));
  const model = path.join(dir, 'swa-tiny');
  const synth = spawnSync(path.join(binDir(), 'orca'), ['model', 'synth', '--preset', 'gemma3-tiny',
    '--sliding-window', '16', '--sliding-window-pattern', '3', '--max-position', '1024', '--out', model],
  { encoding: 'utf8' });
  assert.equal(synth.status, 0, synth.stderr);
  const prompts = [];
  for (let r = 0; r < kRequests; r++) {
    const p = [];
    for (let t = 0; t < kPrompt; t++) p.push(3 + ((t * 37 + r * 101 + 7) % 500));
    prompts.push(p);
  }
  const common = ['--kv-block-size=16', '--n-slots=2048', '--max-bs=8'];
  let serve = null;
  try {
    serve = await startPipelineServe('orca-swa-e2e-', model, [...common, `--kv-local-slots=${kLocalSlots}`]);
    assert.equal(await gauge(serve, 'orca:kv_local_slots_capacity'), kLocalSlots);
    const windowed = await runAll(serve, prompts);
    console.log(`local pool: peak ${windowed.peak} of ${kLocalSlots} slots in use`);
    assert.ok(windowed.peak > 0 && windowed.peak <= kLocalSlots, `peak ${windowed.peak}`);
    assert.equal(await gauge(serve, 'orca:kv_local_slots_used'), 0, 'every request returned its local blocks');
    assert.equal(await stopServe(serve), 0);
    serve = null;

    serve = await startPipelineServe('orca-swa-full-e2e-', model, [...common, '--swa-full']);
    assert.equal(await gauge(serve, 'orca:kv_local_slots_capacity'), 0);
    const full = await runAll(serve, prompts);
    for (let r = 0; r < kRequests; r++) assert.deepEqual(windowed.outputs[r], full.outputs[r], `request ${r}`);
    assert.equal(await stopServe(serve), 0);
    serve = null;
  } finally {
    if (serve) await stopServe(serve);
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
