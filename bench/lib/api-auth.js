// api-auth as the bench runs it: the built CLI on a free loopback port, with a fresh
// password file and data folder in a temporary directory, and tokens from auth.newToken.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MAIN } from './common.js';
import { startServer } from './proc.js';
import { exchange } from './tls-client.js';

let threadsFlag;

/** Whether this build has `--http-threads` (its `--help` names it). */
export function supportsHttpThreads() {
  threadsFlag ??= execFileSync(process.execPath, [MAIN, '--help'], { encoding: 'utf8' }).includes('--http-threads');
  return threadsFlag;
}

/**
 * Starts the CLI. Options: cpus (pin), authRequired (default true), upstream (a URL:
 * gateway mode), threads (passed as --http-threads when the build has it; more than one
 * without it is an error, never silently one), tls (lib/certificate.js's pair: HTTPS),
 * extraArgs, nodeFlags (node's own, before the script: a profiler's), main (another build's main.js; default this one's).
 * Resolves with the server, its password, its directory and `cleanup()` (stops it, removes the directory).
 */
/**
 * The WebSocket flags of a load of up to `sessions` sessions from this machine with one
 * token: messages of at most 64 KiB (the loads send 100 B and 10 kB), every session
 * open to the one token and the one address, and the memory budget they need at their
 * worst (6 x 64 KiB + 2 MiB each; docs/guides/websocket.md), which nothing allocates
 * unless the peers hold it.
 */
export function wsLoadArgs(sessions) {
  const each = 6 * 64 * 1024 + 2 * 1024 * 1024;
  return [
    '--ws-max-message',
    '64KiB',
    '--ws-max-sessions',
    String(sessions),
    '--ws-max-sessions-per-token',
    String(sessions),
    '--ws-max-sessions-per-client',
    String(sessions),
    '--ws-memory-budget',
    `${Math.ceil((sessions * each) / (1024 * 1024))}MiB`,
  ];
}

export async function startOurs({
  cpus = null,
  authRequired = true,
  upstream,
  threads,
  tls,
  extraArgs = [],
  nodeFlags = [],
  main = MAIN,
} = {}) {
  if (threads > 1 && !supportsHttpThreads()) throw new Error(`api-auth --http-threads ${threads}: not supported by this build`);
  const dir = mkdtempSync(join(tmpdir(), 'api-auth-bench-'));
  const passwordFile = join(dir, 'password');
  const password = randomBytes(18).toString('base64url');
  writeFileSync(passwordFile, `${password}\n`, { mode: 0o600 });
  const args = [...nodeFlags, main, '--http-port', '0', '--data-dir', join(dir, 'data')];
  if (authRequired) args.push('--api-auth-required', '--api-auth-password-file', passwordFile);
  if (upstream !== undefined) args.push('--upstream', upstream);
  if (threads !== undefined && supportsHttpThreads()) args.push('--http-threads', String(threads));
  if (tls) args.push('--http-tls-enabled', '--http-tls-cert-file', tls.certFile, '--http-tls-key-file', tls.keyFile);
  args.push(...extraArgs);
  let server;
  try {
    server = await startServer(`api-auth${upstream ? ' gateway' : ''} (auth ${authRequired ? 'on' : 'off'})`, process.execPath, args, {
      cpus,
    });
  } catch (error) {
    rmSync(dir, { recursive: true, force: true });
    throw error;
  }
  return {
    server,
    password,
    dir,
    cleanup: async () => {
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** One JSON-RPC call to /ext/auth; over HTTPS when `tls` (lib/certificate.js's pair) is given. */
export async function authCall(port, method, params, id = 1, tls = undefined) {
  const body = JSON.stringify({ jsonrpc: '2.0', method, params, id });
  if (tls) {
    const r = await exchange({ port, ca: tls.ca, path: '/ext/auth', headers: { 'Content-Type': 'application/json' }, body, lingerMs: 0 });
    return { status: r.status, body: JSON.parse(r.body.toString('utf8')) };
  }
  const res = await fetch(`http://127.0.0.1:${port}/ext/auth`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
  return { status: res.status, body: await res.json() };
}

/** A token for `endpoints`, and for `methods` only (JSON-RPC method patterns) when given; over HTTPS when `tls` is given. */
export async function newToken(port, password, endpoints, methods, tls) {
  const { status, body } = await authCall(port, 'auth.newToken', { password, endpoints, ...(methods && { methods }) }, 1, tls);
  if (status !== 200 || typeof body.result?.token !== 'string') {
    throw new Error(`auth.newToken failed: HTTP ${status} ${JSON.stringify(body)}`);
  }
  return body.result.token;
}
