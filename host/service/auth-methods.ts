// The JSON-RPC methods of /ext/auth: each method's params read and checked (an unknown one
// is an error, before any password check), the call made on the token service, and its
// audit line. The service (token-service.ts) holds what the methods do; this holds how
// the wire asks for it.
import { MAX_ENDPOINTS, MAX_METHODS, Outcome, OUTCOME_NAMES } from '../core/abi.js';
import type { Claims } from '../core/abi.js';
import { METHOD_RULES } from '../core/grants.js';
import { parseDuration } from '../duration.js';
import { RpcCode, RpcError } from '../errors.js';
import { isWellFormed } from '../password/file.js';
import { invalidParams, knownParams, stringParam, WithCookie } from '../rpc/jsonrpc.js';
import type { CallContext, Method, MethodTable, Params } from '../rpc/jsonrpc.js';
import { csrfFor, reservedEndpoint } from './console-session.js';
import { labelParam, lifetimeParam, limitEntries, parseTokenId, rfc3339 } from './token-params.js';
import { foreignOrigin } from './token-service.js';
import type { Credential, TokenService } from './token-service.js';
import { HISTORY_HOURS } from './usage-history.js';
import type { Fields } from '../ops/log.js';

export function authMethods(service: TokenService): MethodTable {
  return new Map<string, Method>([
    [
      'auth.newToken',
      (p, c) =>
        service.audited('auth.newToken', c, async (audit) => {
          knownParams(p, 'auth.newToken', [
            'password',
            'endpoints',
            'methods',
            'expiresIn',
            'label',
            'rateLimit',
            'burst',
            'quota',
            'allowedClients',
          ]);
          const password = credential(p, c, audit);
          const endpoints = endpointsParam(p);
          const extra = {
            label: labelParam(p),
            lifetime: lifetimeParam(p, service.maxTokenLifetime),
            methods: methodsParam(p),
            limits: limitEntries(p),
          };
          const { token, claims, id } = await service.newToken(password, endpoints, extra, c);
          audit.serial = claims.serial;
          audit.generation = claims.generation;
          audit.grant = claims.grant;
          audit.expiry = claims.expiry;
          // The original's clients read `token` alone; `id` names it in listTokens and revokeToken.
          return { token, id };
        }),
    ],
    [
      'auth.listTokens',
      (p, c) =>
        service.audited('auth.listTokens', c, async (audit) => {
          knownParams(p, 'auth.listTokens', ['password']);
          const password = credential(p, c, audit);
          const tokens = await service.listTokens(password, c);
          audit.count = tokens.length;
          return { tokens };
        }),
    ],
    [
      'auth.usageHistory',
      (p, c) =>
        service.audited('auth.usageHistory', c, async (audit) => {
          knownParams(p, 'auth.usageHistory', ['password', 'id', 'hours']);
          const password = credential(p, c, audit);
          const id = p.id === undefined ? undefined : stringParam(p, 'id');
          const hours = p.hours === undefined ? HISTORY_HOURS : p.hours;
          if (typeof hours !== 'number' || !Number.isSafeInteger(hours) || hours < 1 || hours > HISTORY_HOURS) {
            throw invalidParams(
              'hours',
              `a whole number of hours from 1 to ${HISTORY_HOURS} (the default): how many hours to the current one to show`,
            );
          }
          const parsed = id === undefined ? undefined : parseTokenId(id);
          if (parsed !== undefined) audit.serial = parsed;
          audit.hours = hours;
          return service.usageHistory(password, id, hours, c);
        }),
    ],
    [
      'auth.nodeStatus',
      (p, c) =>
        service.audited('auth.nodeStatus', c, async (audit) => {
          knownParams(p, 'auth.nodeStatus', ['password']);
          const password = credential(p, c, audit);
          return service.nodeStatus(password, c);
        }),
    ],
    [
      'auth.revokeToken',
      (p, c) =>
        service.audited('auth.revokeToken', c, async (audit) => {
          knownParams(p, 'auth.revokeToken', ['password', 'token', 'id']);
          const password = credential(p, c, audit);
          if (p.token !== undefined && p.id !== undefined) {
            throw new RpcError(RpcCode.InvalidParams, 'invalid params: give token or id, not both');
          }
          if (p.token === undefined && p.id !== undefined) {
            const { revoked, entry, already, reason } = await service.revokeById(password, stringParam(p, 'id'), c);
            audit.revoked = revoked;
            if (entry !== undefined) {
              audit.serial = entry.serial;
              audit.generation = entry.generation;
            }
            if (revoked) return { success: true, revocation: 'revoked' };
            if (already) return { success: true, revocation: 'already revoked' };
            return { success: true, revocation: 'not a live token', reason };
          }
          if (typeof p.token !== 'string') throw invalidParams('token', "a string (or give id, the token's id, in its place)");
          const { revoked, outcome, claims } = await service.revokeToken(password, p.token, c);
          audit.revoked = revoked;
          if (claims !== undefined) {
            audit.serial = claims.serial;
            audit.generation = claims.generation;
          }
          // `success` is the original's, which its clients read; `revocation` says what
          // happened, so that a mistyped or dead token is not taken for a revoked one.
          if (revoked) return { success: true, revocation: 'revoked' };
          if (outcome === Outcome.Revoked) return { success: true, revocation: 'already revoked' };
          return { success: true, revocation: 'not a live token', reason: OUTCOME_NAMES[outcome] };
        }),
    ],
    [
      'auth.rotateToken',
      (p, c) =>
        service.audited('auth.rotateToken', c, async (audit) => {
          knownParams(p, 'auth.rotateToken', ['password', 'token', 'id', 'overlap']);
          const password = credential(p, c, audit);
          if ((p.token === undefined) === (p.id === undefined)) {
            throw new RpcError(RpcCode.InvalidParams, "invalid params: give token or id (the token's id), one of them");
          }
          const target = p.token !== undefined ? { token: stringParam(p, 'token') } : { id: stringParam(p, 'id') };
          // Its form now, so that a bad one costs no password check; its range needs the token.
          const overlap = p.overlap;
          const seconds =
            typeof overlap === 'number' ? overlap : typeof overlap === 'string' ? parseDuration(overlap) : overlap === undefined ? 0 : null;
          if (seconds === null || !Number.isSafeInteger(seconds) || seconds < 0) throw invalidParams('overlap', OVERLAP_RULE);
          const { token, claims, id, from } = await service.rotateToken(password, target, p, c);
          audit.serial = claims.serial;
          audit.generation = claims.generation;
          audit.grant = claims.grant;
          audit.expiry = claims.expiry;
          audit.rotatedFrom = from.serial;
          return { token, id };
        }),
    ],
    [
      'auth.changePassword',
      (p, c) =>
        service.audited('auth.changePassword', c, async (audit) => {
          knownParams(p, 'auth.changePassword', ['oldPassword', 'newPassword']);
          audit.generation = await service.changePassword(passwordParam(p, 'oldPassword'), passwordParam(p, 'newPassword'), c);
          return { success: true };
        }),
    ],
    [
      'auth.signIn',
      (p, c) =>
        service.audited('auth.signIn', c, async (audit) => {
          knownParams(p, 'auth.signIn', ['password']);
          if (c.session !== undefined && !c.session.sameOrigin) throw foreignOrigin();
          const { token, claims } = await service.signIn(passwordParam(p, 'password'), c);
          audit.serial = claims.serial;
          audit.generation = claims.generation;
          return new WithCookie(sessionAnswer(token, claims), { value: token, maxAge: claims.expiry - service.now() });
        }),
    ],
    [
      'auth.renewSession',
      (p, c) =>
        service.audited('auth.renewSession', c, async (audit) => {
          knownParams(p, 'auth.renewSession', []);
          const { token, claims, from } = await service.renewSession(c);
          audit.serial = claims.serial;
          audit.generation = claims.generation;
          audit.renewedFrom = from;
          return new WithCookie(sessionAnswer(token, claims), { value: token, maxAge: claims.expiry - service.now() });
        }),
    ],
    [
      'auth.signOut',
      (p, c) =>
        service.audited('auth.signOut', c, async (audit) => {
          knownParams(p, 'auth.signOut', []);
          audit.serial = await service.signOut(c);
          return new WithCookie({ success: true }, { value: '', maxAge: 0 });
        }),
    ],
  ]);
}

/**
 * A management method's credential: its `password` param when it has one, else the
 * console session its context carries (checked when the method authenticates), which its
 * audit line then says (`"by":"session"`).
 */
function credential(params: Params, context: CallContext, audit: Fields): Credential {
  if (params.password === undefined && context.session !== undefined && context.session.token !== '') {
    audit.by = 'session';
    return { session: true };
  }
  return passwordParam(params, 'password');
}

/** What auth.signIn and auth.renewSession answer: the session's CSRF value and its end; the session itself is in the cookie alone. */
function sessionAnswer(token: string, claims: Claims): { csrf: string; expiresAt: string } {
  return { csrf: csrfFor(token), expiresAt: rfc3339(claims.expiry) };
}

/**
 * A password param: a string of valid Unicode. A lone surrogate has no UTF-8 form: the
 * hash would see U+FFFD in its place, so "pw-\ud800", "pw-\udbff" and "pw-\ufffd" would
 * all be one password. Refused here, before any hashing and before the throttle counts
 * a guess.
 */
function passwordParam(params: Params, name: string): string {
  const value = stringParam(params, name);
  if (!isWellFormed(value)) throw invalidParams(name, 'valid Unicode text, without lone surrogates (\\ud800 to \\udfff outside a pair)');
  return value;
}

function endpointsParam(params: Params): string[] {
  const value = params.endpoints;
  if (!Array.isArray(value) || !value.every((e) => typeof e === 'string')) {
    throw invalidParams('endpoints', `an array of 1 to ${MAX_ENDPOINTS} strings`);
  }
  const reserved = value.findIndex(reservedEndpoint);
  if (reserved >= 0) {
    throw invalidParams(
      `endpoints[${reserved}]`,
      "not the console's (/ext/auth/console and below): no token grants it; " +
        'an operator signs in to it with the password (auth.signIn)',
    );
  }
  return value;
}

/**
 * The optional `methods` param: 1 to MAX_METHODS patterns, each a string; the core
 * judges each pattern (its messages name `methods[i]`).
 */
function methodsParam(params: Params): string[] | undefined {
  const value = params.methods;
  if (value === undefined) return undefined;
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_METHODS) {
    throw invalidParams(
      'methods',
      `an array of 1 to ${MAX_METHODS} JSON-RPC method patterns; leave it out for a token that allows every method`,
    );
  }
  const bad = value.findIndex((m) => typeof m !== 'string');
  if (bad >= 0) throw invalidParams(`methods[${bad}]`, `a string: ${METHOD_RULES}`);
  return value as string[];
}

const OVERLAP_RULE =
  'a duration such as "90s", "15m" or "1h", or a whole number of seconds, from 0s to the old token\'s remaining life: ' +
  'how long the old token stays valid beside the new one';
