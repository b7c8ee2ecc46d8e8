// What an operator command prints of the node's answer, and its exit code: the result as
// JSON, a table of the listed tokens, the new token, or what a revocation did.
import { NodeUnreachableError, OperatorExitCode as ExitCode } from '../../errors.js';
import { collapseMethodSets } from '../../method-sets.js';
import type { CommandIo } from '../io.js';
import type { Action } from './args.js';

type Output = Pick<CommandIo, 'stdout' | 'stderr'>;

/** Prints `result`, the node's answer to `action`, for people or (`json`) as one JSON object; the exit code. */
export function printResult(action: Action, result: unknown, json: boolean, byId: boolean, io: Output): number {
  if (action === 'token revoke') return revoked(result, json, io, byId);
  if (json) {
    io.stdout(JSON.stringify(result) + '\n');
  } else if (action === 'token list') {
    io.stdout(table(result));
  } else if (action === 'token new' || action === 'token rotate') {
    io.stdout(`${String((result as { token?: unknown }).token)}\n`);
  } else {
    io.stdout('password changed; every token issued before no longer works\n');
  }
  return ExitCode.Ok;
}

/**
 * What a revocation did, and exit 0 only when the token is revoked now: by this call, or
 * by an earlier one. A token that was not live (mistyped, expired, of an earlier password)
 * revokes nothing: exit 1, so that a script does not take it for done. A node older than
 * the `revocation` field says only `success`, which cannot tell: that is said too.
 */
function revoked(result: unknown, json: boolean, io: Output, byId: boolean): number {
  const { revocation, reason } = (result ?? {}) as { revocation?: unknown; reason?: unknown };
  if (json) io.stdout(JSON.stringify(result) + '\n');
  switch (revocation) {
    case 'revoked':
      if (!json) io.stdout('token revoked\n');
      return ExitCode.Ok;
    case 'already revoked':
      if (!json) io.stdout('token already revoked: nothing to do\n');
      return ExitCode.Ok;
    case 'not a live token':
      io.stderr(
        `api-auth: nothing revoked: not a live token of this node (${typeof reason === 'string' ? reason : 'not valid'}); ` +
          (byId ? 'check the id with api-auth token list\n' : 'check that it is the whole token\n'),
      );
      return ExitCode.Refused;
    default:
      io.stderr(
        'api-auth: the node answered success without saying whether the token was live (an older node?); ' +
          'check with a call that uses the token\n',
      );
      return ExitCode.Refused;
  }
}

/** The listed tokens as a table for people, one line each, columns aligned. */
export function table(result: unknown): string {
  const tokens = (result as { tokens?: unknown } | null)?.tokens;
  if (!Array.isArray(tokens))
    throw new NodeUnreachableError(`the node's answer to auth.listTokens holds no token list: ${JSON.stringify(result).slice(0, 200)}`);
  if (tokens.length === 0) return 'no live tokens\n';
  const rows = [
    [
      'ID',
      'LABEL',
      'ENDPOINTS',
      'METHODS',
      'RATE',
      'QUOTA',
      'CLIENTS',
      'EXPIRES (UTC)',
      'REVOKED',
      'ROTATED TO',
      'LAST USED (UTC)',
      'REQUESTS',
    ],
  ];
  const time = (value: unknown): string => (typeof value === 'string' ? shown(value).replace('T', ' ').replace(/Z$/, '') : '-');
  for (const entry of tokens as Record<string, unknown>[]) {
    const list = (value: unknown, none: string): string => (Array.isArray(value) ? shown(value.map(String).join(',')) : none);
    const rate = typeof entry.rateLimit === 'string' ? `${shown(entry.rateLimit)} (burst ${shown(entry.burst)})` : '-';
    const q = entry.quota as { requests?: unknown; per?: unknown; used?: unknown } | null | undefined;
    const quota = q !== null && typeof q === 'object' ? `${shown(q.used)}/${shown(q.requests)} per ${shown(q.per)}` : '-';
    const methods = Array.isArray(entry.methods) ? collapseMethodSets(entry.methods.map(String)) : undefined;
    rows.push([
      shown(entry.id),
      entry.label === null ? '-' : shown(entry.label),
      list(entry.endpoints, '?'),
      list(methods, '*'),
      rate,
      quota,
      list(entry.allowedClients, '*'),
      time(entry.expiresAt),
      entry.revoked === true ? 'yes' : 'no',
      typeof entry.rotatedTo === 'string' ? shown(entry.rotatedTo) : '-',
      time(entry.lastUsedAt),
      typeof entry.requests === 'number' ? String(entry.requests) : '-',
    ]);
  }
  const widths = rows[0].map((_, c) => Math.max(...rows.map((r) => width(r[c]))));
  return (
    rows.map((r) => r.map((cell, c) => (c === r.length - 1 ? cell : cell + ' '.repeat(widths[c] - width(cell)))).join('  ')).join('\n') +
    '\n'
  );
}

/** A value for the terminal: what could move the cursor or reorder the line (controls, separators, bidi) shows as "?". */
export function shown(value: unknown): string {
  return String(value).replace(/[\p{Cc}\p{Zl}\p{Zp}\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/gu, '?');
}

function width(text: string): number {
  return Array.from(text).length;
}
