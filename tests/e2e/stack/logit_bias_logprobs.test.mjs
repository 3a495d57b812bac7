// logit_bias, echo with logprobs and prompt_logprobs through the official `openai`
// client against `orca serve` on real-tokenizer models (../shared/models/tiny-gpt2,
// GPT-2's 50k vocabulary, and stories260K.gguf; each skipped when absent):
//  - +100 on a token makes greedy decoding emit only it; -100 bans the greedy choice;
//  - echo + logprobs: the prompt's tokens lead the logprobs (the first null), and the
//    logprob of each prompt token equals the logprob of that token when it is generated
//    after the same prefix (forced with logit_bias: logprobs are the raw model's);
//  - prompt_logprobs (vLLM's extra) equal the echoed ones, also with chunked prefill,
//    prefix caching, paged KV and two pipeline stages;
//  - bad logit_bias bodies are 400s naming the field.
//   ORCA_BIN_DIR=build/bin ORCA_SHARED_DIR=../shared node --test tests/e2e/stack/logit_bias_logprobs.test.mjs
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { startServe, stopServe } from './stack.mjs';

const shared = process.env.ORCA_SHARED_DIR ?? path.join(process.cwd(), '..', 'shared');
const models = [
  { name: 'tiny-gpt2', path: path.join(shared, 'models', 'tiny-gpt2') },
  { name: 'stories260K', path: path.join(shared, 'models', 'stories260K.gguf') },
];
const kTolerance = 2e-3;  // logprob difference allowed between two computations of the same position

async function startBiasServe(model, extraArgs = []) {
  const s = await startServe('orca-bias-e2e-', model, ['--threads=1', '--dtype=f32', ...extraArgs]);
  const client = new OpenAI({ baseURL: `${s.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 120000 });
  const served = (await client.models.list()).data[0].id;
  return { ...s, client, served };
}

async function post(s, route, body) {
  const r = await fetch(`${s.url}${route}`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
  });
  return { status: r.status, json: await r.json() };
}

async function tokenize(s, text) {
  const { status, json } = await post(s, '/tokenize', { model: s.served, prompt: text, add_special_tokens: false });
  assert.equal(status, 200, JSON.stringify(json));
  return json.tokens;
}

async function detokenize(s, ids) {
  const { status, json } = await post(s, '/detokenize', { model: s.served, tokens: ids });
  assert.equal(status, 200, JSON.stringify(json));
  return json.prompt;
}

const kPrompt = 'Once upon a time there was a little girl who liked to play in the park with her dog. ' +
  'One day the sun was hot and the girl was sad because her dog ran away to the big tree';

/** The text `count` copies of token `id` decode to after kPrompt (mid-sequence, as the completion's text is). */
async function forcedText(s, id, count) {
  const { json } = await post(s, '/tokenize', { model: s.served, prompt: kPrompt });
  const prefix = await detokenize(s, json.tokens);
  const all = await detokenize(s, json.tokens.concat(Array(count).fill(id)));
  assert.ok(all.startsWith(prefix));
  return all.slice(prefix.length);
}

async function checkLogitBias(s) {
  const c = s.client;
  const greedy = (extra) => c.completions.create({
    model: s.served, prompt: kPrompt, max_tokens: 4, temperature: 0, ignore_eos: true, ...extra,
  });
  // Force: a token the model would not pick, three times over.
  const forcedId = s.served === 'tiny-gpt2' ? 31373 /* "hello" */ : 300;
  const forced = await greedy({ logit_bias: { [forcedId]: 100 } });
  assert.equal(forced.choices[0].text, await forcedText(s, forcedId, 4), `+100 on ${forcedId}`);

  // Ban: the greedy first token, found by its id, is never produced with -100.
  const plain = await greedy({ max_tokens: 1, logprobs: 1 });
  const firstText = plain.choices[0].logprobs.tokens[0];
  const ids = await tokenize(s, firstText);
  if (ids.length === 1) {
    const banned = await greedy({ max_tokens: 1, logprobs: 1, logit_bias: { [ids[0]]: -100 } });
    assert.notEqual(banned.choices[0].logprobs.tokens[0], firstText, 'the banned token was still produced');
  }

  // Streaming, n = 2, sampling: every token is the forced one.
  const stream = await c.completions.create({
    model: s.served, prompt: kPrompt, max_tokens: 3, temperature: 1, n: 2, stream: true,
    logit_bias: { [forcedId]: 100 },
  });
  const texts = ['', ''];
  for await (const chunk of stream) for (const ch of chunk.choices) texts[ch.index] += ch.text;
  const three = await forcedText(s, forcedId, 3);
  assert.deepEqual(texts, [three, three]);

  // Chat takes it too, when the model has a chat template; without one (these models ship none and no
  // --chat-template is given) chat is a 400 that names the flag, never a guessed template.
  const chat = await post(s, '/v1/chat/completions', {
    model: s.served, messages: [{ role: 'developer', content: 'Be brief.' }, { role: 'user', content: 'Hi' }],
    max_tokens: 2, temperature: 0, logit_bias: { [forcedId]: 100 },
  });
  if (chat.status === 200) {
    assert.equal(chat.json.choices[0].message.content, await forcedText(s, forcedId, 2));
  } else {
    assert.equal(chat.status, 400);
    assert.match(chat.json.error.message, /no chat template.*--chat-template/s);
  }

  // Bad bodies: 400 naming the field (through the client's error type).
  for (const [bias, message] of [
    [{ hello: 1 }, /keys must be token ids/],
    [{ [forcedId]: 101 }, /must be in \[-100, 100\]/],
    [{ 99999999: 1 }, /not a token id of this model/],
  ]) {
    await assert.rejects(greedy({ logit_bias: bias }), (e) => {
      assert.equal(e.status, 400);
      assert.equal(e.param, 'logit_bias');
      assert.match(e.message, message);
      return true;
    });
  }
}

/** The echoed logprobs of kPrompt, checked for shape; returns { ids, logprobs }. */
async function echoLogprobs(s) {
  const r = await s.client.completions.create({
    model: s.served, prompt: kPrompt, max_tokens: 2, temperature: 0, echo: true, logprobs: 2, ignore_eos: true,
  });
  const choice = r.choices[0];
  assert.ok(choice.text.startsWith(kPrompt), `text does not start with the prompt: ${JSON.stringify(choice.text)}`);
  const lp = choice.logprobs;
  const n = r.usage.prompt_tokens + r.usage.completion_tokens;
  assert.equal(lp.tokens.length, n);
  assert.equal(lp.token_logprobs.length, n);
  assert.equal(lp.top_logprobs.length, n);
  assert.equal(lp.text_offset.length, n);
  assert.equal(lp.token_logprobs[0], null);
  assert.equal(lp.top_logprobs[0], null);
  for (let i = 1; i < n; i++) {
    assert.ok(lp.token_logprobs[i] <= 0, `token ${i}: ${lp.token_logprobs[i]}`);
    assert.ok(Object.keys(lp.top_logprobs[i]).length <= 3);
    assert.ok(lp.text_offset[i] >= lp.text_offset[i - 1]);
  }
  return { r, lp };
}

async function checkEchoAndPromptLogprobs(s) {
  const { r, lp } = await echoLogprobs(s);
  const promptTokens = r.usage.prompt_tokens;
  // prompt_logprobs, vLLM's shape: null, then {id: {logprob, rank, decoded_token}} with the token and 3 alternatives.
  const pl = await s.client.completions.create({
    model: s.served, prompt: kPrompt, max_tokens: 1, temperature: 0, prompt_logprobs: 3,
  });
  const plist = pl.choices[0].prompt_logprobs;
  assert.equal(plist.length, promptTokens);
  assert.equal(plist[0], null);
  const promptIds = [], ownIds = [];
  for (let p = 1; p < promptTokens; p++) {
    const entries = Object.entries(plist[p]);
    assert.ok(entries.length >= 3 && entries.length <= 4, JSON.stringify(plist[p]));
    for (const [, e] of entries) assert.ok(e.logprob <= 0 && e.rank >= 1 && typeof e.decoded_token === 'string');
    // The prompt token is the entry whose decoded text is the echoed token's.
    const own = entries.find(([, e]) => e.decoded_token === lp.tokens[p]);
    assert.ok(own, `position ${p}: ${JSON.stringify(lp.tokens[p])} not in ${JSON.stringify(plist[p])}`);
    assert.ok(Math.abs(own[1].logprob - lp.token_logprobs[p]) <= 1e-5, `position ${p}: echo and prompt_logprobs differ`);
    promptIds.push(Number(own[0]));
    ownIds[p] = own[0];
    const ranks = entries.map(([, e]) => e.rank).sort((a, b) => a - b);
    assert.ok(ranks.includes(1));
  }

  // The logprob of a prompt token = the logprob of that token generated after the same prefix (forced by logit_bias:
  // logprobs are the raw model's). Prefixes as token ids, as the completion tokenized the prompt.
  const { json: tok } = await post(s, '/tokenize', { model: s.served, prompt: kPrompt });
  const allIds = tok.tokens;
  assert.equal(allIds.length, promptTokens);
  assert.deepEqual(promptIds, allIds.slice(1));
  for (const p of [1, Math.floor(promptTokens / 2), promptTokens - 1]) {
    const g = await s.client.completions.create({
      model: s.served, prompt: allIds.slice(0, p), max_tokens: 1, temperature: 0, logprobs: 1,
      logit_bias: { [allIds[p]]: 100 },
    });
    assert.ok(Math.abs(g.choices[0].logprobs.token_logprobs[0] - lp.token_logprobs[p]) <= kTolerance,
      `position ${p}: generated ${g.choices[0].logprobs.token_logprobs[0]} vs prompt ${lp.token_logprobs[p]}`);
  }

  // Streaming echo + logprobs, n = 2: each choice's chunks add up to the non-streamed arrays.
  const stream = await s.client.completions.create({
    model: s.served, prompt: kPrompt, max_tokens: 2, temperature: 0, echo: true, logprobs: 2, ignore_eos: true,
    n: 2, stream: true,
  });
  const got = [[], []];
  for await (const chunk of stream) {
    for (const ch of chunk.choices) if (ch.logprobs) got[ch.index].push(...ch.logprobs.token_logprobs);
  }
  for (const g of got) {
    assert.equal(g.length, lp.token_logprobs.length);
    for (let i = 0; i < g.length; i++) {
      if (i === 0) assert.equal(g[i], null);
      else assert.ok(Math.abs(g[i] - lp.token_logprobs[i]) <= kTolerance, `streamed position ${i}`);
    }
  }
  return { plist, ownIds };
}

for (const m of models) {
  const present = fs.existsSync(m.path);
  test(`logit_bias, echo with logprobs and prompt_logprobs on ${m.name}`, { skip: !present && `${m.path} is absent` },
    async () => {
      let s = await startBiasServe(m.path);
      let plist, ownIds;
      try {
        await checkLogitBias(s);
        ({ plist, ownIds } = await checkEchoAndPromptLogprobs(s));
      } finally {
        assert.equal(await stopServe(s), 0, `orca serve did not stop cleanly:\n${s.stderr()}`);
      }
      // Chunked prefill (chunks of 16 tokens), prefix caching, paged KV, two pipeline stages: the same numbers.
      s = await startBiasServe(m.path, ['--pipeline-parallel=2', '--policy=paged', '--max-num-batched-tokens=16',
        '--enable-prefix-caching', '--kv-block-size=16', '--max-bs=4']);
      try {
        // Twice: the second time the prompt's blocks are cached, and must not be used for prompt logprobs.
        for (let round = 0; round < 2; round++) {
          const pl = await s.client.completions.create({
            model: s.served, prompt: kPrompt, max_tokens: 1, temperature: 0, prompt_logprobs: 3,
          });
          const got = pl.choices[0].prompt_logprobs;
          assert.equal(got.length, plist.length);
          const best = (entry) => Math.max(...Object.values(entry).map((e) => e.logprob));
          for (let p = 1; p < got.length; p++) {
            const id = ownIds[p];
            assert.ok(got[p][id], `round ${round} position ${p}: the prompt token ${id} is missing`);
            assert.ok(Math.abs(got[p][id].logprob - plist[p][id].logprob) <= kTolerance,
              `round ${round} position ${p} token ${id}: ${got[p][id].logprob} vs ${plist[p][id].logprob}`);
            assert.ok(Math.abs(best(got[p]) - best(plist[p])) <= kTolerance, `round ${round} position ${p}: top-1`);
          }
        }
        await checkLogitBias(s);
      } finally {
        assert.equal(await stopServe(s), 0, `orca serve did not stop cleanly:\n${s.stderr()}`);
      }
    });
}
