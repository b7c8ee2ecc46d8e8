// What the service promises on the wire, written down once: the refusal reasons of the
// gate, and helpers that obtain tokens and try them on protected endpoints.
import type { Test } from 'tap';
import { jsonrpc, request, type HttpResponse, type RpcResponse } from './http.js';
import { manualClock, serveInProcess, type LibraryServer } from './library.js';
import { sleep, VERSION } from './server.js';

/** The gate's reasons, by outcome (team brief, "The gate"). */
export const REASONS = {
  noToken: 'auth token not provided',
  badHeader: 'couldn\'t parse auth token. Header "Authorization" should be "Bearer TOKEN.GOES.HERE"',
  malformed: 'the provided auth token is invalid',
  badSignature: 'the provided auth token is invalid: signature mismatch',
  expired: 'the provided auth token is expired',
  revoked: 'the provided auth token was revoked',
  earlierGeneration: 'the provided auth token is invalid: issued under a previous password',
  notGranted: 'the provided auth token does not allow access to this endpoint',
} as const;

export const BAD_PATH_REASON =
  'invalid request path: dot or empty segments, "\\", and encoded "/", "\\", ".", "%", ";", "?", "#", ' +
  'controls, look-alikes or malformed UTF-8 are refused';

export const NOT_FOUND_BODY = '404 page not found\n';

export const TOKEN_PATTERN = /^[A-Za-z0-9_-]{76}$/;

/** The exact body of a refusal, as the original node sent it. */
export function refusalBody(reason: string): string {
  return JSON.stringify({ jsonrpc: '2.0', error: { code: -32600, message: reason }, id: 1 }) + '\n';
}

export function authUrl(base: string): string {
  return `${base}/ext/auth`;
}

/** A new token from auth.newToken; throws with the JSON-RPC error when there is none. */
export async function newToken(base: string, password: string, endpoints: readonly string[]): Promise<string> {
  const response = await jsonrpc(authUrl(base), 'auth.newToken', { password, endpoints });
  const token: unknown = response.result?.token;
  if (typeof token !== 'string') throw new Error(`auth.newToken gave no token: ${JSON.stringify(response)}`);
  return token;
}

/**
 * auth.newToken with `params` (for /ext/info unless they name endpoints): the JSON-RPC
 * answer, result or error.
 */
export function askToken(base: string, password: string, params: Record<string, unknown> = {}): Promise<RpcResponse> {
  return jsonrpc(authUrl(base), 'auth.newToken', { password, endpoints: ['/ext/info'], ...params });
}

/** auth.newToken as `askToken` asks it: the token and its id; throws with the JSON-RPC error when there is none. */
export async function issueToken(
  base: string,
  password: string,
  params: Record<string, unknown> = {},
): Promise<{ token: string; id: string }> {
  const answer = await askToken(base, password, params);
  if (answer.result === undefined) throw new Error(`newToken failed: ${JSON.stringify(answer.error)}`);
  return answer.result as { token: string; id: string };
}

/** auth.listTokens: its entries, typed as the test reads them; throws with the JSON-RPC error when there are none. */
export async function listTokens<Entry = Record<string, unknown>>(base: string, password: string): Promise<Entry[]> {
  const answer = await jsonrpc(authUrl(base), 'auth.listTokens', { password });
  if (answer.result === undefined) throw new Error(`listTokens failed: ${JSON.stringify(answer.error)}`);
  return (answer.result as { tokens: Entry[] }).tokens;
}

/** The JSON-RPC body a request to `path` carries: a method the built-in endpoint knows. */
function bodyFor(path: string): string {
  const method = path.startsWith('/ext/health') ? 'health.health' : 'info.getNodeVersion';
  return JSON.stringify({ jsonrpc: '2.0', method, id: 1 });
}

/**
 * A request to a node endpoint with `Authorization: <authorization>` (none when
 * undefined): POST with a JSON-RPC body, or GET.
 */
export function callWithHeader(
  base: string,
  path: string | Buffer,
  authorization: string | undefined,
  method: 'POST' | 'GET' = 'POST',
): Promise<HttpResponse> {
  const headers: [string, string][] = authorization === undefined ? [] : [['Authorization', authorization]];
  if (method === 'GET') return request(base, path, { method, headers });
  headers.push(['Content-Type', 'application/json']);
  return request(base, path, { method, headers, body: bodyFor(path.toString('latin1')) });
}

/** A request to a node endpoint carrying `Bearer <token>` (no header when undefined). */
export function call(base: string, path: string | Buffer, token?: string, method: 'POST' | 'GET' = 'POST'): Promise<HttpResponse> {
  return callWithHeader(base, path, token === undefined ? undefined : `Bearer ${token}`, method);
}

/**
 * Calls `path` with `token` until the gate refuses it: an end applied off the request
 * path (a rotation's, a fleet's), on the owner's next look. A fresh connection each try.
 */
export async function refusedSoon(base: string, token: string, path = '/ext/info'): Promise<void> {
  while ((await call(base, path, token)).status === 200) await sleep(100);
}

/**
 * Calls `path` with `token` until it answers `expected`: a state that comes with the
 * passing of a lease or an outage, which no event outside the process announces. A
 * fresh connection each try, every 100 ms; throws after `withinMs`.
 */
export async function waitForStatus(base: string, token: string, expected: number, withinMs: number, path = '/ext/info'): Promise<void> {
  const until = Date.now() + withinMs;
  for (;;) {
    const got = (await call(base, path, token)).status;
    if (got === expected) return;
    if (Date.now() > until) throw new Error(`${base} still answers ${got}, not ${expected}`);
    await sleep(100);
  }
}

/** The response is the gate's refusal with `reason`: 401, JSON, WWW-Authenticate, exact body. */
export function expectRefused(t: Test, response: HttpResponse, reason: string, label = ''): void {
  const what = label ? ` (${label})` : '';
  t.equal(response.status, 401, `status 401${what}`);
  t.equal(response.headers['content-type'], 'application/json', `content-type application/json${what}`);
  t.equal(response.headers['www-authenticate'], 'Bearer', `WWW-Authenticate: Bearer${what}`);
  t.equal(response.text, refusalBody(reason), `body names "${reason}"${what}`);
}

/** The response is the 400 of a path the service refuses to serve. */
export function expectBadPath(t: Test, response: HttpResponse, label = ''): void {
  const what = label ? ` (${label})` : '';
  t.equal(response.status, 400, `status 400${what}`);
  t.equal(response.headers['content-type'], 'application/json', `content-type application/json${what}`);
  let body: unknown;
  try {
    body = JSON.parse(response.text);
  } catch {
    body = response.text;
  }
  t.same(body, { jsonrpc: '2.0', error: { code: -32600, message: BAD_PATH_REASON }, id: 1 }, `bad path body${what}`);
}

/**
 * The request got past the gate and reached the router: the built-in endpoint's answer
 * for /ext/info and /ext/health, the metrics (GET only: 405 otherwise) for /ext/metrics,
 * the plain 404 for any other path.
 */
export function expectGranted(t: Test, response: HttpResponse, path: string, label = path): void {
  const route = path.split('?')[0];
  if (route === '/ext/metrics') {
    if (response.method === 'GET') {
      t.equal(response.status, 200, `status 200 (${label})`);
      t.match(response.text, /^# HELP api_auth_/m, `the metrics answered (${label})`);
    } else {
      t.equal(response.status, 405, `status 405: the metrics take GET only (${label})`);
      t.equal(response.headers.allow, 'GET', `Allow: GET (${label})`);
    }
    return;
  }
  if (route === '/ext/info' || route === '/ext/health') {
    t.equal(response.status, 200, `status 200 (${label})`);
    let body: { result?: unknown } | undefined;
    try {
      body = JSON.parse(response.text);
    } catch {
      body = undefined;
    }
    const expected =
      route === '/ext/info' ? { version: `api-auth/${VERSION}`, gitCommit: '', vmVersions: {} } : { checks: {}, healthy: true };
    // GET /ext/health is the liveness probe: the report itself, not a JSON-RPC response.
    const answer = response.method === 'GET' ? body : body?.result;
    t.same(answer, expected, `the endpoint answered (${label}): ${response.text}`);
  } else {
    expectNotFound(t, response, label);
  }
}

/** The router's plain 404. */
export function expectNotFound(t: Test, response: HttpResponse, label = ''): void {
  const what = label ? ` (${label})` : '';
  t.equal(response.status, 404, `status 404${what}`);
  t.match(response.headers['content-type'] ?? '', /^text\/plain\b/, `content-type text/plain${what}`);
  t.equal(response.text, NOT_FOUND_BODY, `404 body${what}`);
}

/** `token` with its last character replaced: same length and alphabet, a different tag. */
export function tamperLast(token: string): string {
  const last = token[token.length - 1];
  return token.slice(0, -1) + (last === 'A' ? 'B' : 'A');
}

/** The error of a wrong password, as every /ext/auth method gives it. */
export const INCORRECT_PASSWORD = { code: -32000, message: 'incorrect password' } as const;

/** auth.revokeToken: its result ({success: true}) or its JSON-RPC error object. */
/** auth.revokeToken's results: `success` is the original's, `revocation` says what happened. */
export const REVOKED = { success: true, revocation: 'revoked' } as const;
export const ALREADY_REVOKED = { success: true, revocation: 'already revoked' } as const;
/** The result for a token that is not a live one of the node; `reason` is the core's outcome name. */
export function notLive(reason: string): { success: true; revocation: 'not a live token'; reason: string } {
  return { success: true, revocation: 'not a live token', reason };
}

export async function revokeToken(base: string, password: string, token: string): Promise<unknown> {
  const answer = await jsonrpc(authUrl(base), 'auth.revokeToken', { password, token });
  return answer.error ?? answer.result;
}

/** auth.changePassword: its result ({success: true}) or its JSON-RPC error object. */
export async function changePassword(base: string, oldPassword: string, newPassword: string): Promise<unknown> {
  const answer = await jsonrpc(authUrl(base), 'auth.changePassword', { oldPassword, newPassword });
  return answer.error ?? answer.result;
}

/**
 * Whether `password` is the service password now: auth.newToken for `endpoints` gives a
 * token (returned) or the incorrect-password error (undefined). Anything else throws.
 */
export async function tryPassword(
  base: string,
  password: string,
  endpoints: readonly string[] = ['/ext/info'],
): Promise<string | undefined> {
  const answer = await jsonrpc(authUrl(base), 'auth.newToken', { password, endpoints });
  if (typeof answer.result?.token === 'string') return answer.result.token;
  if (answer.error?.code === INCORRECT_PASSWORD.code && answer.error.message === INCORRECT_PASSWORD.message) return undefined;
  throw new Error(`auth.newToken gave neither a token nor "incorrect password": ${JSON.stringify(answer)}`);
}

/**
 * A server in this process whose tokens live `lifetimeSeconds`, on a clock of its own; a
 * token for /ext/info issued on it; the answer to a call made right after issue, and
 * one made a second before the lifetime is up by that clock; and the clock moved on to
 * the end of the lifetime, where the token has expired.
 */
export async function expiringToken(
  t: Test,
  lifetimeSeconds: number,
): Promise<{
  server: LibraryServer;
  token: string;
  fresh: HttpResponse;
  lastSecond: HttpResponse;
}> {
  const time = manualClock();
  const server = await serveInProcess(t, { args: ['--api-auth-token-lifetime', `${lifetimeSeconds}s`], clock: time.clock });
  const token = await newToken(server.url, server.password, ['/ext/info']);
  const fresh = await call(server.url, '/ext/info', token);
  time.now += lifetimeSeconds * 1000 - 1000;
  const lastSecond = await call(server.url, '/ext/info', token);
  time.now += 1000;
  return { server, token, fresh, lastSecond };
}
