// The ecosystem's own JavaScript SDK (`avalanche` v3 on npm), unchanged, against api-auth
// in front of a test upstream node: AuthAPI.newToken, setAuthToken, an Info API call
// through the gateway, revokeToken, changePassword.
import t from 'tap';
import { Avalanche } from 'avalanche';
import { newToken } from '../helpers/auth.js';
import { request } from '../helpers/http.js';
import { randomPassword, startServer } from '../helpers/server.js';
import { startUpstream, type UpstreamHandler } from '../helpers/upstream.js';

const NODE_VERSION = 'avalanche/1.10.0';

// A node's /ext/info, as far as this test needs it.
const info: UpstreamHandler = (_req, res, body) => {
  const request = JSON.parse(body.toString()) as { id: number; method: string };
  const answer =
    request.method === 'info.getNodeVersion'
      ? { jsonrpc: '2.0', result: { version: NODE_VERSION, databaseVersion: 'v1.4.5', gitCommit: 'abc', vmVersions: {} }, id: request.id }
      : { jsonrpc: '2.0', error: { code: -32601, message: `method not found: ${request.method}` }, id: request.id };
  res.setHeader('Content-Type', 'application/json');
  res.end(JSON.stringify(answer));
};

const upstream = await startUpstream(t, () => info);
const server = await startServer(t, { cheapChecks: true, args: ['--upstream', upstream.url] });
const avalanche = new Avalanche('127.0.0.1', server.port, 'http');
const auth = avalanche.Auth();
let metricsToken = await newToken(server.url, server.password, ['/ext/metrics']);

/** How many checks the gateway refused for `outcome`, read from its metrics. */
async function refusals(outcome: string): Promise<number> {
  const text = (await request(server.url, '/ext/metrics', { headers: [['Authorization', `Bearer ${metricsToken}`]] })).text;
  return Number(new RegExp(`^api_auth_verifications_total\\{outcome="${outcome}"\\} (\\d+)$`, 'm').exec(text)?.[1]);
}

t.test('newToken, setAuthToken and an Info call through the gateway; revokeToken shuts it out', async (t) => {
  const token = await auth.newToken(server.password, ['/ext/info']);
  t.type(token, 'string');
  t.match(token as string, /^[A-Za-z0-9_-]{76}$/);

  avalanche.setAuthToken(token as string);
  const version = await avalanche.Info().getNodeVersion();
  t.equal(version, NODE_VERSION, 'the upstream answered through the gateway');
  const seen = upstream.seen[upstream.seen.length - 1];
  t.equal(seen.url, '/ext/info');
  t.equal(seen.headers.authorization, undefined, 'the token stayed at the gateway');
  t.match(seen.headers['content-type'], /^application\/json/);

  t.equal(await auth.revokeToken(server.password, token as string), true);
  const before = upstream.seen.length;
  await t.rejects(avalanche.Info().getNodeVersion(), { code: 'ERR_BAD_REQUEST' }, 'a revoked token is refused (a 4xx)');
  t.equal(await refusals('revoked'), 1, 'as revoked');
  t.equal(upstream.seen.length, before, 'and never reaches the node');
});

t.test('changePassword: the old password and its tokens stop working', async (t) => {
  const token = await auth.newToken(server.password, ['*']);
  const next = randomPassword();
  t.equal(await auth.changePassword(server.password, next), true);
  await t.rejects(auth.newToken(server.password, ['*']), { message: 'incorrect password' }, "the SDK reports the node's reason");
  avalanche.setAuthToken(token as string);
  await t.rejects(avalanche.Info().getNodeVersion(), { code: 'ERR_BAD_REQUEST' }, 'a token of the old password is refused');
  metricsToken = await newToken(server.url, next, ['/ext/metrics']);
  t.equal(await refusals('earlier generation'), 1, 'as one of an earlier generation');
  const fresh = await auth.newToken(next, ['/ext/info']);
  avalanche.setAuthToken(fresh as string);
  t.equal(await avalanche.Info().getNodeVersion(), NODE_VERSION, 'a token of the new password works');
});
