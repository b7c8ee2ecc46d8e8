// The token service behind POST /ext/auth: new token, list tokens, revoke token (by the
// token or by its id), change password.
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
import { GrantError, IssueError, MAX_ENDPOINTS, MAX_METHODS, Outcome, OUTCOME_NAMES } from '../core/abi.js';
import { METHOD_RULES, splitGrantEntries } from '../core/grants.js';
import type { Claims } from '../core/abi.js';
import { BusyError, FleetError, GRANT_ERRORS, ISSUE_ERRORS, RpcCode, RpcError, throttledMessage } from '../errors.js';
import { invalidParams, knownParams, stringParam, WithCookie } from '../rpc/jsonrpc.js';
import type { CallContext, Method, MethodTable, Params } from '../rpc/jsonrpc.js';
import { csrfFor, csrfMatches, reservedEndpoint, SESSION_ENDPOINTS, SESSION_METHODS, SESSION_SECONDS } from './console-session.js';
import type { Fields, Logger } from '../ops/log.js';
import type { Metrics } from '../ops/metrics.js';
import { countCodePoints, isWellFormed, MAX_PASSWORD_LENGTH } from '../password/file.js';
import type { PasswordRecord, PasswordVerifier } from '../password/hash.js';
import { MAX_USAGE_REQUESTS } from './ledger.js';
import type { Inventory, InventoryEntry, Ledger, SharedCheck, Usage } from './ledger.js';
import {
  durationParam,
  labelParam,
  lifetimeParam,
  limitEntries,
  parseTokenId,
  quotaResetsAt,
  rfc3339,
  shownLimits,
  tokenId,
} from './token-params.js';
import type { ListedQuota } from './token-params.js';
import { parseDuration } from '../duration.js';
import { PasswordThrottle } from './throttle.js';
import { HISTORY_HOURS, HOUR_MS, hourStart, UsageHistory } from './usage-history.js';
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
}

export class TokenService {
  private readonly core: Core;
  private readonly ledger: Ledger;
  private readonly verifier: PasswordVerifier;
  private readonly tokenLifetime: number;
  private readonly maxTokenLifetime: number;
  private readonly inventory: Inventory;
  private readonly maxTokens: number;
  private readonly log: Logger;
  private readonly clock: Clock;
  /** Unix seconds. */
  private readonly now: () => number;
  private readonly metrics: Metrics | undefined;
  private readonly throttle: PasswordThrottle;
  private readonly history: UsageHistory;
  private readonly status: (() => Promise<NodeStatus>) | undefined;
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
  methods(): MethodTable {
    return new Map<string, Method>([
      [
        'auth.newToken',
        (p, c) =>
          this.audited('auth.newToken', c, async (audit) => {
            knownParams(p, 'auth.newToken', [
              'password',
              'endpoints',
              'methods',
              'expiresIn',
              'label',
              'rateLimit',
              'burst',
              'quota',
              'allowedClients',
            ]);
            const password = credential(p, c);
            if (typeof password !== 'string') audit.by = 'session';
            const endpoints = endpointsParam(p);
            const extra = {
              label: labelParam(p),
              lifetime: lifetimeParam(p, this.maxTokenLifetime),
              methods: methodsParam(p),
              limits: limitEntries(p),
            };
            const { token, claims, id } = await this.newToken(password, endpoints, extra, c);
            audit.serial = claims.serial;
            audit.generation = claims.generation;
            audit.grant = claims.grant;
            audit.expiry = claims.expiry;
            // The original's clients read `token` alone; `id` names it in listTokens and revokeToken.
            return { token, id };
          }),
      ],
      [
        'auth.listTokens',
        (p, c) =>
          this.audited('auth.listTokens', c, async (audit) => {
            knownParams(p, 'auth.listTokens', ['password']);
            const password = credential(p, c);
            if (typeof password !== 'string') audit.by = 'session';
            const tokens = await this.listTokens(password, c);
            audit.count = tokens.length;
            return { tokens };
          }),
      ],
      [
        'auth.usageHistory',
        (p, c) =>
          this.audited('auth.usageHistory', c, async (audit) => {
            knownParams(p, 'auth.usageHistory', ['password', 'id', 'hours']);
            const password = credential(p, c);
            if (typeof password !== 'string') audit.by = 'session';
            const id = p.id === undefined ? undefined : stringParam(p, 'id');
            const hours = p.hours === undefined ? HISTORY_HOURS : p.hours;
            if (typeof hours !== 'number' || !Number.isSafeInteger(hours) || hours < 1 || hours > HISTORY_HOURS) {
              throw invalidParams(
                'hours',
                `a whole number of hours from 1 to ${HISTORY_HOURS} (the default): how many hours to the current one to show`,
              );
            }
            const parsed = id === undefined ? undefined : parseTokenId(id);
            if (parsed !== undefined) audit.serial = parsed;
            audit.hours = hours;
            return this.usageHistory(password, id, hours, c);
          }),
      ],
      [
        'auth.nodeStatus',
        (p, c) =>
          this.audited('auth.nodeStatus', c, async (audit) => {
            knownParams(p, 'auth.nodeStatus', ['password']);
            const password = credential(p, c);
            if (typeof password !== 'string') audit.by = 'session';
            await this.authenticate(password, c);
            return (await this.status?.()) ?? { websocketSessions: 0, upstream: { answers: 0, p50Ms: null, p99Ms: null } };
          }),
      ],
      [
        'auth.revokeToken',
        (p, c) =>
          this.audited('auth.revokeToken', c, async (audit) => {
            knownParams(p, 'auth.revokeToken', ['password', 'token', 'id']);
            const password = credential(p, c);
            if (typeof password !== 'string') audit.by = 'session';
            if (p.token !== undefined && p.id !== undefined) {
              throw new RpcError(RpcCode.InvalidParams, 'invalid params: give token or id, not both');
            }
            if (p.token === undefined && p.id !== undefined) {
              const { revoked, entry, already, reason } = await this.revokeById(password, stringParam(p, 'id'), c);
              audit.revoked = revoked;
              if (entry !== undefined) {
                audit.serial = entry.serial;
                audit.generation = entry.generation;
              }
              if (revoked) return { success: true, revocation: 'revoked' };
              if (already) return { success: true, revocation: 'already revoked' };
              return { success: true, revocation: 'not a live token', reason };
            }
            if (typeof p.token !== 'string') throw invalidParams('token', "a string (or give id, the token's id, in its place)");
            const { revoked, outcome, claims } = await this.revokeToken(password, p.token, c);
            audit.revoked = revoked;
            if (claims !== undefined) {
              audit.serial = claims.serial;
              audit.generation = claims.generation;
            }
            // `success` is the original's, which its clients read; `revocation` says what
            // happened, so that a mistyped or dead token is not taken for a revoked one.
            if (revoked) return { success: true, revocation: 'revoked' };
            if (outcome === Outcome.Revoked) return { success: true, revocation: 'already revoked' };
            return { success: true, revocation: 'not a live token', reason: OUTCOME_NAMES[outcome] };
          }),
      ],
      [
        'auth.rotateToken',
        (p, c) =>
          this.audited('auth.rotateToken', c, async (audit) => {
            knownParams(p, 'auth.rotateToken', ['password', 'token', 'id', 'overlap']);
            const password = credential(p, c);
            if (typeof password !== 'string') audit.by = 'session';
            if ((p.token === undefined) === (p.id === undefined)) {
              throw new RpcError(RpcCode.InvalidParams, "invalid params: give token or id (the token's id), one of them");
            }
            const target = p.token !== undefined ? { token: stringParam(p, 'token') } : { id: stringParam(p, 'id') };
            // Its form now, so that a bad one costs no password check; its range needs the token.
            const overlap = p.overlap;
            const seconds =
              typeof overlap === 'number'
                ? overlap
                : typeof overlap === 'string'
                  ? parseDuration(overlap)
                  : overlap === undefined
                    ? 0
                    : null;
            if (seconds === null || !Number.isSafeInteger(seconds) || seconds < 0) throw invalidParams('overlap', OVERLAP_RULE);
            const { token, claims, id, from } = await this.rotateToken(password, target, p, c);
            audit.serial = claims.serial;
            audit.generation = claims.generation;
            audit.grant = claims.grant;
            audit.expiry = claims.expiry;
            audit.rotatedFrom = from.serial;
            return { token, id };
          }),
      ],
      [
        'auth.changePassword',
        (p, c) =>
          this.audited('auth.changePassword', c, async (audit) => {
            knownParams(p, 'auth.changePassword', ['oldPassword', 'newPassword']);
            audit.generation = await this.changePassword(passwordParam(p, 'oldPassword'), passwordParam(p, 'newPassword'), c);
            return { success: true };
          }),
      ],
      [
        'auth.signIn',
        (p, c) =>
          this.audited('auth.signIn', c, async (audit) => {
            knownParams(p, 'auth.signIn', ['password']);
            if (c.session !== undefined && !c.session.sameOrigin) throw foreignOrigin();
            const { token, claims } = await this.signIn(passwordParam(p, 'password'), c);
            audit.serial = claims.serial;
            audit.generation = claims.generation;
            return new WithCookie(sessionAnswer(token, claims), { value: token, maxAge: claims.expiry - this.now() });
          }),
      ],
      [
        'auth.renewSession',
        (p, c) =>
          this.audited('auth.renewSession', c, async (audit) => {
            knownParams(p, 'auth.renewSession', []);
            const { token, claims, from } = await this.renewSession(c);
            audit.serial = claims.serial;
            audit.generation = claims.generation;
            audit.renewedFrom = from;
            return new WithCookie(sessionAnswer(token, claims), { value: token, maxAge: claims.expiry - this.now() });
          }),
      ],
      [
        'auth.signOut',
        (p, c) =>
          this.audited('auth.signOut', c, async (audit) => {
            knownParams(p, 'auth.signOut', []);
            audit.serial = await this.signOut(c);
            return new WithCookie({ success: true }, { value: '', maxAge: 0 });
          }),
      ],
    ]);
  }

  /**
   * Runs a method and logs its audit line: info when it succeeded, warn when it was
   * refused. `call` adds what it learns (serial, generation) to the fields it is given.
   */
  private async audited(method: string, context: CallContext, call: (audit: Fields) => Promise<unknown>): Promise<unknown> {
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

  /**
   * A console session for the password (console-session.ts): a token of the reserved
   * grant, recorded like any token but never listed, for SESSION_SECONDS.
   */
  async signIn(password: string, context: CallContext): Promise<{ token: string; claims: Claims }> {
    const checked = await this.authenticate(password, context);
    return this.exclusive(checked, () => this.issueSession());
  }

  /** A new session for the one the call presents, which ends (revoked) as the new one is had. */
  async renewSession(context: CallContext): Promise<{ token: string; claims: Claims; from: number }> {
    const old = this.session(context);
    return this.exclusive(this.password, async () => {
      const issued = await this.issueSession();
      await this.recorded(() => this.ledger.revoke(old.serial, old.expiry));
      return { ...issued, from: old.serial };
    });
  }

  /** Ends the session the call presents (revoked, fleet-wide); its serial. */
  async signOut(context: CallContext): Promise<number> {
    const old = this.session(context);
    await this.exclusive(this.password, () => this.recorded(() => this.ledger.revoke(old.serial, old.expiry)));
    return old.serial;
  }

  private async issueSession(): Promise<{ token: string; claims: Claims }> {
    const grant = this.findGrant(SESSION_ENDPOINTS, SESSION_METHODS, undefined);
    return this.recorded(() =>
      this.ledger.issue({ id: grant, endpoints: SESSION_ENDPOINTS, methods: SESSION_METHODS }, this.now(), SESSION_SECONDS),
    );
  }

  /**
   * The claims of the console session a call presents: its cookie a live token of the
   * reserved grant (not expired, revoked, or of an earlier password), its CSRF header the
   * session's, its Origin, when it names one, the server's own. Anything else is refused.
   */
  private session(context: CallContext): Claims {
    const presented = context.session;
    if (presented === undefined || presented.token === '') {
      throw new RpcError(RpcCode.IncorrectPassword, 'no console session: give password, or sign in (auth.signIn) and send its cookie');
    }
    if (!presented.sameOrigin) throw foreignOrigin();
    if (!csrfMatches(presented.token, presented.csrf)) {
      throw new RpcError(RpcCode.IncorrectPassword, "the console session's CSRF header (X-Api-Auth-Csrf) is missing or wrong");
    }
    const { outcome, claims } = this.core.inspect(presented.token, this.now());
    if (
      outcome !== Outcome.Valid ||
      claims === undefined ||
      claims.grant !== this.findGrant(SESSION_ENDPOINTS, SESSION_METHODS, undefined)
    ) {
      throw new RpcError(
        RpcCode.IncorrectPassword,
        'the console session is not live (expired, signed out, ended by a password change, ' + 'or not a session); sign in again',
      );
    }
    return claims;
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

/** A password, or the console session the call presents (its context's): what a management method is authorised by. */
export type Credential = string | { readonly session: true };

/**
 * A management method's credential: its `password` param when it has one, else the
 * console session its context carries (checked when the method authenticates).
 */
function credential(params: Params, context: CallContext): Credential {
  if (params.password === undefined && context.session !== undefined && context.session.token !== '') return { session: true };
  return passwordParam(params, 'password');
}

/** What auth.signIn and auth.renewSession answer: the session's CSRF value and its end; the session itself is in the cookie alone. */
function sessionAnswer(token: string, claims: Claims): { csrf: string; expiresAt: string } {
  return { csrf: csrfFor(token), expiresAt: rfc3339(claims.expiry) };
}

function foreignOrigin(): RpcError {
  return new RpcError(RpcCode.IncorrectPassword, "a console call must come from the console's own origin");
}

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

/** One token as auth.listTokens shows it: never the token itself. */
export interface ListedToken {
  readonly id: string;
  /** null when the token was issued without one. */
  readonly label: string | null;
  readonly endpoints: string[];
  /** The JSON-RPC method patterns it is limited to; null for every method. */
  readonly methods: string[] | null;
  /** "N/s", "N/m" or "N/h"; null without a rate. */
  readonly rateLimit: string | null;
  /** The bucket's size; null without a rate. */
  readonly burst: number | null;
  /** The calls it may make per calendar day or month (UTC), those counted in the current one, and when it resets; null without a quota. */
  readonly quota: ListedQuota | null;
  /** The addresses and ranges it works from, in canonical form and order; null from anywhere. */
  readonly allowedClients: string[] | null;
  /** The last call the gate let through, RFC 3339 (UTC, whole seconds); null when none was counted. */
  readonly lastUsedAt: string | null;
  /** Calls the gate let through since issue (docs/guides/limits.md, Usage, says what may be lost). */
  readonly requests: number;
  /** RFC 3339, UTC, whole seconds. */
  readonly issuedAt: string;
  readonly expiresAt: string;
  /** Revoked, or rotated and past its overlap. */
  readonly revoked: boolean;
  /** The id of the token this one replaced by a rotation; null when it was issued by auth.newToken. */
  readonly rotatedFrom: string | null;
  /** The id of the token that replaced this one by a rotation; null when none did. */
  readonly rotatedTo: string | null;
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

/**
 * An entry as listTokens shows it, its grant's stored entries split into endpoints,
 * methods and limits, with the usage the core counted for it, and in a fleet what the
 * other gateways counted (`others`): the calls summed, the latest last use.
 */
function listed(
  e: InventoryEntry,
  entries: readonly string[],
  revoked: boolean,
  core: Core,
  others: Usage | undefined,
  rotatedTo: number | undefined,
  now: number,
): ListedToken {
  const { endpoints, methods, limits } = splitGrantEntries(entries);
  const usage = usageOf(e, core, others);
  const shown = shownLimits(limits);
  let quota: ListedQuota | null = null;
  if (shown.quota !== null) {
    const counted = core.quota(e.serial, e.grant, now * 1000);
    quota = {
      ...shown.quota,
      used: counted === undefined ? 0 : counted.here + counted.others,
      resetsAt: rfc3339(quotaResetsAt(shown.quota.per, now)),
    };
  }
  return {
    id: tokenId(e.serial),
    label: e.label ?? null,
    endpoints,
    methods: methods ?? null,
    ...shown,
    quota,
    lastUsedAt: usage.lastUsedMs === 0 && usage.requests === 0 ? null : rfc3339(Math.floor(usage.lastUsedMs / 1000)),
    requests: usage.requests,
    issuedAt: rfc3339(e.issuedAt),
    expiresAt: rfc3339(e.expiry),
    revoked,
    rotatedFrom: e.rotation === undefined ? null : tokenId(e.rotation.from),
    rotatedTo: rotatedTo === undefined ? null : tokenId(rotatedTo),
  };
}

/**
 * A token's usage: what the core counted for it, what the other gateways of a fleet
 * counted (`others`), and for a rotation's new token what the old one had counted when
 * it was rotated. The calls summed (capped as the usage entries are), the latest last use.
 */
function usageOf(e: InventoryEntry, core: Core, others: Usage | undefined): Usage {
  let requests = 0;
  let lastUsedMs = 0;
  const carried = e.rotation === undefined ? undefined : { requests: e.rotation.requests, lastUsedMs: e.rotation.lastUsedMs };
  for (const u of [core.usage(e.serial), others, carried]) {
    if (u === undefined) continue;
    requests += u.requests;
    lastUsedMs = Math.max(lastUsedMs, u.lastUsedMs);
  }
  return { requests: Math.min(requests, MAX_USAGE_REQUESTS), lastUsedMs };
}

const OVERLAP_RULE =
  'a duration such as "90s", "15m" or "1h", or a whole number of seconds, from 0s to the old token\'s remaining life: ' +
  'how long the old token stays valid beside the new one';

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

/**
 * A password param: a string of valid Unicode. A lone surrogate has no UTF-8 form: the
 * hash would see U+FFFD in its place, so "pw-\ud800", "pw-\udbff" and "pw-\ufffd" would
 * all be one password. Refused here, before any hashing and before the throttle counts
 * a guess.
 */
function passwordParam(params: Params, name: string): string {
  const value = stringParam(params, name);
  if (!isWellFormed(value)) throw invalidParams(name, 'valid Unicode text, without lone surrogates (\\ud800 to \\udfff outside a pair)');
  return value;
}

function endpointsParam(params: Params): string[] {
  const value = params.endpoints;
  if (!Array.isArray(value) || !value.every((e) => typeof e === 'string')) {
    throw invalidParams('endpoints', `an array of 1 to ${MAX_ENDPOINTS} strings`);
  }
  const reserved = value.findIndex(reservedEndpoint);
  if (reserved >= 0) {
    throw invalidParams(
      `endpoints[${reserved}]`,
      "not the console's (/ext/auth/console and below): no token grants it; " +
        'an operator signs in to it with the password (auth.signIn)',
    );
  }
  return value;
}

/**
 * The optional `methods` param: 1 to MAX_METHODS patterns, each a string; the core
 * judges each pattern (its messages name `methods[i]`).
 */
function methodsParam(params: Params): string[] | undefined {
  const value = params.methods;
  if (value === undefined) return undefined;
  if (!Array.isArray(value) || value.length === 0 || value.length > MAX_METHODS) {
    throw invalidParams(
      'methods',
      `an array of 1 to ${MAX_METHODS} JSON-RPC method patterns; leave it out for a token that allows every method`,
    );
  }
  const bad = value.findIndex((m) => typeof m !== 'string');
  if (bad >= 0) throw invalidParams(`methods[${bad}]`, `a string: ${METHOD_RULES}`);
  return value as string[];
}
