// /v1/completions with the official openai client: non-streaming, streaming,
// n > 1, logprobs, stop strings, usage.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { client, model } from './common.mjs';

const PROMPT = 'Once upon a time';

test('non-streaming completion', async () => {
  const { id } = await model();
  const res = await client().completions.create({ model: id, prompt: PROMPT, max_tokens: 8, temperature: 0 });
  assert.match(res.id, /^cmpl-/);
  assert.equal(res.object, 'text_completion');
  assert.equal(res.model, id);
  assert.equal(res.choices.length, 1);
  assert.equal(res.choices[0].index, 0);
  assert.equal(typeof res.choices[0].text, 'string');
  assert.ok(['stop', 'length'].includes(res.choices[0].finish_reason));
  assert.ok(res.usage.prompt_tokens > 0);
  assert.ok(res.usage.completion_tokens > 0 && res.usage.completion_tokens <= 8);
  assert.equal(res.usage.total_tokens, res.usage.prompt_tokens + res.usage.completion_tokens);
});

test('streaming completion matches the non-streaming text (greedy)', async () => {
  const { id } = await model();
  const full = await client().completions.create({ model: id, prompt: PROMPT, max_tokens: 12, temperature: 0 });
  const stream = await client().completions.create({
    model: id, prompt: PROMPT, max_tokens: 12, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const choice of chunk.choices) {
      text += choice.text;
      if (choice.finish_reason) finish = choice.finish_reason;
    }
  }
  assert.equal(text, full.choices[0].text);
  assert.equal(finish, full.choices[0].finish_reason);
  assert.deepEqual(usage, full.usage);
});

test('n > 1 gives n indexed choices', async () => {
  const { id } = await model();
  const res = await client().completions.create({
    model: id, prompt: PROMPT, max_tokens: 5, n: 3, temperature: 1, seed: 1234,
  });
  assert.deepEqual(res.choices.map((c) => c.index).sort(), [0, 1, 2]);
  assert.ok(res.usage.completion_tokens >= 3 && res.usage.completion_tokens <= 15);
  const again = await client().completions.create({
    model: id, prompt: PROMPT, max_tokens: 5, n: 3, temperature: 1, seed: 1234,
  });
  assert.deepEqual(again.choices.map((c) => c.text), res.choices.map((c) => c.text), 'a seed makes n>1 reproducible');
});

test('batched prompts index choices prompt-major', async () => {
  const { id } = await model();
  const res = await client().completions.create({ model: id, prompt: ['A', 'B'], n: 2, max_tokens: 3, temperature: 0 });
  assert.equal(res.choices.length, 4);
  assert.deepEqual(res.choices.map((c) => c.index), [0, 1, 2, 3]);
  assert.equal(res.choices[0].text, res.choices[1].text, 'greedy samples of one prompt agree');
});

test('logprobs', async () => {
  const { id } = await model();
  const res = await client().completions.create({ model: id, prompt: PROMPT, max_tokens: 4, temperature: 0, logprobs: 2 });
  const lp = res.choices[0].logprobs;
  const n = res.usage.completion_tokens;
  assert.equal(lp.tokens.length, n);
  assert.equal(lp.token_logprobs.length, n);
  assert.equal(lp.top_logprobs.length, n);
  assert.equal(lp.text_offset.length, n);
  for (let i = 0; i < n; i++) {
    assert.equal(typeof lp.tokens[i], 'string');
    assert.ok(lp.token_logprobs[i] <= 0);
    const entries = Object.entries(lp.top_logprobs[i]);
    assert.ok(entries.length >= 1 && entries.length <= 3);
    for (const [, v] of entries) assert.ok(v <= 0);
    if (i > 0) assert.ok(lp.text_offset[i] >= lp.text_offset[i - 1]);
  }
});

test('stop strings cut the text before the stop and finish with "stop"', async () => {
  const { id } = await model();
  const base = await client().completions.create({ model: id, prompt: PROMPT, max_tokens: 24, temperature: 0 });
  const text = base.choices[0].text;
  // Pick a stop string from the middle of what greedy decoding produces.
  const start = Math.floor(text.length / 2);
  const stop = text.slice(start, start + 2);
  assert.ok(text.length >= 4, `output too short to pick a stop string: ${JSON.stringify(text)}`);
  const cut = await client().completions.create({ model: id, prompt: PROMPT, max_tokens: 24, temperature: 0, stop: [stop] });
  assert.equal(cut.choices[0].text, text.slice(0, text.indexOf(stop)));
  assert.equal(cut.choices[0].finish_reason, 'stop');
  assert.ok(!cut.choices[0].text.includes(stop));

  // Streaming never sends any part of the stop string.
  const stream = await client().completions.create({
    model: id, prompt: PROMPT, max_tokens: 24, temperature: 0, stop: [stop], stream: true,
  });
  let streamed = '';
  for await (const chunk of stream) streamed += chunk.choices.map((c) => c.text).join('');
  assert.equal(streamed, cut.choices[0].text);
});
