// The network-namespace harness (netns.mjs) does what the layout test and the
// chaos suite rely on: hosts on their own addresses with their own hostnames,
// name resolution (/etc/hosts and the network's DNS), partitions, a link going
// down, an impaired link, and a teardown that leaves nothing behind, even when
// the test process is killed. Exit 77 where namespaces cannot be made.
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { Network, NetnsUnavailable } from "./netns.mjs";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const t0 = Date.now();
const say = (msg) => console.log(`[netns +${((Date.now() - t0) / 1000).toFixed(1)}s] ${msg}`);
let passed = 0, failed = 0;

async function check(name, fn) {
  try {
    await fn();
    passed++;
    say(`ok: ${name}`);
  } catch (e) {
    failed++;
    console.error(`FAILED: ${name}\n${e.stack ?? e.message}`);
  }
}

// An HTTP server inside a host answering "<hostname> <remote address>" on `port`.
function serve(host, port) {
  const code = `require("http").createServer((q, r) => r.end(require("os").hostname() + " " + q.socket.remoteAddress.replace(/^::ffff:/, "")))` +
               `.listen(${port}, () => console.log("listening"))`;
  const log = path.join(host.network.workDir, `${host.name}-http.log`);
  const child = host.spawn([process.execPath, "-e", code], { log });
  return { child, ready: waitFor(() => fs.existsSync(log) && fs.readFileSync(log, "utf8").includes("listening"), 10000, `${host.name}'s server`) };
}

async function waitFor(predicate, timeoutMs, what) {
  const deadline = Date.now() + timeoutMs;
  while (!(await predicate())) {
    if (Date.now() > deadline) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

// Running (a zombie, dead but not yet reaped, does not count).
function alive(pid) {
  try {
    return !/^\S+ \(.*\) Z/.test(fs.readFileSync(`/proc/${pid}/stat`, "utf8"));
  } catch {
    return false;
  }
}

const fails = async (promise) => {
  try {
    await promise;
    return false;
  } catch {
    return true;
  }
};

async function main() {
  let net;
  try {
    net = await Network.create({ name: "selftest" });
  } catch (e) {
    if (e instanceof NetnsUnavailable) {
      console.log(`SKIP: ${e.message}`);
      return 77;
    }
    throw e;
  }
  const a = net.addHost("a", { hostname: "alpha-0" }), b = net.addHost("b", { hostname: "beta-1" });
  const entries = [[a.ip, "alpha.test.svc.cluster.local"], [b.ip, "beta.test.svc.cluster.local"]];
  for (const h of [a, b]) h.setHostsFile(entries);
  net.setDnsRecords(entries);
  const server = serve(b, 8080);
  await server.ready;

  await check("hosts have their own addresses, hostnames and a route only among themselves", async () => {
    assert.notEqual(a.ip, b.ip);
    const r = await a.request(`http://${b.ip}:8080/`);
    assert.equal(r.body, `beta-1 ${a.ip}`, "b sees a's own address; gethostname() is the host's name");
    assert.equal(a.run(["ip", "-o", "-4", "addr", "show", "dev", "eth0"]).stdout.includes(`${a.ip}/24`), true);
    assert.equal(spawnSync("ip", ["-o", "addr"]).stdout.toString().includes(a.ip), false, "the machine's own namespace has no harness address");
  });

  await check("names resolve through /etc/hosts and the network's DNS (NXDOMAIN for unknown names, at once)", async () => {
    assert.match(a.run(["getent", "hosts", "beta.test.svc.cluster.local"]).stdout, new RegExp(`^${b.ip.replace(/\./g, "\\.")}\\s`));
    const r = await a.request("http://beta.test.svc.cluster.local:8080/");
    assert.match(r.body, /^beta-1 /);
    // DNS itself (what c-ares asks for AAAA): a known name has no AAAA, an unknown one does not exist.
    // Each lookup is timed inside the host: a resolver timeout (1 s here) would show.
    const lookup = (name, type) => JSON.parse(a.run([process.execPath, "-e",
      `const t = Date.now(); require("dns").promises.resolve(${JSON.stringify(name)}, ${JSON.stringify(type)})` +
      `.then(r => JSON.stringify(r), e => e.code).then(r => console.log(JSON.stringify({ r, ms: Date.now() - t })))`]).stdout);
    const answers = [lookup("beta.test.svc.cluster.local", "A"), lookup("beta.test.svc.cluster.local", "AAAA"),
                     lookup("nothing.test.svc.cluster.local", "A")];
    assert.deepEqual(answers.map((x) => x.r), [JSON.stringify([b.ip]), "ENODATA", "ENOTFOUND"]);
    for (const x of answers) assert.ok(x.ms < 900, `a DNS answer took ${x.ms} ms (a resolver timeout?)`);
  });

  await check("a partition drops traffic both ways until healed", async () => {
    net.partition(a, b);
    assert.equal(await fails(a.request(`http://${b.ip}:8080/`, { timeoutMs: 1500 })), true, "a cannot reach b");
    assert.equal(await a.canConnect(b.ip, 8080, 1000), false);
    net.heal(a, b);
    assert.match((await a.request(`http://${b.ip}:8080/`)).body, /^beta-1 /);
  });

  await check("a link taken down isolates its host until it is up again", async () => {
    net.setLink(b, false);
    assert.equal(await fails(a.request(`http://${b.ip}:8080/`, { timeoutMs: 1500 })), true);
    net.setLink(b, true);
    await waitFor(async () => !(await fails(a.request(`http://${b.ip}:8080/`, { timeoutMs: 1000 }))), 10000, "b reachable again");
  });

  await check("an impaired link delays what the host sends (and a 100% loss drops it)", async () => {
    const rtt = async () => {
      const s = Date.now();
      await a.request(`http://${b.ip}:8080/`, { timeoutMs: 10000 });
      return Date.now() - s;
    };
    await rtt();
    const impairment = net.impair(b, { delayMs: 300 });
    say(`impairment: ${impairment.kind}`);
    // b's replies (the SYN-ACK and the response) each wait 300 ms: a lower bound, whatever the load.
    const slow = await rtt();
    assert.ok(slow >= 600, `a request through a 300 ms link took ${slow} ms`);
    net.impair(b, { lossPercent: 100 });
    assert.equal(await fails(a.request(`http://${b.ip}:8080/`, { timeoutMs: 1500 })), true, "everything b sends is lost");
    net.clearImpairment(b);
    assert.match((await a.request(`http://${b.ip}:8080/`)).body, /^beta-1 /);
  });

  await check("destroy() stops every process and leaves no namespace, interface or file", async () => {
    const pid = server.child.pid;
    const workDir = net.workDir;
    await net.destroy();
    assert.deepEqual(net.leftovers(), []);
    assert.equal(fs.existsSync(workDir), false);
    await waitFor(() => server.child.exitCode !== null || server.child.signalCode !== null, 5000, "the server to exit");
    assert.equal(alive(pid), false, "the server process is gone");
  });

  await check("a killed test run leaves nothing for long: its processes die with it and the next run sweeps its namespaces", async () => {
    const script = `
      import { Network } from ${JSON.stringify(path.join(HERE, "netns.mjs"))};
      const net = await Network.create({ name: "killed" });
      const h = net.addHost("h");
      const p = h.spawn(["sleep", "300"]);
      // Once it runs sleep (the wrappers before it set the parent-death signal; see README.md).
      const fs = await import("node:fs");
      while (!fs.readFileSync("/proc/" + p.pid + "/comm", "utf8").startsWith("sleep")) await new Promise((r) => setTimeout(r, 20));
      console.log(JSON.stringify({ id: net.id, pid: p.pid }));
      setInterval(() => {}, 1000);`;
    const child = spawn(process.execPath, ["--input-type=module", "-e", script], { stdio: ["ignore", "pipe", "inherit"] });
    const info = await new Promise((resolve) => child.stdout.once("data", (d) => resolve(JSON.parse(d.toString()))));
    child.kill("SIGKILL");
    await new Promise((r) => child.once("exit", r));
    await waitFor(() => !alive(info.pid), 5000, "the orphaned sleep to die (parent-death signal)");
    const stale = () => (spawnSync("ip", ["netns", "list"]).stdout.toString().match(new RegExp(`${info.id}-\\S+`, "g")) ?? []);
    assert.ok(stale().length > 0, "the killed run's namespaces are still there before a new run");
    const next = await Network.create({ name: "sweeper" });
    assert.deepEqual(stale(), [], "a new Network removes namespaces of dead owners");
    await next.destroy();
  });

  console.log(`${passed} passed, ${failed} failed`);
  return failed ? 1 : 0;
}

main().then((code) => process.exit(code), (e) => {
  console.error(e.stack ?? e.message);
  process.exit(1);
});
