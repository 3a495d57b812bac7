// `orca serve` as a user meets it: start it, read its banner, run the example
// request exactly as printed, scrape every metrics URL it names, stop it with
// Ctrl-C; and chat, which works on what `orca model synth` writes and is a 400
// naming --chat-template on a model that ships no template. On a synthesized HF
// checkpoint directory and GGUF file and, when ../shared is present, on the real
// stories260K GGUF (whose served name drops ".gguf").
//   ORCA_BIN_DIR=build/bin node --test tests/e2e/stack/orca_serve.test.mjs
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { binDir, freePort } from './stack.mjs';

const sharedGguf = process.env.ORCA_SHARED_DIR && path.join(process.env.ORCA_SHARED_DIR, 'models', 'stories260K.gguf');

/** Starts `orca serve` and resolves with its banner once it prints "Ctrl-C stops everything". */
async function startServe(model, extraArgs = []) {
  const port = await freePort();
  const logDir = fs.mkdtempSync(path.join(os.tmpdir(), 'orca-serve-e2e-'));
  const proc = spawn(path.join(binDir(), 'orca'),
    ['serve', `--model=${model}`, `--port=${port}`, '--grpc-port=0', `--log-dir=${logDir}`, ...extraArgs],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '', err = '';
  proc.stdout.on('data', (d) => { out += d; });
  proc.stderr.on('data', (d) => { err += d; });
  const banner = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no banner in 120 s; stderr:\n${err}`)), 120000);
    const poll = setInterval(() => {
      if (out.includes('Ctrl-C stops everything')) { clearInterval(poll); clearTimeout(timer); resolve(out); }
    }, 50);
    proc.on('exit', (code) => { clearInterval(poll); clearTimeout(timer); reject(new Error(`orca serve exited ${code}:\n${err}`)); });
  });
  return { proc, banner, logDir, stderr: () => err };
}

async function stopServe(s) {
  const exited = new Promise((r) => s.proc.on('exit', (code, signal) => r({ code, signal })));
  s.proc.kill('SIGINT');
  const { code } = await exited;
  fs.rmSync(s.logDir, { recursive: true, force: true });
  return code;
}

/** The example curl, as printed: URL and JSON body. */
function exampleRequest(banner) {
  const url = banner.match(/curl (http:\/\/\S+)/)?.[1];
  const body = banner.match(/-d '([^']*)'/)?.[1];
  assert.ok(url && body, `banner has no example curl:\n${banner}`);
  return { url, body };
}

function metricsUrls(banner) {
  return [...banner.matchAll(/^\s+(\S+)\s+(http:\/\/\S+\/metrics)$/gm)].map((m) => ({ name: m[1], url: m[2] }));
}

// Chat: a model from `orca model synth` carries a ChatML template (tokenizer_config.json, or GGUF
// tokenizer.chat_template) and chats; one that ships no template gets a 400 naming --chat-template.
async function checkChat(url, expectName, chats) {
  const chatUrl = url.replace(/\/v1\/completions$/, '/v1/chat/completions');
  const r = await fetch(chatUrl, {
    method: 'POST', headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ model: expectName, messages: [{ role: 'user', content: 'Hello!' }], max_tokens: 4 }),
  });
  const reply = await r.json();
  if (chats) {
    assert.equal(r.status, 200, JSON.stringify(reply));
    assert.equal(reply.choices[0].message.role, 'assistant');
    assert.ok(reply.usage.prompt_tokens > 0);
  } else {
    assert.equal(r.status, 400, JSON.stringify(reply));
    assert.match(reply.error.message, /no chat template.*--chat-template/s);
  }
}

async function checkServe(model, expectName, { chats = true } = {}) {
  const s = await startServe(model);
  try {
    const { url, body } = exampleRequest(s.banner);
    assert.equal(JSON.parse(body).model, expectName);
    const r = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
    const text = await r.text();
    assert.equal(r.status, 200, `the printed example answered ${r.status}: ${text}`);
    const reply = JSON.parse(text);
    assert.equal(reply.model, expectName);
    assert.ok(reply.usage.completion_tokens > 0);
    await checkChat(url, expectName, chats);

    const urls = metricsUrls(s.banner);
    assert.deepEqual(urls.map((u) => u.name), ['gateway', 'scheduler', 'worker-0']);
    const labels = new Set();
    let engineMetrics = false;
    for (const { name, url: murl } of urls) {
      const m = await fetch(murl);
      assert.equal(m.status, 200, `${name} ${murl}`);
      const page = await m.text();
      for (const match of page.matchAll(/model_name="([^"]*)"/g)) labels.add(match[1]);
      if (/^orca:num_requests_running\{/m.test(page)) engineMetrics = true;
    }
    assert.ok(engineMetrics, 'no URL the banner names exposes orca:num_requests_running');
    assert.deepEqual([...labels], [expectName], 'every service labels metrics with the served name');
  } finally {
    assert.equal(await stopServe(s), 0, `orca serve did not stop cleanly:\n${s.stderr()}`);
  }
}

test('the printed example works on a synthesized checkpoint directory', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'orca-serve-model-'));
  const model = path.join(dir, 'serve-tiny');
  const synth = spawnSync(path.join(binDir(), 'orca'), ['model', 'synth', '--preset', 'tiny', '--vocab-size', '1024',
    '--max-position', '1024', '--out', model], { encoding: 'utf8' });
  assert.equal(synth.status, 0, synth.stderr);
  try {
    await checkServe(model + '/', 'serve-tiny');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('the printed example works on a synthesized GGUF file, which chats too', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'orca-serve-model-'));
  const model = path.join(dir, 'serve-tiny.gguf');
  const synth = spawnSync(path.join(binDir(), 'orca'), ['model', 'synth', '--preset', 'tiny', '--vocab-size', '1024',
    '--max-position', '1024', '--out', model], { encoding: 'utf8' });
  assert.equal(synth.status, 0, synth.stderr);
  try {
    await checkServe(model, 'serve-tiny');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test('the printed example works on a GGUF file (served name without .gguf)', { skip: !sharedGguf || !fs.existsSync(sharedGguf) }, async () => {
  await checkServe(sharedGguf, 'stories260K', { chats: false });  // stories260K ships no chat template
});

/** The command lines of `pid`'s child processes, from /proc. */
function childCommandLines(pid) {
  const out = [];
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) out.push(fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').filter(Boolean));
    } catch { /* the process ended meanwhile */ }
  }
  return out;
}

// Issue 45: each run draws its own internal token into a private file that every process
// reads (never a command line, which `ps` shows everyone), and a second `orca serve` on a
// port the first one holds fails at start naming the port. Before, gRPC's SO_REUSEPORT let
// the second gateway share the gRPC port, and on a shared HTTP port the second run probed
// the first one's gateway and printed "Orca is ready".
test('each run has its own internal token; a second orca serve on a used port fails at start naming it', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'orca-serve-model-'));
  const model = path.join(dir, 'serve-tiny');
  const synth = spawnSync(path.join(binDir(), 'orca'), ['model', 'synth', '--preset', 'tiny', '--vocab-size', '1024',
    '--max-position', '1024', '--out', model], { encoding: 'utf8' });
  assert.equal(synth.status, 0, synth.stderr);
  const grpcPort = await freePort();
  const s = await startServe(model, [`--grpc-port=${grpcPort}`]);
  let tokenFile;
  try {
    const children = childCommandLines(s.proc.pid);
    assert.deepEqual(children.map((argv) => path.basename(argv[0])).sort(), ['orca-gateway', 'orca-scheduler', 'orca-worker']);
    const files = new Set(children.map((argv) => argv.find((a) => a.startsWith('--internal-token-file='))?.split('=')[1]));
    assert.equal(files.size, 1, `every process gets the same --internal-token-file: ${[...files]}`);
    tokenFile = [...files][0];
    assert.ok(tokenFile, 'no --internal-token-file');
    assert.equal(fs.statSync(tokenFile).mode & 0o777, 0o600, 'the token file is its owner\'s only');
    assert.equal(fs.statSync(path.dirname(tokenFile)).mode & 0o777, 0o700, 'in a private run directory');
    const token = fs.readFileSync(tokenFile, 'utf8').trim();
    assert.match(token, /^[0-9a-f]{64}$/);
    for (const argv of children) assert.ok(!argv.join(' ').includes(token), `${argv[0]} has the token on its command line`);

    const { url, body } = exampleRequest(s.banner);
    const httpPort = Number(new URL(url).port);
    const otherPort = await freePort();
    for (const [args, port] of [[[`--port=${otherPort}`, `--grpc-port=${grpcPort}`], grpcPort],
                                [[`--port=${httpPort}`, '--grpc-port=0'], httpPort]]) {
      const second = spawnSync(path.join(binDir(), 'orca'), ['serve', `--model=${model}`, ...args],
        { encoding: 'utf8', timeout: 120000 });
      assert.notEqual(second.status, 0, `the second orca serve (${args}) started:\n${second.stdout}${second.stderr}`);
      assert.match(second.stderr, new RegExp(`${port} is in use`), second.stderr);
      assert.doesNotMatch(second.stdout, /Orca is ready/);
    }
    const r = await fetch(url, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
    assert.equal(r.status, 200, 'the first run still serves');
  } finally {
    assert.equal(await stopServe(s), 0, `orca serve did not stop cleanly:\n${s.stderr()}`);
    fs.rmSync(dir, { recursive: true, force: true });
  }
  assert.ok(!fs.existsSync(tokenFile), 'the run directory is removed when orca serve stops');
});
