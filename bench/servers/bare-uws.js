// The ceiling: a bare uWebSockets.js server answering GET /ext/health with the same body
// and content-type as ours, with no auth and no path rules at all.
// Usage: node bench/servers/bare-uws.js [port]   (0 = a free port; logs {"msg":"listening","port":N})
import { App } from 'uWebSockets.js';
import { BODY, CONTENT_TYPE, PATH, serve } from './body.js';

const NOT_FOUND = Buffer.from('404 page not found\n');
const app = App()
  .get(PATH, (res) => {
    res.writeHeader('Content-Type', CONTENT_TYPE).end(BODY);
  })
  .any('/*', (res) => {
    res.writeStatus('404 Not Found').writeHeader('Content-Type', 'text/plain; charset=utf-8').end(NOT_FOUND);
  });

serve(app, 'bare-uws');
