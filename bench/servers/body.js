// The response every server of the end-to-end bench answers: the body of our server's
// GET /ext/health, taken from the built host so the three can never drift apart.
import { existsSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { join } from 'node:path';
import { us_listen_socket_close, us_socket_local_port } from 'uWebSockets.js';
import { BUILD } from '../lib/common.js';

const built = join(BUILD, 'host', 'node-endpoints.js');
const { HEALTH_BODY } = existsSync(built)
  ? await import(pathToFileURL(built).href)
  : { HEALTH_BODY: '{"checks":{},"healthy":true}' };

export const BODY_TEXT = `${HEALTH_BODY}\n`;
export const BODY = Buffer.from(BODY_TEXT);
export const PATH = '/ext/health';
export const CONTENT_TYPE = 'application/json';

/** The refusal body our gate sends, for the peers' own refusals (never hit in the bench). */
export function refusal(message) {
  return `{"jsonrpc":"2.0","error":${JSON.stringify({ code: -32600, message })},"id":1}\n`;
}

/** Every bench server announces its port like the real CLI does. */
export function listening(port) {
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
