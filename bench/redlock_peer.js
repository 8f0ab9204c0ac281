// redlock_peer.js: node-redlock (redlock 5, on ioredis) acquire+release over N independent
// masters, sequential pairs on one key for S seconds: the peer row for BENCHMARKS.md's Redlock
// table, run by bench/run_redlock.sh next to dlock's own Redlock in the same session.
//
//   node bench/redlock_peer.js PORT[,PORT...] SECONDS
// Modules come from $PEERS_NODE_DIR (default /tmp/peers/node), installed by the peer harness
// (../shared/bench/peers/run_all.sh: npm ci of its pinned package.json). Prints one JSON line.
'use strict';
const path = require('path');
const dir = process.env.PEERS_NODE_DIR || '/tmp/peers/node';
const req = (m) => require(path.join(dir, 'node_modules', m));
const Redis = req('ioredis');
const RedlockModule = req('redlock');
const Redlock = RedlockModule.default || RedlockModule;

async function main() {
  const ports = process.argv[2].split(',').map(Number);
  const seconds = Number(process.argv[3] || 3);
  const conns = ports.map((p) => new Redis({ port: p, host: '127.0.0.1', enableAutoPipelining: false }));
  await Promise.all(conns.map((c) => c.ping()));
  const rl = new Redlock(conns, { retryCount: 0, driftFactor: 0.01 });
  rl.on('error', () => {});
  const lat = [];
  const end = process.hrtime.bigint() + BigInt(Math.round(seconds * 1e9));
  let failed = 0;
  while (process.hrtime.bigint() < end) {
    const a = process.hrtime.bigint();
    try {
      const lock = await rl.acquire(['redlock-bench'], 30000);
      await lock.release();
      lat.push(Number(process.hrtime.bigint() - a) / 1000);
    } catch (e) {
      ++failed;
    }
  }
  lat.sort((x, y) => x - y);
  const q = (f) => (lat.length ? lat[Math.min(lat.length - 1, Math.floor(f * lat.length))] : 0);
  const label = `redlock ${require(path.join(dir, 'node_modules', 'redlock', 'package.json')).version}`;
  console.log(JSON.stringify({ lib: label, masters: ports.length, pairs: lat.length, failed,
    pairs_per_s: lat.length / seconds, pair_p50_us: q(0.5), pair_p99_us: q(0.99) }));
  await Promise.all(conns.map((c) => c.quit()));
}
main().catch((e) => { console.error(e); process.exit(1); });
