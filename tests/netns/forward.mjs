// A dialer that runs inside one host of a tests/netns Network (`ip netns exec`)
// so that a test process in the root namespace can open TCP connections FROM
// that host: it listens on a Unix socket (a file, reachable from any network
// namespace); every connection starts with one line "ADDRESS PORT\n", after
// which the bytes go both ways to ADDRESS:PORT as seen from the host. A failed
// upstream connect closes the client connection at once; with "ADDRESS PORT
// ack\n" a successful one is announced by one byte "+" first.
//
//   node forward.mjs /path/to/socket
import fs from "node:fs";
import net from "node:net";

const socketPath = process.argv[2];
if (!socketPath) {
  process.stderr.write("usage: forward.mjs SOCKET_PATH\n");
  process.exit(2);
}
fs.rmSync(socketPath, { force: true });

const server = net.createServer((client) => {
  let head = Buffer.alloc(0);
  const onData = (chunk) => {
    head = Buffer.concat([head, chunk]);
    const nl = head.indexOf(0x0a);
    if (nl < 0) {
      if (head.length > 300) client.destroy();
      return;
    }
    client.off("data", onData);
    client.pause();
    const [address, port, ack] = head.subarray(0, nl).toString().trim().split(/\s+/);
    const rest = head.subarray(nl + 1);
    const upstream = net.connect({ host: address, port: Number(port) });
    upstream.setNoDelay(true);
    upstream.once("connect", () => {
      if (ack === "ack") client.write("+");
      if (rest.length) upstream.write(rest);
      client.pipe(upstream);
      upstream.pipe(client);
      client.resume();
    });
    upstream.on("error", () => client.destroy());
    client.on("error", () => upstream.destroy());
    client.on("close", () => upstream.destroy());
    upstream.on("close", () => client.destroy());
  };
  client.on("data", onData);
  client.on("error", () => {});
});
server.listen(socketPath, () => process.stdout.write("ready\n"));
