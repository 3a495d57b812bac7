// The DNS server of a tests/netns Network (it runs in the router namespace, on
// the gateway address, as a cluster's DNS service would): it answers A
// queries from a records file the harness rewrites (JSON {name: [ipv4, ...]}),
// answers every other type of a known name with no data, and unknown names
// with NXDOMAIN, at once. Resolvers that ask DNS for AAAA even when
// /etc/hosts has the A record (gRPC's c-ares) then get the answer a cluster's
// DNS gives instead of waiting on a server that is not there.
//
//   node dns.mjs ADDRESS RECORDS_JSON
import dgram from "node:dgram";
import fs from "node:fs";

const [address, recordsFile] = process.argv.slice(2);
if (!address || !recordsFile) {
  process.stderr.write("usage: dns.mjs ADDRESS RECORDS_JSON\n");
  process.exit(2);
}

let cache = { mtimeMs: -1, records: {} };
function records() {
  try {
    const st = fs.statSync(recordsFile);
    if (st.mtimeMs !== cache.mtimeMs) cache = { mtimeMs: st.mtimeMs, records: JSON.parse(fs.readFileSync(recordsFile, "utf8")) };
  } catch {
    // Mid-rewrite or not yet written: keep the last good table.
  }
  return cache.records;
}

// Reads the question's name starting at `offset`; returns [name, offset after it].
function readName(buf, offset) {
  const labels = [];
  while (offset < buf.length) {
    const len = buf[offset];
    if (len === 0) return [labels.join(".").toLowerCase(), offset + 1];
    if (len & 0xc0) throw new Error("compressed name in a question");
    labels.push(buf.subarray(offset + 1, offset + 1 + len).toString("latin1"));
    offset += 1 + len;
  }
  throw new Error("truncated name");
}

function answer(query) {
  const id = query.readUInt16BE(0), flags = query.readUInt16BE(2), qdcount = query.readUInt16BE(4);
  if (qdcount !== 1 || flags & 0x8000) return null;
  const [name, end] = readName(query, 12);
  const qtype = query.readUInt16BE(end), qclass = query.readUInt16BE(end + 2);
  const question = query.subarray(12, end + 4);
  const table = records();
  const known = Object.hasOwn(table, name);
  const ips = known && qtype === 1 && qclass === 1 ? table[name] : [];
  const header = Buffer.alloc(12);
  header.writeUInt16BE(id, 0);
  // QR, opcode copied, AA, RD copied, RA; rcode 3 (NXDOMAIN) for unknown names.
  header.writeUInt16BE(0x8000 | (flags & 0x7800) | 0x0400 | (flags & 0x0100) | 0x0080 | (known ? 0 : 3), 2);
  header.writeUInt16BE(1, 4);
  header.writeUInt16BE(ips.length, 6);
  const answers = ips.map((ip) => {
    const rr = Buffer.alloc(16);
    rr.writeUInt16BE(0xc00c, 0);  // pointer to the question's name
    rr.writeUInt16BE(1, 2);
    rr.writeUInt16BE(1, 4);
    rr.writeUInt32BE(5, 6);  // TTL: short, records change as pods become Ready
    rr.writeUInt16BE(4, 10);
    ip.split(".").forEach((o, i) => rr.writeUInt8(Number(o), 12 + i));
    return rr;
  });
  return Buffer.concat([header, question, ...answers]);
}

const socket = dgram.createSocket("udp4");
socket.on("message", (msg, rinfo) => {
  let reply = null;
  try {
    reply = answer(msg);
  } catch {
    return;
  }
  if (reply) socket.send(reply, rinfo.port, rinfo.address);
});
socket.bind(53, address, () => process.stdout.write("ready\n"));
