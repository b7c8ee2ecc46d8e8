// The operator's console session (docs/guides/console.md): what auth.signIn hands a
// browser in place of the password. A session IS a token of the core: the same HMAC, the
// same revocation bitmap, the same generation (a password change ends it), recorded by
// the ledger like any token (so a fleet's every gateway holds it), but never listed, and
// issued on one reserved grant: the endpoint CONSOLE_PATH, which api-auth always answers
// itself (so no request it grants ever reaches the node), scoped to a method no node
// serves. auth.newToken refuses that endpoint (reservedEndpoint), so no token is ever
// issued on the grant, and only a token of the grant is taken as a session.
//
// The session travels in an HttpOnly, SameSite=Strict cookie; a call made with it must
// also carry its CSRF value in a header (a value derived from the session, which a page
// of another origin cannot read or compute), and, when it names an Origin, be from the
// server's own.
import { createHash, timingSafeEqual } from 'node:crypto';
import { CONSOLE_PATH } from '../own-endpoints.js';

/** A session's life, in seconds: 15 minutes, renewed by auth.renewSession. */
export const SESSION_SECONDS = 15 * 60;
/** The reserved grant's endpoints. */
export const SESSION_ENDPOINTS: readonly string[] = [CONSOLE_PATH];
/** The reserved grant's method scope: no node serves it, and CONSOLE_PATH is api-auth's own anyway. */
export const SESSION_METHODS: readonly string[] = ['api-auth.consoleSession'];
/** The cookie's name. */
export const SESSION_COOKIE = 'api-auth-session';
/** The header that carries the session's CSRF value. */
export const CSRF_HEADER = 'x-api-auth-csrf';

/** The CSRF value of a session: base64url(SHA-256 of a fixed prefix and the session), 43 characters. */
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
