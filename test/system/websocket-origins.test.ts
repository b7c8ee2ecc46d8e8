// --http-allowed-origins holds for WebSocket upgrades too. A browser holds fetch to CORS,
// but not WebSocket: a page of any site may open a session to the gateway and read every
// message, so the gateway itself refuses an upgrade whose Origin is not allowed (403), as
// geth's --ws.origins does. Proved in headless Chromium (Debian's chromium through
// playwright-core): a page of an allowed origin gets its answer, a page of another origin
// gets no session, and with the default "*" both do. A program, which sends no Origin,
// is not held to it.
import t from 'tap';
import type { Test } from 'tap';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';
import type { BrowserContext } from 'playwright-core';
import { newToken } from '../helpers/auth.js';
import { startServer } from '../helpers/server.js';
import { CHAIN_ID, openClient, Refused, startWsUpstream, wsUrl } from '../helpers/ws-upstream.js';

const CHROMIUM = '/usr/bin/chromium';

/** A page server on a port of its own: its origin is http://127.0.0.1:PORT. */
async function pageServer(t: Test): Promise<string> {
  const server = createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end('<!doctype html><title>dapp</title>');
  });
  await new Promise<void>((listening) => server.listen(0, '127.0.0.1', listening));
  t.teardown(() => new Promise<void>((closed) => server.close(() => closed())));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** Whether Debian's chromium is installed; a test fails, naming the package, when it is not. */
function chromiumThere(t: Test): boolean {
  if (existsSync(CHROMIUM)) return true;
  t.fail(`${CHROMIUM} is missing: apt-get install -y --no-install-recommends chromium`);
  return false;
}

async function browser(t: Test): Promise<BrowserContext> {
  const profile = mkdtempSync(join(tmpdir(), 'api-auth-chromium-'));
  t.teardown(() => rmSync(profile, { recursive: true, force: true }));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--no-first-run',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
    ],
  });
  t.teardown(() => context.close());
  return context;
}

/** What a page of `origin` gets from a WebSocket to `url`: the chain id it was answered, or how the session ended. */
async function fromPage(context: BrowserContext, origin: string, url: string): Promise<string> {
  const page = await context.newPage();
  try {
    await page.goto(`${origin}/`);
    return await page.evaluate(
      (target) =>
        new Promise<string>((resolve) => {
          const socket = new WebSocket(target);
          socket.onopen = () => socket.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }));
          socket.onmessage = (event) => {
            resolve(`answer ${JSON.parse(String(event.data)).result}`);
            socket.close();
          };
          socket.onclose = (event) => resolve(`closed ${event.code}`);
        }),
      url,
    );
  } finally {
    await page.close();
  }
}

t.test('Chromium: a page of an origin --http-allowed-origins does not hold gets no WebSocket session; an allowed one does', async (t) => {
  if (!chromiumThere(t)) return;
  const upstream = await startWsUpstream(t);
  const allowed = await pageServer(t);
  const foreign = await pageServer(t);
  const server = await startServer(t, {
    cheapChecks: true,
    args: ['--upstream', upstream.url, '--api-auth-query-token', '--http-allowed-origins', allowed],
  });
  const token = await newToken(server.url, server.password, ['/']);
  const url = wsUrl(server.url, `/?access_token=${token}`);
  const context = await browser(t);
  t.equal(await fromPage(context, allowed, url), `answer ${CHAIN_ID}`, "the allowed origin's page is answered");
  t.equal(await fromPage(context, foreign, url), 'closed 1006', "the other origin's page gets no session");
  t.equal(upstream.sessions.length, 1, 'and the node saw no upgrade from it');

  // The same through a program that says which page it is: the refusal itself.
  const refused = await openClient(t, wsUrl(server.url, '/'), { token, headers: { Origin: foreign } }).then(
    () => null,
    (error: unknown) => error,
  );
  t.ok(refused instanceof Refused, 'refused before the upgrade');
  t.match(refused, { status: 403 });
  t.match(JSON.parse((refused as Refused).body), {
    error: { code: -32600, message: /Origin is not in the gateway's --http-allowed-origins/ },
  });
  const bad = await openClient(t, wsUrl(server.url, '/'), { headers: { Origin: foreign } }).then(
    () => null,
    (error: unknown) => error,
  );
  t.match(bad, { status: 403 }, 'without a token too: the origin is judged first, so a foreign page learns nothing of the token');
  const program = await openClient(t, wsUrl(server.url, '/'), { token });
  t.match(await program.call('eth_chainId'), { result: CHAIN_ID }, 'a program, with no Origin, is not held to the rule');
  const listed = await openClient(t, wsUrl(server.url, '/'), { token, headers: { Origin: allowed.toUpperCase() } });
  t.match(await listed.call('eth_chainId'), { result: CHAIN_ID }, 'origins compare without case, as for CORS');
});

t.test('Chromium: with the default --http-allowed-origins "*", a page of any origin opens a session', async (t) => {
  if (!chromiumThere(t)) return;
  const upstream = await startWsUpstream(t);
  const page = await pageServer(t);
  const server = await startServer(t, { cheapChecks: true, args: ['--upstream', upstream.url, '--api-auth-query-token'] });
  const token = await newToken(server.url, server.password, ['/']);
  const context = await browser(t);
  t.equal(await fromPage(context, page, wsUrl(server.url, `/?access_token=${token}`)), `answer ${CHAIN_ID}`);
});
