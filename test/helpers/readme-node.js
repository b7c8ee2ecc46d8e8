// `node readme-node.js`: the node that the README's "Protecting a real node" assumes on
// 127.0.0.1:9652, for test/docs/readme.test.ts, which runs it inside its private machine. It
// answers as AvalancheGo would where the README's blocks reach it: `GET /ext/health...`
// with a healthy report, and on a WebSocket (`/ext/bc/C/ws`) `eth_subscribe` to
// `newHeads` with a subscription id, then one new head. Prints "listening" once it is.
import { createServer } from 'node:http';
import { WebSocketServer } from 'ws';

const SUBSCRIPTION = '0x9cef478923ff08bf67fde6c64013158d';
const HEAD = { number: '0x1b4', hash: '0xdc0818cf78f21a8e70579cb46a43643f78291264dda342ae31049421c82d21ae', timestamp: '0x6553f100' };

const server = createServer((req, res) => {
  res.setHeader('Content-Type', 'application/json');
  if (req.method === 'GET' && req.url.startsWith('/ext/health')) res.end('{"checks":{},"healthy":true}\n');
  else res.writeHead(404).end('{"jsonrpc":"2.0","error":{"code":-32601,"message":"not found"},"id":null}\n');
});
const sockets = new WebSocketServer({ server });
sockets.on('connection', (socket) => {
  socket.on('message', (data) => {
    const call = JSON.parse(data.toString());
    if (call.method !== 'eth_subscribe') {
      socket.send(JSON.stringify({ jsonrpc: '2.0', id: call.id, error: { code: -32601, message: 'the method does not exist' } }));
      return;
    }
    socket.send(JSON.stringify({ jsonrpc: '2.0', id: call.id, result: SUBSCRIPTION }));
    socket.send(JSON.stringify({ jsonrpc: '2.0', method: 'eth_subscription', params: { subscription: SUBSCRIPTION, result: HEAD } }));
  });
});
server.listen(9652, '127.0.0.1', () => console.log('listening'));
