// `orca generate` as a user runs it, on the real stories260K model: its greedy output, text and
// token ids, against ../shared/models/stories260K.reference.json (made by llama2.c's run.c and
// confirmed by llama.cpp, not by Orca); the same output on a second run; and its errors on a
// missing or corrupt model (exit 1 with the reason, no crash). Skipped, saying so, when
// ../shared/models is absent.
//   ORCA_BIN_DIR=build/bin ORCA_SHARED_DIR=../shared node --test tests/e2e/cli/generate.test.mjs
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';

const shared = process.env.ORCA_SHARED_DIR ?? path.join(process.cwd(), '..', 'shared');
const MODEL = path.join(shared, 'models', 'stories260K.gguf');
const REFERENCE = path.join(shared, 'models', 'stories260K.reference.json');
const present = fs.existsSync(MODEL) && fs.existsSync(REFERENCE);
const skip = !present && `${MODEL} or its reference is absent (../shared/models holds the real test models)`;

function orca(args) {
  const dir = process.env.ORCA_BIN_DIR;
  assert.ok(dir, 'ORCA_BIN_DIR (the build tree bin/) must be set');
  const r = spawnSync(path.join(dir, 'orca'), args, { encoding: 'utf8', timeout: 120000 });
  assert.equal(r.error, undefined, `orca ${args.join(' ')}: ${r.error}`);
  return r;
}

/** `orca generate ... --print-token-ids`: exits 0, and its text and token ids. */
function generate(args) {
  const r = orca(['generate', `--model=${MODEL}`, '--print-token-ids', ...args]);
  assert.equal(r.signal, null, `orca generate was killed by ${r.signal}: ${r.stderr}`);
  assert.equal(r.status, 0, `orca generate exited ${r.status}: ${r.stderr}`);
  const m = /^([\s\S]*)\nprompt_token_ids:((?: \d+)*)\ngenerated_token_ids:((?: \d+)*)\n$/.exec(r.stdout);
  assert.ok(m, `unexpected stdout:\n${r.stdout}`);
  const ids = (s) => s.trim().split(' ').filter(Boolean).map(Number);
  return { text: m[1], prompt: ids(m[2]), generated: ids(m[3]), stderr: r.stderr };
}

function referenceCases() {
  const ref = JSON.parse(fs.readFileSync(REFERENCE, 'utf8'));
  assert.match(ref.sampling, /greedy/);
  assert.ok(ref.cases.length >= 2, 'the reference has its two cases');
  return ref.cases;
}

test('greedy from a text prompt: the reference continuation, text and token ids', { skip }, () => {
  const c = referenceCases().find((x) => x.prompt !== '');
  const out = generate([`--prompt=${c.prompt}`, `--max-tokens=${c.greedy_token_ids.length}`]);
  assert.deepEqual(out.prompt, c.prompt_token_ids, 'the model\'s tokenizer gives the reference prompt ids (BOS first)');
  assert.deepEqual(out.generated, c.greedy_token_ids);
  // stdout starts with the prompt as given, then the decoded continuation: the reference's text.
  assert.equal(out.text, c.text);
  assert.match(out.stderr, new RegExp(`\\[${c.prompt_token_ids.length} prompt tokens in .*; ` +
    `${c.greedy_token_ids.length} generated, decode `));
});

test('greedy from token ids, explicit --temperature 0: the reference, 200 tokens, twice the same', { skip }, () => {
  const c = referenceCases().find((x) => x.prompt === '');
  const args = [`--prompt-tokens=${c.prompt_token_ids.join(',')}`, `--max-tokens=${c.greedy_token_ids.length}`,
    '--temperature=0'];
  const first = generate(args);
  assert.deepEqual(first.prompt, c.prompt_token_ids);
  assert.equal(first.generated.length, c.greedy_token_ids.length, 'exactly --max-tokens tokens');
  assert.deepEqual(first.generated, c.greedy_token_ids);
  assert.equal(first.text, c.text, 'with token ids, stdout is the continuation alone');
  const second = generate([...args, '--threads=1']);
  assert.deepEqual(second.generated, first.generated, 'a second run, on one thread, gives the same tokens');
});

test('sampling with a seed: the same tokens on every run, and not the greedy ones', { skip }, () => {
  const c = referenceCases().find((x) => x.prompt !== '');
  const args = [`--prompt=${c.prompt}`, '--max-tokens=40', '--temperature=1', '--seed=7', '--ignore-eos'];
  const a = generate(args);
  const b = generate(args);
  assert.equal(a.generated.length, 40, '--ignore-eos: exactly --max-tokens tokens');
  assert.deepEqual(b.generated, a.generated);
  assert.notDeepEqual(a.generated, c.greedy_token_ids.slice(0, 40), 'temperature 1 sampled, not greedy');
});

/** Runs `orca generate` expecting a clean failure: exit 1, no signal, nothing on stdout, one stderr line. */
function expectFailure(args) {
  const r = orca(['generate', ...args]);
  assert.equal(r.signal, null, `orca generate was killed by ${r.signal} (a crash): ${r.stderr}`);
  assert.equal(r.status, 1, `orca generate exited ${r.status}: ${r.stderr}`);
  assert.equal(r.stdout, '');
  const lines = r.stderr.trimEnd().split('\n');
  assert.equal(lines.length, 1, `one line of error, got:\n${r.stderr}`);
  assert.match(lines[0], /^orca generate: /);
  return lines[0];
}

test('a missing model file: exit 1 naming the path, with text or token ids', () => {
  const missing = path.join(os.tmpdir(), `orca-generate-missing-${process.pid}`, 'stories260K.gguf');
  assert.equal(expectFailure([`--model=${missing}`, '--prompt=Once upon a time']),
    `orca generate: model path ${missing} does not exist`);
  assert.equal(expectFailure([`--model=${missing}`, '--prompt-tokens=1']),
    `orca generate: ${missing}: cannot open: No such file or directory`);
});

test('a truncated model file: exit 1 naming the file and the damage', { skip }, () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'orca-generate-e2e-'));
  try {
    const truncated = path.join(dir, 'truncated.gguf');
    fs.writeFileSync(truncated, fs.readFileSync(MODEL).subarray(0, 1000));
    for (const prompt of ['--prompt=Once upon a time', '--prompt-tokens=1']) {
      const line = expectFailure([`--model=${truncated}`, prompt]);
      assert.ok(line.includes(truncated), line);
      assert.match(line, /truncated or corrupt GGUF file/);
    }
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('a prompt and --max-tokens past the context: exit 1 naming both and the context', { skip }, () => {
  assert.equal(expectFailure([`--model=${MODEL}`, '--prompt-tokens=1,403,407', '--max-tokens=2046']),
    'orca generate: prompt (3 tokens) + --max-tokens (2046) exceeds the model\'s context of 2048');
});
