// The built-in node endpoints, served when no upstream node is configured: enough of a
// node's /ext/info and /ext/health for clients, load balancers and probes to work.
import { stringParam } from '../rpc/jsonrpc.js';
import type { Method, MethodTable } from '../rpc/jsonrpc.js';

const HEALTHY = Object.freeze({ checks: Object.freeze({}), healthy: true });

/** The body of GET /ext/health. */
export const HEALTH_BODY = JSON.stringify(HEALTHY);

/** The JSON-RPC methods of /ext/info. */
export function infoMethods(version: string): MethodTable {
  const nodeVersion = Object.freeze({ version: `api-auth/${version}`, gitCommit: '', vmVersions: Object.freeze({}) });
  return new Map<string, Method>([
    ['info.getNodeVersion', () => nodeVersion],
    ['info.getNetworkID', () => ({ networkID: '12345' })],
    ['info.getNetworkName', () => ({ networkName: 'local' })],
    [
      'info.isBootstrapped',
      (params) => {
        stringParam(params, 'chain');
        return { isBootstrapped: true };
      },
    ],
  ]);
}

/** The JSON-RPC methods of /ext/health. */
export function healthMethods(): MethodTable {
  const health = (): typeof HEALTHY => HEALTHY;
  return new Map<string, Method>([
    ['health.health', health],
    ['health.readiness', health],
    ['health.liveness', health],
  ]);
}
