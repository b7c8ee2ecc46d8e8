// The calls of uWebSockets.js that the package has and its typings lack, typed once:
// the child app descriptors (an acceptor app hands each connection it accepts to one of
// its children: the HTTP threads' apps, a TLS reload's new app), the listen that takes
// uSockets' options, and the switch that keeps uWS's mark out of the answers. Every other
// module calls these rather than casting the app itself.
import * as uws from 'uWebSockets.js';
import type { TemplatedApp, us_listen_socket } from 'uWebSockets.js';

/** What every App and SSLApp has beside its typings. */
interface ChildAppCalls {
  getDescriptor(): number;
  addChildAppDescriptor(descriptor: number): void;
  removeChildAppDescriptor(descriptor: number): void;
  listen(host: string, port: number, options: number, cb: (socket: us_listen_socket | false) => void): void;
}

const calls = (app: TemplatedApp): ChildAppCalls => app as unknown as ChildAppCalls;

/** What the module has beside its typings. */
interface ModuleCalls {
  /** uSockets' LIBUS_LISTEN_EXCLUSIVE_PORT: no other socket may share the port (no SO_REUSEPORT). */
  readonly LIBUS_LISTEN_EXCLUSIVE_PORT: number;
  /** Undocumented settings of the calling thread's loop; 'silent' sets its noMark. */
  _cfg(key: string): void;
}

const extras = uws as unknown as ModuleCalls;
const EXCLUSIVE_PORT = extras.LIBUS_LISTEN_EXCLUSIVE_PORT;

/**
 * Keeps the "uWebSockets: 20" header out of every answer this thread's loop writes (a
 * 101 too): it tells anyone which server, and which version, is behind the port. The
 * switch is the loop's, and each thread has its own: every thread that serves calls this
 * before it serves. uWS's own answers to what it cannot parse (its 400 page) still name it.
 */
export function omitServerMark(): void {
  extras._cfg('silent');
}

/** The number that names `app` to an acceptor, which may be on another thread. */
export function descriptorOf(app: TemplatedApp): number {
  return calls(app).getDescriptor();
}

/** From now on `acceptor` hands connections to the app that `descriptor` names too, in turn with its other children. */
export function addChild(acceptor: TemplatedApp, descriptor: number): void {
  calls(acceptor).addChildAppDescriptor(descriptor);
}

/** `acceptor` hands no more connections to the app that `descriptor` names; those it has stay with it. */
export function removeChild(acceptor: TemplatedApp, descriptor: number): void {
  calls(acceptor).removeChildAppDescriptor(descriptor);
}

/** Listens on `host`:`port` alone; `cb` gets the socket, or false when it could not listen. */
export function listenExclusive(app: TemplatedApp, host: string, port: number, cb: (socket: us_listen_socket | false) => void): void {
  calls(app).listen(host, port, EXCLUSIVE_PORT, cb);
}
