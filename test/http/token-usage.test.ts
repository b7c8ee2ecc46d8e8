// Usage: lastUsedAt and requests for every token, with limits or without,
// counted by the core; kept across a clean stop and, to within one snapshot period, a kill -9.
import t, { type Test } from 'tap';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { call, issueToken, listTokens } from '../helpers/auth.js';
import { request } from '../helpers/http.js';
import { CLOCK_START, manualClock, serveInProcess } from '../helpers/library.js';
import { randomPassword, sleep, tempDir } from '../helpers/server.js';
import { openClient, startWsUpstream, wsUrl } from '../helpers/ws-upstream.js';
import { startClocked } from '../helpers/clocked.js';

const INFO = '/ext/info';

function iso(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

t.test('every token counts its calls let through, with limits or without; a refused call counts nothing', async (t) => {
  const time = manualClock();
  const server = await serveInProcess(t, { cheapChecks: true, clock: time.clock });
  const plain = (await issueToken(server.url, server.password)).token;
  const scoped = (await issueToken(server.url, server.password, { methods: ['info.*'] })).token;
  const limited = (await issueToken(server.url, server.password, { rateLimit: '100/s' })).token;
  await issueToken(server.url, server.password, { label: 'unused' });
  for (let i = 0; i < 3; i++) {
    t.equal((await call(server.url, INFO, plain)).status, 200);
    time.now += 1500;
  }
  t.equal((await call(server.url, '/ext/health', plain)).status, 401, 'a path the token is not granted');
  time.now += 60_000;
  t.equal((await call(server.url, INFO, plain)).status, 200);
  const body = JSON.stringify({ jsonrpc: '2.0', method: 'info.getNodeVersion', id: 1 });
  t.equal(
    (
      await request(server.url, INFO, {
        method: 'POST',
        headers: [
          ['Authorization', `Bearer ${scoped}`],
          ['Content-Type', 'application/json'],
        ],
        body,
      })
    ).status,
    200,
  );
  t.equal((await call(server.url, INFO, limited)).status, 200);
  const tokens = await listTokens(server.url, server.password);
  const last = CLOCK_START + 3 * 1500 + 60_000;
  t.match(tokens[0], { requests: 4, lastUsedAt: iso(last) }, 'a token without limits: its four calls, not the refused one');
  t.match(tokens[1], { requests: 1, lastUsedAt: iso(last) }, 'a token with a method scope');
  t.match(tokens[2], { requests: 1, lastUsedAt: iso(last) }, 'a token with limits');
  t.match(tokens[3], { requests: 0, lastUsedAt: null }, 'a token not used yet');
  const reader = (await issueToken(server.url, server.password, { endpoints: ['/ext/metrics'] })).token;
  const metrics = (await request(server.url, '/ext/metrics', { headers: [['Authorization', `Bearer ${reader}`]] })).text;
  t.match(metrics, /\napi_auth_usage_uncounted_total 0\n/, 'no call went uncounted');
});

t.test("WebSocket: each message of a token without limits counts, a batch its calls, as a token with limits' messages do", async (t) => {
  const time = manualClock();
  const upstream = await startWsUpstream(t);
  const server = await serveInProcess(t, {
    cheapChecks: true,
    clock: time.clock,
    args: ['--upstream', `http://127.0.0.1:${upstream.port}`],
  });
  const path = '/ext/bc/C/ws';
  const plain = (await issueToken(server.url, server.password, { endpoints: [path] })).token;
  const limited = (await issueToken(server.url, server.password, { endpoints: [path], rateLimit: '100/s' })).token;
  const batch = JSON.stringify([
    { jsonrpc: '2.0', id: 'a', method: 'eth_chainId' },
    { jsonrpc: '2.0', id: 'b', method: 'eth_chainId' },
  ]);
  for (const token of [plain, limited]) {
    const client = await openClient(t, wsUrl(server.url, path), { token });
    t.match(await client.call('eth_chainId'), { result: '0xa86a' });
    time.now += 60_000;
    const next = client.received.length;
    client.socket.send(` \n${batch}`);
    t.equal(JSON.parse((await client.message(next)).data.toString('utf8')).length, 2, 'a batch (after whitespace) is forwarded');
    t.match(await client.call('eth_chainId'), { result: '0xa86a' });
    client.socket.close();
    await client.closed;
  }
  const tokens = await listTokens(server.url, server.password);
  t.match(
    tokens[0],
    { requests: 5, lastUsedAt: iso(CLOCK_START + 60_000) },
    'without limits: the upgrade, then each message, the batch as its 2 calls',
  );
  t.match(
    tokens[1],
    { requests: 5, lastUsedAt: iso(CLOCK_START + 2 * 60_000) },
    'with limits: the upgrade too, as one call against its rate',
  );
});

/** Waits until the usage file of `dir` shows `requests` for some token: the snapshot's write is the owner's, off the request path. */
async function snapshotHolds(dir: string, requests: number): Promise<void> {
  const path = join(dir, 'data', 'usage');
  for (;;) {
    if (existsSync(path)) {
      const saved = JSON.parse(readFileSync(path, 'utf8')) as { tokens: number[][] };
      if (saved.tokens.some((e) => e[1] === requests)) return;
    }
    await sleep(50);
  }
}

/** A folder with a data folder and a password file, and a service on them whose clock the test drives. */
async function clockedService(t: Test) {
  const dir = tempDir(t);
  mkdirSync(join(dir, 'data'), { mode: 0o700 });
  const password = randomPassword();
  writeFileSync(join(dir, 'password'), password, { mode: 0o600 });
  return { dir, password, started: await startClocked(t, dir, CLOCK_START) };
}

t.test('usage survives a kill -9 up to its last snapshot (every 30 s of the clock), and a clean stop whole', async (t) => {
  const { dir, password, started } = await clockedService(t);
  let server = started;
  const plain = (await issueToken(server.url, password)).token;
  const limited = (await issueToken(server.url, password, { rateLimit: '100/s' })).token;
  for (let i = 0; i < 3; i++) t.equal((await call(server.url, INFO, plain)).status, 200);
  t.equal((await call(server.url, INFO, limited)).status, 200);
  server.child.kill('SIGUSR2');
  await server.waitForLog((l) => l.msg === 'clock moved');
  await snapshotHolds(dir, 3);
  // Counted after the snapshot: what a kill -9 may lose.
  t.equal((await call(server.url, INFO, plain)).status, 200);
  server.child.kill('SIGKILL');
  await server.exited;

  server = await startClocked(t, dir, CLOCK_START + 60_000);
  let tokens = await listTokens(server.url, password);
  t.match(tokens[0], { requests: 3, lastUsedAt: iso(CLOCK_START) }, "the snapshot's count, not the call after it");
  t.match(tokens[1], { requests: 1, lastUsedAt: iso(CLOCK_START) }, 'a token with limits too');
  t.equal((await call(server.url, INFO, plain)).status, 200);
  t.equal((await server.stop('SIGTERM')).code, 0);

  server = await startClocked(t, dir, CLOCK_START + 120_000);
  tokens = await listTokens(server.url, password);
  t.match(tokens[0], { requests: 4, lastUsedAt: iso(CLOCK_START + 60_000) }, 'a clean stop writes the counts it has');
  t.equal((await server.stop('SIGTERM')).code, 0);
});

t.test('a damaged usage file is dropped with a warning: usage counts again from 0, and the service starts', async (t) => {
  const { dir, password, started } = await clockedService(t);
  let server = started;
  const plain = (await issueToken(server.url, password)).token;
  t.equal((await call(server.url, INFO, plain)).status, 200);
  t.equal((await server.stop('SIGTERM')).code, 0);
  writeFileSync(join(dir, 'data', 'usage'), '{"version":1,"tokens":[[0,-5,0]]}', { mode: 0o600 });
  server = await startClocked(t, dir, CLOCK_START + 1000);
  const warning = await server.waitForLog((l) => l.level === 'warn' && /usage file is damaged/.test(String(l.msg)));
  t.match(warning, { reason: /\[0,-5,0\]/ }, 'names the bad entry');
  t.match((await listTokens(server.url, password))[0], { requests: 0, lastUsedAt: null });
  t.equal((await call(server.url, INFO, plain)).status, 200);
  t.match((await listTokens(server.url, password))[0], { requests: 1 });
});

t.test(
  'usage entries out of bounds or listed twice, and a usage that is a folder or a FIFO, are a damaged file: dropped, and the service starts',
  async (t) => {
    const { dir, password, started } = await clockedService(t);
    let server = started;
    const plain = (await issueToken(server.url, password)).token;
    t.equal((await call(server.url, INFO, plain)).status, 200);
    t.equal((await server.stop('SIGTERM')).code, 0);
    const path = join(dir, 'data', 'usage');
    const cases: [string, () => void, RegExp][] = [
      [
        'lastUsedMs 2^53-1',
        () => writeFileSync(path, `{"version":1,"tokens":[[0,1,${Number.MAX_SAFE_INTEGER}]]}`),
        /lastUsedMs after 2200/,
      ],
      [
        'requests over the max',
        () => writeFileSync(path, '{"version":1,"tokens":[[0,1000000000000001,0]]}'),
        /more than 1000000000000000 requests/,
      ],
      [
        'a serial twice',
        () => writeFileSync(path, `{"version":1,"tokens":[[0,1,${CLOCK_START}],[0,2,${CLOCK_START}]]}`),
        /serial 0 is listed twice/,
      ],
      [
        'a FIFO',
        () => {
          rmSync(path, { force: true });
          execFileSync('mkfifo', ['-m', '600', path]);
        },
        /not a regular file/,
      ],
      [
        'a folder',
        () => {
          rmSync(path, { force: true });
          mkdirSync(path);
        },
        /is a folder/,
      ],
    ];
    for (const [name, make, reason] of cases) {
      make();
      server = await startClocked(t, dir, CLOCK_START + 1000);
      const warning = await server.waitForLog((l) => l.level === 'warn' && /usage file is damaged/.test(String(l.msg)));
      t.match(warning, { reason }, `${name}: named`);
      t.match((await listTokens(server.url, password))[0], { requests: 0, lastUsedAt: null }, `${name}: counts from 0`);
      t.equal((await server.stop('SIGKILL')).signal, 'SIGKILL');
      rmSync(path, { recursive: true, force: true });
    }
  },
);
