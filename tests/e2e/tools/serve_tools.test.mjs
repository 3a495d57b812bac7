// Tool calling end to end through the official `openai` client against `orca serve`:
// on tiny-gpt2 (GPT-2's real 50k vocabulary; no chat template of its own, so the
// built-in chatml renders the tools and the Hermes format is detected), on the
// stories260K GGUF with the built-in llama3 template (Llama 3 JSON format detected),
// and on tiny-gpt2 with --tool-call-parser=mistral. With tiny models the content of
// an "auto" answer is arbitrary, but "required" and a named function are enforced
// by constrained decoding, so every call must parse and its arguments must validate
// (ajv) against the tool's parameters. Checks OpenAI's shapes (ids call_..., content
// null, finish_reason "tool_calls", streamed delta.tool_calls), n > 1,
// parallel_tool_calls, the client's runTools helper (its second request sends the
// assistant's tool_calls and the tool results back through the template), and the
// 400s. Skipped when ../shared is absent.
//   ORCA_BIN_DIR=build/bin ORCA_SHARED_DIR=../shared node --test tests/e2e/tools/serve_tools.test.mjs
import fs from 'node:fs';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Ajv2020 from 'ajv/dist/2020.js';
import { expect400, startServeWithClient } from '../stack/openai_serve.mjs';

const shared = process.env.ORCA_SHARED_DIR && path.join(process.env.ORCA_SHARED_DIR, 'models');
const setups = [
  // tiny-gpt2 ships no chat template: the built-in chatml (Hermes-style tools) is named explicitly.
  { name: 'tiny-gpt2', format: 'hermes', path: shared && path.join(shared, 'tiny-gpt2'), args: ['--chat-template=chatml'] },
  {
    name: 'stories260K', format: 'llama3_json', path: shared && path.join(shared, 'stories260K.gguf'),
    args: ['--chat-template=llama3'],
  },
  {
    name: 'tiny-gpt2', format: 'mistral', path: shared && path.join(shared, 'tiny-gpt2'),
    args: ['--chat-template=chatml', '--tool-call-parser=mistral'],
  },
];

const ajv = new Ajv2020({ strict: false, allErrors: true });
const weatherParams = {
  type: 'object',
  properties: {
    city: { type: 'string', minLength: 1, maxLength: 12 },
    unit: { enum: ['celsius', 'fahrenheit'] },
    days: { type: 'integer', minimum: 1, maximum: 7 },
  },
  required: ['city', 'unit'],
  additionalProperties: false,
};
const addParams = {
  type: 'object',
  properties: { a: { type: 'integer', minimum: -99, maximum: 99 }, b: { type: 'integer', minimum: -99, maximum: 99 } },
  required: ['a', 'b'],
  additionalProperties: false,
};
const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'Current weather in a city', parameters: weatherParams } },
  { type: 'function', function: { name: 'add', description: 'Add two integers', parameters: addParams } },
];
const validators = { get_weather: ajv.compile(weatherParams), add: ajv.compile(addParams) };
const messages = [{ role: 'user', content: 'What is the weather in Paris, and what is 2 + 3?' }];

const startServe = (model, extraArgs) => startServeWithClient(model, extraArgs, 'tools');

// One call in OpenAI's shape, of a declared tool (or `only`), with arguments valid against its schema.
function checkCall(call, only) {
  assert.match(call.id, /^call_[0-9a-f]{24}$/, JSON.stringify(call));
  assert.equal(call.type, 'function');
  assert.ok(only ? call.function.name === only : call.function.name in validators, JSON.stringify(call));
  const args = JSON.parse(call.function.arguments);
  const validate = validators[call.function.name];
  assert.ok(validate(args), `${call.function.arguments}\n${JSON.stringify(validate.errors)}`);
}

for (const s of setups) {
  const present = s.path && fs.existsSync(s.path);
  test(`tool calling on ${s.name} (${s.format})`, { skip: !present && `no ${s.path}` }, async (t) => {
    const serve = await startServe(s.path, s.args);
    const { client } = serve;
    const model = s.name;
    try {
      await t.test('required, n = 3, one call each: parsed, valid, finish_reason tool_calls', async () => {
        const r = await client.chat.completions.create({
          model, messages, tools, tool_choice: 'required', parallel_tool_calls: false, n: 3, max_tokens: 200,
          temperature: 1,
        });
        assert.equal(r.choices.length, 3);
        for (const c of r.choices) {
          assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c.message));
          assert.equal(c.message.role, 'assistant');
          assert.equal(c.message.content, null);
          assert.equal(c.message.tool_calls.length, 1);
          checkCall(c.message.tool_calls[0]);
        }
        const ids = r.choices.map((c) => c.message.tool_calls[0].id);
        assert.equal(new Set(ids).size, ids.length);
      });

      await t.test('required with parallel calls: every call parses and validates', async () => {
        const r = await client.chat.completions.create({
          model, messages, tools, tool_choice: 'required', max_tokens: 300, temperature: 1, seed: 7,
        });
        const c = r.choices[0];
        assert.ok(c.message.tool_calls?.length >= 1, JSON.stringify(c));
        c.message.tool_calls.forEach((call) => checkCall(call));
        if (c.finish_reason === 'tool_calls') assert.equal(c.message.content, null);
        else assert.equal(c.finish_reason, 'length');  // cut inside a further call: that call is left as content
      });

      await t.test('named function, streamed: deltas carry index, id, name and arguments', async () => {
        const stream = await client.chat.completions.create({
          model, messages, tools, tool_choice: { type: 'function', function: { name: 'add' } }, max_tokens: 200,
          temperature: 1, stream: true, n: 2,
        });
        const calls = [[], []];
        const finish = [null, null];
        let content = '';
        for await (const chunk of stream) {
          for (const c of chunk.choices) {
            content += c.delta?.content ?? '';
            for (const d of c.delta?.tool_calls ?? []) {
              const acc = calls[c.index][d.index] ??= { id: '', type: '', function: { name: '', arguments: '' } };
              if (d.id) acc.id = d.id;
              if (d.type) acc.type = d.type;
              acc.function.name += d.function?.name ?? '';
              acc.function.arguments += d.function?.arguments ?? '';
            }
            if (c.finish_reason) finish[c.index] = c.finish_reason;
          }
        }
        assert.equal(content, '');
        for (let i = 0; i < 2; ++i) {
          assert.equal(finish[i], 'tool_calls');
          assert.equal(calls[i].length, 1, JSON.stringify(calls[i]));
          checkCall(calls[i][0], 'add');
        }
      });

      await t.test('the client stream helper assembles the streamed call', async () => {
        const stream = client.chat.completions.stream({
          model, messages, tools, tool_choice: { type: 'function', function: { name: 'get_weather' } },
          max_tokens: 200, temperature: 1,
        });
        const done = await stream.finalChatCompletion();
        const c = done.choices[0];
        assert.equal(c.finish_reason, 'tool_calls');
        assert.equal(c.message.tool_calls.length, 1);
        checkCall(c.message.tool_calls[0], 'get_weather');
      });

      await t.test('runTools: calls run locally and their results go back through the template', async () => {
        const seen = [];
        const runner = client.chat.completions.runTools({
          model, messages, max_tokens: 200, temperature: 1, tool_choice: 'required', parallel_tool_calls: false,
          tools: [
            { type: 'function', function: { name: 'get_weather', parameters: weatherParams,
              function: (args) => { seen.push(['get_weather', args]); return { temperature: 21 }; }, parse: JSON.parse } },
            { type: 'function', function: { name: 'add', parameters: addParams,
              function: (args) => { seen.push(['add', args]); return args.a + args.b; }, parse: JSON.parse } },
          ],
        }, { maxChatCompletions: 2 });
        await runner.done();
        assert.equal(seen.length, 2, JSON.stringify(runner.messages));
        for (const [name, args] of seen) assert.ok(validators[name](args), JSON.stringify(args));
        // user, assistant (tool_calls), tool, assistant (tool_calls), tool: the second request rendered the first
        // call and its result.
        const roles = runner.messages.map((m) => m.role);
        assert.deepEqual(roles, ['user', 'assistant', 'tool', 'assistant', 'tool']);
        assert.equal(runner.messages[2].tool_call_id, runner.messages[1].tool_calls[0].id);
      });

      await t.test('auto: a well-formed answer, content or calls', async () => {
        const r = await client.chat.completions.create({ model, messages, tools, max_tokens: 40, temperature: 1, n: 2 });
        for (const c of r.choices) {
          assert.ok(['stop', 'length', 'tool_calls'].includes(c.finish_reason), c.finish_reason);
          if (c.finish_reason === 'tool_calls') c.message.tool_calls.forEach((call) => checkCall(call));
          else assert.equal(typeof c.message.content, 'string');
        }
        // A conversation carrying earlier calls and results renders and answers.
        const history = [
          ...messages,
          { role: 'assistant', content: null, tool_calls: [{ id: 'call_0123456789abcdef01234567', type: 'function',
            function: { name: 'add', arguments: '{"a": 2, "b": 3}' } }] },
          { role: 'tool', tool_call_id: 'call_0123456789abcdef01234567', content: '5' },
        ];
        const again = await client.chat.completions.create({ model, messages: history, tools, max_tokens: 10 });
        assert.equal(again.choices.length, 1);
        const off = await client.chat.completions.create({ model, messages, tools, tool_choice: 'none', max_tokens: 10 });
        assert.equal(off.choices[0].message.tool_calls, undefined);
        assert.notEqual(off.choices[0].finish_reason, 'tool_calls');
      });

      await t.test('malformed tools and choices are 400s naming the field', async () => {
        await expect400(client.chat.completions.create({
          model, messages, tools, tool_choice: { type: 'function', function: { name: 'nope' } },
        }), 'tool_choice', /'nope' is not one of the functions/);
        await expect400(client.chat.completions.create({
          model, messages, tools: [{ type: 'function', function: { name: 'bad name' } }],
        }), 'tools', /'tools\[0\]\.function\.name' must be 1 to 64 characters/);
        await expect400(client.chat.completions.create({
          model, messages, tool_choice: 'required',
          tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { x: { not: {} } } } } }],
        }), 'tools', /'tools\[0\]\.function\.parameters' cannot be enforced.*'not' at \/properties\/x/);
        await expect400(client.chat.completions.create({
          model, messages, tools, tool_choice: 'required', response_format: { type: 'json_object' },
        }), 'tool_choice', /give one of them/);
        await expect400(client.chat.completions.create({
          model, messages: [{ role: 'tool', content: 'x' }],
        }), 'messages', /tool_call_id' is required/);
      });
    } catch (e) {
      console.error(serve.logs());
      throw e;
    } finally {
      await serve.stop();
    }
  });
}
