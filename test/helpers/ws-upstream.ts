// A real WebSocket JSON-RPC upstream node for the WebSocket tests (`ws` on a free
// loopback port, in the test's own process), and a client that opens sessions the way
// dapps do. The upstream answers eth_chainId, eth_blockNumber, eth_subscribe and
// eth_unsubscribe as a node would, pushes a newHeads notification to every subscription
// on `newBlock()`, and echoes any other message (text as text, binary as binary). It
// records each session's upgrade request and every message it received. Closed when the
// test ends.
import type { IncomingHttpHeaders, IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Test } from 'tap';
import { WebSocket, WebSocketServer } from 'ws';
import type { RawData } from 'ws';

export const CHAIN_ID = '0xa86a';

export interface Received {
  data: Buffer;
  isBinary: boolean;
}

export interface Closed {
  code: number;
  reason: string;
}

/** One session as the upstream sees it. */
export interface UpstreamSession {
  /** The request target of the upgrade, byte for byte as received (Latin-1: one character per byte). */
  url: string;
  headers: IncomingHttpHeaders;
  rawHeaders: string[];
  socket: WebSocket;
  received: Received[];
  /** Resolves with the n-th message received (0-based), now or once it comes. */
  message(n: number): Promise<Received>;
  closed: Promise<Closed>;
}

export interface WsUpstreamOptions {
  /** Answer pings (default true); false: an upstream that stopped answering. */
  autoPong?: boolean;
  /** Paths whose upgrade is refused with this HTTP status. */
  refuse?: Readonly<Record<string, number>>;
  /** The subprotocol chosen among the client's (default: the first offered). */
  protocol?: (offered: Set<string>) => string | false;
}

export interface WsUpstream {
  url: string;
  port: number;
  sessions: UpstreamSession[];
  /** Resolves with the n-th session (0-based), now or once it opens. */
  session(n: number): Promise<UpstreamSession>;
  /** Pushes a new block to every newHeads subscription; returns its number. */
  newBlock(): number;
  close(): Promise<void>;
}

export async function startWsUpstream(t: Test, options: WsUpstreamOptions = {}): Promise<WsUpstream> {
  const sessions: UpstreamSession[] = [];
  const sessionWaiters: (() => void)[] = [];
  const subscriptions = new Map<WebSocket, string>();
  let block = 0x100;
  let nextId = 1;
  const server = new WebSocketServer({
    host: '127.0.0.1',
    port: 0,
    autoPong: options.autoPong ?? true,
    perMessageDeflate: false,
    maxPayload: 1024 * 1024 * 1024,
    handleProtocols: (offered) => (options.protocol ? options.protocol(offered) : (offered.values().next().value ?? false)),
    verifyClient: (info: { req: IncomingMessage }, done: (ok: boolean, code?: number) => void) => {
      const status = options.refuse?.[(info.req.url ?? '').split('?')[0]];
      done(status === undefined, status);
    },
  });
  server.on('connection', (socket: WebSocket, req: IncomingMessage) => {
    const received: Received[] = [];
    const waiters: (() => void)[] = [];
    const session: UpstreamSession = {
      url: req.url ?? '',
      headers: req.headers,
      rawHeaders: req.rawHeaders,
      socket,
      received,
      message: (n) =>
        new Promise((resolve) => {
          const check = (): void => {
            if (received.length > n) resolve(received[n]);
            else waiters.push(check);
          };
          check();
        }),
      closed: new Promise((resolve) => socket.once('close', (code, reason) => resolve({ code, reason: reason.toString() }))),
    };
    socket.on('error', () => undefined);
    socket.on('message', (data: RawData, isBinary: boolean) => {
      const buffer = data as Buffer;
      received.push({ data: buffer, isBinary });
      for (const waiter of waiters.splice(0)) waiter();
      answer(socket, buffer, isBinary);
    });
    sessions.push(session);
    for (const waiter of sessionWaiters.splice(0)) waiter();
  });

  function answer(socket: WebSocket, data: Buffer, isBinary: boolean): void {
    let call: { id?: unknown; method?: string; params?: unknown[] } | undefined;
    if (!isBinary) {
      try {
        call = JSON.parse(data.toString('utf8'));
      } catch {
        call = undefined;
      }
    }
    if (call === undefined || typeof call !== 'object' || call === null || typeof call.method !== 'string') {
      socket.send(data, { binary: isBinary });
      return;
    }
    const reply = (result: unknown): void => socket.send(JSON.stringify({ jsonrpc: '2.0', id: call!.id, result }));
    switch (call.method) {
      case 'eth_chainId':
        return reply(CHAIN_ID);
      case 'eth_blockNumber':
        return reply(`0x${block.toString(16)}`);
      case 'eth_subscribe': {
        const id = `0x${(nextId++).toString(16)}`;
        if (call.params?.[0] === 'newHeads') subscriptions.set(socket, id);
        return reply(id);
      }
      case 'eth_unsubscribe':
        subscriptions.delete(socket);
        return reply(true);
      default:
        socket.send(JSON.stringify({ jsonrpc: '2.0', id: call.id, error: { code: -32601, message: 'the method does not exist' } }));
    }
  }

  await new Promise<void>((resolve) => server.once('listening', () => resolve()));
  const port = (server.address() as AddressInfo).port;
  let closed: Promise<void> | undefined;
  const close = (): Promise<void> => {
    closed ??= new Promise<void>((resolve) => {
      for (const client of server.clients) client.terminate();
      server.close(() => resolve());
    });
    return closed;
  };
  t.teardown(close);
  return {
    url: `http://127.0.0.1:${port}`,
    port,
    sessions,
    session: (n) =>
      new Promise((resolve) => {
        const check = (): void => {
          if (sessions.length > n) resolve(sessions[n]);
          else sessionWaiters.push(check);
        };
        check();
      }),
    newBlock() {
      block++;
      const number = `0x${block.toString(16)}`;
      for (const [socket, id] of subscriptions) {
        if (socket.readyState !== WebSocket.OPEN) continue;
        socket.send(
          JSON.stringify({
            jsonrpc: '2.0',
            method: 'eth_subscription',
            params: {
              subscription: id,
              result: { number, hash: `0x${block.toString(16).padStart(64, '0')}`, parentHash: `0x${'0'.repeat(64)}` },
            },
          }),
        );
      }
      return block;
    },
    close,
  };
}

/** A client session through the gate: the socket, what it received, and its close. */
export interface Client {
  socket: WebSocket;
  received: Received[];
  message(n: number): Promise<Received>;
  closed: Promise<Closed>;
  /** Sends a JSON-RPC call and resolves with the answer of the same id. */
  call(method: string, params?: unknown[]): Promise<{ result?: unknown; error?: { code: number; message: string } }>;
}

/** What an upgrade got instead of 101. */
export class Refused extends Error {
  constructor(
    readonly status: number,
    readonly headers: IncomingHttpHeaders,
    readonly body: string,
  ) {
    super(`the upgrade got HTTP ${status}: ${body}`);
  }
}

/** Opening a session at `url` fails with an HTTP answer: that answer; throws if the upgrade is accepted. */
export async function upgradeRefused(t: Test, url: string, options: ClientOptions = {}): Promise<Refused> {
  try {
    const client = await openClient(t, url, options);
    client.socket.terminate();
  } catch (error) {
    if (error instanceof Refused) return error;
    throw error;
  }
  throw new Error(`the upgrade to ${url} was accepted`);
}

export interface ClientOptions {
  /** Authorization: Bearer <token>. */
  token?: string;
  headers?: Record<string, string>;
  protocols?: string[];
  autoPong?: boolean;
  maxPayload?: number;
  /** For wss:// URLs: the PEM of the CA (or self-signed certificate) to trust. */
  ca?: Buffer;
  /** The local address to connect from, such as 127.0.0.2 (any of 127.0.0.0/8 is this machine's). */
  localAddress?: string;
}

/**
 * Opens a session at `url` (ws://..., or wss://... with `ca`); resolves once it is open, rejects with Refused
 * when the upgrade was answered with an HTTP status.
 */
export function openClient(t: Test, url: string, options: ClientOptions = {}): Promise<Client> {
  const headers: Record<string, string> = { ...options.headers };
  if (options.token !== undefined) headers.Authorization = `Bearer ${options.token}`;
  const socket = new WebSocket(url, options.protocols ?? [], {
    headers,
    perMessageDeflate: false,
    autoPong: options.autoPong ?? true,
    maxPayload: options.maxPayload ?? 1024 * 1024 * 1024,
    ca: options.ca,
    localAddress: options.localAddress,
  });
  t.teardown(() => socket.terminate());
  const received: Received[] = [];
  const waiters: (() => void)[] = [];
  let nextId = 1;
  const closed = new Promise<Closed>((resolve) => socket.once('close', (code, reason) => resolve({ code, reason: reason.toString() })));
  socket.on('message', (data: RawData, isBinary: boolean) => {
    received.push({ data: data as Buffer, isBinary });
    for (const waiter of waiters.splice(0)) waiter();
  });
  const message = (n: number): Promise<Received> =>
    new Promise((resolve, reject) => {
      const check = (): void => {
        if (received.length > n) resolve(received[n]);
        else if (socket.readyState === WebSocket.CLOSED) reject(new Error(`the session closed after ${received.length} messages`));
        else waiters.push(check);
      };
      void closed.then(check);
      check();
    });
  const client: Client = {
    socket,
    received,
    message,
    closed,
    call(method, params = []) {
      const id = nextId++;
      socket.send(JSON.stringify({ jsonrpc: '2.0', id, method, params }));
      return new Promise((resolve, reject) => {
        const look = (from: number): void => {
          for (let i = from; i < received.length; i++) {
            const text = received[i].data.toString('utf8');
            try {
              const answer = JSON.parse(text);
              if (answer.id === id) return resolve(answer);
            } catch {
              // Not JSON: not the answer.
            }
          }
          const seen = received.length;
          message(seen).then(() => look(seen), reject);
        };
        look(0);
      });
    },
  };
  return new Promise((resolve, reject) => {
    socket.once('open', () => resolve(client));
    socket.once('unexpected-response', (_req, res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => {
        socket.terminate();
        reject(new Refused(res.statusCode ?? 0, res.headers, Buffer.concat(chunks).toString('utf8')));
      });
    });
    // Once open, a failure shows as the close; before, it fails the open.
    socket.on('error', (error) => reject(error));
  });
}

/** The ws:// URL of `path` on the server at `base` (http://host:port). */
export function wsUrl(base: string, path: string): string {
  return base.replace(/^http/, 'ws') + path;
}

/** The session closes within `ms`: its close, and how long it took. */
export async function closesWithin(client: Client, ms: number): Promise<Closed & { after: number }> {
  const start = performance.now();
  let timer: NodeJS.Timeout | undefined;
  const closed = await Promise.race([
    client.closed,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`the session did not close within ${ms} ms`)), ms);
    }),
  ]);
  clearTimeout(timer);
  return { ...closed, after: performance.now() - start };
}
