// The request-level vectors (test/vectors/requests.json, written by
// test/vectors/generate-requests.js) on the gateway: each case's bytes on a raw socket to
// api-auth in front of an upstream that records what it got, and the verdict the file
// gives, which the Go gate meets too (go/gate/requests_test.go). Where the two HTTP servers
// read the bytes differently before either gate sees them, a case holds each side's
// verdict and names the layer; this file takes the gateway's.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { connect } from 'node:net';
import { freshSource, jsonrpc, parseResponse, readResponse, type HttpResponse } from '../helpers/http.js';
import { startServer } from '../helpers/server.js';
import { startRecordingUpstream, type RecordedRequest } from '../helpers/upstream.js';
import { grantEntries } from '../../build/host/core/grants.js';
import { limitEntries } from '../../build/host/service/token-params.js';

interface Verdict {
  readonly forwarded?: { readonly method: string; readonly target: string; readonly body?: string; readonly bodyHex?: string };
  readonly status?: number;
  readonly code?: number;
  readonly retryAfter?: boolean;
  readonly answer?: 'none';
}

interface Case {
  readonly name: string;
  readonly token: string;
  readonly head?: readonly string[];
  readonly body?: string;
  readonly bodyHex?: string;
  readonly raw?: string;
  readonly before?: number;
  readonly verdict?: Verdict;
  readonly layer?: string;
  readonly why?: string;
  readonly verdicts?: { readonly gateway: Verdict; readonly go: Verdict };
}

interface Vectors {
  readonly path: string;
  readonly tokens: Record<string, { readonly params: Record<string, unknown>; readonly entries: readonly string[] }>;
  readonly cases: readonly Case[];
}

const vectors = JSON.parse(readFileSync(new URL('../vectors/requests.json', import.meta.url), 'utf8')) as Vectors;

/** The bytes of a case, with `token` for "{token}": head lines joined by CRLF, and a Content-Length when the head frames no body. */
function requestBytes(c: Case, token: string): Buffer {
  if (c.raw !== undefined) return Buffer.from(c.raw.replaceAll('{token}', token), 'latin1');
  const body = c.bodyHex !== undefined ? Buffer.from(c.bodyHex, 'hex') : Buffer.from(c.body ?? '', 'utf8');
  const head = [...c.head!];
  const framed = head.some((line) => /^(content-length|transfer-encoding):/i.test(line));
  if ((c.body !== undefined || c.bodyHex !== undefined) && !framed) head.push(`Content-Length: ${body.length}`);
  return Buffer.concat([Buffer.from(`${head.join('\r\n').replaceAll('{token}', token)}\r\n\r\n`, 'latin1'), body]);
}

/**
 * The final answer to `bytes` on a fresh connection (after any interim 100 Continue);
 * null when the connection ended without one.
 */
function send(base: string, bytes: Buffer, method: string): Promise<HttpResponse | null> {
  const { hostname, port } = new URL(base);
  return new Promise((done, fail) => {
    const socket = connect({ host: hostname, port: Number(port), localAddress: freshSource() });
    let received = Buffer.alloc(0);
    let settled = false;
    const attempt = (ended: boolean): void => {
      if (settled) return;
      let final = received;
      for (
        let interim = readResponse(final, false, method);
        interim !== undefined && interim.response.status < 200;
        interim = readResponse(final, false, method)
      )
        final = final.subarray(interim.length);
      try {
        const response = parseResponse(final, ended, method);
        if (response === undefined && !ended) return;
        if (response === undefined && final.length > 0) throw new Error(`an answer cut short: ${JSON.stringify(final.toString('latin1'))}`);
        settled = true;
        socket.destroy();
        done(response ?? null);
      } catch (error) {
        settled = true;
        socket.destroy();
        fail(error as Error);
      }
    };
    socket.on('connect', () => socket.write(bytes, () => undefined));
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      attempt(false);
    });
    socket.on('close', () => attempt(true));
    socket.on('error', () => undefined);
  });
}

/** '' when the answer and what the upstream got are the verdict, else what differs. */
function judge(want: Verdict, got: HttpResponse | null, forwarded: readonly RecordedRequest[]): string {
  const seen =
    `${got === null ? 'no answer' : `${got.status} ${JSON.stringify(got.text.slice(0, 120))}`}` +
    forwarded.map((f) => `; forwarded ${f.method} ${f.target} ${JSON.stringify(f.body.toString('latin1').slice(0, 120))}`).join('');
  if (want.answer === 'none') return got === null && forwarded.length === 0 ? '' : `want no answer; got ${seen}`;
  if (want.forwarded !== undefined) {
    const f = want.forwarded;
    const body = f.bodyHex !== undefined ? Buffer.from(f.bodyHex, 'hex') : Buffer.from(f.body ?? '', 'utf8');
    const ok =
      got?.status === 200 &&
      forwarded.length === 1 &&
      forwarded[0].method === f.method &&
      forwarded[0].target === f.target &&
      forwarded[0].body.equals(body);
    return ok ? '' : `want forwarded as ${f.method} ${f.target} ${JSON.stringify(body.toString('latin1').slice(0, 120))}; got ${seen}`;
  }
  if (got === null || got.status !== want.status || forwarded.length > 0) return `want ${want.status}; got ${seen}`;
  if (want.code !== undefined) {
    let code: unknown;
    try {
      const answer = JSON.parse(got.text) as { error?: { code?: unknown } } | { error?: { code?: unknown } }[];
      code = Array.isArray(answer) ? answer[0]?.error?.code : answer.error?.code;
    } catch {
      code = undefined;
    }
    if (code !== want.code) return `want JSON-RPC code ${want.code}; got ${String(code)} in ${JSON.stringify(got.text.slice(0, 120))}`;
  }
  if (want.retryAfter !== undefined && want.retryAfter !== 'retry-after' in got.headers) {
    return `want Retry-After ${want.retryAfter}; got ${got.headers['retry-after'] ?? 'none'}`;
  }
  return '';
}

t.test('each kind of token is the same grant for the gateway and for the core the Go gate runs', async (t) => {
  for (const [kind, { params, entries }] of Object.entries(vectors.tokens)) {
    const p = params as { endpoints: string[]; methods?: string[] };
    t.same(grantEntries(p.endpoints, p.methods, limitEntries(params)), entries, kind);
  }
});

t.test('the gateway judges every request of requests.json as the file says', async (t) => {
  const upstream = await startRecordingUpstream(t);
  const server = await startServer(t, { cheapChecks: true, args: ['--upstream', upstream.url] });
  const bytesOf = async (c: Case): Promise<{ bytes: Buffer; method: string }> => {
    let token = '';
    if (c.token !== 'none') {
      const issued = await jsonrpc(`${server.url}/ext/auth`, 'auth.newToken', {
        password: server.password,
        ...vectors.tokens[c.token].params,
      });
      token = issued.result?.token as string;
    }
    const bytes = requestBytes(c, token);
    return { bytes, method: bytes.toString('latin1', 0, bytes.indexOf(' ')) };
  };
  const named = (c: Case): string => (c.layer === undefined ? c.name : `${c.name} (${c.layer}: ${c.why})`);
  // A request that uWebSockets.js refuses unanswered is known as such only when the
  // connection ends, at the server's HTTP idle timeout (10 s, which it does not let a host
  // set): those are sent first, all at once, and judged once every other case has been. Each
  // still needs no answer, and nothing may reach the upstream while they are open; one that
  // was forwarded after all would have been answered, which its own verdict refuses.
  const unanswered: { c: Case; got: Promise<HttpResponse | null> }[] = [];
  for (const c of vectors.cases) {
    if ((c.verdict ?? c.verdicts?.gateway)?.answer !== 'none' || (c.before ?? 0) > 0) continue;
    const { bytes, method } = await bytesOf(c);
    unanswered.push({ c, got: send(server.url, bytes, method) });
  }
  for (const c of vectors.cases) {
    const want = c.verdict ?? c.verdicts?.gateway;
    if (want === undefined) {
      t.fail(`${c.name}: no verdict for the gateway`);
      continue;
    }
    if (unanswered.some((u) => u.c === c)) continue;
    const { bytes, method } = await bytesOf(c);
    for (let k = 0; k < (c.before ?? 0); k++) {
      const before = await send(server.url, bytes, method);
      t.ok(before?.status === 200 && upstream.requests.splice(0).length === 1, `${c.name}: request ${k + 1} before it is forwarded`);
    }
    const got = await send(server.url, bytes, method);
    t.equal(judge(want, got, upstream.requests.splice(0)), '', named(c));
  }
  const answers = await Promise.all(unanswered.map((u) => u.got));
  const forwarded = upstream.requests.splice(0);
  unanswered.forEach((u, i) => t.equal(judge({ answer: 'none' }, answers[i], forwarded), '', named(u.c)));
});
