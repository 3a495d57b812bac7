// Starts the real Orca stack for e2e tests: a synthetic model, P orca-worker
// processes, orca-scheduler and orca-gateway, all on 127.0.0.1 with free
// ports; every process is killed when the test process exits.
import { spawn, spawnSync } from 'node:child_process';
import crypto from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import assert from 'node:assert/strict';

export function binDir() {
  const dir = process.env.ORCA_BIN_DIR;
  if (!dir) throw new Error('ORCA_BIN_DIR (the build tree bin/) must be set');
  return dir;
}

// Loopback ports for the processes a test starts: picked below the kernel's
// ephemeral range (where outgoing connections take their local ports) and never
// twice in one test process, so ports picked back to back cannot collide.
const handedOut = new Set();

function ephemeralLow() {
  try {
    const [lo] = fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
    if (lo > 11000) return lo;
  } catch { /* not Linux: use the default */ }
  return 32768;
}

function canBind(port) {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

export async function freePort() {
  const lo = 10000, hi = ephemeralLow() - 1;
  for (let i = 0; i < 512; i++) {
    const port = lo + Math.floor(Math.random() * (hi - lo + 1));
    if (handedOut.has(port) || !(await canBind(port))) continue;
    handedOut.add(port);
    return port;
  }
  throw new Error('no free loopback TCP port');
}

async function waitFor(url, timeoutMs, procs) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    for (const p of procs) if (p.exitCode !== null) throw new Error(`${p.orcaName} exited (${p.exitCode}); see ${p.orcaLog}`);
    try {
      const r = await fetch(url);
      if (r.status === 200) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${url} not ready in ${timeoutMs} ms`);
}

/**
 * @param {{pipeline?: number, tensor?: number, apiKey?: string, nSlots?: number, logJson?: boolean,
 *   gatewayArgs?: string[], schedulerArgs?: string[]}} opts
 * @returns {Promise<{baseUrl: string, gatewayPort: number, schedulerHttpPort: number,
 *   workerHttpPorts: number[], modelName: string, workDir: string, stop: () => Promise<void>}>}
 */
export async function startStack(opts = {}) {
  const bin = binDir();
  const P = opts.pipeline ?? 2;
  const T = opts.tensor ?? 1;
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'orca-e2e-'));
  const model = path.join(work, 'e2e-tiny');
  const synth = spawnSync(path.join(bin, 'orca'), ['model', 'synth', '--preset', 'tiny', '--vocab-size', '1024',
                                                   '--max-position', '1024', '--out', model], { encoding: 'utf8' });
  if (synth.status !== 0) throw new Error(`orca model synth failed: ${synth.stderr}`);
  const schedGrpc = await freePort(), schedHttp = await freePort(), gwHttp = await freePort();
  const workers = [];
  for (let s = 0; s < P; s++) workers.push({ grpc: await freePort(), http: await freePort(), dataPlane: await freePort() });
  const workerAddrs = workers.map((w) => `127.0.0.1:${w.grpc}`).join(',');
  // The stack's internal token, in a file of its own as `orca serve` makes it: every internal port requires it.
  const tokenFile = path.join(work, 'internal-token');
  fs.writeFileSync(tokenFile, `${crypto.randomBytes(32).toString('hex')}\n`, { mode: 0o600 });
  const auth = [`--internal-token-file=${tokenFile}`];
  const procs = [];
  const start = (name, exe, args) => {
    const log = path.join(work, `${name}.log`);
    const fd = fs.openSync(log, 'a');
    const p = spawn(path.join(bin, exe), args, { stdio: ['ignore', fd, fd] });
    p.orcaName = name;
    p.orcaLog = log;
    procs.push(p);
    return p;
  };
  const logFlags = opts.logJson ? ['--log-json'] : [];
  workers.forEach((w, s) =>
    start(`worker-${s}`, 'orca-worker', [...logFlags,
      `--model=${model}`, `--listen=127.0.0.1:${w.grpc}`, `--http-listen=127.0.0.1:${w.http}`,
      `--data-plane-port=${w.dataPlane}`, `--stage=${s}`,
      `--num-stages=${P}`, `--tensor-parallel=${T}`, `--workers=${workerAddrs}`, `--scheduler=127.0.0.1:${schedGrpc}`,
      `--n-slots=${opts.nSlots ?? 8192}`, `--threads=1`, ...auth,
    ]));
  start('scheduler', 'orca-scheduler', [...logFlags,
    `--listen=127.0.0.1:${schedGrpc}`, `--http-listen=127.0.0.1:${schedHttp}`, `--workers=${workerAddrs}`,
    `--n-slots=${opts.nSlots ?? 8192}`, `--max-bs=16`, ...auth, ...(opts.schedulerArgs ?? []),
  ]);
  const gwArgs = [...logFlags, `--listen=127.0.0.1:${gwHttp}`, `--grpc-listen=`, `--schedulers=127.0.0.1:${schedGrpc}`, `--model=${model}`,
                  ...auth];
  if (opts.apiKey) gwArgs.push(`--api-keys=${opts.apiKey}`);
  gwArgs.push(...(opts.gatewayArgs ?? []));
  start('gateway', 'orca-gateway', gwArgs);
  const kill = () => procs.forEach((p) => { try { p.kill('SIGKILL'); } catch {} });
  process.on('exit', kill);
  try {
    await waitFor(`http://127.0.0.1:${gwHttp}/ready`, 60000, procs);
  } catch (e) {
    kill();
    for (const p of procs) console.error(`--- ${p.orcaName}\n` + fs.readFileSync(p.orcaLog, 'utf8').slice(-3000));
    throw e;
  }
  return {
    baseUrl: `http://127.0.0.1:${gwHttp}`,
    gatewayPort: gwHttp,
    schedulerHttpPort: schedHttp,
    workerHttpPorts: workers.map((w) => w.http),
    modelName: 'e2e-tiny',
    workDir: work,
    logFile: (name) => path.join(work, `${name}.log`),
    pid: (name) => procs.find((p) => p.orcaName === name)?.pid,
    exited: () => procs.filter((p) => p.exitCode !== null || p.signalCode !== null).map((p) => `${p.orcaName} (${p.exitCode ?? p.signalCode})`),
    logs: () => procs.map((p) => `--- ${p.orcaName}\n` + fs.readFileSync(p.orcaLog, 'utf8').slice(-3000)).join('\n'),
    stop: async () => {
      for (const p of procs.slice().reverse()) p.kill('SIGTERM');
      await Promise.all(procs.map((p) => (p.exitCode !== null || p.signalCode !== null ? null : new Promise((r) => p.on('exit', r)))));
      fs.rmSync(work, { recursive: true, force: true });
    },
  };
}

/**
 * `orca serve --model=MODEL` on a free loopback port (gRPC on port 0, logs in a fresh temp dir
 * named after `tag`) with `args` after those: resolves once its banner is out, with its URL, its
 * stdout and stderr so far. End it with stopServe.
 */
export async function startServe(tag, model, args, { bannerTimeoutMs = 180000 } = {}) {
  const port = await freePort();
  const logDir = fs.mkdtempSync(path.join(os.tmpdir(), tag));
  const proc = spawn(path.join(binDir(), 'orca'),
    ['serve', `--model=${model}`, `--port=${port}`, '--grpc-port=0', `--log-dir=${logDir}`, ...args],
    { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '', err = '';
  proc.stdout.on('data', (d) => { out += d; });
  proc.stderr.on('data', (d) => { err += d; });
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no banner in ${bannerTimeoutMs / 1000} s; stderr:\n${err}`)), bannerTimeoutMs);
    const poll = setInterval(() => {
      if (out.includes('Ctrl-C stops everything')) { clearInterval(poll); clearTimeout(timer); resolve(); }
    }, 50);
    proc.on('exit', (code) => { clearInterval(poll); clearTimeout(timer); reject(new Error(`orca serve exited ${code}:\n${err}`)); });
  });
  return { proc, logDir, port, url: `http://127.0.0.1:${port}`, stdout: () => out, stderr: () => err,
           internalToken: () => serveInternalToken(proc.pid) };
}

/**
 * The internal token of the `orca serve` running as `pid`: the file its processes get as
 * --internal-token-file (in its private run directory), read as their owner may. What a test
 * sends to see the scheduler's or a worker's /ready details.
 */
export function serveInternalToken(pid) {
  for (const entry of fs.readdirSync('/proc').filter((e) => /^\d+$/.test(e))) {
    try {
      const stat = fs.readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) !== pid) continue;
      const arg = fs.readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').find((a) => a.startsWith('--internal-token-file='));
      if (arg) return fs.readFileSync(arg.slice('--internal-token-file='.length), 'utf8').split('\n')[0].trim();
    } catch { /* the process ended meanwhile */ }
  }
  throw new Error(`orca serve (pid ${pid}) has no process with --internal-token-file`);
}

/**
 * `orca serve` with two pipeline stages on f32 weights, one thread (startServe), plus the
 * scheduler's metrics URL from its banner.
 */
export async function startPipelineServe(tag, model, extraArgs) {
  const s = await startServe(tag, model, ['--pipeline-parallel=2', '--threads=1', '--dtype=f32', ...extraArgs]);
  const sched = s.stdout().match(/^\s+scheduler\s+(http:\/\/\S+)\/metrics$/m)?.[1];
  assert.ok(sched, `banner names no scheduler metrics URL:\n${s.stdout()}`);
  return { ...s, sched };
}

/** Stops a startServe stack with SIGINT (a clean drain); resolves to its exit code. */
export async function stopServe(s) {
  const exited = new Promise((r) => s.proc.on('exit', (code) => r(code)));
  s.proc.kill('SIGINT');
  const code = await exited;
  fs.rmSync(s.logDir, { recursive: true, force: true });
  return code;
}
