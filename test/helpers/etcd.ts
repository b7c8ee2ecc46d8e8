// A real etcd for the fleet's tests (Debian's etcd-server): one member on free loopback
// ports with its data in the test's temporary folder, killed when the test ends. It can
// be killed with SIGKILL and started again on the same ports and data, as an outage.
// Beside it, fleet gateways: the CLI (launch, as an operator runs it) with --cluster-etcd.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import type { Test } from 'tap';
import { launch, tempDir } from './server.js';
import type { LogLine, Running } from './server.js';

export const ETCD = process.env.API_AUTH_TEST_ETCD ?? '/usr/bin/etcd';

/** A loopback port nobody listens on right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

export interface Etcd {
  /** The client URL, http://127.0.0.1:PORT. */
  readonly url: string;
  readonly dataDir: string;
  /** SIGKILL, and the exit awaited. */
  kill(): Promise<void>;
  /** Starts it again on the same ports and data (after kill), once it serves clients. */
  start(): Promise<void>;
  /** Whether it runs. */
  running(): boolean;
}

/** Starts an etcd of one member for the test, and waits until it serves clients. */
export async function startEtcd(t: Test): Promise<Etcd> {
  const dir = tempDir(t);
  const dataDir = join(dir, 'etcd');
  mkdirSync(dataDir, { mode: 0o700 });
  const clientPort = await freePort();
  const peerPort = await freePort();
  const url = `http://127.0.0.1:${clientPort}`;
  const peer = `http://127.0.0.1:${peerPort}`;
  const args = [
    '--name', 'test', '--data-dir', dataDir,
    '--listen-client-urls', url, '--advertise-client-urls', url,
    '--listen-peer-urls', peer, '--initial-advertise-peer-urls', peer,
    '--initial-cluster', `test=${peer}`, '--initial-cluster-state', 'new',
    // A small machine shared by other tests: no fsync stalls worth waiting for, and a
    // quick election at start.
    '--heartbeat-interval', '50', '--election-timeout', '500', '--logger', 'zap', '--log-level', 'info',
  ];
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();

  const start = (): Promise<void> => new Promise((resolve, reject) => {
    const proc = spawn(ETCD, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child = proc;
    exited = new Promise((done) => proc.once('exit', () => done()));
    let log = '';
    const ready = (chunk: Buffer): void => {
      log += chunk.toString('utf8');
      // Logged once the client listener serves (etcd 3.4 and 3.5).
      if (log.includes('serving client traffic')) {
        proc.stderr!.off('data', ready);
        proc.stderr!.resume();
        resolve();
      }
    };
    proc.stderr!.on('data', ready);
    proc.stdout!.resume();
    proc.once('exit', (code, signal) => reject(new Error(`etcd exited (${code ?? signal}) before it served clients:\n${log}`)));
    proc.once('error', reject);
  });

  await start();
  t.teardown(async () => {
    child?.kill('SIGKILL');
    await exited;
  });
  return {
    url,
    dataDir,
    running: () => child !== undefined && child.exitCode === null && child.signalCode === null,
    async kill() {
      child?.kill('SIGKILL');
      await exited;
    },
    start,
  };
}

export interface Gateway extends Running {
  readonly url: string;
  readonly port: number;
  readonly args: readonly string[];
}

/**
 * Starts a fleet gateway: the CLI with --cluster-etcd and auth on, on a free port, with
 * `passwordFile` (written by the caller) and a data folder of its own under `dir`, and
 * waits for its `listening` line.
 */
export async function startGateway(t: Test, etcd: Etcd, passwordFile: string, extra: readonly string[] = []): Promise<Gateway> {
  const dataDir = join(tempDir(t), 'data');
  mkdirSync(dataDir, { mode: 0o700 });
  const args = ['--http-port', '0', '--data-dir', dataDir, '--api-auth-required', '--api-auth-password-file', passwordFile,
    '--cluster-etcd', etcd.url, ...extra];
  return launchGateway(t, args);
}

/** Starts a gateway again with the command line of an earlier one (after it exited). */
export function restartGateway(t: Test, previous: Gateway): Promise<Gateway> {
  return launchGateway(t, previous.args);
}

async function launchGateway(t: Test, args: readonly string[]): Promise<Gateway> {
  const run = launch(t, args);
  const listening: LogLine = await run.waitForLog((l) => l.msg === 'listening', 30_000);
  const port = Number(listening.port);
  return { ...run, url: `http://127.0.0.1:${port}`, port, args };
}
