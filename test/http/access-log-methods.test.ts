// --access-log wraps every response and changes nothing it does. Every HTTP method the
// tests know, on every kind of route (the built-in endpoints, /ext/auth and its health
// and check, the metrics, the proxy, a path with no route, a path the rules refuse), with
// every kind of token (none, forged, plain, scoped, limited), goes to servers with the
// access log on and off, on one thread and two: each request gets a whole answer, the
// same status and body with the log on as off, and each server is still serving after.
// A HEAD used to end the process with the log on: the logged response passed missing
// arguments on as undefineds, and uWS never ended the answer.
import t from 'tap';
import type { Test } from 'tap';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { authUrl } from '../helpers/auth.js';
import { exchange, encodeRequest, jsonrpc, request } from '../helpers/http.js';
import type { HttpResponse } from '../helpers/http.js';
import { sleep, startServer, tempDir } from '../helpers/server.js';
import type { Server } from '../helpers/server.js';
import { startUpstream } from '../helpers/upstream.js';

const METHODS = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE', 'CONNECT', 'get', 'QUERY'];
const PATHS = [
  '/ext/info',
  '/ext/health',
  '/ext/auth',
  '/ext/auth/health',
  '/ext/auth/live',
  '/ext/auth/check',
  '/ext/metrics',
  '/ext/bc/C/rpc',
  '/nowhere',
  '/ext/bc/C/../rpc',
];
const KINDS = ['none', 'forged', 'plain', 'scoped', 'limited'] as const;
type Kind = (typeof KINDS)[number];
const CALL = '{"jsonrpc":"2.0","id":7,"method":"info.getNodeVersion"}';

interface Served {
  readonly server: Server;
  readonly tokens: Readonly<Record<Kind, string | null>>;
  readonly log: string | null;
}

/** The node behind every server: one fixed answer, so that answers compare across servers. */
async function node(t: Test): Promise<string> {
  const upstream = await startUpstream(t, () => (_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"jsonrpc":"2.0","id":7,"result":"0x1"}\n');
  });
  return upstream.url;
}

async function serve(t: Test, upstream: string | null, threads: number, logged: boolean): Promise<Served> {
  const log = logged ? join(tempDir(t), 'access.log') : null;
  const running = await startServer(t, {
    cheapChecks: true,
    args: [
      '--http-threads',
      String(threads),
      ...(log === null ? [] : ['--access-log', log]),
      ...(upstream === null ? [] : ['--upstream', upstream]),
    ],
  });
  const issue = async (params: Record<string, unknown>): Promise<string> => {
    const answer = await jsonrpc(authUrl(running.url), 'auth.newToken', { password: running.password, endpoints: ['*'], ...params });
    if (typeof answer.result?.token !== 'string') throw new Error(`no token: ${JSON.stringify(answer)}`);
    return answer.result.token as string;
  };
  const plain = await issue({});
  const tokens = {
    none: null,
    forged: `${plain.slice(0, -2)}${plain.endsWith('AA') ? 'BB' : 'AA'}`,
    plain,
    scoped: await issue({ methods: ['info.*'] }),
    limited: await issue({ rateLimit: '1000000/s', burst: 1000000 }),
  };
  return { server: running, tokens, log };
}

/** The request of one case: with a JSON-RPC call as its body where the method usually has one. */
function bytes(served: Served, method: string, path: string, kind: Kind): Buffer {
  const token = served.tokens[kind];
  const headers: [string, string][] = [['Content-Type', 'application/json']];
  if (token !== null) headers.push(['Authorization', `Bearer ${token}`]);
  if (path === '/ext/auth/check') headers.push(['X-Original-Request', `POST /ext/info HTTP/1.1`]);
  const body = ['POST', 'PUT', 'PATCH', 'QUERY'].includes(method) ? CALL : undefined;
  return encodeRequest(served.server.url, path, { method, headers, body });
}

/** What must not depend on the access log: the status, and the body but for what differs by server (ports, time, metrics). */
function comparable(path: string, response: HttpResponse): string {
  const body = path === '/ext/metrics' || path === '/ext/auth' ? '' : response.body.toString('utf8');
  return `${response.status} ${response.headers['content-type'] ?? ''} ${body}`;
}

async function run(t: Test, served: Served): Promise<Map<string, string>> {
  const answers = new Map<string, string>();
  const cases = METHODS.flatMap((method) => PATHS.flatMap((path) => KINDS.map((kind) => [method, path, kind] as const)));
  // Eight at a time: each case is a connection of its own, and none depends on another.
  for (let i = 0; i < cases.length; i += 8) {
    await Promise.all(
      cases.slice(i, i + 8).map(async ([method, path, kind]) => {
        const response = await exchange(served.server.url, bytes(served, method, path, kind), 10_000, undefined, method);
        answers.set(`${method} ${path} ${kind}`, comparable(path, response));
      }),
    );
  }
  t.equal(served.server.child.exitCode, null, 'the server is still running after every case');
  t.equal((await request(served.server.url, '/ext/auth/health')).status, 200, 'and still answers');
  return answers;
}

for (const [upstreamed, threads] of [
  [true, 1],
  [true, 2],
  [false, 1],
] as const) {
  t.test(
    `${upstreamed ? 'in front of a node' : 'the built-in endpoints'}, ${threads} thread${threads > 1 ? 's' : ''}: ` +
      'every method, route and token answered alike with the access log on and off',
    async (t) => {
      const upstream = upstreamed ? await node(t) : null;
      const off = await serve(t, upstream, threads, false);
      const on = await serve(t, upstream, threads, true);
      const plain = await run(t, off);
      const logged = await run(t, on);
      t.equal(logged.size, METHODS.length * PATHS.length * KINDS.length, 'every case was answered');
      const differing = [...plain].filter(([key, answer]) => logged.get(key) !== answer).map(([key]) => key);
      t.same(differing, [], 'every answer is the same with the access log as without it');
      // The lines are written off the request's path: wait for the HEADs' (every case but the three probe paths has one).
      const expected = (PATHS.length - 3) * KINDS.length;
      let heads = 0;
      for (let tries = 0; tries < 100 && heads < expected; tries++) {
        await sleep(100);
        const text = existsSync(on.log!) ? readFileSync(on.log!, 'utf8') : '';
        heads = text
          .split('\n')
          .filter((l) => l !== '')
          .map((l) => JSON.parse(l) as { method: string })
          .filter((l) => l.method === 'HEAD').length;
      }
      t.equal(heads, expected, 'each HEAD request is one line of the log');
    },
  );
}
