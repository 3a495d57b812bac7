// What the openai client does not check: the exact SSE framing, the [DONE]
// terminator, and every field of the response objects.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { rawPost, model, sseData, isInt } from './common.mjs';

function checkEnvelope(obj, object, idPrefix, modelId) {
  assert.ok(obj.id.startsWith(idPrefix), obj.id);
  assert.equal(obj.object, object);
  assert.ok(isInt(obj.created) && obj.created > 1.6e9);
  assert.equal(obj.model, modelId);
}

test('completion stream: framing, per-chunk fields, [DONE] last', async () => {
  const { id } = await model();
  const res = await rawPost('/v1/completions', JSON.stringify({
    model: id, prompt: 'Hello', max_tokens: 6, temperature: 0, stream: true,
  }));
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type'), /^text\/event-stream/);
  const data = sseData(res.text);
  assert.equal(data.at(-1), '[DONE]');
  assert.equal(data.filter((d) => d === '[DONE]').length, 1);
  const chunks = data.slice(0, -1).map((d) => JSON.parse(d));
  assert.ok(chunks.length >= 1);
  const ids = new Set(chunks.map((c) => c.id));
  assert.equal(ids.size, 1, 'one id for the whole stream');
  chunks.forEach((chunk, i) => {
    checkEnvelope(chunk, 'text_completion', 'cmpl-', id);
    assert.equal(chunk.choices.length, 1);
    const c = chunk.choices[0];
    assert.equal(c.index, 0);
    assert.equal(typeof c.text, 'string');
    assert.equal(c.logprobs, null);
    if (i < chunks.length - 1) assert.equal(c.finish_reason, null);
    else assert.ok(['stop', 'length'].includes(c.finish_reason));
  });
});

test('chat stream: role chunk, content-only deltas, usage chunk, [DONE]', async () => {
  const { id } = await model();
  const res = await rawPost('/v1/chat/completions', JSON.stringify({
    model: id, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 5, temperature: 0,
    stream: true, stream_options: { include_usage: true },
  }));
  assert.equal(res.status, 200);
  const data = sseData(res.text);
  assert.equal(data.at(-1), '[DONE]');
  const chunks = data.slice(0, -1).map((d) => JSON.parse(d));
  chunks.forEach((chunk) => checkEnvelope(chunk, 'chat.completion.chunk', 'chatcmpl-', id));
  assert.deepEqual(chunks[0].choices[0].delta, { role: 'assistant', content: '' });
  const usageChunk = chunks.at(-1);
  assert.deepEqual(usageChunk.choices, []);
  assert.deepEqual(Object.keys(usageChunk.usage).sort(), ['completion_tokens', 'prompt_tokens', 'total_tokens']);
  const body = chunks.slice(1, -1);
  body.forEach((chunk, i) => {
    assert.equal(chunk.usage, null, 'include_usage puts "usage": null on the other chunks');
    const c = chunk.choices[0];
    assert.ok(!('role' in c.delta));
    if (i < body.length - 1) assert.equal(c.finish_reason, null);
  });
  assert.ok(['stop', 'length'].includes(body.at(-1).choices[0].finish_reason));
});

test('non-streaming bodies, field by field', async () => {
  const { id } = await model();
  const completion = (await rawPost('/v1/completions', JSON.stringify({ model: id, prompt: 'Hi', max_tokens: 3 }))).json;
  checkEnvelope(completion, 'text_completion', 'cmpl-', id);
  assert.deepEqual(Object.keys(completion.choices[0]).sort(),
    ['finish_reason', 'index', 'logprobs', 'stop_reason', 'text']);
  assert.deepEqual(Object.keys(completion.usage).sort(), ['completion_tokens', 'prompt_tokens', 'total_tokens']);

  const chat = (await rawPost('/v1/chat/completions', JSON.stringify({
    model: id, messages: [{ role: 'user', content: 'Hi' }], max_tokens: 3,
  }))).json;
  checkEnvelope(chat, 'chat.completion', 'chatcmpl-', id);
  assert.deepEqual(Object.keys(chat.choices[0]).sort(), ['finish_reason', 'index', 'logprobs', 'message', 'stop_reason']);
  assert.deepEqual(chat.choices[0].message.role, 'assistant');
  assert.equal(typeof chat.choices[0].message.content, 'string');

  const models = await fetch(`${process.env.ORCA_BASE_URL.replace(/\/+$/, '').replace(/\/v1$/, '')}/v1/models`, {
    headers: process.env.ORCA_API_KEY ? { Authorization: `Bearer ${process.env.ORCA_API_KEY}` } : {},
  }).then((r) => r.json());
  assert.equal(models.object, 'list');
  assert.equal(models.data[0].object, 'model');
  assert.equal(models.data[0].id, id);
  assert.ok(isInt(models.data[0].created));
  assert.equal(typeof models.data[0].owned_by, 'string');
});
