// The endpoints api-auth answers itself, whatever the node behind it serves: their paths,
// and the largest body they read. They are facts of the HTTP side that the options read
// too (a public or metrics path must not be one of them; LIMITS.rpcBody), so they live
// here, below both, rather than in http/ or options/.

/** Where the token service answers; never a path for anything else. */
export const AUTH_PATH = '/ext/auth';
/** api-auth's own readiness, for load balancers; no token. */
export const HEALTH_PATH = '/ext/auth/health';
/** api-auth's own liveness, for a supervisor's probe (a Kubernetes livenessProbe): 200 while the process serves, whatever the node's or the fleet's state; no token. */
export const LIVE_PATH = '/ext/auth/live';
/** The gate's verdict for a request a proxy in front names (nginx auth_request, Caddy forward_auth); no token. */
export const CHECK_PATH = '/ext/auth/check';

/**
 * The operator's console (--console): its page, and its files below it. Always api-auth's
 * own, console or not (without one they are not found): a console session is a token
 * whose one endpoint is CONSOLE_PATH, so no request for it may ever reach the node.
 */
export const CONSOLE_PATH = '/ext/auth/console';
/** The console's files, by name under CONSOLE_PATH; the build writes them to build/console. */
export const CONSOLE_FILES: readonly string[] = ['console.js', 'console.css'];
/** CONSOLE_PATH and its files' paths. */
export const CONSOLE_PATHS: readonly string[] = [CONSOLE_PATH, ...CONSOLE_FILES.map((name) => `${CONSOLE_PATH}/${name}`)];

/** Every path api-auth answers itself: none may be a public endpoint or the metrics path. */
export const OWN_PATHS: readonly string[] = [AUTH_PATH, HEALTH_PATH, LIVE_PATH, CHECK_PATH, ...CONSOLE_PATHS];

/** The largest JSON-RPC body a local endpoint reads (64 KiB; the options' LIMITS.rpcBody). */
export const MAX_BODY_BYTES = 65536;
