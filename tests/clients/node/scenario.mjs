// node-redis and ioredis, unmodified, against xstream in takeover mode.
//
// Starts two redis-servers on free ports: one with the module (`takeover yes`, so XADD & co. are
// the module's) and one plain (the built-in streams, the oracle). The same job-queue scenario runs
// with each client (node-redis in RESP2 and RESP3, ioredis in RESP2) against both servers, through
// the clients' own APIs and reply parsers. The results are compared with the values written out
// below: passing on the built-in proves the expectation, passing on the module proves the module.
//
// Scenario: a producer adds 10 jobs; consumer A reads 4 and acknowledges 2, then its connection is
// killed (CLIENT KILL) mid-work; consumer B reads the rest and acknowledges them; XPENDING shows
// A's 2 entries, B takes them over with XAUTOCLAIM (one of them was deleted meanwhile); XINFO
// STREAM / GROUPS / CONSUMERS parsed by the client; a blocked XREADGROUP and a blocked XREAD are
// woken by a write.
//
// Module: env XSTREAM_MODULE, else ../../../target/dist/libxstream.so. Server: env
// XSTREAM_REDIS_SERVER, else redis-server. Run: `npm test` (make test does it).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname, resolve } from 'node:path';
import { createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import assert from 'node:assert/strict';
import { createClient } from 'redis';
import Redis from 'ioredis';

const here = dirname(fileURLToPath(import.meta.url));
const MODULE = process.env.XSTREAM_MODULE || resolve(here, '../../../target/dist/libxstream.so');
const SERVER = process.env.XSTREAM_REDIS_SERVER || 'redis-server';

function freePort() {
  return new Promise((res, rej) => {
    const s = createServer();
    s.listen(0, '127.0.0.1', () => {
      const p = s.address().port;
      s.close(() => (p === 6379 ? freePort().then(res, rej) : res(p)));
    });
  });
}

async function startServer(withModule) {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'xstream-node-'));
  const args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir,
    '--logfile', join(dir, 'redis.log')];
  if (withModule) args.push('--loadmodule', MODULE, 'takeover', 'yes');
  const child = spawn(SERVER, args, { stdio: 'ignore' });
  for (let i = 0; i < 200; i++) {
    const c = new Redis({ port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    c.on('error', () => {});
    try {
      await c.connect();
      await c.ping();
      c.disconnect();
      return { port, child, dir };
    } catch {
      c.disconnect();
      await new Promise((r) => setTimeout(r, 50));
    }
  }
  throw new Error(`redis-server on ${port} did not start (log in ${dir})`);
}

// The directory goes once the server has exited: a server still shutting down may write into it
// (Valkey 9.1.2 did, and the removal failed with ENOTEMPTY).
async function stopServer(s) {
  if (s.child.exitCode === null && s.child.signalCode === null) {
    const exited = new Promise((r) => s.child.once('exit', r));
    s.child.kill('SIGTERM');
    await exited;
  }
  rmSync(s.dir, { recursive: true, force: true });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// ---- node-redis ------------------------------------------------------------------------------

async function nodeRedis(port, RESP) {
  const opts = { socket: { port, host: '127.0.0.1' }, RESP };
  // A killed connection must not end the process: errors are the scenario's to see.
  const connect = () => createClient(opts).on('error', () => {}).connect();
  const producer = await connect();
  const a = await connect();
  const b = await connect();
  const out = {};
  await producer.flushAll();
  for (let i = 1; i <= 10; i++) await producer.xAdd('jobs', `${i}-0`, { n: String(i), kind: i % 2 ? 'odd' : 'even' });
  out.create = await producer.xGroupCreate('jobs', 'workers', '0');
  out.readA = await a.xReadGroup('workers', 'A', { key: 'jobs', id: '>' }, { COUNT: 4 });
  out.ackA = await a.xAck('jobs', 'workers', ['1-0', '2-0']);
  // A is killed mid-work: 3-0 and 4-0 stay pending for it.
  const aid = await a.clientId();
  await producer.sendCommand(['CLIENT', 'KILL', 'ID', String(aid)]);
  a.destroy();
  const readB = await b.xReadGroup('workers', 'B', { key: 'jobs', id: '>' }, { COUNT: 100 });
  out.readB = readB[0].messages.map((m) => m.id);
  out.ackB = await b.xAck('jobs', 'workers', out.readB);
  out.pending = await producer.xPending('jobs', 'workers');
  out.del = await producer.xDel('jobs', '4-0');
  out.autoclaim = await b.xAutoClaim('jobs', 'workers', 'B', 0, '0-0', { COUNT: 10 });
  const info = await producer.xInfoStream('jobs');
  out.stream = {
    length: info.length, 'last-generated-id': info['last-generated-id'], 'entries-added': info['entries-added'],
    'max-deleted-entry-id': info['max-deleted-entry-id'], groups: info.groups,
    'first-entry': info['first-entry'], 'last-entry': info['last-entry'],
  };
  out.groups = await producer.xInfoGroups('jobs');
  out.consumers = (await producer.xInfoConsumers('jobs', 'workers')).map((c) => ({ name: c.name, pending: c.pending }));
  out.ackClaimed = await b.xAck('jobs', 'workers', '3-0');
  // Blocking reads woken by a write.
  const blockedGroup = b.xReadGroup('workers', 'B', { key: 'jobs', id: '>' }, { BLOCK: 5000 });
  const c = await connect();
  const blockedRead = c.xRead({ key: 'jobs', id: '$' }, { BLOCK: 5000 });
  await sleep(200);
  out.wakeId = await producer.xAdd('jobs', '11-0', { n: '11', kind: 'odd' });
  out.blockedGroup = await blockedGroup;
  out.blockedRead = await blockedRead;
  out.timeout = await c.xRead({ key: 'jobs', id: '$' }, { BLOCK: 100 });
  out.type = await producer.type('jobs');
  for (const x of [producer, b, c]) x.destroy();
  return JSON.parse(JSON.stringify(out, (k, v) => (v instanceof Map ? Object.fromEntries(v) : v)));
}

// ---- ioredis -----------------------------------------------------------------------------------

async function ioredis(port) {
  const opts = { port, host: '127.0.0.1', maxRetriesPerRequest: 1, retryStrategy: () => null };
  const connect = () => new Redis(opts).on('error', () => {});
  const producer = connect();
  const a = connect();
  const b = connect();
  const out = {};
  await producer.flushall();
  for (let i = 1; i <= 10; i++) await producer.xadd('jobs', `${i}-0`, 'n', String(i), 'kind', i % 2 ? 'odd' : 'even');
  out.create = await producer.xgroup('CREATE', 'jobs', 'workers', '0');
  out.readA = await a.xreadgroup('GROUP', 'workers', 'A', 'COUNT', 4, 'STREAMS', 'jobs', '>');
  out.ackA = await a.xack('jobs', 'workers', '1-0', '2-0');
  const aid = await a.client('ID');
  await producer.client('KILL', 'ID', aid);
  a.disconnect();
  const readB = await b.xreadgroup('GROUP', 'workers', 'B', 'COUNT', 100, 'STREAMS', 'jobs', '>');
  out.readB = readB[0][1].map(([id]) => id);
  out.ackB = await b.xack('jobs', 'workers', ...out.readB);
  out.pending = await producer.xpending('jobs', 'workers');
  out.del = await producer.xdel('jobs', '4-0');
  out.autoclaim = await b.xautoclaim('jobs', 'workers', 'B', 0, '0-0', 'COUNT', 10);
  out.stream = await producer.xinfo('STREAM', 'jobs');
  out.groups = await producer.xinfo('GROUPS', 'jobs');
  const cons = await producer.xinfo('CONSUMERS', 'jobs', 'workers');
  out.consumers = cons.map((c) => [c[0], c[1], c[2], c[3]]);
  out.ackClaimed = await b.xack('jobs', 'workers', '3-0');
  const c = connect();
  const blockedGroup = b.xreadgroup('GROUP', 'workers', 'B', 'BLOCK', 5000, 'STREAMS', 'jobs', '>');
  const blockedRead = c.xread('BLOCK', 5000, 'STREAMS', 'jobs', '$');
  await sleep(200);
  out.wakeId = await producer.xadd('jobs', '11-0', 'n', '11', 'kind', 'odd');
  out.blockedGroup = await blockedGroup;
  out.blockedRead = await blockedRead;
  out.timeout = await c.xread('BLOCK', 100, 'STREAMS', 'jobs', '$');
  out.type = await producer.type('jobs');
  for (const x of [producer, b, c]) x.disconnect();
  return out;
}

// ---- expected values -------------------------------------------------------------------------

import { EXPECTED } from './expected.mjs';

const runs = [
  ['node-redis RESP2', (p) => nodeRedis(p, 2)],
  ['node-redis RESP3', (p) => nodeRedis(p, 3)],
  ['ioredis RESP2', (p) => ioredis(p)],
];

let failed = 0;
const dump = process.argv.includes('--dump');
for (const [kind, withModule] of [['built-in', false], ['xstream takeover', true]]) {
  if (withModule && !existsSync(MODULE)) throw new Error(`module not found: ${MODULE} (make build)`);
  const server = await startServer(withModule);
  try {
    for (const [name, run] of runs) {
      const got = await run(server.port);
      if (dump) console.log(`// ${name} on ${kind}\n` + JSON.stringify(got, null, 1));
      try {
        assert.deepStrictEqual(got, EXPECTED[name]);
        console.log(`ok   ${name} on ${kind}`);
      } catch (e) {
        failed++;
        console.log(`FAIL ${name} on ${kind}\n${e.message}`);
      }
    }
  } finally {
    await stopServer(server);
  }
}
if (failed) {
  console.log(`${failed} client run(s) failed`);
  process.exit(1);
}
console.log('all client runs passed');
