// Usage (issue 25): lastUsedAt and requests for every token, with limits or without,
// counted by the core.
import t from 'tap';
import { authUrl, call } from '../helpers/auth.js';
import { jsonrpc, request } from '../helpers/http.js';
import { CLOCK_START, manualClock, serveInProcess } from '../helpers/library.js';

const INFO = '/ext/info';

async function issue(base: string, password: string, extra: Record<string, unknown> = {}): Promise<string> {
  const response = await jsonrpc(authUrl(base), 'auth.newToken', { password, endpoints: [INFO], ...extra });
  if (response.result === undefined) throw new Error(`newToken failed: ${JSON.stringify(response.error)}`);
  return (response.result as { token: string }).token;
}

async function listed(base: string, password: string): Promise<Record<string, unknown>[]> {
  const response = await jsonrpc(authUrl(base), 'auth.listTokens', { password });
  return (response.result as { tokens: Record<string, unknown>[] }).tokens;
}

function iso(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

t.test('every token counts its calls let through, with limits or without; a refused call counts nothing', async (t) => {
  const time = manualClock();
  const server = await serveInProcess(t, { clock: time.clock });
  const plain = await issue(server.url, server.password);
  const scoped = await issue(server.url, server.password, { methods: ['info.*'] });
  const limited = await issue(server.url, server.password, { rateLimit: '100/s' });
  await issue(server.url, server.password, { label: 'unused' });
  for (let i = 0; i < 3; i++) {
    t.equal((await call(server.url, INFO, plain)).status, 200);
    time.now += 1500;
  }
  t.equal((await call(server.url, '/ext/health', plain)).status, 401, 'a path the token is not granted');
  time.now += 60_000;
  t.equal((await call(server.url, INFO, plain)).status, 200);
  const body = JSON.stringify({ jsonrpc: '2.0', method: 'info.getNodeVersion', id: 1 });
  t.equal((await request(server.url, INFO, { method: 'POST', headers: [['Authorization', `Bearer ${scoped}`],
    ['Content-Type', 'application/json']], body })).status, 200);
  t.equal((await call(server.url, INFO, limited)).status, 200);
  const tokens = await listed(server.url, server.password);
  const last = CLOCK_START + 3 * 1500 + 60_000;
  t.match(tokens[0], { requests: 4, lastUsedAt: iso(last) }, 'a token without limits: its four calls, not the refused one');
  t.match(tokens[1], { requests: 1, lastUsedAt: iso(last) }, 'a token with a method scope');
  t.match(tokens[2], { requests: 1, lastUsedAt: iso(last) }, 'a token with limits');
  t.match(tokens[3], { requests: 0, lastUsedAt: null }, 'a token not used yet');
  const reader = await issue(server.url, server.password, { endpoints: ['/ext/metrics'] });
  const metrics = (await request(server.url, '/ext/metrics', { headers: [['Authorization', `Bearer ${reader}`]] })).text;
  t.match(metrics, /\napi_auth_usage_uncounted_total 0\n/, 'no call went uncounted');
});
