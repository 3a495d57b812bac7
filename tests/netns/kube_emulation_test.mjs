// The cluster emulation (kube.mjs) behaves as a cluster does in what decides
// whether a layout forms: a ClusterIP Service refuses until its pod is Ready
// and routes to it after; a headless Service without publishNotReadyAddresses
// resolves only Ready pods, one with it resolves at once; a pod's hostname,
// env (fieldRef, $(VAR) in args) and ConfigMap files are what the kubelet
// gives; an ingress NetworkPolicy admits only its peers on its ports (and the
// node's probes). Small HTTP servers (node) stand in for Orca's binaries.
// Exit 77 where namespaces cannot be made.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";

import { Cluster } from "./kube.mjs";
import { Network, NetnsUnavailable } from "./netns.mjs";

const t0 = Date.now();
const say = (msg) => console.log(`[kube +${((Date.now() - t0) / 1000).toFixed(1)}s] ${msg}`);

// Answers /ready with 200 once the file READY_FILE exists (the test creates it), 503 before; / with
// "hostname POD_IP greeting-file".
const SERVER = `
  const fs = require("fs"), os = require("os");
  require("http").createServer((q, r) => {
    if (q.url === "/ready") { r.statusCode = fs.existsSync(process.env.READY_FILE) ? 200 : 503; return r.end(); }
    r.end([os.hostname(), process.env.POD_IP, fs.readFileSync(process.argv[1], "utf8").trim()].join(" "));
  }).listen(8080);`;

function deployment(name, labels) {
  return {
    apiVersion: "apps/v1", kind: "Deployment", metadata: { name, namespace: "t" },
    spec: {
      replicas: 1, selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: {
          securityContext: { runAsUser: 65532, runAsGroup: 65532, fsGroup: 65532 },
          containers: [{
            name: "web", command: [process.execPath], args: ["-e", SERVER, "/etc/greeting/$(GREETING_FILE)"],
            env: [{ name: "POD_IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } },
                  { name: "GREETING_FILE", value: "hello.txt" }, { name: "READY_FILE", value: "/var/run/gate/ready" }],
            ports: [{ name: "http", containerPort: 8080 }],
            readinessProbe: { httpGet: { path: "/ready", port: "http" }, periodSeconds: 1, failureThreshold: 3 },
            volumeMounts: [{ name: "greeting", mountPath: "/etc/greeting" }, { name: "gate", mountPath: "/var/run/gate" }],
          }],
          volumes: [{ name: "greeting", configMap: { name: "greeting" } }, { name: "gate", emptyDir: {} }],
        },
      },
    },
  };
}

const OBJECTS = [
  { apiVersion: "v1", kind: "ConfigMap", metadata: { name: "greeting", namespace: "t" }, data: { "hello.txt": "hello" } },
  deployment("web", { app: "web" }),
  deployment("peer", { app: "peer", role: "client" }),
  { apiVersion: "v1", kind: "Service", metadata: { name: "web", namespace: "t" },
    spec: { selector: { app: "web" }, ports: [{ name: "http", port: 80, targetPort: "http" }] } },
  { apiVersion: "v1", kind: "Service", metadata: { name: "web-ready", namespace: "t" },
    spec: { clusterIP: "None", selector: { app: "web" }, ports: [{ name: "http", port: 8080 }] } },
  { apiVersion: "v1", kind: "Service", metadata: { name: "web-all", namespace: "t" },
    spec: { clusterIP: "None", publishNotReadyAddresses: true, selector: { app: "web" }, ports: [{ name: "http", port: 8080 }] } },
  { apiVersion: "networking.k8s.io/v1", kind: "NetworkPolicy", metadata: { name: "web-from-clients", namespace: "t" },
    spec: { podSelector: { matchLabels: { app: "web" } }, policyTypes: ["Ingress"],
            ingress: [{ from: [{ podSelector: { matchLabels: { role: "client" } } }], ports: [{ port: "http" }] }] } },
];

async function main() {
  let net;
  try {
    net = await Network.create({ name: "kube" });
  } catch (e) {
    if (e instanceof NetnsUnavailable) {
      console.log(`SKIP: ${e.message}`);
      return 77;
    }
    throw e;
  }
  const cluster = new Cluster(net, { namespace: "t", binDir: "/nonexistent", log: say, probePeriodMs: 200 });
  let passed = 0;
  try {
    cluster.apply(OBJECTS);
    const outsider = cluster.addClientHost("outsider");
    await cluster.start();
    const [web] = cluster.podsOf("Deployment", "web"), [peer] = cluster.podsOf("Deployment", "peer");
    const resolve = (host, name) => host.run(["getent", "hosts", name]).stdout.trim().split(/\s+/)[0] ?? "";
    // The probe from the peer pod: HTTP through the Service name, as any client in the cluster would do it.
    const fromPeer = (url) => peer.host.run([process.execPath, "-e",
      `require("http").get(${JSON.stringify(url)}, (r) => { let b = ""; r.on("data", (d) => b += d); r.on("end", () => console.log(r.statusCode + " " + b)); })` +
      `.on("error", (e) => console.log("error " + e.code)).setTimeout(2000, function () { this.destroy(); })`]).stdout.trim();

    const openGate = (pod) => fs.writeFileSync(path.join(pod.dir, "volumes/gate/ready"), "");
    openGate(peer);
    await cluster.waitFor(() => web.phase === "Running" && peer.ready, 60_000, "web running, peer Ready");
    assert.equal(web.ready, false, "web is not Ready before its gate opens");
    const svc = cluster.service("web");
    assert.equal(await peer.host.canConnect(svc.vip, 80), false, "a ClusterIP Service without Ready endpoints refuses");
    assert.equal(fromPeer("http://web.t.svc.cluster.local/"), "error ECONNREFUSED");
    assert.equal(resolve(peer.host, "web-ready.t.svc.cluster.local"), "", "headless: a not-Ready pod is not published");
    assert.equal(resolve(peer.host, "web-all.t.svc.cluster.local"), web.host.ip, "publishNotReadyAddresses: published at once");
    passed++;
    say("ok: before Ready: ClusterIP refuses, headless resolves only with publishNotReadyAddresses");

    openGate(web);
    await cluster.waitFor(() => web.ready && svc.endpoints.length === 1, 30_000, "web Ready and routed");
    assert.equal(fromPeer("http://web.t.svc.cluster.local/"), `200 ${web.name} ${web.host.ip} hello`,
                 "through the Service: the pod's hostname, its IP from fieldRef, the ConfigMap file named by $(GREETING_FILE)");
    assert.equal(fromPeer("http://web/"), `200 ${web.name} ${web.host.ip} hello`, "the short name through the search path");
    await cluster.waitFor(() => resolve(peer.host, "web-ready.t.svc.cluster.local") === web.host.ip, 5000, "headless publishes a Ready pod");
    passed++;
    say("ok: after Ready: routed through the Service, published by the headless Service");

    // The NetworkPolicy admits role=client pods on the http port; the outsider is dropped, the node's probes pass.
    assert.equal(await outsider.canConnect(web.host.ip, 8080, 1500), false, "the NetworkPolicy drops a non-client");
    assert.equal(await outsider.canConnect(peer.host.ip, 8080, 1500), true, "a pod no policy selects accepts anyone");
    assert.equal(web.ready, true, "the node's probes still reach the pod");
    passed++;
    say("ok: NetworkPolicy admits its peers only");

    await cluster.stop();
    for (const p of cluster.pods.values()) for (const c of p.containers) assert.ok(c.exit, `${p.name}/${c.spec.name} stopped`);
    await net.destroy();
    assert.deepEqual(net.leftovers(), []);
    passed++;
    say("ok: stopped and torn down");
  } catch (e) {
    console.error(`FAILED: ${e.stack ?? e.message}\n\n${cluster.describe()}`);
    await cluster.stop();
    net.destroySync();
    console.log(`${passed} passed, 1 failed`);
    return 1;
  }
  console.log(`${passed} passed, 0 failed`);
  return 0;
}

main().then((code) => process.exit(code), (e) => {
  console.error(e.stack ?? e.message);
  process.exit(1);
});
