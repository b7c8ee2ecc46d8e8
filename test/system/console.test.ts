// The operator's console (--console, docs/guides/console.md) in a real headless Chromium
// (Debian's, through playwright-core, as runtimes.test.ts drives it), against a real
// server and an upstream: sign in, issue, see it listed and used, rotate, revoke, the
// throttle's wait; and the red-team list, each item pinned here: XSS through a label,
// CSRF (no header, a wrong one, a foreign origin, a page of another origin), a session
// after sign-out and after a password change, a forged or fixed session, a token in
// place of a session, a session in place of a token, framing (CSP), the console off.
// Each page's screenshot goes to docs/guides/console/.
import t from 'tap';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { BrowserContext, Page } from 'playwright-core';
import { authUrl, call } from '../helpers/auth.js';
import { jsonrpc, postJson, request } from '../helpers/http.js';
import { ROOT, startServer } from '../helpers/server.js';
import { startUpstream } from '../helpers/upstream.js';
import { CHROMIUM, launchChromium } from '../helpers/browser.js';

const SHOTS = join(ROOT, 'docs', 'guides', 'console');
const CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "frame-ancestors 'none'; base-uri 'none'; form-action 'self'";
const XSS_LABEL = '<img src=x onerror=alert(1)>';

if (!existsSync(CHROMIUM)) {
  t.fail(`${CHROMIUM} is missing: install it: apt-get install -y --no-install-recommends chromium`);
  process.exit();
}

const upstream = await startUpstream(t);
const [server, off] = await Promise.all([
  startServer(t, { cheapChecks: true, args: ['--console', '--upstream', upstream.url] }),
  startServer(t, { cheapChecks: true, args: ['--upstream', upstream.url] }),
]);
const AUTH = authUrl(server.url);
const CONSOLE = `${server.url}/ext/auth/console`;
mkdirSync(SHOTS, { recursive: true });

const browser: BrowserContext = await launchChromium(t, { width: 1440, height: 900 });
const page: Page = browser.pages()[0] ?? (await browser.newPage());
const errors: string[] = [];
const alerts: string[] = [];
page.on('pageerror', (error) => errors.push(String(error)));
page.on('dialog', (dialog) => {
  alerts.push(dialog.message());
  void dialog.dismiss();
});

/** The console's CSRF value of a session, as the server derives it (service/console-session.ts). */
function csrfOf(session: string): string {
  return createHash('sha256').update('api-auth console csrf\0').update(session).digest('base64url');
}

/** The session cookie the browser holds now, or undefined. */
async function sessionCookie(): Promise<string | undefined> {
  return (await browser.cookies(AUTH)).find((c) => c.name === 'api-auth-session')?.value;
}

/** A management call with a cookie and headers as given, no password. */
function withSession(method: string, params: Record<string, unknown>, headers: [string, string][]): Promise<{ result?: any; error?: any }> {
  return jsonrpc(AUTH, method, params, 1, headers);
}

async function signIn(password = server.password): Promise<void> {
  // From the sign-in page: what this tab held of an earlier session is dropped first.
  await page.goto(CONSOLE);
  await page.evaluate(() => sessionStorage.clear());
  await page.reload();
  await page.waitForSelector('#signin:not([hidden])');
  await page.fill('#password', password);
  await page.click('#signin-button');
  await page.waitForSelector('#page-tokens:not([hidden])');
}

/** The table's row of `id`, once it shows `text` in column `col`. */
async function cell(id: string, col: string): Promise<string> {
  return (await page.textContent(`#tokens-body tr[data-id="${id}"] td[data-col="${col}"]`)) ?? '';
}

t.test('every console answer carries the CSP, nosniff and no-store, and no CORS header', async (t) => {
  for (const path of ['/ext/auth/console', '/ext/auth/console/console.js', '/ext/auth/console/console.css']) {
    const response = await request(server.url, path, { headers: [['Origin', 'https://evil.example']] });
    t.equal(response.status, 200, `${path}: 200`);
    t.equal(response.headers['content-security-policy'], CSP, `${path}: the CSP, frame-ancestors 'none' included`);
    t.equal(response.headers['x-content-type-options'], 'nosniff', `${path}: nosniff`);
    t.equal(response.headers['cache-control'], 'no-store', `${path}: no-store`);
    t.equal(response.headers['x-frame-options'], 'DENY', `${path}: X-Frame-Options DENY`);
    t.notOk(
      Object.keys(response.headers).some((h) => h.startsWith('access-control-')),
      `${path}: no CORS header for a foreign origin`,
    );
  }
  const page = await request(server.url, '/ext/auth/console');
  t.notMatch(page.text, /<script>|<script [^>]*>[^<]|\son[a-z]+=/i, 'the page holds no inline script or handler');
  const management = await postJson(AUTH, { jsonrpc: '2.0', id: 1, method: 'auth.listTokens', params: { password: 'wrong' } });
  t.equal(management.headers['cache-control'], 'no-store', 'a management answer is no-store');
});

t.test('without --console the console is not found, and its path never reaches the node', async (t) => {
  for (const path of ['/ext/auth/console', '/ext/auth/console/console.js']) {
    const response = await request(off.url, path);
    t.equal(response.status, 404, `${path}: 404`);
  }
  const token = (await jsonrpc(authUrl(off.url), 'auth.newToken', { password: off.password, endpoints: ['*'] })).result.token as string;
  const before = upstream.seen.length;
  const response = await call(off.url, '/ext/auth/console', token, 'GET');
  t.equal(response.status, 404, 'a token for every path gets 404, from api-auth');
  t.equal(upstream.seen.length, before, "the upstream saw no request for the console's path");
});

t.test('no token can be granted the console', async (t) => {
  for (const endpoint of ['/ext/auth/console', '/ext/auth/console/*', '/ext/auth/console/x']) {
    const answer = await jsonrpc(AUTH, 'auth.newToken', { password: server.password, endpoints: ['/', endpoint] });
    t.equal(answer.error?.code, -32602, `${endpoint}: refused`);
    t.match(answer.error?.message, /^invalid params: endpoints\[1\] must be not the console's/, `${endpoint}: the message names the field`);
  }
});

let issuedId = '';
let issuedToken = '';

t.test('sign in, issue a token through the form, see it listed and its requests move', async (t) => {
  await page.goto(CONSOLE);
  await page.waitForSelector('#signin:not([hidden])');
  await page.screenshot({ path: join(SHOTS, 'sign-in.png') });
  await signIn();
  const cookie = (await browser.cookies(AUTH)).find((c) => c.name === 'api-auth-session');
  t.ok(cookie, 'a session cookie');
  t.equal(cookie?.httpOnly, true, 'HttpOnly');
  t.equal(cookie?.sameSite, 'Strict', 'SameSite=Strict');
  t.equal(cookie?.path, '/ext/auth', 'Path=/ext/auth');
  const stored = await page.evaluate(() => JSON.stringify({ ...sessionStorage }) + JSON.stringify({ ...localStorage }) + document.cookie);
  t.notOk(stored.includes(server.password), "the password is nowhere in the page's storage");
  t.equal(await page.evaluate(() => document.cookie), '', "the page's script cannot read the session");

  await page.click('nav a[data-page="issue"]');
  await page.fill('#f-label', 'indexer');
  await page.fill('#f-endpoints', '/');
  await page.check('#f-sets input[value="@read"]');
  await page.fill('#f-rate', 'fast');
  await page.click('#issue-button');
  await page.waitForSelector('[data-error="rateLimit"]:not(:empty)');
  t.match(
    await page.textContent('[data-error="rateLimit"]'),
    /^rateLimit must be "N\/s", "N\/m" or "N\/h"/,
    'the refusal is shown next to its field',
  );
  t.equal(await page.getAttribute('#f-rate', 'class'), 'invalid', 'the field is marked');
  await page.screenshot({ path: join(SHOTS, 'issue.png'), fullPage: true });
  await page.fill('#f-rate', '100/s');
  await page.fill('#f-quota', '5000');
  await page.click('#issue-button');
  await page.waitForSelector('#new-token[open]');
  issuedToken = (await page.textContent('#new-token-value')) ?? '';
  issuedId = ((await page.textContent('#new-token-title')) ?? '').replace('New token ', '');
  t.match(issuedToken, /^[A-Za-z0-9_-]{76}$/, 'the token is shown');
  await page.screenshot({ path: join(SHOTS, 'new-token.png') });
  // A dialog's close event is a task of its own, after the click: wait for it (the page's own handler runs first).
  await page.evaluate(() => {
    const dialog = document.getElementById('new-token')!;
    (window as unknown as { tokenDialogClosed: Promise<void> }).tokenDialogClosed = new Promise((resolve) =>
      dialog.addEventListener('close', () => resolve(), { once: true }),
    );
  });
  await page.click('#new-token button[value="close"]');
  await page.evaluate(() => (window as unknown as { tokenDialogClosed: Promise<void> }).tokenDialogClosed);
  t.equal(await page.textContent('#new-token-value'), '', 'the token leaves the page once the dialog closes');

  await page.click('nav a[data-page="tokens"]');
  await page.waitForSelector(`#tokens-body tr[data-id="${issuedId}"]`);
  t.equal(await cell(issuedId, 'label'), 'indexer', 'listed with its label');
  t.equal(await cell(issuedId, 'methods'), '@read', "its methods by their set's name");
  t.match(await cell(issuedId, 'limits'), /100\/s .*quota 0\/5000 per day/, 'its rate and quota');
  t.equal(await cell(issuedId, 'requests'), '0', 'no request yet');

  for (let i = 0; i < 3; i++) {
    const used = await postJson(`${server.url}/`, { jsonrpc: '2.0', id: 1, method: 'eth_chainId' }, [
      ['Authorization', `Bearer ${issuedToken}`],
    ]);
    t.equal(used.status, 200, `call ${i + 1} through the gateway reaches the node`);
  }
  await page.click('#refresh');
  await page.waitForFunction(
    (id) => document.querySelector(`#tokens-body tr[data-id="${id}"] td[data-col="requests"]`)?.textContent === '3',
    issuedId,
  );
  t.equal(await cell(issuedId, 'requests'), '3', 'the table shows the three requests');
  t.not(await cell(issuedId, 'last used'), '—', 'and when it was last used');
});

t.test('a label that is markup renders as text', async (t) => {
  await page.click('nav a[data-page="issue"]');
  await page.fill('#f-label', XSS_LABEL);
  await page.fill('#f-endpoints', '/ext/bc/*');
  await page.click('#issue-button');
  await page.waitForSelector('#new-token[open]');
  const id = ((await page.textContent('#new-token-title')) ?? '').replace('New token ', '');
  await page.click('#new-token button[value="close"]');
  await page.click('nav a[data-page="tokens"]');
  await page.waitForSelector(`#tokens-body tr[data-id="${id}"]`);
  t.equal(await cell(id, 'label'), XSS_LABEL, "the label's characters, as text");
  t.equal(await page.locator('#tokens-body img').count(), 0, 'no img element was made');
  await page.fill('#filter', 'onerror');
  t.equal(await page.locator('#tokens-body tr[data-id]').count(), 1, 'the filter finds it');
  await page.fill('#filter', '');
  t.same(alerts, [], 'no script ran');
  await page.screenshot({ path: join(SHOTS, 'tokens.png'), fullPage: true });
});

t.test('rotate, then revoke, from the table; the gateway refuses each old token', async (t) => {
  await page.click(`#tokens-body tr[data-id="${issuedId}"] button:text("Rotate")`);
  await page.waitForSelector('#confirm[open]');
  t.match(await page.textContent('#confirm-list'), new RegExp(`${issuedId} — indexer`), 'the confirmation names the token');
  await page.screenshot({ path: join(SHOTS, 'confirm.png') });
  await page.click('#confirm-ok');
  await page.waitForSelector('#new-token[open]');
  const [newId, newToken] = ((await page.textContent('#new-token-value')) ?? '').split(/\s+/);
  await page.click('#new-token button[value="close"]');
  const old = await postJson(`${server.url}/`, { jsonrpc: '2.0', id: 1, method: 'eth_chainId' }, [
    ['Authorization', `Bearer ${issuedToken}`],
  ]);
  t.equal(old.status, 401, 'the rotated token is refused');
  const fresh = await postJson(`${server.url}/`, { jsonrpc: '2.0', id: 1, method: 'eth_chainId' }, [
    ['Authorization', `Bearer ${newToken}`],
  ]);
  t.equal(fresh.status, 200, 'its successor works');
  await page.waitForSelector(`#tokens-body tr[data-id="${newId}"]`);
  t.equal(await cell(newId, 'label'), 'indexer', 'the successor keeps the label');
  t.equal(await cell(issuedId, 'state'), `rotated to ${newId}`, 'the old one shows it was rotated');

  await page.check(`#tokens-body tr[data-id="${newId}"] input[type=checkbox]`);
  await page.click('#revoke-selected');
  await page.waitForSelector('#confirm[open]');
  await page.click('#confirm-ok');
  await page.waitForFunction(
    (id) => document.querySelector(`#tokens-body tr[data-id="${id}"] td[data-col="state"]`)?.textContent === 'revoked',
    newId,
  );
  const revoked = await postJson(`${server.url}/`, { jsonrpc: '2.0', id: 1, method: 'eth_chainId' }, [
    ['Authorization', `Bearer ${newToken}`],
  ]);
  t.equal(revoked.status, 401, 'the revoked token is refused');
});

t.test(
  "the usage page charts a token's calls by the hour, and the chart moves with its calls; the node page shows its health",
  async (t) => {
    const { token, id } = (await jsonrpc(AUTH, 'auth.newToken', { password: server.password, endpoints: ['/'], label: 'charted' }))
      .result as { token: string; id: string };
    const use = async (n: number): Promise<void> => {
      for (let i = 0; i < n; i++) {
        const answer = await postJson(`${server.url}/`, { jsonrpc: '2.0', id: i, method: 'eth_chainId' }, [
          ['Authorization', `Bearer ${token}`],
        ]);
        t.equal(answer.status, 200, `call ${i + 1} through the gateway`);
      }
    };
    await use(3);
    await page.click('nav a[data-page="usage"]');
    await page.waitForFunction(() => document.getElementById('usage-total')?.textContent?.includes('for the node') === true);
    t.equal(await page.locator('#chart .uplot').count(), 1, "the node's chart is drawn");
    t.equal(await page.textContent('#usage-message'), '', 'with no message in its place');
    await page.waitForSelector(`#usage-token option[value="${id}"]`, { state: 'attached' });
    await page.selectOption('#usage-token', id);
    await page.waitForFunction(
      (id) => document.getElementById('usage-total')?.textContent?.startsWith(`3 requests for ${id} `) === true,
      id,
    );
    t.pass("the token's 3 calls are charted");
    await use(2);
    await page.selectOption('#usage-token', '');
    await page.waitForFunction(() => document.getElementById('usage-total')?.textContent?.includes('for the node') === true);
    await page.selectOption('#usage-token', id);
    await page.waitForFunction(
      (id) => document.getElementById('usage-total')?.textContent?.startsWith(`5 requests for ${id} `) === true,
      id,
    );
    t.pass('two calls later, the chart shows 5');
    t.equal(await page.locator('#chart .uplot').count(), 1, "the token's chart is drawn");
    await page.screenshot({ path: join(SHOTS, 'usage.png') });
    await page.click('nav a[data-page="node"]');
    await page.waitForSelector('#node-cards .stat h3:text("Tokens")');
    t.match(await page.textContent('#node-cards'), /Upstream health/, "the upstream's health");
    await page.waitForSelector('#node-cards .stat h3:text("Refusals, last 24 hours")');
    t.match(await page.textContent('#node-cards'), /Refusals, last 24 hours.*revoked\d+/s, "the revoked token's refusal, by its reason");
    t.match(
      await page.textContent('#node-cards'),
      /Traffic now.*upstream answers\d+.*upstream p50\d[\d.]* ms/s,
      "the upstream's answers and latency",
    );
    await page.screenshot({ path: join(SHOTS, 'node.png') });
  },
);

t.test('CSRF: the cookie alone, a wrong header, a foreign origin, a page of another origin: all refused', async (t) => {
  const session = await sessionCookie();
  if (session === undefined) {
    t.fail('no session');
    return;
  }
  const cookie: [string, string] = ['Cookie', `api-auth-session=${session}`];
  const none = await withSession('auth.listTokens', {}, [cookie]);
  t.match(none.error, { code: -32000, message: /CSRF/ }, 'the cookie without the CSRF header is refused');
  const wrong = await withSession('auth.listTokens', {}, [
    cookie,
    ['X-Api-Auth-Csrf', csrfOf(session).replace(/^./, (c) => (c === 'A' ? 'B' : 'A'))],
  ]);
  t.match(wrong.error, { code: -32000, message: /CSRF/ }, 'a wrong CSRF header is refused');
  const foreign = await withSession('auth.listTokens', {}, [
    cookie,
    ['X-Api-Auth-Csrf', csrfOf(session)],
    ['Origin', 'http://evil.example'],
  ]);
  t.match(foreign.error, { code: -32000, message: /origin/ }, 'a foreign Origin is refused, the right header or not');
  const right = await withSession('auth.listTokens', {}, [cookie, ['X-Api-Auth-Csrf', csrfOf(session)], ['Origin', server.url]]);
  t.ok(Array.isArray(right.result?.tokens), "the cookie with its CSRF header, from the server's origin, works");

  // A page of another origin of the same site (another port of 127.0.0.1: the cookie is sent).
  const attacker = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html' }).end('<!doctype html><title>attacker</title>');
  });
  await new Promise<void>((listening) => attacker.listen(0, '127.0.0.1', listening));
  // Chromium keeps its connection to the page's server open after the page closes: close() alone waits out its keep-alive (a minute).
  t.teardown(
    () =>
      new Promise<void>((closed) => {
        attacker.close(() => closed());
        attacker.closeAllConnections();
      }),
  );
  const before = (right.result.tokens as unknown[]).length;
  const other = await browser.newPage();
  await other.goto(`http://127.0.0.1:${(attacker.address() as AddressInfo).port}/`);
  const outcomes = await other.evaluate(async (auth) => {
    const tries: RequestInit[] = [
      {
        method: 'POST',
        credentials: 'include',
        mode: 'no-cors',
        headers: { 'Content-Type': 'text/plain' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'auth.newToken', params: { endpoints: ['*'] } }),
      },
      {
        method: 'POST',
        credentials: 'include',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'auth.newToken', params: { endpoints: ['*'] } }),
      },
      {
        method: 'POST',
        credentials: 'include',
        headers: { 'Content-Type': 'application/json', 'X-Api-Auth-Csrf': 'guess' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'auth.newToken', params: { endpoints: ['*'] } }),
      },
    ];
    const out: string[] = [];
    for (const init of tries) {
      try {
        const response = await fetch(auth, init);
        out.push(response.type === 'opaque' ? 'opaque' : await response.text());
      } catch (error) {
        out.push(`blocked: ${String(error)}`);
      }
    }
    return out;
  }, AUTH);
  await other.close();
  t.notOk(
    outcomes.some((o) => o.includes('"token"')),
    'no attempt got a token',
  );
  const after = await withSession('auth.listTokens', {}, [cookie, ['X-Api-Auth-Csrf', csrfOf(session)]]);
  t.equal(after.result.tokens.length, before, 'and none was issued');
});

t.test('a session grants no node endpoint, and a token is no session', async (t) => {
  const session = await sessionCookie();
  if (session === undefined) {
    t.fail('no session');
    return;
  }
  // The cookie holds two tokens: the session, and its sign-in's.
  const [own, signedIn] = session.split('.');
  for (const [what, bearer] of [
    ['the session', own],
    ["its sign-in's token", signedIn],
  ]) {
    for (const path of ['/', '/ext/bc/C/rpc']) {
      const response = await call(server.url, path, bearer);
      t.equal(response.status, 401, `${what} as a bearer token on ${path} is refused`);
    }
  }
  const before = upstream.seen.length;
  await call(server.url, '/ext/auth/console', own, 'GET');
  await call(server.url, '/ext/auth/console', signedIn, 'GET');
  t.equal(upstream.seen.length, before, "its one endpoint is api-auth's own: nothing reached the node");

  const token = (await jsonrpc(AUTH, 'auth.newToken', { password: server.password, endpoints: ['*'] })).result.token as string;
  const asCookie = await withSession('auth.listTokens', {}, [
    ['Cookie', `api-auth-session=${token}.${signedIn}`],
    ['X-Api-Auth-Csrf', csrfOf(`${token}.${signedIn}`)],
  ]);
  t.match(
    asCookie.error,
    { code: -32000, message: /not live .*or not a session/ },
    'a token in the cookie, with its right CSRF value, is refused',
  );
  const asBearer = await withSession('auth.listTokens', {}, [['Authorization', `Bearer ${token}`]]);
  t.match(asBearer.error, { code: -32602 }, 'a bearer token stands for no password');
  const forged = `${'A'.repeat(76)}.${signedIn}`;
  const fixed = await withSession('auth.listTokens', {}, [
    ['Cookie', `api-auth-session=${forged}`],
    ['X-Api-Auth-Csrf', csrfOf(forged)],
  ]);
  t.match(fixed.error, { code: -32000 }, 'a session the client made up (fixation) is refused');
});

t.test('a session ends at sign-out and at a password change, fleet state and all', async (t) => {
  const first = await sessionCookie();
  if (first === undefined) {
    t.fail('no session');
    return;
  }
  await page.click('#signout');
  await page.waitForSelector('#signin:not([hidden])');
  const replay = await withSession('auth.listTokens', {}, [
    ['Cookie', `api-auth-session=${first}`],
    ['X-Api-Auth-Csrf', csrfOf(first)],
  ]);
  t.match(replay.error, { code: -32000, message: /not live/ }, 'the signed-out session replayed is refused');

  await signIn();
  const second = await sessionCookie();
  if (second === undefined) {
    t.fail('no session');
    return;
  }
  t.not(second, first, 'a new sign-in is a new session');
  const renewed = await withSession('auth.renewSession', {}, [
    ['Cookie', `api-auth-session=${second}`],
    ['X-Api-Auth-Csrf', csrfOf(second)],
  ]);
  t.match(renewed.result, { csrf: /^[A-Za-z0-9_-]{43}$/ }, 'renewed');
  const afterRenew = await withSession('auth.listTokens', {}, [
    ['Cookie', `api-auth-session=${second}`],
    ['X-Api-Auth-Csrf', csrfOf(second)],
  ]);
  t.match(afterRenew.error, { code: -32000 }, "the renewed session's predecessor is over");

  await signIn();
  const third = await sessionCookie();
  if (third === undefined) {
    t.fail('no session');
    return;
  }
  const newPassword = `${server.password}-changed`;
  const changed = await jsonrpc(AUTH, 'auth.changePassword', { oldPassword: server.password, newPassword });
  t.same(changed.result, { success: true }, 'the password is changed');
  const stale = await withSession('auth.listTokens', {}, [
    ['Cookie', `api-auth-session=${third}`],
    ['X-Api-Auth-Csrf', csrfOf(third)],
  ]);
  t.match(stale.error, { code: -32000, message: /not live/ }, 'the session of the old password is refused');
  await page.click('#refresh');
  await page.waitForSelector('#signin:not([hidden])');
  t.match(await page.textContent('#signin-error'), /session ended/, 'the console sends the operator back to sign in');
  server.password = newPassword;
});

t.test("a wrong password shows the throttle's wait", async (t) => {
  await page.goto(CONSOLE);
  let shown = '';
  for (let i = 0; i < 6 && !/wait \d+ s/.test(shown); i++) {
    await page.fill('#password', 'not-the-password');
    await page.click('#signin-button');
    await page.waitForFunction(
      () =>
        document.getElementById('signin-error')?.textContent !== '' &&
        !(document.getElementById('signin-button') as HTMLButtonElement).disabled,
    );
    shown = (await page.textContent('#signin-error')) ?? '';
    if (i === 0) t.equal(shown, 'Incorrect password.', 'the first wrong password is said to be wrong');
  }
  t.match(shown, /^Too many failed attempts: wait \d+ s before the next one\.$/, "then the throttle's wait is shown");
  await page.screenshot({ path: join(SHOTS, 'sign-in-throttled.png') });
  t.same(errors, [], 'the page logged no error');
});

t.test('renewals past --console-session-max-lifetime are refused: the page keeps the session to its end, then signs out', async (t) => {
  // Last: its server's cookie (same host, another port) takes the place of the one above.
  const capped = await startServer(t, { cheapChecks: true, args: ['--console', '--console-session-max-lifetime', '60s'] });
  const tab = await browser.newPage();
  t.teardown(() => tab.close());
  const tabErrors: string[] = [];
  tab.on('pageerror', (error) => tabErrors.push(String(error)));
  // The page's timers on a clock the test moves; the node's is its own.
  await tab.clock.install();
  await tab.goto(`${capped.url}/ext/auth/console`);
  await tab.waitForSelector('#signin:not([hidden])');
  await tab.fill('#password', capped.password);
  await tab.click('#signin-button');
  await tab.waitForSelector('#page-tokens:not([hidden])');
  const refused = tab.waitForResponse((r) => r.url().endsWith('/ext/auth') && (r.request().postData() ?? '').includes('auth.renewSession'));
  // The session ends at the minute's cap: the page renews it 10 s in.
  await tab.clock.runFor(10_000);
  const answer = await (await refused).json();
  t.match(answer.error, { code: -32000, message: /cannot be renewed: it ends 1m after its sign-in/ }, 'the renewal is refused');
  await tab.clock.runFor(1000);
  t.equal(await tab.isVisible('#app'), true, 'the page keeps the session until its end');
  for (let s = 0; s < 120 && !(await tab.isVisible('#signin')); s++) await tab.clock.runFor(1000);
  t.equal(
    await tab.textContent('#signin-error'),
    'Your session reached its longest life; sign in again.',
    'at its end, the page goes back to sign-in and says why',
  );
  t.same(tabErrors, [], 'the page logged no error');
});
