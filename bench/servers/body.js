// The built-in endpoints' requests and answers, shared by ours and the bare server: the
// body of our GET /ext/health, taken from the built host so the two can never drift apart,
// and one JSON-RPC call to /ext/info.
import { existsSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';
import { us_listen_socket_close, us_socket_local_port } from 'uWebSockets.js';
import { BUILD } from '../lib/common.js';

const built = join(BUILD, 'host', 'http', 'node-endpoints.js');
const { HEALTH_BODY } = existsSync(built) ? await import(pathToFileURL(built).href) : { HEALTH_BODY: '{"checks":{},"healthy":true}' };

export const BODY_TEXT = `${HEALTH_BODY}\n`;
export const BODY = Buffer.from(BODY_TEXT);
export const PATH = '/ext/health';
export const CONTENT_TYPE = 'application/json';
export const INFO_PATH = '/ext/info';
export const INFO_REQUEST = JSON.stringify({ jsonrpc: '2.0', method: 'info.getNetworkID', params: {}, id: 1 });

/** Every bench server announces its port like the real CLI does. */
function listening(port) {
  process.stdout.write(`${JSON.stringify({ level: 'info', msg: 'listening', host: '127.0.0.1', port })}\n`);
}

/**
 * Listens on 127.0.0.1 (port from argv, 0 = a free one), announces the port, and stops on
 * SIGTERM or SIGINT: the same for every bench server built on uWebSockets.js.
 */
export function serve(app, name) {
  let listenSocket = null;
  app.listen('127.0.0.1', Number(process.argv[2] ?? 0), (socket) => {
    if (!socket) {
      process.stderr.write(`${name}: cannot listen\n`);
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
}
