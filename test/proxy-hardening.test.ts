// The gateway's edges that the security review (issue 10) found open: forwarding headers
// are believed only from trusted proxies, and name the client that the throttle and the
// logs see.
import t from 'tap';
import { join } from 'node:path';
import { request as undiciRequest } from 'undici';
import { App, us_listen_socket_close, us_socket_local_port } from 'uWebSockets.js';
import type { us_listen_socket } from 'uWebSockets.js';
import { newToken } from './helpers/auth.js';
import { freshSource, request, rpc, type HttpResponse } from './helpers/http.js';
import { runCli, startServer, tempDir } from './helpers/server.js';
import { startUpstream } from './helpers/upstream.js';
import { createAuth, createLogger } from '../build/host/index.js';

function jsonError(response: HttpResponse): { code: number; message: string } {
  return (JSON.parse(response.text) as { error: { code: number; message: string } }).error;
}

const upstream = await startUpstream(t);
const gateway = await startServer(t, { args: ['--upstream', upstream.url, '--api-auth-public-endpoints', '/ext/health'] });
const bearer = `Bearer ${await newToken(gateway.url, gateway.password, ['*'])}`;

const CLIENT_FORWARDING = [
  ['X-Forwarded-For', '203.0.113.7'], ['X-Forwarded-For', '198.51.100.1'], ['X-Forwarded-Host', 'evil.example'],
  ['X-Forwarded-Proto', 'https'], ['X-Forwarded-Port', '443'], ['X-Forwarded-Prefix', '/admin'], ['X-Forwarded-Server', 'lb'],
  ['Forwarded', 'for=203.0.113.7;proto=https'], ['X-Real-IP', '203.0.113.7'], ['True-Client-IP', '203.0.113.7'],
  ['X-Client-IP', '203.0.113.7'], ['CF-Connecting-IP', '203.0.113.7'], ['Fastly-Client-IP', '203.0.113.7'],
  ['X-Cluster-Client-IP', '203.0.113.7'], ['X-Original-URL', '/admin'], ['X-Rewrite-URL', '/admin'],
] as const;

function lastSeen() {
  return upstream.seen[upstream.seen.length - 1];
}

function count(raw: string[], name: string): number {
  return raw.filter((n, i) => i % 2 === 0 && n.toLowerCase() === name).length;
}

t.test('forwarding headers from a client never reach the upstream; api-auth writes its own', async (t) => {
  const source = freshSource();
  const response = await request(gateway.url, '/ext/info', {
    localAddress: source,
    headers: [['Authorization', bearer], ['Host', 'node.example:9650'], ...CLIENT_FORWARDING, ['X-Other', 'kept']],
  });
  t.equal(response.status, 200);
  const seen = lastSeen();
  t.equal(seen.headers['x-forwarded-for'], source, 'X-Forwarded-For is the client\'s address alone');
  t.equal(seen.headers['x-forwarded-host'], 'node.example:9650', 'X-Forwarded-Host is the client\'s Host');
  t.equal(seen.headers['x-forwarded-proto'], 'http');
  for (const name of ['x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto']) t.equal(count(seen.rawHeaders, name), 1, `one ${name}`);
  for (const [name] of CLIENT_FORWARDING) {
    const lower = name.toLowerCase();
    if (!['x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto'].includes(lower)) t.equal(seen.headers[lower], undefined, `no ${name}`);
  }
  t.equal(seen.headers['x-other'], 'kept', 'other headers pass');
});

t.test('from a trusted proxy, X-Forwarded-For, -Host and -Proto are kept and X-Forwarded-For is extended', async (t) => {
  const behind = await startServer(t, { auth: false, args: ['--upstream', upstream.url, '--trusted-proxies', '10.9.9.9, 2001:db8::/32,127.0.0.0/8'] });
  const proxy = freshSource();
  await request(behind.url, '/ext/info', {
    localAddress: proxy,
    headers: [['X-Forwarded-For', '198.51.100.7'], ['X-Forwarded-For', '203.0.113.9, 10.0.0.1'], ['X-Forwarded-Host', 'node.example'],
      ['X-Forwarded-Proto', 'https'], ['X-Forwarded-Port', '443'], ['X-Real-IP', '198.51.100.7'], ['Forwarded', 'for=198.51.100.7']],
  });
  let seen = lastSeen();
  t.equal(seen.headers['x-forwarded-for'], `198.51.100.7, 203.0.113.9, 10.0.0.1, ${proxy}`, 'the chain, both lines in order, then the proxy');
  t.equal(seen.headers['x-forwarded-host'], 'node.example');
  t.equal(seen.headers['x-forwarded-proto'], 'https');
  for (const name of ['x-forwarded-port', 'x-real-ip', 'forwarded']) t.equal(seen.headers[name], undefined, `${name} is still dropped`);
  await request(behind.url, '/ext/info', { localAddress: proxy, headers: [['Host', 'node.example:9650']] });
  seen = lastSeen();
  t.same([seen.headers['x-forwarded-for'], seen.headers['x-forwarded-host'], seen.headers['x-forwarded-proto']],
    [proxy, 'node.example:9650', 'http'], 'a trusted proxy that sent none gets them written');

  const elsewhere = await startServer(t, { auth: false, args: ['--upstream', upstream.url, '--trusted-proxies', '10.0.0.0/8'] });
  const client = freshSource();
  await request(elsewhere.url, '/ext/info', { localAddress: client, headers: [['Host', 'h'], ...CLIENT_FORWARDING] });
  seen = lastSeen();
  t.same([seen.headers['x-forwarded-for'], seen.headers['x-forwarded-host'], seen.headers['x-forwarded-proto'], seen.headers['x-real-ip']],
    [client, 'h', 'http', undefined], 'a peer outside the list is a client like any other');
});

t.test('on a dual-stack listener, addresses are canonical: an IPv4 client in dotted form, IPv6 as RFC 5952 writes it', async (t) => {
  const dual = await startServer(t, { args: ['--http-host', '::', '--upstream', upstream.url, '--api-auth-public-endpoints', '/ext/health'] });
  const source = freshSource();
  t.equal((await request(dual.url, '/ext/health', { localAddress: source })).status, 200);
  t.equal(lastSeen().headers['x-forwarded-for'], source, 'X-Forwarded-For of an IPv4 client');
  const six = await undiciRequest(`http://[::1]:${dual.port}/ext/health`);
  await six.body.text();
  t.equal(lastSeen().headers['x-forwarded-for'], '::1', 'X-Forwarded-For of an IPv6 client');

  const guess = await request(dual.url, '/ext/auth', {
    method: 'POST', localAddress: source, headers: [['Content-Type', 'application/json'], ['X-Forwarded-For', '198.51.100.9']],
    body: JSON.stringify(rpc('auth.newToken', { password: 'wrong', endpoints: ['*'] }, 1)),
  });
  t.equal(jsonError(guess).message, 'incorrect password');
  const audit = await dual.waitForLog((l) => l.msg === 'audit' && l.outcome === 'incorrect password');
  t.equal(audit.client, source, 'the audit line names the client in dotted form; X-Forwarded-For from a client is not believed');
});

t.test('behind a trusted proxy, the throttle and the audit log take the client its X-Forwarded-For names', async (t) => {
  const server = await startServer(t, { args: ['--trusted-proxies', '127.0.0.0/8'] });
  const proxy = freshSource();
  // Every guess comes through the same proxy connection address; the chain ends with a
  // second trusted hop, which is skipped.
  const guess = (client: string) => request(server.url, '/ext/auth', {
    method: 'POST', localAddress: proxy, headers: [['Content-Type', 'application/json'], ['X-Forwarded-For', `${client}, 127.0.0.3`]],
    body: JSON.stringify(rpc('auth.newToken', { password: 'wrong', endpoints: ['*'] }, 1)),
  });
  let tries = 0;
  let status = 200;
  while (status !== 429 && tries < 10) {
    status = (await guess('198.51.100.1')).status;
    tries++;
  }
  t.equal(status, 429, `198.51.100.1 is made to wait (after ${tries} guesses)`);
  const other = await guess('198.51.100.2');
  t.equal(other.status, 200, 'another client behind the same proxy is not');
  t.equal(jsonError(other).message, 'incorrect password');
  const clients = new Set(server.logs.filter((l) => l.msg === 'audit').map((l) => l.client));
  t.same([...clients].sort(), ['198.51.100.1', '198.51.100.2'], 'the audit lines name the clients, not the proxy');
});

t.test('the library takes trustedProxies too, and refuses a bad one', async (t) => {
  const dir = tempDir(t);
  const lines: string[] = [];
  const options = { passwordFile: join(dir, 'password'), dataDir: join(dir, 'data'), log: createLogger((l) => lines.push(l)) };
  await t.rejects(createAuth({ ...options, trustedProxies: ['10.0.0.0/8', 'nope'] }), { name: 'RangeError', message: /^trustedProxies: "nope" is not an address or a CIDR range/ });
  const auth = await createAuth({ ...options, trustedProxies: ['127.0.0.0/8'] });
  const app = App();
  auth.mount(app);
  const socket = await new Promise<us_listen_socket>((resolve, reject) => app.listen('127.0.0.1', 0, (s) => (s ? resolve(s) : reject(new Error('no port')))));
  t.teardown(async () => {
    us_listen_socket_close(socket);
    app.close();
    await auth.close();
  });
  const base = `http://127.0.0.1:${us_socket_local_port(socket as never)}`;
  const response = await request(base, '/ext/auth', {
    method: 'POST', headers: [['Content-Type', 'application/json'], ['X-Forwarded-For', '198.51.100.4']],
    body: JSON.stringify(rpc('auth.newToken', { password: 'wrong', endpoints: ['*'] }, 1)),
  });
  t.equal(jsonError(response).message, 'incorrect password');
  const audit = lines.map((l) => JSON.parse(l) as Record<string, unknown>).find((l) => l.msg === 'audit');
  t.equal(audit?.client, '198.51.100.4');
});

t.test('bad --trusted-proxies values are refused at start with one line', async (t) => {
  for (const bad of ['10.0.0.0/33', 'proxy.example', '10.0.0.1,,10.0.0.2', 'fe80::1%eth0', '2001:db8::/129', '10.0.0.0/', '300.1.1.1', '10.0.0.0/08']) {
    const result = await runCli(t, ['--http-port', '0', '--data-dir', '/nonexistent', '--trusted-proxies', bad]);
    t.equal(result.code, 2, `${bad}: exit 2`);
    t.match(result.stderr, /^api-auth: --trusted-proxies: "[^"]*" is not an address or a CIDR range \(such as [^\n]*\)\n$/,
      `${bad}: one line naming the entry`);
  }
});

