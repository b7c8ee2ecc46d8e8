// The options' public names, for the library and the command line: the schema (options/
// schema.ts), what its entries say (options/spec.ts), the resolver and what it gives
// (options/resolve.ts, options/config.ts), and how values are written (options/format.ts).
export type { OptionKind, Limits, OptionParser, OptionSpec, OptionEntry } from './options/spec.js';
export { DEFAULTS, LIMITS, SCHEMA } from './options/schema.js';
export type { ServerOptions } from './options/schema.js';
export type { AuthConfig, AuthOptions, ClusterConfig, EtcdAuthFile, EtcdTlsFiles, ServerConfig, TlsFiles } from './options/config.js';
export { resolveAuthOptions, resolveClock, resolveServerOptions, servedPaths } from './options/resolve.js';
export { formatBytes, formatSeconds } from './options/format.js';
