// No answer names the server behind the port. uWebSockets.js writes "uWebSockets: 20"
// into every answer of a loop that was not told otherwise, and each thread has its own
// loop: on one thread and on two, no answer a client can get carries it, whether the
// gateway wrote it (200, 401, 404) or the upgrade that opens a session did (101).
import t, { type Test } from 'tap';
import { newToken } from '../helpers/auth.js';
import { exchange, request, type HttpResponse } from '../helpers/http.js';
import { startServer } from '../helpers/server.js';
import { startWsUpstream } from '../helpers/ws-upstream.js';

const UPGRADE =
  'GET /ext/bc/C/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
  'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n';

function unmarked(t: Test, response: HttpResponse, status: number, what: string): void {
  t.equal(response.status, status, what);
  t.notOk(
    Object.keys(response.headers).some((name) => name === 'uwebsockets'),
    `${what}: no uWebSockets header`,
  );
}

const upstream = await startWsUpstream(t);

for (const threads of ['1', '2']) {
  t.test(`on ${threads} thread(s), no answer carries uWS's mark`, async (t) => {
    const gateway = await startServer(t, { cheapChecks: true, args: ['--http-threads', threads] });
    const token = await newToken(gateway.url, gateway.password, ['*']);
    // Consecutive connections go to the threads in turn: each kind twice, so both threads answer it.
    for (let round = 0; round < 2; round++) {
      unmarked(
        t,
        await request(gateway.url, '/ext/info', {
          method: 'POST',
          headers: [
            ['Authorization', `Bearer ${token}`],
            ['Content-Type', 'application/json'],
          ],
          body: '{"jsonrpc":"2.0","id":1,"method":"info.getNodeVersion"}',
        }),
        200,
        'a call',
      );
      unmarked(t, await request(gateway.url, '/ext/info'), 401, 'no token');
      unmarked(t, await request(gateway.url, '/nope', { headers: [['Authorization', `Bearer ${token}`]] }), 404, 'no such route');
    }
    const relay = await startServer(t, { auth: false, args: ['--http-threads', threads, '--upstream', upstream.url] });
    for (let round = 0; round < 2; round++) unmarked(t, await exchange(relay.url, Buffer.from(UPGRADE)), 101, 'an upgrade');
  });
}
