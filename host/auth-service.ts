// The token service behind POST /ext/auth: new token, revoke token, change password.
//
// The password check runs first, on the hashing thread, throttled per client; the
// effect then runs under one lock, and only if the password record the check matched is
// still the current one. So once auth.changePassword has returned, nothing issues or
// revokes under the old password. Each effect is recorded in the state store before the
// call succeeds.
import { canonicalEndpoints, Core, GrantError, IssueError, MAX_ENDPOINTS } from './core.js';
import { ErrorCode, invalidParams, RpcError, stringParam } from './jsonrpc.js';
import type { CallContext, Method, MethodTable, Params } from './jsonrpc.js';
import type { Logger } from './log.js';
import { countCodePoints, MAX_PASSWORD_LENGTH } from './password-file.js';
import { BusyError } from './password-hash.js';
import type { PasswordRecord, PasswordVerifier } from './password-hash.js';
import type { StateStore } from './state-store.js';
import { PasswordThrottle } from './throttle.js';

/** The service's own JSON-RPC error codes. */
export const ServiceErrorCode = {
  IncorrectPassword: -32000,
  ResourceLimit: -32001,
  Throttled: -32002,
  Busy: -32003,
} as const;

export interface AuthServiceOptions {
  readonly core: Core;
  readonly store: StateStore;
  readonly verifier: PasswordVerifier;
  /** Lifetime of new tokens, in seconds. */
  readonly tokenLifetime: number;
  readonly log: Logger;
  readonly throttle?: PasswordThrottle;
  /** Unix seconds. */
  readonly now?: () => number;
}

/** -32002 with the wait: the client failed too many password checks of late. */
export function throttled(retryAfter: number): RpcError {
  return new RpcError(ServiceErrorCode.Throttled, `too many failed password attempts; retry in ${retryAfter} s`, retryAfter);
}

export class AuthService {
  private readonly core: Core;
  private readonly store: StateStore;
  private readonly verifier: PasswordVerifier;
  private readonly tokenLifetime: number;
  private readonly log: Logger;
  private readonly now: () => number;
  readonly throttle: PasswordThrottle;
  private tail: Promise<unknown> = Promise.resolve();

  constructor(options: AuthServiceOptions) {
    this.core = options.core;
    this.store = options.store;
    this.verifier = options.verifier;
    this.tokenLifetime = options.tokenLifetime;
    this.log = options.log;
    this.throttle = options.throttle ?? new PasswordThrottle();
    this.now = options.now ?? (() => Math.floor(Date.now() / 1000));
  }

  /** A token for `endpoints` ("*" or absolute paths, optionally ending in "/*"). */
  async newToken(password: string, endpoints: readonly string[], context: CallContext): Promise<string> {
    if (endpoints.length === 0 || endpoints.length > MAX_ENDPOINTS) {
      throw invalidParams('endpoints', `an array of 1 to ${MAX_ENDPOINTS} strings`);
    }
    const checked = await this.authenticate(password, context);
    return this.exclusive(checked, async () => {
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
  async revokeToken(password: string, token: string, context: CallContext): Promise<void> {
    const checked = await this.authenticate(password, context);
    return this.exclusive(checked, async () => {
      const { claims } = this.core.revoke(token, this.now());
      // Already revoked (Revoked) still gets recorded: an earlier call may have revoked it
      // in the core and then failed to make that durable.
      if (claims !== undefined) await this.store.recordRevocation(claims.serial, claims.expiry);
    });
  }

  /** Replaces the password and starts a new generation: every earlier token stops working. */
  async changePassword(oldPassword: string, newPassword: string, context: CallContext): Promise<void> {
    const length = countCodePoints(newPassword);
    if (length === 0 || length > MAX_PASSWORD_LENGTH) {
      throw invalidParams('newPassword', `a string of 1 to ${MAX_PASSWORD_LENGTH} characters`);
    }
    const checked = await this.authenticate(oldPassword, context);
    if (newPassword === oldPassword) throw new RpcError(ErrorCode.InvalidParams, 'newPassword must differ from the current password');
    const record = await this.hash(newPassword);
    return this.exclusive(checked, async () => {
      const generation = this.core.generation + 1;
      await this.store.recordPassword(record, generation);
      this.core.bumpGeneration();
      this.log.info('password changed', { generation, client: context.address });
    });
  }

  /** The JSON-RPC methods of /ext/auth. */
  methods(): MethodTable {
    return new Map<string, Method>([
      ['auth.newToken', async (p, c) => ({ token: await this.newToken(stringParam(p, 'password'), endpointsParam(p), c) })],
      ['auth.revokeToken', async (p, c) => {
        await this.revokeToken(stringParam(p, 'password'), stringParam(p, 'token'), c);
        return { success: true };
      }],
      ['auth.changePassword', async (p, c) => {
        await this.changePassword(stringParam(p, 'oldPassword'), stringParam(p, 'newPassword'), c);
        return { success: true };
      }],
    ]);
  }

  /**
   * Checks a password against the current record, unless its client must wait; a
   * failure counts against the client. Returns the record it matched.
   */
  private async authenticate(password: string, context: CallContext): Promise<PasswordRecord> {
    const wait = this.throttle.retryAfter(context.address, Date.now());
    if (wait > 0) throw throttled(wait);
    const record = this.store.password;
    let ok: boolean;
    try {
      ok = await this.verifier.verify(password, record);
    } catch (error) {
      if (error instanceof BusyError) throw busy();
      throw error;
    }
    if (!ok) {
      this.throttle.failed(context.address, Date.now());
      this.log.warn('incorrect password', { client: context.address });
      throw new RpcError(ServiceErrorCode.IncorrectPassword, 'incorrect password');
    }
    this.throttle.succeeded(context.address);
    return record;
  }

  private async hash(password: string): Promise<PasswordRecord> {
    try {
      return await this.verifier.hash(password);
    } catch (error) {
      if (error instanceof BusyError) throw busy();
      throw error;
    }
  }

  /**
   * Runs an effect alone, and only while `checked` is still the current password: a
   * password checked just before a change completed is an incorrect one by the time
   * its effect would run.
   */
  private exclusive<T>(checked: PasswordRecord, work: () => Promise<T>): Promise<T> {
    const run = this.tail.then(() => {
      if (this.store.password !== checked) throw new RpcError(ServiceErrorCode.IncorrectPassword, 'incorrect password');
      return work();
    });
    this.tail = run.catch(() => undefined);
    return run;
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

function busy(): RpcError {
  return new RpcError(ServiceErrorCode.Busy, 'too many password checks are waiting; retry in 1 s', 1);
}

function endpointsParam(params: Params): string[] {
  const value = params.endpoints;
  if (!Array.isArray(value) || !value.every((e) => typeof e === 'string')) {
    throw invalidParams('endpoints', `an array of 1 to ${MAX_ENDPOINTS} strings`);
  }
  return value;
}
