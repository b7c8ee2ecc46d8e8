// The upstream answer parser (host/http/upstream/parser.ts) against Node's own, llhttp:
// both read one corpus of answers (every framing the gateway relays, and the malformed
// and ambiguous ones), each split at every byte boundary, and answers fast-check makes.
// They read the same answer, or the gateway's parser refuses one llhttp takes: then the
// case names the rule, and why the gateway holds to it.
import t from 'tap';
import fc from 'fast-check';
import { describe, readLlhttp, readOwn, type Reading } from '../helpers/answers.js';
import { checkProperty } from '../helpers/fuzz.js';

interface Case {
  name: string;
  bytes: Buffer;
  method?: string;
  /** Set when the gateway refuses the answer: why, and the rule its refusal names. */
  stricter?: { why: string; rule: RegExp };
}

const b = (text: string): Buffer => Buffer.from(text, 'latin1');
const big = 'x'.repeat(8000);

const CORPUS: Case[] = [
  { name: 'Content-Length', bytes: b('HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{"result":1}\n') },
  { name: 'Content-Length: 0', bytes: b('HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n') },
  { name: 'chunked, two chunks', bytes: b('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n7\r\n, world\r\n0\r\n\r\n') },
  {
    name: 'chunked, sizes in upper case and with leading zeros',
    bytes: b('HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n00A\r\n0123456789\r\n000\r\n\r\n'),
  },
  {
    name: 'chunked, with trailers',
    bytes: b('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Sum\r\n\r\n3\r\nabc\r\n0\r\nX-Sum: 42\r\nX-More: yes\r\n\r\n'),
  },
  { name: 'a body that runs to the close', bytes: b('HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nhello until the close') },
  { name: 'HTTP/1.0 with Content-Length', bytes: b('HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok') },
  { name: 'HTTP/1.0 running to the close', bytes: b('HTTP/1.0 200 OK\r\n\r\nuntil the end') },
  { name: 'the answer to HEAD: a length, no body', method: 'HEAD', bytes: b('HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n') },
  { name: 'the answer to HEAD: chunked, no body', method: 'HEAD', bytes: b('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n') },
  { name: '204, no body', bytes: b('HTTP/1.1 204 No Content\r\nX-Empty: yes\r\n\r\n') },
  { name: '304 with the length of the full answer', bytes: b('HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\nETag: "a"\r\n\r\n') },
  { name: '100 Continue, then the answer', bytes: b('HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok') },
  {
    name: '103 Early Hints, then the answer',
    bytes: b('HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n'),
  },
  { name: 'Connection: close', bytes: b('HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 3\r\n\r\nbye') },
  { name: 'a reason of its own', bytes: b('HTTP/1.1 201 Created Here\r\nContent-Length: 0\r\n\r\n') },
  { name: 'no reason', bytes: b('HTTP/1.1 200\r\nContent-Length: 0\r\n\r\n') },
  { name: 'no reason, with its space', bytes: b('HTTP/1.1 200 \r\nContent-Length: 0\r\n\r\n') },
  { name: 'a value beyond ASCII (obs-text)', bytes: b('HTTP/1.1 200 OK\r\nX-Name: caf\xe9 \xff\r\nContent-Length: 0\r\n\r\n') },
  {
    name: 'repeated, empty and padded fields',
    bytes: b('HTTP/1.1 200 OK\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nX-Empty:\r\nX-Pad: \t a b \t\r\nContent-Length: 0\r\n\r\n'),
  },
  {
    name: "Go's net/http",
    bytes: b(
      'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: Thu, 26 Nov 2026 14:00:00 GMT\r\nContent-Length: 36\r\n\r\n{"jsonrpc":"2.0","id":1,"result":"0"}'.slice(
        0,
        -1,
      ),
    ),
  },
  {
    name: 'node:http',
    bytes: b(
      'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nDate: Thu, 26 Nov 2026 14:00:00 GMT\r\nConnection: keep-alive\r\nKeep-Alive: timeout=5\r\nContent-Length: 2\r\n\r\n{}',
    ),
  },
  { name: 'a head of 8 kB', bytes: b(`HTTP/1.1 200 OK\r\nX-Big: ${big}\r\nContent-Length: 1\r\n\r\n.`) },

  // Refused by the gateway. Each rule holds because an answer read two ways is how a proxy
  // and what lies behind it come to disagree on where an answer ends.
  {
    name: 'a folded header line',
    bytes: b('HTTP/1.1 200 OK\r\nX-A: a\r\n  b\r\nContent-Length: 0\r\n\r\n'),
    stricter: { why: 'RFC 9112 §5.2: obs-fold is obsolete, and a proxy must not pass it on unchanged', rule: /obs-fold/ },
  },
  {
    name: 'a NUL in a header value',
    bytes: b('HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 0\r\n\r\n'),
    stricter: { why: 'RFC 9110 §5.5: NUL is never part of a field value', rule: /control byte|NUL/ },
  },
  {
    name: 'DEL in a header value',
    bytes: b('HTTP/1.1 200 OK\r\nX-A: a\x7fb\r\nContent-Length: 0\r\n\r\n'),
    stricter: { why: 'RFC 9110 §5.5: a field value holds VCHAR, SP, HTAB and obs-text only', rule: /control byte/ },
  },
  {
    name: 'a header line ending in a bare LF',
    bytes: b('HTTP/1.1 200 OK\r\nX-A: a\nContent-Length: 0\r\n\r\n'),
    stricter: { why: 'RFC 9112 §2.2: a bare LF is a line end to some readers and not to others', rule: /CRLF/ },
  },
  {
    name: 'a head in bare LFs',
    bytes: b('HTTP/1.1 200 OK\nContent-Length: 0\n\n'),
    stricter: { why: 'RFC 9112 §2.2: a bare LF is a line end to some readers and not to others', rule: /CRLF/ },
  },
  {
    name: 'two equal Content-Length',
    bytes: b('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 2\r\n\r\nok'),
    stricter: { why: 'RFC 9112 §6.3: a repeated Content-Length is an error a proxy must not relay', rule: /two Content-Length/ },
  },
  {
    name: 'two different Content-Length',
    bytes: b('HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 5\r\n\r\nokokok'),
    stricter: { why: 'RFC 9112 §6.3: which one holds is the classic desynchronisation', rule: /two Content-Length/ },
  },
  {
    name: 'a Content-Length list',
    bytes: b('HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok'),
    stricter: { why: 'RFC 9112 §6.3: a list is read as one length by some and refused by others', rule: /not a number/ },
  },
  {
    name: 'a Content-Length with a sign',
    bytes: b('HTTP/1.1 200 OK\r\nContent-Length: +2\r\n\r\nok'),
    stricter: { why: 'RFC 9110 §8.6: Content-Length is 1*DIGIT', rule: /not a number/ },
  },
  {
    name: 'Content-Length and Transfer-Encoding',
    bytes: b('HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n'),
    stricter: {
      why: 'RFC 9112 §6.1: a server must not send both; the smuggling answer',
      rule: /both Content-Length and Transfer-Encoding/,
    },
  },
  {
    name: 'Transfer-Encoding: gzip, chunked',
    bytes: b('HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n'),
    stricter: { why: 'a coding the gateway would relay without decoding, under a Transfer-Encoding it drops', rule: /not "chunked"/ },
  },
  {
    name: 'two Transfer-Encoding',
    bytes: b('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n'),
    stricter: {
      why: 'one coding, said once: a list split over lines is read differently by different readers',
      rule: /two Transfer-Encoding/,
    },
  },
  {
    name: 'a chunk extension',
    bytes: b('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;name=value\r\nabc\r\n0\r\n\r\n'),
    stricter: { why: 'no node sends one, and the grammar of extensions is where chunk readers part ways', rule: /extension/ },
  },
  {
    name: 'a space after a chunk size',
    bytes: b('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3 \r\nabc\r\n0\r\n\r\n'),
    stricter: { why: 'RFC 9112 §7.1: chunk-size is 1*HEXDIG, then CRLF or an extension', rule: /chunk size/ },
  },
  {
    name: 'a chunk longer than its size',
    bytes: b('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcd\r\n0\r\n\r\n'),
    stricter: { why: 'the rest would be read as the next chunk size', rule: /longer than its size/ },
  },
  {
    name: 'a chunk size past 2^52',
    bytes: b('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10000000000000\r\nabc\r\n0\r\n\r\n'),
    stricter: { why: 'a size no double counts exactly', rule: /too large/ },
  },
  {
    name: 'a 204 with Content-Length',
    bytes: b('HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nhello'),
    stricter: { why: 'RFC 9110 §8.6: a 204 must not announce a body; the body would be read as the next answer', rule: /204/ },
  },
  {
    name: 'a 204 with Transfer-Encoding',
    bytes: b('HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n'),
    stricter: { why: 'RFC 9112 §6.1: a 204 must not have Transfer-Encoding; the chunks would be read as the next answer', rule: /204/ },
  },
  {
    name: 'a head over 16 KiB',
    bytes: b(`HTTP/1.1 200 OK\r\nX-Big: ${'y'.repeat(17 * 1024)}\r\nContent-Length: 0\r\n\r\n`),
    stricter: { why: 'the head limit of undici and node:http', rule: /over 16384 bytes/ },
  },
  {
    name: 'a status of two digits',
    bytes: b('HTTP/1.1 20 OK\r\nContent-Length: 0\r\n\r\n'),
    stricter: { why: 'RFC 9112 §4: status-code is 3DIGIT', rule: /three digits/ },
  },
  {
    name: 'a status below 100',
    bytes: b('HTTP/1.1 099 Odd\r\nContent-Length: 0\r\n\r\n'),
    stricter: { why: 'RFC 9110 §15: status codes run from 100 to 599', rule: /three digits/ },
  },
  {
    name: 'another protocol',
    bytes: b('HTTP/2.0 200 OK\r\nContent-Length: 0\r\n\r\n'),
    stricter: { why: 'the client speaks HTTP/1.1 only', rule: /HTTP\/1.1 or HTTP\/1.0/ },
  },
  {
    name: "a space before a header's colon",
    bytes: b('HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\nhello'),
    stricter: { why: 'RFC 9112 §5.1: no whitespace between name and colon, which readers trim or not', rule: /name, a colon/ },
  },
  {
    name: 'a header line without a colon',
    bytes: b('HTTP/1.1 200 OK\r\nNo colon here\r\nContent-Length: 0\r\n\r\n'),
    stricter: { why: 'RFC 9112 §5: a field line is a name, a colon and a value', rule: /name, a colon/ },
  },
  {
    name: 'a CR leading a header line',
    bytes: b('HTTP/1.1 200 OK\r\n\r: x\r\nContent-Length: 0\r\n\r\n'),
    stricter: {
      why: "RFC 9112 §2.2: a CR alone ends no line; read as the head's end, what follows would be the body",
      rule: /name, a colon/,
    },
  },
  {
    name: 'a cut body',
    bytes: b('HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhalf'),
    stricter: { why: 'not a stricter rule: both see the connection end before the answer is whole', rule: /ended before/ },
  },
];

/** Offsets that cut `length` bytes into two parts, at each boundary; and one cut per byte. */
function splits(length: number): number[][] {
  const cuts: number[][] = [[]];
  for (let i = 1; i < length; i++) cuts.push([i]);
  cuts.push(Array.from({ length: length - 1 }, (_, i) => i + 1));
  return cuts;
}

const verdicts: string[] = [];

for (const c of CORPUS) {
  t.test(c.name, async (t) => {
    const method = c.method ?? 'GET';
    const whole = readOwn(c.bytes, [], method);
    // However it is split, the gateway reads it as it reads it whole (a refusal may name
    // another rule, seen from another read). llhttp is asked at every boundary too: some of
    // its readings depend on where the bytes are split (a 204 whose body comes in a later
    // read is whole, with it in the same read it is refused).
    let ownSplits = 0;
    const nodeReadings = new Set<string>();
    let node: Reading | null = null;
    for (const cuts of splits(c.bytes.length)) {
      const own = readOwn(c.bytes, cuts, method);
      if (own.whole === whole.whole && (!own.whole || describe(own) === describe(whole))) ownSplits++;
      else t.fail(`the gateway reads the split at ${cuts.join(',')} otherwise: ${describe(own)}`);
      // llhttp is slow to start per answer: every boundary of the short answers, of the long ones a sample.
      if (c.bytes.length < 600 || cuts.length !== 1 || cuts[0] % 97 === 0) {
        const reading = await readLlhttp(c.bytes, cuts, method);
        nodeReadings.add(describe(reading));
        if (node === null || (reading.whole && !node.whole)) node = reading;
      }
    }
    t.equal(ownSplits, splits(c.bytes.length).length, 'the gateway reads it the same, however it is split');
    if (node === null) throw new Error('llhttp was not asked');
    if (c.stricter === undefined) t.equal(nodeReadings.size, 1, 'llhttp reads it the same, however it is split');
    if (c.stricter === undefined) {
      t.ok(whole.whole, `the gateway reads it: ${describe(whole)}`);
      t.equal(describe(whole), describe(node), 'as llhttp does');
      verdicts.push(`agree: ${c.name}`);
      return;
    }
    t.notOk(whole.whole, 'the gateway refuses it');
    if (!whole.whole) t.match(whole.why, c.stricter.rule, `for the rule: ${whole.why}`);
    const verdict = node.whole
      ? `stricter than llhttp (which reads it${nodeReadings.size > 1 ? ' when split' : ''}): ${c.name}, because ${c.stricter.why}`
      : `both refuse: ${c.name} (llhttp: ${node.why})`;
    verdicts.push(verdict);
    t.comment(verdict);
  });
}

// Answers made from parts: a status, fields, a framing, a body cut into chunks; and, in
// some, one byte changed or put in. Whatever the gateway reads, llhttp reads the same;
// what it refuses and llhttp reads, it refuses for one of the rules of the corpus.
const RULES = CORPUS.filter((c) => c.stricter !== undefined).map((c) => c.stricter!.rule);
const token = fc.stringMatching(/^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,12}$/);
const text = fc.stringMatching(/^[\x20-\x7e\t]{0,20}$/).map((s) => s.trim());
const answer = fc
  .record({
    status: fc.constantFrom(200, 201, 204, 301, 304, 400, 404, 429, 500, 503),
    reason: fc.constantFrom('', ' OK', ' Something Else'),
    fields: fc.array(fc.tuple(token, text), { maxLength: 6 }),
    framing: fc.constantFrom('length', 'chunked', 'close'),
    body: fc.uint8Array({ maxLength: 200 }),
    chunk: fc.integer({ min: 1, max: 64 }),
    change: fc.option(fc.record({ at: fc.nat(), byte: fc.integer({ min: 0, max: 255 }), insert: fc.boolean() })),
    cut: fc.nat(),
  })
  .map((a) => {
    const fields = a.fields.filter(([name]) => !/^(content-length|transfer-encoding|connection)$/i.test(name));
    const body = [204, 304].includes(a.status) ? new Uint8Array(0) : a.body;
    let head = `HTTP/1.1 ${a.status}${a.reason}\r\n${fields.map(([n, v]) => `${n}: ${v}\r\n`).join('')}`;
    let payload = Buffer.from(body);
    if (a.framing === 'length' || [204, 304].includes(a.status)) {
      if (a.status !== 204) head += `Content-Length: ${body.length}\r\n`;
    } else if (a.framing === 'chunked') {
      head += 'Transfer-Encoding: chunked\r\n';
      const parts: Buffer[] = [];
      for (let i = 0; i < body.length; i += a.chunk) {
        const part = body.subarray(i, i + a.chunk);
        parts.push(Buffer.from(`${part.length.toString(16)}\r\n`), Buffer.from(part), Buffer.from('\r\n'));
      }
      parts.push(Buffer.from('0\r\n\r\n'));
      payload = Buffer.concat(parts);
    }
    let bytes = Buffer.concat([Buffer.from(`${head}\r\n`, 'latin1'), payload]);
    if (a.change !== null) {
      const at = a.change.at % bytes.length;
      bytes = a.change.insert
        ? Buffer.concat([bytes.subarray(0, at), Buffer.from([a.change.byte]), bytes.subarray(at)])
        : Buffer.concat([bytes.subarray(0, at), Buffer.from([a.change.byte]), bytes.subarray(at + 1)]);
    }
    return { bytes, cut: a.cut % bytes.length };
  });

t.test('answers fast-check makes and mangles: read as llhttp reads them, or refused by a rule of the corpus', async (t) => {
  let stricter = 0;
  await checkProperty(
    t,
    'the gateway agrees with llhttp, or is stricter for a named rule',
    fc.asyncProperty(answer, async (made) => {
      let { bytes, cut } = made;
      let own = readOwn(bytes, []);
      if (!own.whole && own.used !== undefined) {
        // Bytes after a whole answer (a byte put in after its end): the answer is read as the bytes before them.
        bytes = bytes.subarray(0, own.used);
        cut = Math.min(cut, bytes.length - 1);
        own = readOwn(bytes, []);
      }
      const split = readOwn(bytes, cut > 0 ? [cut] : []);
      if (split.whole !== own.whole || (own.whole && describe(split) !== describe(own))) return false;
      const node = await readLlhttp(bytes, []);
      if (own.whole) return describe(own) === describe(node);
      if (node.whole) {
        stricter++;
        return RULES.some((rule) => rule.test(own.why));
      }
      return true;
    }),
    { numRuns: 2000 },
  );
  t.comment(`${stricter} answers the gateway refused and llhttp read, each for a rule of the corpus`);
});

t.teardown(() => {
  for (const verdict of verdicts) console.error(`# ${verdict}`);
});
