// A small multi-host network on one Linux machine, for tests that must run
// real processes on their own addresses rather than on loopback: the layout
// test (a rendered Kubernetes layout, one pod per host) and the chaos suite
// (stalls, partitions and slow links between hosts).
//
//   const net = await Network.create();            // throws NetnsUnavailable where it cannot
//   const a = net.addHost("a"), b = net.addHost("b");
//   const p = b.spawn(["orca-worker", ...], { log: "/tmp/w.log" });
//   const r = await a.request("http://" + b.ip + ":7101/ready");
//   net.partition(a, b); net.heal(a, b);
//   net.impair(a, { delayMs: 200, lossPercent: 5 });
//   await net.destroy();                              // also done on exit, even on failure
//
// Topology: every host is a network namespace with one interface, eth0, whose
// peer sits on a bridge inside a router namespace of its own (10.200.0.1/24;
// hosts get .2, .3, ...). Nothing is connected to the machine's own network
// namespace, so no address or route of the machine changes and several
// Networks (two test runs at once) never see each other. A host resolves
// names through its own /etc/hosts (`ip netns exec` bind-mounts
// /etc/netns/NS/hosts over it) and the network's DNS server (dns.mjs, on the
// router's address), which answers the same names and NXDOMAIN at once. Each process also gets its own UTS namespace, so gethostname() returns
// the host's name (a pod's hostname).
//
// The test process itself stays in the machine's namespace; it reaches a host
// through that host's dialer (forward.mjs, a Unix-socket-to-TCP forwarder
// running inside the host): `host.dial()`, `host.request()`.
//
// Clean-up: destroy() kills every process in the namespaces (by namespace
// membership, so grandchildren too), deletes the namespaces (and with them
// every interface and iptables rule) and /etc/netns/NS. It runs on exit and on
// SIGINT/SIGTERM; processes are started with a parent-death signal, and a new
// Network first removes what a killed earlier run (dead owner pid) left.
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const PREFIX = "orcanet";
const SUBNET = "10.200.0";
const DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
export const SERVICE_SUBNET = "10.201.0";

/** Thrown by Network.create() where namespaces cannot be made (not root, no `ip`, a sandbox). */
export class NetnsUnavailable extends Error {}

function sh(argv, { input, allowFail = false } = {}) {
  const r = spawnSync(argv[0], argv.slice(1), { encoding: "utf8", input });
  if (r.error) {
    if (allowFail) return r;
    throw new Error(`${argv.join(" ")}: ${r.error.message}`);
  }
  if (r.status !== 0 && !allowFail) throw new Error(`${argv.join(" ")} failed (${r.status}): ${r.stderr.trim()}`);
  return r;
}

const have = (tool) => spawnSync("sh", ["-c", `command -v ${tool}`]).status === 0;
const pidAlive = (pid) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === "EPERM";
  }
};

function ourNamespaces() {
  const r = sh(["ip", "netns", "list"], { allowFail: true });
  return (r.stdout ?? "").split("\n").map((l) => l.split(/\s+/)[0]).filter((n) => n.startsWith(`${PREFIX}-`));
}

/** Kills every process in namespace `ns`, deletes it and its /etc/netns directory. */
function removeNamespace(ns) {
  for (let attempt = 0; attempt < 50; attempt++) {
    const pids = (sh(["ip", "netns", "pids", ns], { allowFail: true }).stdout ?? "").split(/\s+/).filter(Boolean).map(Number);
    if (!pids.length) break;
    for (const pid of pids) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {}
    }
    spawnSync("sleep", ["0.05"]);
  }
  sh(["ip", "netns", "del", ns], { allowFail: true });
  fs.rmSync(`/etc/netns/${ns}`, { recursive: true, force: true });
}

/** Removes what runs killed before their clean-up left behind (namespaces of dead owners). */
function sweepStale() {
  for (const ns of ourNamespaces()) {
    const owner = Number(ns.split("-")[1]);
    if (owner && owner !== process.pid && !pidAlive(owner)) removeNamespace(ns);
  }
}

// `ip netns add` makes /run/netns a mount point (a bind mount of itself). Inside a chroot (the fresh-machine check)
// that mount sits in the machine's mount table under the chroot's directory, where it would keep the directory from
// being deleted: the last Network of a process inside a chroot takes it down again once no namespace is left.
function inChroot() {
  try {
    const root = fs.statSync("/"), init = fs.statSync("/proc/1/root");
    return root.dev !== init.dev || root.ino !== init.ino;
  } catch {
    return false;  // /proc/1/root not readable: not ours to judge
  }
}

function releaseRunDir() {
  if (!inChroot()) return;
  const mounted = fs.readFileSync("/proc/self/mountinfo", "utf8").split("\n").some((l) => l.split(" ")[4] === "/run/netns");
  if (mounted && fs.readdirSync("/run/netns").length === 0) sh(["umount", "/run/netns"], { allowFail: true });
}

const live = new Set();
let hooksInstalled = false;
function installExitHooks() {
  if (hooksInstalled) return;
  hooksInstalled = true;
  process.on("exit", () => {
    for (const n of [...live]) n.destroySync();
  });
  for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) {
    process.on(sig, () => {
      for (const n of [...live]) n.destroySync();
      process.exit(128 + os.constants.signals[sig]);
    });
  }
}

let networkCount = 0;

export class Network {
  /**
   * Makes the router namespace and its bridge. Throws NetnsUnavailable (with the reason) where
   * network namespaces, veth pairs, bridges or iptables cannot be used.
   */
  static async create({ name = "net" } = {}) {
    if (process.getuid?.() !== 0) throw new NetnsUnavailable("network namespaces need root");
    for (const tool of ["ip", "iptables-restore", "unshare", "setpriv"])
      if (!have(tool)) throw new NetnsUnavailable(`'${tool}' is not installed (scripts/bootstrap.sh installs it)`);
    sweepStale();
    const n = new Network(name);
    try {
      n.#makeRouter();
      // The router namespace as a host: the machine's "node" (kubelet probes come from its address).
      n.node = new Host(n, { name: "node", ns: n.router, ip: n.gateway, hostname: "node", port: null });
    } catch (e) {
      n.destroySync();
      throw new NetnsUnavailable(`cannot make network namespaces here: ${e.message}`);
    }
    await n.#startDns();
    return n;
  }

  constructor(name) {
    this.name = name;
    this.id = `${PREFIX}-${process.pid}-${networkCount++}`;
    this.router = `${this.id}-r`;
    this.hosts = new Map();
    this.workDir = fs.mkdtempSync(path.join(os.tmpdir(), `orca-netns-${name}-`));
    fs.chmodSync(this.workDir, 0o755);
    this.gateway = `${SUBNET}.1`;
    this.nextHost = 2;
    this.nextService = 10;
    this.impairments = new Map();
    installExitHooks();
    live.add(this);
  }

  #makeRouter() {
    sh(["ip", "netns", "add", this.router]);
    sh(["ip", "-n", this.router, "link", "set", "lo", "up"]);
    sh(["ip", "-n", this.router, "link", "add", "br0", "type", "bridge"]);
    sh(["ip", "-n", this.router, "addr", "add", `${this.gateway}/24`, "dev", "br0"]);
    sh(["ip", "-n", this.router, "link", "set", "br0", "up"]);
  }

  // The network's DNS server, on the gateway address (see dns.mjs).
  async #startDns() {
    this.dnsRecordsFile = path.join(this.workDir, "dns-records.json");
    fs.writeFileSync(this.dnsRecordsFile, "{}");
    const child = spawn("ip", ["netns", "exec", this.router, "setpriv", "--pdeathsig", "KILL", "--", process.execPath,
                               path.join(HERE, "dns.mjs"), this.gateway, this.dnsRecordsFile],
                        { stdio: ["ignore", "pipe", "inherit"] });
    await new Promise((resolve, reject) => {
      child.once("exit", (code) => reject(new Error(`DNS server exited (${code})`)));
      child.stdout.once("data", () => resolve());
    });
    child.stdout.resume();
    this.dns = child;
  }

  /** What the network's DNS server answers: entries are [ip, name, ...aliases]; several entries may share a name. */
  setDnsRecords(entries) {
    const table = {};
    for (const [ip, ...names] of entries) for (const n of names) (table[n.toLowerCase()] ??= []).includes(ip) || table[n.toLowerCase()].push(ip);
    const tmp = `${this.dnsRecordsFile}.tmp`;
    fs.writeFileSync(tmp, JSON.stringify(table));
    fs.renameSync(tmp, this.dnsRecordsFile);
  }

  /**
   * A new host on the bridge with the next free address. `hostname` (default: `name`) is what
   * gethostname() returns to its processes.
   */
  addHost(name, { hostname = name } = {}) {
    if (this.hosts.has(name)) throw new Error(`host ${name} exists`);
    if (this.nextHost > 254) throw new Error("no free host address");
    const index = this.nextHost++;
    const ns = `${this.id}-h${index}`;
    const ip = `${SUBNET}.${index}`;
    const port = `p${index}`;
    sh(["ip", "netns", "add", ns]);
    fs.mkdirSync(`/etc/netns/${ns}`, { recursive: true });
    sh(["ip", "-n", ns, "link", "set", "lo", "up"]);
    sh(["ip", "-n", this.router, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", ns]);
    sh(["ip", "-n", this.router, "link", "set", port, "master", "br0", "up"]);
    sh(["ip", "-n", ns, "addr", "add", `${ip}/24`, "dev", "eth0"]);
    sh(["ip", "-n", ns, "link", "set", "eth0", "up"]);
    sh(["ip", "-n", ns, "route", "add", "default", "via", this.gateway]);
    const host = new Host(this, { name, ns, ip, hostname, port });
    host.setResolvConf();
    host.iptablesRestore(
      "*nat\n:ORCA-SERVICES - [0:0]\n-A OUTPUT -j ORCA-SERVICES\nCOMMIT\n" +
      "*filter\n:ORCA-SERVICES - [0:0]\n:ORCA-PARTITION - [0:0]\n:ORCA-IMPAIR - [0:0]\n" +
      "-A INPUT -j ORCA-PARTITION\n-A OUTPUT -j ORCA-PARTITION\n-A OUTPUT -j ORCA-SERVICES\n-A OUTPUT -j ORCA-IMPAIR\nCOMMIT\n");
    host.setHostsFile([]);
    this.hosts.set(name, host);
    return host;
  }

  /** A virtual address for a Service (routed to the gateway; each host DNATs it itself, as kube-proxy does). */
  allocateServiceIp() {
    if (this.nextService > 254) throw new Error("no free service address");
    return `${SERVICE_SUBNET}.${this.nextService++}`;
  }

  /** Drops every packet between hosts a and b (both directions; a silent partition, not a reset). */
  partition(a, b) {
    a.iptables(["-A", "ORCA-PARTITION", "-s", b.ip, "-j", "DROP"]);
    a.iptables(["-A", "ORCA-PARTITION", "-d", b.ip, "-j", "DROP"]);
    b.iptables(["-A", "ORCA-PARTITION", "-s", a.ip, "-j", "DROP"]);
    b.iptables(["-A", "ORCA-PARTITION", "-d", a.ip, "-j", "DROP"]);
  }

  /** Ends partition(a, b). */
  heal(a, b) {
    for (const [h, other] of [[a, b], [b, a]]) {
      h.iptables(["-D", "ORCA-PARTITION", "-s", other.ip, "-j", "DROP"], { allowFail: true });
      h.iptables(["-D", "ORCA-PARTITION", "-d", other.ip, "-j", "DROP"], { allowFail: true });
    }
  }

  /** Takes a host's link down (its bridge port), or up again. */
  setLink(host, up) {
    sh(["ip", "-n", this.router, "link", "set", host.bridgePort, up ? "up" : "down"]);
  }

  /**
   * Delays and/or drops what `host` sends (optionally only to host `to`): `tc netem` where the kernel
   * has it, else an NFQUEUE delayer (tests/netns/netem_queue). Replaces an earlier impairment.
   */
  impair(host, { delayMs = 0, lossPercent = 0, to = null } = {}) {
    this.clearImpairment(host);
    const impairment = startImpairment(this, host, { delayMs, lossPercent, to });
    this.impairments.set(host.name, impairment);
    return impairment;
  }

  clearImpairment(host) {
    const i = this.impairments.get(host.name);
    if (i) i.stop();
    this.impairments.delete(host.name);
  }

  /** Stops everything and removes every namespace, interface and file of this network. */
  async destroy() {
    this.destroySync();
  }

  destroySync() {
    if (!live.has(this)) return;
    live.delete(this);
    for (const h of this.hosts.values()) h.closeDialer();
    this.node?.closeDialer();
    this.dns?.kill("SIGKILL");
    for (const ns of [...[...this.hosts.values()].map((h) => h.ns), this.router]) removeNamespace(ns);
    fs.rmSync(this.workDir, { recursive: true, force: true });
    if (!live.size) releaseRunDir();
  }

  /** Namespaces and /etc/netns entries of this network still present (empty after destroy()). */
  leftovers() {
    const mine = ourNamespaces().filter((ns) => ns.startsWith(`${this.id}-`));
    const etc = fs.existsSync("/etc/netns") ? fs.readdirSync("/etc/netns").filter((d) => d.startsWith(`${this.id}-`)) : [];
    return [...mine, ...etc.map((d) => `/etc/netns/${d}`)];
  }
}

export class Host {
  constructor(network, { name, ns, ip, hostname, port }) {
    this.network = network;
    this.name = name;
    this.ns = ns;
    this.ip = ip;
    this.hostname = hostname;
    this.bridgePort = port;
    this.dialer = null;
  }

  /** The host's /etc/resolv.conf: the network's DNS server, with `search` domains and `ndots` (as a pod's). */
  setResolvConf({ search = [], ndots = 1 } = {}) {
    const lines = [`nameserver ${this.network.gateway}`];
    if (search.length) lines.push(`search ${search.join(" ")}`);
    lines.push(`options ndots:${ndots} timeout:1 attempts:2`);
    fs.writeFileSync(`/etc/netns/${this.ns}/resolv.conf`, lines.join("\n") + "\n");
  }

  /** Replaces the host's /etc/hosts: localhost, its own name, then `entries` ([ip, name, ...aliases]). */
  setHostsFile(entries) {
    const lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback", `${this.ip}\t${this.hostname}`];
    for (const [ip, ...names] of entries) lines.push(`${ip}\t${names.join(" ")}`);
    // Written in place: `ip netns exec` bind-mounted this very file (inode) over /etc/hosts.
    fs.writeFileSync(`/etc/netns/${this.ns}/hosts`, lines.join("\n") + "\n");
  }

  /** The argv that runs `argv` inside this host (own UTS namespace with its hostname, parent-death signal). */
  wrap(argv, { uid = null, gid = null } = {}) {
    const user = uid === null ? [] : ["--reuid", String(uid), "--regid", String(gid ?? uid), "--clear-groups"];
    return ["ip", "netns", "exec", this.ns, "unshare", "--uts", "--", "/bin/sh", "-c", 'hostname "$0" && exec "$@"',
            this.hostname, "setpriv", "--pdeathsig", "KILL", ...user, "--", ...argv];
  }

  /**
   * Starts `argv` inside the host. Output goes to `log` (appended) or is ignored. Returns the
   * ChildProcess with `exited`, a promise of {code, signal}.
   */
  spawn(argv, { env = {}, uid = null, gid = null, log = null, cwd = this.network.workDir } = {}) {
    const full = this.wrap(argv, { uid, gid });
    env = { PATH: DEFAULT_PATH, ...env };
    const fd = log ? fs.openSync(log, "a") : "ignore";
    const child = spawn(full[0], full.slice(1), { env, cwd, stdio: ["ignore", fd, fd] });
    if (typeof fd === "number") fs.closeSync(fd);
    child.exited = new Promise((resolve) => child.once("exit", (code, signal) => resolve({ code, signal })));
    return child;
  }

  /** Runs `argv` inside the host to completion: {status, stdout, stderr}. */
  run(argv, { input } = {}) {
    const r = spawnSync("ip", ["netns", "exec", this.ns, ...argv], { encoding: "utf8", input });
    return { status: r.status, stdout: r.stdout ?? "", stderr: r.stderr ?? r.error?.message ?? "" };
  }

  iptables(args, { table = "filter", allowFail = false } = {}) {
    return sh(["ip", "netns", "exec", this.ns, "iptables", "-w", "-t", table, ...args], { allowFail });
  }

  /** Applies iptables-restore input without flushing what it does not name. */
  iptablesRestore(input) {
    sh(["ip", "netns", "exec", this.ns, "iptables-restore", "-w", "--noflush"], { input });
  }

  /** TCP sockets of this host as `ss -tan` sees them: {state, local, peer} with "ip:port" strings. */
  sockets() {
    const r = this.run(["ss", "-tanH"]);
    return r.stdout.split("\n").filter(Boolean).map((l) => {
      const [state, , , local, peer] = l.trim().split(/\s+/);
      return { state, local, peer };
    });
  }

  async #startDialer() {
    const sock = path.join(this.network.workDir, `dial-${this.name}.sock`);
    const child = spawn("ip", ["netns", "exec", this.ns, "setpriv", "--pdeathsig", "KILL", "--", process.execPath,
                               path.join(HERE, "forward.mjs"), sock], { stdio: ["ignore", "pipe", "inherit"] });
    await new Promise((resolve, reject) => {
      child.once("exit", (code) => reject(new Error(`dialer of ${this.name} exited (${code})`)));
      child.stdout.once("data", () => resolve());
    });
    child.stdout.resume();
    this.dialer = { child, sock };
  }

  closeDialer() {
    if (this.dialer) this.dialer.child.kill("SIGKILL");
    this.dialer = null;
  }

  /** A TCP connection from this host to address:port (a net.Socket once connected through the dialer). */
  async dial(address, port, { ack = false } = {}) {
    // One dialer per host, however many requests start at once.
    if (!this.dialer) await (this.dialerStarting ??= this.#startDialer().finally(() => (this.dialerStarting = null)));
    const s = net.connect(this.dialer.sock);
    await new Promise((resolve, reject) => {
      s.once("connect", resolve);
      s.once("error", reject);
    });
    s.write(`${address} ${port}${ack ? " ack" : ""}\n`);
    return s;
  }

  /**
   * An HTTP request from this host: {status, headers, body} (body a string), or a thrown error for
   * a refused/reset connection or `timeoutMs`. `onChunk` receives the body as it streams (SSE).
   */
  async request(url, { method = "GET", headers = {}, body = null, timeoutMs = 10000, onChunk = null } = {}) {
    const u = new URL(url);
    const socket = await this.dial(u.hostname, Number(u.port || 80));
    return new Promise((resolve, reject) => {
      const req = http.request({
        method, path: u.pathname + u.search, headers: { host: u.host, ...headers },
        createConnection: () => socket,
      }, (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (d) => {
          text += d;
          if (onChunk) onChunk(d);
        });
        res.on("end", () => resolve({ status: res.statusCode, headers: res.headers, body: text }));
        res.on("error", reject);
      });
      req.setTimeout(timeoutMs, () => req.destroy(new Error(`${method} ${url} from ${this.name}: no answer in ${timeoutMs} ms`)));
      req.on("error", (e) => reject(new Error(`${method} ${url} from ${this.name}: ${e.message}`)));
      if (body !== null) req.write(typeof body === "string" ? body : JSON.stringify(body));
      req.end();
    });
  }

  /** Whether a TCP connect from this host to address:port completes within `timeoutMs` (refused, unreachable: false). */
  async canConnect(address, port, timeoutMs = 2000) {
    const socket = await this.dial(address, port, { ack: true });
    return new Promise((resolve) => {
      const finish = (ok) => {
        clearTimeout(timer);
        socket.destroy();
        resolve(ok);
      };
      const timer = setTimeout(() => finish(false), timeoutMs);
      socket.once("data", (d) => finish(d[0] === 0x2b));
      socket.once("close", () => finish(false));
      socket.once("error", () => finish(false));
    });
  }
}

// ---- link impairment ----------------------------------------------------------------------------

function netemAvailable(host) {
  const r = host.run(["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"]);
  if (r.status !== 0) return false;
  host.run(["tc", "qdisc", "del", "dev", "lo", "root"]);
  return true;
}

function startImpairment(network, host, { delayMs, lossPercent, to }) {
  if (netemAvailable(host)) {
    // netem on eth0 delays/drops everything the host sends; `to` narrows it with a prio band filter.
    const netem = ["netem", ...(delayMs ? ["delay", `${delayMs}ms`] : []), ...(lossPercent ? ["loss", `${lossPercent}%`] : [])];
    if (to) {
      sh(["ip", "netns", "exec", host.ns, "tc", "qdisc", "add", "dev", "eth0", "root", "handle", "1:", "prio"]);
      sh(["ip", "netns", "exec", host.ns, "tc", "qdisc", "add", "dev", "eth0", "parent", "1:3", "handle", "30:", ...netem]);
      sh(["ip", "netns", "exec", host.ns, "tc", "filter", "add", "dev", "eth0", "protocol", "ip", "parent", "1:0", "prio", "3",
          "u32", "match", "ip", "dst", `${to.ip}/32`, "flowid", "1:3"]);
    } else {
      sh(["ip", "netns", "exec", host.ns, "tc", "qdisc", "add", "dev", "eth0", "root", ...netem]);
    }
    return { kind: "netem", stop: () => host.run(["tc", "qdisc", "del", "dev", "eth0", "root"]) };
  }
  const tool = process.env.ORCA_NETEM_QUEUE ?? path.join(process.env.ORCA_BINARY_DIR ?? "", "bin/netem_queue");
  if (!fs.existsSync(tool))
    throw new Error(`this kernel has no netem qdisc and the NFQUEUE delayer is not built (${tool}; set ORCA_NETEM_QUEUE)`);
  const queue = 100 + Number(host.bridgePort.slice(1));
  const log = path.join(network.workDir, `netem-${host.name}.log`);
  const child = host.spawn([tool, "--queue", String(queue), "--delay-ms", String(delayMs), "--loss-percent", String(lossPercent)],
                           { log, env: { PATH: process.env.PATH } });
  const match = ["-o", "eth0", ...(to ? ["-d", to.ip] : [])];
  // Without --queue-bypass: if the delayer dies the link goes dark, which a test notices, rather than healthy.
  const waitReady = () => {
    for (let i = 0; i < 100; i++) {
      if (fs.existsSync(log) && fs.readFileSync(log, "utf8").includes("ready")) return;
      if (child.exitCode !== null) throw new Error(`netem_queue exited: ${fs.readFileSync(log, "utf8")}`);
      spawnSync("sleep", ["0.05"]);
    }
    throw new Error(`netem_queue did not start: ${fs.existsSync(log) ? fs.readFileSync(log, "utf8") : ""}`);
  };
  waitReady();
  host.iptables(["-A", "ORCA-IMPAIR", ...match, "-j", "NFQUEUE", "--queue-num", String(queue)]);
  return {
    kind: "nfqueue",
    stop: () => {
      host.iptables(["-F", "ORCA-IMPAIR"], { allowFail: true });
      child.kill("SIGKILL");
    },
  };
}
