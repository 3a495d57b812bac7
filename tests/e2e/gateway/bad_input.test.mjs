// The bad-input table: each request gets the right status and a message that
// names the problem, while a concurrent stream goes on unharmed.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BASE_URL, API_KEY, MAX_BODY_BYTES, authHeaders, rawPost, model, sseData } from './common.mjs';

test('bad inputs are rejected precisely while a stream continues', async (t) => {
  const { id, maxModelLen } = await model();

  // A stream that runs while the table is sent.
  const streamRequest = fetch(`${BASE_URL}/v1/completions`, {
    method: 'POST',
    headers: authHeaders(),
    body: JSON.stringify({ model: id, prompt: 'Once', max_tokens: 64, temperature: 0, stream: true, ignore_eos: true }),
  });
  const reference = rawPost('/v1/completions', JSON.stringify({
    model: id, prompt: 'Once', max_tokens: 64, temperature: 0, ignore_eos: true,
  }));

  const completion = (fields) => JSON.stringify({ model: id, prompt: 'x', ...fields });
  const cases = [
    ['malformed JSON', '/v1/completions', '{"prompt": "x",', 400, /Invalid JSON body: parse error at line 1, column \d+/],
    ['body not an object', '/v1/completions', '[1,2,3]', 400, /must be a JSON object/],
    ['max_tokens wrong type', '/v1/completions', completion({ max_tokens: 'ten' }), 400, /'max_tokens' must be an integer/],
    ['temperature wrong type', '/v1/completions', completion({ temperature: 'hot' }), 400, /'temperature' must be a number/],
    ['n zero', '/v1/completions', completion({ n: 0 }), 400, /'n' must be at least 1/],
    ['stop wrong type', '/v1/completions', completion({ stop: 5 }), 400, /'stop' must be a string or an array of strings/],
    ['negative max_tokens', '/v1/completions', completion({ max_tokens: -5 }), 400, /'max_tokens' must be at least 1, got -5/],
    ['huge max_tokens', '/v1/completions', completion({ max_tokens: 10_000_000 }), 400,
      new RegExp(`maximum context length is ${maxModelLen} tokens\\. However, you requested \\d+ tokens \\(\\d+ in the prompt, 10000000 in the completion\\)`)],
    ['prompt over the context', '/v1/completions', completion({ prompt: Array(maxModelLen + 10).fill(1) }), 400,
      new RegExp(`maximum context length is ${maxModelLen} tokens\\. However, your request has ${maxModelLen + 10} input tokens`)],
    ['empty messages', '/v1/chat/completions', JSON.stringify({ model: id, messages: [] }), 400, /'messages' must contain at least one message/],
    ['image content part', '/v1/chat/completions', JSON.stringify({
      model: id, messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'http://x' } }] }],
    }), 400, /'image_url' is not supported/],
    ['invalid UTF-8', '/v1/completions', Buffer.concat([Buffer.from('{"prompt": "a'), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]),
      400, /not valid UTF-8/],
    ['unknown model', '/v1/completions', JSON.stringify({ model: 'no-such-model', prompt: 'x' }), 404, /does not exist/],
    ['oversized body', '/v1/completions', JSON.stringify({ model: id, prompt: 'y'.repeat(MAX_BODY_BYTES) }), 413,
      /exceeds the limit of \d+ bytes/],
  ];
  for (const [name, path, body, status, message] of cases) {
    const res = await rawPost(path, body);
    assert.equal(res.status, status, `${name}: ${res.text.slice(0, 300)}`);
    assert.ok(res.json && res.json.error, `${name}: OpenAI error shape`);
    assert.match(res.json.error.message, message, name);
    assert.equal(typeof res.json.error.type, 'string', name);
  }

  await t.test('wrong API key', async (st) => {
    if (!API_KEY) return st.skip('the gateway runs without --api-keys');
    const res = await rawPost('/v1/completions', completion({}), { 'Content-Type': 'application/json', Authorization: 'Bearer wrong' });
    assert.equal(res.status, 401);
    assert.equal(res.json.error.type, 'authentication_error');
    const none = await rawPost('/v1/completions', completion({}), { 'Content-Type': 'application/json' });
    assert.equal(none.status, 401);
  });

  // The concurrent stream was not harmed: it finishes normally with the same text.
  const streamed = await (await streamRequest).text();
  const data = sseData(streamed);
  assert.equal(data.at(-1), '[DONE]');
  const chunks = data.slice(0, -1).map((d) => JSON.parse(d));
  assert.ok(chunks.every((c) => !c.error), 'no error event in the stream');
  const text = chunks.map((c) => c.choices.map((x) => x.text).join('')).join('');
  assert.equal(text, (await reference).json.choices[0].text);
  assert.equal(chunks.at(-1).choices[0].finish_reason, 'length');
});
