// Rules a real cluster enforces that a rendering must respect, checked over a
// list of rendered objects (from `orca-operator --render`, the chart, or the
// post-renderer). Each function returns the list of violations ("" free text,
// naming the object) so that tests can also show that a broken rendering is
// caught. What the rules encode:
//
//  (a) readiness: kube-proxy and cluster DNS route only to Ready pods unless a
//      Service publishes not-ready addresses. A scheduler is Ready only once its
//      pipeline formed and a stage only once its peers are, so every address a
//      pod dials (its flag file's workers/scheduler/schedulers/schedulers-dns)
//      must resolve through a Service with publishNotReadyAddresses that
//      selects the target pods, on a port they expose.
//  (b) rollouts: a StatefulSet rolls its pods one at a time (RollingUpdate) or
//      on deletion (OnDelete). A pipeline whose template changed in place would
//      run old and new stages together. So every engine workload must be a
//      revision-named group: revision label in the name, OnDelete, mounting only
//      immutable ConfigMaps of the same revision, dialing only the same revision.
//  (d3) GPUs: the device plugin sets NVIDIA_VISIBLE_DEVICES; GPU pods need the
//      CUDA image and a memory-backed /dev/shm for NCCL.
//  (drain) the kubelet runs a container's preStop hook, then sends SIGTERM, and
//      sends SIGKILL terminationGracePeriodSeconds (default 30) after the
//      deletion, preStop included. A process that drains for
//      --drain-grace-seconds (the gateway's and the scheduler's default: 30)
//      needs preStop + drain < grace. Endpoints and load balancers learn of a
//      deletion concurrently with the kubelet, so a pod behind a ClusterIP /
//      NodePort / LoadBalancer Service keeps getting new connections for a
//      moment: it needs a preStop before it stops accepting. The pods of a
//      group are deleted together, so a worker must outlive its scheduler's
//      drain (the batches being finished need every stage).
//  (auth) every internal port (schedulers, workers) requires the deployment's
//      internal token, and a process without one refuses to start (issue 45):
//      every orca-scheduler, orca-worker and orca-gateway pod reads it with
//      --internal-token-file from a file of a mounted Secret volume (a Secret
//      in a pod's args, env or ConfigMap is readable by anyone who can read
//      those objects), never runs --insecure-internal, and every pod that dials
//      a scheduler or a worker sends the token of the same Secret key the
//      callee requires.
import * as YAML from "yaml";

const REVISION = "serving.orca.dev/revision";
const COMPONENT = "app.kubernetes.io/component";

const id = (o) => `${o.kind}/${o.metadata?.name}`;
const podTemplates = (objects) => objects.filter((o) => o.spec?.template?.spec);

function selects(selector, labels) {
  return Object.entries(selector ?? {}).every(([k, v]) => labels?.[k] === v);
}

/** The flag file a workload's main container reads: [configMapName, key] or null. */
function flagFileOf(workload) {
  const pod = workload.spec.template.spec;
  const c = pod.containers[0];
  const arg = (c.args ?? []).find((a) => a.startsWith("--config="));
  if (!arg) return null;
  const file = arg.slice("--config=".length);
  const mount = (c.volumeMounts ?? []).find((m) => file.startsWith(`${m.mountPath}/`));
  const volume = mount && (pod.volumes ?? []).find((v) => v.name === mount.name);
  if (!volume?.configMap) return null;
  return [volume.configMap.name, file.slice(mount.mountPath.length + 1)];
}

/** Every address a workload's pods dial, from its flag file: [{key, address}]. */
export function dialedAddresses(objects, workload) {
  const ref = flagFileOf(workload);
  if (!ref) return [];
  const cm = objects.find((o) => o.kind === "ConfigMap" && o.metadata.name === ref[0] &&
                                 o.metadata.namespace === workload.metadata.namespace);
  if (!cm?.data?.[ref[1]]) return [];
  const flags = YAML.parse(cm.data[ref[1]]);
  const out = [];
  for (const key of ["workers", "scheduler", "schedulers", "schedulers-dns"]) {
    if (typeof flags?.[key] !== "string") continue;
    for (const address of flags[key].split(",").filter(Boolean)) out.push({ key, address });
  }
  return out;
}

function containerPorts(workload) {
  return workload.spec.template.spec.containers.flatMap((c) => c.ports ?? []);
}

/** (a) Every dialed address reaches pods that are not Ready yet. */
export function addressesReachNotReadyPods(objects) {
  const problems = [];
  const workloads = objects.filter((o) => ["StatefulSet", "Deployment"].includes(o.kind) && o.spec?.template);
  for (const w of workloads) {
    for (const { key, address } of dialedAddresses(objects, w)) {
      const where = `${id(w)} --${key} ${address}`;
      const m = /^([a-z0-9.-]+):(\d+)$/.exec(address);
      if (!m) { problems.push(`${where}: not host:port`); continue; }
      const [host, port] = [m[1], Number(m[2])];
      const labels = host.split(".");
      const svcAt = labels.indexOf("svc");
      if (svcAt < 2) { problems.push(`${where}: not a cluster DNS name (<service>.<namespace>.svc...)`); continue; }
      const ns = labels[svcAt - 1];
      const svcName = labels[svcAt - 2];
      const podName = svcAt === 3 ? labels[0] : null;
      if (svcAt > 3) { problems.push(`${where}: unexpected DNS name`); continue; }
      const svc = objects.find((o) => o.kind === "Service" && o.metadata.name === svcName && o.metadata.namespace === ns);
      if (!svc) { problems.push(`${where}: no Service ${ns}/${svcName}`); continue; }
      if (svc.spec.publishNotReadyAddresses !== true) {
        problems.push(`${where}: Service ${svcName} routes only to Ready pods (no publishNotReadyAddresses)`);
      }
      if (!svc.spec.ports.some((p) => p.port === port)) problems.push(`${where}: Service ${svcName} has no port ${port}`);
      let targets = workloads.filter((t) => t.metadata.namespace === ns && selects(svc.spec.selector, t.spec.template.metadata.labels));
      if (podName) {
        if (svc.spec.clusterIP !== "None") problems.push(`${where}: pod DNS needs a headless Service`);
        targets = targets.filter((t) => {
          if (t.kind !== "StatefulSet" || t.spec.serviceName !== svcName) return false;
          const prefix = `${t.metadata.name}-`;
          const ordinal = podName.startsWith(prefix) ? Number(podName.slice(prefix.length)) : NaN;
          return Number.isInteger(ordinal) && ordinal >= 0 && ordinal < t.spec.replicas;
        });
        if (targets.length !== 1) { problems.push(`${where}: no pod ${podName} behind Service ${svcName}`); continue; }
      } else if (targets.length === 0) {
        problems.push(`${where}: Service ${svcName} selects no pods`);
        continue;
      }
      for (const t of targets) {
        const target = svc.spec.ports.find((p) => p.port === port)?.targetPort;
        const exposed = containerPorts(t).some((p) => p.name === target || p.containerPort === target ||
                                                      (target === undefined && p.containerPort === port));
        if (!exposed) problems.push(`${where}: ${id(t)} exposes no port ${target ?? port}`);
      }
    }
  }
  return problems;
}

/** (b) No engine workload can be updated in place into a half-old, half-new pipeline. */
export function groupsAreImmutable(objects) {
  const problems = [];
  for (const w of podTemplates(objects)) {
    const component = w.spec.template.metadata.labels?.[COMPONENT];
    if (!["worker", "scheduler"].includes(component)) continue;
    const rev = w.metadata.labels?.[REVISION];
    if (w.kind !== "StatefulSet") { problems.push(`${id(w)}: an engine ${component} must be a StatefulSet`); continue; }
    if (!rev || !w.metadata.name.includes(`-${rev}`)) {
      problems.push(`${id(w)}: not a revision-named group (a template change would roll it in place)`);
      continue;
    }
    if (w.spec.updateStrategy?.type !== "OnDelete") problems.push(`${id(w)}: updateStrategy must be OnDelete`);
    if (w.spec.template.metadata.labels?.[REVISION] !== rev || w.spec.selector.matchLabels?.[REVISION] !== rev) {
      problems.push(`${id(w)}: pods and selector must carry revision ${rev}`);
    }
    for (const v of w.spec.template.spec.volumes ?? []) {
      if (!v.configMap) continue;
      const cm = objects.find((o) => o.kind === "ConfigMap" && o.metadata.name === v.configMap.name);
      if (!cm) { problems.push(`${id(w)}: mounts missing ConfigMap ${v.configMap.name}`); continue; }
      if (cm.immutable !== true || cm.metadata.labels?.[REVISION] !== rev) {
        problems.push(`${id(w)}: mounts ConfigMap ${cm.metadata.name}, which is not immutable at revision ${rev}`);
      }
    }
    for (const { key, address } of dialedAddresses(objects, w)) {
      const pod = address.split(".")[0];
      const target = objects.find((o) => o.kind === "StatefulSet" && pod.startsWith(`${o.metadata.name}-`) &&
                                         /^\d+$/.test(pod.slice(o.metadata.name.length + 1)));
      if (!target || target.metadata.labels?.[REVISION] !== rev) {
        problems.push(`${id(w)} --${key} ${address}: not a pod of the same revision ${rev}`);
      }
    }
  }
  return problems;
}

/** (b) Objects that keep their name across two renderings keep their content too. */
export function unchangedUnderTheirName(before, after) {
  const problems = [];
  for (const a of before.filter((o) => o.metadata.labels?.[REVISION])) {
    const b = after.find((o) => o.kind === a.kind && o.metadata.name === a.metadata.name);
    if (b && JSON.stringify(a) !== JSON.stringify(b)) problems.push(`${id(a)} changed under the same name`);
  }
  return problems;
}

/** (d3) GPU pods: CUDA image, memory-backed /dev/shm; nobody pins NVIDIA_VISIBLE_DEVICES. */
export function gpuPodsAreSound(objects) {
  const problems = [];
  for (const w of podTemplates(objects)) {
    const pod = w.spec.template.spec;
    for (const c of [...pod.containers, ...(pod.initContainers ?? [])]) {
      if ((c.env ?? []).some((e) => e.name === "NVIDIA_VISIBLE_DEVICES")) {
        problems.push(`${id(w)}/${c.name}: sets NVIDIA_VISIBLE_DEVICES (the device plugin's job)`);
      }
    }
    const c = pod.containers[0];
    const gpus = c.resources?.limits?.["nvidia.com/gpu"] ?? c.resources?.requests?.["nvidia.com/gpu"];
    if (!gpus || Number(gpus) === 0) continue;
    if (!/cuda/.test(c.image)) problems.push(`${id(w)}: GPU pod runs ${c.image}, not a CUDA image`);
    const shm = (c.volumeMounts ?? []).find((m) => m.mountPath === "/dev/shm");
    const vol = shm && pod.volumes.find((v) => v.name === shm.name);
    if (vol?.emptyDir?.medium !== "Memory") problems.push(`${id(w)}: GPU pod without a memory-backed /dev/shm`);
  }
  return problems;
}

/** A workload's main-container flags: its flag file's keys, then its `--flag=value` args (the command line wins). */
export function flagsOf(objects, workload) {
  const flags = {};
  const ref = flagFileOf(workload);
  const cm = ref && objects.find((o) => o.kind === "ConfigMap" && o.metadata.name === ref[0] &&
                                        o.metadata.namespace === workload.metadata.namespace);
  Object.assign(flags, cm?.data?.[ref[1]] ? YAML.parse(cm.data[ref[1]]) ?? {} : {});
  for (const a of workload.spec.template.spec.containers[0].args ?? []) {
    const m = /^--([a-z0-9-]+)(?:=(.*))?$/.exec(a);
    if (m && m[1] !== "config") flags[m[1]] = m[2] ?? true;
  }
  return flags;
}

const binaryOf = (w) => (w.spec.template.spec.containers[0].command ?? [])[0] ?? "";

/** The workloads whose pods an address (host:port in cluster DNS) reaches. */
function workloadsBehind(objects, address) {
  const host = address.split(":")[0];
  const labels = host.split(".");
  const svcAt = labels.indexOf("svc");
  if (svcAt < 2) return [];
  const [svcName, ns] = [labels[svcAt - 2], labels[svcAt - 1]];
  const svc = objects.find((o) => o.kind === "Service" && o.metadata.name === svcName && o.metadata.namespace === ns);
  if (!svc) return [];
  return podTemplates(objects).filter((w) => {
    if (w.metadata.namespace !== ns || !selects(svc.spec.selector, w.spec.template.metadata.labels)) return false;
    if (svcAt !== 3) return true;
    const pod = labels[0];
    return w.kind === "StatefulSet" && pod.startsWith(`${w.metadata.name}-`) && /^\d+$/.test(pod.slice(w.metadata.name.length + 1));
  });
}

/** The `sleep N` of a container's exec preStop hook (0 without one). */
export function preStopSeconds(container) {
  const command = container.lifecycle?.preStop?.exec?.command;
  if (command?.[0] === "sleep" && /^\d+$/.test(command[1] ?? "")) return Number(command[1]);
  if (container.lifecycle?.preStop?.sleep) return container.lifecycle.preStop.sleep.seconds;
  return container.lifecycle?.preStop ? NaN : 0;
}

const DRAINING_BINARIES = { "orca-gateway": 30, "orca-scheduler": 30 };  // their --drain-grace-seconds default

/** (drain) SIGKILL never cuts a drain short; Service-fronted pods wait for endpoints; workers outlive their scheduler's drain. */
export function drainFitsTheGracePeriod(objects) {
  const problems = [];
  const drainOf = (w) => Number(flagsOf(objects, w)["drain-grace-seconds"] ?? DRAINING_BINARIES[binaryOf(w)] ?? 0);
  for (const w of podTemplates(objects)) {
    const pod = w.spec.template.spec;
    const grace = pod.terminationGracePeriodSeconds ?? 30;
    const pre = preStopSeconds(pod.containers[0]);
    const drain = drainOf(w);
    if (!(pre + drain < grace)) {
      problems.push(`${id(w)}: preStop ${pre}s + --drain-grace-seconds ${drain}s is not below terminationGracePeriodSeconds ${grace}s: SIGKILL cuts the drain short`);
    }
    const fronted = objects.some((s) => s.kind === "Service" && s.spec.clusterIP !== "None" && s.spec.selector &&
                                        s.metadata.namespace === w.metadata.namespace &&
                                        selects(s.spec.selector, w.spec.template.metadata.labels));
    if (fronted && binaryOf(w) in DRAINING_BINARIES && !(pre > 0)) {
      problems.push(`${id(w)}: behind a load-balanced Service without a preStop: it stops accepting while endpoints still send it connections`);
    }
    const scheduler = flagsOf(objects, w).scheduler;
    if (binaryOf(w) === "orca-worker" && typeof scheduler === "string") {
      for (const s of workloadsBehind(objects, scheduler)) {
        if (pre < drainOf(s)) {
          problems.push(`${id(w)}: stops after a ${pre}s preStop, before ${id(s)} ends its ${drainOf(s)}s drain: the batches it finishes need every stage`);
        }
      }
    }
  }
  return problems;
}

/** The Secret key behind a file path in a workload's pods: {secretName, key} or null. */
function secretFileOf(workload, file) {
  const pod = workload.spec.template.spec;
  for (const m of pod.containers[0].volumeMounts ?? []) {
    if (!file.startsWith(`${m.mountPath}/`)) continue;
    const secret = (pod.volumes ?? []).find((v) => v.name === m.name)?.secret;
    if (!secret) return null;
    const name = file.slice(m.mountPath.length + 1);
    const item = (secret.items ?? [{ key: name, path: name }]).find((it) => it.path === name);
    return item ? { secretName: secret.secretName, key: item.key } : null;
  }
  return null;
}

const ORCA_BINARIES = ["orca-scheduler", "orca-worker", "orca-gateway"];
/** Inline spellings of a credential (deprecated aliases, or the gateway's public keys). */
const INLINE_CREDENTIAL_FLAGS = ["api-keys", "scheduler-api-key"];
/** Flags naming a credential file, which must be one of a mounted Secret. */
const CREDENTIAL_FILE_FLAGS = ["internal-token-file", "api-keys-file", "scheduler-api-key-file"];

/** (auth) Every process reads the internal token from a mounted Secret, and every caller sends its callee's. */
export function internalAuthIsConsistent(objects) {
  const problems = [];
  const tokenOf = (w) => {
    const file = flagsOf(objects, w)["internal-token-file"];
    return typeof file === "string" ? secretFileOf(w, file) : undefined;
  };
  for (const w of podTemplates(objects)) {
    const flags = flagsOf(objects, w);
    for (const flag of INLINE_CREDENTIAL_FLAGS) {
      if (flags[flag] !== undefined) problems.push(`${id(w)}: --${flag} puts a credential in the pod's spec or ConfigMap; mount a Secret and give a file flag`);
    }
    for (const e of w.spec.template.spec.containers[0].env ?? []) {
      if (/API_KEY|TOKEN/.test(e.name)) problems.push(`${id(w)}: env ${e.name} carries a credential (env is readable through the pod spec and /proc); mount it as a file`);
    }
    for (const flag of CREDENTIAL_FILE_FLAGS) {
      if (flags[flag] !== undefined && !secretFileOf(w, String(flags[flag]))) problems.push(`${id(w)}: --${flag} ${flags[flag]} is not a file of a mounted Secret`);
    }
    if (!ORCA_BINARIES.includes(binaryOf(w))) continue;
    if (flags["insecure-internal"] !== undefined && flags["insecure-internal"] !== false) {
      problems.push(`${id(w)}: --insecure-internal: its internal port takes calls from anyone who can connect`);
    }
    if (flags["internal-token-file"] === undefined) {
      problems.push(`${id(w)}: no --internal-token-file: ${binaryOf(w)} refuses to start without the internal token`);
    }
  }
  for (const caller of podTemplates(objects)) {
    const flags = flagsOf(objects, caller);
    const sent = tokenOf(caller);
    const addresses = ["scheduler", "schedulers", "schedulers-dns", "workers"]
      .flatMap((k) => (typeof flags[k] === "string" ? flags[k].split(",") : []));
    for (const address of addresses.filter(Boolean)) {
      for (const callee of workloadsBehind(objects, address).filter((x) => ["orca-scheduler", "orca-worker"].includes(binaryOf(x)))) {
        const wanted = tokenOf(callee);
        if (!wanted) continue;  // reported above
        if (!sent || sent.secretName !== wanted.secretName || sent.key !== wanted.key) {
          problems.push(`${id(caller)} dials ${id(callee)}, which requires the token of Secret ${wanted.secretName}[${wanted.key}], ` +
                        `sending ${sent ? `${sent.secretName}[${sent.key}]` : "none"}: its calls are refused (UNAUTHENTICATED)`);
        }
      }
    }
  }
  return problems;
}

/** Every rule at once. */
export function allRules(objects) {
  return [...addressesReachNotReadyPods(objects), ...groupsAreImmutable(objects), ...gpuPodsAreSound(objects),
          ...drainFitsTheGracePeriod(objects), ...internalAuthIsConsistent(objects)];
}
