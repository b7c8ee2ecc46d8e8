// The operator's console session (docs/guides/console.md): what auth.signIn hands a
// browser in place of the password. A session IS a token of the core: the same HMAC, the
// same revocation bitmap, the same generation (a password change ends it), recorded by
// the ledger like any token (so a fleet's every gateway holds it), but never listed, and
// issued on one reserved grant: the endpoint CONSOLE_PATH, which api-auth always answers
// itself (so no request it grants ever reaches the node), scoped to a method no node
// serves. auth.newToken refuses that endpoint (reservedEndpoint), so no token is ever
// issued on the grant, and only a token of the grant is taken as a session.
//
// A sign-in also issues a second token, on a second reserved grant (SIGN_IN_METHODS), that
// lives for --console-session-max-lifetime: the longest a chain of renewals may run. It
// travels beside the session, and a renewal ends no later than it, so that any gateway of
// a fleet knows when the sign-in was, from a token it can check, with nothing more kept.
// It is no session (its grant is not the session's), and grants nothing else.
//
// The session travels in an HttpOnly, SameSite=Strict cookie, `<session>.<sign-in>`; a
// call made with it must also carry its CSRF value in a header (a value derived from the
// cookie's, which a page of another origin cannot read or compute), and, when it names an
// Origin, be from the server's own.
import { createHash, timingSafeEqual } from 'node:crypto';
import { TOKEN_LENGTH } from '../core/abi.js';
import { CONSOLE_PATH } from '../own-endpoints.js';

/** A session's life, in seconds: 15 minutes, renewed by auth.renewSession. */
export const SESSION_SECONDS = 15 * 60;
/** The longest a chain of renewals runs from its sign-in, in seconds, when --console-session-max-lifetime is left out: 12 hours. */
export const SESSION_MAX_SECONDS = 12 * 3600;
/** The reserved grants' endpoints. */
export const SESSION_ENDPOINTS: readonly string[] = [CONSOLE_PATH];
/** The reserved grant's method scope: no node serves it, and CONSOLE_PATH is api-auth's own anyway. */
export const SESSION_METHODS: readonly string[] = ['api-auth.consoleSession'];
/** The sign-in's grant: its token's expiry is the end of every session renewed from it. */
export const SIGN_IN_METHODS: readonly string[] = ['api-auth.consoleSignIn'];
/** The cookie's name. */
export const SESSION_COOKIE = 'api-auth-session';
/** The header that carries the session's CSRF value. */
export const CSRF_HEADER = 'x-api-auth-csrf';

/** The cookie's value: the session, then its sign-in's token. */
export function joinSession(session: string, signIn: string): string {
  return `${session}.${signIn}`;
}

/** The session and the sign-in's token of a cookie's value, or undefined when it is not two tokens joined by a dot. */
export function splitSession(value: string): { session: string; signIn: string } | undefined {
  if (value.length !== 2 * TOKEN_LENGTH + 1 || value[TOKEN_LENGTH] !== '.') return undefined;
  return { session: value.slice(0, TOKEN_LENGTH), signIn: value.slice(TOKEN_LENGTH + 1) };
}

/** The CSRF value of a session (the cookie's value): base64url(SHA-256 of a fixed prefix and the session), 43 characters. */
export function csrfFor(session: string): string {
  return createHash('sha256').update('api-auth console csrf\0').update(session).digest('base64url');
}

/** Whether `csrf` is the session's CSRF value, compared in constant time. */
export function csrfMatches(session: string, csrf: string): boolean {
  const want = Buffer.from(csrfFor(session));
  const got = Buffer.from(csrf);
  // timingSafeEqual needs equal lengths; a length that differs says nothing of the value.
  return got.length === want.length && timingSafeEqual(got, want);
}

/** Whether an endpoint entry of auth.newToken is the console's, which no token may be granted. */
export function reservedEndpoint(entry: string): boolean {
  return entry === CONSOLE_PATH || entry.startsWith(`${CONSOLE_PATH}/`);
}

/** The session cookie's value in a Cookie header, or ''. */
export function sessionCookie(header: string): string {
  for (const part of header.split(';')) {
    const eq = part.indexOf('=');
    if (eq >= 0 && part.slice(0, eq).trim() === SESSION_COOKIE) return part.slice(eq + 1).trim();
  }
  return '';
}

/** The Set-Cookie header for a session (`value` '' and maxAge 0: cleared); Secure under TLS. */
export function setCookieHeader(value: string, maxAge: number, secure: boolean): string {
  return `${SESSION_COOKIE}=${value}; Max-Age=${maxAge}; Path=/ext/auth; HttpOnly; SameSite=Strict${secure ? '; Secure' : ''}`;
}

/** Whether an Origin header names the server its Host header names: '' (no Origin: not a page) is. */
export function sameOrigin(origin: string, host: string): boolean {
  if (origin === '') return true;
  try {
    const url = new URL(origin);
    return (url.protocol === 'http:' || url.protocol === 'https:') && url.host === host.toLowerCase();
  } catch {
    return false;
  }
}
