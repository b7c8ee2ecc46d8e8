// Password guessing is throttled per client and overall, password checks run off the
// serving thread, and their queue is bounded. The rules are driven with plain clocks;
// the service is driven over HTTP from pinned loopback addresses (all of 127/8 is this
// machine, so each address is a client of its own).
import t from 'tap';
import { clientKey, PasswordThrottle, Tarpit } from '../build/host/throttle.js';
import { call, newToken } from './helpers/auth.js';
import { freshSource, request, rpc } from './helpers/http.js';
import type { HttpResponse } from './helpers/http.js';
import { sleep, startServer } from './helpers/server.js';

const RULE = { free: 3, firstDelay: 1000, maxDelay: 8000, forgetAfter: 60_000 };
const WIDE = { free: 1000, firstDelay: 1000, maxDelay: 8000, forgetAfter: 60_000 };

t.test('three failures are free, then each one doubles the wait up to the ceiling', async (t) => {
  const throttle = new PasswordThrottle(RULE, WIDE);
  const waits: number[] = [];
  let now = 0;
  for (let i = 0; i < 8; i++) {
    throttle.failed('10.0.0.1', now);
    waits.push(throttle.retryAfter('10.0.0.1', now));
    now += 10_000;
  }
  t.same(waits, [0, 0, 0, 1, 2, 4, 8, 8]);
});

t.test('the wait runs out, a quiet spell forgets, a correct password resets', async (t) => {
  const throttle = new PasswordThrottle(RULE, WIDE);
  for (let i = 0; i < 4; i++) throttle.failed('10.0.0.1', 0);
  t.equal(throttle.retryAfter('10.0.0.1', 0), 1);
  t.equal(throttle.retryAfter('10.0.0.1', 999), 1, 'rounded up to whole seconds');
  t.equal(throttle.retryAfter('10.0.0.1', 1000), 0);
  throttle.failed('10.0.0.1', 2000);
  t.equal(throttle.retryAfter('10.0.0.1', 2000), 2, 'the count went on');
  throttle.failed('10.0.0.1', 2000 + 60_001);
  t.equal(throttle.retryAfter('10.0.0.1', 2000 + 60_001), 0, 'forgotten after a quiet minute');
  for (let i = 0; i < 4; i++) throttle.failed('10.0.0.2', 0);
  throttle.succeeded('10.0.0.2');
  t.equal(throttle.retryAfter('10.0.0.2', 0), 0);
});

t.test('clients are throttled apart, and all of them together', async (t) => {
  const throttle = new PasswordThrottle(RULE, { ...RULE, free: 6 });
  for (let i = 0; i < 4; i++) throttle.failed('10.0.0.1', 0);
  t.equal(throttle.retryAfter('10.0.0.2', 0), 0, 'another client is not held up by one');
  for (let i = 0; i < 3; i++) throttle.failed(`10.0.1.${i}`, 0);
  t.equal(throttle.retryAfter('10.0.9.9', 0), 1, 'past the overall allowance, every client waits');
});

t.test('an IPv6 client is its /64, and the table of clients is bounded', async (t) => {
  t.equal(clientKey('2001:0db8:0001:0002:0000:0000:0000:0001'), '2001:0db8:0001:0002');
  t.equal(clientKey('192.0.2.7'), '192.0.2.7');
  const throttle = new PasswordThrottle(RULE, WIDE, 2);
  for (let i = 0; i < 4; i++) throttle.failed('2001:0db8:0001:0002:0000:0000:0000:0001', 0);
  t.equal(throttle.retryAfter('2001:0db8:0001:0002:ffff:ffff:ffff:ffff', 0), 1, 'the same /64');
  t.equal(throttle.retryAfter('2001:0db8:0001:0003:0000:0000:0000:0001', 0), 0, 'another /64');
  throttle.failed('10.0.0.1', 0);
  throttle.failed('10.0.0.2', 0);
  t.equal(throttle.retryAfter('2001:0db8:0001:0002:0000:0000:0000:0001', 0), 0, 'the longest-quiet client made room');
});

t.test('the tarpit answers later, in a batch, and at once when full', async (t) => {
  const tarpit = new Tarpit(50, 2);
  const answered: number[] = [];
  tarpit.hold(() => answered.push(1));
  tarpit.hold(() => answered.push(2));
  t.same(answered, [], 'held');
  tarpit.hold(() => answered.push(3));
  t.same(answered, [3], 'past the bound, answered at once');
  await sleep(500);
  t.same(answered, [3, 1, 2], 'the held ones, in order, once the delay is over');
});

/** auth.newToken from `source`. */
function attempt(url: string, password: string, source: string): Promise<HttpResponse> {
  return request(url, '/ext/auth', {
    method: 'POST',
    headers: [['Content-Type', 'application/json']],
    body: JSON.stringify(rpc('auth.newToken', { password, endpoints: ['/ext/info'] }, 1)),
    localAddress: source,
  });
}

const errorCode = (r: HttpResponse): number | undefined => JSON.parse(r.text).error?.code;

t.test('a guessing client gets 429 with Retry-After, then gets through with the right password', async (t) => {
  const server = await startServer(t);
  const guesser = '127.2.0.1';
  for (let i = 1; i <= 4; i++) {
    const r = await attempt(server.url, 'wrong', guesser);
    t.equal(r.status, 200, `failure ${i} is answered`);
    t.equal(errorCode(r), -32000);
  }
  const held = await attempt(server.url, server.password, guesser);
  t.equal(held.status, 429, 'even the right password waits its turn');
  t.equal(held.headers['retry-after'], '1');
  t.equal(held.headers['content-type'], 'application/json');
  t.same(JSON.parse(held.text), {
    jsonrpc: '2.0', error: { code: -32002, message: 'too many failed password attempts; retry in 1 s' }, id: null,
  });
  const other = await attempt(server.url, server.password, '127.2.0.2');
  t.equal(other.status, 200, 'another client is not held up');
  t.type(JSON.parse(other.text).result?.token, 'string');

  await sleep(1100);
  const fifth = await attempt(server.url, 'wrong', guesser);
  t.equal(errorCode(fifth), -32000);
  const longer = await attempt(server.url, server.password, guesser);
  t.equal(longer.status, 429);
  t.equal(longer.headers['retry-after'], '2', 'the wait doubled');

  await sleep(2100);
  const through = await attempt(server.url, server.password, guesser);
  t.equal(through.status, 200, 'once the wait is over, the right password works at once');
  t.type(JSON.parse(through.text).result?.token, 'string');
  for (let i = 0; i < 3; i++) t.equal(errorCode(await attempt(server.url, 'wrong', guesser)), -32000, 'and the count started over');
  t.notOk(server.stdout().includes('wrong'), 'the guesses are not logged');
});

t.test('a waiting client\'s refusals are held back, so its guesses slow to one a second per connection', async (t) => {
  const server = await startServer(t);
  const guesser = '127.4.0.1';
  for (let i = 0; i < 4; i++) await attempt(server.url, 'wrong', guesser);
  await sleep(1100);
  t.equal(errorCode(await attempt(server.url, 'wrong', guesser)), -32000, 'the fifth failure: a wait of 2 s');
  const started = Date.now();
  for (let i = 0; i < 2; i++) t.equal((await attempt(server.url, 'wrong', guesser)).status, 429);
  const elapsed = Date.now() - started;
  t.ok(elapsed >= 1500, `2 refusals in a row took ${elapsed} ms`);
  const other = await attempt(server.url, server.password, '127.4.0.2');
  t.type(JSON.parse(other.text).result?.token, 'string', 'another client is answered at once');
});

t.test('protected requests keep flowing while password checks run', async (t) => {
  const server = await startServer(t);
  const token = await newToken(server.url, server.password, ['/ext/info']);
  // Twenty checks keep the hashing thread busy for about a second.
  let checksDone = 0;
  const checks = Array.from({ length: 20 }, () => attempt(server.url, 'wrong', freshSource()).then((r) => {
    checksDone++;
    return r;
  }));
  await sleep(30);
  const checksDoneBefore = checksDone;
  let served = 0;
  for (let i = 0; i < 50; i++) {
    const r = await call(server.url, '/ext/info', token);
    if (r.status === 200) served++;
  }
  const checksDoneAfter = checksDone;
  const replies = await Promise.all(checks);
  t.equal(served, 50, 'every protected request was served');
  t.ok(replies.every((r) => errorCode(r) === -32000), 'every check was answered');
  t.ok(checksDoneAfter - checksDoneBefore < 10,
    `50 protected requests were served while ${checksDoneAfter - checksDoneBefore} of 20 password checks finished`);
});

t.test('the queue of password checks is bounded: past it, calls are refused at once with 503', async (t) => {
  const server = await startServer(t);
  const replies = await Promise.all(Array.from({ length: 64 }, () => attempt(server.url, 'wrong', freshSource())));
  const busy = replies.filter((r) => r.status === 503);
  const checked = replies.filter((r) => r.status === 200 && errorCode(r) === -32000);
  t.equal(busy.length + checked.length, 64, 'every call is answered: checked or refused');
  t.ok(busy.length > 0, `${busy.length} of 64 refused as busy`);
  t.ok(checked.length >= 32, `${checked.length} checked`);
  for (const r of busy) {
    t.equal(r.headers['retry-after'], '1');
    t.equal(errorCode(r), -32003);
  }
  const after = await attempt(server.url, server.password, freshSource());
  t.type(JSON.parse(after.text).result?.token, 'string', 'the right password works once the queue drains');
});

t.test('past the overall allowance, every client waits', async (t) => {
  const server = await startServer(t);
  // 100 failures overall are free; the 101st starts a wait. Sent in waves the queue holds.
  for (const [wave, size] of [26, 25, 25, 25].entries()) {
    const replies = await Promise.all(Array.from({ length: size }, () => attempt(server.url, 'wrong', freshSource())));
    t.ok(replies.every((r) => errorCode(r) === -32000), `wave ${wave} checked`);
  }
  const stranger = await attempt(server.url, server.password, freshSource());
  t.equal(stranger.status, 429, 'a client that never failed waits too');
  t.ok(Number(stranger.headers['retry-after']) >= 1);
  const health = await call(server.url, '/ext/health', await tokenAfter(server.url, server.password));
  t.equal(health.status, 200, 'tokens issued once the wait is over work as ever');
});

/** A token for /ext/health, waiting out the throttle as a client should. */
async function tokenAfter(url: string, password: string): Promise<string> {
  for (;;) {
    const r = await request(url, '/ext/auth', {
      method: 'POST',
      headers: [['Content-Type', 'application/json']],
      body: JSON.stringify(rpc('auth.newToken', { password, endpoints: ['/ext/health'] }, 1)),
    });
    if (r.status !== 429) return JSON.parse(r.text).result.token;
    await sleep(Number(r.headers['retry-after']) * 1000);
  }
}

t.test('a batch is throttled entry by entry', async (t) => {
  const server = await startServer(t);
  const source = '127.3.0.1';
  const batch = [1, 2, 3, 4, 5].map((id) => rpc('auth.revokeToken', { password: 'wrong', token: 'x' }, id));
  const r = await request(server.url, '/ext/auth', {
    method: 'POST', headers: [['Content-Type', 'application/json']], body: JSON.stringify(batch), localAddress: source,
  });
  t.equal(r.status, 200, 'a batch answers per entry');
  const codes = (JSON.parse(r.text) as Array<{ error: { code: number } }>).map((e) => e.error.code);
  t.same(codes, [-32000, -32000, -32000, -32000, -32002], 'the entry after the fourth failure waits');
  const next = await attempt(server.url, server.password, source);
  t.equal(next.status, 429);
  t.equal((await call(server.url, '/ext/info', await newToken(server.url, server.password, ['/ext/info']))).status, 200,
    'other clients are served');
});
