// A JSON-RPC answer carries its call's id. The gate's refusals (401, 403, 400) of a
// request whose body is one call, and the proxy's answers when the node did not answer
// (502, 504), echo that call's id as the client sent it (its digits, its string); web3.js
// shows an empty message for an answer whose id is not its call's. With no one call to
// echo (no body, a batch, a notification, a body that is not a call, one past the 64 KiB a
// refusal reads), the refusal keeps the original node's body, id 1, and an upstream
// failure id null. Raw sockets: the bytes as sent, the answer's bytes as written.
import t from 'tap';
import { newToken } from '../helpers/auth.js';
import { exchange, KeepAliveConnection, request } from '../helpers/http.js';
import { startServer } from '../helpers/server.js';
import { closedPort } from '../helpers/upstream.js';

const JSON_HEADERS: [string, string][] = [['Content-Type', 'application/json']];

function refused(reason: string, id: string): string {
  return `{"jsonrpc":"2.0","error":{"code":-32600,"message":${JSON.stringify(reason)}},"id":${id}}\n`;
}

const INVALID = 'the provided auth token is invalid';
const NO_TOKEN = 'auth token not provided';

const server = await startServer(t, {
  cheapChecks: true,
  args: ['--upstream', `http://127.0.0.1:${await closedPort()}`, '--http-threads', '1'],
});

t.test("a refused request with one call: the call's id, as sent", async (t) => {
  const cases: [string, string, string][] = [
    ['a string id', '{"jsonrpc":"2.0","id":"req-7","method":"eth_chainId"}', '"req-7"'],
    ['a number id, its digits as sent', '{"jsonrpc":"2.0","method":"eth_chainId","id":12345678901234567890}', '12345678901234567890'],
    ['an exponent, as written', '{"jsonrpc":"2.0","id":1e2,"method":"eth_chainId"}', '1e2'],
    ['a string with an escape', '{"id":"a\\"b","jsonrpc":"2.0","method":"eth_chainId"}', '"a\\"b"'],
    ['an id of null', '{"jsonrpc":"2.0","id":null,"method":"eth_chainId"}', 'null'],
  ];
  for (const [name, body, id] of cases) {
    const answer = await request(server.url, '/', { headers: [...JSON_HEADERS, ['Authorization', 'Bearer not-a-token']], body });
    t.equal(answer.status, 401, name);
    t.equal(answer.text, refused(INVALID, id), `${name}: ${id}`);
    t.equal(answer.headers['www-authenticate'], 'Bearer');
  }
  const none = await request(server.url, '/ext/bc/C/rpc', {
    headers: JSON_HEADERS,
    body: '{"jsonrpc":"2.0","id":"c-chain","method":"eth_chainId"}',
  });
  t.equal(none.text, refused(NO_TOKEN, '"c-chain"'), 'on an Avalanche path too, without a token');
});

t.test("no one call to echo: the original node's body, id 1", async (t) => {
  const bodies: [string, string][] = [
    ['a batch', '[{"jsonrpc":"2.0","id":5,"method":"eth_chainId"}]'],
    ['a notification', '{"jsonrpc":"2.0","method":"eth_chainId"}'],
    ['not JSON', '{"jsonrpc":"2.0","id":5,'],
    ['two values', '{"jsonrpc":"2.0","id":5,"method":"a"}{"jsonrpc":"2.0","id":6,"method":"b"}'],
  ];
  for (const [name, body] of bodies) {
    const answer = await request(server.url, '/', { headers: [...JSON_HEADERS, ['Authorization', 'Bearer not-a-token']], body });
    t.equal(answer.text, refused(INVALID, '1'), name);
  }
  const get = await request(server.url, '/', { headers: [['Authorization', 'Bearer not-a-token']] });
  t.equal(get.text, refused(INVALID, '1'), 'a GET');
  const head = await request(server.url, '/', { method: 'HEAD', headers: [['Authorization', 'Bearer not-a-token']] });
  t.equal(head.status, 401, 'a HEAD');
  t.equal(head.headers['content-length'], String(Buffer.byteLength(refused(INVALID, '1'))));
  const large = `{"jsonrpc":"2.0","id":"big","method":"eth_call","params":["${'a'.repeat(70_000)}"]}`;
  const big = await request(server.url, '/', { headers: [...JSON_HEADERS, ['Authorization', 'Bearer not-a-token']], body: large });
  t.equal(big.status, 401, 'a body past 64 KiB: still the 401, not a 413');
  t.equal(big.text, refused(INVALID, '1'), 'without reading it on');
});

t.test('a kept-alive connection stays in step: the refused body is read whole, the next request answered', async (t) => {
  const connection = new KeepAliveConnection(server.url);
  t.teardown(() => connection.close());
  const first = await connection.request('/', {
    headers: [...JSON_HEADERS, ['Authorization', 'Bearer x']],
    body: '{"jsonrpc":"2.0","id":"one","method":"m"}',
  });
  const second = await connection.request('/', {
    headers: [...JSON_HEADERS, ['Authorization', 'Bearer x']],
    body: '{"jsonrpc":"2.0","id":"two","method":"m"}',
  });
  t.same([first.status, JSON.parse(first.text).id, second.status, JSON.parse(second.text).id], [401, 'one', 401, 'two']);
});

t.test("the node did not answer (502): the call's id; a batch null", async (t) => {
  const plain = await newToken(server.url, server.password, ['/']);
  const scoped = await (async () => {
    const answer = await request(server.url, '/ext/auth', {
      headers: JSON_HEADERS,
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'auth.newToken',
        params: { password: server.password, endpoints: ['/'], methods: ['eth_*'] },
      }),
    });
    return JSON.parse(answer.text).result.token as string;
  })();
  for (const [name, token] of [
    ['a token without limits or scope (its body goes unread)', plain],
    ['a scoped token (its body judged)', scoped],
  ]) {
    const one = await request(server.url, '/', {
      headers: [...JSON_HEADERS, ['Authorization', `Bearer ${token}`]],
      body: '{"jsonrpc":"2.0","id":"up-1","method":"eth_chainId"}',
    });
    t.equal(one.status, 502, name);
    t.match(JSON.parse(one.text), { error: { code: -32044 }, id: 'up-1' }, `${name}: the id echoed`);
    const batch = await request(server.url, '/', {
      headers: [...JSON_HEADERS, ['Authorization', `Bearer ${token}`]],
      body: '[{"jsonrpc":"2.0","id":"up-2","method":"eth_chainId"}]',
    });
    t.match(JSON.parse(batch.text), { error: { code: -32044 }, id: null }, `${name}: a batch, id null`);
  }
});

t.test('the same answers with the access log on (a wrapper changes nothing)', async (t) => {
  const logged = await startServer(t, { cheapChecks: true, args: ['--access-log', 'stdout', '--http-threads', '1'] });
  const answer = await exchange(
    logged.url,
    Buffer.from(
      'POST /ext/info HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 44\r\n' +
        'Authorization: Bearer x\r\nConnection: close\r\n\r\n{"jsonrpc":"2.0","id":"log","method":"info"}',
    ),
  );
  t.equal(answer.status, 401);
  t.equal(answer.text, refused(INVALID, '"log"'));
});
