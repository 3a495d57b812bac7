// /v1/chat/completions with the official openai client.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { client, model } from './common.mjs';

const MESSAGES = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'Tell me a story.' },
];

test('non-streaming chat completion', async () => {
  const { id } = await model();
  const res = await client().chat.completions.create({ model: id, messages: MESSAGES, max_completion_tokens: 8, temperature: 0 });
  assert.match(res.id, /^chatcmpl-/);
  assert.equal(res.object, 'chat.completion');
  assert.equal(res.choices.length, 1);
  assert.equal(res.choices[0].message.role, 'assistant');
  assert.equal(typeof res.choices[0].message.content, 'string');
  assert.ok(['stop', 'length'].includes(res.choices[0].finish_reason));
  assert.ok(res.usage.prompt_tokens > 0);
  assert.equal(res.usage.total_tokens, res.usage.prompt_tokens + res.usage.completion_tokens);
});

test('streaming chat: role first, then content, finish, usage', async () => {
  const { id } = await model();
  const full = await client().chat.completions.create({ model: id, messages: MESSAGES, max_tokens: 10, temperature: 0 });
  const stream = await client().chat.completions.create({
    model: id, messages: MESSAGES, max_tokens: 10, temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  let content = '';
  let first = true;
  let finish = null;
  let usage = null;
  for await (const chunk of stream) {
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) {
      usage = chunk.usage;
      assert.deepEqual(chunk.choices, []);
      continue;
    }
    if (first) {
      assert.equal(chunk.choices[0].delta.role, 'assistant');
      first = false;
    }
    content += chunk.choices[0].delta.content ?? '';
    if (chunk.choices[0].finish_reason) finish = chunk.choices[0].finish_reason;
  }
  assert.equal(content, full.choices[0].message.content);
  assert.equal(finish, full.choices[0].finish_reason);
  assert.deepEqual(usage, full.usage);
});

test('chat n > 1 and logprobs', async () => {
  const { id } = await model();
  const res = await client().chat.completions.create({
    model: id, messages: MESSAGES, max_tokens: 4, n: 2, temperature: 0, logprobs: true, top_logprobs: 3,
  });
  assert.equal(res.choices.length, 2);
  assert.deepEqual(res.choices.map((c) => c.index), [0, 1]);
  for (const choice of res.choices) {
    const content = choice.logprobs.content;
    assert.ok(content.length >= 1);
    for (const entry of content) {
      assert.equal(typeof entry.token, 'string');
      assert.ok(entry.logprob <= 0);
      assert.ok(Array.isArray(entry.bytes));
      assert.ok(entry.top_logprobs.length <= 3);
      for (const alt of entry.top_logprobs) assert.ok(Array.isArray(alt.bytes) && alt.logprob <= 0);
    }
  }
});

test('chat stop strings', async () => {
  const { id } = await model();
  const base = await client().chat.completions.create({ model: id, messages: MESSAGES, max_tokens: 24, temperature: 0 });
  const text = base.choices[0].message.content;
  assert.ok(text.length >= 4, `output too short: ${JSON.stringify(text)}`);
  const stop = text.slice(Math.floor(text.length / 2), Math.floor(text.length / 2) + 2);
  const cut = await client().chat.completions.create({ model: id, messages: MESSAGES, max_tokens: 24, temperature: 0, stop });
  assert.equal(cut.choices[0].message.content, text.slice(0, text.indexOf(stop)));
  assert.equal(cut.choices[0].finish_reason, 'stop');
});
