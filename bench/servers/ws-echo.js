// The upstream of the WebSocket part: a bare uWebSockets.js WebSocket server that sends
// every message back as it came (text as text, binary as binary), on any path. Being the
// same fast server behind every contender, it is never what tells them apart.
// Usage: node bench/servers/ws-echo.js [port]   (0 = a free port; logs {"msg":"listening","port":N})
import { App } from 'uWebSockets.js';
import { serve } from './body.js';

const app = App().ws('/*', {
  maxPayloadLength: 16 * 1024 * 1024,
  idleTimeout: 0,
  maxBackpressure: 64 * 1024 * 1024,
  message: (ws, message, isBinary) => {
    ws.send(message, isBinary);
  },
});

serve(app, 'ws-echo');
