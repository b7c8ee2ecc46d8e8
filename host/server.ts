// The assembly of the standalone service: the core, the state owner (when tokens are
// required) and the HTTP side, wired together and listening. On one thread, the HTTP
// side is that thread's own; on several (httpThreads), each HTTP thread builds its own
// over a reader of the shared core, and this thread accepts and owns the state
// (threads/acceptor.ts).
import { closeSync } from 'node:fs';
import type { Clock } from './clock.js';
import type { Core } from './core/core.js';
import { coreThreadsModule, newCore, newThreadsCore } from './core/module.js';
import { badOption } from './errors.js';
import { HttpServer, STOP_GRACE_MS, whyNotListening } from './http/listener.js';
import type { Listening, ServerHandle } from './http/listener.js';
import type { Stack } from './http/stack.js';
import { ledgerMemory } from './http/session-ledger.js';
import { addByReason, RefusedMessages, refusedMessagesMemory } from './http/refused-messages.js';
import type { WebSocketSettings } from './http/websocket.js';
import { LineTargetError, lineTarget, openTarget, reopenLines, STDOUT } from './ops/line-target.js';
import type { LineTarget } from './ops/line-target.js';
import { LineWriter } from './ops/line-writer.js';
import { createLogger } from './ops/log.js';
import type { Logger } from './ops/log.js';
import { Metrics } from './ops/metrics.js';
import { resolveClock, resolveServerOptions, servedPaths } from './options.js';
import { checkTlsFiles } from './pem.js';
import type { ServerConfig, ServerOptions } from './options.js';
import { fenceMemory, fenceReader } from './threads/fence.js';
import { openOwner } from './owner.js';
import type { OpenedAuth } from './owner.js';
import { MAX_CLIENTS, OVERALL, PasswordThrottle, PER_CLIENT } from './service/throttle.js';
import { startThreads } from './threads/acceptor.js';
import type { ThreadsPlan } from './threads/acceptor.js';
import { throttledAuth } from './threads/owner-auth.js';
import { boardMemory, ThrottleBoard } from './threads/throttle-board.js';
import { nodeStatusOf } from './ops/node-status.js';

export type { ServerHandle } from './http/listener.js';

/** What startServer runs with beside its options. */
export interface ServerServices {
  /** Where log lines go; default JSON lines on stdout, from the options' logLevel up. */
  readonly log?: Logger;
  readonly metrics?: Metrics;
  /**
   * The time, in ms since the Unix epoch: what tokens expire by, the throttle counts by,
   * and the state forgets expired revocations by. Default the system's clock. HTTP
   * threads tell time by the system's clock, so a clock of your own needs httpThreads 1.
   */
  readonly clock?: Clock;
}

/**
 * Starts the service: validates `options` (options.ts has the defaults and limits),
 * and the TLS files, then the core, the state of the data folder (created on the first start), the password
 * (from its file, generated when missing) and the HTTP listener. Throws OptionError for
 * a bad option or password file, StateError for a data folder it cannot use,
 * ListenError when it cannot listen; each names the option at fault.
 */
export async function startServer(options: ServerOptions = {}, services: ServerServices = {}): Promise<ServerHandle> {
  const config = resolveServerOptions(options);
  // The files themselves at start, not in the resolver: it validates values and reads nothing.
  if (config.tls !== undefined) checkTlsFiles(config.tls);
  const clock = resolveClock(services.clock);
  const threads = config.httpThreads;
  if (threads > 1 && services.clock !== undefined) {
    throw badOption('clock', ": HTTP threads tell time by the system's clock; a clock of your own needs httpThreads: 1");
  }
  const log = services.log ?? createLogger(undefined, config.logLevel, clock);
  // With several threads, each counts its own requests, and these are the owner's.
  const metrics = services.metrics ?? new Metrics({ processMetrics: true, httpThread: threads > 1 ? undefined : 1 });
  // One thread keeps the plain core: no shared memory to size, and checks as fast (README, Threads).
  const core = threads > 1 ? newThreadsCore({ threads: threads + 1 }) : newCore();
  metrics.usageMisses = () => core.usageMisses;
  servedPaths(core, 'publicEndpoints', config.publicEndpoints);
  servedPaths(core, 'metricsPath', [config.metricsPath]);
  const access = config.accessLog === undefined ? undefined : lineTarget(config.accessLog);
  // Opened at start, so that a path it cannot write is a clear start error rather than lost lines.
  const accessFd = access && (await openAccessLog(access));
  // With several threads, the throttle publishes who must wait, for them to refuse.
  const board = threads > 1 ? boardMemory() : undefined;
  // Each HTTP thread opens the access log for itself: the owner's descriptor only checked the path.
  if (board !== undefined && accessFd !== undefined) closeTarget(access!, accessFd);
  const accessWriter = board === undefined && accessFd !== undefined ? new LineWriter(access!, accessFd, metrics, log) : undefined;
  // A fleet gateway's gates read whether it may serve (threads/fence.ts); closed until it has joined.
  const fence = config.cluster && config.authRequired && config.passwordFile !== undefined ? fenceMemory() : undefined;
  // The WebSocket messages refused on this thread, when it serves alone (the acceptor has its own).
  const refusedMessages = refusedMessagesMemory();
  // They load and attach while the state opens.
  const httpThreads = board && startThreads(threadsPlan(config, core, board, metrics, log, fence, access));
  let auth: OpenedAuth | undefined;
  let stack: Stack | undefined;
  // What stop() releases once the last request is answered.
  const release = async (): Promise<void> => {
    await stack?.close();
    // Closed with the stack once it is built; before that, here.
    if (stack === undefined) await accessWriter?.close();
    await auth?.close();
  };
  try {
    if (config.authRequired && config.passwordFile !== undefined) {
      const throttle = board && new PasswordThrottle(PER_CLIENT, OVERALL, MAX_CLIENTS, new ThrottleBoard(board).writer());
      try {
        auth = await openOwner(
          core,
          {
            passwordFile: config.passwordFile,
            tokenLifetime: config.tokenLifetime,
            maxTokenLifetime: config.maxTokenLifetime,
            maxTokens: config.maxTokens,
            sessionMaxLifetime: config.consoleSessionMaxLifetime,
            throttle,
            backend: config.cluster && fence ? { cluster: config.cluster, fence } : { dataDir: config.dataDir },
            refusals: httpThreads
              ? () => httpThreads.refusalsByReason()
              : () => Promise.resolve(addByReason(metrics.responsesByReason(), new RefusedMessages(refusedMessages).byReason())),
            status: httpThreads ? () => httpThreads.nodeStatus() : async () => nodeStatusOf([await metrics.registry.getMetricsAsJSON()]),
          },
          log,
          metrics,
          clock,
        );
      } catch (error) {
        await httpThreads?.abort();
        throw error;
      }
    } else {
      if (config.upstream !== undefined) {
        log.warn(
          'the upstream node is open to anyone: without --api-auth-required no token is asked for; add --api-auth-required ' +
            '(and --api-auth-password-file) to gate it',
          { upstream: config.upstream.origin },
        );
      }
      if (config.passwordFile !== undefined) {
        log.warn('the password file is not used without --api-auth-required', { path: config.passwordFile });
      }
      for (const flag of config.unusedTokenOptions) {
        log.warn(`--${flag} means nothing without --api-auth-required: no token is issued`);
      }
      if (config.publicEndpoints.length > 0) {
        log.warn('public endpoints mean nothing without --api-auth-required: every endpoint is public', { paths: config.publicEndpoints });
      }
    }
    if (config.queryToken && auth === undefined) {
      // Like the public endpoints above: with no token required, there is no token to take
      // from the query. (Without an upstream the flag is refused: there is no WebSocket.)
      log.warn('--api-auth-query-token means nothing without --api-auth-required: no token is asked for');
    }
    if (httpThreads !== undefined)
      return withAccessLog(await httpThreads.listen({ auth: auth && throttledAuth(auth.link), release }), access);
    // Loaded only to serve on this thread: with several, the HTTP threads load it.
    const { buildStack } = await import('./http/stack.js');
    stack = await buildStack({
      core,
      metrics,
      scrape: metrics,
      service: auth?.link,
      publicEndpoints: config.publicEndpoints,
      metricsPath: config.metricsPath,
      upstream: config.upstream && {
        url: config.upstream,
        timeoutMs: config.upstreamTimeoutMs,
        maxBody: config.upstreamMaxBody,
        pipelining: config.upstreamPipelining,
        queryToken: config.queryToken,
        clientScheme: config.tls === undefined ? 'http' : 'https',
      },
      websocket: { ...websocketSettings(config), sessions: ledgerMemory(config.wsMaxSessions), refusedMessages },
      trustedProxies: config.trustedProxies,
      log,
      clock,
      allowedOrigins: config.allowedOrigins,
      serving: fence && fenceReader(fence),
      console: config.console,
      secure: config.tls !== undefined,
      accessLog: accessWriter,
    });
    return withAccessLog(
      await new HttpServer(config.tls, stack.router, stack.inFlight, metrics, release, log, stack.websockets).listen(
        config.host,
        config.port,
      ),
      access,
    );
  } catch (error) {
    await release();
    throw error;
  }
}

/** The handle of a listening server, which reopens `access` (when there is one) on request. */
function withAccessLog(listening: Listening, access: LineTarget | undefined): ServerHandle {
  return {
    ...listening,
    reopenAccessLog: () => {
      if (access !== undefined) reopenLines(access);
    },
  };
}

/** The access log's file, opened and checked (openTarget); a path it refuses is a bad option. */
async function openAccessLog(access: LineTarget): Promise<number> {
  try {
    return await openTarget(access.path);
  } catch (error) {
    if (!(error instanceof LineTargetError)) throw error;
    throw badOption('accessLog', `: ${error.message}`);
  }
}

function closeTarget(access: LineTarget, fd: number): void {
  if (access.path !== STDOUT) closeSync(fd);
}

/** The HTTP side on `config.httpThreads` threads, this one accepting and owning the state. */
function threadsPlan(
  config: ServerConfig,
  core: Core,
  board: SharedArrayBuffer,
  metrics: Metrics,
  log: Logger,
  fence: Uint32Array | undefined,
  accessLog: LineTarget | undefined,
): ThreadsPlan {
  return {
    threads: config.httpThreads,
    host: config.host,
    port: config.port,
    module: coreThreadsModule(),
    memory: core.memory,
    settings: {
      authRequired: config.authRequired && config.passwordFile !== undefined,
      console: config.console,
      publicEndpoints: config.publicEndpoints,
      metricsPath: config.metricsPath,
      upstream: config.upstream && {
        origin: config.upstream.origin,
        timeoutMs: config.upstreamTimeoutMs,
        maxBody: config.upstreamMaxBody,
        pipelining: config.upstreamPipelining,
      },
      websocket: websocketSettings(config),
      trustedProxies: config.trustedProxies.entries,
      logLevel: config.logLevel,
      graceMs: STOP_GRACE_MS,
      tls: config.tls,
      allowedOrigins: config.allowedOrigins,
      fence,
      accessLog,
    },
    board,
    metrics,
    log,
    whyNotListening,
  };
}

/** The WebSocket options as every thread takes them (the sessions' ledger is made apart: one for the process). */
function websocketSettings(config: ServerConfig): Omit<WebSocketSettings, 'sessions' | 'refusedMessages'> {
  return {
    maxMessage: config.wsMaxMessage,
    idleTimeout: config.wsIdleTimeout,
    maxSessions: config.wsMaxSessions,
    maxSessionsPerToken: config.wsMaxSessionsPerToken,
    maxSessionsPerClient: config.wsMaxSessionsPerClient,
    queryToken: config.queryToken,
  };
}
