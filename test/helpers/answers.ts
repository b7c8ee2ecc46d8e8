// Two readers of the same upstream answer bytes, for the parser's differential test:
// api-auth's own (host/http/upstream/parser.ts), fed through a reused read buffer as the
// pool feeds it, and Node's llhttp, through node:http with a connection that is a Duplex
// the bytes are pushed into. Both tell what they read in one shape.
import { request } from 'node:http';
import { Duplex } from 'node:stream';
import { ResponseParser, SWITCHED } from '../../build/host/http/upstream/parser.js';
import { REFUSED } from '../../build/host/http/upstream/response-head.js';

export type Reading =
  | { whole: true; status: number; reason: string; headers: [string, string][]; body: string }
  | { whole: false; why: string; used?: number };

/** Everything an answer says, as text, for comparing two readings. */
export function describe(reading: Reading): string {
  return JSON.stringify(reading);
}

// The pool reads every connection into one buffer, so bytes of an earlier read lie past
// the end of each new one: what they hold must never be taken for this answer's.
const READ_BUFFER = Buffer.alloc(64 * 1024);
const STALE = Buffer.from('\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n0\r\n\r\n');

/**
 * api-auth's reading of `bytes` (the answer to a request of `method`), given in parts
 * that end at each offset of `cuts`, then the connection's end.
 */
export function readOwn(bytes: Buffer, cuts: number[], method = 'GET'): Reading {
  const parser = new ResponseParser();
  parser.noBody = method === 'HEAD';
  let status = 0;
  let reason = '';
  let headers: [string, string][] = [];
  const body: Buffer[] = [];
  let ended = false;
  const handler = {
    onHead(p: ResponseParser, b: Buffer) {
      status = p.status;
      reason = b.toString('latin1', p.reasonStart, p.reasonEnd);
      headers = [];
      for (let i = 0; i < p.fieldCount; i++) {
        const f = p.fields.subarray(i * 5, i * 5 + 4);
        headers.push([b.toString('latin1', f[0], f[1]), b.toString('latin1', f[2], f[3])]);
      }
    },
    onBody(b: Buffer, start: number, end: number) {
      body.push(Buffer.from(b.subarray(start, end)));
    },
    onEnd() {
      ended = true;
    },
  };
  let from = 0;
  for (const cut of [...cuts, bytes.length]) {
    for (let i = 0; i < READ_BUFFER.length; i += STALE.length) STALE.copy(READ_BUFFER, i);
    const n = cut - from;
    bytes.copy(READ_BUFFER, 0, from, cut);
    from = cut;
    let p = 0;
    while (p < n) {
      // The pool drops the connection over them (the answer itself is relayed): `used` says where they start.
      if (ended) return { whole: false, why: 'bytes after the answer', used: cut - n + p };
      const at = parser.execute(READ_BUFFER, p, n, handler);
      if (at === REFUSED) return { whole: false, why: parser.refusal };
      if (at === SWITCHED) return { whole: false, why: 'switched protocols' };
      p = at;
    }
  }
  if (!ended) parser.finish(handler);
  if (!ended) return { whole: false, why: 'the connection ended before the answer was whole' };
  return { whole: true, status, reason, headers, body: Buffer.concat(body).toString('latin1') };
}

/** llhttp's reading of the same, through node:http, the parts pushed one by one. */
export function readLlhttp(bytes: Buffer, cuts: number[], method = 'GET'): Promise<Reading> {
  return new Promise((resolve) => {
    let settled = false;
    const done = (reading: Reading): void => {
      if (settled) return;
      settled = true;
      resolve(reading);
    };
    const socket = new Duplex({
      read() {},
      write(_chunk, _encoding, callback) {
        callback();
      },
    });
    const req = request({ method, host: '127.0.0.1', path: '/', createConnection: () => socket as never });
    req.on('error', (error) => done({ whole: false, why: (error as NodeJS.ErrnoException).code ?? error.message }));
    req.on('response', (res) => {
      const headers: [string, string][] = [];
      for (let i = 0; i < res.rawHeaders.length; i += 2) headers.push([res.rawHeaders[i], res.rawHeaders[i + 1]]);
      const body: Buffer[] = [];
      res.on('data', (chunk: Buffer) => body.push(chunk));
      res.on('error', (error) => done({ whole: false, why: (error as NodeJS.ErrnoException).code ?? error.message }));
      res.on('aborted', () => done({ whole: false, why: 'aborted' }));
      res.on('end', () => {
        if (!res.complete) return done({ whole: false, why: 'incomplete' });
        done({
          whole: true,
          status: res.statusCode ?? 0,
          reason: res.statusMessage ?? '',
          headers,
          body: Buffer.concat(body).toString('latin1'),
        });
      });
      res.on('close', () => done({ whole: false, why: 'closed' }));
    });
    req.end();
    let from = 0;
    for (const cut of [...cuts, bytes.length]) {
      socket.push(bytes.subarray(from, cut));
      from = cut;
    }
    socket.push(null);
  });
}
