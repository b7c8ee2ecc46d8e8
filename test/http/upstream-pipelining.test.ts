// --upstream-pipelining N: the requests of one turn of the event loop go out together on
// a connection, up to N at once, and the answers come back to the clients that asked,
// from an upstream that answers pipelined requests in order and from one that closes
// after each answer; behind a closing answer, only what cannot run twice is sent again.
// No request waits behind one written in an earlier turn, nor behind a body still being
// sent. (The same against geth, ganache and node:http: test/system/upstream-pipelining-nodes.test.ts.)
import t from 'tap';
import { connect } from 'node:net';
import { request } from '../helpers/http.js';
import { cliLine, refusalOf } from '../helpers/library.js';
import { startServer } from '../helpers/server.js';
import { answer, startScriptedUpstream, type ScriptedRequest } from '../helpers/scripted-upstream.js';
import { startUpstream } from '../helpers/upstream.js';

const own = (request: ScriptedRequest): string => answer(`{"path":"${request.path}"}`);

async function burst(url: string, count: number, prefix = '/r'): Promise<{ path: string; status: number; text: string }[]> {
  return Promise.all(
    Array.from({ length: count }, (_, i) =>
      request(url, `${prefix}/${i}`, { method: 'POST', body: `{"id":${i}}` }).then((r) => ({
        path: `${prefix}/${i}`,
        status: r.status,
        text: r.text,
      })),
    ),
  );
}

t.test('an upstream that answers in order: each client gets its own answer, over fewer connections', async (t) => {
  const upstream = await startScriptedUpstream(t, own);
  const gateway = await startServer(t, {
    auth: false,
    args: ['--upstream', upstream.url, '--http-threads', '1', '--upstream-pipelining', '4'],
  });
  const answers = await burst(gateway.url, 300);
  const wrong = answers.filter((a) => a.status !== 200 || a.text !== `{"path":"${a.path}"}`);
  t.same(wrong, [], "every answer is its own request's");
  t.equal(upstream.requests.length, 300, 'each request reached the upstream once');
  t.ok(
    upstream.requests.every((r) => r.body.toString() === `{"id":${r.path.split('/')[2]}}`),
    'with its own body',
  );
  const pipelined = upstream.requests.filter((r) => r.ahead > 0).length;
  t.ok(pipelined > 0, `${pipelined} requests came behind others on their connection`);
  t.ok(
    upstream.requests.every((r) => r.ahead < 4),
    'never more than 4 on a connection at once',
  );
  t.ok(upstream.connections() < 300, `${upstream.connections()} connections`);
});

t.test(
  'an upstream that closes after each answer: a GET behind it is sent again, a POST written behind it fails; none is read twice',
  async (t) => {
    const upstream = await startScriptedUpstream(t, (r) => answer(`{"path":"${r.path}"}`, '200 OK', 'Connection: close\r\n'), {
      closeAfterEach: true,
    });
    const gateway = await startServer(t, {
      auth: false,
      args: ['--upstream', upstream.url, '--http-threads', '1', '--upstream-pipelining', '4'],
    });
    const answers = await Promise.all(
      Array.from({ length: 200 }, (_, i) => {
        const method = i % 2 === 0 ? 'GET' : 'POST';
        return request(gateway.url, `/r/${i}`, method === 'POST' ? { method, body: `{"id":${i}}` } : { method }).then((r) => ({
          method,
          path: `/r/${i}`,
          status: r.status,
          text: r.text,
        }));
      }),
    );
    t.same(
      answers.filter((a) => a.status === 200 && a.text !== `{"path":"${a.path}"}`),
      [],
      "every answer is its own request's",
    );
    t.same(
      answers.filter((a) => a.method === 'GET' && a.status !== 200),
      [],
      'every GET is answered: one behind a closing answer is sent again',
    );
    // This upstream reads nothing behind its answer, but node:http does (the next test): api-auth cannot tell them apart.
    t.same(
      answers.filter((a) => a.method === 'POST' && a.status !== 200 && a.status !== 502),
      [],
      'a POST gets its answer, or a 502',
    );
    const seen = new Map<string, number>();
    for (const r of upstream.requests) seen.set(r.path, (seen.get(r.path) ?? 0) + 1);
    t.ok(
      [...seen.values()].every((n) => n === 1),
      'each was read by the upstream once at most',
    );
    t.equal(seen.size, answers.filter((a) => a.status === 200).length, 'and those read are those answered');
  },
);

t.test(
  'behind an answer that says Connection: close (node:http), a request that may have been read is sent again only if idempotent',
  async (t) => {
    // node:http runs the handler of every request it has read, also those behind an answer
    // that says Connection: close, and then closes without answering them: a POST sent
    // again would run twice.
    const runs = new Map<string, number>();
    const upstream = await startUpstream(t, () => (req, res) => {
      runs.set(`${req.method} ${req.url}`, (runs.get(`${req.method} ${req.url}`) ?? 0) + 1);
      res.setHeader('Connection', 'close');
      res.end(`{"path":"${req.url}"}`);
    });
    const gateway = await startServer(t, {
      auth: false,
      args: ['--upstream', upstream.url, '--http-threads', '1', '--upstream-pipelining', '4'],
    });
    const answers: { method: string; path: string; status: number; text: string }[] = [];
    for (let round = 0; round < 5; round++) {
      answers.push(
        ...(await Promise.all(
          Array.from({ length: 40 }, (_, i) => {
            const method = i % 2 === 0 ? 'POST' : 'GET';
            const path = `/${round}/${i}`;
            return request(gateway.url, path, method === 'POST' ? { method, body: '{}' } : { method }).then((r) => ({
              method,
              path,
              status: r.status,
              text: r.text,
            }));
          }),
        )),
      );
    }
    const twice = [...runs].filter(([call, n]) => call.startsWith('POST') && n > 1).map(([call, n]) => `${call}: ${n} runs`);
    t.same(twice, [], 'no POST ran twice');
    const wrong = answers.filter((a) => a.status === 200 && a.text !== `{"path":"${a.path}"}`);
    t.same(wrong, [], "every 200 is its own request's answer");
    const gets = answers.filter((a) => a.method === 'GET');
    t.same(
      gets.filter((a) => a.status !== 200),
      [],
      'every GET is answered: one behind a closing answer is sent again',
    );
    const posts = answers.filter((a) => a.method === 'POST');
    t.same(
      posts.filter((a) => a.status !== 200 && a.status !== 502),
      [],
      'a POST gets its answer, or a 502',
    );
    const resent = [...runs].filter(([call, n]) => call.startsWith('GET') && n > 1).length;
    const refused = posts.filter((a) => a.status === 502).length;
    t.comment(`${resent} GETs ran twice, ${refused} of ${posts.length} POSTs got 502`);
    t.ok(resent + refused > 0, 'requests were pipelined behind closing answers');
  },
);

t.test(
  'an upstream that closes each connection after 5 answers: once seen, no batch is written past the 5th, and no POST fails',
  async (t) => {
    // As nginx's keepalive_requests does (1000 by default), here with node:http, which
    // also runs the requests it has read behind the closing answer.
    const runs = new Map<string, number>();
    const answeredOn = new WeakMap<object, number>();
    const upstream = await startUpstream(t, () => (req, res) => {
      runs.set(req.url!, (runs.get(req.url!) ?? 0) + 1);
      const count = (answeredOn.get(req.socket) ?? 0) + 1;
      answeredOn.set(req.socket, count);
      if (count === 5) res.setHeader('Connection', 'close');
      res.end(`{"path":"${req.url}"}`);
    });
    const gateway = await startServer(t, {
      auth: false,
      args: ['--upstream', upstream.url, '--http-threads', '1', '--upstream-pipelining', '4'],
    });
    // One after another, so that nothing is batched: the 5th answer closes, and is seen.
    for (let i = 0; i < 5; i++) {
      const answer = await request(gateway.url, `/first/${i}`, { method: 'POST', body: '{}' });
      t.equal(answer.status, 200);
    }
    const answers: { path: string; status: number; text: string }[] = [];
    for (let round = 0; round < 10; round++) {
      answers.push(
        ...(await Promise.all(
          Array.from({ length: 40 }, (_, i) =>
            request(gateway.url, `/${round}/${i}`, { method: 'POST', body: '{}' }).then((r) => ({
              path: `/${round}/${i}`,
              status: r.status,
              text: r.text,
            })),
          ),
        )),
      );
    }
    t.same(
      answers.filter((a) => a.status !== 200 || a.text !== `{"path":"${a.path}"}`).slice(0, 5),
      [],
      'every POST got its own answer: none was written behind a closing answer',
    );
    t.same(
      [...runs].filter(([, n]) => n !== 1),
      [],
      'each ran once',
    );
  },
);

t.test('a request is not put behind one written in an earlier turn', async (t) => {
  let release = (): void => undefined;
  const held = new Promise<void>((resolve) => {
    release = resolve;
  });
  let arrived = (): void => undefined;
  const slowArrived = new Promise<void>((resolve) => {
    arrived = resolve;
  });
  const upstream = await startScriptedUpstream(t, async (r) => {
    if (r.path === '/slow') {
      arrived();
      await held;
    }
    return own(r);
  });
  const gateway = await startServer(t, {
    auth: false,
    args: ['--upstream', upstream.url, '--http-threads', '1', '--upstream-pipelining', '4'],
  });
  const slow = request(gateway.url, '/slow');
  await slowArrived;
  const fast = await request(gateway.url, '/fast');
  t.equal(fast.text, '{"path":"/fast"}', 'answered while /slow is still held');
  const fastSeen = upstream.requests.find((r) => r.path === '/fast')!;
  t.equal(fastSeen.ahead, 0, 'on a connection of its own');
  release();
  t.equal((await slow).text, '{"path":"/slow"}');
});

t.test('no request is put behind a body still being sent', async (t) => {
  const upstream = await startScriptedUpstream(t, own);
  const gateway = await startServer(t, {
    auth: false,
    args: ['--upstream', upstream.url, '--http-threads', '1', '--upstream-pipelining', '4'],
  });
  const { hostname, port } = new URL(gateway.url);
  const socket = connect(Number(port), hostname);
  const streamed = new Promise<string>((resolve) => {
    let data = '';
    socket.setEncoding('latin1');
    socket.on('data', (chunk: string) => {
      data += chunk;
    });
    socket.on('end', () => resolve(data));
  });
  socket.write('POST /streamed HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n5\r\nfirst\r\n');
  // While the body is unfinished, other requests are answered, on other connections.
  const others = await burst(gateway.url, 20, '/other');
  t.ok(
    others.every((a) => a.text === `{"path":"${a.path}"}`),
    'the others are answered meanwhile',
  );
  t.notOk(
    upstream.requests.some((r) => r.path === '/streamed'),
    'the streamed request is still unfinished',
  );
  socket.write('6\r\nsecond\r\n0\r\n\r\n');
  t.match(await streamed, /\r\n\r\n\{"path":"\/streamed"\}$/);
  const seen = upstream.requests.find((r) => r.path === '/streamed')!;
  t.equal(seen.body.toString(), 'firstsecond', 'its body whole');
  t.equal(seen.ahead, 0);
  const sameConnection = upstream.requests.filter((r) => r.connection === seen.connection && r.path !== '/streamed');
  t.ok(
    sameConnection.every((r) => upstream.requests.indexOf(r) > upstream.requests.indexOf(seen)),
    'nothing went on its connection before it was whole',
  );
});

t.test('bad --upstream-pipelining values are refused at start', async (t) => {
  const base = ['--http-port', '0', '--data-dir', '/nonexistent', '--upstream', 'http://127.0.0.1:9652'];
  for (const value of ['0', '65', 'four', '2.5']) {
    const error = await refusalOf([...base, '--upstream-pipelining', value]);
    t.match(error, { code: /^API_AUTH_BAD_(OPTION|COMMAND_LINE)$/ }, `${value}: refused`);
    t.equal(
      error === undefined ? '' : cliLine(error),
      `api-auth: --upstream-pipelining must be a whole number from 1 to 64 (requests on one upstream connection at once), not ${JSON.stringify(value)}`,
    );
  }
  const alone = await refusalOf(['--http-port', '0', '--data-dir', '/nonexistent', '--upstream-pipelining', '4']);
  t.match(alone === undefined ? '' : cliLine(alone), /^api-auth: --upstream-pipelining .*--upstream/, 'without --upstream: refused');
});
