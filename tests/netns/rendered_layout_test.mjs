// The layout test (issue 10 §3): the exact processes of a rendered layout,
// each on its own address, behaving as a cluster would make them behave.
//
// `orca-operator --render` turns deploy/examples/orca-cpu-tiny.yaml (one
// engine replica: pipeline 2 × tensor 2, a synthesized model) into Kubernetes
// objects; tests/netns/kube.mjs runs every pod of them on its own network
// namespace host with the command, args, env and ConfigMap files the pod
// would get, names resolved through /etc/hosts, ClusterIP Services reaching
// only Ready pods and headless ones resolving as they would. Then:
//   1. before the scheduler is Ready, its Service refuses connections (the
//      gating is real: a layout that dials it while forming cannot form);
//   2. the pipeline forms and the gateway Service answers a completion and a
//      streamed one, from a client host;
//   3. the stages' data plane runs between the worker pods on the fixed
//      --data-plane-port, and every connection between pods has one end on a
//      declared container port or that port (a NetworkPolicy can allow it);
//   4. everything stops and no namespace, interface or process is left.
// Every internal port requires the internal token (issue 45): the layout
// forms and serves only if every process reads it from the mounted Secret
// (--render emits NAME-internal-token with a drawn token) and sends it, and
// the scheduler's and each worker's port refuse a call without it or with
// another one. With ORCA_LAYOUT_SCHEDULER_KEY=1 (CTest:
// rendered_layout_keyed_test) the example names a Secret of its own instead
// (spec.scheduler.apiKeys), which every process then uses.
// Exit 77 (CTest SKIP_RETURN_CODE) where network namespaces cannot be made.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { Cluster } from "./kube.mjs";
import { Network, NetnsUnavailable } from "./netns.mjs";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const BIN = process.env.ORCA_BIN_DIR ?? path.join(ROOT, "build/bin");
const EXAMPLE = path.join(ROOT, "deploy/examples/orca-cpu-tiny.yaml");
const FORM_TIMEOUT_MS = Number(process.env.ORCA_LAYOUT_TIMEOUT_MS ?? 240_000);
const SCHEDULER_KEY = process.env.ORCA_LAYOUT_SCHEDULER_KEY === "1" ? crypto.randomBytes(24).toString("hex") : "";
const KEY_SECRET = "orca-tiny-scheduler-key";
const t0 = Date.now();
const say = (msg) => console.log(`[layout +${((Date.now() - t0) / 1000).toFixed(1)}s] ${msg}`);

/** A container's flags: its --config file's `key: value` lines, then its args (later wins). */
function effectiveFlags(argv) {
  const flags = {};
  const args = argv.slice(1);
  const config = args.find((a) => a.startsWith("--config="))?.slice("--config=".length);
  if (config) {
    for (const line of fs.readFileSync(config, "utf8").split("\n")) {
      const m = /^([A-Za-z0-9_-]+):\s*(.*)$/.exec(line.trim());
      if (m) flags[m[1].replace(/_/g, "-")] = m[2].replace(/^"(.*)"$/, "$1");
    }
  }
  for (let i = 0; i < args.length; i++) {
    const m = /^--([^=]+)(?:=(.*))?$/.exec(args[i]);
    if (!m || m[1] === "config") continue;
    flags[m[1]] = m[2] ?? (args[i + 1] && !args[i + 1].startsWith("--") ? args[++i] : "true");
  }
  return flags;
}

const binaryOf = (pod) => path.basename(pod.containers[0]?.run?.argv[0] ?? "");

// The objects to run: what orca-operator renders from the example, or ORCA_LAYOUT_OBJECTS (a JSON array, e.g. the
// chart's output converted, or a hand-edited rendering to try a fix).
function layoutObjects() {
  if (process.env.ORCA_LAYOUT_OBJECTS) return JSON.parse(fs.readFileSync(process.env.ORCA_LAYOUT_OBJECTS, "utf8"));
  let example = EXAMPLE;
  if (SCHEDULER_KEY) {
    // The example with a key on the schedulers' port.
    const text = fs.readFileSync(EXAMPLE, "utf8");
    assert.ok(/^ *scheduler: *$/m.test(text), "the example has a scheduler section");
    example = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "layout-keyed-")), "example.yaml");
    fs.writeFileSync(example, text.replace(/^( *)scheduler: *$/m, `$1scheduler:\n$1  apiKeys:\n$1    secretName: ${KEY_SECRET}`));
  }
  const render = spawnSync(path.join(BIN, "orca-operator"), ["--render", example, "--render-format", "json"], { encoding: "utf8" });
  assert.equal(render.status, 0, `orca-operator --render failed: ${render.stderr}`);
  const objects = JSON.parse(render.stdout);
  if (SCHEDULER_KEY) {
    const namespace = objects.find((o) => o.metadata?.namespace)?.metadata.namespace ?? "default";
    objects.push({ apiVersion: "v1", kind: "Secret", metadata: { name: KEY_SECRET, namespace },
                   data: { "scheduler-api-keys": Buffer.from(`${SCHEDULER_KEY}\n`).toString("base64") } });
  }
  return objects;
}

async function main() {
  const objects = layoutObjects();
  say(`rendered ${objects.length} objects: ${objects.map((o) => `${o.kind}/${o.metadata.name}`).join(", ")}`);

  const d1 = workersDialClusterIp(objects);
  if (d1.length) {
    // Issue 10 D1, still in the renderer: such a layout cannot form on a cluster, and cannot here.
    console.log(`SKIP: the rendered layout cannot form (issue 10 D1): ${d1.join("; ")}. The scheduler becomes Ready only ` +
                `once the pipeline formed, and a ClusterIP Service routes only to Ready pods. Dial it through a headless ` +
                `Service with publishNotReadyAddresses; this test then runs the layout.`);
    return 77;
  }

  let net;
  try {
    net = await Network.create({ name: "layout" });
  } catch (e) {
    if (e instanceof NetnsUnavailable) {
      console.log(`SKIP: ${e.message}`);
      return 77;
    }
    throw e;
  }
  const namespace = objects.find((o) => o.metadata?.namespace)?.metadata.namespace ?? "default";
  const cluster = new Cluster(net, { namespace, binDir: BIN, log: say });
  try {
    cluster.apply(objects);
    const client = cluster.addClientHost("client");
    await cluster.start();
    const pods = [...cluster.pods.values()];
    say(`pods: ${pods.map((p) => `${p.name}=${p.host.ip}`).join(", ")}`);
    assert.equal(new Set(pods.map((p) => p.host.ip)).size, pods.length, "every pod has its own address");

    // The layout: pipeline 2 × tensor 2, as the pods' own flags say.
    await cluster.waitFor(() => pods.every((p) => p.phase === "Running"), 120_000, "every pod's containers started");
    const workers = pods.filter((p) => binaryOf(p) === "orca-worker");
    const schedulers = pods.filter((p) => binaryOf(p) === "orca-scheduler");
    const gateways = pods.filter((p) => binaryOf(p) === "orca-gateway");
    const flags = new Map(pods.map((p) => [p.name, effectiveFlags(p.containers[0].run.argv)]));
    assert.equal(workers.length, 2, "two worker pods (pipeline 2)");
    for (const w of workers) {
      assert.equal(flags.get(w.name)["num-stages"], "2", `${w.name}: --num-stages`);
      assert.equal(flags.get(w.name)["tensor-parallel"], "2", `${w.name}: --tensor-parallel`);
    }
    assert.equal(schedulers.length, 1, "one scheduler (one engine replica)");
    assert.ok(gateways.length >= 1, "a gateway");

    // 1. The scheduler's Services: a ClusterIP one refuses connections until its pod is Ready.
    const schedulerServices = [...cluster.services.values()].filter((s) => !s.headless && labelsMatch(s.selector, schedulers[0].labels));
    for (const svc of schedulerServices) {
      if (schedulers[0].ready) break;
      const port = svc.ports[0].port;
      assert.equal(await client.canConnect(svc.vip, port), false,
                   `Service ${svc.name} (${svc.vip}:${port}) must refuse while ${schedulers[0].name} is not Ready`);
      say(`Service ${svc.name} ${svc.vip}:${port} refuses connections while ${schedulers[0].name} is not Ready`);
    }

    // 2. The pipeline forms and the gateway serves.
    try {
      await cluster.waitFor(() => gateways.every((g) => g.ready) && schedulers[0].ready && workers.every((w) => w.ready),
                            FORM_TIMEOUT_MS, "the layout to form (workers, scheduler and gateway Ready)");
    } catch (e) {
      throw new Error(`${e.message}\n${diagnoseDialsToUnreadyServices(cluster, flags)}`);
    }
    say("every pod is Ready");
    const gatewaySvc = [...cluster.services.values()].find((s) => !s.headless && labelsMatch(s.selector, gateways[0].labels) &&
                                                              s.ports.some((p) => p.name === "http"));
    assert.ok(gatewaySvc, "a ClusterIP Service with an http port in front of the gateway");
    // Like a real cluster, the Service routes to the pod a moment after it turns Ready.
    await cluster.waitFor(() => gatewaySvc.endpoints.length > 0, 10_000, `Service ${gatewaySvc.name} to have endpoints`);
    const base = `http://${gatewaySvc.name}.${namespace}.svc.${cluster.domain}:${gatewaySvc.ports.find((p) => p.name === "http").port}`;
    const models = JSON.parse((await client.request(`${base}/v1/models`)).body);
    const model = models.data[0].id;
    const body = { model, prompt: "Once upon a time", max_tokens: 8, temperature: 0 };
    const r = await client.request(`${base}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" },
                                                              body, timeoutMs: 60_000 });
    assert.equal(r.status, 200, `completion: ${r.status} ${r.body}`);
    const completion = JSON.parse(r.body);
    assert.equal(typeof completion.choices[0].text, "string");
    assert.ok(completion.usage.completion_tokens >= 1 && completion.usage.completion_tokens <= 8, JSON.stringify(completion.usage));
    assert.ok(["length", "stop"].includes(completion.choices[0].finish_reason), completion.choices[0].finish_reason);
    say(`completion from ${base}: ${JSON.stringify(completion.choices[0].text)} (${completion.usage.completion_tokens} tokens)`);
    const s = await client.request(`${base}/v1/completions`, { method: "POST", headers: { "content-type": "application/json" },
                                                              body: { ...body, stream: true }, timeoutMs: 60_000 });
    assert.equal(s.status, 200, `streamed completion: ${s.status} ${s.body}`);
    const events = s.body.split("\n").filter((l) => l.startsWith("data: ")).map((l) => l.slice(6));
    assert.equal(events.at(-1), "[DONE]", "the stream ends with [DONE]");
    const streamed = events.slice(0, -1).map((e) => JSON.parse(e)).map((e) => e.choices?.[0]?.text ?? "").join("");
    assert.equal(streamed, completion.choices[0].text, "greedy: the streamed text is the same");
    say(`streamed completion: ${events.length - 1} events then [DONE]`);

    const token = internalTokenOf(objects, schedulers[0]);
    if (SCHEDULER_KEY) assert.equal(token, SCHEDULER_KEY, "the example's own Secret is the one mounted");
    checkInternalAuth(client, schedulers[0], workers, pods, flags, token);

    // 3. Connections between pods: the data plane on the fixed port, everything on declared ports.
    checkPodConnections(cluster, workers, flags);
  } catch (e) {
    console.error(`FAILED: ${e.stack ?? e.message}\n\n${cluster.describe()}`);
    await cluster.stop();
    net.destroySync();
    return 1;
  }
  // 4. Teardown: SIGTERM, then everything goes.
  await cluster.stop();
  for (const p of cluster.pods.values())
    for (const c of p.containers) say(`${p.name}/${c.spec.name} exited with ${c.exit?.code ?? c.exit?.signal}`);
  await net.destroy();
  assert.deepEqual(net.leftovers(), [], "no namespace or /etc/netns entry left");
  const survivors = spawnSync("pgrep", ["-f", net.workDir]).stdout?.toString().trim();
  assert.ok(!survivors, `no process of the layout left: ${survivors}`);
  say("torn down: no namespace, interface or process left");
  console.log("1 passed, 0 failed");
  return 0;
}

/** grpc-status of a unary call of `method` (e.g. "/orca.v1.Scheduler/GetStats", an empty request) from `host` to `address` with `key` as bearer ("" = none). */
function grpcUnaryStatus(host, address, method, key) {
  const script = `
const http2 = require("node:http2");
const [address, method, key] = process.argv.slice(1);
const c = http2.connect("http://" + address);
c.on("error", (e) => { console.log("error " + e.message); process.exit(0); });
const headers = { ":method": "POST", ":path": method, "content-type": "application/grpc", te: "trailers" };
if (key) headers.authorization = "Bearer " + key;
const req = c.request(headers);
let status = "none";
req.on("response", (h) => { if (h["grpc-status"] !== undefined) status = h["grpc-status"]; });
req.on("trailers", (t) => { if (t["grpc-status"] !== undefined) status = t["grpc-status"]; });
req.on("data", () => {});
req.on("close", () => { console.log("grpc-status " + status); c.close(); });
req.end(Buffer.alloc(5));  // an empty request message
setTimeout(() => { console.log("timeout"); process.exit(0); }, 10000).unref();`;
  return host.run([process.execPath, "-e", script, address, method, key]).stdout.trim();
}

/** The internal token the pods mount: the first line of the key of the Secret the scheduler's token volume names. */
function internalTokenOf(objects, scheduler) {
  const volume = scheduler.spec.volumes.find((v) => v.name === "internal-token");
  assert.ok(volume?.secret, `${scheduler.name}: no internal-token volume`);
  const secret = objects.find((o) => o.kind === "Secret" && o.metadata.name === volume.secret.secretName);
  assert.ok(secret, `no Secret ${volume.secret.secretName} among the objects`);
  const key = volume.secret.items?.[0]?.key ?? "token";
  return Buffer.from(secret.data[key], "base64").toString().split("\n")[0].trim();
}

/** The token reached the pods only as a file, and every internal port (scheduler, workers) demands it. */
function checkInternalAuth(client, scheduler, workers, pods, flags, token) {
  for (const p of pods) {
    assert.ok(!p.containers[0].run.argv.join(" ").includes(token), `${p.name}: the token is in its command line`);
    const file = flags.get(p.name)["internal-token-file"];  // the mount, where this emulation put it
    assert.ok(file && fs.readFileSync(file, "utf8").split("\n")[0].trim() === token, `${p.name} reads the token from a mounted file`);
  }
  const portOf = (p) => flags.get(p.name).listen.split(":").pop();
  const ports = [[scheduler, "/orca.v1.Scheduler/GetStats"], ...workers.map((w) => [w, "/orca.v1.Worker/GetInfo"])];
  for (const [pod, method] of ports) {
    const address = `${pod.host.ip}:${portOf(pod)}`;
    // UNAUTHENTICATED (16) without the token and with another one; OK (0) with it.
    assert.equal(grpcUnaryStatus(client, address, method, ""), "grpc-status 16", `${pod.name}: a call without the token is refused`);
    assert.equal(grpcUnaryStatus(client, address, method, "not-the-token-0123456789abcdef"), "grpc-status 16",
                 `${pod.name}: a call with another token is refused`);
    assert.equal(grpcUnaryStatus(client, address, method, token), "grpc-status 0", `${pod.name}: a call with the token is served`);
  }
  say(`${ports.length} internal ports refuse a call without the token and with another (UNAUTHENTICATED) and serve it with ` +
      "the token; the workers formed the pipeline and the gateway served through it with the mounted token");
}

function labelsMatch(selector, labels) {
  return Object.entries(selector ?? {}).every(([k, v]) => labels[k] === v);
}

/** Every ESTABLISHED connection between two pods uses, at one end, a declared container port or a worker's data-plane port. */
function checkPodConnections(cluster, workers, flags) {
  const byIp = new Map([...cluster.pods.values()].map((p) => [p.host.ip, p]));
  const allowed = (pod) => {
    const ports = new Set(pod.spec.containers.flatMap((c) => (c.ports ?? []).map((p) => p.containerPort)));
    if (workers.includes(pod)) ports.add(Number(flags.get(pod.name)["data-plane-port"] ?? 7200));
    return ports;
  };
  const split = (a) => {
    const i = a.lastIndexOf(":");
    return [a.slice(0, i).replace(/^\[|\]$/g, "").replace(/^::ffff:/, ""), Number(a.slice(i + 1))];
  };
  let dataPlane = 0;
  for (const pod of cluster.pods.values()) {
    for (const sock of pod.host.sockets().filter((x) => x.state === "ESTAB")) {
      const [lip, lport] = split(sock.local), [pip, pport] = split(sock.peer);
      const peer = byIp.get(pip);
      if (!peer || peer === pod || lip !== pod.host.ip) continue;
      assert.ok(allowed(pod).has(lport) || allowed(peer).has(pport),
                `${pod.name} ${sock.local} <-> ${peer.name} ${sock.peer}: neither end is a declared port`);
      if (workers.includes(pod) && workers.includes(peer)) {
        const dp = Number(flags.get(pod.name)["data-plane-port"] ?? 7200), peerDp = Number(flags.get(peer.name)["data-plane-port"] ?? 7200);
        if (lport === dp || pport === peerDp) dataPlane++;
      }
    }
  }
  assert.ok(dataPlane >= 2, `the stages' data plane connects the worker pods on the data-plane port (${dataPlane} connection ends seen)`);
  console.log(`[layout] data plane: ${dataPlane} connection ends between worker pods on the data-plane port; every pod-to-pod connection on a declared port`);
}

/**
 * Worker containers (orca-worker) whose flags, from their args and --config file (a ConfigMap key), name a ClusterIP
 * Service: a worker dials those while the pipeline forms, before anything behind them can be Ready.
 */
function workersDialClusterIp(objects) {
  const clusterIp = new Set(objects.filter((o) => o.kind === "Service" && o.spec.clusterIP !== "None").map((o) => o.metadata.name));
  const configMaps = new Map(objects.filter((o) => o.kind === "ConfigMap").map((o) => [o.metadata.name, o.data ?? {}]));
  const out = [];
  for (const w of objects.filter((o) => o.spec?.template?.spec?.containers)) {
    const spec = w.spec.template.spec;
    for (const c of spec.containers.filter((c) => path.basename(c.command?.[0] ?? "") === "orca-worker")) {
      const words = [...(c.args ?? [])];
      const config = words.find((a) => a.startsWith("--config="))?.slice("--config=".length);
      const mount = config && (c.volumeMounts ?? []).find((m) => config.startsWith(`${m.mountPath}/`));
      const volume = mount && (spec.volumes ?? []).find((v) => v.name === mount.name);
      if (volume?.configMap) words.push(configMaps.get(volume.configMap.name)?.[config.slice(mount.mountPath.length + 1)] ?? "");
      for (const m of words.join("\n").matchAll(/([a-z0-9-]+)(?:\.[a-z0-9.-]+)?:\d+/g)) {
        if (clusterIp.has(m[1])) out.push(`${w.kind}/${w.metadata.name} (orca-worker) dials ${m[0]}, ClusterIP Service ${m[1]}`);
      }
    }
  }
  return [...new Set(out)];
}

/** Names the Services that pods dial (by their flags) but that route to no pod yet (a layout that cannot form). */
function diagnoseDialsToUnreadyServices(cluster, flags) {
  const out = [];
  for (const [podName, f] of flags) {
    for (const [flag, value] of Object.entries(f)) {
      for (const address of String(value).split(",")) {
        const host = address.split(":")[0];
        for (const svc of cluster.services.values()) {
          if (svc.headless || !host.startsWith(`${svc.name}.`) && host !== svc.name) continue;
          if (!svc.endpoints.length) {
            out.push(`${podName} dials ${address} (--${flag}): ClusterIP Service ${svc.name} has no Ready endpoint, so it refuses; ` +
                     `if its pods become Ready only after this pod reaches them, the layout cannot form ` +
                     `(dial a headless Service with publishNotReadyAddresses instead)`);
          }
        }
      }
    }
  }
  return out.length ? `diagnosis:\n${out.join("\n")}` : "";
}

main().then((code) => process.exit(code), (e) => {
  console.error(e.stack ?? e.message);
  process.exit(1);
});
