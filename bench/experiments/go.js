// The core in Go (go/), measured beside Node in one run:
//
// 1. Per call: a check of a bearer header through wazero (go/core's Verifier, `go test
//    -bench`) against Node's `Core.authorize` (the gateway's call), on the same core, for
//    a repeated token (the core's tag cache answers) and for 4,096 tokens in turn (more
//    than the cache holds: the HMAC computed). Both on CPU 0.
// 2. The example Go node (go/cmd/api-auth-node) in a fleet with one gateway on etcd:
//    requests/s of `POST /ext/bc/C/rpc` with a token, through the gate middleware, and the
//    same node started with --unguarded (no middleware, no token). The node on CPU 0,
//    wrk on CPU 1, one at a time.
//
//   npm run build && node bench/experiments/go.js [--duration 5s]
//
// Prints a markdown report; nothing is written. Needs go, etcd and wrk.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { measure } from 'mitata';
import { MAIN, ROOT, ns, table, wireCopies } from '../lib/common.js';
import { loadCore } from '../lib/core.js';
import { freePort, startOnPort, startServer } from '../lib/proc.js';
import { runWrk } from '../lib/wrk.js';

const PATH = '/ext/health';
const RPC = '/ext/bc/C/rpc';
const MODULE = join(ROOT, 'go');
const args = process.argv.slice(2);
if (args.length !== 0 && !(args.length === 2 && args[0] === '--duration' && /^\d+s$/.test(args[1]))) {
  console.error(JSON.stringify({ level: 'error', msg: 'usage: node bench/experiments/go.js [--duration Ns]' }));
  process.exit(2);
}
const DURATION_S = args.length === 2 ? Number(args[1].slice(0, -1)) : 5;

function pinSelf(cpu) {
  execFileSync('taskset', ['-p', '-c', String(cpu), String(process.pid)], { stdio: 'ignore' });
}

async function nodePerCall() {
  const { newCore, Outcome } = await loadCore();
  const core = newCore();
  core.setKey(new TextEncoder().encode('0123456789abcdef0123456789abcdef'));
  const grant = core.addGrant([PATH]);
  const now = 1_800_000_000;
  const headers = Array.from({ length: 4096 }, () => `Bearer ${core.issue(grant, now, 43200).token}`);
  const repeated = wireCopies(headers[0], 1024);
  const paths = wireCopies(PATH, 1024);
  let i = 0;
  const check = (h) => {
    if (core.authorize(h, paths[i & 1023], now + 1) !== Outcome.Valid) throw new Error('not Valid');
  };
  const one = await measure(() => check(repeated[i++ & 1023]));
  const turn = await measure(() => check(headers[i++ & 4095]));
  return { repeated: one.avg, inTurn: turn.avg };
}

function goPerCall() {
  const out = execFileSync('go', ['test', '-run', '^$', '-bench', 'Authorize', '-benchtime', '2s', './core/'], {
    cwd: MODULE,
    encoding: 'utf8',
  });
  const figure = (name) => Number(new RegExp(`^Benchmark${name}-?\\d*\\s+\\d+\\s+([\\d.]+) ns/op`, 'm').exec(out)?.[1]);
  return {
    repeated: figure('AuthorizeRepeated'),
    inTurn: figure('AuthorizeInTurn'),
    repeatedInterpreter: figure('AuthorizeRepeatedInterpreter'),
    inTurnInterpreter: figure('AuthorizeInTurnInterpreter'),
  };
}

async function throughput() {
  const dir = mkdtempSync(join(tmpdir(), 'api-auth-bench-go-'));
  const stops = [];
  try {
    execFileSync('go', ['build', '-o', join(dir, 'api-auth-node'), './cmd/api-auth-node'], { cwd: MODULE });
    const client = await freePort();
    const peer = await freePort();
    const url = `http://127.0.0.1:${client}`;
    const etcd = await startOnPort(
      'etcd',
      'etcd',
      [
        '--name',
        'bench',
        '--data-dir',
        join(dir, 'etcd'),
        '--listen-client-urls',
        url,
        '--advertise-client-urls',
        url,
        '--listen-peer-urls',
        `http://127.0.0.1:${peer}`,
        '--initial-advertise-peer-urls',
        `http://127.0.0.1:${peer}`,
        '--initial-cluster',
        `bench=http://127.0.0.1:${peer}`,
        '--logger',
        'zap',
        '--log-level',
        'error',
      ],
      client,
      { cpus: 1 },
    );
    stops.push(etcd);
    const password = 'bench-' + Math.random().toString(36).slice(2);
    writeFileSync(join(dir, 'password'), password, { mode: 0o600 });
    const gateway = await startServer(
      'api-auth',
      process.execPath,
      [
        MAIN,
        '--http-port',
        '0',
        '--data-dir',
        dir,
        '--api-auth-required',
        '--api-auth-password-file',
        join(dir, 'password'),
        '--cluster-etcd',
        url,
      ],
      { cpus: 1, timeoutMs: 60_000 },
    );
    stops.push(gateway);
    const answer = await fetch(`http://127.0.0.1:${gateway.port}/ext/auth`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', method: 'auth.newToken', params: { password, endpoints: [RPC] }, id: 1 }),
    });
    const { token } = (await answer.json()).result;
    const body = JSON.stringify({ jsonrpc: '2.0', method: 'eth_blockNumber', params: [], id: 1 });
    const results = {};
    for (const [name, extra] of [
      ['guarded', []],
      ['unguarded', ['--unguarded']],
    ]) {
      const node = await startServer(
        `api-auth-node ${name}`,
        join(dir, 'api-auth-node'),
        ['--cluster-etcd', url, '--http-port', '0', '--rpc-path', RPC, ...extra],
        { cpus: 0, timeoutMs: 60_000 },
      );
      const target = {
        url: `http://127.0.0.1:${node.port}${RPC}`,
        method: 'POST',
        body,
        contentType: 'application/json',
        cpus: 1,
        connections: 64,
      };
      const check = await fetch(target.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      if ((check.status === 200) !== (name === 'unguarded')) throw new Error(`${name}: no token gave ${check.status}`);
      const withToken = { ...target, authorization: `Bearer ${token}` };
      await runWrk({ ...withToken, durationS: 1 });
      results[name] = await runWrk({ ...withToken, durationS: DURATION_S });
      if (results[name].errorCount !== 0) throw new Error(`${name}: ${JSON.stringify(results[name].errors)}`);
      await node.stop();
    }
    return results;
  } finally {
    for (const s of stops.reverse()) await s.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}

pinSelf(0);
const node = await nodePerCall();
const go = goPerCall();
console.log('## Per call, one check of `Authorization: Bearer <token>` for a path (CPU 0)\n');
console.log(
  table(
    ['', 'Node: Core.authorize', 'Go: Verifier.Authorize (wazero compiler)', 'Go (wazero interpreter)'],
    [
      ['a repeated token (tag cache)', ns(node.repeated), ns(go.repeated), ns(go.repeatedInterpreter)],
      ['4,096 tokens in turn (HMAC computed)', ns(node.inTurn), ns(go.inTurn), ns(go.inTurnInterpreter)],
    ],
  ),
);
pinSelf('0,1');
const rps = await throughput();
console.log(`\n## The example Go node, POST ${RPC} with a token, 64 connections, ${DURATION_S} s (node on CPU 0, wrk on CPU 1)\n`);
console.log(
  table(
    ['', 'req/s', 'p50', 'p99'],
    ['guarded', 'unguarded'].map((k) => [
      k === 'guarded' ? 'with the gate (token checked in-process)' : 'without (--unguarded)',
      Math.round(rps[k].rps).toLocaleString('en-US'),
      `${rps[k].p50Ms.toFixed(2)} ms`,
      `${rps[k].p99Ms.toFixed(2)} ms`,
    ]),
  ),
);
console.log(
  `\nPer request, the guarded node takes ${(1e6 / rps.guarded.rps - 1e6 / rps.unguarded.rps).toFixed(1)} µs more of CPU 0. ` +
    `Load average at the end: ${loadavg()
      .map((l) => l.toFixed(1))
      .join(', ')} (other work on the machine disturbs every figure).`,
);
