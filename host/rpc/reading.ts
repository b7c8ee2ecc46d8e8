// The one reading of a JSON-RPC body (an HTTP request's, or a WebSocket message's): which
// calls the node will run, read once, and shared by everything that judges or records
// the request (a token's method scope, its rate limit, its usage, the access log).
//
// A body is read only when it is exactly one JSON-RPC call or a non-empty batch of them,
// as every node reads it. Go's encoding/json, which geth, AvalancheGo, Erigon and most
// nodes use, reads the first JSON value of a body and, by json.Decoder, may leave what
// follows unread; JavaScript nodes (ganache, hardhat) parse the whole text. So a body
// with anything after its value (a second value, a stray byte, a BOM before it) could be
// read two ways, and is not read at all: a caller that must know the calls (a token with
// limits or a method scope) then refuses it. The same holds for bytes that are not
// UTF-8, for a value nested deeper than MAX_DEPTH, and for a call whose method a node
// could take from a member other than "method": Go matches member names without regard
// to case and keeps the last, JSON.parse keeps the last "method" spelled exactly, so a
// call with two method members, or one spelled otherwise ("Method"), is refused.
//
// The reading keeps each call's place in the text, so that a caller can forward some of
// them as sent (a scope's split batch), and each call's id as its source text, so that
// an answer echoes the digits the client sent.
//
// Rules and codes are documented in docs/reference/rpc-reading.md; test/vectors/rpc-bodies.json
// holds the cases, run against this module and against the Go gate's reading.

/** How deep a body's values may nest; deeper ones are not read (encoding/json stops at 10,000). */
export const MAX_DEPTH = 128;

/** One call of a body that was read. */
export interface Call {
  /** The method, as the node will take it. */
  readonly method: string;
  /** The source text of its id; null for a notification (no "id" member). An id that is an object, an array or a boolean reads as "null". */
  readonly id: string | null;
  /** Where its object starts and ends in `text`. */
  readonly start: number;
  readonly end: number;
}

/** Why a body could not be read. */
export type Unreadable =
  | 'none' // no body at all
  | 'utf8' // bytes that are not UTF-8
  | 'bom' // a byte order mark before the value
  | 'json' // not one JSON value alone: a syntax error, or bytes after the value
  | 'depth' // values nested deeper than MAX_DEPTH
  | 'empty batch' // []
  | 'not a call' // a value (or batch element) that is not an object with a "method" string
  | 'method twice'; // a call with more than one member a node could take as its method

/** A body read: its calls, in order. */
export interface Read {
  readonly ok: true;
  /** A batch (an array, even of one call) or a lone call. */
  readonly batch: boolean;
  readonly calls: readonly Call[];
  /** The body as text. */
  readonly text: string;
}

/** A body that could not be read. */
export interface NotRead {
  readonly ok: false;
  readonly problem: Unreadable;
  /** For 'not a call' and 'method twice' in a batch: the element's place; -1 otherwise. */
  readonly at: number;
  /** The id's source text of a lone call whose method cannot be read (for its error's id); null otherwise. */
  readonly id: string | null;
}

export type Reading = Read | NotRead;

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });
const NONE: NotRead = notRead('none');

/** Reads `body`: its calls, or why they cannot be known. */
export function readCalls(body: Uint8Array): Reading {
  if (body.length === 0) return NONE;
  let text: string;
  try {
    text = utf8.decode(body);
  } catch {
    return notRead('utf8');
  }
  return readText(text);
}

/** readCalls for a body that is text already (a WebSocket text message, decoded by the caller). */
export function readText(text: string): Reading {
  if (text.length === 0) return NONE;
  if (text.charCodeAt(0) === 0xfeff) return notRead('bom');
  // JSON.parse takes exactly one value with only JSON whitespace around it: the
  // reading below trusts that shape and only finds where members and values are.
  try {
    JSON.parse(text);
  } catch {
    return notRead('json');
  }
  const start = skipSpace(text, 0);
  if (text.charCodeAt(start) !== 0x5b) {
    if (depthOver(text, start)) return notRead('depth');
    const call = readCall(text, start);
    return typeof call === 'string'
      ? { ok: false, problem: call, at: -1, id: idOf(text, start) }
      : { ok: true, batch: false, calls: [call], text };
  }
  if (depthOver(text, start)) return notRead('depth');
  const calls: Call[] = [];
  let i = skipSpace(text, start + 1);
  if (text.charCodeAt(i) === 0x5d) return notRead('empty batch');
  for (;;) {
    const call = readCall(text, i);
    if (typeof call === 'string') return { ok: false, problem: call, at: calls.length, id: null };
    calls.push(call);
    i = skipSpace(text, call.end);
    if (text.charCodeAt(i) === 0x5d) break;
    i = skipSpace(text, i + 1);
  }
  return { ok: true, batch: true, calls, text };
}

/** The calls of a WebSocket message or body as a token without limits counts them: a readable batch its length, anything else one. */
export function callCount(reading: Reading): number {
  return reading.ok ? reading.calls.length : 1;
}

function notRead(problem: Unreadable): NotRead {
  return { ok: false, problem, at: -1, id: null };
}

/** The call whose value starts at `i`, or why it is not one. */
function readCall(text: string, i: number): Call | Unreadable {
  const start = i;
  if (text.charCodeAt(i) !== 0x7b) return 'not a call';
  let method: string | null = null;
  let methods = 0;
  let exact = false;
  let id: string | null = null;
  i = skipSpace(text, i + 1);
  while (text.charCodeAt(i) === 0x22) {
    const keyEnd = skipString(text, i);
    const valueStart = skipSpace(text, skipSpace(text, keyEnd) + 1);
    const valueEnd = skipValue(text, valueStart);
    const key = memberName(text, i, keyEnd);
    if (foldsToMethod(key)) {
      methods++;
      exact = key === 'method';
      method = text.charCodeAt(valueStart) === 0x22 ? (JSON.parse(text.slice(valueStart, valueEnd)) as string) : null;
    } else if (key === 'id') {
      const first = text.charCodeAt(valueStart);
      // An id that is an object, an array or a boolean is no id a node echoes: its error says null.
      id = first === 0x7b || first === 0x5b || first === 0x74 || first === 0x66 ? 'null' : text.slice(valueStart, valueEnd);
    }
    i = skipSpace(text, valueEnd);
    if (text.charCodeAt(i) === 0x2c) i = skipSpace(text, i + 1);
  }
  if (methods > 1) return 'method twice';
  if (methods === 0 || !exact || method === null) return 'not a call';
  return { method, id, start, end: i + 1 };
}

/** The id's source text of the object at `i`, when it is one: for the error of a lone call that cannot be read. */
function idOf(text: string, i: number): string | null {
  if (text.charCodeAt(i) !== 0x7b) return null;
  let id: string | null = null;
  i = skipSpace(text, i + 1);
  while (text.charCodeAt(i) === 0x22) {
    const keyEnd = skipString(text, i);
    const valueStart = skipSpace(text, skipSpace(text, keyEnd) + 1);
    const valueEnd = skipValue(text, valueStart);
    if (memberName(text, i, keyEnd) === 'id') {
      const first = text.charCodeAt(valueStart);
      id = first === 0x7b || first === 0x5b || first === 0x74 || first === 0x66 ? 'null' : text.slice(valueStart, valueEnd);
    }
    i = skipSpace(text, valueEnd);
    if (text.charCodeAt(i) === 0x2c) i = skipSpace(text, i + 1);
  }
  return id;
}

/** A member name's value, from its quotes at [start, end). */
function memberName(text: string, start: number, end: number): string {
  const raw = text.slice(start + 1, end - 1);
  return raw.includes('\\') ? (JSON.parse(text.slice(start, end)) as string) : raw;
}

/**
 * Whether Go's encoding/json would match `name` to a field tagged "method": the same
 * letters under its case folding (each character lowered, then raised), as
 * appendFoldedName does; characters whose folding is not one character are not folded.
 */
function foldsToMethod(name: string): boolean {
  if (/[^\x00-\x7f]/.test(name)) return foldUnicode(name) === 'METHOD';
  if (name.length !== 6) return false;
  let folded = '';
  for (let k = 0; k < 6; k++) {
    const c = name.charCodeAt(k);
    folded += String.fromCharCode(c >= 0x61 && c <= 0x7a ? c - 0x20 : c);
  }
  return folded === 'METHOD';
}

function foldUnicode(name: string): string {
  let folded = '';
  for (const ch of name) {
    const once = ch.toLowerCase().toUpperCase();
    folded += [...once].length === 1 ? once : ch;
  }
  return folded;
}

/** Whether the value at `i` nests deeper than MAX_DEPTH. */
function depthOver(text: string, i: number): boolean {
  let depth = 0;
  const end = text.length;
  while (i < end) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      i = skipString(text, i);
      continue;
    }
    if (c === 0x7b || c === 0x5b) {
      if (++depth > MAX_DEPTH) return true;
    } else if (c === 0x7d || c === 0x5d) {
      if (--depth === 0) return false;
    }
    i++;
  }
  return false;
}

// Scanners over JSON text that JSON.parse has already accepted (so every string closes
// and every bracket is matched): the positions of members and elements.

export function skipSpace(text: string, i: number): number {
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c !== 0x20 && c !== 0x09 && c !== 0x0a && c !== 0x0d) break;
    i++;
  }
  return i;
}

/** From the opening quote to just past the closing one; a long string (a signed transaction) is skipped by indexOf. */
export function skipString(text: string, i: number): number {
  for (;;) {
    const quote = text.indexOf('"', i + 1);
    let slash = quote - 1;
    while (text.charCodeAt(slash) === 0x5c) slash--;
    if ((quote - 1 - slash) % 2 === 0) return quote + 1;
    i = quote;
  }
}

export function skipValue(text: string, i: number): number {
  const first = text.charCodeAt(i);
  if (first === 0x22) return skipString(text, i);
  if (first === 0x7b || first === 0x5b) {
    for (let depth = 0; ; ) {
      const c = text.charCodeAt(i);
      if (c === 0x22) {
        i = skipString(text, i);
        continue;
      }
      if (c === 0x7b || c === 0x5b) depth++;
      else if ((c === 0x7d || c === 0x5d) && --depth === 0) return i + 1;
      i++;
    }
  }
  // A number, true, false or null runs to the next delimiter.
  while (i < text.length && !',}] \t\n\r'.includes(text[i])) i++;
  return i;
}
