// Issue 45 through real processes: each request below once killed or hung a process of the
// stack (gateway SIGSEGV on deep JSON, SIGFPE on INT64_MIN // -1 in a template, an endless
// template loop or a doubling string on the I/O threads, request smuggling). Each now gets a
// precise 4xx/5xx, and after every one the gateway still answers /health and a normal
// completion, and no process of `orca serve` has exited.
//   ORCA_BIN_DIR=build/bin node --test tests/e2e/stack/hostile_input.test.mjs
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { binDir, startServe, stopServe } from './stack.mjs';

// A chat template whose behaviour the client picks with a kwarg (every kwarg arrives as a
// string; `mode` is undefined for ordinary requests): what a hostile or careless model file
// can do, driven by what a client can send.
const kTemplate = `{%- if mode == 'div' -%}{{ (a | int) // (b | int) }}
{%- elif mode == 'mod' -%}{{ (a | int) % (b | int) }}
{%- elif mode == 'loop' -%}{%- for i in range(1000000) -%}{%- for j in range(1000000) -%}{%- endfor -%}{%- endfor -%}
{%- elif mode == 'grow' -%}{%- set ns = namespace(s='x') -%}{%- for i in range(64) -%}{%- set ns.s = ns.s ~ ns.s -%}{%- endfor -%}{{ ns.s | length }}
{%- elif mode == 'recurse' -%}{%- macro r(n) -%}{{ r(n + 1) }}{%- endmacro -%}{{ r(0) }}
{%- else -%}{%- for m in messages -%}<|{{ m.role }}|>{{ m.content }}{%- endfor -%}{%- if add_generation_prompt -%}<|assistant|>{%- endif -%}
{%- endif -%}`;

/** `depth` nested objects around `leaf`, as JSON text (built as text: JSON.stringify recurses). */
function nestedObject(depth, key = 'a', leaf = '{}') {
  return `{"${key}":`.repeat(depth) + leaf + '}'.repeat(depth);
}

/** `depth` nested JSON-schema objects with one required property each. */
function nestedSchema(depth) {
  const open = '{"type":"object","required":["a"],"properties":{"a":';
  return open.repeat(depth) + '{"type":"string"}' + '}}'.repeat(depth);
}

async function post(s, route, bodyText) {
  const r = await fetch(`${s.url}${route}`, {
    method: 'POST', headers: { 'Content-Type': 'application/json' }, body: bodyText,
  });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch {}
  return { status: r.status, json, text };
}

/** The stack is whole: /health answers, a normal completion completes, no process exited. */
async function assertAlive(s, after) {
  assert.equal(s.proc.exitCode, null, `orca serve exited after ${after}:\n${s.stderr()}`);
  const health = await fetch(`${s.url}/health`);
  assert.equal(health.status, 200, `/health after ${after}`);
  const ok = await post(s, '/v1/completions', JSON.stringify({
    model: 'hostile-tiny', prompt: 'hello', max_tokens: 4, temperature: 0, ignore_eos: true }));
  assert.equal(ok.status, 200, `a normal completion after ${after}: ${ok.text}`);
  assert.equal(ok.json.choices[0].finish_reason, 'length');
}

function chat(extra) {
  return { model: 'hostile-tiny', messages: [{ role: 'user', content: 'hi' }], max_tokens: 4, ...extra };
}

/** Raw bytes to the gateway; resolves with everything it sent back before closing (or after 5 s). */
function rawExchange(port, bytes) {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    let got = '';
    let closed = false;
    const timer = setTimeout(() => { socket.destroy(); resolve({ got, closed }); }, 5000);
    socket.on('data', (d) => { got += d; });
    socket.on('close', () => { closed = true; clearTimeout(timer); resolve({ got, closed }); });
    socket.on('error', () => {});
    socket.write(bytes);
  });
}

/** orca:http_requests_total summed over a route (the gateway's own count of requests it ran). */
async function requestsRun(s, route) {
  const page = await (await fetch(`${s.url}/metrics`)).text();
  return [...page.matchAll(/^orca:http_requests_total\{([^}]*)\} (\S+)$/gm)]
    .filter((m) => m[1].includes(`route="${route}"`))
    .reduce((a, m) => a + Number(m[2]), 0);
}

test('hostile requests get precise errors and leave the whole stack serving', async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'orca-hostile-'));
  const model = path.join(dir, 'hostile-tiny');
  const synth = spawnSync(path.join(binDir(), 'orca'), ['model', 'synth', '--preset', 'tiny', '--vocab-size', '1024',
    '--max-position', '1024', '--out', model], { encoding: 'utf8' });
  assert.equal(synth.status, 0, synth.stderr);
  const templatePath = path.join(dir, 'hostile.jinja');
  fs.writeFileSync(templatePath, kTemplate);
  const s = await startServe('orca-hostile-e2e-', model, ['--threads=1', `--chat-template=${templatePath}`]);
  try {
    await assertAlive(s, 'start');

    const cases = [
      ['chat_template_kwargs nested 20,000 deep',
        '/v1/chat/completions', JSON.stringify(chat({})).replace(/}$/, `,"chat_template_kwargs":${nestedObject(20000)}}`),
        400, /depth|nest/i],
      ['tools[].function.parameters nested 20,000 deep',
        '/v1/chat/completions', JSON.stringify(chat({})).replace(/}$/,
          `,"tools":[{"type":"function","function":{"name":"f","parameters":${nestedObject(20000, 'properties')}}}]}`),
        400, /depth|nest/i],
      ['response_format json_schema nested 6,000 deep (under the body limit of 128? no: 12,000 JSON levels)',
        '/v1/chat/completions', JSON.stringify(chat({})).replace(/}$/,
          `,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":${nestedSchema(6000)}}}}`),
        400, /depth|nest/i],
      ['guided_regex with 100,000 nested groups',
        '/v1/completions', JSON.stringify({ model: 'hostile-tiny', prompt: 'x', max_tokens: 4,
          guided_regex: '('.repeat(100000) + 'a' + ')'.repeat(100000) }),
        400, /regex|depth|nest/i],
      ['a self-referencing $ref schema that no finite value satisfies',
        '/v1/chat/completions', JSON.stringify(chat({ response_format: { type: 'json_schema', json_schema: { name: 'x',
          schema: { $ref: '#/$defs/a', $defs: { a: { type: 'object', required: ['a'], properties: { a: { $ref: '#/$defs/a' } } } } } } } })),
        400, /\$ref|recurs|terminat|finite/i],
      ['INT64_MIN // -1 in the chat template (client-chosen kwargs)',
        '/v1/chat/completions', JSON.stringify(chat({ chat_template_kwargs: { mode: 'div', a: '-9223372036854775808', b: '-1' } })),
        400, /template/i],
      // Python's INT64_MIN % -1 is 0, as Jinja's is: rendered, no SIGFPE.
      ['INT64_MIN % -1 in the chat template',
        '/v1/chat/completions', JSON.stringify(chat({ chat_template_kwargs: { mode: 'mod', a: '-9223372036854775808', b: '-1' } })),
        200, null],
      ['x // 0 in the chat template',
        '/v1/chat/completions', JSON.stringify(chat({ chat_template_kwargs: { mode: 'div', a: '7', b: '0' } })),
        400, /template/i],
      ['a 10^12-step template loop',
        '/v1/chat/completions', JSON.stringify(chat({ chat_template_kwargs: { mode: 'loop' } })),
        400, /template/i],
      ['a template that doubles a string 64 times',
        '/v1/chat/completions', JSON.stringify(chat({ chat_template_kwargs: { mode: 'grow' } })),
        400, /template/i],
      ['unbounded macro recursion in the template',
        '/v1/chat/completions', JSON.stringify(chat({ chat_template_kwargs: { mode: 'recurse' } })),
        400, /template/i],
      ['/tokenize with a 10^12-step template loop',
        '/tokenize', JSON.stringify({ model: 'hostile-tiny', messages: [{ role: 'user', content: 'hi' }],
          chat_template_kwargs: { mode: 'loop' } }),
        400, /template/i],
    ];
    for (const [name, route, body, status, message] of cases) {
      await t.test(name, async () => {
        const r = await post(s, route, body);
        assert.equal(r.status, status, `${name}: ${r.text.slice(0, 400)}`);
        if (message) assert.match(r.json?.error?.message ?? '', message, `${name}: ${r.text.slice(0, 400)}`);
        await assertAlive(s, name);
      });
    }

    // Request smuggling: each framing attack is refused and the connection closed, so the
    // request hidden in its body (a /v1/completions) is never run.
    const hidden = 'POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 62\r\n\r\n' +
      '{"model":"hostile-tiny","prompt":"smuggled","max_tokens":1}\r\n';
    const smuggled = (te) => `POST /health HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: ${te}\r\nContent-Length: ${hidden.length}\r\n\r\n${hidden}`;
    const framing = [
      ['Transfer-Encoding: xchunked', smuggled('xchunked')],
      ['Transfer-Encoding: gzip', smuggled('gzip')],
      ['Transfer-Encoding: identity', smuggled('identity')],
      ['Transfer-Encoding: chunked, identity', smuggled('chunked, identity')],
      ['Transfer-Encoding with Content-Length', `POST /detokenize HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n${hidden}`],
      ['no Host', `GET /health HTTP/1.1\r\n\r\n${hidden}`],
      ['two Host headers', `GET /health HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n${hidden}`],
      ['an obs-folded header', `GET /health HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n folded\r\n\r\n${hidden}`],
      ['two Authorization headers', `GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer a\r\nAuthorization: Bearer b\r\n\r\n${hidden}`],
    ];
    for (const [name, bytes] of framing) {
      await t.test(`framing: ${name}`, async () => {
        const before = await requestsRun(s, '/v1/completions');
        const { got, closed } = await rawExchange(s.port, bytes);
        const statusLine = got.split('\r\n')[0];
        assert.match(statusLine, /^HTTP\/1\.1 (400|501) /, `${name}: ${got.slice(0, 300)}`);
        assert.ok(closed, `${name}: the connection must be closed after a framing error`);
        assert.equal((got.match(/^HTTP\/1\.1 /gm) || []).length, 1, `${name}: one response only, got:\n${got.slice(0, 600)}`);
        assert.equal(await requestsRun(s, '/v1/completions'), before, `${name}: the smuggled completion ran`);
        await assertAlive(s, `framing: ${name}`);
      });
    }
  } finally {
    const code = await stopServe(s);
    fs.rmSync(dir, { recursive: true, force: true });
    assert.equal(code, 0, `orca serve exit code:\n${s.stderr()}`);
  }
});
