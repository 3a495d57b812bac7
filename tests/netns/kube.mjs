// Runs rendered Kubernetes objects as real processes on a tests/netns Network,
// one host per pod, with the parts of a cluster's behaviour that decide
// whether a layout forms:
//
// - workloads: Deployment (pods NAME-HASH-XXXXX), StatefulSet (pods NAME-i,
//   hostname NAME-i, subdomain = serviceName; Parallel or OrderedReady), each
//   pod's init containers in order, then its containers with
//   restartPolicy Always (restarted with back-off when they exit);
// - a container gets what the kubelet gives it: its command/args with $(VAR)
//   expanded from its env, env from values, fieldRef (status.podIP,
//   metadata.name/namespace, spec.nodeName, status.hostIP), configMapKeyRef
//   and secretKeyRef, configMap/secret/emptyDir volumes, runAsUser/Group and
//   fsGroup from the pod's securityContext, SIGTERM then SIGKILL after the
//   grace period; volume mount paths are rewritten to per-pod directories in
//   args, env and config files (no mount namespace per container);
// - readiness from each container's readinessProbe (httpGet, probed from the
//   node's address), kept as a pod condition;
// - Services: a ClusterIP Service has a virtual IP that each host DNATs to the
//   Ready endpoints (as kube-proxy does; with none, connections are refused);
//   a headless one resolves to the endpoint pods, not-Ready ones only with
//   publishNotReadyAddresses; names resolve through each host's /etc/hosts
//   (service, service.ns, service.ns.svc and the FQDN; pod FQDNs for
//   hostname+subdomain);
// - NetworkPolicy: ingress rules (podSelector, namespaceSelector, ipBlock,
//   ports by number or name) enforced on the selected pods; the node may
//   always connect (probes).
//
// Not emulated: resources and GPUs (a GPU request is an error), liveness and
// startup probes, PVCs, egress policies, multiple namespaces.
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Kinds with nothing to run here (they shape a real cluster's API, not the processes).
const IGNORED_KINDS = new Set(["ServiceMonitor", "PodMonitor", "PodDisruptionBudget", "HorizontalPodAutoscaler",
                               "ScaledObject", "ServiceAccount", "Role", "RoleBinding", "ClusterRole",
                               "ClusterRoleBinding", "Namespace", "PrometheusRule"]);

const matches = (selector, labels) =>
  Object.entries(selector ?? {}).every(([k, v]) => labels[k] === v);

function labelSelectorMatches(sel, labels) {
  if (!sel) return true;
  if (!matches(sel.matchLabels, labels)) return false;
  for (const e of sel.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, e.key);
    const inValues = has && (e.values ?? []).includes(labels[e.key]);
    if (e.operator === "In" && !inValues) return false;
    if (e.operator === "NotIn" && inValues) return false;
    if (e.operator === "Exists" && !has) return false;
    if (e.operator === "DoesNotExist" && has) return false;
  }
  return true;
}

/** kubelet's $(VAR) expansion: defined names are replaced, $$ is a literal $, anything else stays. */
export function expandVars(text, env) {
  return text.replace(/\$\$|\$\(([A-Za-z_][A-Za-z0-9_]*)\)/g, (m, name) => {
    if (m === "$$") return "$";
    return Object.hasOwn(env, name) ? env[name] : m;
  });
}

const short = (s) => crypto.createHash("sha256").update(s).digest("hex");

export class Cluster {
  /**
   * @param {import("./netns.mjs").Network} network
   * @param {{namespace?: string, clusterDomain?: string, binDir: string, workDir?: string, probePeriodMs?: number,
   *          maxGraceMs?: number, log?: (line: string) => void}} options
   */
  constructor(network, options) {
    this.net = network;
    this.namespace = options.namespace ?? "default";
    this.domain = options.clusterDomain ?? "cluster.local";
    this.binDir = options.binDir;
    this.workDir = options.workDir ?? path.join(network.workDir, "cluster");
    this.probePeriodMs = options.probePeriodMs ?? 500;
    this.maxGraceMs = options.maxGraceMs ?? 5000;
    this.log = options.log ?? (() => {});
    this.objects = [];
    this.configMaps = new Map();
    this.secrets = new Map();
    this.services = new Map();
    this.policies = [];
    this.pods = new Map();
    this.clients = [];  // hosts without pods that see the cluster's names and Services (a client "pod")
    this.stopped = false;
    this.events = [];  // [ms since start, text]: what the cluster did, for diagnosis
    this.t0 = Date.now();
    fs.mkdirSync(this.workDir, { recursive: true, mode: 0o755 });
  }

  event(text) {
    this.events.push([Date.now() - this.t0, text]);
    this.log(`[cluster +${((Date.now() - this.t0) / 1000).toFixed(1)}s] ${text}`);
  }

  /** Takes the objects (as rendered: plain JSON). Throws for kinds it cannot run. */
  apply(objects) {
    for (const o of objects) {
      const ns = o.metadata?.namespace;
      if (ns && ns !== this.namespace) throw new Error(`${o.kind}/${o.metadata.name} is in namespace ${ns}, the cluster runs ${this.namespace}`);
      switch (o.kind) {
        case "ConfigMap": this.configMaps.set(o.metadata.name, o.data ?? {}); break;
        case "Secret": this.secrets.set(o.metadata.name, decodeSecret(o)); break;
        case "Service": this.#addService(o); break;
        case "NetworkPolicy": this.policies.push(o); break;
        case "Deployment": case "StatefulSet": this.objects.push(o); break;
        default:
          if (IGNORED_KINDS.has(o.kind)) break;
          throw new Error(`cannot run ${o.kind}/${o.metadata?.name} (tests/netns/kube.mjs knows Deployment, StatefulSet, ` +
                          `Service, ConfigMap, Secret, NetworkPolicy)`);
      }
    }
  }

  #addService(o) {
    const headless = o.spec.clusterIP === "None";
    const svc = {
      name: o.metadata.name, headless, selector: o.spec.selector ?? {}, ports: o.spec.ports ?? [],
      publishNotReady: !!o.spec.publishNotReadyAddresses, vip: headless ? null : this.net.allocateServiceIp(),
      endpoints: [],  // pod names, as last programmed
    };
    if (o.spec.type && !["ClusterIP", "LoadBalancer", "NodePort"].includes(o.spec.type))
      throw new Error(`Service ${svc.name}: type ${o.spec.type} is not emulated`);
    this.services.set(svc.name, svc);
  }

  // A pod's resolv.conf under ClusterFirst DNS.
  #podResolv() {
    return { search: [`${this.namespace}.svc.${this.domain}`, `svc.${this.domain}`, this.domain], ndots: 5 };
  }

  /** A host that resolves the cluster's names and reaches its Services, as a client pod would. */
  addClientHost(name) {
    const host = this.net.addHost(name);
    host.setResolvConf(this.#podResolv());
    this.clients.push(host);
    return host;
  }

  /** Creates every pod's host, runs init containers, starts containers and the service/readiness loops. */
  async start() {
    for (const w of this.objects) {
      const spec = w.spec;
      const replicas = spec.replicas ?? 1;
      for (let i = 0; i < replicas; i++) this.#createPod(w, i);
    }
    this.#writeHostsFiles();
    this.#programServices(true);
    this.#programPolicies();
    this.loops = [this.#readinessLoop(), this.#serviceLoop()];
    // StatefulSets with OrderedReady start pod i+1 once pod i is Ready; everything else at once.
    await Promise.all(this.objects.map(async (w) => {
      const pods = [...this.pods.values()].filter((p) => p.owner === w);
      const ordered = w.kind === "StatefulSet" && (w.spec.podManagementPolicy ?? "OrderedReady") === "OrderedReady";
      for (const p of pods) {
        if (ordered) {
          await this.#runPod(p);
          await this.waitFor(() => p.ready, 600_000, `${p.name} Ready (OrderedReady)`);
        } else {
          this.#runPod(p).catch((e) => this.event(`${p.name}: ${e.message}`));
        }
      }
    }));
  }

  #createPod(w, index) {
    const tpl = w.spec.template;
    const name = w.kind === "StatefulSet"
      ? `${w.metadata.name}-${index}`
      : `${w.metadata.name}-${short(JSON.stringify(tpl)).slice(0, 10)}-${short(`${w.metadata.name}/${index}`).slice(0, 5)}`;
    const labels = { ...(tpl.metadata?.labels ?? {}) };
    if (w.kind === "StatefulSet") {
      labels["statefulset.kubernetes.io/pod-name"] = name;
      labels["apps.kubernetes.io/pod-index"] = String(index);
    }
    const spec = tpl.spec;
    const hostname = spec.hostname ?? name;
    const subdomain = spec.subdomain ?? (w.kind === "StatefulSet" ? w.spec.serviceName : null);
    for (const c of [...(spec.initContainers ?? []), ...spec.containers]) {
      const res = { ...(c.resources?.limits ?? {}), ...(c.resources?.requests ?? {}) };
      if (Object.keys(res).some((k) => k.includes("gpu"))) throw new Error(`${name}/${c.name}: GPU resources cannot run here`);
    }
    const host = this.net.addHost(name, { hostname });
    host.setResolvConf(this.#podResolv());
    const dir = path.join(this.workDir, name);
    fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
    const pod = { name, owner: w, index, labels, spec, host, hostname, subdomain, dir, ready: false,
                  containers: [], probeFailures: new Map(), phase: "Pending" };
    this.pods.set(name, pod);
    return pod;
  }

  // ---- volumes and containers ------------------------------------------------------------------

  #prepareVolumes(pod) {
    const sc = pod.spec.securityContext ?? {};
    const uid = sc.runAsUser ?? null, gid = sc.fsGroup ?? sc.runAsGroup ?? uid;
    pod.volumes = new Map();
    for (const v of pod.spec.volumes ?? []) {
      const dir = path.join(pod.dir, "volumes", v.name);
      fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
      if (v.configMap || v.secret) {
        const data = v.configMap ? this.configMaps.get(v.configMap.name) : this.secrets.get(v.secret.secretName);
        if (!data && !(v.configMap?.optional || v.secret?.optional))
          throw new Error(`${pod.name}: volume ${v.name} refers to a missing ${v.configMap ? "ConfigMap " + v.configMap.name : "Secret " + v.secret.secretName}`);
        const items = (v.configMap ?? v.secret).items ?? Object.keys(data ?? {}).map((k) => ({ key: k, path: k }));
        pod.volumes.set(v.name, { dir, files: items.map((it) => [it.path, data[it.key]]) });
      } else if (v.emptyDir) {
        if (gid !== null) fs.chownSync(dir, uid ?? 0, gid);
        fs.chmodSync(dir, 0o2775);
        pod.volumes.set(v.name, { dir, files: [] });
      } else {
        throw new Error(`${pod.name}: volume ${v.name} (${Object.keys(v).filter((k) => k !== "name")}) is not emulated`);
      }
    }
  }

  /** Rewrites a container's mount paths (longest first) to the pod's volume directories. */
  #pathMapper(pod, container) {
    const mounts = (container.volumeMounts ?? []).map((m) => {
      const vol = pod.volumes.get(m.name);
      if (!vol) throw new Error(`${pod.name}/${container.name}: mounts unknown volume ${m.name}`);
      return [m.mountPath.replace(/\/+$/, ""), path.join(vol.dir, m.subPath ?? "")];
    }).sort((a, b) => b[0].length - a[0].length);
    if (!mounts.length) return (text) => text;
    // One pass over all mount paths (longest first), so a rewritten path is never rewritten again.
    const escape = (p) => p.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
    const re = new RegExp(`(^|[\\s=:,"'])(${mounts.map(([from]) => escape(from)).join("|")})(?=$|[/\\s,"'])`, "g");
    const to = new Map(mounts);
    return (text) => text.replace(re, (_, lead, from) => lead + to.get(from));
  }

  #containerEnv(pod, c, mapPath) {
    const env = {};
    for (const from of c.envFrom ?? []) {
      const data = from.configMapRef ? this.configMaps.get(from.configMapRef.name) : this.secrets.get(from.secretRef?.name);
      if (!data) throw new Error(`${pod.name}/${c.name}: envFrom refers to something missing`);
      for (const [k, v] of Object.entries(data)) env[(from.prefix ?? "") + k] = v;
    }
    for (const e of c.env ?? []) {
      if (Object.hasOwn(e, "value")) {
        env[e.name] = expandVars(e.value, env);
      } else if (e.valueFrom?.fieldRef) {
        const f = e.valueFrom.fieldRef.fieldPath;
        const fields = { "status.podIP": pod.host.ip, "status.podIPs": pod.host.ip, "metadata.name": pod.name,
                         "metadata.namespace": this.namespace, "spec.nodeName": "node-0", "status.hostIP": this.net.gateway,
                         "spec.serviceAccountName": pod.spec.serviceAccountName ?? "default" };
        if (!Object.hasOwn(fields, f)) throw new Error(`${pod.name}/${c.name}: fieldRef ${f} is not emulated`);
        env[e.name] = fields[f];
      } else if (e.valueFrom?.configMapKeyRef || e.valueFrom?.secretKeyRef) {
        const ref = e.valueFrom.configMapKeyRef ?? e.valueFrom.secretKeyRef;
        const data = e.valueFrom.configMapKeyRef ? this.configMaps.get(ref.name) : this.secrets.get(ref.name);
        if (!data || !Object.hasOwn(data, ref.key)) {
          if (ref.optional) continue;
          throw new Error(`${pod.name}/${c.name}: env ${e.name} refers to missing ${ref.name}/${ref.key}`);
        }
        env[e.name] = data[ref.key];
      } else {
        throw new Error(`${pod.name}/${c.name}: env ${e.name} (${JSON.stringify(e.valueFrom)}) is not emulated`);
      }
    }
    for (const k of Object.keys(env)) env[k] = mapPath(env[k]);
    return env;
  }

  #argv(pod, c, env, mapPath) {
    if (!c.command?.length) throw new Error(`${pod.name}/${c.name}: no command (the image's entrypoint is not known here)`);
    const [cmd, ...rest] = [...c.command, ...(c.args ?? [])].map((a) => mapPath(expandVars(a, env)));
    // The image's binaries are this build's; an absolute path that exists here is taken as it is (tests).
    const bin = path.join(this.binDir, path.basename(cmd));
    if (fs.existsSync(bin)) return [bin, ...rest];
    if (path.isAbsolute(cmd) && fs.existsSync(cmd)) return [cmd, ...rest];
    throw new Error(`${pod.name}/${c.name}: ${cmd} is not a binary of this build (${bin})`);
  }

  #startContainer(pod, c, { init }) {
    const mapPath = this.#pathMapper(pod, c);
    const env = this.#containerEnv(pod, c, mapPath);
    const argv = this.#argv(pod, c, env, mapPath);
    const sc = { ...(pod.spec.securityContext ?? {}), ...(c.securityContext ?? {}) };
    const uid = sc.runAsUser ?? null, gid = sc.runAsGroup ?? uid;
    const log = path.join(pod.dir, `${c.name}.log`);
    const child = pod.host.spawn(argv, { env: { HOSTNAME: pod.hostname, HOME: "/tmp", ...env }, uid, gid, log });
    const shown = argv.map((a) => (a.length > 160 ? `${a.slice(0, 160).replace(/\s+/g, " ")}…` : a)).join(" ");
    this.event(`${pod.name}: started ${init ? "init container" : "container"} ${c.name}: ${shown}`);
    return { child, log, argv, env };
  }

  async #runPod(pod) {
    this.#prepareVolumes(pod);
    for (const [name, vol] of pod.volumes) {
      // Files of configMap/secret volumes, with the pod's mount paths rewritten (config files name paths too).
      const users = pod.spec.containers.concat(pod.spec.initContainers ?? []).filter((c) => (c.volumeMounts ?? []).some((m) => m.name === name));
      const mapPath = users.length ? this.#pathMapper(pod, users[0]) : (t) => t;
      for (const [file, content] of vol.files) {
        fs.mkdirSync(path.dirname(path.join(vol.dir, file)), { recursive: true, mode: 0o755 });
        fs.writeFileSync(path.join(vol.dir, file), mapPath(content ?? ""), { mode: 0o644 });
      }
    }
    pod.phase = "Init";
    for (const c of pod.spec.initContainers ?? []) {
      const run = this.#startContainer(pod, c, { init: true });
      const { code, signal } = await run.child.exited;
      if (code !== 0) {
        pod.phase = "Failed";
        throw new Error(`${pod.name}: init container ${c.name} failed (${code ?? signal}):\n${tail(run.log)}`);
      }
    }
    pod.phase = "Running";
    for (const c of pod.spec.containers) this.#superviseContainer(pod, c);
  }

  #superviseContainer(pod, c) {
    const state = { spec: c, restarts: 0, run: null, running: false };
    pod.containers.push(state);
    const launch = () => {
      if (this.stopped) return;
      state.run = this.#startContainer(pod, c, { init: false });
      state.running = true;
      state.run.child.exited.then(({ code, signal }) => {
        state.running = false;
        if (this.stopped) return;
        this.event(`${pod.name}/${c.name} exited (${code ?? signal}); restart ${state.restarts + 1}`);
        const backoff = Math.min(10_000, 1000 * 2 ** state.restarts++);
        setTimeout(launch, backoff);
      });
    };
    launch();
  }

  // ---- readiness, services, policies ---------------------------------------------------------

  async #probe(pod, c) {
    const p = c.readinessProbe;
    if (!p) return true;
    if (!p.httpGet) throw new Error(`${pod.name}/${c.name}: only httpGet readiness probes are emulated`);
    const port = typeof p.httpGet.port === "number" ? p.httpGet.port
      : (c.ports ?? []).find((cp) => cp.name === p.httpGet.port)?.containerPort;
    if (!port) throw new Error(`${pod.name}/${c.name}: readiness probe port ${p.httpGet.port} is not a container port`);
    try {
      const r = await this.net.node.request(`http://${pod.host.ip}:${port}${p.httpGet.path ?? "/"}`, { timeoutMs: 1000 });
      return r.status >= 200 && r.status < 400;
    } catch {
      return false;
    }
  }

  async #readinessLoop() {
    while (!this.stopped) {
      await Promise.all([...this.pods.values()].map(async (pod) => {
        if (pod.phase !== "Running") return;
        let ready = true;
        for (const state of pod.containers) {
          const ok = state.running && await this.#probe(pod, state.spec);
          const failures = ok ? 0 : (pod.probeFailures.get(state.spec.name) ?? 0) + 1;
          pod.probeFailures.set(state.spec.name, failures);
          // Ready after one success; not Ready after failureThreshold failures in a row (or when not running).
          const threshold = state.spec.readinessProbe?.failureThreshold ?? 3;
          if (!ok && (!pod.ready || failures >= threshold || !state.running)) ready = false;
        }
        if (ready !== pod.ready) {
          pod.ready = ready;
          this.event(`${pod.name}: ${ready ? "Ready" : "not Ready"}`);
        }
      }));
      await sleep(this.probePeriodMs);
    }
  }

  #endpoints(svc) {
    return [...this.pods.values()].filter((p) => matches(svc.selector, p.labels) && (p.ready || svc.publishNotReady))
      .filter((p) => svc.publishNotReady || p.phase === "Running");
  }

  /** /etc/hosts of every pod: service names and pod FQDNs as DNS would answer them now. */
  #writeHostsFiles() {
    const entries = [];
    const fqdn = (svc) => [`${svc}.${this.namespace}.svc.${this.domain}`, `${svc}.${this.namespace}.svc`, `${svc}.${this.namespace}`, svc];
    for (const svc of this.services.values()) {
      if (!svc.headless) {
        entries.push([svc.vip, ...fqdn(svc.name)]);
        continue;
      }
      for (const p of this.#endpoints(svc)) {
        entries.push([p.host.ip, ...fqdn(svc.name)]);
        if (p.subdomain === svc.name) entries.push([p.host.ip, ...fqdn(`${p.hostname}.${svc.name}`)]);
      }
    }
    for (const pod of this.pods.values()) {
      const own = pod.subdomain ? [[pod.host.ip, `${pod.hostname}.${pod.subdomain}.${this.namespace}.svc.${this.domain}`, pod.hostname]] : [];
      pod.host.setHostsFile([...own, ...entries]);
    }
    for (const host of this.clients) host.setHostsFile(entries);
    this.net.setDnsRecords([...entries, ...[...this.pods.values()].filter((p) => p.subdomain)
      .map((p) => [p.host.ip, `${p.hostname}.${p.subdomain}.${this.namespace}.svc.${this.domain}`])]);
  }

  /** kube-proxy: each host DNATs a Service's virtual IP to its Ready endpoints, or refuses. */
  #programServices(force = false) {
    let changed = force;
    for (const svc of this.services.values()) {
      const now = this.#endpoints(svc).map((p) => p.name).sort();
      if (now.join() !== svc.endpoints.join()) {
        this.event(`Service ${svc.name}${svc.headless ? " (headless)" : ` ${svc.vip}`}: endpoints [${now.join(", ")}]`);
        svc.endpoints = now;
        changed = true;
      }
    }
    if (!changed) return;
    const nat = [], filter = [];
    for (const svc of this.services.values()) {
      if (svc.headless) continue;
      const pods = svc.endpoints.map((n) => this.pods.get(n));
      for (const sp of svc.ports) {
        const proto = (sp.protocol ?? "TCP").toLowerCase();
        const match = `-d ${svc.vip}/32 -p ${proto} --dport ${sp.port}`;
        if (!pods.length) {
          filter.push(`-A ORCA-SERVICES ${match} -j REJECT --reject-with icmp-port-unreachable`);
          continue;
        }
        pods.forEach((p, i) => {
          const target = resolveTargetPort(p, sp);
          const left = pods.length - i;
          const pick = left > 1 ? `-m statistic --mode random --probability ${(1 / left).toFixed(5)} ` : "";
          nat.push(`-A ORCA-SERVICES ${match} ${pick}-j DNAT --to-destination ${p.host.ip}:${target}`);
        });
      }
    }
    const rules = `*nat\n-F ORCA-SERVICES\n${nat.join("\n")}${nat.length ? "\n" : ""}COMMIT\n` +
                  `*filter\n-F ORCA-SERVICES\n${filter.join("\n")}${filter.length ? "\n" : ""}COMMIT\n`;
    for (const host of [...[...this.pods.values()].map((p) => p.host), ...this.clients]) host.iptablesRestore(rules);
    this.#writeHostsFiles();
  }

  /** Ingress NetworkPolicies: a selected pod accepts only what some rule allows (and the node, and replies). */
  #programPolicies() {
    for (const pod of this.pods.values()) {
      const selecting = this.policies.filter((np) => labelSelectorMatches(np.spec.podSelector, pod.labels) &&
        ((np.spec.policyTypes ?? ["Ingress"]).includes("Ingress")));
      if (!selecting.length) continue;
      const rules = ["-A ORCA-NETPOL -m conntrack --ctstate ESTABLISHED,RELATED -j ACCEPT", "-A ORCA-NETPOL -i lo -j ACCEPT",
                     `-A ORCA-NETPOL -s ${this.net.gateway}/32 -j ACCEPT`];
      for (const np of selecting) {
        for (const rule of np.spec.ingress ?? []) {
          const sources = (rule.from ?? [null]).flatMap((peer) => this.#peerAddresses(peer));
          const ports = (rule.ports ?? [null]).map((pp) => (pp === null ? null : {
            proto: (pp.protocol ?? "TCP").toLowerCase(),
            port: typeof pp.port === "string" ? namedPort(pod, pp.port) : pp.port,
            end: pp.endPort,
          }));
          for (const src of sources) {
            for (const pp of ports) {
              if (pp && pp.port === null) continue;  // a named port this pod does not have
              const s = src ? `-s ${src} ` : "";
              const p = pp ? `-p ${pp.proto} --dport ${pp.port}${pp.end ? `:${pp.end}` : ""} ` : "";
              rules.push(`-A ORCA-NETPOL ${s}${p}-j ACCEPT`.replace(/ +/g, " "));
            }
          }
        }
      }
      rules.push("-A ORCA-NETPOL -j DROP");
      pod.host.iptablesRestore(`*filter\n:ORCA-NETPOL - [0:0]\n-A INPUT -j ORCA-NETPOL\n${rules.join("\n")}\nCOMMIT\n`);
      this.event(`${pod.name}: ingress limited by NetworkPolicy ${selecting.map((n) => n.metadata.name).join(", ")}`);
    }
  }

  #peerAddresses(peer) {
    if (peer === null) return [null];
    if (peer.ipBlock) return [peer.ipBlock.cidr];  // `except` is not emulated
    const nsLabels = { "kubernetes.io/metadata.name": this.namespace };
    if (peer.namespaceSelector && !labelSelectorMatches(peer.namespaceSelector, nsLabels)) return [];
    return [...this.pods.values()].filter((p) => labelSelectorMatches(peer.podSelector, p.labels)).map((p) => `${p.host.ip}/32`);
  }

  async #serviceLoop() {
    while (!this.stopped) {
      this.#programServices();
      await sleep(100);
    }
  }

  // ---- waiting and stopping ------------------------------------------------------------------

  /** Resolves when `predicate()` holds; throws after `timeoutMs` with `what`, pod states and recent events. */
  async waitFor(predicate, timeoutMs, what) {
    const deadline = Date.now() + timeoutMs;
    while (!(await predicate())) {
      if (this.stopped) throw new Error(`cluster stopped while waiting for ${what}`);
      if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms\n${this.describe()}`);
      await sleep(200);
    }
  }

  /** Pods (phase, Ready, restarts), Services with their endpoints, and each container's last log lines. */
  describe() {
    const out = [];
    for (const p of this.pods.values())
      out.push(`pod ${p.name} ${p.host.ip} ${p.phase} ${p.ready ? "Ready" : "not Ready"} restarts=${p.containers.map((c) => c.restarts).join(",")}`);
    for (const s of this.services.values())
      out.push(`service ${s.name} ${s.headless ? "headless" : s.vip}${s.publishNotReady ? " publishNotReadyAddresses" : ""} endpoints=[${s.endpoints.join(", ")}]`);
    for (const p of this.pods.values())
      for (const f of fs.readdirSync(p.dir).filter((f) => f.endsWith(".log"))) out.push(`--- ${p.name}/${f}\n${tail(path.join(p.dir, f), 12)}`);
    return out.join("\n");
  }

  pod(name) {
    const p = this.pods.get(name);
    if (!p) throw new Error(`no pod ${name} (pods: ${[...this.pods.keys()].join(", ")})`);
    return p;
  }

  podsOf(kind, name) {
    return [...this.pods.values()].filter((p) => p.owner.kind === kind && p.owner.metadata.name === name);
  }

  service(name) {
    const s = this.services.get(name);
    if (!s) throw new Error(`no Service ${name}`);
    return s;
  }

  /** SIGTERM to every container, SIGKILL after its pod's grace period (capped by maxGraceMs). */
  async stop() {
    if (this.stopped) return;
    this.stopped = true;
    await Promise.all(this.loops ?? []);
    await Promise.all([...this.pods.values()].flatMap((pod) => pod.containers.map(async (c) => {
      if (!c.running) return;
      const grace = Math.min(this.maxGraceMs, 1000 * (pod.spec.terminationGracePeriodSeconds ?? 30));
      c.run.child.kill("SIGTERM");
      const timer = setTimeout(() => c.run.child.kill("SIGKILL"), grace);
      const r = await c.run.child.exited;
      clearTimeout(timer);
      c.exit = r;
      c.running = false;
    })));
  }
}

function decodeSecret(o) {
  const out = { ...(o.stringData ?? {}) };
  for (const [k, v] of Object.entries(o.data ?? {})) out[k] = Buffer.from(v, "base64").toString("utf8");
  return out;
}

function namedPort(pod, name) {
  for (const c of pod.spec.containers) for (const p of c.ports ?? []) if (p.name === name) return p.containerPort;
  return null;
}

function resolveTargetPort(pod, servicePort) {
  const t = servicePort.targetPort ?? servicePort.port;
  if (typeof t === "number") return t;
  if (/^\d+$/.test(t)) return Number(t);
  const n = namedPort(pod, t);
  if (n === null) throw new Error(`Service port ${servicePort.name ?? servicePort.port}: pod ${pod.name} has no port named ${t}`);
  return n;
}

export function tail(file, lines = 30) {
  if (!fs.existsSync(file)) return "(no log)";
  return fs.readFileSync(file, "utf8").split("\n").slice(-lines).join("\n");
}
