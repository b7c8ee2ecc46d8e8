// The token service behind POST /ext/auth: new token, revoke token, change password.
//
// Each call runs its password check and its effect under one lock, so no call acts on a
// password that another call has already replaced: once auth.changePassword has
// returned, nothing issues or revokes under the old password. Each effect is recorded
// in the state store before the call succeeds.
import { canonicalEndpoints, Core, GrantError, IssueError, MAX_ENDPOINTS } from './core.js';
import { ErrorCode, invalidParams, RpcError, stringParam } from './jsonrpc.js';
import type { Method, MethodTable, Params } from './jsonrpc.js';
import type { Logger } from './log.js';
import { countCodePoints, MAX_PASSWORD_LENGTH } from './password-file.js';
import type { PasswordVerifier } from './password-hash.js';
import type { StateStore } from './state-store.js';

/** The service's own JSON-RPC error codes. */
export const ServiceErrorCode = {
  IncorrectPassword: -32000,
  ResourceLimit: -32001,
} as const;

export interface AuthServiceOptions {
  readonly core: Core;
  readonly store: StateStore;
  readonly verifier: PasswordVerifier;
  /** Lifetime of new tokens, in seconds. */
  readonly tokenLifetime: number;
  readonly log: Logger;
  /** Unix seconds. */
  readonly now?: () => number;
}

export class AuthService {
  private readonly core: Core;
  private readonly store: StateStore;
  private readonly verifier: PasswordVerifier;
  private readonly tokenLifetime: number;
  private readonly log: Logger;
  private readonly now: () => number;
  private tail: Promise<unknown> = Promise.resolve();

  constructor(options: AuthServiceOptions) {
    this.core = options.core;
    this.store = options.store;
    this.verifier = options.verifier;
    this.tokenLifetime = options.tokenLifetime;
    this.log = options.log;
    this.now = options.now ?? (() => Math.floor(Date.now() / 1000));
  }

  /** A token for `endpoints` ("*" or absolute paths, optionally ending in "/*"). */
  async newToken(password: string, endpoints: readonly string[]): Promise<string> {
    if (endpoints.length === 0 || endpoints.length > MAX_ENDPOINTS) {
      throw invalidParams('endpoints', `an array of 1 to ${MAX_ENDPOINTS} strings`);
    }
    return this.exclusive(async () => {
      await this.checkPassword(password);
      const grant = this.addGrant(endpoints);
      // What the token will refer to (its grant, its serial) is durable before it exists.
      await this.store.recordGrant(grant, canonicalEndpoints(endpoints));
      const now = this.now();
      // Sweeping first frees the pages of expired tokens, so the reservation sees the whole window.
      this.core.sweep(now);
      await this.store.reserveSerials(this.core.nextSerial + 1, this.core.floor, this.core.floor + this.core.windowSize);
      try {
        return this.core.issue(grant, now, this.tokenLifetime).token;
      } catch (error) {
        if (error instanceof IssueError) throw new RpcError(ServiceErrorCode.ResourceLimit, error.message);
        throw error;
      }
    });
  }

  /** Revokes `token` if it is valid now; a token that is not (malformed, expired, revoked) is left alone. */
  async revokeToken(password: string, token: string): Promise<void> {
    return this.exclusive(async () => {
      await this.checkPassword(password);
      const { claims } = this.core.revoke(token, this.now());
      // Already revoked (Revoked) still gets recorded: an earlier call may have revoked it
      // in the core and then failed to make that durable.
      if (claims !== undefined) await this.store.recordRevocation(claims.serial, claims.expiry);
    });
  }

  /** Replaces the password and starts a new generation: every earlier token stops working. */
  async changePassword(oldPassword: string, newPassword: string): Promise<void> {
    const length = countCodePoints(newPassword);
    if (length === 0 || length > MAX_PASSWORD_LENGTH) {
      throw invalidParams('newPassword', `a string of 1 to ${MAX_PASSWORD_LENGTH} characters`);
    }
    return this.exclusive(async () => {
      await this.checkPassword(oldPassword);
      if (newPassword === oldPassword) throw new RpcError(ErrorCode.InvalidParams, 'newPassword must differ from the current password');
      const record = await this.verifier.hash(newPassword);
      const generation = this.core.generation + 1;
      await this.store.recordPassword(record, generation);
      this.core.bumpGeneration();
      this.log.info('password changed', { generation });
    });
  }

  /** The JSON-RPC methods of /ext/auth. */
  methods(): MethodTable {
    return new Map<string, Method>([
      ['auth.newToken', async (p) => ({ token: await this.newToken(stringParam(p, 'password'), endpointsParam(p)) })],
      ['auth.revokeToken', async (p) => {
        await this.revokeToken(stringParam(p, 'password'), stringParam(p, 'token'));
        return { success: true };
      }],
      ['auth.changePassword', async (p) => {
        await this.changePassword(stringParam(p, 'oldPassword'), stringParam(p, 'newPassword'));
        return { success: true };
      }],
    ]);
  }

  private exclusive<T>(work: () => Promise<T>): Promise<T> {
    const run = this.tail.then(work);
    this.tail = run.catch(() => undefined);
    return run;
  }

  private async checkPassword(password: string): Promise<void> {
    const record = this.store.password;
    if (record === null) throw new Error('no password is recorded');
    if (!(await this.verifier.verify(password, record))) throw new RpcError(ServiceErrorCode.IncorrectPassword, 'incorrect password');
  }

  private addGrant(endpoints: readonly string[]): number {
    try {
      return this.core.addGrant(endpoints);
    } catch (error) {
      if (!(error instanceof GrantError)) throw error;
      // The list is the client's mistake, except when the table itself is full.
      throw new RpcError(error.code === 'table-full' ? ServiceErrorCode.ResourceLimit : ErrorCode.InvalidParams, error.message);
    }
  }
}

function endpointsParam(params: Params): string[] {
  const value = params.endpoints;
  if (!Array.isArray(value) || !value.every((e) => typeof e === 'string')) {
    throw invalidParams('endpoints', `an array of 1 to ${MAX_ENDPOINTS} strings`);
  }
  return value;
}
