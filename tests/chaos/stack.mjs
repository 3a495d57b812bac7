// The Orca stack of the chaos suite on a network-namespace "cluster"
// (tests/netns/netns.mjs): two gateways, one scheduler and two pipeline
// workers, each its own host with its own address (not loopback), started as
// the real binaries; and a client host that drives a steady load of streams.
//
//   const stack = await ChaosStack.start({ net, binDir, model, log });
//   stack.signal("worker-1", "SIGSTOP");  stack.kill9("scheduler"); await stack.restart("scheduler");
//   stack.unexpectedExits  // every exit nobody asked for (an abort shows as signal SIGABRT / code 134)
import crypto from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";

export const GATEWAY_PORT = 8000;
const SCHEDULER_GRPC = 50051, SCHEDULER_HTTP = 8081;
const WORKER_GRPC = 7100, WORKER_HTTP = 7101, DATA_PLANE = 7200;

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

export async function waitFor(predicate, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(100);
  }
}

export class ChaosStack {
  /** Starts workers, scheduler and gateways; resolves once both gateways answer /ready 200. */
  static async start({ net, binDir, model, log, workerTimeoutMs = 5000, gatewayGraceSeconds = 20 }) {
    const s = new ChaosStack(net, binDir, model, log);
    s.workerTimeoutMs = workerTimeoutMs;
    s.gatewayGraceSeconds = gatewayGraceSeconds;
    // The stack's internal token, in a file every process reads (restarted ones too): every internal port requires it.
    s.tokenFile = path.join(net.workDir, "internal-token");
    fs.writeFileSync(s.tokenFile, `${crypto.randomBytes(32).toString("hex")}\n`, { mode: 0o600 });
    s.client = net.addHost("client");
    for (const name of ["gateway-a", "gateway-b", "scheduler", "worker-0", "worker-1"]) s.hosts[name] = net.addHost(name);
    for (const name of ["worker-0", "worker-1", "scheduler", "gateway-a", "gateway-b"]) s.#spawn(name);
    await s.waitServing(90_000);
    return s;
  }

  constructor(net, binDir, model, log) {
    this.net = net;
    this.binDir = binDir;
    this.model = model;
    this.log = log;
    this.hosts = {};
    this.procs = {};
    this.unexpectedExits = [];
  }

  get gateways() {
    return ["gateway-a", "gateway-b"].map((n) => this.hosts[n]);
  }

  #argv(name) {
    const ip = (n) => this.hosts[n].ip;
    const workers = `${ip("worker-0")}:${WORKER_GRPC},${ip("worker-1")}:${WORKER_GRPC}`;
    const scheduler = `${ip("scheduler")}:${SCHEDULER_GRPC}`;
    const bin = (b) => path.join(this.binDir, b);
    if (name.startsWith("worker-")) {
      const stage = name.slice("worker-".length);
      return [bin("orca-worker"), `--model=${this.model}`, `--listen=${ip(name)}:${WORKER_GRPC}`,
              `--http-listen=${ip(name)}:${WORKER_HTTP}`, `--data-plane-host=${ip(name)}`, `--data-plane-port=${DATA_PLANE}`,
              `--stage=${stage}`, "--num-stages=2", `--workers=${workers}`, `--scheduler=${scheduler}`,
              "--deployment-id=chaos", "--n-slots=4096", "--threads=1", `--internal-token-file=${this.tokenFile}`];
    }
    if (name === "scheduler") {
      return [bin("orca-scheduler"), `--listen=${scheduler}`, `--http-listen=${ip(name)}:${SCHEDULER_HTTP}`,
              `--workers=${workers}`, "--n-slots=4096", "--max-bs=16", `--worker-timeout-ms=${this.workerTimeoutMs}`,
              "--engine-down-wait-ms=10000", "--drain-grace-seconds=10", `--internal-token-file=${this.tokenFile}`];
    }
    return [bin("orca-gateway"), `--listen=${ip(name)}:${GATEWAY_PORT}`, "--grpc-listen=", `--schedulers=${scheduler}`,
            `--model=${this.model}`, `--drain-grace-seconds=${this.gatewayGraceSeconds}`,
            `--internal-token-file=${this.tokenFile}`];
  }

  logFile(name) {
    return path.join(this.net.workDir, `${name}.log`);
  }

  #spawn(name) {
    const child = this.hosts[name].spawn(this.#argv(name), { log: this.logFile(name) });
    const proc = { name, child, expectExit: false, exit: null };
    proc.exited = child.exited.then((e) => {
      proc.exit = e;
      if (!proc.expectExit) {
        this.unexpectedExits.push(`${name} (pid ${child.pid}) exited: code ${e.code}, signal ${e.signal}`);
        this.log(`UNEXPECTED: ${name} exited code=${e.code} signal=${e.signal}`);
      }
      return e;
    });
    this.procs[name] = proc;
    return proc;
  }

  /** Sends `signal` to the process (SIGSTOP/SIGCONT/...); the process is the binary itself (the wrapper execs). */
  signal(name, signal) {
    process.kill(this.procs[name].child.pid, signal);
  }

  /** kill -9, awaited. */
  async kill9(name) {
    const p = this.procs[name];
    p.expectExit = true;
    p.child.kill("SIGKILL");
    return p.exited;
  }

  /** SIGTERM and the exit it leads to ({code, signal}), within `timeoutMs`. */
  async terminate(name, timeoutMs) {
    const p = this.procs[name];
    p.expectExit = true;
    p.child.kill("SIGTERM");
    const r = await Promise.race([p.exited, sleep(timeoutMs).then(() => null)]);
    if (r === null) throw new Error(`${name} did not exit within ${timeoutMs} ms of SIGTERM`);
    return r;
  }

  /** Starts `name` again with the same flags (after kill9/terminate). */
  restart(name) {
    return this.#spawn(name);
  }

  async ready(name) {
    try {
      const port = name.startsWith("gateway") ? GATEWAY_PORT : name === "scheduler" ? SCHEDULER_HTTP : WORKER_HTTP;
      return (await this.client.request(`http://${this.hosts[name].ip}:${port}/ready`, { timeoutMs: 2000 })).status === 200;
    } catch {
      return false;
    }
  }

  /** One short non-streaming completion through `gateway`: true when it returns text. */
  async probe(gateway = this.hosts["gateway-a"], timeoutMs = 5000) {
    try {
      const r = await this.client.request(`http://${gateway.ip}:${GATEWAY_PORT}/v1/completions`, {
        method: "POST", timeoutMs, headers: { "content-type": "application/json" },
        body: { model: this.servedModel, prompt: "Once upon a time", max_tokens: 4, temperature: 0, ignore_eos: true },
      });
      return r.status === 200 && JSON.parse(r.body).choices?.[0]?.text?.length > 0;
    } catch {
      return false;
    }
  }

  async waitServing(timeoutMs) {
    await waitFor(async () => (await this.ready("gateway-a")) && (await this.ready("gateway-b")), timeoutMs,
                  "both gateways ready");
    const models = JSON.parse((await this.client.request(`http://${this.hosts["gateway-a"].ip}:${GATEWAY_PORT}/v1/models`)).body);
    this.servedModel = models.data[0].id;
    await waitFor(() => this.probe(), timeoutMs, "a first completion");
  }

  /** The scheduler's orca:kv_slots_used (null when it does not answer). */
  async kvSlotsUsed() {
    try {
      const r = await this.client.request(`http://${this.hosts.scheduler.ip}:${SCHEDULER_HTTP}/metrics`, { timeoutMs: 2000 });
      const m = /^orca:kv_slots_used\{[^}]*\} (\S+)$/m.exec(r.body);
      return m ? Number(m[1]) : null;
    } catch {
      return null;
    }
  }

  /** Last lines of every process's log. */
  tails(n = 15) {
    return Object.keys(this.procs).map((name) => {
      let text = "";
      try {
        text = fs.readFileSync(this.logFile(name), "utf8").split("\n").slice(-n).join("\n");
      } catch {}
      return `--- ${name}\n${text}`;
    }).join("\n");
  }

  /** Copies every process's log to `dir` (e.g. ORCA_CHAOS_LOG_DIR, for a failure seen in CI). */
  saveLogs(dir) {
    fs.mkdirSync(dir, { recursive: true });
    for (const name of Object.keys(this.procs)) {
      try {
        fs.copyFileSync(this.logFile(name), path.join(dir, `${name}.log`));
      } catch {}
    }
  }

  async stop() {
    for (const name of ["gateway-a", "gateway-b", "scheduler", "worker-0", "worker-1"]) {
      const p = this.procs[name];
      if (!p || p.exit) continue;
      p.expectExit = true;
      try {
        process.kill(p.child.pid, "SIGCONT");
      } catch {}
      p.child.kill("SIGKILL");
      await p.exited;
    }
  }
}

/**
 * One streaming completion from `client` to `gateway`, classified:
 *   ok           tokens, then [DONE], no error event
 *   error-event  an SSE error event, then [DONE]
 *   rejected     an HTTP error status with an OpenAI error body (e.g. 503 + Retry-After)
 *   refused      no HTTP answer: the connection was refused/reset before any reply (a gateway down)
 *   disconnected the client hung up on purpose (after `disconnectAfterChunks` chunks)
 *   cut          anything else: a stream ending without [DONE], a reply that is not an error body
 *   hung         no end within `timeoutMs`
 */
export async function stream(client, gateway, { model, maxTokens, disconnectAfterChunks = null, timeoutMs = 60_000 }) {
  const started = Date.now();
  let socket;
  try {
    socket = await client.dial(gateway.ip, GATEWAY_PORT);
  } catch (e) {
    return { outcome: "refused", detail: e.message, ms: Date.now() - started, startedAt: started, gateway: gateway.name };
  }
  return new Promise((resolve) => {
    let done = false;
    const finish = (outcome, detail = "", extra = {}) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ outcome, detail, ms: Date.now() - started, startedAt: started, gateway: gateway.name, ...extra });
    };
    const timer = setTimeout(() => finish("hung", `no end in ${timeoutMs} ms`), timeoutMs);
    let gotResponse = false;
    const req = http.request({
      method: "POST", path: "/v1/completions", createConnection: () => socket,
      headers: { host: `${gateway.ip}:${GATEWAY_PORT}`, "content-type": "application/json" },
    }, (res) => {
      gotResponse = true;
      let text = "", chunks = 0;
      res.setEncoding("utf8");
      res.on("data", (d) => {
        text += d;
        chunks++;
        if (disconnectAfterChunks !== null && chunks >= disconnectAfterChunks) finish("disconnected", `after ${chunks} chunks`);
      });
      res.on("error", () => {});
      res.on("close", () => {
        if (res.statusCode !== 200) {
          let body = null;
          try {
            body = JSON.parse(text);
          } catch {}
          if (body?.error?.message) return finish("rejected", `${res.statusCode} ${body.error.message}`, { status: res.statusCode, retryAfter: res.headers["retry-after"] });
          return finish("cut", `HTTP ${res.statusCode} without an error body: ${text.slice(0, 200)}`);
        }
        const events = text.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6));
        if (events.at(-1) !== "[DONE]") return finish("cut", `no [DONE] after ${events.length} events`);
        let tokens = 0, error = null;
        for (const e of events.slice(0, -1)) {
          let j;
          try {
            j = JSON.parse(e);
          } catch {
            return finish("cut", `an event is not JSON: ${e.slice(0, 100)}`);
          }
          if (j.error) error = j.error;
          else if (j.choices?.[0]?.text) tokens++;
        }
        if (error) return finish("error-event", `${error.code ?? error.type}: ${error.message}`, { tokens });
        if (tokens === 0) return finish("cut", "[DONE] without a token or an error");
        finish("ok", "", { tokens });
      });
    });
    req.on("error", (e) => finish(gotResponse ? "cut" : "refused", e.message));
    req.end(JSON.stringify({ model, prompt: "Once upon a time", max_tokens: maxTokens, temperature: 0, ignore_eos: true, stream: true }));
  });
}

/**
 * A steady load: `concurrency` loops, each opening one stream after another through the gateways in
 * turn. A stream refused or rejected with 503 before it started is retried once on the other gateway
 * (what a load balancer does with a not-ready backend); `results` keeps every final outcome. Every
 * `disconnectEvery`-th stream hangs up after a few chunks.
 */
export class Load {
  constructor(stack, { concurrency = 6, maxTokens = 96, disconnectEvery = 7 } = {}) {
    this.stack = stack;
    this.concurrency = concurrency;
    this.maxTokens = maxTokens;
    this.disconnectEvery = disconnectEvery;
    this.results = [];
    this.retries = 0;
    this.counter = 0;
  }

  start() {
    this.stopping = false;
    this.loops = Array.from({ length: this.concurrency }, (_, i) => this.#loop(i));
  }

  async #loop(i) {
    while (!this.stopping) {
      const n = this.counter++;
      const disconnectAfterChunks = n % this.disconnectEvery === this.disconnectEvery - 1 ? 2 + (n % 11) : null;
      const gateways = this.stack.gateways;
      let r = null;
      for (let attempt = 0; attempt < 2; attempt++) {
        const gw = gateways[(n + attempt) % gateways.length];
        r = await stream(this.stack.client, gw, { model: this.stack.servedModel, maxTokens: this.maxTokens, disconnectAfterChunks });
        if (!(r.outcome === "refused" || (r.outcome === "rejected" && r.status === 503))) break;
        if (attempt === 0) this.retries++;
      }
      r.at = Date.now();
      this.results.push(r);
      if (r.outcome === "refused" || r.outcome === "rejected") await sleep(200);  // a client backing off
    }
  }

  /** Stops opening streams and waits for the open ones to end. */
  async stop() {
    this.stopping = true;
    await Promise.all(this.loops);
  }

  summary() {
    const count = {};
    for (const r of this.results) count[r.outcome] = (count[r.outcome] ?? 0) + 1;
    return count;
  }
}
