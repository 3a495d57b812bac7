// Proof items (a), (b) and the D3/D5 render rules of issue 10, over every layout the
// project ships: what `orca-operator --render` makes of every example (with each
// gateway discovery mode), and the chart's output for every good values file in
// tests/deploy/values (its OrcaDeployments rendered with the operator flags the chart
// passes, and the post-rendered operator-less output as it is). Each rule is also
// shown to fail on a rendering broken the way a real cluster would punish.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import * as YAML from "yaml";

import { ROOT, binaryFlags, helmTemplate, isPostRendered, parseDocs, readYaml, renderObjects } from "./lib.mjs";
import {
  addressesReachNotReadyPods, allRules, dialedAddresses, drainFitsTheGracePeriod, flagsOf, gpuPodsAreSound,
  groupsAreImmutable, internalAuthIsConsistent, preStopSeconds, unchangedUnderTheirName,
} from "./render_rules.mjs";

const EXAMPLES = path.join(ROOT, "deploy/examples");
const VALUES_DIR = path.join(ROOT, "tests/deploy/values");
const isCr = (o) => o?.apiVersion === "serving.orca.dev/v1alpha1" && o?.kind === "OrcaDeployment";

/** name -> rendered objects, for every layout. */
function layouts() {
  const out = new Map();
  for (const f of fs.readdirSync(EXAMPLES).filter((x) => x.endsWith(".yaml")).sort()) {
    const crs = readYaml(path.join(EXAMPLES, f)).filter(isCr);
    if (!crs.length) continue;
    for (const mode of ["list", "dns"]) {
      out.set(`example ${f} (${mode})`, renderObjects(crs, `--gateway-scheduler-discovery=${mode}`));
    }
  }
  // The CPU example with a key on the schedulers' port and longer drains, in both modes.
  const [tiny] = readYaml(path.join(EXAMPLES, "orca-cpu-tiny.yaml")).filter(isCr);
  tiny.spec.scheduler = { ...tiny.spec.scheduler, apiKeys: { secretName: "tiny-sched-keys" }, drainGraceSeconds: 120 };
  tiny.spec.gateway = { ...tiny.spec.gateway, drainGraceSeconds: 90 };
  for (const mode of ["list", "dns"]) {
    out.set(`example orca-cpu-tiny.yaml + scheduler.apiKeys (${mode})`, renderObjects([tiny], `--gateway-scheduler-discovery=${mode}`));
  }
  for (const f of fs.readdirSync(VALUES_DIR).filter((x) => x.endsWith(".yaml") && !x.startsWith("bad-")).sort()) {
    const file = path.join(VALUES_DIR, f);
    const objects = parseDocs(helmTemplate(file));
    if (isPostRendered(file)) {
      out.set(`values ${f} (post-rendered)`, objects);
      continue;
    }
    const crs = objects.filter(isCr);
    if (!crs.length) continue;
    // The flags the chart's operator Deployment runs with decide what it renders.
    const op = objects.find((o) => o.kind === "Deployment" && o.metadata.labels?.["app.kubernetes.io/component"] === "operator");
    const flags = (op?.spec.template.spec.containers[0].args ?? [])
      .filter((a) => /^--(gateway-scheduler-discovery|manage-service-monitors|cluster-domain)=/.test(a));
    out.set(`values ${f} (operator ${flags.join(" ")})`, renderObjects(crs, ...flags));
  }
  return out;
}

const all = layouts();

test("the layouts cover the examples, the chart values and both discovery modes", () => {
  const names = [...all.keys()];
  assert.ok(names.filter((n) => n.startsWith("example")).length >= 4, names.join("\n"));
  assert.ok(names.some((n) => n.includes("post-rendered")), "an operator-less layout");
  assert.ok(names.some((n) => n.includes("--gateway-scheduler-discovery=dns")), "a chart in dns mode");
  for (const [name, objects] of all) {
    const dialers = objects.filter((o) => o.spec?.template).flatMap((w) => dialedAddresses(objects, w));
    assert.ok(dialers.length >= 3, `${name}: found no dialed addresses to check`);
  }
});

test("(a) every address dialed before Ready reaches pods that are not Ready yet", () => {
  for (const [name, objects] of all) assert.deepEqual(addressesReachNotReadyPods(objects), [], name);
});

test("(a) is violated by a Service that routes only to Ready pods, or a pod that is not there", () => {
  const [, objects] = [...all].find(([n]) => n.includes("orca-cpu-tiny") && n.includes("(list)"));
  for (const svc of ["orca-tiny-workers", "orca-tiny-schedulers", "orca-tiny-r0-scheduler"]) {
    const broken = structuredClone(objects);
    delete broken.find((o) => o.kind === "Service" && o.metadata.name === svc).spec.publishNotReadyAddresses;
    assert.ok(addressesReachNotReadyPods(broken).some((p) => p.includes(`Service ${svc} routes only to Ready pods`)), svc);
  }
  const fewer = structuredClone(objects);
  fewer.find((o) => o.kind === "StatefulSet" && o.metadata.labels["app.kubernetes.io/component"] === "worker").spec.replicas = 1;
  assert.ok(addressesReachNotReadyPods(fewer).some((p) => /no pod .*-1 behind Service/.test(p)));
  const unselected = structuredClone(objects);
  unselected.find((o) => o.metadata.name === "orca-tiny-schedulers").spec.selector["app.kubernetes.io/component"] = "x";
  assert.ok(addressesReachNotReadyPods(unselected).length > 0);
});

test("(b) engine workloads are revision groups that no update strategy can half-roll", () => {
  for (const [name, objects] of all) {
    assert.deepEqual(groupsAreImmutable(objects), [], name);
    assert.ok(objects.some((o) => o.kind === "StatefulSet"), `${name}: no engine group rendered`);
    assert.ok(!objects.some((o) => o.kind === "Deployment" && ["worker", "scheduler"].includes(o.metadata.labels?.["app.kubernetes.io/component"])),
              `${name}: an engine Deployment`);
  }
});

// Spec changes a platform team makes; `engine` ones must produce new groups, the others must
// leave every group object exactly as it was (so that nothing restarts).
const CHANGES = [
  { name: "maxBatchSize", engine: true, patch: (s) => { s.scheduler = { ...s.scheduler, maxBatchSize: 2 }; } },
  { name: "pipeline", engine: true, patch: (s) => { s.parallelism = { ...s.parallelism, pipeline: 3 }; } },
  { name: "image tag", engine: true, patch: (s) => { s.image = { ...s.image, tag: "9.9.9" }; } },
  { name: "model dtype", engine: true, patch: (s) => { s.model.dtype = "f32"; } },
  { name: "worker env", engine: true, patch: (s) => { s.worker = { ...s.worker, env: [{ name: "X", value: "1" }] }; } },
  { name: "scheduler args", engine: true, patch: (s) => { s.scheduler = { ...s.scheduler, args: ["--worker-timeout-ms=9000"] }; } },
  { name: "paged policy", engine: true, patch: (s) => { s.scheduler = { ...s.scheduler, policy: "paged" }; } },
  { name: "KV block size", engine: true, patch: (s) => { s.scheduler = { ...s.scheduler, kvBlockSize: 8 }; } },
  { name: "chunked prefill", engine: true, patch: (s) => { s.scheduler = { ...s.scheduler, maxNumBatchedTokens: 256 }; } },
  { name: "chunked prefill time budget", engine: true, patch: (s) => { s.scheduler = { ...s.scheduler, maxPrefillSlowdown: 2 }; } },
  { name: "long prefill cap", engine: true, patch: (s) => { s.scheduler = { ...s.scheduler, longPrefillTokenThreshold: 128 }; } },
  { name: "prefix caching", engine: true, patch: (s) => { s.scheduler = { ...s.scheduler, enablePrefixCaching: true }; } },
  { name: "priorities", engine: true, patch: (s) => { s.scheduler = { ...s.scheduler, schedulingOrder: "priority", priorityAgingMs: 200 }; } },
  { name: "scheduler drain", engine: true, patch: (s) => { s.scheduler = { ...s.scheduler, drainGraceSeconds: 5 }; } },
  { name: "scheduler key", engine: true, patch: (s) => { s.scheduler = { ...s.scheduler, apiKeys: { secretName: "k" } }; } },
  { name: "gateway drain", engine: false, patch: (s) => { s.gateway = { ...s.gateway, drainGraceSeconds: 5 }; } },
  { name: "replicas", engine: false, patch: (s) => { s.replicas = (s.replicas ?? 1) + 2; } },
  { name: "gateway replicas", engine: false, patch: (s) => { s.gateway = { ...s.gateway, replicas: 5 }; } },
  { name: "monitoring", engine: false, patch: (s) => { s.monitoring = { serviceMonitor: { enabled: true, interval: "10s" } }; } },
  { name: "network policy", engine: false, patch: (s) => { s.networkPolicy = { enabled: true }; } },
  { name: "rollout", engine: false, patch: (s) => { s.rollout = { maxUnavailable: 2, maxSurge: 1 }; } },
];

test("(b) a change never alters a group under its name: engine changes make new groups, others touch none", () => {
  const groupNames = (objects) => objects.filter((o) => o.metadata.labels?.["serving.orca.dev/revision"]).map((o) => `${o.kind}/${o.metadata.name}`);
  for (const f of fs.readdirSync(EXAMPLES).filter((x) => x.endsWith(".yaml"))) {
    const crs = readYaml(path.join(EXAMPLES, f)).filter(isCr);
    for (const cr of crs) {
      const before = renderObjects([cr]);
      for (const change of CHANGES) {
        const next = structuredClone(cr);
        change.patch(next.spec);
        const after = renderObjects([next]);
        const where = `${f} ${change.name}`;
        assert.deepEqual(unchangedUnderTheirName(before, after), [], where);
        assert.deepEqual(groupsAreImmutable(after), [], where);
        const kept = groupNames(before).filter((n) => groupNames(after).includes(n));
        if (change.engine) assert.deepEqual(kept, [], `${where}: old groups must be replaced, not edited`);
        else assert.deepEqual(kept, groupNames(before), `${where}: must leave the running groups alone`);
      }
    }
  }
});

test("(b) is violated by a pipeline that can roll in place", () => {
  const [, objects] = [...all].find(([n]) => n.includes("orca-cpu-tiny") && n.includes("(list)"));
  const sts = (o) => o.kind === "StatefulSet" && o.metadata.labels["app.kubernetes.io/component"] === "worker";
  const rolling = structuredClone(objects);
  rolling.find(sts).spec.updateStrategy = { type: "RollingUpdate" };
  assert.ok(groupsAreImmutable(rolling).some((p) => p.includes("updateStrategy must be OnDelete")));
  const unnamed = structuredClone(objects);
  unnamed.find(sts).metadata.name = "orca-tiny-r0-pipeline";
  assert.ok(groupsAreImmutable(unnamed).some((p) => p.includes("not a revision-named group")));
  const mutable = structuredClone(objects);
  delete mutable.find((o) => o.kind === "ConfigMap" && o.metadata.labels["serving.orca.dev/revision"]).immutable;
  assert.ok(groupsAreImmutable(mutable).some((p) => p.includes("not immutable")));
  const edited = structuredClone(objects);
  edited.find(sts).spec.template.spec.containers[0].image = "other:1";
  assert.deepEqual(unchangedUnderTheirName(objects, edited), [`StatefulSet/${objects.find(sts).metadata.name} changed under the same name`]);
});

test("D3: GPU pods get the CUDA image and /dev/shm; NVIDIA_VISIBLE_DEVICES is never set", () => {
  let gpuLayouts = 0;
  for (const [name, objects] of all) {
    assert.deepEqual(gpuPodsAreSound(objects), [], name);
    gpuLayouts += objects.some((o) => o.spec?.template?.spec.containers[0].resources?.limits?.["nvidia.com/gpu"]);
  }
  assert.ok(gpuLayouts >= 3, "GPU layouts are covered");
  const [, gpu] = [...all].find(([n]) => n.includes("orca-gpu-pvc"));
  const broken = structuredClone(gpu);
  const w = broken.find((o) => o.spec?.template?.spec.containers[0].resources?.limits?.["nvidia.com/gpu"]);
  w.spec.template.spec.containers[0].env.push({ name: "NVIDIA_VISIBLE_DEVICES", value: "all" });
  w.spec.template.spec.containers[0].image = "ghcr.io/orca-serving/orca:0.1.0";
  w.spec.template.spec.volumes = w.spec.template.spec.volumes.filter((v) => v.name !== "dshm");
  const problems = gpuPodsAreSound(broken);
  assert.equal(problems.length, 3, problems.join("\n"));
});

test("D5: with DNS discovery scaling never changes the gateway; with the list, engine updates do not", () => {
  const [cr] = readYaml(path.join(EXAMPLES, "orca-cpu-tiny.yaml")).filter(isCr);
  const gatewayOf = (objects) => objects.filter((o) => o.metadata.name === "orca-tiny-gateway" && o.kind !== "Service");
  const scaled = (n, ...flags) => {
    const c = structuredClone(cr);
    c.spec.replicas = n;
    return gatewayOf(renderObjects([c], ...flags));
  };
  const one = scaled(1);  // DNS discovery is the default
  assert.equal(one.length, 3);  // ConfigMap, Deployment, PodDisruptionBudget
  for (const n of [2, 3, 8]) assert.deepEqual(scaled(n), one, `${n} replicas`);
  const list = "--gateway-scheduler-discovery=list";
  assert.notDeepEqual(scaled(2, list), scaled(1, list), "list mode: the replica count is in the gateway's flags");
  const changed = structuredClone(cr);
  changed.spec.scheduler.maxBatchSize = 4;
  assert.deepEqual(gatewayOf(renderObjects([changed], list)), gatewayOf(renderObjects([cr], list)));
});

// Flags rendered ahead of the binaries that will have them: none now (the worker's
// --data-plane-port and the gateway's --schedulers-dns have landed).
const PENDING = {};

test("every flag-file key is a flag of the binary that reads it (its --help)", (t) => {
  const known = {};
  const binaryOf = (w) => w.spec.template.spec.containers[0].command[0];
  for (const [name, objects] of all) {
    for (const w of objects.filter((o) => o.spec?.template?.spec)) {
      const binary = binaryOf(w);
      const arg = w.spec.template.spec.containers[0].args?.find((a) => a.startsWith("--config="));
      if (!arg) continue;
      const cmName = w.spec.template.spec.volumes.find((v) => v.name === "config").configMap.name;
      const file = arg.split("/").pop();
      const flags = YAML.parse(objects.find((o) => o.kind === "ConfigMap" && o.metadata.name === cmName).data[file]);
      known[binary] ??= binaryFlags(binary);
      for (const key of Object.keys(flags)) {
        if (known[binary].has(key)) continue;
        assert.ok(PENDING[binary]?.includes(key), `${name}: ${w.metadata.name}: ${file}: --${key} is not a flag of ${binary}`);
      }
      for (const extra of w.spec.template.spec.containers[0].args.filter((a) => a !== arg)) {
        const flag = /^--([a-z0-9-]+)/.exec(extra)?.[1];
        assert.ok(known[binary].has(flag) || PENDING[binary]?.includes(flag), `${name}: ${w.metadata.name}: ${extra}`);
      }
    }
  }
  for (const [binary, flags] of Object.entries(PENDING)) {
    for (const f of flags) {
      known[binary] ??= binaryFlags(binary);
      if (known[binary].has(f)) t.diagnostic(`${binary} now has --${f}: drop it from PENDING`);
    }
  }
});

test("every rule holds on every layout at once", () => {
  for (const [name, objects] of all) assert.deepEqual(allRules(objects), [], name);
});

test("the dashboards' per-deployment labels are exactly what the operator's ServiceMonitor scrapes", () => {
  const [cr] = readYaml(path.join(EXAMPLES, "orca-cpu-tiny.yaml")).filter(isCr);
  cr.spec.monitoring = { serviceMonitor: { enabled: true } };
  const objects = renderObjects([cr]);
  const [sm] = objects.filter((o) => o.kind === "ServiceMonitor");
  // The Prometheus Operator adds namespace and pod; the relabelings add the rest, from pod labels.
  const scraped = ["namespace", "pod", ...sm.spec.endpoints[0].relabelings.map((r) => r.targetLabel)].sort();
  const test = fs.readFileSync(path.join(ROOT, "tests/unit/metrics/dashboard_metrics_test.cc"), "utf8");
  const allowed = [...(/kScrapeTargetLabels\[\] = \{([^}]*)\}/.exec(test)?.[1] ?? "").matchAll(/"([a-z_]+)"/g)].map((m) => m[1]).sort();
  assert.deepEqual(allowed, scraped, "grafana_dashboard_metrics_test's kScrapeTargetLabels must match the ServiceMonitor");
  for (const r of sm.spec.endpoints[0].relabelings) {
    const podLabel = r.sourceLabels[0].replace("__meta_kubernetes_pod_label_", "");
    const engine = objects.filter((o) => o.kind === "StatefulSet");
    for (const w of engine) {
      const labels = Object.keys(w.spec.template.metadata.labels).map((k) => k.replace(/[./-]/g, "_"));
      assert.ok(labels.includes(podLabel), `${w.metadata.name} pods have no label for ${r.sourceLabels[0]}`);
    }
  }
});

test("(drain) no drain is cut short by SIGKILL; gateways wait for endpoints; workers outlive their scheduler's drain", () => {
  for (const [name, objects] of all) assert.deepEqual(drainFitsTheGracePeriod(objects), [], name);
  // The grace really is above the drain in every layout, with the defaults and with longer drains.
  const [, keyed] = [...all].find(([n]) => n.includes("scheduler.apiKeys (dns)"));
  const gateway = keyed.find((o) => o.kind === "Deployment" && o.metadata.name === "orca-tiny-gateway");
  assert.equal(flagsOf(keyed, gateway)["drain-grace-seconds"], 90);
  assert.ok(gateway.spec.template.spec.terminationGracePeriodSeconds > 90 + preStopSeconds(gateway.spec.template.spec.containers[0]));
});

test("(drain) is violated by a grace period at the drain, a gateway without preStop, a worker leaving early", () => {
  const [, objects] = [...all].find(([n]) => n.includes("orca-cpu-tiny") && n.includes("(list)"));
  const role = (c) => (o) => o.spec?.template && o.metadata.labels["app.kubernetes.io/component"] === c;
  const tight = structuredClone(objects);
  tight.find(role("scheduler")).spec.template.spec.terminationGracePeriodSeconds = 30;  // = its 30 s drain
  assert.ok(drainFitsTheGracePeriod(tight).some((p) => /-sched: preStop 0s \+ --drain-grace-seconds 30s is not below terminationGracePeriodSeconds 30s/.test(p)),
            drainFitsTheGracePeriod(tight).join("\n"));
  const defaulted = structuredClone(objects);
  delete defaulted.find(role("gateway")).spec.template.spec.terminationGracePeriodSeconds;  // Kubernetes' 30 s
  assert.ok(drainFitsTheGracePeriod(defaulted).some((p) => p.includes("Deployment/orca-tiny-gateway: preStop 5s + --drain-grace-seconds 30s")));
  const eager = structuredClone(objects);
  delete eager.find(role("gateway")).spec.template.spec.containers[0].lifecycle;
  assert.ok(drainFitsTheGracePeriod(eager).some((p) => p.includes("behind a load-balanced Service without a preStop")));
  const early = structuredClone(objects);
  delete early.find(role("worker")).spec.template.spec.containers[0].lifecycle;
  assert.ok(drainFitsTheGracePeriod(early).some((p) => /stops after a 0s preStop, before StatefulSet\/.*-sched ends its 30s drain/.test(p)));
});

// Issue 45: every internal port requires the internal token, so every rendered process must get it.
test("(auth) every process of every layout reads the internal token from a mounted Secret; every caller sends its callee's", () => {
  for (const [name, objects] of all) assert.deepEqual(internalAuthIsConsistent(objects), [], name);
  let own = 0, created = 0;
  for (const [name, objects] of all) {
    const processes = objects.filter((o) => o.spec?.template && /^orca-(scheduler|worker|gateway)$/.test(o.spec.template.spec.containers[0].command?.[0]));
    assert.ok(processes.length >= 3, `${name}: ${processes.length} processes`);
    const secrets = new Set();
    for (const w of processes) {
      assert.equal(flagsOf(objects, w)["internal-token-file"], "/etc/orca-internal-auth/token", `${name}: ${w.metadata.name}`);
      secrets.add(w.spec.template.spec.volumes.find((v) => v.name === "internal-token")?.secret?.secretName);
    }
    assert.equal(secrets.size, 1, `${name}: one token Secret for every process: ${[...secrets]}`);
    const [secret] = secrets;
    // Nothing of the token itself in any object but its Secret: no env from a Secret, only its name in volumes.
    for (const o of objects.filter((x) => x.kind !== "Secret")) assert.ok(!JSON.stringify(o).includes("secretKeyRef"), `${name}: ${o.metadata.name}`);
    if (secret.endsWith("-internal-token")) {
      ++created;
      // Offline (--render) the Secret the operator would create comes with the objects, before the workloads.
      if (name.startsWith("example")) {
        const at = objects.findIndex((o) => o.kind === "Secret" && o.metadata.name === secret);
        assert.ok(at >= 0, `${name}: no Secret ${secret}`);
        assert.ok(at < objects.findIndex((o) => o.spec?.template), `${name}: the Secret comes after a workload`);
        assert.match(Buffer.from(objects[at].data.token, "base64").toString(), /^[0-9a-f]{64}\n$/);
      }
    } else {
      ++own;
    }
  }
  assert.ok(own >= 3, `layouts with their own Secret: ${own}`);  // both example modes and the chart's values
  assert.ok(created >= 2, `layouts with the operator's Secret: ${created}`);
});

test("(auth) is violated by a process without the token, a caller sending another, a credential in args or env, a file not from a Secret", () => {
  const [, objects] = [...all].find(([n]) => n.includes("scheduler.apiKeys (list)"));
  const role = (c) => (o) => o.spec?.template && o.metadata.labels["app.kubernetes.io/component"] === c;
  const cmOf = (objs, w) => objs.find((o) => o.kind === "ConfigMap" && o.metadata.name === w.spec.template.spec.volumes.find((v) => v.name === "config").configMap.name);
  const file = (w) => w.spec.template.spec.containers[0].args[0].split("/").pop();
  const tokenless = structuredClone(objects);
  const worker = tokenless.find(role("worker"));
  const cm = cmOf(tokenless, worker);
  cm.data[file(worker)] = cm.data[file(worker)].replace(/^internal-token-file: .*\n/m, "");
  const missing = internalAuthIsConsistent(tokenless);
  assert.ok(missing.some((p) => /^StatefulSet\/orca-tiny-r0-\w+: no --internal-token-file: orca-worker refuses to start/.test(p)), missing.join("\n"));
  assert.ok(missing.some((p) => /^StatefulSet\/orca-tiny-r0-\w+ dials .*-sched, which requires the token of Secret tiny-sched-keys\[scheduler-api-keys\], sending none/.test(p)),
            missing.join("\n"));
  const other = structuredClone(objects);
  const gw = other.find(role("gateway"));
  gw.spec.template.spec.volumes.find((v) => v.name === "internal-token").secret.secretName = "someone-elses";
  const mismatched = internalAuthIsConsistent(other);
  assert.ok(mismatched.some((p) => p.startsWith("Deployment/orca-tiny-gateway dials") && p.includes("sending someone-elses[scheduler-api-keys]")), mismatched.join("\n"));
  const unmounted = structuredClone(objects);
  const gw2 = unmounted.find(role("gateway"));
  gw2.spec.template.spec.volumes = gw2.spec.template.spec.volumes.filter((v) => v.name !== "internal-token");
  const problems = internalAuthIsConsistent(unmounted);
  assert.ok(problems.some((p) => p.includes("Deployment/orca-tiny-gateway: --internal-token-file /etc/orca-internal-auth/token is not a file of a mounted Secret")), problems.join("\n"));
  assert.ok(problems.some((p) => p.startsWith("Deployment/orca-tiny-gateway dials")), problems.join("\n"));
  const inline = structuredClone(objects);
  inline.find(role("scheduler")).spec.template.spec.containers[0].args.push("--api-keys=hunter2hunter2hunter2", "--insecure-internal");
  inline.find(role("gateway")).spec.template.spec.containers[0].env = [{ name: "ORCA_INTERNAL_TOKEN", value: "hunter2hunter2hunter2" }];
  const leaks = internalAuthIsConsistent(inline);
  assert.ok(leaks.some((p) => p.includes("--api-keys puts a credential in the pod's spec")), leaks.join("\n"));
  assert.ok(leaks.some((p) => p.includes("--insecure-internal: its internal port takes calls from anyone")), leaks.join("\n"));
  assert.ok(leaks.some((p) => p.includes("env ORCA_INTERNAL_TOKEN carries a credential")), leaks.join("\n"));
});
