// What every HTTP thread runs around its request handling: the uWS app the acceptor hands
// connections to, the rules that keep the thread from ever ending on its own, the
// heartbeat, and the stop. worker.ts gives it the gateway; a test can give it another
// handler and so prove the same rules.
//
// A thread must not end while its app holds a socket or while the acceptor may still
// hand it one (the process would abort or segfault; see acceptor.ts). So nothing here
// ends it but the owner's `stop`: an exception anywhere, a rejection nobody handled, or a
// call of process.exit becomes a report to the owner, which stops the whole process in
// order; a handler that throws still answers (uWS ends the process when a handler
// returns without answering or attaching onAborted).
import { parentPort, workerData } from 'node:worker_threads';
import { App } from 'uWebSockets.js';
import type { HttpRequest, HttpResponse, TemplatedApp } from 'uWebSockets.js';
import { serveOn } from '../http/handlers.js';
import { descriptorOf, omitServerMark } from '../http/uws-shim.js';
import { errorFields } from '../ops/log.js';
import type { Logger } from '../ops/log.js';
import type { tlsApp as TlsApp } from '../http/tls.js';
import type { SessionBehavior } from '../http/websocket.js';
import { InvariantError } from '../api-auth-error.js';
import { HEARTBEAT_MS, OwnerLink } from './owner-channel.js';
import type { MetricsJson, ThreadData } from './owner-channel.js';

/** What a thread serves with. */
export interface ThreadHttp {
  /** Answers a request, or attaches onAborted and answers later. */
  handle(res: HttpResponse, req: HttpRequest): void;
  /** The WebSocket route (its upgrade answers like `handle`); none: an upgrade is a request like any other. */
  readonly websocket?: SessionBehavior | null;
  /** Waits until no request is in flight, or `graceMs` at most; resolves with how many are left. */
  drain(graceMs: number): Promise<number>;
  /** This thread's metrics, for the owner to sum. */
  collect(): Promise<MetricsJson>;
  /** Releases what it holds (the upstream's connections), once the app is closed. */
  close(): Promise<void>;
}

export interface ThreadContext {
  readonly data: ThreadData;
  readonly owner: OwnerLink;
  /** Lines go to the owner, which writes them; each names this thread. */
  readonly log: Logger;
}

/**
 * Runs this worker thread as an HTTP thread serving with what `build` makes. A failure
 * while building ends the thread before it is registered, which is safe: the acceptor
 * reports it and the server does not start.
 */
export async function runHttpThread(build: (context: ThreadContext) => ThreadHttp | Promise<ThreadHttp>): Promise<void> {
  const data = workerData as ThreadData;
  const owner = new OwnerLink(parentPort!);
  const log = owner.logger(data.settings.logLevel, { thread: data.thread });
  const tls = data.settings.tls;
  let http: ThreadHttp;
  let tlsApp: typeof TlsApp | undefined;
  try {
    // Loaded only with TLS: with node:tls and the PEM checks, a tenth of what a thread loads otherwise.
    if (tls !== undefined) tlsApp = (await import('../http/tls.js')).tlsApp;
    http = await build({ data, owner, log });
  } catch (error) {
    owner.close();
    throw error;
  }
  let failed = false;
  // The first failure stops the process (the owner logs it); any later one is only logged.
  const fatal = (error: unknown): void => {
    if (failed) {
      log.error('internal error', errorFields(error));
      return;
    }
    failed = true;
    owner.fatal(error instanceof Error ? error.message : String(error));
  };
  process.on('uncaughtException', fatal);
  process.on('unhandledRejection', fatal);
  // In a worker, process.exit ends the thread, with whatever sockets its app holds.
  process.exit = ((code?: number) => {
    throw new InvariantError(`process.exit(${code ?? ''}) was called on HTTP thread ${data.thread}`);
  }) as typeof process.exit;

  const newApp = (files = tls): TemplatedApp => serveOn(files === undefined ? App() : tlsApp!(files), http, fatal);
  // With TLS, each reload adds an app (tls.ts): the acceptor hands new connections to the
  // newest, and the older ones keep the connections they have until the stop.
  omitServerMark();
  const apps: TemplatedApp[] = [newApp()];
  owner.onCollect(() => http.collect());
  if (tls !== undefined) {
    owner.onReloadTls((files) => {
      const app = newApp(files);
      apps.push(app);
      return descriptorOf(app);
    });
  }
  owner.onStop(() => {
    stop(apps, http, owner, log, data.settings.graceMs, failed).catch(fatal);
  });
  const heartbeats = data.heartbeats;
  setInterval(() => Atomics.add(heartbeats, data.thread, 1), HEARTBEAT_MS).unref();
  owner.ready(descriptorOf(apps[0]));
}

/**
 * The acceptor has taken this thread's descriptor out: let what is in flight finish (a
 * failed thread waits for nothing), close the app (and its kept-alive connections),
 * release the rest and let the thread end.
 */
async function stop(
  apps: readonly TemplatedApp[],
  http: ThreadHttp,
  owner: OwnerLink,
  log: Logger,
  graceMs: number,
  failed: boolean,
): Promise<void> {
  const left = await http.drain(failed ? 0 : graceMs);
  if (left > 0) log.warn('stopping with requests still in flight', { requests: left });
  // The last response may have been written inside a uWS callback still on the stack;
  // uWS sends it when that callback returns, and closing first would drop it.
  await new Promise((resolve) => setImmediate(resolve));
  const close = (): void => {
    for (const app of apps) app.close();
  };
  close();
  await http.close();
  // Its counts outlive it: the owner's last sample of the usage history (a clean stop's) reads them.
  owner.final(await http.collect().catch(() => []));
  owner.close();
  // A connection whose hand-off the acceptor queued just before it took the descriptor
  // out can still be adopted after the close, and would keep the thread alive: close
  // again while anything does. Unref'd, this never keeps the thread alive by itself.
  setInterval(close, 50).unref();
}
