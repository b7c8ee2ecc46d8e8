// For bench/experiments/refusal-cost.js: a bare uWebSockets.js server that answers GET
// /ext/health like the others and refuses every POST with 429 in three ways, to price a
// refused password guess and see what each does to the protected endpoint under a flood.
//   POST /close   answers before reading the body and closes the connection (what a server
//                 must do when it will not read the body)
//   POST /keep    reads (and drops) the body, answers, and keeps the connection
//   POST /tarpit  reads the body, answers after TARPIT_MS (1000), and keeps the connection
// Usage: node bench/servers/refuse-uws.js [port]
import { App } from 'uWebSockets.js';
import { BODY as HEALTH, CONTENT_TYPE, PATH, serve } from './body.js';

const TARPIT_MS = Number(process.env.TARPIT_MS ?? 1000);

const BODY = Buffer.from(
  '{"jsonrpc":"2.0","error":{"code":-32005,"message":"too many failed password attempts; retry in 1 s"},"id":null}\n',
);
const refuse = (res) =>
  res.writeStatus('429 Too Many Requests').writeHeader('Content-Type', 'application/json').writeHeader('Retry-After', '1').end(BODY);
const app = App()
  .get(PATH, (res) => {
    res.writeHeader('Content-Type', CONTENT_TYPE).end(HEALTH);
  })
  .post('/tarpit', (res) => {
    let open = true;
    res.onAborted(() => {
      open = false;
    });
    res.onData((_chunk, isLast) => {
      if (isLast)
        setTimeout(() => {
          if (open) res.cork(() => refuse(res));
        }, TARPIT_MS);
    });
  })
  .post('/close', (res) => {
    res
      .writeStatus('429 Too Many Requests')
      .writeHeader('Content-Type', 'application/json')
      .writeHeader('Retry-After', '1')
      .end(BODY, true);
  })
  .post('/keep', (res) => {
    let open = true;
    res.onAborted(() => {
      open = false;
    });
    res.onData((_chunk, isLast) => {
      if (isLast && open) {
        res.cork(() => refuse(res));
      }
    });
  });

serve(app, 'refuse-uws');
