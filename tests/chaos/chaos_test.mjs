// The chaos suite of issue 11 (CTest `chaos_test`, label `chaos`): the real
// binaries on a network-namespace cluster (stack.mjs: two gateways, a
// scheduler, two pipeline workers, each on its own address), a steady load of
// concurrent streams (some hang up early on purpose), and one fault at a time.
// After each fault every scenario asserts:
//   - no process exits unless the scenario killed it (an abort is an exit);
//   - every stream ends with its tokens or an error event, then [DONE] (or an
//     OpenAI error body, e.g. 503 + Retry-After); none is cut or hangs;
//   - the scheduler's orca:kv_slots_used returns to 0 once the load stops;
//   - the stack serves a completion again within 10 s of the fault ending;
//   - faults the design absorbs (a stall inside --worker-timeout-ms, a lossy
//     link, gateways restarted one at a time) cost no request at all.
// Prints the table of outcomes (tests/chaos/README.md records one run).
// Exit 77 (skipped) where network namespaces cannot be made.
//
//   ORCA_BIN_DIR=build/bin ORCA_NETEM_QUEUE=build/bin/netem_queue node tests/chaos/chaos_test.mjs [name-filter]
import { spawnSync } from "node:child_process";
import path from "node:path";

import { Network, NetnsUnavailable } from "../netns/netns.mjs";
import { ChaosStack, Load, sleep, stream, waitFor } from "./stack.mjs";

const t0 = Date.now();
const say = (msg) => console.log(`[chaos +${((Date.now() - t0) / 1000).toFixed(1)}s] ${msg}`);
const RECOVERY_LIMIT_MS = 10_000;

// Each scenario: the fault (which returns once the fault has ended: the process continued or restarted,
// the link healed) and whether it may fail requests (`mayFail`) or must cost latency only.
const scenarios = [
  ...["worker-1", "worker-0", "scheduler"].flatMap((name) => [
    { name: `SIGSTOP ${name} 0.5 s`, mayFail: false, fault: (s) => stall(s, name, 500) },
    { name: `SIGSTOP ${name} 3 s`, mayFail: false, fault: (s) => stall(s, name, 3000) },
    { name: `SIGSTOP ${name} 8 s`, mayFail: true, fault: (s) => stall(s, name, 8000) },
  ]),
  { name: "kill -9 worker-1, restart", mayFail: true, fault: (s) => killAndRestart(s, "worker-1") },
  { name: "kill -9 worker-0, restart", mayFail: true, fault: (s) => killAndRestart(s, "worker-0") },
  { name: "kill -9 scheduler, restart", mayFail: true, fault: (s) => killAndRestart(s, "scheduler") },
  // The streams gateway-a itself was writing end with it (nobody is left to write [DONE]); only those may be cut.
  { name: "kill -9 gateway-a, restart", mayFail: true, mayCutOn: "gateway-a", fault: (s) => killAndRestart(s, "gateway-a") },
  { name: "SIGTERM worker-1, restart", mayFail: true, fault: (s) => terminateAndRestart(s, "worker-1") },
  { name: "SIGTERM worker-0, restart", mayFail: true, fault: (s) => terminateAndRestart(s, "worker-0") },
  { name: "SIGTERM scheduler (drain), restart", mayFail: true, fault: (s) => terminateAndRestart(s, "scheduler") },
  { name: "rolling restart of the gateways (SIGTERM, drain)", mayFail: false, fault: rollingGatewayRestart },
  // One gateway stalled: its streams pause and resume; the scheduler keeps their state meanwhile.
  { name: "SIGSTOP gateway-a 0.5 s", mayFail: false, fault: (s) => stall(s, "gateway-a", 500) },
  { name: "SIGSTOP gateway-a 3 s", mayFail: false, fault: (s) => stall(s, "gateway-a", 3000) },
  // One gateway drained on its own: its in-flight streams finish, new requests to it are refused or 503'd (the
  // load retries them on gateway-b, as a load balancer would), it exits 0 within its grace period.
  { name: "SIGTERM gateway-a alone (drain), restart", mayFail: false, fault: (s) => drainGateway(s, "gateway-a") },
  // gateway-a cut off from the scheduler (a silent partition): its streams end with their tokens or an error
  // event then [DONE]; new requests to it are 503'd while its stats polls time out.
  { name: "partition gateway-a / scheduler 3 s", mayFail: true, fault: (s) => partition(s, "gateway-a", "scheduler", 3000) },
  { name: "partition gateway-a / scheduler 10 s", mayFail: true, fault: (s) => partition(s, "gateway-a", "scheduler", 10_000) },
  // A silent partition (dropped packets) of 3 s may outlast --worker-timeout-ms (5 s) for TCP: its retransmission
  // timer doubles from ~200 ms (resends at ~0.2, 0.6, 1.4, 3.0, 6.2 s), so a cut healed at 3 s can stay dark
  // until ~6 s. Whether requests fail depends on that timing; the README records what was seen.
  { name: "partition worker-0 / worker-1 3 s", mayFail: true, fault: (s) => partition(s, "worker-0", "worker-1", 3000) },
  { name: "partition worker-0 / worker-1 10 s", mayFail: true, fault: (s) => partition(s, "worker-0", "worker-1", 10_000) },
  { name: "partition scheduler / worker-0 3 s", mayFail: true, fault: (s) => partition(s, "scheduler", "worker-0", 3000) },
  { name: "partition scheduler / worker-0 10 s", mayFail: true, fault: (s) => partition(s, "scheduler", "worker-0", 10_000) },
  { name: "200 ms + 5 % loss worker-0 -> worker-1, 5 s", mayFail: false, fault: impairStages },
];

async function stall(stack, name, ms) {
  stack.signal(name, "SIGSTOP");
  await sleep(ms);
  stack.signal(name, "SIGCONT");
}

async function killAndRestart(stack, name) {
  const e = await stack.kill9(name);
  if (e.signal !== "SIGKILL") throw new Error(`${name} ended with ${JSON.stringify(e)}, not SIGKILL`);
  stack.restart(name);
}

async function terminateAndRestart(stack, name) {
  const e = await stack.terminate(name, 20_000);
  if (e.code !== 0) throw new Error(`${name} exited ${JSON.stringify(e)} after SIGTERM, not 0`);
  stack.restart(name);
}

async function partition(stack, a, b, ms) {
  stack.net.partition(stack.hosts[a], stack.hosts[b]);
  await sleep(ms);
  stack.net.heal(stack.hosts[a], stack.hosts[b]);
}

async function impairStages(stack) {
  stack.net.impair(stack.hosts["worker-0"], { delayMs: 200, lossPercent: 5, to: stack.hosts["worker-1"] });
  await sleep(5000);
  stack.net.clearImpairment(stack.hosts["worker-0"]);
}

// SIGTERM one gateway with the load running and check the drain from outside: a request sent to it during the drain
// is refused or answered 503 (never served, never cut), it exits 0 within --drain-grace-seconds, and every stream
// it was writing when the signal came ends with its tokens and [DONE]. Then it starts again.
async function drainGateway(stack, name) {
  const p = stack.procs[name];
  const termAt = Date.now();
  p.expectExit = true;
  p.child.kill("SIGTERM");
  await sleep(200);
  const late = await stream(stack.client, stack.hosts[name], { model: stack.servedModel, maxTokens: 4, timeoutMs: 10_000 });
  if (!(late.outcome === "refused" || (late.outcome === "rejected" && late.status === 503 && late.retryAfter))) {
    throw new Error(`a request sent ${Date.now() - termAt} ms into ${name}'s drain ended "${late.outcome}" (${late.detail}), ` +
                    "not refused or 503 + Retry-After");
  }
  const graceMs = stack.gatewayGraceSeconds * 1000;
  const e = await Promise.race([p.exited, sleep(graceMs + 5000).then(() => null)]);
  if (e === null) throw new Error(`${name} did not exit within its ${stack.gatewayGraceSeconds} s grace period (+5 s)`);
  if (e.code !== 0) throw new Error(`${name} exited ${JSON.stringify(e)} after SIGTERM, not 0`);
  const exitMs = Date.now() - termAt;
  stack.restart(name);
  await waitFor(() => stack.ready(name), 20_000, `${name} ready again`);
  return {
    note: `${name} exited 0 ${(exitMs / 1000).toFixed(1)} s after SIGTERM; a request during the drain: ${late.outcome}` +
          `${late.status ? ` ${late.status}` : ""}`,
    // The streams it was writing at the signal: there were some, and each ended with its tokens (or its client
    // hung up on purpose); none got an error event or was cut.
    check: (load) => {
      const inFlight = load.results.filter((r) => r.gateway === name && r.startedAt < termAt && r.at > termAt &&
                                                  r.outcome !== "refused" && r.outcome !== "rejected");
      if (inFlight.length === 0) return [`no stream was in flight on ${name} at SIGTERM: the drain was not exercised`];
      const bad = inFlight.filter((r) => !["ok", "disconnected"].includes(r.outcome));
      return bad.length ? [`${bad.length} of ${inFlight.length} streams in flight on ${name} at SIGTERM did not finish: ` +
                           bad.slice(0, 3).map((r) => `${r.outcome} ${r.detail}`).join(" | ")] : [];
    },
  };
}

// SIGTERM one gateway; it drains (exit 0) while the other serves; start it again; then the other.
async function rollingGatewayRestart(stack) {
  for (const name of ["gateway-a", "gateway-b"]) {
    const e = await stack.terminate(name, (stack.gatewayGraceSeconds + 10) * 1000);
    if (e.code !== 0) throw new Error(`${name} exited ${JSON.stringify(e)} after SIGTERM, not 0`);
    stack.restart(name);
    await waitFor(() => stack.ready(name), 20_000, `${name} ready again`);
  }
}

async function runScenario(stack, sc) {
  const load = new Load(stack, { concurrency: 6, maxTokens: 96 });
  const exitsBefore = stack.unexpectedExits.length;
  load.start();
  // The KV gauge is live: under load it is above 0 (else "returns to 0" would prove nothing).
  let kvUnderLoad = 0;
  for (let i = 0; i < 6; i++) {
    await sleep(250);
    kvUnderLoad = Math.max(kvUnderLoad, (await stack.kvSlotsUsed()) ?? 0);
  }
  const faultStart = Date.now();
  let faultError = null, faultResult = null;
  try {
    faultResult = await sc.fault(stack);
  } catch (e) {
    faultError = e.message;
  }
  const faultEnd = Date.now();
  let recoveryMs = null;
  try {
    await waitFor(() => stack.probe(stack.hosts["gateway-a"], 4000), RECOVERY_LIMIT_MS, "a completion after the fault");
    recoveryMs = Date.now() - faultEnd;
  } catch {}
  await sleep(1000);  // the load goes on a little after recovery
  await load.stop();
  let kvMs = null;
  const kvStart = Date.now();
  try {
    await waitFor(async () => (await stack.kvSlotsUsed()) === 0, 10_000, "orca:kv_slots_used 0");
    kvMs = Date.now() - kvStart;
  } catch {}
  const count = load.summary();
  const n = (k) => count[k] ?? 0;
  const failures = [];
  if (faultError) failures.push(`fault: ${faultError}`);
  const exits = stack.unexpectedExits.slice(exitsBefore);
  if (exits.length) failures.push(`unexpected exits: ${exits.join("; ")}`);
  const isCut = (r) => (r.outcome === "cut" || r.outcome === "hung") && r.gateway !== sc.mayCutOn;
  const cutOnKilled = load.results.filter((r) => r.outcome === "cut" && r.gateway === sc.mayCutOn).length;
  if (load.results.some(isCut)) {
    const bad = load.results.filter(isCut).slice(0, 3);
    failures.push(`${load.results.filter(isCut).length} cut or hung streams, e.g. ${bad.map((r) => `${r.gateway}: ${r.detail}`).join(" | ")}`);
  }
  if (!sc.mayFail && (n("error-event") || n("rejected") || n("refused"))) {
    const bad = load.results.filter((r) => !["ok", "disconnected"].includes(r.outcome)).slice(0, 3);
    failures.push(`this fault must cost latency only, yet ${n("error-event")} error events, ${n("rejected")} rejected, ` +
                  `${n("refused")} refused, e.g. ${bad.map((r) => `${r.outcome} ${r.detail}`).join(" | ")}`);
  }
  if (recoveryMs === null) failures.push(`no completion within ${RECOVERY_LIMIT_MS} ms of the fault ending`);
  if (kvMs === null) failures.push(`orca:kv_slots_used still ${await stack.kvSlotsUsed()} 10 s after the load stopped`);
  if (n("ok") === 0) failures.push("no stream completed at all");
  if (kvUnderLoad <= 0) failures.push("orca:kv_slots_used never rose above 0 under load");
  if (faultResult?.check) failures.push(...faultResult.check(load));
  const errorKinds = [...new Set(load.results.filter((r) => r.outcome === "error-event" || r.outcome === "rejected")
                                             .map((r) => r.detail.replace(/[0-9]+/g, "N").slice(0, 70)))];
  const maxOkMs = Math.max(0, ...load.results.filter((r) => r.outcome === "ok").map((r) => r.ms));
  return {
    name: sc.name, streams: load.results.length, ok: n("ok"), errorEvents: n("error-event"), rejected: n("rejected"),
    refused: n("refused"), disconnected: n("disconnected"), cut: n("cut") + n("hung") - cutOnKilled, cutOnKilled, kvUnderLoad, retried: load.retries,
    faultMs: faultEnd - faultStart, recoveryMs, kvMs, maxOkMs, errorKinds, note: faultResult?.note, failures,
  };
}

function table(rows) {
  const lines = [
    "| scenario | streams | ok | error event + [DONE] | 503/error body | client hung up | cut | cut with the killed gateway | retried on other gateway | slowest ok stream | served again after | KV 0 after | result |",
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
  ];
  for (const r of rows) {
    lines.push(`| ${r.name} | ${r.streams} | ${r.ok} | ${r.errorEvents} | ${r.rejected + r.refused} | ${r.disconnected} | ${r.cut} | ${r.cutOnKilled} | ` +
               `${r.retried} | ${(r.maxOkMs / 1000).toFixed(1)} s | ${r.recoveryMs === null ? "never" : `${(r.recoveryMs / 1000).toFixed(1)} s`} | ` +
               `${r.kvMs === null ? "never" : `${(r.kvMs / 1000).toFixed(1)} s`} | ${r.failures.length ? "FAIL" : "pass"} |`);
  }
  return lines.join("\n");
}

async function main() {
  const binDir = process.env.ORCA_BIN_DIR;
  if (!binDir) throw new Error("ORCA_BIN_DIR (the build tree's bin/) must be set");
  const filter = process.argv[2] ?? process.env.ORCA_CHAOS_FILTER ?? "";
  let net;
  try {
    net = await Network.create({ name: "chaos" });
  } catch (e) {
    if (e instanceof NetnsUnavailable) {
      console.log(`SKIP: ${e.message}`);
      return 77;
    }
    throw e;
  }
  const model = path.join(net.workDir, "chaos-tiny");
  const synth = spawnSync(path.join(binDir, "orca"), ["model", "synth", "--preset", "tiny", "--vocab-size", "1024",
                                                       "--max-position", "1024", "--out", model], { encoding: "utf8" });
  if (synth.status !== 0) throw new Error(`orca model synth failed: ${synth.stderr}`);
  let stack;
  const rows = [];
  try {
    // ORCA_CHAOS_WORKER_TIMEOUT_MS: a negative control (e.g. 1000 makes the 3 s stalls fail requests).
    const workerTimeoutMs = Number(process.env.ORCA_CHAOS_WORKER_TIMEOUT_MS ?? 5000);
    stack = await ChaosStack.start({ net, binDir, model, log: say, workerTimeoutMs });
    say(`stack serving (${stack.servedModel}): ${Object.entries(stack.hosts).map(([n, h]) => `${n} ${h.ip}`).join(", ")}`);
    for (const sc of scenarios.filter((s) => s.name.includes(filter))) {
      say(`scenario: ${sc.name}`);
      const row = await runScenario(stack, sc);
      rows.push(row);
      say(`  ${JSON.stringify({ ...row, name: undefined })}`);
      for (const f of row.failures) console.error(`FAILED: ${sc.name}: ${f}`);
      if (row.failures.length) console.error(stack.tails());
      // The next scenario starts on a healthy stack (both gateways ready, serving).
      try {
        await stack.waitServing(30_000);
      } catch (e) {
        console.error(`FAILED: the stack did not come back after "${sc.name}": ${e.message}\n${stack.tails()}`);
        rows.push({ ...row, name: `${sc.name} (stack not back)`, failures: [e.message] });
        break;
      }
    }
  } finally {
    await stack?.stop();
    if (stack && process.env.ORCA_CHAOS_LOG_DIR) stack.saveLogs(process.env.ORCA_CHAOS_LOG_DIR);
    await net.destroy();
  }
  console.log(`\n${table(rows)}\n`);
  const failed = rows.filter((r) => r.failures.length).length;
  say(`${rows.length - failed} scenarios passed, ${failed} failed`);
  return failed || rows.length === 0 ? 1 : 0;
}

main().then((code) => process.exit(code), (e) => {
  console.error(e.stack ?? e.message);
  process.exit(1);
});
