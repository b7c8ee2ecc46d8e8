// The token inventory over HTTP: labels, expiresIn, ids, auth.listTokens,
// auth.revokeToken by id, the limit on live tokens, and the list across restarts.
import t, { type Test } from 'tap';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  ALREADY_REVOKED,
  INCORRECT_PASSWORD,
  REASONS,
  REVOKED,
  authUrl,
  call,
  callWithHeader,
  changePassword,
  expectGranted,
  expectRefused,
} from '../helpers/auth.js';
import { jsonrpc } from '../helpers/http.js';
import { CLOCK_START, manualClock, serveAgain, serveInProcess, type LibraryServer } from '../helpers/library.js';
import { askToken, listTokens } from '../helpers/auth.js';

t.jobs = 2;

const WRONG = 'not-the-password';
const RESOURCE_LIMIT = -32041;
const INVALID_PARAMS = -32602;
/**
 * The inventory is these tests' subject, not the HTTP threads (test/http/threads.test.ts):
 * one thread, whose start costs about a third less CPU time (a clock of the test's own has one anyway).
 */
const ONE_THREAD = ['--http-threads', '1'];

interface Listed {
  id: string;
  label: string | null;
  endpoints: string[];
  methods: string[] | null;
  issuedAt: string;
  expiresAt: string;
  revoked: boolean;
}

async function issued(t: Test, server: LibraryServer, params: Record<string, unknown> = {}): Promise<{ token: string; id: string }> {
  const answer = await askToken(server.url, server.password, params);
  t.ok(answer.result, `newToken ${JSON.stringify(params)} answers a result: ${JSON.stringify(answer.error)}`);
  return answer.result as { token: string; id: string };
}

async function revokeId(server: LibraryServer, id: unknown, password = server.password): Promise<unknown> {
  const answer = await jsonrpc(authUrl(server.url), 'auth.revokeToken', { password, id });
  return answer.error ?? answer.result;
}

/** A value as ASCII, for assertion names: a raw C1 control there would garble the TAP stream. */
function shown(value: unknown): string {
  return (JSON.stringify(value) ?? String(value))
    .replace(/[^\x20-\x7e]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`)
    .slice(0, 60);
}

function iso(ms: number): string {
  return new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

t.test('newToken answers {token, id}; listTokens lists each live token in issue order, with its fields and never the token', async (t) => {
  const time = manualClock();
  const server = await serveInProcess(t, { cheapChecks: true, clock: time.clock });
  const first = await issued(t, server, { label: 'CI deploy bot' });
  time.now += 5000;
  const second = await issued(t, server, { endpoints: ['/ext/health', '/ext/info', '/ext/bc/X/*'] });
  t.same(Object.keys(first), ['token', 'id'], 'the result holds token, then id');
  t.match(first.id, /^t(0|[1-9][0-9]*)$/, 'an id is "t" and a decimal number');
  t.not(first.id, second.id, 'each token has its own id');
  const tokens = await listTokens<Listed>(server.url, server.password);
  t.same(
    tokens,
    [
      {
        id: first.id,
        label: 'CI deploy bot',
        endpoints: ['/ext/info'],
        methods: null,
        rateLimit: null,
        burst: null,
        quota: null,
        allowedClients: null,
        lastUsedAt: null,
        requests: 0,
        issuedAt: iso(CLOCK_START),
        expiresAt: iso(CLOCK_START + 12 * 3600_000),
        revoked: false,
        rotatedFrom: null,
        rotatedTo: null,
      },
      {
        id: second.id,
        label: null,
        endpoints: ['/ext/bc/X/*', '/ext/health', '/ext/info'],
        methods: null,
        rateLimit: null,
        burst: null,
        quota: null,
        allowedClients: null,
        lastUsedAt: null,
        requests: 0,
        issuedAt: iso(CLOCK_START + 5000),
        expiresAt: iso(CLOCK_START + 5000 + 12 * 3600_000),
        revoked: false,
        rotatedFrom: null,
        rotatedTo: null,
      },
    ],
    'both listed: id, label (null without one), endpoints (the canonical list), methods and limits null, no use yet, RFC 3339 times, revoked',
  );
  const reply = JSON.stringify(tokens);
  t.notOk(reply.includes(first.token) || reply.includes(second.token), 'no token in the list');
  expectGranted(t, await call(server.url, '/ext/info', first.token), '/ext/info', 'the listed token works');
});

t.test('an id cannot be used as a token', async (t) => {
  const server = await serveInProcess(t, { cheapChecks: true, args: ONE_THREAD });
  const { id } = await issued(t, server);
  expectRefused(t, await callWithHeader(server.url, '/ext/info', `Bearer ${id}`), REASONS.malformed, 'an id as the bearer token');
});

t.test("expiresIn: a duration or whole seconds sets the token's own lifetime, and the token expires then", async (t) => {
  const time = manualClock();
  const server = await serveInProcess(t, { cheapChecks: true, clock: time.clock, args: ['--api-auth-token-lifetime', '2h'] });
  const cases: [unknown, number][] = [
    ['90s', 90],
    [90, 90],
    ['1h30m', 5400],
    ['2h', 7200],
    [7200, 7200],
    ['1.5m', 90],
    [undefined, 7200],
  ];
  const ids: string[] = [];
  for (const [expiresIn] of cases) ids.push((await issued(t, server, expiresIn === undefined ? {} : { expiresIn })).id);
  const tokens = await listTokens<Listed>(server.url, server.password);
  cases.forEach(([expiresIn, seconds], i) => {
    t.equal(tokens[i].id, ids[i]);
    t.equal(tokens[i].expiresAt, iso(CLOCK_START + seconds * 1000), `expiresIn ${JSON.stringify(expiresIn)}: ${seconds} s`);
  });
  const short = await issued(t, server, { expiresIn: '90s' });
  time.now += 89_000;
  expectGranted(t, await call(server.url, '/ext/info', short.token), '/ext/info', 'a second before its own expiry');
  time.now += 1000;
  expectRefused(t, await call(server.url, '/ext/info', short.token), REASONS.expired, 'at its own expiry, long before the lifetime');
  t.notOk(
    (await listTokens<Listed>(server.url, server.password)).some((e) => e.id === short.id),
    'an expired token is no longer listed',
  );
});

t.test(
  'a bad expiresIn is invalid params naming it and the ceiling (--max-token-lifetime), before the password check; nothing is issued',
  async (t) => {
    const server = await serveInProcess(t, {
      cheapChecks: true,
      args: [...ONE_THREAD, '--api-auth-token-lifetime', '1h', '--max-token-lifetime', '1h'],
    });
    const bad: unknown[] = ['61m', 3601, '2h', 0, '0s', -5, '-5s', 1.5, '1500ms', '', 'soon', '90', true, null, [90], { s: 90 }, 1e300];
    for (const expiresIn of bad) {
      for (const password of [server.password, WRONG]) {
        const answer = await askToken(server.url, password, { expiresIn });
        t.equal(
          answer.error?.code,
          INVALID_PARAMS,
          `expiresIn ${JSON.stringify(expiresIn)} (${password === WRONG ? 'wrong' : 'right'} password)`,
        );
        t.match(answer.error?.message, /^invalid params: expiresIn must be .*from 1s to 3600s \(1h, the node's --max-token-lifetime\)/);
      }
    }
    t.same(await listTokens<Listed>(server.url, server.password), [], 'nothing was issued');
  },
);

t.test('label: 1 to 128 visible code points; anything else is invalid params naming label, and nothing is issued', async (t) => {
  const server = await serveInProcess(t, { cheapChecks: true, args: ONE_THREAD });
  const good = [
    'a',
    'CI bot (prod) #3',
    '日本語のラベル',
    'emoji \u{1F600} ok',
    '\u{1F600}'.repeat(128),
    'x'.repeat(128),
    ' padded ',
    'e\u0301 combining',
    'family \u{1F468}\u200d\u{1F469}\u200d\u{1F467}',
  ];
  for (const label of good) {
    const { id } = await issued(t, server, { label });
    t.equal(
      (await listTokens<Listed>(server.url, server.password)).find((e) => e.id === id)?.label,
      label,
      `${shown(label)} is kept as sent`,
    );
  }
  const before = (await listTokens<Listed>(server.url, server.password)).length;
  const bad: unknown[] = [
    '',
    ' ',
    '\u3000\u00a0',
    'x'.repeat(129),
    '\u{1F600}'.repeat(129),
    'tab\there',
    'new\nline',
    'cr\rhere',
    'nul\u0000',
    'del\u007f',
    'c1\u0085',
    'c1\u009b',
    'line\u2028sep',
    'para\u2029sep',
    'rlo\u202eevil',
    'isolate\u2066x\u2069',
    'lrm\u200e',
    'alm\u061c',
    'lone \ud800',
    'lone \udc00 low',
    5,
    null,
    ['x'],
    { label: 'x' },
    true,
  ];
  for (const label of bad) {
    for (const password of [server.password, WRONG]) {
      const answer = await askToken(server.url, password, { label });
      t.equal(answer.error?.code, INVALID_PARAMS, `label ${shown(label)} (${password === WRONG ? 'wrong' : 'right'} password)`);
      t.match(answer.error?.message, /^invalid params: label must be a string of 1 to 128 characters/);
    }
  }
  t.equal((await listTokens<Listed>(server.url, server.password)).length, before, 'none of them was issued');
});

t.test('revokeToken by id: revoked, then already revoked; the gate refuses the token and the list says revoked', async (t) => {
  const server = await serveInProcess(t, { cheapChecks: true, args: ONE_THREAD });
  const target = await issued(t, server, { label: 'to revoke' });
  const other = await issued(t, server);
  t.same(await revokeId(server, target.id), REVOKED, 'the first revocation revokes');
  expectRefused(t, await call(server.url, '/ext/info', target.token), REASONS.revoked, 'the revoked token');
  expectGranted(t, await call(server.url, '/ext/info', other.token), '/ext/info', 'the other token is untouched');
  t.same(
    (await listTokens<Listed>(server.url, server.password)).map((e) => [e.id, e.revoked]),
    [
      [target.id, true],
      [other.id, false],
    ],
    'listed revoked, until it expires',
  );
  t.same(await revokeId(server, target.id), ALREADY_REVOKED, 'again: already revoked');
  t.same(
    await jsonrpc(authUrl(server.url), 'auth.revokeToken', { password: server.password, token: target.token }).then((a) => a.result),
    ALREADY_REVOKED,
    'the token form agrees',
  );
});

t.test('revoking by a token marks its entry revoked too', async (t) => {
  const server = await serveInProcess(t, { cheapChecks: true, args: ONE_THREAD });
  const target = await issued(t, server);
  const answer = await jsonrpc(authUrl(server.url), 'auth.revokeToken', { password: server.password, token: target.token });
  t.same(answer.result, REVOKED);
  t.same(
    (await listTokens<Listed>(server.url, server.password)).map((e) => [e.id, e.revoked]),
    [[target.id, true]],
  );
  t.same(await revokeId(server, target.id), ALREADY_REVOKED);
});

t.test('an unknown, malformed or dead id: success, nothing revoked, and a reason', async (t) => {
  const time = manualClock();
  const server = await serveInProcess(t, { cheapChecks: true, clock: time.clock });
  const live = await issued(t, server);
  const shortLived = await issued(t, server, { expiresIn: 10 });
  const notLive = (reason: string) => ({ success: true, revocation: 'not a live token', reason });
  t.same(await revokeId(server, 't999999'), notLive('unknown id'), 'an id never issued');
  for (const malformed of ['', 'x', 't', 't-1', 't01', 'T1', ' t1', 't1 ', 't1.0', 't99999999999999999', live.token]) {
    t.same(await revokeId(server, malformed), notLive('malformed id'), `${JSON.stringify(malformed.slice(0, 20))} is not an id`);
  }
  time.now += 10_000;
  t.same(await revokeId(server, shortLived.id), notLive('unknown id'), "an expired token's id");
  const next = `new-${server.password}`;
  t.same(await changePassword(server.url, server.password, next), { success: true });
  t.same(await revokeId({ ...server, password: next }, live.id, next), notLive('unknown id'), 'the id of a token of an earlier password');
  t.same(await listTokens<Listed>(server.url, next), [], 'nothing of the earlier generation is listed');
  expectRefused(t, await call(server.url, '/ext/info', live.token), REASONS.earlierGeneration, 'and the token is of the earlier password');
});

t.test(
  'revokeToken takes token or id: both, neither or a wrong type is invalid params; a wrong password is an error whatever the id',
  async (t) => {
    const server = await serveInProcess(t, { cheapChecks: true, args: ONE_THREAD });
    const { token, id } = await issued(t, server);
    const rpc = (params: Record<string, unknown>) => jsonrpc(authUrl(server.url), 'auth.revokeToken', params);
    const both = await rpc({ password: server.password, token, id });
    t.same(both.error, { code: INVALID_PARAMS, message: 'invalid params: give token or id, not both' });
    const neither = await rpc({ password: server.password });
    t.equal(neither.error?.code, INVALID_PARAMS);
    t.match(neither.error?.message, /^invalid params: token must be a string \(or give id/);
    for (const bad of [5, null, ['t1'], { id: 't1' }, true]) {
      const answer = await rpc({ password: server.password, id: bad });
      t.same(answer.error, { code: INVALID_PARAMS, message: 'invalid params: id must be a string' }, `id ${JSON.stringify(bad)}`);
    }
    for (const target of [id, 't999999', 'junk']) {
      t.same((await rpc({ password: WRONG, id: target })).error, INCORRECT_PASSWORD, `wrong password, id ${target}`);
    }
    expectGranted(t, await call(server.url, '/ext/info', token), '/ext/info', 'none of these revoked the token');
    t.same(
      (await listTokens<Listed>(server.url, server.password)).map((e) => e.revoked),
      [false],
    );
  },
);

t.test('listTokens: a wrong password is the usual error; each call is audited with the count and nothing secret', async (t) => {
  const server = await serveInProcess(t, { cheapChecks: true, args: ONE_THREAD });
  const { token } = await issued(t, server, { label: 'audited' });
  await issued(t, server);
  t.same((await jsonrpc(authUrl(server.url), 'auth.listTokens', { password: WRONG })).error, INCORRECT_PASSWORD);
  t.equal((await jsonrpc(authUrl(server.url), 'auth.listTokens', {})).error?.message, 'invalid params: password must be a string');
  t.equal((await listTokens<Listed>(server.url, server.password)).length, 2);
  const audits = server.logs.filter((l) => l.msg === 'audit' && l.method === 'auth.listTokens');
  t.same(
    audits.map((l) => [l.level, l.outcome, l.count]),
    [
      ['warn', 'incorrect password', undefined],
      ['warn', 'invalid params', undefined],
      ['info', 'ok', 2],
    ],
  );
  const logText = JSON.stringify(server.logs);
  t.notOk(logText.includes(server.password) || logText.includes(token) || logText.includes(WRONG), 'no password or token in the log');
});

t.test('--api-auth-max-tokens: past the limit newToken is the resource-limit error and changes nothing; expiry makes room', async (t) => {
  const time = manualClock();
  const server = await serveInProcess(t, { cheapChecks: true, clock: time.clock, args: ['--api-auth-max-tokens', '3'] });
  const kept = [await issued(t, server, { expiresIn: 60 }), await issued(t, server), await issued(t, server)];
  await revokeId(server, kept[2].id);
  const refused = await askToken(server.url, server.password, { label: 'one too many', endpoints: ['/ext/bc/new'] });
  t.equal(refused.error?.code, RESOURCE_LIMIT, 'a fourth live token is refused (a revoked one counts until it expires)');
  t.match(refused.error?.message, /3 live tokens, its limit \(--api-auth-max-tokens\)/);
  t.same(
    (await listTokens<Listed>(server.url, server.password)).map((e) => e.id),
    kept.map((k) => k.id),
    'the list is unchanged',
  );
  const state = readFileSync(join(server.dataDir, 'state'));
  t.notOk(state.includes('/ext/bc/new'), 'its endpoint list was not recorded');
  time.now += 60_000;
  const room = await issued(t, server);
  t.same(
    (await listTokens<Listed>(server.url, server.password)).map((e) => e.id),
    [kept[1].id, kept[2].id, room.id],
    'once one expired, there is room again',
  );
});

t.test('--api-auth-max-tokens must be a whole number from 1 to 1000000', async (t) => {
  for (const bad of ['0', '-1', '1.5', 'many', '1000001']) {
    const { refusalOf } = await import('../helpers/library.js');
    const error = await refusalOf(['--api-auth-max-tokens', bad]);
    t.match(
      error?.message,
      /^--api-auth-max-tokens must be a whole number from 1 to 1000000 \(live tokens in the inventory\)/,
      `${bad} refused`,
    );
  }
});

t.test('the inventory survives a restart: labels, lifetimes, revocations; ids are never reused', async (t) => {
  const server = await serveInProcess(t, { cheapChecks: true, args: ONE_THREAD });
  const a = await issued(t, server, { label: 'kept', expiresIn: '10m' });
  const b = await issued(t, server);
  t.same(await revokeId(server, b.id), REVOKED);
  const before = await listTokens<Listed>(server.url, server.password);
  await server.stop();
  const again = await serveAgain(t, server);
  t.same(await listTokens<Listed>(again.url, again.password), before, 'the same list after the restart');
  expectGranted(t, await call(again.url, '/ext/info', a.token), '/ext/info', 'the listed live token verifies');
  expectRefused(t, await call(again.url, '/ext/info', b.token), REASONS.revoked, 'the listed revoked token is refused');
  const c = await issued(t, again);
  t.notOk([a.id, b.id].includes(c.id), `a new id after the restart (${c.id})`);
  t.same(
    (await listTokens<Listed>(again.url, again.password)).map((e) => e.id),
    [a.id, b.id, c.id],
    'in issue order',
  );
});

t.test('concurrent issues are all listed, each once', async (t) => {
  const server = await serveInProcess(t, { cheapChecks: true, args: ONE_THREAD });
  const answers = await Promise.all(Array.from({ length: 24 }, (_, i) => issued(t, server, { label: `n${i}` })));
  const tokens = await listTokens<Listed>(server.url, server.password);
  t.equal(tokens.length, 24);
  t.same(new Set(tokens.map((e) => e.id)), new Set(answers.map((a) => a.id)));
  await server.stop();
  const again = await serveAgain(t, server);
  t.same(await listTokens<Listed>(again.url, again.password), tokens, 'and after a restart');
});

t.test("methods comes from the token's grant: a grant with a method scope lists its patterns, one without lists null", async (t) => {
  const { decodeState, encodeState } = await import('../../build/host/state/codec.js');
  const { grantEntries } = await import('../../build/host/core/grants.js');
  const server = await serveInProcess(t, { cheapChecks: true, args: ONE_THREAD });
  const scoped = await issued(t, server, { endpoints: ['/ext/bc/C/rpc'], label: 'scoped' });
  const plain = await issued(t, server, { endpoints: ['/ext/info'] });
  await server.stop();
  // The grant the state holds for the first token, given a method scope as h-scope's newToken records one.
  const path = join(server.dataDir, 'state');
  const state = decodeState(readFileSync(path), path);
  const grant = state.grants.findIndex((g: string[]) => g.join() === '/ext/bc/C/rpc');
  state.grants[grant] = grantEntries(['/ext/bc/C/rpc'], ['net_version', 'eth_*']);
  const { writeFileSync } = await import('node:fs');
  writeFileSync(path, encodeState(state), { mode: 0o600 });
  const again = await serveAgain(t, server);
  t.same(
    (await listTokens<Listed>(again.url, again.password)).map((e) => [e.id, e.endpoints, e.methods]),
    [
      [scoped.id, ['/ext/bc/C/rpc'], ['eth_*', 'net_version']],
      [plain.id, ['/ext/info'], null],
    ],
  );
});
