// Structured outputs end to end through the official `openai` client against
// `orca serve`: on tiny-gpt2 (GPT-2's real 50k vocabulary; 2 pipeline stages,
// paged KV policy) and on the stories260K GGUF (SentencePiece with byte
// fallback; 2 tensor-parallel shards). JSON mode, json_schema with strict
// (validated by ajv), guided_choice, guided_regex, streaming, n > 1, and the
// 400s for what cannot be enforced. Skipped when ../shared is absent.
//   ORCA_BIN_DIR=build/bin ORCA_SHARED_DIR=../shared node --test tests/e2e/structured/serve_structured.test.mjs
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { expect400, startServeWithClient } from '../stack/openai_serve.mjs';

const shared = process.env.ORCA_SHARED_DIR && path.join(process.env.ORCA_SHARED_DIR, 'models');
// Neither model ships a chat template: the chat tests name the built-in chatml.
const models = [
  { name: 'tiny-gpt2', path: shared && path.join(shared, 'tiny-gpt2'),
    args: ['--pipeline-parallel=2', '--policy=paged', '--chat-template=chatml'] },
  { name: 'stories260K', path: shared && path.join(shared, 'stories260K.gguf'),
    args: ['--tensor-parallel=2', '--chat-template=chatml'] },
];

const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);

const person = {
  type: 'object',
  properties: {
    name: { type: 'string', maxLength: 10 },
    age: { type: 'integer', minimum: 0, maximum: 120 },
    role: { enum: ['admin', 'user', null] },
    active: { type: 'boolean' },
    born: { type: 'string', format: 'date' },
    tags: { type: 'array', items: { type: 'string', maxLength: 4 }, maxItems: 2 },
  },
  required: ['name', 'age', 'role', 'active'],
  additionalProperties: false,
};
const validatePerson = ajv.compile(person);

const startServe = (model, extraArgs) => startServeWithClient(model, extraArgs, 'structured');

for (const m of models) {
  const present = m.path && fs.existsSync(m.path);
  test(`structured outputs on ${m.name}`, { skip: !present && `no ${m.path}` }, async (t) => {
    const s = await startServe(m.path, m.args);
    const { client } = s;
    const model = m.name;
    try {
      await t.test('json_schema with strict: n = 3 choices, each valid (ajv)', async () => {
        const r = await client.chat.completions.create({
          model, messages: [{ role: 'user', content: 'Describe a person as JSON.' }], max_tokens: 400, temperature: 1, n: 3,
          response_format: { type: 'json_schema', json_schema: { name: 'person', strict: true, schema: person } },
        });
        assert.equal(r.choices.length, 3);
        for (const c of r.choices) {
          assert.equal(c.finish_reason, 'stop', c.message.content);
          const value = JSON.parse(c.message.content);
          assert.ok(validatePerson(value), `${c.message.content}\n${JSON.stringify(validatePerson.errors)}`);
        }
      });

      await t.test('json_schema streamed: the deltas assemble into a valid object', async () => {
        const stream = await client.chat.completions.create({
          model, messages: [{ role: 'user', content: 'JSON please' }], max_tokens: 400, temperature: 0.8, stream: true,
          response_format: { type: 'json_schema', json_schema: { name: 'person', strict: true, schema: person } },
        });
        let text = '', finish = null, chunks = 0;
        for await (const chunk of stream) {
          for (const c of chunk.choices) {
            text += c.delta?.content ?? '';
            if (c.finish_reason) finish = c.finish_reason;
          }
          chunks++;
        }
        assert.ok(chunks > 2);
        assert.equal(finish, 'stop', text);
        assert.ok(validatePerson(JSON.parse(text)), text);
      });

      await t.test('JSON mode: an object (or a truncated one at the token limit)', async () => {
        const r = await client.chat.completions.create({
          model, messages: [{ role: 'user', content: 'Answer in JSON.' }], max_tokens: 120, temperature: 1,
          response_format: { type: 'json_object' },
        });
        const c = r.choices[0];
        assert.ok(c.message.content.startsWith('{'), c.message.content);
        if (c.finish_reason === 'stop') {
          const v = JSON.parse(c.message.content);
          assert.equal(typeof v, 'object');
          assert.ok(v !== null && !Array.isArray(v));
        } else {
          assert.equal(c.finish_reason, 'length');
        }
      });

      await t.test('guided_choice on completions, n = 4', async () => {
        const choices = ['positive', 'negative', 'neutral'];
        const r = await client.completions.create({
          model, prompt: 'The movie was great. Sentiment:', max_tokens: 20, temperature: 1, n: 4, guided_choice: choices,
        });
        assert.equal(r.choices.length, 4);
        for (const c of r.choices) {
          assert.ok(choices.includes(c.text), c.text);
          assert.equal(c.finish_reason, 'stop');
        }
      });

      await t.test('guided_regex streamed on completions', async () => {
        const regex = '[0-9]{3}-[a-z]{2,4}(!|\\?)';
        const stream = await client.completions.create({
          model, prompt: 'Code:', max_tokens: 30, temperature: 1, stream: true, guided_regex: regex,
        });
        let text = '', finish = null;
        for await (const chunk of stream) {
          text += chunk.choices[0]?.text ?? '';
          if (chunk.choices[0]?.finish_reason) finish = chunk.choices[0].finish_reason;
        }
        assert.match(text, new RegExp(`^(?:${regex})$`));
        assert.equal(finish, 'stop');
      });

      await t.test('guided_json given as text, greedy', async () => {
        const schema = { type: 'array', items: { type: 'integer' }, minItems: 2, maxItems: 3 };
        const r = await client.completions.create({
          model, prompt: 'Numbers:', max_tokens: 80, temperature: 0, guided_json: JSON.stringify(schema),
        });
        assert.equal(r.choices[0].finish_reason, 'stop', r.choices[0].text);
        assert.ok(ajv.validate(schema, JSON.parse(r.choices[0].text)), r.choices[0].text);
      });

      await t.test('what cannot be enforced is a 400 naming the keyword and its path', async () => {
        await expect400(client.chat.completions.create({
          model, messages: [{ role: 'user', content: 'x' }],
          response_format: { type: 'json_schema', json_schema: { name: 'n', schema: {
            type: 'object', properties: { age: { type: 'integer', multipleOf: 2 } } } } },
        }), 'response_format', /'multipleOf' at \/properties\/age/);
        await expect400(client.completions.create({ model, prompt: 'x', guided_regex: '(a)\\1' }),
          'guided_regex', /backreferences/);
        await expect400(client.completions.create({ model, prompt: 'x', guided_regex: 'a', guided_choice: ['a'] }),
          'guided_choice', /'guided_regex' and 'guided_choice' both constrain/);
        await expect400(client.completions.create({ model, prompt: 'x', guided_choice: [] }),
          'guided_choice', /non-empty array/);
        await expect400(client.chat.completions.create({
          model, messages: [{ role: 'user', content: 'x' }], response_format: { type: 'json_schema' },
        }), 'response_format', /json_schema' is required/);
      });
    } catch (e) {
      console.error(s.logs());
      throw e;
    } finally {
      await s.stop();
    }
  });
}
