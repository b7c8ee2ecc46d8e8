// HTTP/1.1 over TLS from the bench itself, trusting only the bench's certificate (lib/
// certificate.js): one request per new connection, written as bytes so that what a
// gateway does with the connection afterwards can be seen (fetch would hide it).
import { connect } from 'node:tls';

/**
 * One request on a new TLS connection to 127.0.0.1:`port`, offering `session` (a previous
 * connection's) for resumption. `connection` is the request's Connection header. Resolves
 * once the server closes, or `lingerMs` after a whole answer if it keeps the connection
 * open, with { status, headers (lower-case names), body, closed (by the server), reused
 * (the session was resumed), protocol, cipher, session (the last one the server gave) }.
 */
export function exchange({
  port,
  ca,
  session,
  method = 'POST',
  path,
  headers = {},
  body = '',
  connection = 'keep-alive',
  lingerMs = 1000,
  timeoutMs = 10000,
}) {
  const head = [
    `${method} ${path} HTTP/1.1`,
    `Host: 127.0.0.1:${port}`,
    `Connection: ${connection}`,
    `Content-Length: ${Buffer.byteLength(body)}`,
    ...Object.entries(headers)
      .filter(([, v]) => v != null)
      .map(([k, v]) => `${k}: ${v}`),
  ];
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port, ca, session });
    const chunks = [];
    let closed = false;
    let linger = null;
    let latest = null;
    let facts = null;
    const deadline = setTimeout(
      () => socket.destroy(new Error(`no whole answer from 127.0.0.1:${port} within ${timeoutMs} ms`)),
      timeoutMs,
    );
    socket.on('session', (s) => {
      latest = s;
    });
    socket.once('secureConnect', () => {
      const cipher = socket.getCipher();
      facts = { reused: socket.isSessionReused(), protocol: socket.getProtocol(), cipher: cipher?.standardName ?? cipher?.name };
      socket.write(`${head.join('\r\n')}\r\n\r\n${body}`);
    });
    socket.on('data', (d) => {
      chunks.push(d);
      // A server that keeps the connection has nothing more to say: give it lingerMs to close.
      if (linger === null && parse(Buffer.concat(chunks))?.complete) linger = setTimeout(() => socket.destroy(), lingerMs);
    });
    socket.once('end', () => {
      closed = true;
      socket.end();
    });
    socket.once('error', (error) => {
      clearTimeout(deadline);
      clearTimeout(linger);
      reject(error);
    });
    socket.once('close', () => {
      clearTimeout(deadline);
      clearTimeout(linger);
      const final = parse(Buffer.concat(chunks));
      if (!final?.complete) {
        reject(new Error(`127.0.0.1:${port} closed the connection after ${Buffer.concat(chunks).length} bytes, before a whole answer`));
        return;
      }
      resolve({ ...final, closed, ...facts, session: latest });
    });
  });
}

/** Status, headers and body of an answer with a Content-Length; complete once the body is all there. */
function parse(bytes) {
  const end = bytes.indexOf('\r\n\r\n');
  if (end < 0) return null;
  const [statusLine, ...lines] = bytes.subarray(0, end).toString('latin1').split('\r\n');
  const headers = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  const length = Number(headers['content-length'] ?? 0);
  const body = bytes.subarray(end + 4, end + 4 + length);
  return { status: Number(statusLine.split(' ')[1]), headers, body, complete: body.length === length };
}
