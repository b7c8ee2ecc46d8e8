// The one registration of the handlers (host/http/handlers.ts), on a real uWS app: a
// handler that throws still answers 500 with a JSON-RPC internal error and reports the
// exception; one that answers is untouched. The listener and every HTTP thread use it.
import t from 'tap';
import { App, us_listen_socket_close, us_socket_local_port } from 'uWebSockets.js';
import type { us_listen_socket } from 'uWebSockets.js';
import { serveOn } from '../../build/host/http/handlers.js';
import { request } from '../helpers/http.js';

t.test('a handler that throws answers 500 and reports the exception; the app serves on', async (t) => {
  const failures: unknown[] = [];
  const app = serveOn(
    App(),
    {
      handle(res, req) {
        if (req.getUrl() === '/throw') throw new Error('thrown in a handler');
        res.end('fine');
      },
    },
    (error) => failures.push(error),
  );
  const socket = await new Promise<us_listen_socket>((resolve, reject) =>
    app.listen('127.0.0.1', 0, (s) => (s ? resolve(s) : reject(new Error('no port')))),
  );
  t.teardown(() => us_listen_socket_close(socket));
  const base = `http://127.0.0.1:${us_socket_local_port(socket)}`;
  const thrown = await request(base, '/throw');
  t.equal(thrown.status, 500);
  t.equal(thrown.headers['content-type'], 'application/json');
  t.same(JSON.parse(thrown.text), { jsonrpc: '2.0', error: { code: -32603, message: 'internal error' }, id: null });
  t.equal(failures.length, 1, 'reported once');
  t.match((failures[0] as Error).message, 'thrown in a handler');
  const fine = await request(base, '/');
  t.equal(fine.status, 200);
  t.equal(fine.text, 'fine', 'an answering handler is untouched');
  t.equal(failures.length, 1);
});
