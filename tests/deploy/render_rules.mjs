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

/** Every rule at once. */
export function allRules(objects) {
  return [...addressesReachNotReadyPods(objects), ...groupsAreImmutable(objects), ...gpuPodsAreSound(objects)];
}
