// A client that disconnects mid-stream has its request cancelled at the
// scheduler at once: its KV slots come back.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BASE_URL, SCHEDULER_METRICS_URL, authHeaders, getJson, model } from './common.mjs';

// KV slots in use and iterations run, from the scheduler's /metrics when
// given, else from the gateway's /ready (the scheduler stats it polls ~1/s).
async function schedulerState() {
  if (SCHEDULER_METRICS_URL) {
    const text = await (await fetch(SCHEDULER_METRICS_URL)).text();
    const value = (name) => {
      const line = text.split('\n').find((l) => l.startsWith(name));
      return line ? Number(line.trim().split(/\s+/).at(-1)) : NaN;
    };
    return { kvSlotsUsed: value('orca:kv_slots_used'), iterations: value('orca:iteration_duration_seconds_count') };
  }
  const { json } = await getJson('/ready');
  return {
    kvSlotsUsed: json.schedulers.reduce((a, s) => a + s.kv_slots_used, 0),
    iterations: json.schedulers.reduce((a, s) => a + s.iterations, 0),
    outstanding: json.schedulers.reduce((a, s) => a + s.outstanding, 0),
  };
}

async function waitFor(predicate, what, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const state = await schedulerState();
    if (predicate(state)) return state;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(state)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

test('disconnecting mid-stream frees the request at the scheduler', async () => {
  const { id, maxModelLen } = await model();
  const baseline = await waitFor((s) => s.kvSlotsUsed === 0, 'an idle scheduler');
  const controller = new AbortController();
  const res = await fetch(`${BASE_URL}/v1/completions`, {
    method: 'POST',
    headers: authHeaders(),
    body: JSON.stringify({ model: id, prompt: 'Once upon a time', max_tokens: Math.floor(maxModelLen / 2),
      ignore_eos: true, stream: true }),
    signal: controller.signal,
  });
  assert.equal(res.status, 200);
  const reader = res.body.getReader();
  const first = await reader.read();  // the stream is running
  assert.ok(!first.done);
  const running = await waitFor((s) => s.kvSlotsUsed > 0, 'the request to hold KV slots');
  controller.abort();
  const freed = await waitFor((s) => s.kvSlotsUsed === baseline.kvSlotsUsed, 'the KV slots to come back');
  if (freed.outstanding !== undefined) assert.equal(freed.outstanding, 0);
  console.log(`# KV slots ${running.kvSlotsUsed} -> ${freed.kvSlotsUsed}; ` +
              `iterations between observing them held and freed: ${freed.iterations - running.iterations}`);
});
