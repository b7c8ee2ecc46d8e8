// Shared by the generated-input tests: the fast-check run settings (a fixed seed, so a
// run is repeatable; FUZZ_SEED=<n> explores another, FUZZ_RUNS=<n> goes further), the
// run itself as a tap assertion with fast-check's report, and a model of the JSON-RPC
// rules of /ext/auth that says what the server must answer to any body.
import fc from 'fast-check';
import type { Test } from 'tap';
import type { HttpResponse } from './http.js';
import { TOKEN_PATTERN } from './auth.js';

export const SEED = process.env.FUZZ_SEED === undefined ? 20_261_121 : Number(process.env.FUZZ_SEED);

/** FUZZ_RUNS=<n> runs every property n times in place of its own number (more, to explore further). */
const RUNS = process.env.FUZZ_RUNS === undefined ? undefined : Number(process.env.FUZZ_RUNS);

/**
 * Runs `property` and records one tap assertion. On failure the message holds
 * fast-check's report: the seed, the path and the shrunk counterexample, so
 * `FUZZ_SEED=<seed>` replays it. Shrinking is cut off after `timeLimitMs` overall.
 */
export async function checkProperty<T>(
  t: Test,
  name: string,
  property: fc.IAsyncProperty<T>,
  options: { numRuns: number; timeLimitMs?: number },
): Promise<void> {
  const details = await fc.check(property, {
    seed: SEED,
    numRuns: RUNS ?? options.numRuns,
    // The limit grows with the runs asked for beyond the property's own.
    interruptAfterTimeLimit: (options.timeLimitMs ?? 90_000) * Math.max(1, (RUNS ?? 0) / options.numRuns),
    markInterruptAsFailure: true,
  });
  t.comment(`${name}: ${details.numRuns} runs, seed ${SEED}${details.failed ? '' : ', no counterexample'}`);
  const error = details.errorInstance instanceof Error ? details.errorInstance.message : String(details.errorInstance);
  t.notOk(details.failed, name, { diagnostic: details.failed, report: fc.defaultReportMessage(details), error });
}

/**
 * Code points the path rules refuse even as well-formed UTF-8 (assembly/paths.ts): controls,
 * separators, default ignorables, and whatever NFKC turns into something holding a
 * character with a meaning in a path.
 */
export function refusedCodePoint(ch: string): boolean {
  return /\p{Cc}|\p{Z}|\p{Default_Ignorable_Code_Point}/u.test(ch) || /[./\\%;?#]/.test(ch.normalize('NFKC'));
}

/** Escapes of ASCII the path rules refuse: controls, and "#", "%", ".", "/", ";", "?", "\". */
const REFUSED_ESCAPE = /%(?:[01][0-9a-f]|7f|2[3e5f]|3[bf]|5c)/i;
const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * The path rules of the core (assembly/README.md, "Paths") on a path as uWS hands it
 * over (the request target up to the first "?", one character per byte): true when it
 * is refused.
 */
export function badPath(path: string): boolean {
  if (path === '' || path[0] !== '/' || path.length > 8192) return true;
  if (/[^\x21-\x7e]|[\\#]/.test(path) || /%(?![0-9a-f]{2})/i.test(path) || REFUSED_ESCAPE.test(path)) return true;
  const segments = path.slice(1).split('/');
  const blank = (segment: string) => /^(?:\.|\+|%20|%2b)*$/i.test(segment.split(';')[0]);
  if (segments.some((segment, i) => blank(segment) && !(segment === '' && i === segments.length - 1))) return true;
  let text: string;
  try {
    text = UTF8.decode(
      Buffer.from(
        path.replace(/%([0-9a-f]{2})/gi, (_, hex: string) => String.fromCharCode(parseInt(hex, 16))),
        'latin1',
      ),
    );
  } catch {
    return true;
  }
  return [...text].some((ch) => ch.codePointAt(0)! >= 0x80 && refusedCodePoint(ch));
}

// ---------------------------------------------------------------------------------
// The model of /ext/auth's JSON-RPC rules (team brief, "JSON-RPC at POST /ext/auth").

export const MAX_BODY = 65_536;
export const MAX_BATCH = 100;
export const MAX_ENDPOINTS = 128;
export const MAX_PASSWORD = 1024;

/** What one request object must get back. */
export interface EntryExpectation {
  /** No response is due: a valid notification. */
  none?: true;
  /** The id the response must carry (parsed); undefined when no response is due. */
  id?: unknown;
  /** Error codes any of which is right; empty when a result is due. */
  codes: number[];
  /** The exact message, when the model knows it. */
  message?: string;
  /** A test the message must pass, when only its start is fixed. */
  messagePattern?: RegExp;
  /** The result, when a result is due. */
  result?: 'token' | 'success' | 'revocation';
  /** The request reaches the password check with the current password. */
  checksPassword: boolean;
  /** The request would check a wrong password (the tests never send one). */
  wrongPassword: boolean;
  /** The request would change the password (the generated tests never send one). */
  changesPassword: boolean;
}

/** What a whole body must get back over HTTP 200 (or 204 when nothing is due). */
export interface BodyExpectation {
  kind: 'single' | 'batch' | 'parse-error';
  entries: EntryExpectation[];
}

/** A check refused for now: the client is throttled, or too many checks wait (README, "Throttling"). */
export const THROTTLED = -32005;
export const BUSY = -32043;

const decoder = new TextDecoder('utf-8', { fatal: true });

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function codePoints(text: string): number {
  let n = 0;
  for (const _ of text) n++;
  return n;
}

/** The model's verdict on an endpoint list that passed the type checks. */
export type GrantVerdict = 'valid' | 'invalid' | 'unknown';

/**
 * What a body must get back. `password` is the service password now; `grantVerdict`
 * says whether an endpoint list would be accepted (the rules live in the core and are
 * pinned by its own tests; the generators know which lists they made).
 */
export function expectBody(body: Buffer, password: string, grantVerdict: (endpoints: string[]) => GrantVerdict): BodyExpectation {
  let message: unknown;
  try {
    message = JSON.parse(decoder.decode(body));
  } catch {
    return {
      kind: 'parse-error',
      entries: [entry({ id: null, codes: [-32700], messagePattern: /^parse error: ./ })],
    };
  }
  if (!Array.isArray(message)) return { kind: 'single', entries: [expectRequest(message, password, grantVerdict)] };
  if (message.length === 0) {
    return { kind: 'single', entries: [entry({ id: null, codes: [-32600] })] };
  }
  if (message.length > MAX_BATCH) {
    return { kind: 'single', entries: [entry({ id: null, codes: [-32600], message: `batch holds more than ${MAX_BATCH} requests` })] };
  }
  return { kind: 'batch', entries: message.map((m) => expectRequest(m, password, grantVerdict)) };
}

function entry(fields: Partial<EntryExpectation>): EntryExpectation {
  return { codes: [], checksPassword: false, wrongPassword: false, changesPassword: false, ...fields };
}

function invalidParams(id: unknown, notification: boolean, name: string): EntryExpectation {
  return entry({ id, none: notification || undefined, codes: [-32602], messagePattern: new RegExp(`^invalid params: ${name} must be `) });
}

/** The params each method of /ext/auth takes: any other member is invalid params. */
const PARAMS: Readonly<Record<string, readonly string[]>> = {
  'auth.newToken': ['password', 'endpoints', 'methods', 'expiresIn', 'label'],
  'auth.listTokens': ['password'],
  'auth.revokeToken': ['password', 'token', 'id'],
  'auth.changePassword': ['oldPassword', 'newPassword'],
};

/** The expectation for one request object (a lone request or a batch entry). */
export function expectRequest(request: unknown, password: string, grantVerdict: (endpoints: string[]) => GrantVerdict): EntryExpectation {
  if (!isPlainObject(request)) return entry({ id: null, codes: [-32600] });
  const notification = !Object.hasOwn(request, 'id');
  const id = request.id;
  if (!notification && typeof id !== 'string' && typeof id !== 'number' && id !== null) return entry({ id: null, codes: [-32600] });
  const echo = notification ? null : id;
  if (request.jsonrpc !== '2.0') return entry({ id: echo, codes: [-32600] });
  if (typeof request.method !== 'string') return entry({ id: echo, codes: [-32600] });
  const params = request.params;
  if (params !== undefined && !isPlainObject(params)) return entry({ id: echo, codes: [-32600] });
  const p = (params ?? {}) as Record<string, unknown>;
  // From here on the request is well formed: a notification gets nothing back, whatever happens.
  const quiet = notification || undefined;
  const checked = (candidate: string, then: EntryExpectation): EntryExpectation => {
    // The current password may still meet a full check queue (busy); never the throttle,
    // as the generated tests send no wrong password.
    if (candidate === password) return { ...then, checksPassword: true, codes: [...then.codes, BUSY] };
    return entry({ id: echo, none: quiet, codes: [-32000, THROTTLED, BUSY], message: 'incorrect password', wrongPassword: true });
  };
  const known = Object.hasOwn(PARAMS, request.method) ? PARAMS[request.method] : undefined;
  const unknown = known === undefined ? undefined : Object.keys(p).find((name) => !known.includes(name));
  if (unknown !== undefined) {
    // Refused before anything else, naming the member (shown up to 64 code points).
    const shown = JSON.stringify(Array.from(unknown).slice(0, 64).join('')).replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    return entry({ id: echo, none: quiet, codes: [-32602], messagePattern: new RegExp(`^invalid params: unknown param ${shown}[ ;]`) });
  }
  switch (request.method) {
    case 'auth.newToken': {
      if (typeof p.password !== 'string') return invalidParams(echo, notification, 'password');
      const endpoints = p.endpoints;
      if (!Array.isArray(endpoints) || !endpoints.every((e) => typeof e === 'string'))
        return invalidParams(echo, notification, 'endpoints');
      if (endpoints.length === 0 || endpoints.length > MAX_ENDPOINTS) return invalidParams(echo, notification, 'endpoints');
      const verdict = grantVerdict(endpoints);
      const after =
        verdict === 'valid'
          ? entry({ id: echo, none: quiet, result: 'token' })
          : verdict === 'invalid'
            ? entry({ id: echo, none: quiet, codes: [-32602] })
            : entry({ id: echo, none: quiet, result: 'token', codes: [-32602] });
      return checked(p.password, after);
    }
    case 'auth.revokeToken': {
      if (typeof p.password !== 'string') return invalidParams(echo, notification, 'password');
      if (typeof p.token !== 'string') return invalidParams(echo, notification, 'token');
      return checked(p.password, entry({ id: echo, none: quiet, result: 'revocation' }));
    }
    case 'auth.changePassword': {
      if (typeof p.oldPassword !== 'string') return invalidParams(echo, notification, 'oldPassword');
      if (typeof p.newPassword !== 'string') return invalidParams(echo, notification, 'newPassword');
      const length = codePoints(p.newPassword);
      if (length === 0 || length > MAX_PASSWORD) return invalidParams(echo, notification, 'newPassword');
      if (p.newPassword === p.oldPassword) {
        return checked(
          p.oldPassword,
          entry({ id: echo, none: quiet, codes: [-32602], message: 'newPassword must differ from the current password' }),
        );
      }
      return {
        ...checked(p.oldPassword, entry({ id: echo, none: quiet, result: 'success' })),
        changesPassword: p.oldPassword === password,
      };
    }
    default:
      return entry({
        id: echo,
        none: quiet,
        codes: [-32601],
        message: `method not found: ${Array.from(request.method).slice(0, 64).join('')}`,
      });
  }
}

/**
 * What is wrong with one response object against its expectation; undefined when it
 * is right. Checks the member order (jsonrpc, result|error, id), the error object
 * (code and message only, an integer code), the id echo and the result.
 */
export function entryProblem(got: unknown, want: EntryExpectation): string | undefined {
  if (!isPlainObject(got)) return `not a response object: ${JSON.stringify(got)}`;
  const keys = Object.keys(got);
  const kind = keys[1];
  if (keys.length !== 3 || keys[0] !== 'jsonrpc' || keys[2] !== 'id' || (kind !== 'result' && kind !== 'error')) {
    return `members are not [jsonrpc, result|error, id]: ${JSON.stringify(keys)}`;
  }
  if (got.jsonrpc !== '2.0') return `jsonrpc is ${JSON.stringify(got.jsonrpc)}`;
  if (!sameId(got.id, want.id)) return `id ${JSON.stringify(got.id)}, expected ${JSON.stringify(want.id)}`;
  if (kind === 'error') {
    const error = got.error;
    if (!isPlainObject(error)) return `error is not an object: ${JSON.stringify(error)}`;
    if (JSON.stringify(Object.keys(error)) !== '["code","message"]') return `error members ${JSON.stringify(Object.keys(error))}`;
    if (!Number.isInteger(error.code)) return `error code ${JSON.stringify(error.code)} is not an integer`;
    if (typeof error.message !== 'string' || error.message === '') return `error message ${JSON.stringify(error.message)}`;
    if (!want.codes.includes(error.code as number)) {
      return `error ${JSON.stringify(error)}, expected ${want.result ? `a ${want.result} result or ` : ''}code ${want.codes.join(' or ')}`;
    }
    // The message is known for the first code only (not for a throttled or busy check).
    if (error.code === want.codes[0]) {
      if (want.message !== undefined && error.message !== want.message)
        return `message ${JSON.stringify(error.message)}, expected ${JSON.stringify(want.message)}`;
      if (want.messagePattern !== undefined && !want.messagePattern.test(error.message)) {
        return `message ${JSON.stringify(error.message)} does not match ${want.messagePattern}`;
      }
    }
    return undefined;
  }
  if (want.result === undefined) return `result ${JSON.stringify(got.result)}, expected error code ${want.codes.join(' or ')}`;
  if (want.result === 'success') {
    return JSON.stringify(got.result) === '{"success":true}'
      ? undefined
      : `result ${JSON.stringify(got.result)}, expected {"success":true}`;
  }
  if (want.result === 'revocation') {
    // The model does not know whether a token is live: any of the three answers, well formed.
    const text = JSON.stringify(got.result);
    return /^\{"success":true,"revocation":"(revoked|already revoked)"\}$/.test(text) ||
      /^\{"success":true,"revocation":"not a live token","reason":"(malformed|bad signature|expired|earlier generation)"\}$/.test(text)
      ? undefined
      : `result ${text}, expected {"success":true,"revocation":...}`;
  }
  const result = got.result;
  if (
    !isPlainObject(result) ||
    JSON.stringify(Object.keys(result)) !== '["token","id"]' ||
    typeof result.token !== 'string' ||
    !TOKEN_PATTERN.test(result.token) ||
    typeof result.id !== 'string' ||
    !/^t(0|[1-9][0-9]*)$/.test(result.id)
  ) {
    return `result ${JSON.stringify(result)}, expected {"token": <76 base64url characters>, "id": "t<serial>"}`;
  }
  return undefined;
}

/** Ids compare as parsed values: 1.0 and 1 are one id, and so are -0 and 0 (bodyProblem checks the digits). */
function sameId(got: unknown, want: unknown): boolean {
  return got === want;
}

/**
 * What is wrong with an HTTP 200 or 204 JSON-RPC answer to a body; undefined when it is
 * right. `rawId` is the id's source text of a lone request, when the test wrote it.
 */
export function bodyProblem(response: HttpResponse, want: BodyExpectation, rawId?: string): string | undefined {
  const due = want.entries.filter((e) => !e.none);
  if (want.kind !== 'parse-error' && due.length === 0) {
    if (response.status !== 204) return `HTTP ${response.status}, expected 204 (nothing is due)`;
    return response.body.length === 0 ? undefined : `a 204 with a body: ${JSON.stringify(response.text)}`;
  }
  if (response.status !== 200) return `HTTP ${response.status}, expected 200`;
  if (!/^application\/json\b/.test(response.headers['content-type'] ?? '')) return `content-type ${response.headers['content-type']}`;
  let got: unknown;
  try {
    got = JSON.parse(response.text);
  } catch {
    return 'the body is not JSON';
  }
  if (want.kind !== 'batch') {
    const problem = entryProblem(got, due[0]);
    if (problem !== undefined || rawId === undefined) return problem;
    // The response's own id is its last member; a result may hold an "id" of its own (newToken's).
    const shown = /,"id":([^,{}]*)\}\n?$/.exec(response.text)?.[1];
    const value = JSON.parse(rawId) as number;
    const expected = typeof value === 'number' && !Number.isSafeInteger(value) ? rawId : JSON.stringify(value);
    return shown === expected ? undefined : `id written ${shown}, expected ${expected} (the digits the client sent)`;
  }
  if (!Array.isArray(got)) return 'a batch answered with something other than an array';
  if (got.length !== due.length) return `${got.length} responses, expected ${due.length} (one per request with an id, in order)`;
  for (let i = 0; i < due.length; i++) {
    const problem = entryProblem(got[i], due[i]);
    if (problem !== undefined) return `response ${i}: ${problem}`;
  }
  return undefined;
}
