// The ceiling of the built-in endpoints: a bare uWebSockets.js server with no auth and no
// path rules, answering the same requests as ours with the same bytes: GET /ext/health
// with the health body, and a JSON-RPC POST /ext/info by reading the body, parsing it and
// writing the result (what any JSON-RPC server does per call, and no more).
// Usage: node bench/servers/bare-uws.js [port]   (0 = a free port; logs {"msg":"listening","port":N})
import { App } from 'uWebSockets.js';
import { BODY, CONTENT_TYPE, INFO_PATH, PATH, serve } from './body.js';

const NOT_FOUND = Buffer.from('404 page not found\n');
const INFO = { 'info.getNetworkID': { networkID: '12345' } };

const app = App()
  .get(PATH, (res) => {
    res.writeHeader('Content-Type', CONTENT_TYPE).end(BODY);
  })
  .post(INFO_PATH, (res) => {
    let open = true;
    res.onAborted(() => {
      open = false;
    });
    const chunks = [];
    res.onData((chunk, isLast) => {
      // uWS reuses the chunk's memory once this callback returns.
      chunks.push(Buffer.from(chunk.slice(0)));
      if (!isLast || !open) return;
      const call = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      const reply = `{"jsonrpc":"2.0","result":${JSON.stringify(INFO[call.method])},"id":${JSON.stringify(call.id)}}\n`;
      res.cork(() => res.writeHeader('Content-Type', CONTENT_TYPE).end(reply));
    });
  })
  .any('/*', (res) => {
    res.writeStatus('404 Not Found').writeHeader('Content-Type', 'text/plain; charset=utf-8').end(NOT_FOUND);
  });

serve(app, 'bare-uws');
