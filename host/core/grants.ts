// Grants as the host hands them to the core and as a state file keeps them: the canonical
// lists, the encoding `grantAdd` and `grantFind` read from the io buffer, and the
// GrantError a refusal becomes (assembly/README.md, "Grants", "Method scopes", "Limits").
import { GRANT_BAD_ENTRY, GRANT_BAD_LIMIT, GRANT_BAD_METHOD, GRANT_ENTRY_TOO_LONG, GRANT_METHOD_TOO_LONG } from '../../assembly/results.js';
import { CORE_GRANT_ERRORS, GrantError, MAX_ENDPOINT_LENGTH, MAX_METHOD_LENGTH, PATH_RULES } from './abi.js';

/** What a method pattern is, for the messages users see (the rule in full: assembly/README.md, "Method scopes"). */
export const METHOD_RULES =
  `a JSON-RPC method name of 1 to ${MAX_METHOD_LENGTH} visible ASCII characters (no spaces, controls or ` +
  'non-ASCII), optionally ending in "*" to allow every method it starts (like eth_*), or "*" alone for every method';

/** `*` anywhere means every endpoint; otherwise duplicates go and the order is fixed. */
export function canonicalEndpoints(endpoints: readonly string[]): string[] {
  if (endpoints.includes('*')) return ['*'];
  return [...new Set(endpoints)].sort();
}

/** `*` anywhere means every method; otherwise duplicates go and the order is fixed. */
export function canonicalMethods(methods: readonly string[]): string[] {
  return canonicalEndpoints(methods);
}

/**
 * A grant as the core stores it, and as a state file keeps it: the canonical endpoints,
 * then, for a method scope, an empty entry and the canonical method patterns, then, for
 * limits, an empty entry and the limit entries (canonical already: limitEntries).
 */
export function grantEntries(endpoints: readonly string[], methods?: readonly string[], limits?: readonly string[]): string[] {
  const entries = canonicalEndpoints(endpoints);
  const scoped = methods === undefined ? entries : [...entries, '', ...canonicalMethods(methods)];
  return limits === undefined ? scoped : [...scoped, ...(methods === undefined ? ['', ''] : ['']), ...limits];
}

/**
 * The endpoints, methods and limits of a stored grant (`grantEntries`); no methods when
 * it has no scope, no limits when it has none.
 */
export function splitGrantEntries(entries: readonly string[]): { endpoints: string[]; methods?: string[]; limits?: string[] } {
  const scope = entries.indexOf('');
  // An empty first entry is no scope but a bad endpoint: addGrant refuses it.
  if (scope <= 0) return { endpoints: [...entries] };
  const endpoints = entries.slice(0, scope);
  const limitsAt = entries.indexOf('', scope + 1);
  if (limitsAt < 0) return { endpoints, methods: entries.slice(scope + 1) };
  const limits = entries.slice(limitsAt + 1);
  return limitsAt === scope + 1 ? { endpoints, limits } : { endpoints, methods: entries.slice(scope + 1, limitsAt), limits };
}

/** A grant encoded for `grantAdd` and `grantFind`, with the lists a refusal's index points into. */
export interface EncodedGrant {
  /** The entries, each ending in a line feed, as UTF-8. */
  bytes: Uint8Array;
  /** The endpoints as sent: without duplicates, sorted (`*` among them is the core's to collapse). */
  endpoints: readonly string[];
  /** The method patterns as sent, the same way. */
  patterns: readonly string[];
}

/**
 * The grant list the core validates (assembly/README.md, `grantAdd`), at most `capacity`
 * bytes (the io buffer's). Every entry and pattern goes to the core, which validates them
 * all; `*` among them is then stored alone, as canonicalEndpoints and canonicalMethods
 * record it. Throws GrantError for what the encoding itself cannot carry: a line break,
 * an empty pattern, or a list longer than `capacity`.
 */
export function encodeGrant(
  endpoints: readonly string[],
  methods: readonly string[] | undefined,
  limits: readonly string[] | undefined,
  capacity: number,
): EncodedGrant {
  const canonical = [...new Set(endpoints)].sort();
  const newline = canonical.findIndex((e) => e.includes('\n'));
  if (newline >= 0) throw new GrantError('bad-entry', `endpoint ${JSON.stringify(canonical[newline])} holds a line break`, newline);
  const patterns = methods === undefined ? [] : [...new Set(methods)].sort();
  // An empty pattern would read as the empty entry that starts the limits.
  const badPattern = patterns.findIndex((m) => m.includes('\n') || m === '');
  if (badPattern >= 0) throw methodError('bad-method', methods as readonly string[], patterns[badPattern]);
  if (limits?.some((l) => l.includes('\n'))) throw new GrantError('bad-limit', 'a limit entry holds a line break');
  // Each entry ends in a line feed, so an empty entry stays visible to the core; the
  // empty entry between endpoints and patterns starts the method scope, the next one
  // the limits (entries the host made canonical: limitEntries in service/token-params.ts).
  const scoped = methods === undefined ? canonical : [...canonical, '', ...patterns];
  const entries = limits === undefined ? scoped : [...scoped, ...(methods === undefined ? ['', ''] : ['']), ...limits];
  const bytes = new TextEncoder().encode(entries.map((e) => e + '\n').join(''));
  if (bytes.length > capacity) {
    throw new GrantError(
      'too-many-entries',
      `the endpoint list${methods === undefined ? '' : ' and methods'} ` + `take more than ${capacity} bytes`,
    );
  }
  return { bytes, endpoints: canonical, patterns };
}

/**
 * The GrantError for a negative answer `code` of `grantAdd` or `grantFind` on `grant`:
 * `index` is the word the core left at RESULT_REFUSED_ENTRY, the refused entry's index for the codes
 * that name one. `methods` and `limits` as the caller gave them.
 */
export function grantRefusal(
  code: number,
  index: number,
  grant: EncodedGrant,
  methods: readonly string[] | undefined,
  limits: readonly string[] | undefined,
): GrantError {
  if (code === GRANT_BAD_ENTRY || code === GRANT_ENTRY_TOO_LONG) {
    const shown = shorten(grant.endpoints[index]);
    if (code === GRANT_ENTRY_TOO_LONG) {
      return new GrantError('entry-too-long', `endpoint ${shown} is longer than ${MAX_ENDPOINT_LENGTH} bytes`, index);
    }
    return new GrantError(
      'bad-entry',
      `endpoint ${shown} is not one of "*" (every path), "/" (the root alone, where ` +
        `Ethereum nodes serve JSON-RPC), an absolute path such as /ext/info, or a subtree such as /ext/bc/*; in paths, ${PATH_RULES}`,
      index,
    );
  }
  if (code === GRANT_BAD_METHOD || code === GRANT_METHOD_TOO_LONG) {
    return methodError(code === GRANT_BAD_METHOD ? 'bad-method' : 'method-too-long', methods as readonly string[], grant.patterns[index]);
  }
  if (code === GRANT_BAD_LIMIT) {
    return new GrantError(
      'bad-limit',
      `limit entry ${shorten((limits ?? [])[index] ?? '')} is not canonical ` +
        '("rate N/s|m|h", "burst B", then "client" ranges in ascending order)',
      index,
    );
  }
  const [name, message] = CORE_GRANT_ERRORS[code] ?? ['table-full', `grant refused (${code})`];
  return new GrantError(name, message);
}

function shorten(text: string): string {
  return JSON.stringify(text.length > 64 ? text.slice(0, 64) + '…' : text);
}

/** A refused method pattern, named by its place in `methods` as the caller gave it. */
function methodError(code: 'bad-method' | 'method-too-long', methods: readonly string[], pattern: string): GrantError {
  const index = methods.indexOf(pattern);
  const why = code === 'method-too-long' ? `longer than ${MAX_METHOD_LENGTH} bytes` : `not ${METHOD_RULES}`;
  return new GrantError(code, `methods[${index}] ${shorten(pattern)}: ${why}`, index);
}
