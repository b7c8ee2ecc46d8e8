// The token service behind POST /ext/auth: new token, list tokens, revoke token (by the
// token or by its id), rotate, usage history, node status, change password, and the
// console's sessions. How the wire asks for each is auth-methods.ts's.
//
// The password check runs first, on the hashing thread, throttled per client; the
// effect then runs under one lock, and only if the password record the check matched is
// still the current one. So once auth.changePassword has returned, nothing issues or
// revokes under the old password. Each effect is recorded in the ledger (ledger.ts: the
// data folder, or a fleet) before the core applies it, so a call whose write fails (a
// full disk, etcd unreachable) answers an error and changes nothing.
//
// Every call of a method is logged as one audit line ({"msg":"audit","method",
// "outcome","client", and the token's serial and generation when known}); no audit
// line holds a password or a token.
import { unixSeconds } from '../clock.js';
import type { Clock } from '../clock.js';
import type { Core } from '../core/core.js';
import { GrantError, IssueError, MAX_ENDPOINTS, Outcome, OUTCOME_NAMES } from '../core/abi.js';
import { splitGrantEntries } from '../core/grants.js';
import type { Claims } from '../core/abi.js';
import { BusyError, FleetError, GRANT_ERRORS, ISSUE_ERRORS, RpcCode, RpcError, throttledMessage } from '../errors.js';
import { invalidParams } from '../rpc/jsonrpc.js';
import type { CallContext, Params } from '../rpc/jsonrpc.js';
import {
  csrfMatches,
  joinSession,
  SESSION_ENDPOINTS,
  SESSION_MAX_SECONDS,
  SESSION_METHODS,
  SESSION_SECONDS,
  SIGN_IN_METHODS,
  splitSession,
} from './console-session.js';

import type { Fields, Logger } from '../ops/log.js';
import type { Metrics } from '../ops/metrics.js';
import { countCodePoints, MAX_PASSWORD_LENGTH } from '../password/file.js';
import type { PasswordRecord, PasswordVerifier } from '../password/hash.js';
import type { Inventory, InventoryEntry, Ledger, SharedCheck } from './ledger.js';
import { listed, usageOf } from './token-listing.js';
import type { ListedToken } from './token-listing.js';
import { durationParam, parseTokenId, showDuration, tokenId } from './token-params.js';
import { PasswordThrottle } from './throttle.js';
import { HOUR_MS, hourStart, UsageHistory } from './usage-history.js';
import type { NodeStatus } from '../ops/node-status.js';

export interface TokenServiceOptions {
  readonly core: Core;
  /** Where the password, grants, serials and revocations are kept: the data folder or a fleet (ledger.ts). */
  readonly ledger: Ledger;
  readonly verifier: PasswordVerifier;
  /** Lifetime of new tokens that ask none, in seconds. */
  readonly tokenLifetime: number;
  /** The longest lifetime a call may ask, in seconds (--max-token-lifetime); NEVER_SECONDS for never. */
  readonly maxTokenLifetime: number;
  /** The issued tokens, live ones listed. */
  readonly inventory: Inventory;
  /** Live tokens at most (revoked ones count until they expire); newToken past it is a resource-limit error. */
  readonly maxTokens: number;
  readonly log: Logger;
  readonly throttle?: PasswordThrottle;
  /** Where issued and revoked tokens and password checks are counted. */
  readonly metrics?: Metrics;
  /** The throttle's time, and in whole seconds the tokens'. */
  readonly clock: Clock;
  /** The hourly counts auth.usageHistory shows (usage-history.ts); an empty one when left out. */
  readonly history?: UsageHistory;
  /** The sessions open and the upstream's latency, as auth.nodeStatus shows them; nothing counted when left out. */
  readonly status?: () => Promise<NodeStatus>;
  /** The longest a console session's chain of renewals runs from its sign-in, in seconds (--console-session-max-lifetime); SESSION_MAX_SECONDS when left out. */
  readonly sessionMaxLifetime?: number;
}

export class TokenService {
  private readonly core: Core;
  private readonly ledger: Ledger;
  private readonly verifier: PasswordVerifier;
  private readonly tokenLifetime: number;
  /** The longest lifetime a call may ask, in seconds (--max-token-lifetime). */
  readonly maxTokenLifetime: number;
  private readonly inventory: Inventory;
  private readonly maxTokens: number;
  private readonly log: Logger;
  private readonly clock: Clock;
  /** Unix seconds. */
  /** The service's time, Unix seconds. */
  readonly now: () => number;
  private readonly metrics: Metrics | undefined;
  private readonly throttle: PasswordThrottle;
  private readonly history: UsageHistory;
  private readonly status: (() => Promise<NodeStatus>) | undefined;
  private readonly sessionMaxLifetime: number;
  private tail: Promise<unknown> = Promise.resolve();

  constructor(options: TokenServiceOptions) {
    this.core = options.core;
    this.ledger = options.ledger;
    this.verifier = options.verifier;
    this.tokenLifetime = options.tokenLifetime;
    this.maxTokenLifetime = options.maxTokenLifetime;
    this.inventory = options.inventory;
    this.maxTokens = options.maxTokens;
    this.log = options.log;
    this.throttle = options.throttle ?? new PasswordThrottle();
    this.metrics = options.metrics;
    this.clock = options.clock;
    this.now = () => unixSeconds(options.clock);
    this.history = options.history ?? new UsageHistory(options.core, options.clock);
    this.status = options.status;
    this.sessionMaxLifetime = options.sessionMaxLifetime ?? SESSION_MAX_SECONDS;
  }

  /**
   * Whole seconds the client at `address` must wait before its next password check, or
   * 0; a wait counts as a throttled call. For the route, before it reads the body.
   */
  throttled(address: string): number {
    const wait = this.throttle.retryAfter(address, this.clock());
    if (wait > 0 && this.metrics) this.metrics.passwordsThrottled++;
    return wait;
  }

  /**
   * A token for `endpoints` ("*", "/" for the root alone, or absolute paths, optionally ending in "/*"), and for
   * `extra.methods` only (JSON-RPC method patterns) when given; what it says about
   * itself, and its id. `lifetime` (seconds, at most --max-token-lifetime) and `label`
   * come checked by their params.
   */
  async newToken(
    password: Credential,
    endpoints: readonly string[],
    extra: NewTokenOptions,
    context: CallContext,
  ): Promise<{ token: string; claims: Claims; id: string }> {
    if (endpoints.length === 0 || endpoints.length > MAX_ENDPOINTS) {
      throw invalidParams('endpoints', `an array of 1 to ${MAX_ENDPOINTS} strings`);
    }
    const checked = await this.authenticate(password, context);
    const { issued, durable } = await this.exclusive(checked, async () => {
      const grant = this.findGrant(endpoints, extra.methods, extra.limits);
      if (!this.inventory.hasRoom(this.maxTokens)) {
        throw new RpcError(
          RpcCode.ResourceLimit,
          `the node holds ${this.maxTokens} live tokens, its limit (--api-auth-max-tokens); ` +
            'wait for some to expire (revoked ones count until then), or raise the limit',
        );
      }
      const now = this.now();
      const issued = await this.recorded(() =>
        this.ledger.issue(
          { id: grant, endpoints, methods: extra.methods, limits: extra.limits },
          now,
          extra.lifetime ?? this.tokenLifetime,
        ),
      );
      const { serial, generation, grant: granted, expiry } = issued.claims;
      const entry = { serial, generation, grant: granted, issuedAt: now, expiry, label: extra.label };
      return { issued, durable: this.recorded(() => this.inventory.append(entry)) };
    });
    await durable;
    if (this.metrics) this.metrics.tokensIssued++;
    return { ...issued, id: tokenId(issued.claims.serial) };
  }

  /** The live tokens of the current password generation, in issue order, as auth.listTokens shows them. */
  async listTokens(password: Credential, context: CallContext): Promise<ListedToken[]> {
    const checked = await this.authenticate(password, context);
    return this.exclusive(checked, async () => {
      const others = await this.inventory.othersUsage?.();
      const now = this.now();
      return this.inventory
        .list()
        .map((e) =>
          listed(
            e,
            this.ledger.grantList(e.grant) ?? [],
            this.ledger.isRevoked(e.serial) || this.ended(e.serial, now),
            this.core,
            others?.get(e.serial),
            this.inventory.successor(e.serial)?.to,
            now,
          ),
        );
    });
  }

  /**
   * The hourly counts of the last `hours` hours to the current one, oldest first: of the
   * live token `id` names, or (undefined) of every token, with the refusals by reason; in
   * a fleet, the other gateways' published counts added (usage-history.ts).
   */
  async usageHistory(password: Credential, id: string | undefined, hours: number, context: CallContext): Promise<UsageHistoryAnswer> {
    const checked = await this.authenticate(password, context);
    return this.exclusive(checked, async () => {
      let serial: number | undefined;
      if (id !== undefined) {
        serial = parseTokenId(id);
        if (serial === undefined || this.inventory.get(serial) === undefined) {
          throw invalidParams(
            'id',
            'the id of a live token of this node, as auth.listTokens gives it ("t" and a number); ' +
              `${JSON.stringify(id.slice(0, 24))} names none (never issued, expired, or of an earlier password)`,
          );
        }
      }
      await this.history.sample();
      const others = (await this.inventory.othersHistory?.(serial)) ?? [];
      const { from, hours: shown } = this.history.query(serial, hours, others);
      return {
        bucketSeconds: HOUR_MS / 1000,
        from: hourStart(from),
        hours: shown.map((h) => ({ at: hourStart(h.hour), requests: h.requests, refusals: h.refusals ?? {} })),
      };
    });
  }

  /**
   * Revokes `token` if it is valid now; a token that is not (malformed, expired, revoked)
   * is left alone. Says whether this call revoked it, what the core found the token to be
   * (the outcome), and its claims when it was one of this node's tokens, live or revoked.
   */
  async revokeToken(
    password: Credential,
    token: string,
    context: CallContext,
  ): Promise<{ revoked: boolean; outcome: Outcome; claims?: Claims }> {
    const checked = await this.authenticate(password, context);
    return this.exclusive(checked, async () => {
      const { outcome, claims } = this.core.inspect(token, this.now());
      // Recorded before the core holds it: a write that fails leaves the token as it was.
      // A token the core finds revoked already needs nothing: every revocation it holds
      // was recorded first (and a serial outside the live range, which it refuses as
      // revoked, must not be recorded as issued).
      if (outcome !== Outcome.Valid || claims === undefined) return { revoked: false, outcome, claims };
      await this.recorded(() => this.ledger.revoke(claims.serial, claims.expiry));
      if (this.metrics) this.metrics.tokensRevoked++;
      return { revoked: true, outcome, claims };
    });
  }

  /**
   * Revokes the token whose id is `id` if it is live: listed by the inventory and not
   * revoked. An id that is malformed, or names no live token (never issued, expired, of
   * an earlier password), is left alone, as a dead token is.
   */
  async revokeById(password: Credential, id: string, context: CallContext): Promise<IdRevocation> {
    const checked = await this.authenticate(password, context);
    return this.exclusive(checked, async () => {
      const serial = parseTokenId(id);
      if (serial === undefined) return { revoked: false, reason: 'malformed id' };
      const entry = this.inventory.get(serial);
      if (entry === undefined) return { revoked: false, reason: 'unknown id' };
      if (this.ledger.isRevoked(serial) || this.ended(serial, this.now())) return { revoked: false, entry, already: true };
      // As for the token form: recorded before the core holds it.
      await this.recorded(() => this.ledger.revoke(serial, entry.expiry));
      if (this.metrics) this.metrics.tokensRevoked++;
      return { revoked: true, entry };
    });
  }

  /**
   * Replaces a live token (`target`: the token, or its id) by a new one of the same grant
   * (endpoints, methods, limits) and label, with a lifetime equal to the old one's whole
   * lifetime, cut to --max-token-lifetime. The old token stays valid for `params.overlap`
   * (0 when left out: it ends as the call answers; its range needs the token, so it is
   * checked here), at most its remaining life and the new token's, then ends as if
   * revoked (rotation-ends.ts). Its usage so far is
   * carried over to the new id. The new entry, which carries the end, is durable (and in
   * a fleet held by every gateway) before the answer.
   */
  async rotateToken(
    password: Credential,
    target: { token: string } | { id: string },
    params: Params,
    context: CallContext,
  ): Promise<{ token: string; claims: Claims; id: string; from: InventoryEntry }> {
    const checked = await this.authenticate(password, context);
    const { issued, durable, from } = await this.exclusive(checked, async () => {
      const now = this.now();
      const from = this.rotatable(target, now);
      const lifetime = Math.min(from.expiry - from.issuedAt, this.maxTokenLifetime);
      const remaining = Math.min(from.expiry - now, lifetime);
      const seconds = durationParam(params, 'overlap', 0, remaining, "the old token's remaining life, and the new one's lifetime") ?? 0;
      if (!this.inventory.hasRoom(this.maxTokens)) {
        throw new RpcError(
          RpcCode.ResourceLimit,
          `the node holds ${this.maxTokens} live tokens, its limit (--api-auth-max-tokens); ` +
            'wait for some to expire (revoked ones count until then), or raise the limit',
        );
      }
      const { endpoints, methods, limits } = splitGrantEntries(this.ledger.grantList(from.grant) ?? []);
      const others = await this.inventory.othersUsage?.();
      const usage = usageOf(from, this.core, others?.get(from.serial));
      const issued = await this.recorded(() => this.ledger.issue({ id: from.grant, endpoints, methods, limits }, now, lifetime));
      const { serial, generation, grant, expiry } = issued.claims;
      // The quota's count in this window carries over too, here and at the other gateways,
      // so that a rotation never hands out a fresh quota (docs/guides/limits.md, Quotas).
      const quota = this.core.quota(from.serial, from.grant, now * 1000);
      if (
        quota !== undefined &&
        quota.here + quota.others > 0 &&
        !this.core.setQuota(serial, expiry, quota.window, quota.here + quota.others, true)
      ) {
        this.log.warn("the core's limits table had no room to carry the quota count over to the rotated token", { serial });
      }
      const rotation = {
        from: from.serial,
        endsAt: now + seconds,
        fromExpiry: from.expiry,
        requests: usage.requests,
        lastUsedMs: usage.lastUsedMs,
      };
      const entry = { serial, generation, grant, issuedAt: now, expiry, label: from.label, rotation };
      return { issued, from, durable: this.recorded(() => this.inventory.append(entry)) };
    });
    await durable;
    if (this.metrics) this.metrics.tokensIssued++;
    return { ...issued, id: tokenId(issued.claims.serial), from };
  }

  /** The live entry a rotation replaces: listed, neither revoked nor rotated already. */
  private rotatable(target: { token: string } | { id: string }, now: number): InventoryEntry {
    let serial: number | undefined;
    if ('token' in target) {
      const { outcome, claims } = this.core.inspect(target.token, now);
      if (outcome !== Outcome.Valid || claims === undefined) {
        throw new RpcError(
          RpcCode.InvalidParams,
          `invalid params: token is not a live token of this node (${OUTCOME_NAMES[outcome]}); nothing was rotated`,
        );
      }
      serial = claims.serial;
    } else {
      serial = parseTokenId(target.id);
      if (serial === undefined) throw invalidParams('id', 'a token\'s id, "t" and a number, as auth.newToken and auth.listTokens give it');
    }
    const entry = this.inventory.get(serial);
    if (entry === undefined) {
      throw new RpcError(
        RpcCode.InvalidParams,
        `invalid params: ${tokenId(serial)} is not a live token of this node (never issued, expired, ` +
          'or of an earlier password); nothing was rotated',
      );
    }
    const next = this.inventory.successor(serial);
    if (next !== undefined) {
      throw new RpcError(
        RpcCode.InvalidParams,
        `invalid params: ${tokenId(serial)} was rotated already, to ${tokenId(next.to)}; rotate that one`,
      );
    }
    if (this.ledger.isRevoked(serial))
      throw new RpcError(RpcCode.InvalidParams, `invalid params: ${tokenId(serial)} is revoked; nothing was rotated`);
    return entry;
  }

  /** Replaces the password and starts a new generation: every earlier token stops working. Returns the new generation. */
  async changePassword(oldPassword: string, newPassword: string, context: CallContext): Promise<number> {
    const length = countCodePoints(newPassword);
    if (length === 0 || length > MAX_PASSWORD_LENGTH) {
      throw invalidParams('newPassword', `a string of 1 to ${MAX_PASSWORD_LENGTH} characters`);
    }
    const checked = await this.authenticate(oldPassword, context);
    if (newPassword === oldPassword) throw new RpcError(RpcCode.InvalidParams, 'newPassword must differ from the current password');
    const record = await this.hash(newPassword);
    return this.exclusive(checked, async () => {
      const generation = await this.recorded(() => this.ledger.changePassword(checked, record));
      this.log.info('password changed', { generation, client: context.address });
      return generation;
    });
  }

  /** The JSON-RPC methods of /ext/auth, each call audited. */
  /**
   * Runs a method and logs its audit line: info when it succeeded, warn when it was
   * refused. `call` adds what it learns (serial, generation) to the fields it is given.
   */
  async audited(method: string, context: CallContext, call: (audit: Fields) => Promise<unknown>): Promise<unknown> {
    const audit: Fields = {};
    try {
      const result = await call(audit);
      this.log.info('audit', { method, outcome: 'ok', client: context.address, ...audit });
      return result;
    } catch (error) {
      this.log.warn('audit', { method, outcome: auditOutcome(error), client: context.address, ...audit });
      throw error;
    }
  }

  /**
   * Checks a password against the current record, unless its client (or everyone) must
   * wait. The check counts against the client from its start, so concurrent checks
   * cannot overrun the allowance; a wrong password stays counted. Returns the record it
   * matched.
   */
  private async authenticate(password: Credential, context: CallContext): Promise<PasswordRecord> {
    if (typeof password !== 'string') {
      this.session(context);
      return this.password;
    }
    const check = this.throttle.begin(context.address, this.clock());
    if (typeof check === 'number') {
      if (this.metrics) this.metrics.passwordsThrottled++;
      throw throttledError(check);
    }
    // A fleet gateway also counts against the fleet's allowance (ledger.ts).
    let shared: number | SharedCheck;
    try {
      shared = await this.recorded(() => this.ledger.beginPasswordCheck(this.clock()));
    } catch (error) {
      check.abandoned();
      throw error;
    }
    if (typeof shared === 'number') {
      check.abandoned();
      if (this.metrics) this.metrics.passwordsThrottled++;
      throw throttledError(shared);
    }
    const record = this.password;
    let ok: boolean;
    try {
      ok = await this.verifier.verify(password, record);
    } catch (error) {
      check.abandoned();
      shared.abandoned();
      if (error instanceof BusyError) {
        if (this.metrics) this.metrics.passwordsBusy++;
        throw busy();
      }
      throw error;
    }
    if (!ok) {
      check.failed();
      if (this.metrics) this.metrics.passwordsRefused++;
      throw new RpcError(RpcCode.IncorrectPassword, 'incorrect password');
    }
    check.succeeded();
    shared.succeeded();
    if (this.metrics) this.metrics.passwordsAccepted++;
    return record;
  }

  /** The sessions open and the upstream's latency now (auth.nodeStatus), once the password or session is checked. */
  async nodeStatus(password: Credential, context: CallContext): Promise<NodeStatus> {
    await this.authenticate(password, context);
    return (await this.status?.()) ?? { websocketSessions: 0, upstream: { answers: 0, p50Ms: null, p99Ms: null } };
  }

  /**
   * A console session for the password (console-session.ts): the cookie's value (a token
   * of the reserved grant for SESSION_SECONDS, and the sign-in's token, which ends the
   * chain of its renewals), recorded like any token but never listed; the session's claims.
   */
  async signIn(password: string, context: CallContext): Promise<{ token: string; claims: Claims }> {
    const checked = await this.authenticate(password, context);
    return this.exclusive(checked, async () => {
      const now = this.now();
      const grant = this.findGrant(SESSION_ENDPOINTS, SIGN_IN_METHODS, undefined);
      const signIn = await this.recorded(() =>
        this.ledger.issue({ id: grant, endpoints: SESSION_ENDPOINTS, methods: SIGN_IN_METHODS }, now, this.sessionMaxLifetime),
      );
      const session = await this.issueSession(now, Math.min(SESSION_SECONDS, this.sessionMaxLifetime));
      return { token: joinSession(session.token, signIn.token), claims: session.claims };
    });
  }

  /**
   * A new session for the one the call presents, which ends (revoked) as the new one is
   * had; it ends no later than its sign-in's token, and once the session presented ends
   * there, it is renewed no more: the operator signs in again.
   */
  async renewSession(context: CallContext): Promise<{ token: string; claims: Claims; from: number }> {
    const old = this.session(context);
    const signIn = this.signInOf(old.signIn);
    if (signIn.expiry <= old.claims.expiry) {
      throw new RpcError(
        RpcCode.IncorrectPassword,
        `the console session cannot be renewed: it ends ${showDuration(this.sessionMaxLifetime)} after its sign-in, ` +
          'the longest a session runs (--console-session-max-lifetime); sign in again',
      );
    }
    return this.exclusive(this.password, async () => {
      const now = this.now();
      const issued = await this.issueSession(now, Math.min(SESSION_SECONDS, signIn.expiry - now));
      await this.recorded(() => this.ledger.revoke(old.claims.serial, old.claims.expiry));
      return { token: joinSession(issued.token, old.signIn), claims: issued.claims, from: old.claims.serial };
    });
  }

  /** Ends the session the call presents and its sign-in (revoked, fleet-wide); the session's serial. */
  async signOut(context: CallContext): Promise<number> {
    const old = this.session(context);
    const signIn = this.core.inspect(old.signIn, this.now());
    await this.exclusive(this.password, async () => {
      await this.recorded(() => this.ledger.revoke(old.claims.serial, old.claims.expiry));
      if (signIn.outcome === Outcome.Valid && signIn.claims !== undefined && this.isSignIn(signIn.claims)) {
        const { serial, expiry } = signIn.claims;
        await this.recorded(() => this.ledger.revoke(serial, expiry));
      }
    });
    return old.claims.serial;
  }

  private async issueSession(now: number, lifetime: number): Promise<{ token: string; claims: Claims }> {
    const grant = this.findGrant(SESSION_ENDPOINTS, SESSION_METHODS, undefined);
    return this.recorded(() => this.ledger.issue({ id: grant, endpoints: SESSION_ENDPOINTS, methods: SESSION_METHODS }, now, lifetime));
  }

  /**
   * The console session a call presents: its cookie a live token of the reserved grant
   * (not expired, revoked, or of an earlier password) and a sign-in's token, its CSRF
   * header the cookie's, its Origin, when it names one, the server's own. Anything else
   * is refused.
   */
  private session(context: CallContext): { claims: Claims; signIn: string } {
    const presented = context.session;
    if (presented === undefined || presented.token === '') {
      throw new RpcError(RpcCode.IncorrectPassword, 'no console session: give password, or sign in (auth.signIn) and send its cookie');
    }
    if (!presented.sameOrigin) throw foreignOrigin();
    if (!csrfMatches(presented.token, presented.csrf)) {
      throw new RpcError(RpcCode.IncorrectPassword, "the console session's CSRF header (X-Api-Auth-Csrf) is missing or wrong");
    }
    const parts = splitSession(presented.token);
    const { outcome, claims } =
      parts === undefined ? { outcome: Outcome.Malformed, claims: undefined } : this.core.inspect(parts.session, this.now());
    if (
      parts === undefined ||
      outcome !== Outcome.Valid ||
      claims === undefined ||
      claims.grant !== this.findGrant(SESSION_ENDPOINTS, SESSION_METHODS, undefined)
    ) {
      throw notLive();
    }
    return { claims, signIn: parts.signIn };
  }

  /** The claims of a live sign-in's token, or the session is not live. */
  private signInOf(token: string): Claims {
    const { outcome, claims } = this.core.inspect(token, this.now());
    if (outcome !== Outcome.Valid || claims === undefined || !this.isSignIn(claims)) throw notLive();
    return claims;
  }

  private isSignIn(claims: Claims): boolean {
    return claims.grant === this.findGrant(SESSION_ENDPOINTS, SIGN_IN_METHODS, undefined);
  }

  /** Whether `serial` was rotated and its overlap is over: it ends as if revoked. */
  private ended(serial: number, now: number): boolean {
    const next = this.inventory.successor(serial);
    return next !== undefined && next.endsAt <= now;
  }

  private get password(): PasswordRecord {
    return this.ledger.password;
  }

  /**
   * A call of the ledger or the inventory. A FleetError (etcd unreachable, this gateway
   * fenced) is the client's to see, with its reason; so is an IssueError (no token can
   * be made), as a resource limit.
   */
  private async recorded<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      if (error instanceof FleetError) throw new RpcError(error.rpcCode, error.message);
      if (error instanceof IssueError) throw new RpcError(ISSUE_ERRORS[error.code].rpcCode, error.message);
      throw error;
    }
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
      if (this.password !== checked) throw new RpcError(RpcCode.IncorrectPassword, 'incorrect password');
      return work();
    });
    this.tail = run.catch(() => undefined);
    return run;
  }

  /** The id the core gives (or would give) the grant; a bad list is the client's error. */
  private findGrant(endpoints: readonly string[], methods: readonly string[] | undefined, limits: readonly string[] | undefined): number {
    try {
      return this.core.findGrant(endpoints, methods, limits);
    } catch (error) {
      if (!(error instanceof GrantError)) throw error;
      throw new RpcError(GRANT_ERRORS[error.code].rpcCode, error.message);
    }
  }
}

function notLive(): RpcError {
  return new RpcError(
    RpcCode.IncorrectPassword,
    'the console session is not live (expired, signed out, ended by a password change, or not a session); sign in again',
  );
}

/** A password, or the console session the call presents (its context's): what a management method is authorised by. */
export type Credential = string | { readonly session: true };

/** What newToken takes beyond the original's params, checked. */
export interface NewTokenOptions {
  /** Seconds; the configured lifetime when left out. */
  readonly lifetime?: number;
  readonly label?: string;
  /** JSON-RPC method patterns the token is limited to; every method when left out. */
  readonly methods?: readonly string[];
  /** Its rate and client ranges as the grant's limit entries (limitEntries); none when left out. */
  readonly limits?: readonly string[];
}

/** What auth.usageHistory answers: hourly buckets, oldest first, one per hour (zeros included). */
export interface UsageHistoryAnswer {
  /** 3600. */
  readonly bucketSeconds: number;
  /** RFC 3339: the first bucket's start. */
  readonly from: string;
  /** `refusals` by reason (REFUSAL_REASONS, each listed) for the node; {} for one token. */
  readonly hours: readonly { readonly at: string; readonly requests: number; readonly refusals: Record<string, number> }[];
}

/** What a revocation by id did: revoked it, found it revoked already, or found no live token (with why). */
export interface IdRevocation {
  readonly revoked: boolean;
  readonly entry?: InventoryEntry;
  readonly already?: boolean;
  readonly reason?: string;
}

const AUDIT_OUTCOMES: Readonly<Record<number, string>> = {
  [RpcCode.IncorrectPassword]: 'incorrect password',
  [RpcCode.ResourceLimit]: 'resource limit',
  [RpcCode.Throttled]: 'throttled',
  [RpcCode.Busy]: 'busy',
  [RpcCode.InvalidParams]: 'invalid params',
};

/** The audit outcome of a failed call: a fixed word, never the error's text (it could quote a client's input). */
function auditOutcome(error: unknown): string {
  return error instanceof RpcError ? (AUDIT_OUTCOMES[error.rpcCode] ?? `error ${error.rpcCode}`) : 'internal error';
}

/** RpcCode.Throttled with the wait: the client failed too many password checks of late. */
function throttledError(retryAfter: number): RpcError {
  return new RpcError(RpcCode.Throttled, throttledMessage(retryAfter), retryAfter);
}

function busy(): RpcError {
  return new RpcError(RpcCode.Busy, 'too many password checks are waiting; retry in 1 s', 1);
}

export function foreignOrigin(): RpcError {
  return new RpcError(RpcCode.IncorrectPassword, "a console call must come from the console's own origin");
}
