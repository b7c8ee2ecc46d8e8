// A real etcd for the fleet's tests (Debian's etcd-server): one member on free loopback
// ports with its data in the test's temporary folder, killed when the test ends. It can
// be killed with SIGKILL and started again on the same ports and data, as an outage. It
// serves TLS (and asks clients for certificates) when given certificates, made here by
// openssl, and its authentication can be turned on with users limited to a prefix.
// Beside it, fleet gateways: the CLI (launch, as an operator runs it) with --cluster-etcd.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { connect, createServer, type Socket } from 'node:net';
import { join } from 'node:path';
import { Etcd3, Range } from 'etcd3';
import type { Test } from 'tap';
import { seedCheapFleet } from './cheap-state.js';
import { launch, randomPassword, tempDir } from './server.js';
import type { LogLine, Running } from './server.js';
import { closedPorts } from './upstream.js';

export const ETCD = process.env.API_AUTH_TEST_ETCD ?? '/usr/bin/etcd';

export interface Etcd {
  /** The client URL, http://127.0.0.1:PORT, or https:// with TLS. */
  readonly url: string;
  readonly dataDir: string;
  /** SIGKILL, and the exit awaited. */
  kill(): Promise<void>;
  /** Starts it again on the same ports and data (after kill), once it serves clients. */
  start(): Promise<void>;
  /** Whether it runs. */
  running(): boolean;
}

/** etcd's TLS to its clients. */
/**
 * The ground of a fleet for a test that is not about its seeding or hashing: a fresh etcd,
 * a password and its file (0600), and the fleet seeded as its first gateway would seed it,
 * with a record whose checks cost next to nothing (cheap-state.ts).
 */
export async function seededEtcd(t: Test): Promise<{ etcd: Etcd; password: string; passwordFile: string }> {
  const etcd = await startEtcd(t);
  const password = randomPassword();
  const passwordFile = join(tempDir(t), 'password');
  writeFileSync(passwordFile, password, { mode: 0o600 });
  await seedCheapFleet(etcd.url, password);
  return { etcd, password, passwordFile };
}

export interface EtcdTls {
  /** etcd's certificate and key (--cert-file, --key-file). */
  readonly certFile: string;
  readonly keyFile: string;
  /** With it, clients must show a certificate this CA signed (--client-cert-auth --trusted-ca-file). */
  readonly clientCaFile?: string;
}

/** Starts an etcd of one member for the test, serving TLS with `tls`, and waits until it serves clients. */
export async function startEtcd(t: Test, tls?: EtcdTls): Promise<Etcd> {
  const dir = tempDir(t);
  const dataDir = join(dir, 'etcd');
  mkdirSync(dataDir, { mode: 0o700 });
  const [clientPort, peerPort] = await closedPorts(2);
  const url = `${tls === undefined ? 'http' : 'https'}://127.0.0.1:${clientPort}`;
  const peer = `http://127.0.0.1:${peerPort}`;
  const args = [
    '--name',
    'test',
    '--data-dir',
    dataDir,
    '--listen-client-urls',
    url,
    '--advertise-client-urls',
    url,
    ...(tls === undefined ? [] : ['--cert-file', tls.certFile, '--key-file', tls.keyFile]),
    ...(tls?.clientCaFile === undefined ? [] : ['--client-cert-auth', '--trusted-ca-file', tls.clientCaFile]),
    '--listen-peer-urls',
    peer,
    '--initial-advertise-peer-urls',
    peer,
    '--initial-cluster',
    `test=${peer}`,
    '--initial-cluster-state',
    'new',
    // A small machine shared by other tests: no fsync stalls worth waiting for, and a
    // quick election at start.
    '--heartbeat-interval',
    '50',
    '--election-timeout',
    '500',
    '--logger',
    'zap',
    '--log-level',
    'info',
  ];
  let child: ChildProcess | undefined;
  let exited: Promise<void> = Promise.resolve();

  const start = (): Promise<void> =>
    new Promise((resolve, reject) => {
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

/** PEM files made by openssl: a CA, and what it signed; a CA that signed nothing here; a self-signed client certificate. */
export interface Certificates {
  readonly ca: string;
  /** etcd's, for 127.0.0.1 (an IP SAN). */
  readonly server: { readonly cert: string; readonly key: string };
  /** A gateway's, for etcd's --client-cert-auth. */
  readonly client: { readonly cert: string; readonly key: string };
  readonly otherCa: string;
  readonly selfSigned: { readonly cert: string; readonly key: string };
}

/** Makes the Certificates in `dir` (EC P-256, valid for a day). */
export function makeCertificates(dir: string): Certificates {
  const openssl = (...args: string[]): void => {
    execFileSync('openssl', args, { stdio: 'ignore' });
  };
  const file = (name: string): string => join(dir, name);
  const key = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  const selfSigned = (name: string): { cert: string; key: string } => {
    openssl('req', '-x509', ...key, '-keyout', file(`${name}.key`), '-out', file(`${name}.crt`), '-days', '1', '-subj', `/CN=${name}`);
    return { cert: file(`${name}.crt`), key: file(`${name}.key`) };
  };
  const ca = selfSigned('ca');
  const signed = (name: string, extensions: string): { cert: string; key: string } => {
    writeFileSync(file(`${name}.ext`), extensions);
    openssl('req', ...key, '-keyout', file(`${name}.key`), '-out', file(`${name}.csr`), '-subj', `/CN=${name}`);
    openssl(
      'x509',
      '-req',
      '-in',
      file(`${name}.csr`),
      '-CA',
      ca.cert,
      '-CAkey',
      ca.key,
      '-set_serial',
      `0x${randomBytes(8).toString('hex')}`,
      '-out',
      file(`${name}.crt`),
      '-days',
      '1',
      '-extfile',
      file(`${name}.ext`),
    );
    return { cert: file(`${name}.crt`), key: file(`${name}.key`) };
  };
  return {
    ca: ca.cert,
    // etcd dials itself with its certificate too (its gRPC gateway): a client's use as well.
    server: signed('server', 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n'),
    client: signed('client', 'extendedKeyUsage=clientAuth\n'),
    otherCa: selfSigned('other-ca').cert,
    selfSigned: selfSigned('stranger'),
  };
}

/** An etcd user the fleet signs in as: readwrite on `prefixes` only, through a role of its own; no role without any. */
export interface EtcdUser {
  readonly name: string;
  readonly password: string;
  readonly prefixes: readonly string[];
}

/**
 * Turns etcd's authentication on (as etcdctl does: a root user holding the root role),
 * with `users`. Returns the root's password.
 */
export async function enableAuth(etcd: Etcd, users: readonly EtcdUser[]): Promise<string> {
  const client = new Etcd3({ hosts: etcd.url });
  try {
    const root = randomBytes(12).toString('hex');
    await client.role('root').create();
    await client.user('root').create(root);
    await client.user('root').addRole('root');
    for (const user of users) {
      await client.user(user.name).create(user.password);
      if (user.prefixes.length === 0) continue;
      const role = client.role(`${user.name}-role`);
      await role.create();
      await role.grant(user.prefixes.map((prefix) => ({ permission: 'Readwrite' as const, range: Range.prefix(prefix) })));
      await client.user(user.name).addRole(role);
    }
    await client.auth.authEnable();
    return root;
  } finally {
    client.close();
  }
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
  const args = [
    '--http-port',
    '0',
    '--data-dir',
    dataDir,
    '--api-auth-required',
    '--api-auth-password-file',
    passwordFile,
    '--cluster-etcd',
    etcd.url,
    ...extra,
  ];
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

/** A loopback relay in front of etcd that counts the TCP connections made through it. */
export interface CountingRelay {
  /** etcd's URL with the relay's port. */
  readonly url: string;
  /** Connections accepted so far. */
  connections(): number;
  /** Called with the count at each connection. */
  onConnection?: (count: number) => void;
  /** Cuts every connection through it, and refuses new ones, until mend(): a partition. */
  cut(): void;
  mend(): void;
}

/**
 * Relays loopback connections to the etcd at `target` (its client URL), byte for byte,
 * so that TLS runs end to end; closed when the test ends.
 */
export async function countingRelay(t: Test, target: string): Promise<CountingRelay> {
  const etcd = new URL(target);
  let count = 0;
  const sockets = new Set<Socket>();
  let cutOff = false;
  const server = createServer((client) => {
    if (cutOff) {
      client.destroy();
      return;
    }
    relay.onConnection?.(++count);
    const toEtcd = connect({ host: etcd.hostname, port: Number(etcd.port) });
    for (const socket of [client, toEtcd]) {
      sockets.add(socket);
      // A reset tears both down; an end is passed on by pipe() after the bytes before it, so
      // that etcd's TLS alert (its refusal of a client certificate) reaches the client whole.
      socket.on('error', () => {
        client.destroy();
        toEtcd.destroy();
      });
      socket.on('close', () => sockets.delete(socket));
    }
    client.pipe(toEtcd).pipe(client);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  t.teardown(
    () =>
      new Promise<void>((done) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => done());
      }),
  );
  const { port } = server.address() as { port: number };
  const relay: CountingRelay = {
    url: `${etcd.protocol}//127.0.0.1:${port}`,
    connections: () => count,
    cut() {
      cutOff = true;
      for (const socket of sockets) socket.destroy();
    },
    mend() {
      cutOff = false;
    },
  };
  return relay;
}
