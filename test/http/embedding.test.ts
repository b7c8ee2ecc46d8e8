// The library entry (package.json "exports" -> build/host/index.js): the two embedding
// examples of docs/reference/library.md, run as they are printed, and the API they use: createAuth,
// mount, protect, authorize, verify, metrics, close.
import t, { type Test } from 'tap';
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { REASONS, authUrl, newToken, refusalBody } from '../helpers/auth.js';
import { jsonrpc, request } from '../helpers/http.js';
import { PROGRAM_ENV, ROOT, tempDir, untracked, type Exit } from '../helpers/server.js';
import { mountedOnApp } from '../helpers/library.js';
import { closedPort } from '../helpers/upstream.js';
import { LATENCY_SAMPLE_EVERY } from '../../build/host/ops/metrics.js';
import * as library from '../../build/host/index.js';
import { Outcome, VERDICTS, createAuth, type Auth } from '../../build/host/index.js';

/** The code block that follows `<!-- readme-test: name -->` in the library's reference. */
function readmeExample(name: string): string {
  const readme = readFileSync(join(ROOT, 'docs', 'reference', 'library.md'), 'utf8');
  const marker = readme.indexOf(`<!-- readme-test: ${name} -->`);
  if (marker < 0) throw new Error(`docs/reference/library.md has no example marked ${name}`);
  const match = /```js\n([\s\S]*?)```/.exec(readme.slice(marker));
  if (match === null) throw new Error(`no js block after the ${name} marker`);
  return match[1];
}

interface Example {
  stdout(): string;
  stop(): Promise<Exit>;
}

/**
 * Runs a README example as an operator would: saved as a file (inside the package, so
 * that `import ... from 'api-auth'` resolves to this package), started with `cwd` as its
 * working folder and PORT set, until it prints "listening".
 */
async function runExample(t: Test, name: string, cwd: string, port: number): Promise<Example> {
  const folder = mkdtempSync(join(ROOT, 'build', 'readme-example-'));
  t.teardown(() => rmSync(folder, { recursive: true, force: true }));
  const file = join(folder, `${name}.mjs`);
  writeFileSync(file, readmeExample(name));
  const child = spawn(...untracked(process.execPath, [file]), {
    cwd,
    env: { ...PROGRAM_ENV, PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  let err = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    err += chunk;
  });
  const exited = new Promise<Exit>((resolve) => child.on('close', (code, signal) => resolve({ code, signal })));
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not listen: ${out}${err}`)), 15_000);
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
      if (out.includes('listening')) {
        clearTimeout(timer);
        resolve();
      }
    });
    void exited.then(() => reject(new Error(`${name} exited: ${out}${err}`)));
  });
  return {
    stdout: () => out,
    async stop() {
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 10_000);
      const exit = await exited;
      clearTimeout(timer);
      return exit;
    },
  };
}

t.test('the package entry exports the library', async (t) => {
  const viaName = (await import('api-auth')) as unknown as typeof library;
  t.equal(viaName.createAuth, library.createAuth, '"api-auth" resolves to build/host/index.js');
  for (const name of ['createAuth', 'startServer', 'parseArgs', 'createLogger', 'Outcome', 'VERDICTS', 'REFUSALS']) {
    t.ok(name in library, `exports ${name}`);
  }
});

t.test('the README examples run as printed: uWebSockets.js mount + protect, then node:http + authorize', async (t) => {
  const cwd = tempDir(t);
  const port = await closedPort();
  const base = `http://127.0.0.1:${port}`;

  const uws = await runExample(t, 'embedding-uws', cwd, port);
  const password = readFileSync(join(cwd, 'password.txt'), 'utf8').trim();
  t.match(password, /^[A-Za-z0-9]{32}$/, 'the password file was generated');
  const token = await newToken(base, password, ['/ext/info']);
  const issue = async (params: Record<string, unknown>): Promise<string> =>
    (await jsonrpc(authUrl(base), 'auth.newToken', { password, endpoints: ['/ext/info'], ...params })).result?.token as string;
  const limited = await issue({ rateLimit: '1/h', burst: 3 });
  const scoped = await issue({ methods: ['info.getNodeVersion'] });
  const elsewhere = await issue({ allowedClients: ['10.0.0.0/8'] });
  const granted = await request(base, '/ext/info', { method: 'POST', headers: [['Authorization', `Bearer ${token}`]], body: '{}' });
  t.equal(granted.status, 200);
  t.same(JSON.parse(granted.text).result, { version: 'my-node/1.0' });
  const refused = await request(base, '/ext/info', { method: 'POST', body: '{}' });
  t.equal(refused.status, 401);
  t.equal(refused.headers['www-authenticate'], 'Bearer');
  t.equal(refused.text, refusalBody(REASONS.noToken));
  const wrong = await jsonrpc(authUrl(base), 'auth.newToken', { password: 'wrong', endpoints: ['*'] });
  t.same(wrong.error, { code: -32000, message: 'incorrect password' });
  t.equal((await request(base, '/ext/auth')).status, 405, 'GET /ext/auth: 405');
  t.equal((await uws.stop()).code, 0, 'it stops on SIGTERM');

  // Same folder, so the same password file and data folder: the token is still good.
  const http = await runExample(t, 'embedding-verify', cwd, port);
  const ok = await request(base, '/ext/info', { headers: [['Authorization', `Bearer ${token}`]] });
  t.equal(ok.status, 200);
  const none = await request(base, '/ext/info');
  t.equal(none.status, 401);
  t.equal(none.headers['www-authenticate'], 'Bearer');
  t.equal(none.headers['content-type'], 'application/json');
  t.equal(none.text, refusalBody(REASONS.noToken), 'the same refusal as the standalone gate');
  const notGranted = await request(base, '/ext/health?x=1', { headers: [['Authorization', `Bearer ${token}`]] });
  t.equal(notGranted.text, refusalBody(REASONS.notGranted));
  const badPath = await request(base, '/ext/./info', { headers: [['Authorization', `Bearer ${token}`]] });
  t.equal(badPath.status, 400);
  t.equal(badPath.headers['www-authenticate'], undefined);

  // The node:http example hands authorize() the client and the body: the gateway's whole admission.
  const post = (bearer: string, body?: string) =>
    request(base, '/ext/info', {
      method: 'POST',
      headers: [
        ['Authorization', `Bearer ${bearer}`],
        ['Content-Type', 'application/json'],
      ],
      body,
    });
  const calls = (n: number) =>
    JSON.stringify(Array.from({ length: n }, (_, id) => ({ jsonrpc: '2.0', id, method: 'info.getNodeVersion' })));
  t.equal((await post(limited, calls(2))).status, 200, 'a token with limits: a batch of 2 of a burst of 3');
  const over = await post(limited, calls(4));
  t.equal(over.status, 429, 'a batch of 4, more than the burst');
  t.equal(over.headers['retry-after'], undefined, 'no wait helps it');
  t.match(JSON.parse(over.text), { error: { code: -32005, message: /smaller than these 4 calls/ } });
  const trailing = await post(limited, `${calls(1)} x`);
  t.equal(trailing.status, 400, 'a body with bytes after its batch: not read, refused');
  t.match(JSON.parse(trailing.text), { error: { code: -32600, message: /not one JSON value alone/ } });
  t.equal((await post(limited, '{"jsonrpc":"2.0","id":5,"method":"info.getNodeVersion"}')).status, 200, 'the refusals spent nothing');
  const past = await post(limited, '{"jsonrpc":"2.0","id":6,"method":"info.getNodeVersion"}');
  t.equal(past.status, 429, 'then past the rate');
  t.equal(past.headers['retry-after'], '3600');
  t.match(JSON.parse(past.text), { error: { code: -32005 }, id: 6 }, 'its id echoed');
  t.equal((await post(scoped, '{"jsonrpc":"2.0","id":1,"method":"info.getNodeVersion"}')).status, 200, 'a scoped token: a call it allows');
  const outside = await post(scoped, '{"jsonrpc":"2.0","id":2,"method":"info.getNodeID"}');
  t.match(
    JSON.parse(outside.text),
    { error: { code: -32047, message: 'the provided auth token does not allow method "info.getNodeID"' }, id: 2 },
    'a call outside its methods: the node never runs it',
  );
  t.equal(
    (await request(base, '/ext/info', { headers: [['Authorization', `Bearer ${scoped}`]] })).status,
    403,
    'no body: no call to allow',
  );
  const notHere = await post(elsewhere, calls(1));
  t.equal(notHere.status, 403, "a token for other clients: the node's client address is checked");
  t.match(JSON.parse(notHere.text), { error: { code: -32048 } });
  t.equal((await http.stop()).code, 0);
});

/** createAuth on a fresh folder, mounted on an App of this process listening on a free port. */
async function mounted(t: Test, dir: string, options: Partial<Parameters<typeof createAuth>[0]> = {}) {
  const lines: string[] = [];
  const auth = await createAuth({
    passwordFile: join(dir, 'password'),
    dataDir: join(dir, 'data'),
    log: library.createLogger((l) => lines.push(l)),
    ...options,
  });
  const { base, close } = await mountedOnApp(t, auth, (app) => {
    app.post(
      '/ext/info',
      auth.protect((res) => {
        res.end('info');
      }),
    );
    app.get(
      '/ext/health',
      auth.protect((res) => {
        res.end('healthy');
      }),
    );
  });
  const password = readFileSync(join(dir, 'password'), 'utf8').trim();
  return { auth, base, password, lines, close };
}

t.test('verdicts: the same status, headers and body as the standalone gate, one frozen object per outcome', async (t) => {
  const dir = tempDir(t);
  const { auth, base, password } = await mounted(t, dir, { publicEndpoints: ['/ext/health'] });
  const token = await newToken(base, password, ['/ext/info']);

  t.same(auth.verify(token, '/ext/info'), { ok: true, outcome: Outcome.Valid, status: 200, reason: '', headers: {}, body: '' });
  t.equal(auth.authorize(`Bearer ${token}`, '/ext/info'), VERDICTS[Outcome.Valid], 'a shared object');
  t.ok(Object.isFrozen(VERDICTS[Outcome.NoToken]));
  const cases: [string, library.Verdict, Outcome, string][] = [
    ['no header', auth.authorize('', '/ext/info'), Outcome.NoToken, REASONS.noToken],
    ['another scheme', auth.authorize('Basic eDp5', '/ext/info'), Outcome.BadHeader, REASONS.badHeader],
    ['a malformed token', auth.verify('abc', '/ext/info'), Outcome.Malformed, REASONS.malformed],
    ['a path not granted', auth.verify(token, '/ext/bc/X'), Outcome.NotGranted, REASONS.notGranted],
  ];
  for (const [name, verdict, outcome, reason] of cases) {
    t.match(verdict, { ok: false, outcome, status: 401, reason, body: refusalBody(reason) }, name);
    t.same(verdict.headers, { 'Content-Type': 'application/json', 'WWW-Authenticate': 'Bearer' }, `${name}: headers`);
  }
  const badPath = auth.authorize(`Bearer ${token}`, '/ext/../ext/info');
  t.match(badPath, { ok: false, outcome: Outcome.BadPath, status: 400 });
  t.same(badPath.headers, { 'Content-Type': 'application/json' }, 'a bad path is not about tokens: no challenge');
  t.equal(auth.authorize('', '/ext/health').ok, true, 'a public endpoint needs no token');

  const protectedHealth = await request(base, '/ext/health');
  t.equal(protectedHealth.text, 'healthy', 'protect() lets a public endpoint through');
  const protectedInfo = await request(base, '/ext/info', { method: 'POST', body: '{}' });
  t.equal(protectedInfo.text, refusalBody(REASONS.noToken), 'protect() refuses without a token; the handler never runs');

  const text = await auth.metrics.metrics();
  t.match(text, /^api_auth_verifications_total\{outcome="valid"\} [1-9]/m, 'the metrics count the checks');
  t.match(text, /^api_auth_tokens_issued_total 1$/m);
});

t.test('verify() is timed as authorize() is: one check in LATENCY_SAMPLE_EVERY of either kind is sampled', async (t) => {
  const dir = tempDir(t);
  const { auth, base, password } = await mounted(t, dir);
  const token = await newToken(base, password, ['/ext/info']);
  const timed = async () => Number(/^api_auth_verification_duration_seconds_count (\d+)$/m.exec(await auth.metrics.metrics())?.[1]);
  t.equal(await timed(), 0, 'no check yet');
  for (let i = 0; i < LATENCY_SAMPLE_EVERY; i++) auth.verify(token, '/ext/info');
  t.equal(await timed(), 1, 'bare tokens are sampled');
  for (let i = 0; i < LATENCY_SAMPLE_EVERY; i++) auth.authorize(`Bearer ${token}`, '/ext/info');
  t.equal(await timed(), 2, 'headers are sampled');
});

t.test('close() releases the data folder: a new createAuth on it keeps the tokens; calls are audited', async (t) => {
  const dir = tempDir(t);
  const first = await mounted(t, dir);
  const token = await newToken(first.base, first.password, ['*']);
  t.ok(
    first.lines.some((l) => l.includes('"msg":"audit"') && l.includes('"method":"auth.newToken"')),
    'an audit line',
  );
  t.notOk(
    first.lines.some((l) => l.includes(token) || l.includes(first.password)),
    'without the token or the password',
  );
  await t.rejects(
    createAuth({ passwordFile: join(dir, 'password'), dataDir: join(dir, 'data'), log: library.createLogger(() => undefined) }),
    /another api-auth is using the data folder/,
    'the folder is locked while open',
  );
  await first.close();
  const second: Auth = await createAuth({
    passwordFile: join(dir, 'password'),
    dataDir: join(dir, 'data'),
    log: library.createLogger(() => undefined),
  });
  t.teardown(() => second.close());
  t.equal(second.verify(token, '/ext/info').ok, true, 'the token survived');
});

t.test('bad options are refused before anything starts', async (t) => {
  const dir = tempDir(t);
  mkdirSync(join(dir, 'data'));
  const base = { passwordFile: join(dir, 'password'), dataDir: join(dir, 'data'), log: library.createLogger(() => undefined) };
  await t.rejects(createAuth({ ...base, tokenLifetime: 0 }), { code: 'API_AUTH_BAD_OPTION', option: 'tokenLifetime' });
  await t.rejects(createAuth({ ...base, tokenLifetime: 'soon' }), /tokenLifetime/);
  await t.rejects(createAuth({ ...base, publicEndpoints: ['/ext/*'] }), /publicEndpoints/);
  await t.rejects(createAuth({ ...base, publicEndpoints: ['/ext/../x'] }), /publicEndpoints/);
  await t.rejects(createAuth({ ...base, passwordFile: join(dir, 'missing', 'password') }), /does not exist/);
});

t.test("the fleet's errors and the core's grant refusals have stable codes in the error table", async (t) => {
  const fleet = new library.FleetError("the fleet's etcd did not answer");
  t.ok(fleet instanceof library.ApiAuthError, "a FleetError is one of api-auth's errors");
  t.match(fleet, { name: 'FleetError', code: 'API_AUTH_FLEET_UNAVAILABLE', rpcCode: library.RpcCode.Unavailable, httpStatus: 200 });
  const answers = Object.entries(library.GRANT_ERRORS);
  t.equal(new Set(answers.map(([, a]) => a.code)).size, answers.length, 'one code per refusal');
  for (const [refusal, answer] of answers) {
    t.match(answer.code, /^API_AUTH_GRANT_[A-Z_]+$/, refusal);
    // A full table is the node's limit; any other refusal is the client's list.
    t.equal(answer.rpcCode, refusal === 'table-full' ? library.RpcCode.ResourceLimit : library.RpcCode.InvalidParams, refusal);
  }
});

t.test("protect() enforces a token's limits: its clients and its rate, as the standalone gate does", async (t) => {
  const dir = tempDir(t);
  const { base, password } = await mounted(t, dir);
  const issue = async (params: Record<string, unknown>): Promise<string> =>
    (await jsonrpc(`${base}/ext/auth`, 'auth.newToken', { password, endpoints: ['/ext/info'], ...params })).result?.token as string;
  const limited = await issue({ rateLimit: '1/h', burst: 1 });
  const post = (token: string) => request(base, '/ext/info', { method: 'POST', headers: [['Authorization', `Bearer ${token}`]] });
  t.equal((await post(limited)).text, 'info', 'within the burst: the handler runs (a request without a body: one call)');
  const withBody = await request(base, '/ext/info', {
    method: 'POST',
    body: '{"jsonrpc":"2.0","id":1,"method":"info.getNodeID"}',
    headers: [['Authorization', `Bearer ${await issue({ rateLimit: '1/h', burst: 5 })}`]],
  });
  t.equal(withBody.status, 400, 'a body protect() cannot judge (the handler reads it): refused, never run');
  t.match(JSON.parse(withBody.text), {
    error: { code: -32600, message: /protect\(\) hands the body to the handler unread.*auth\.authorize/ },
  });
  const refused = await post(limited);
  t.equal(refused.status, 429, 'past the rate');
  t.equal(refused.headers['retry-after'], '3600');
  t.match(JSON.parse(refused.text), { error: { code: -32005 } });
  const elsewhere = await issue({ allowedClients: ['10.0.0.0/8'] });
  const notHere = await post(elsewhere);
  t.equal(notHere.status, 403, 'from a client not allowed');
  t.match(JSON.parse(notHere.text), { error: { code: -32048, message: 'the provided auth token may not be used from this client' } });
});
