// The console's sessions in a fleet on a real etcd: a session had on one gateway is
// renewed and ended on another, and the cap on its renewals (--console-session-max-lifetime,
// from the sign-in) holds on every gateway, as each reads it from the sign-in's token.
import t from 'tap';
import { createHash } from 'node:crypto';
import { authUrl } from '../helpers/auth.js';
import { seededEtcd, startGateway } from '../helpers/etcd.js';
import type { Gateway } from '../helpers/etcd.js';
import { postJson } from '../helpers/http.js';
import { sleep } from '../helpers/server.js';

const LEASE = ['--cluster-lease', '3s'];
const COOKIE = /^api-auth-session=([A-Za-z0-9_-]{76}\.[A-Za-z0-9_-]{76}); Max-Age=(\d+);/;

function headers(cookie: string): [string, string][] {
  return [
    ['Cookie', `api-auth-session=${cookie}`],
    ['X-Api-Auth-Csrf', createHash('sha256').update('api-auth console csrf\0').update(cookie).digest('base64url')],
  ];
}

/** A call of /ext/auth with `cookie`: its answer, and the new session's cookie and its Max-Age when it set one. */
async function rpc(
  gateway: Gateway,
  method: string,
  params: unknown,
  cookie = '',
): Promise<{ answer: any; cookie: string; maxAge: number }> {
  const response = await postJson(authUrl(gateway.url), { jsonrpc: '2.0', id: 1, method, params }, cookie === '' ? [] : headers(cookie));
  const set = COOKIE.exec(response.headers['set-cookie'] ?? '');
  return { answer: JSON.parse(response.text), cookie: set?.[1] ?? '', maxAge: Number(set?.[2] ?? 0) };
}

/** Waits until `gateway` takes the session (the fleet's grants and serials reach it by its watch). */
async function takes(gateway: Gateway, cookie: string): Promise<void> {
  while ((await rpc(gateway, 'auth.listTokens', {}, cookie)).answer.result === undefined) await sleep(100);
}

t.test('a session had on one gateway is renewed and ended on another; its cap holds on each', async (t) => {
  const { etcd, password, passwordFile } = await seededEtcd(t);
  const args = [...LEASE, '--console'];
  const [a, b] = await Promise.all([startGateway(t, etcd, passwordFile, args), startGateway(t, etcd, passwordFile, args)]);
  const signedIn = await rpc(a, 'auth.signIn', { password });
  t.ok(signedIn.cookie, 'signed in on A');
  await takes(b, signedIn.cookie);
  const renewed = await rpc(b, 'auth.renewSession', {}, signedIn.cookie);
  t.match(renewed.answer.result, { csrf: String, expiresAt: String }, 'renewed on B');
  t.match(
    (await rpc(a, 'auth.listTokens', {}, signedIn.cookie)).answer.error,
    { code: -32000, message: /not live/ },
    'A refuses the old one',
  );
  await takes(a, renewed.cookie);
  t.same((await rpc(a, 'auth.signOut', {}, renewed.cookie)).answer.result, { success: true }, 'signed out on A');
  while ((await rpc(b, 'auth.listTokens', {}, renewed.cookie)).answer.result !== undefined) await sleep(100);
  t.pass('B refuses the signed-out session once the revocation reaches it');

  // With a cap of a minute, the first session already ends at it: no gateway renews it.
  const capped = [...args, '--console-session-max-lifetime', '60s'];
  const [c, d] = await Promise.all([startGateway(t, etcd, passwordFile, capped), startGateway(t, etcd, passwordFile, capped)]);
  const short = await rpc(c, 'auth.signIn', { password });
  t.equal(short.maxAge, 60, 'the session lasts the minute, not 15');
  await takes(d, short.cookie);
  t.match(
    (await rpc(d, 'auth.renewSession', {}, short.cookie)).answer.error,
    { code: -32000, message: /cannot be renewed: it ends 1m after its sign-in/ },
    "the other gateway refuses its renewal, from the sign-in's token",
  );
});
