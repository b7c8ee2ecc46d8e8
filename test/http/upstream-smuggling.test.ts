// Smuggling from the upstream's side: a hostile upstream answers some requests with an
// answer that carries another one inside or after it (Content-Length beside
// Transfer-Encoding, a 204 with a body, an answer longer than its Content-Length), while
// other clients' requests go over the same pooled connections. No client may ever get
// the answer smuggled in, nor another client's answer: a refused answer is a 502, and a
// connection with bytes past an answer is dropped, never used again; so is one on which
// bytes come while no request is outstanding.
import t, { type Test } from 'tap';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { request, type HttpResponse } from '../helpers/http.js';
import { startServer } from '../helpers/server.js';
import { answer, startScriptedUpstream, type ScriptedRequest } from '../helpers/scripted-upstream.js';

const SMUGGLED = '{"smuggled":"answer"}';
const INSIDE = answer(SMUGGLED);

/** The hostile upstream's answers, by the first part of the path; /echo/<id> answers {"id": id}. */
function hostile(request: ScriptedRequest): string {
  const [, kind, id] = request.path.split('/');
  const own = `{"id":"${id}"}`;
  switch (kind) {
    case 'cl-te': {
      // Read by Content-Length, the chunks are the body; by the chunks, the answer inside comes next.
      const chunked = `${own.length.toString(16)}\r\n${own}\r\n0\r\n\r\n`;
      return `HTTP/1.1 200 OK\r\nContent-Length: ${chunked.length}\r\nTransfer-Encoding: chunked\r\n\r\n${chunked}${INSIDE}`;
    }
    case 'short-chunk':
      // A chunk longer than its size: what follows it would be read as the next chunk.
      return `HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n${(own.length - 1).toString(16)}\r\n${own}\r\n0\r\n\r\n${INSIDE}`;
    case '204-length':
      return `HTTP/1.1 204 No Content\r\nContent-Length: ${INSIDE.length}\r\n\r\n${INSIDE}`;
    case '204-body':
      return `HTTP/1.1 204 No Content\r\nX-Id: ${id}\r\n\r\n${INSIDE}`;
    case 'long':
      return `${answer(own)}${INSIDE}`;
    default:
      return answer(own);
  }
}

interface Sent {
  kind: string;
  id: string;
  response: HttpResponse;
}

/** Sends `rounds` rounds at once: in each, one request of every hostile kind among `echoes` plain ones, all on their own connections. */
async function interleave(url: string, kinds: string[], rounds: number, echoes: number): Promise<Sent[]> {
  const sends: Promise<Sent>[] = [];
  for (let round = 0; round < rounds; round++) {
    const order = [...kinds, ...Array.from({ length: echoes }, () => 'echo')];
    order.forEach((kind, i) => {
      const id = `${round}-${i}`;
      sends.push(request(url, `/${kind}/${id}`).then((response) => ({ kind, id, response })));
    });
  }
  return Promise.all(sends);
}

function expectNoLeak(t: Test, sent: Sent[]): void {
  const leaked = sent.filter(({ response }) => response.text.includes('smuggled'));
  t.same(
    leaked.map((s) => `${s.kind}/${s.id}`),
    [],
    'no client got the answer smuggled in',
  );
  const echoes = sent.filter((s) => s.kind === 'echo');
  const wrong = echoes.filter(({ id, response }) => response.status !== 200 || response.text !== `{"id":"${id}"}`);
  t.same(
    wrong.map((s) => `${s.id}: ${s.response.status} ${s.response.text}`),
    [],
    `each of ${echoes.length} plain requests got its own answer`,
  );
}

function expectRefused(t: Test, sent: Sent[], kind: string): void {
  const of = sent.filter((s) => s.kind === kind);
  const other = of.filter(({ response }) => response.status !== 502 || JSON.parse(response.text).error.code !== -32044);
  t.same(
    other.map((s) => `${s.id}: ${s.response.status} ${s.response.text}`),
    [],
    `${kind}: each of ${of.length} is a 502`,
  );
}

t.test(
  'without pipelining: each kind is refused or relayed whole, and its connection dropped; no answer reaches another client',
  async (t) => {
    const upstream = await startScriptedUpstream(t, hostile);
    const gateway = await startServer(t, { auth: false, args: ['--upstream', upstream.url, '--http-threads', '1'] });
    const sent = await interleave(gateway.url, ['cl-te', 'short-chunk', '204-length', '204-body', 'long'], 25, 6);
    expectNoLeak(t, sent);
    expectRefused(t, sent, 'cl-te');
    // Refused in the read its head came in: nothing of it was relayed, so still a clean 502.
    expectRefused(t, sent, 'short-chunk');
    expectRefused(t, sent, '204-length');
    const empty = sent.filter((s) => s.kind === '204-body');
    t.ok(
      empty.every(({ id, response }) => response.status === 204 && response.headers['x-id'] === id && response.body.length === 0),
      'a 204 with bytes after it: the 204 is relayed, without them',
    );
    const long = sent.filter((s) => s.kind === 'long');
    t.ok(
      long.every(({ id, response }) => response.status === 200 && response.text === `{"id":"${id}"}`),
      'an answer longer than its Content-Length: the length announced is relayed, the rest is not',
    );
    // Each hostile answer took its connection with it: at least one connection per hostile request.
    t.ok(upstream.connections() >= 5 * 25, `${upstream.connections()} connections for ${5 * 25} hostile answers`);
    t.equal(upstream.requests.length, sent.length, 'each request reached the upstream once');
    const after = await request(gateway.url, '/echo/after');
    t.equal(after.text, '{"id":"after"}', 'and the gateway serves on');
  },
);

t.test('with --upstream-pipelining 4: answers the parser refuses take down their connection; none reaches another client', async (t) => {
  const upstream = await startScriptedUpstream(t, hostile);
  const gateway = await startServer(t, {
    auth: false,
    args: ['--upstream', upstream.url, '--http-threads', '1', '--upstream-pipelining', '4'],
  });
  const sent = await interleave(gateway.url, ['cl-te', '204-length'], 25, 6);
  expectNoLeak(
    t,
    sent.filter((s) => s.response.status !== 502),
  );
  expectRefused(t, sent, 'cl-te');
  expectRefused(t, sent, '204-length');
  const echoes = sent.filter((s) => s.kind === 'echo');
  // A plain request pipelined behind a refused answer shares its fate: 502, never a wrong answer.
  t.ok(
    echoes.every(({ id, response }) => response.text === `{"id":"${id}"}` || response.status === 502),
    'a plain request gets its own answer or a 502',
  );
  t.ok(
    echoes.some(({ response }) => response.status === 200),
    'most get their own answer',
  );
});

/**
 * An upstream that answers GET /<id> with {"id":"<id>"} on kept-alive connections, and
 * on request writes one answer nobody asked for: appended to the next answer it sends,
 * or alone on a connection with nothing outstanding.
 */
async function unrequestedAnswers(t: Test) {
  const sockets: Socket[] = [];
  const outstanding = new Map<Socket, number>();
  const closed = new Set<Socket>();
  let appendNext = false;
  const server = createServer((socket) => {
    sockets.push(socket);
    outstanding.set(socket, 0);
    socket.on('close', () => closed.add(socket));
    socket.on('error', () => undefined);
    let pending = '';
    socket.on('data', (chunk: Buffer) => {
      pending += chunk.toString('latin1');
      let end: number;
      while ((end = pending.indexOf('\r\n\r\n')) >= 0) {
        const id = pending.slice(pending.indexOf(' ') + 2, pending.indexOf(' HTTP/1.1'));
        pending = pending.slice(end + 4);
        socket.write(appendNext ? `${answer(`{"id":"${id}"}`)}${INSIDE}` : answer(`{"id":"${id}"}`));
        appendNext = false;
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  );
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    /** The next answer carries one more behind it. */
    appendToNext(): void {
      appendNext = true;
    },
    /** Writes an answer on a kept-alive connection that has none outstanding; resolves once the gateway has closed it. */
    async writeOnIdle(): Promise<void> {
      const socket = sockets.find((s) => !closed.has(s))!;
      socket.write(INSIDE);
      while (!closed.has(socket)) await new Promise((resolve) => socket.once('close', resolve));
    },
    connections: () => sockets.length,
  };
}

t.test(
  'an answer nobody asked for ends its connection, whether it follows an answer or comes on an idle one: 8 clients over 10 rounds get their own',
  async (t) => {
    const upstream = await unrequestedAnswers(t);
    const gateway = await startServer(t, { auth: false, args: ['--upstream', upstream.url, '--http-threads', '1'] });
    const wrong: string[] = [];
    for (let round = 0; round < 10; round++) {
      if (round % 2 === 0) upstream.appendToNext();
      const answers = await Promise.all(
        Array.from({ length: 8 }, (_, i) => request(gateway.url, `/${round}-${i}`).then((r) => ({ id: `${round}-${i}`, r }))),
      );
      for (const { id, r } of answers) if (r.status !== 200 || r.text !== `{"id":"${id}"}`) wrong.push(`${id}: ${r.status} ${r.text}`);
      // All answered: every connection is idle, kept alive for the next round.
      if (round % 2 === 1) await upstream.writeOnIdle();
    }
    t.same(wrong, [], "each of 80 clients got its own answer, never the one nobody asked for nor another client's");
    t.ok(upstream.connections() > 10, `${upstream.connections()} connections: each unrequested answer took its own down`);
  },
);
