// The paths api-auth answers itself, whatever the node behind it serves. They are facts
// of the HTTP side that the options' checks read (a public or metrics path must not be
// one of them), so they live here, below the options, rather than in options.ts.

/** Where the token service answers; never a path for anything else. */
export const AUTH_PATH = '/ext/auth';
/** api-auth's own readiness, for load balancers; no token. */
export const HEALTH_PATH = '/ext/auth/health';
/** The gate's verdict for a request a proxy in front names (nginx auth_request, Caddy forward_auth); no token. */
export const CHECK_PATH = '/ext/auth/check';
