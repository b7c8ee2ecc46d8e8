// The ceiling: a bare uWebSockets.js server answering GET /ext/health with the same body
// and content-type as ours, with no auth and no path rules at all.
// Usage: node bench/servers/bare-uws.js [port]   (0 = a free port; logs {"msg":"listening","port":N})
import { App, us_listen_socket_close, us_socket_local_port } from 'uWebSockets.js';
import { BODY, CONTENT_TYPE, PATH, listening } from './body.js';

const NOT_FOUND = Buffer.from('404 page not found\n');
const app = App()
  .get(PATH, (res) => {
    res.writeHeader('Content-Type', CONTENT_TYPE).end(BODY);
  })
  .any('/*', (res) => {
    res.writeStatus('404 Not Found').writeHeader('Content-Type', 'text/plain; charset=utf-8').end(NOT_FOUND);
  });

let listenSocket = null;
app.listen('127.0.0.1', Number(process.argv[2] ?? 0), (socket) => {
  if (!socket) {
    process.stderr.write('bare-uws: cannot listen\n');
    process.exit(1);
  }
  listenSocket = socket;
  listening(us_socket_local_port(socket));
});

const stop = () => {
  if (listenSocket) us_listen_socket_close(listenSocket);
  app.close();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
