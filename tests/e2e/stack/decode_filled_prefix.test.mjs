// Decode-filled KV blocks in the prefix cache, through the real stack: `orca serve` with two
// pipeline stages and prefix caching. A chat client that sends the model's own reply back
// (return_token_ids) reuses the blocks the reply was decoded into: the next turn's prefix-cache
// hit reaches past the blocks its previous prompt filled, and the scheduler's vLLM-named
// counters (orca:prefix_cache_queries_total / hits_total) count those tokens. Then a small
// closed-loop `orca bench --trace chat --chat-closed-loop` run completes every turn. A
// functional smoke, bounded in time; no timing is asserted.
//   ORCA_BIN_DIR=build/bin node --test tests/e2e/stack/decode_filled_prefix.test.mjs
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { binDir, startPipelineServe, stopServe } from './stack.mjs';

const kBlock = 16;

async function counters(s) {
  const page = await (await fetch(`${s.sched}/metrics`)).text();
  const sum = (name) => [...page.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'gm'))]
    .reduce((a, m) => a + Number(m[1]), 0);
  return { hits: sum('orca:prefix_cache_hits_total'), queries: sum('orca:prefix_cache_queries_total') };
}

async function turn(s, prompt, maxTokens) {
  const r = await fetch(`${s.url}/v1/completions`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: 'decode-tiny', prompt, max_tokens: maxTokens, temperature: 0, ignore_eos: true,
      return_token_ids: true }),
  });
  const json = await r.json();
  assert.equal(r.status, 200, JSON.stringify(json));
  const ids = json.choices[0].token_ids;
  assert.ok(Array.isArray(ids) && ids.length === maxTokens, `token_ids ${JSON.stringify(ids)}`);
  return ids;
}

test('the next chat turn hits the KV blocks its previous reply was decoded into', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'orca-decode-prefix-model-'));
  const model = path.join(dir, 'decode-tiny');
  const synth = spawnSync(path.join(binDir(), 'orca'), ['model', 'synth', '--preset', 'tiny', '--vocab-size', '1024',
    '--max-position', '1024', '--out', model], { encoding: 'utf8' });
  assert.equal(synth.status, 0, synth.stderr);
  let serve = null;
  const out = fs.mkdtempSync(path.join(os.tmpdir(), 'orca-decode-prefix-bench-'));
  try {
    serve = await startPipelineServe('orca-decode-prefix-e2e-', model, ['--enable-prefix-caching', `--kv-block-size=${kBlock}`, '--n-slots=1024']);
    // Turn 1: 20 prompt tokens (one full block), a 40-token reply. Its KV holds 20 + 39
    // tokens (the last sampled token is never computed): blocks 0-2 are full, 1 and 2 by decodes.
    const prompt1 = [];
    for (let t = 0; t < 20; t++) prompt1.push(3 + ((t * 41 + 11) % 900));
    const reply1 = await turn(serve, prompt1, 40);
    const before = await counters(serve);
    // Turn 2: turn 1's prompt, the reply as returned, a new user message (65 tokens).
    const prompt2 = [...prompt1, ...reply1, 5, 6, 7, 8, 9];
    await turn(serve, prompt2, 4);
    const after = await counters(serve);
    const hit = after.hits - before.hits;
    console.log(`turn 2: ${hit} of ${after.queries - before.queries} prompt tokens from the prefix cache`);
    assert.equal(after.queries - before.queries, prompt2.length);
    // Prompt blocks alone would give 16 tokens; the reply's two decode-filled blocks make 48.
    assert.equal(hit, 3 * kBlock, `prefix cache hit ${hit} tokens, want the 3 full blocks of turn 1`);

    // The closed-loop chat load generator over the same stack: every turn completes, later
    // turns carry the server's replies, and they hit the cache.
    const bench = spawnSync(path.join(binDir(), 'orca'), ['bench', `--url=${serve.url}`, '--model=decode-tiny',
      '--trace=chat', '--chat-closed-loop', '--chat-think-time=0.01', '--rate=4', '--num-requests=8',
      '--chat-system-tokens-min=40', '--chat-system-tokens-max=60', '--chat-turns-min=2', '--chat-turns-max=3',
      '--chat-user-tokens-min=4', '--chat-user-tokens-max=8', '--min-new-tokens=20', '--max-new-tokens=30',
      '--prompt-source=random', '--token-id-min=3', '--token-id-max=900', '--max-duration=120', '--no-progress',
      `--out=${out}`], { encoding: 'utf8', timeout: 180000 });
    assert.equal(bench.status, 0, `orca bench failed:\n${bench.stdout}\n${bench.stderr}`);
    const rows = fs.readFileSync(path.join(out, 'requests.csv'), 'utf8').trim().split('\n').slice(1);
    assert.equal(rows.length, 8);
    for (const row of rows) assert.equal(row.split(',')[5], 'ok', row);
    const summary = JSON.parse(fs.readFileSync(path.join(out, 'summary.json'), 'utf8'));
    const config = Object.fromEntries(Object.entries(summary.config));
    assert.equal(config.chat_closed_loop, 'true', JSON.stringify(summary.config));
    const end = await counters(serve);
    console.log(`closed-loop bench: ${end.hits - after.hits} of ${end.queries - after.queries} prompt tokens hit`);
    assert.ok(end.hits > after.hits, 'the closed-loop turns never hit the prefix cache');
  } finally {
    if (serve) assert.equal(await stopServe(serve), 0, `orca serve did not stop cleanly:\n${serve.stderr()}`);
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(out, { recursive: true, force: true });
  }
});
