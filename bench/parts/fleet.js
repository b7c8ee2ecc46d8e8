#!/usr/bin/env node
// The fleet (--cluster-etcd), after `npm run build`: `node bench/parts/fleet.js [--revokes N]
// [--duration 8s] [--allow-dirty]`, or the `fleet` part of bench/run.js (its --duration
// and --warmup, 300 revokes); never part of `npm test`. Two figures, each side by side
// with the same thing without etcd:
//
//   revoke latency   auth.revokeToken through one of 3 gateways of a fleet on one etcd,
//                    the call timed from send to answer (argon2id's password check, the
//                    etcd write and the barrier: every gateway holds the revocation when
//                    it returns), p50 and p99 over --revokes calls, spread over the three;
//                    beside it the same call on a lone api-auth (data folder, fsync)
//   verify throughput  wrk against POST /ext/info with a valid token on one gateway of one
//                    HTTP thread: a lone api-auth, then a fleet member (etcd running)
//
// Placement as the other parts (lib/proc.js placement(1)): the measured gateway on CPU 0,
// wrk, etcd and the other gateways on the rest. Markdown on stdout, figures in
// bench/results/results-fleet.json (results-fleet.dirty.json from uncommitted changes) when
// run alone, in run.js's results file as a part.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { pathToFileURL } from 'node:url';
import { ROOT, gitState, int, log, machineFacts, ms, pct, ratio, table, usec } from '../lib/common.js';
import { authCall, newToken, startOurs } from '../lib/api-auth.js';
import { ensureCommands } from '../lib/apt.js';
import { load } from '../lib/measure.js';
import { freePort, pinned, placement, track } from '../lib/proc.js';
import { CONTENT_TYPE, INFO_PATH, INFO_REQUEST } from '../servers/body.js';

/** etcd on free loopback ports, in a temporary folder, pinned to `cpus`; resolves once it serves clients. */
async function startEtcd(cpus) {
  const dir = mkdtempSync(join(tmpdir(), 'api-auth-bench-etcd-'));
  const client = `http://127.0.0.1:${await freePort()}`;
  const peer = `http://127.0.0.1:${await freePort()}`;
  const [cmd, argv] = pinned(cpus, 'etcd', [
    '--name',
    'bench',
    '--data-dir',
    join(dir, 'data'),
    '--listen-client-urls',
    client,
    '--advertise-client-urls',
    client,
    '--listen-peer-urls',
    peer,
    '--initial-advertise-peer-urls',
    peer,
    '--initial-cluster',
    `bench=${peer}`,
    '--logger',
    'zap',
    '--log-level',
    'info',
  ]);
  const child = track(spawn(cmd, argv, { stdio: ['ignore', 'ignore', 'pipe'] }));
  await new Promise((resolve, reject) => {
    let text = '';
    const ready = (chunk) => {
      text += chunk;
      if (text.includes('serving client traffic')) {
        child.stderr.off('data', ready);
        child.stderr.resume();
        resolve();
      }
    };
    child.stderr.on('data', ready);
    child.once('exit', (code) => reject(new Error(`etcd exited (${code}) before serving:\n${text.slice(-2000)}`)));
  });
  return {
    url: client,
    stop: async () => {
      child.kill('SIGTERM');
      await new Promise((r) => (child.exitCode !== null ? r() : child.once('exit', r)));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * Gateways of one fleet, one HTTP thread each, on `cpusEach`. The first seeds the fleet
 * from its password file; the others use the fleet's password (theirs differ: a warning).
 */
async function startFleet(etcd, cpusEach) {
  const gateways = [];
  for (const cpus of cpusEach) gateways.push(await startOurs({ cpus, threads: 1, extraArgs: ['--cluster-etcd', etcd.url] }));
  return {
    password: gateways[0].password,
    gateways,
    cleanup: async () => {
      for (const g of gateways) await g.cleanup();
    },
  };
}

const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];

/** Times REVOKES revocations: a token issued on gateway i, revoked on i+1, refused (checked, untimed) on every gateway. */
async function revokeLatency(gateways, password, revokes) {
  const times = [];
  for (let i = 0; i < revokes; i++) {
    const issuer = gateways[i % gateways.length].server.port;
    const revoker = gateways[(i + 1) % gateways.length].server.port;
    const token = await newToken(issuer, password, [INFO_PATH]);
    const started = process.hrtime.bigint();
    const { body } = await authCall(revoker, 'auth.revokeToken', { password, token });
    times.push(Number(process.hrtime.bigint() - started) / 1e6);
    if (body.result?.revocation !== 'revoked') throw new Error(`revoke ${i}: ${JSON.stringify(body)}`);
    for (const g of gateways) {
      const res = await fetch(`http://127.0.0.1:${g.server.port}${INFO_PATH}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': CONTENT_TYPE },
        body: INFO_REQUEST,
      });
      await res.arrayBuffer();
      if (res.status !== 401)
        throw new Error(`revoke ${i}: gateway on port ${g.server.port} answered ${res.status} after the revoke returned`);
    }
  }
  times.sort((a, b) => a - b);
  return { count: times.length, p50Ms: percentile(times, 0.5), p99Ms: percentile(times, 0.99), maxMs: times.at(-1) };
}

async function throughput(server, token, where, o) {
  const shape = {
    url: `http://127.0.0.1:${server.port}${INFO_PATH}`,
    method: 'POST',
    body: INFO_REQUEST,
    contentType: CONTENT_TYPE,
    authorization: `Bearer ${token}`,
    connections: 64,
  };
  return load(shape, { server: server.child.pid }, { ...o, placement: where });
}

/**
 * Both figures: revoke latency (lone, then a fleet of 3) and verify throughput (lone, then a
 * fleet member). `o` is measure.js's load settings (durationS, warmupS, rounds, waitQuietS, retries).
 */
export async function runFleet({ revokes = 300, ...o }) {
  ensureCommands(['wrk']);
  const where = placement(1);
  const others = where.load ?? null;
  log(`bench/fleet: ${where.label}; etcd and the other gateways on the load CPUs; ${revokes} revokes; wrk -c64 -d${o.durationS}s`);
  const results = { settings: { ...o, revokes, placement: where } };

  // Revoke latency: a lone api-auth, then 3 gateways of a fleet.
  {
    const lone = await startOurs({ cpus: where.server, threads: 1 });
    try {
      results.loneRevoke = await revokeLatency([lone], lone.password, revokes);
    } finally {
      await lone.cleanup();
    }
    log(`  lone api-auth revoke: p50 ${ms(results.loneRevoke.p50Ms)} p99 ${ms(results.loneRevoke.p99Ms)}`);
    const etcd = await startEtcd(others);
    try {
      const fleet = await startFleet(etcd, [where.server, others, others]);
      try {
        results.fleetRevoke = await revokeLatency(fleet.gateways, fleet.password, revokes);
      } finally {
        await fleet.cleanup();
      }
    } finally {
      await etcd.stop();
    }
    log(`  fleet of 3 revoke:    p50 ${ms(results.fleetRevoke.p50Ms)} p99 ${ms(results.fleetRevoke.p99Ms)}`);
  }

  // Verify throughput on one gateway: lone, then a fleet member.
  {
    const lone = await startOurs({ cpus: where.server, threads: 1 });
    try {
      results.loneVerify = await throughput(lone.server, await newToken(lone.server.port, lone.password, [INFO_PATH]), where, o);
    } finally {
      await lone.cleanup();
    }
    const etcd = await startEtcd(others);
    try {
      const fleet = await startFleet(etcd, [where.server]);
      try {
        const g = fleet.gateways[0];
        results.fleetVerify = await throughput(g.server, await newToken(g.server.port, fleet.password, [INFO_PATH]), where, o);
      } finally {
        await fleet.cleanup();
      }
    } finally {
      await etcd.stop();
    }
  }
  results.verifyRatio = results.fleetVerify.rps / results.loneVerify.rps;
  return results;
}

export function fleetMarkdown(results) {
  const { placement: where, revokes } = results.settings;
  return [
    '## The fleet (--cluster-etcd): revoke latency across 3 gateways, verify throughput with and without the cluster',
    '',
    `${where.label}; etcd and the fleet's other gateways on the load CPUs. Revoke: ${revokes} calls of auth.revokeToken from send to ` +
      'answer (argon2id check included), each token issued on another gateway and refused by all three once the call returned.',
    '',
    table(
      ['revoke through', 'calls', 'p50', 'p99', 'max'],
      [
        [
          'a lone api-auth (data folder)',
          results.loneRevoke.count,
          ms(results.loneRevoke.p50Ms),
          ms(results.loneRevoke.p99Ms),
          ms(results.loneRevoke.maxMs),
        ],
        [
          'one of 3 gateways of a fleet',
          results.fleetRevoke.count,
          ms(results.fleetRevoke.p50Ms),
          ms(results.fleetRevoke.p99Ms),
          ms(results.fleetRevoke.maxMs),
        ],
      ],
    ),
    '',
    table(
      ['POST /ext/info, valid token, 1 thread, 64 connections', 'req/s', 'p50', 'p99', 'CPU per request', 'server CPU busy'],
      [
        [
          'a lone api-auth',
          int(results.loneVerify.rps),
          ms(results.loneVerify.p50Ms),
          ms(results.loneVerify.p99Ms),
          usec(results.loneVerify.cpu.server?.usPerRequest),
          pct(results.loneVerify.cpu.server?.busy),
        ],
        [
          'a fleet member',
          int(results.fleetVerify.rps),
          ms(results.fleetVerify.p50Ms),
          ms(results.fleetVerify.p99Ms),
          usec(results.fleetVerify.cpu.server?.usPerRequest),
          pct(results.fleetVerify.cpu.server?.busy),
        ],
      ],
    ),
    '',
    `Verify throughput, fleet member against lone: ${ratio(results.verifyRatio)} (the check is the same core call; the fleet adds no network call to it).`,
  ].join('\n');
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { values: flags } = parseArgs({
    options: {
      revokes: { type: 'string', default: '300' },
      duration: { type: 'string', default: '8s' },
      warmup: { type: 'string', default: '2s' },
      'allow-dirty': { type: 'boolean', default: false },
    },
  });
  const seconds = (text, flag) => {
    const m = /^(\d+)s?$/.exec(text);
    if (m === null) {
      process.stderr.write(`bench/parts/fleet.js: --${flag} takes whole seconds, such as 8s\n`);
      process.exit(2);
    }
    return Number(m[1]);
  };
  const REVOKES = Number(flags.revokes);
  if (!Number.isInteger(REVOKES) || REVOKES < 10) {
    process.stderr.write('bench/parts/fleet.js: --revokes takes a whole number of at least 10\n');
    process.exit(2);
  }
  const o = {
    durationS: seconds(flags.duration, 'duration'),
    warmupS: seconds(flags.warmup, 'warmup'),
    rounds: 1,
    waitQuietS: 10,
    retries: 1,
  };
  const results = { machine: machineFacts(), git: gitState(), ...(await runFleet({ revokes: REVOKES, ...o })) };
  const file = results.git.dirty && !flags['allow-dirty'] ? 'bench/results/results-fleet.dirty.json' : 'bench/results/results-fleet.json';
  writeFileSync(join(ROOT, file), `${JSON.stringify(results, null, 2)}\n`);
  process.stdout.write(`${fleetMarkdown(results)}\nResults: ${file}.\n`);
}
