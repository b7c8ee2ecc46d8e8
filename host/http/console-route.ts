// GET /ext/auth/console and its files (--console): the operator's console, static files
// the build bundles into build/console (scripts/build.mjs), read once when the stack is
// built and served from memory. Every answer carries the console's headers: a strict CSP
// (no inline script, no eval, nothing from elsewhere, no framing), nosniff, no-store, and
// no CORS header ever. Without --console the paths are still api-auth's own, not found:
// a console session's one endpoint is CONSOLE_PATH, which must never reach the node.
import { readFileSync } from 'node:fs';
import type { HttpResponse } from 'uWebSockets.js';
import { CONSOLE_FILES, CONSOLE_PATH } from '../own-endpoints.js';
import { endWith, writeMethodNotAllowed, writeNotFound } from './responses.js';

/** The Content-Security-Policy of every console answer. */
export const CONSOLE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "frame-ancestors 'none'; base-uri 'none'; form-action 'self'";

const TYPES: Readonly<Record<string, string>> = {
  html: 'text/html; charset=utf-8',
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
};

/** The console's files by path, or null when the console is off. */
export class ConsoleFiles {
  private readonly files: ReadonlyMap<string, { readonly body: Uint8Array; readonly type: string }> | null;

  /** `on`: --console. The files are read now, from build/console; a build without them is an error, said at start. */
  constructor(on: boolean, folder: URL = new URL('../../console/', import.meta.url)) {
    if (!on) {
      this.files = null;
      return;
    }
    const files = new Map<string, { body: Uint8Array; type: string }>();
    for (const [path, name] of [[CONSOLE_PATH, 'index.html'], ...CONSOLE_FILES.map((n) => [`${CONSOLE_PATH}/${n}`, n])]) {
      let body: Uint8Array;
      try {
        body = readFileSync(new URL(name, folder));
      } catch {
        throw new Error(`--console: the console's ${name} is not in ${folder.pathname} (npm run build writes it)`);
      }
      files.set(path, { body, type: TYPES[name.slice(name.lastIndexOf('.') + 1)] });
    }
    this.files = files;
  }

  /** Answers GET or HEAD of one of CONSOLE_PATHS; call it from the uWS handler. */
  answer(res: HttpResponse, method: string, path: string): void {
    const file = this.files?.get(path);
    if (file === undefined) return writeNotFound(res, method === 'head');
    if (method !== 'get' && method !== 'head') return writeMethodNotAllowed(res, method, path, 'GET, HEAD');
    res
      .writeHeader('Content-Type', file.type)
      .writeHeader('Content-Security-Policy', CONSOLE_CSP)
      .writeHeader('X-Content-Type-Options', 'nosniff')
      .writeHeader('X-Frame-Options', 'DENY')
      .writeHeader('Referrer-Policy', 'no-referrer')
      .writeHeader('Cross-Origin-Resource-Policy', 'same-origin')
      .writeHeader('Cache-Control', 'no-store');
    endWith(res, file.body, method === 'head');
  }
}
