// Thousands of random constrained generations over GPT-2's real vocabulary
// (tiny-gpt2's tokenizer), each checked by an independent validator: ajv
// (+ ajv-formats) for JSON Schemas, JavaScript's RegExp for guided_regex.
// The generations come from `structured_bench --mode=sample` (uniform choice
// among the tokens the grammar allows at each step, EOS included where it may
// end). Skipped when ../shared is absent.
//   ORCA_BIN_DIR=build/bin ORCA_SHARED_DIR=../shared node --test tests/e2e/structured/ajv_random.test.mjs
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import Ajv2020 from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { binDir } from '../stack/stack.mjs';

const model = process.env.ORCA_SHARED_DIR && path.join(process.env.ORCA_SHARED_DIR, 'models', 'tiny-gpt2');
const haveModel = model && fs.existsSync(path.join(model, 'tokenizer.json'));

export const specs = [
  { schema: { type: 'object', properties: {
      name: { type: 'string', maxLength: 12 }, age: { type: 'integer', minimum: -5, maximum: 150 },
      tags: { type: 'array', items: { enum: ['a', 'b c', 7] }, maxItems: 3 },
      when: { type: 'string', format: 'date' } },
    required: ['name', 'age'], additionalProperties: false } },
  { schema: { $defs: { t: { type: 'object', properties: { v: { type: 'integer' },
      kids: { type: 'array', items: { $ref: '#/$defs/t' }, maxItems: 2 } },
      required: ['v'], additionalProperties: false } }, $ref: '#/$defs/t' } },
  { schema: { type: 'object', properties: { id: { type: 'string', format: 'uuid' },
      score: { type: ['number', 'null'] }, w: { type: 'number', minimum: 2, maximum: 7 }, ok: { type: 'boolean' }, kind: { const: 'x' } },
    required: ['id', 'score', 'ok', 'kind'], additionalProperties: false } },
  { schema: { type: 'array', prefixItems: [{ type: 'string', minLength: 1, maxLength: 5 }, { type: 'integer' }],
    items: false, minItems: 2 } },
  { schema: { type: 'object', properties: { n: { type: 'integer' } },
    additionalProperties: { type: 'string', pattern: '^[a-z]{1,4}$' }, required: ['n'] } },
  { schema: { type: 'object', properties: { t: { type: 'string', format: 'date-time' },
      e: { type: 'string', format: 'email' }, ip: { type: 'string', format: 'ipv4' },
      tm: { type: 'string', format: 'time' } },
    required: ['t', 'e', 'ip', 'tm'], additionalProperties: false } },
  { schema: { anyOf: [{ type: 'array', items: { type: 'number' }, minItems: 1, maxItems: 3 },
      { type: 'object', properties: { k: { enum: [null, true, 'v'] } }, required: ['k'] }] } },
  { json_object: true, validate: { type: 'object' } },
  { regex: '\\d{3}-[A-Z]{2}(x|yz)?\\s[^\\s]{1,3}' },
  { choice: ['alpha', 'beta', 'gamma delta'] },
];

test('random constrained generations validate against their schemas (ajv) and regexes', { skip: !haveModel }, () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'orca-structured-'));
  const file = path.join(dir, 'specs.json');
  fs.writeFileSync(file, JSON.stringify(specs.map(({ validate, ...s }) => s)));
  const perSpec = 350;
  const started = Date.now();
  const run = spawnSync(path.join(binDir(), 'structured_bench'),
    ['--mode=sample', `--model=${model}`, `--specs=${file}`, `--per-spec=${perSpec}`, '--max-tokens=300', '--seed=7'],
    { encoding: 'utf8', maxBuffer: 256 * 1024 * 1024, timeout: 120000 });
  fs.rmSync(dir, { recursive: true, force: true });
  assert.equal(run.status, 0, run.stderr);
  const lines = run.stdout.trim().split('\n').map((l) => JSON.parse(l));
  assert.equal(lines.length, specs.length * perSpec);
  const ajv = new Ajv2020({ strict: false, allErrors: true });
  addFormats(ajv);
  const validators = specs.map((s) => (s.schema || s.validate) ? ajv.compile(s.schema || s.validate) : null);
  const finished = new Array(specs.length).fill(0);
  for (const { spec, finished: done, text } of lines) {
    if (!done) continue;
    finished[spec]++;
    const s = specs[spec];
    if (validators[spec]) {
      let value;
      assert.doesNotThrow(() => { value = JSON.parse(text); }, `spec ${spec}: not JSON: ${text}`);
      assert.ok(validators[spec](value), `spec ${spec}: ${text}\n${JSON.stringify(validators[spec].errors)}`);
    } else if (s.regex) {
      assert.match(text, new RegExp(`^(?:${s.regex})$`, 'u'), `spec ${spec}`);
    } else {
      assert.ok(s.choice.includes(text), `spec ${spec}: ${text}`);
    }
  }
  const total = finished.reduce((a, b) => a + b, 0);
  console.log(`validated ${total} finished generations of ${lines.length} (per spec: ${finished.join(', ')}) in ${Date.now() - started} ms; ${run.stderr.trim()}`);
  assert.ok(total >= 3000, `only ${total} generations finished`);
  for (let i = 0; i < specs.length; i++) assert.ok(finished[i] >= perSpec / 4, `spec ${i}: only ${finished[i]} finished`);
});
