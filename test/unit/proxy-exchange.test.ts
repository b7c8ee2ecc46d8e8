// The proxy's exchange modes (host/http/proxy/), each driven by the upstream answer parser
// (host/http/upstream/parser.ts) reading real answer bytes, and handed a relay whose
// collaborators record what they are asked: the client's response gets the head and
// body as relayed (streamed.ts), or one merged answer (split.ts), and each exchange ends once.
import t from 'tap';
import type { HttpResponse } from 'uWebSockets.js';
import { ResponseParser } from '../../build/host/http/upstream/parser.js';
import { AnswerHeads, statusLine } from '../../build/host/http/proxy/answer-head.js';
import type { Exchange, Relay } from '../../build/host/http/proxy/exchange.js';
import { SPLIT_ANSWER_MAX, SplitExchange } from '../../build/host/http/proxy/split.js';
import { StreamedExchange } from '../../build/host/http/proxy/streamed.js';
import { ScopeRefusedError, UpstreamError } from '../../build/host/errors.js';

/** The client's response: what was written to it, in order. */
class Response {
  readonly written: unknown[][] = [];
  cork(run: () => void): this {
    run();
    return this;
  }
  writeStatus(status: string | Buffer): this {
    this.written.push(['status', String(status)]);
    return this;
  }
  writeHeader(name: string, value: string | Buffer): this {
    // Bytes beyond ASCII go as bytes (a Buffer): read back one character per byte.
    this.written.push(['header', name, typeof value === 'string' ? value : value.toString('latin1')]);
    return this;
  }
  end(body?: string | Uint8Array): this {
    this.written.push(['end', Buffer.from(body ?? '').toString()]);
    return this;
  }
  endWithoutBody(): this {
    this.written.push(['endWithoutBody']);
    return this;
  }
  getWriteOffset(): number {
    return 0;
  }
  tryEnd(body: Uint8Array, total: number): [boolean, boolean] {
    this.written.push(['tryEnd', Buffer.from(body).toString(), total]);
    return [true, true];
  }
  close(): this {
    this.written.push(['close']);
    return this;
  }
}

/** A relay whose collaborators record their calls. */
function relay(): { relay: Relay; settled: (Error | null)[]; calls: string[] } {
  const settled: (Error | null)[] = [];
  const calls: string[] = [];
  return {
    settled,
    calls,
    relay: {
      dispatch: (exchange: Exchange) => calls.push(`dispatch ${exchange.bytes.toString('latin1')}`),
      withdraw: () => {
        calls.push('withdraw');
        return false;
      },
      maxBody: 1024,
      tooLarge: (res: HttpResponse) => res.writeStatus('413 Content Too Large').end('too large'),
      switched: Buffer.from('switched'),
      splitTooLarge: Buffer.from('split too large'),
      failure: (error: Error) => ({ status: '502 Bad Gateway', body: Buffer.from(`failed: ${error.message}`) }),
      answered: (_res: HttpResponse, status: number) => calls.push(`answered ${status}`),
      cors: (res: HttpResponse, origin: string) => res.writeHeader('Access-Control-Allow-Origin', origin),
      heads: new AnswerHeads(
        new Set(['connection', 'transfer-encoding', 'date']),
        (value) => new Set(value.split(',').map((n) => n.trim())),
      ),
      settle: (error: Error | null) => settled.push(error),
    },
  };
}

/** Feeds `answer` to the exchange as the pool does: parsed (`noBody` for a HEAD's), then the read's end. */
function answer(exchange: Exchange, text: string, noBody = false): void {
  const parser = new ResponseParser();
  parser.noBody = noBody;
  const bytes = Buffer.from(text, 'latin1');
  t.equal(parser.execute(bytes, 0, bytes.length, exchange), bytes.length, 'the parser reads the whole answer');
  exchange.onReadEnd();
}

t.test('streamed: the head as relayed and the body, in one cork; the exchange ends once', async (t) => {
  const { relay: r, settled, calls } = relay();
  const res = new Response();
  const exchange = new StreamedExchange(r, res as unknown as HttpResponse, false, false, 'https://app.example');
  exchange.send(Buffer.from('GET / HTTP/1.1\r\n\r\n'));
  answer(
    exchange,
    'HTTP/1.1 200 OK\r\nDate: x\r\nConnection: keep-alive, x-drop\r\nX-Drop: 1\r\nContent-Type: application/json\r\n' +
      'Content-Length: 12\r\nX-Keep: é\r\n\r\n{"result":1}',
  );
  t.same(
    res.written,
    [
      ['status', '200 OK'],
      ['header', 'Content-Type', 'application/json'],
      ['header', 'X-Keep', 'é'],
      ['header', 'Access-Control-Allow-Origin', 'https://app.example'],
      ['tryEnd', '{"result":1}', 12],
    ],
    "Date, Connection, what Connection names and Content-Length are not relayed; CORS is the gateway's",
  );
  t.same(settled, [null], 'ended once, whole');
  t.same(calls, ['dispatch GET / HTTP/1.1\r\n\r\n', 'answered 200'], 'sent, then answered');

  const head = new Response();
  const forHead = new StreamedExchange(r, head as unknown as HttpResponse, true, true, '');
  answer(forHead, 'HTTP/1.1 404 Gone Fishing\r\nContent-Length: 7\r\n\r\n', true);
  t.same(
    head.written,
    [['status', '404 Gone Fishing'], ['header', 'Content-Length', '7'], ['endWithoutBody']],
    "HEAD: the upstream's reason and its Content-Length kept, no body",
  );
});

t.test('streamed: a failure before the head is relayed is an answer; after, a cut connection', async (t) => {
  const { relay: r, settled } = relay();
  const before = new Response();
  const early = new StreamedExchange(r, before as unknown as HttpResponse, false, false, 'https://app.example');
  early.onError(new Error('refused'));
  t.same(
    before.written,
    [
      ['status', '502 Bad Gateway'],
      ['header', 'Content-Type', 'application/json'],
      ['header', 'Access-Control-Allow-Origin', 'https://app.example'],
      ['end', 'failed: refused'],
    ],
    "the relay's answer, with CORS",
  );
  const switched = new Response();
  new StreamedExchange(r, switched as unknown as HttpResponse, false, false, '').onError(new UpstreamError('switched', 'switched'));
  t.same(
    switched.written,
    [
      ['status', '502 Bad Gateway'],
      ['header', 'Content-Type', 'application/json'],
      ['end', 'switched'],
    ],
    'an answer that switched protocols',
  );
  const after = new Response();
  const late = new StreamedExchange(r, after as unknown as HttpResponse, false, false, '');
  const parser = new ResponseParser();
  const bytes = Buffer.from('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n');
  parser.execute(bytes, 0, bytes.length, late);
  late.onReadEnd();
  late.onError(new Error('cut'));
  late.onError(new Error('again'));
  t.same(after.written, [['status', '200 OK'], ['close']], 'the status went already: the connection is cut');
  t.equal(settled.length, 3, 'each ended once');
});

t.test('split: the answer read whole and merged; an answer that is not the batch goes as it is', async (t) => {
  const { relay: r, settled } = relay();
  const merges: string[] = [];
  const merge = {
    merge: (text: string) => {
      merges.push(text);
      return text.startsWith('[') ? `[${text.slice(1, -1)},"refused"]` : undefined;
    },
  };
  const res = new Response();
  const exchange = new SplitExchange(r, res as unknown as HttpResponse, false, false, '', merge);
  answer(
    exchange,
    'HTTP/1.1 200 OK\r\nContent-Type: application/json; charset=utf-8\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n[1,\r\n2\r\n2]\r\n0\r\n\r\n',
  );
  t.same(merges, ['[1,2]'], 'the chunks merged once, whole');
  t.same(
    res.written,
    [
      ['status', statusLine(200, undefined)],
      ['header', 'Content-Type', 'application/json'],
      ['end', '[1,2,"refused"]\n'],
    ],
    'one 200 with the merged batch',
  );

  const gzip = new Response();
  const coded = new SplitExchange(r, gzip as unknown as HttpResponse, false, false, 'https://a.example', merge);
  answer(coded, 'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: 5\r\n\r\n[1,2]');
  t.same(
    gzip.written,
    [
      ['status', '200 OK'],
      ['header', 'Content-Type', 'application/json'],
      ['header', 'Content-Encoding', 'gzip'],
      ['header', 'Access-Control-Allow-Origin', 'https://a.example'],
      ['end', '[1,2]'],
    ],
    'a coded answer is not merged: it goes as it came',
  );
  t.same(merges, ['[1,2]'], 'and is not read');

  const error = new Response();
  answer(
    new SplitExchange(r, error as unknown as HttpResponse, false, false, '', merge),
    'HTTP/1.1 503 Busy\r\nContent-Length: 4\r\n\r\nbusy',
  );
  t.same(
    error.written,
    [
      ['status', '503 Service Unavailable'],
      ['end', 'busy'],
    ],
    'an error status goes as it came, with its body',
  );
  t.same(settled, [null, null, null], 'each ended once, whole');
});

t.test('split: an answer over SPLIT_ANSWER_MAX is abandoned with a 502', async (t) => {
  const { relay: r, settled, calls } = relay();
  const res = new Response();
  const exchange = new SplitExchange(r, res as unknown as HttpResponse, false, false, '', { merge: () => undefined });
  const parser = new ResponseParser();
  const head = Buffer.from(`HTTP/1.1 200 OK\r\nContent-Length: ${SPLIT_ANSWER_MAX + 1}\r\n\r\n`);
  parser.execute(head, 0, head.length, exchange);
  const part = Buffer.alloc(1024 * 1024, 0x20);
  for (let i = 0; i < 17; i++) parser.execute(part, 0, part.length, exchange);
  t.same(res.written, [
    ['status', '502 Bad Gateway'],
    ['header', 'Content-Type', 'application/json'],
    ['end', 'split too large'],
  ]);
  t.equal(settled.length, 1, 'ended once');
  t.ok(settled[0] instanceof ScopeRefusedError, 'as a scope refusal, not an upstream failure');
  t.ok(calls.includes('withdraw'), 'the upstream is told');
});
