// The crash test: clients stream token issues, revocations and password changes
// while the server is killed with SIGKILL, round after round. After each restart every
// acknowledged effect must hold:
// - a token whose issue was acknowledged grants exactly its endpoints, unless revoked or
//   of an earlier password generation;
// - a token whose revocation was acknowledged never gets through again;
// - an acknowledged password change holds: the newest acknowledged password works (or
//   the one a change in flight at the kill set), and every password it replaced fails.
// A call in flight at the kill may have taken effect or not; the next restart tells which,
// and from then on that outcome must hold too.
//
// - every acknowledged token of the current password is listed by auth.listTokens under
//   the id its issue answered, with its label, revoked exactly when the gate says so
//   (the inventory's entry is on disk before newToken answers).
// Each round's kill follows an event, in turn: the answer to a revocation, to a password
// change, to an issue that made a new endpoint list durable (each is killed the moment
// its answer arrives, which is the promise "once a call returns success, its effect is on
// disk"); a change in the data folder (a state write under way); a random moment; the
// answer to any issue; the answer to a revocation by id.
// Calls are out at every kill, so each also leaves some unanswered. Every fourth start is
// killed too, before it listens. A server that answers before its write is on disk fails
// the first round aimed at that kind of call, however loaded the machine; a write that
// is not atomic is caught by a round whose kill lands while a write is under way, which
// is likely but not certain in any one round. CRASH_ROUNDS sets the number of rounds:
// one of each kind by default, within which both faults showed when put in on purpose
// (answering before the write: round 1; writing the state file in place: round 3 in one
// run, round 4 in another). More rounds give more chances at the moments one may miss.
import t from 'tap';
import { watch } from 'node:fs';
import { INCORRECT_PASSWORD, REASONS, authUrl, call, changePassword, refusalBody, tryPassword } from '../helpers/auth.js';
import { jsonrpc, type RpcResponse } from '../helpers/http.js';
import { randomPassword, launch, restartServer, sleep, startServer, type Exit, type LogLine, type Server } from '../helpers/server.js';

const SUCCESS = { success: true };
/** A live token's revocation: the token was live, so this call revoked it. */
const REVOKED = { success: true, revocation: 'revoked' };
/** What each round's kill follows, round after round. */
const TRIGGERS = [
  'revocation',
  'password change',
  'new endpoint list',
  'state write',
  'random moment',
  'new token',
  'revocation by id',
] as const;
type Trigger = (typeof TRIGGERS)[number];
const ROUNDS = Number(process.env.CRASH_ROUNDS ?? TRIGGERS.length);
/** The clients stream at least this long before a kill, so that other calls are out when it comes. */
const MIN_STREAM_MS = 100;
/** The latest random moment. */
const MAX_STREAM_MS = 800;
/**
 * Every event comes many times in this many acknowledged calls (the rarest, a revocation
 * by id, about once in six; each writes the state): a round whose event has not come by
 * then fails, a count that holds however slowly a loaded machine answers.
 */
const TRIGGER_WITHIN_ANSWERS = 200;
const TOKEN_CLIENTS = 2;
const REVOKE_CLIENTS = 3;

type Revoked = 'no' | 'maybe' | 'yes';

interface Token {
  readonly token: string;
  /** Its id and label, from the answer of the newToken that issued it (none for the tokens of password checks). */
  readonly id?: string;
  readonly label?: string;
  /** Index in `passwords` of the password it was issued under. */
  readonly epoch: number;
  /** A path it grants, and one it does not. */
  readonly granted: string;
  readonly other: string;
  /** 'yes' once a revocation was acknowledged or seen to hold; 'maybe' while one is unanswered. */
  revoked: Revoked;
  /** A revocation request is out right now. */
  revoking: boolean;
}

// The model of what the server must hold. Passwords are all distinct, so a password's
// index names its generation.
const passwords: string[] = [];
let current = 0;
/** A change to this index is out or was unanswered at the kill. */
let pendingChange: number | undefined;
const tokens: Token[] = [];
const replacedSinceCheck = new Set<number>();
let grantCounter = 0;

const counts = {
  tokenChecks: 0,
  revocationChecks: 0,
  passwordChecks: 0,
  ackTokens: 0,
  ackRevocations: 0,
  ackChanges: 0,
  unansweredSettled: 0,
  listedChecks: 0,
};

function random(n: number): number {
  return Math.floor(Math.random() * n);
}

function endpointsFor(): { endpoints: string[]; granted: string; other: string; fresh: boolean } {
  switch (random(3)) {
    case 0:
      return { endpoints: ['/ext/info'], granted: '/ext/info', other: '/ext/health', fresh: false };
    case 1:
      return { endpoints: ['/ext/health'], granted: '/ext/health', other: '/ext/info', fresh: false };
    default: {
      // A new endpoint list each time: every such issue also makes a grant durable.
      const n = grantCounter++;
      return { endpoints: [`/ext/bc/c${n}/*`], granted: `/ext/bc/c${n}/x`, other: '/ext/info', fresh: true };
    }
  }
}

/** The response reached the router: the built-in endpoints answer 200, other paths 404. */
function granted(status: number, path: string): boolean {
  return path.startsWith('/ext/bc/') ? status === 404 : status === 200;
}

function refusedFor(response: { status: number; text: string }, reasons: readonly string[]): boolean {
  return response.status === 401 && reasons.some((r) => response.text === refusalBody(r));
}

async function pool<T>(items: readonly T[], width: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < items.length) await work(items[next++]);
    }),
  );
}

/**
 * Finds the password in force after a restart and checks it against the model: the last
 * acknowledged one, or the one of a change unanswered at the kill; every replaced one fails.
 */
async function checkPasswords(server: Server, problems: string[]): Promise<void> {
  const acknowledged = passwords[current];
  const issued = await tryPassword(server.url, acknowledged);
  counts.passwordChecks++;
  if (issued !== undefined) {
    if (pendingChange !== undefined) {
      if ((await tryPassword(server.url, passwords[pendingChange])) !== undefined) {
        problems.push(`both the acknowledged password ${current} and the unanswered change's ${pendingChange} work`);
      }
      counts.passwordChecks++;
      await confirmCurrent(server, problems);
    }
    record(issued, current, '/ext/info', '/ext/health');
  } else if (pendingChange !== undefined && (await tryPassword(server.url, passwords[pendingChange])) !== undefined) {
    // The change that was unanswered at the kill took effect; it holds from now on.
    replacedSinceCheck.add(current);
    current = pendingChange;
    counts.unansweredSettled++;
  } else {
    problems.push(
      `the acknowledged password ${current} does not work` +
        (pendingChange === undefined ? '' : `, nor does the unanswered change's ${pendingChange}`),
    );
    return;
  }
  pendingChange = undefined;
  // Every password replaced by a change since the last check, and the file's, must fail.
  const replaced = new Set(replacedSinceCheck);
  if (current !== 0) replaced.add(0);
  for (const index of replaced) {
    if (index === current) continue;
    counts.passwordChecks++;
    const answer = await changePassword(server.url, passwords[index], `never-${randomPassword()}`);
    if (!sameJson(answer, INCORRECT_PASSWORD)) {
      problems.push(`replaced password ${index} (current ${current}) is not refused: ${JSON.stringify(answer)}`);
    }
    // The password in force between failures: it still works, and it keeps this client
    // clear of any throttling of repeated failures.
    await confirmCurrent(server, problems);
  }
  replacedSinceCheck.clear();
}

/** The password in force works: a token comes back, and joins the model. */
async function confirmCurrent(server: Server, problems: string[]): Promise<void> {
  const token = await tryPassword(server.url, passwords[current]);
  if (token === undefined) problems.push(`the current password ${current} stopped working`);
  else record(token, current, '/ext/info', '/ext/health');
}

/** Checks every token against the model, and settles revocations that were unanswered. */
async function checkTokens(server: Server, problems: string[]): Promise<void> {
  await pool(tokens, 8, async (token) => {
    const response = await call(server.url, token.granted, token.token);
    const label = `token #${tokens.indexOf(token)} (password ${token.epoch}, current ${current}, revoked ${token.revoked})`;
    counts.tokenChecks++;
    if (token.revoked === 'yes') counts.revocationChecks++;
    if (token.epoch !== current) {
      // Of an earlier generation: never through; a revoked one may name either rule.
      const reasons = token.revoked === 'no' ? [REASONS.earlierGeneration] : [REASONS.earlierGeneration, REASONS.revoked];
      if (!refusedFor(response, reasons))
        problems.push(`${label}: expected a refusal for ${reasons.join(' | ')}, got ${response.status} ${response.text}`);
      return;
    }
    if (token.revoked === 'maybe') {
      if (refusedFor(response, [REASONS.revoked])) token.revoked = 'yes';
      else if (granted(response.status, token.granted)) token.revoked = 'no';
      else problems.push(`${label}: expected granted or revoked, got ${response.status} ${response.text}`);
      counts.unansweredSettled++;
      return;
    }
    if (token.revoked === 'yes') {
      if (!refusedFor(response, [REASONS.revoked]))
        problems.push(`${label}: expected "was revoked", got ${response.status} ${response.text}`);
      return;
    }
    if (!granted(response.status, token.granted)) {
      problems.push(`${label}: expected ${token.granted} granted, got ${response.status} ${response.text}`);
      return;
    }
    const elsewhere = await call(server.url, token.other, token.token);
    if (!refusedFor(elsewhere, [REASONS.notGranted])) {
      problems.push(`${label}: expected ${token.other} not granted, got ${elsewhere.status} ${elsewhere.text}`);
    }
  });
}

/**
 * The inventory after a restart, once checkTokens has settled the revocations: every
 * acknowledged token of the current password is listed under its id, with its label,
 * revoked exactly when the gate refuses it as revoked; none of an earlier password is.
 * An entry the model lacks is an issue unanswered at the kill (or a password check's).
 */
async function checkInventory(server: Server, problems: string[]): Promise<void> {
  const answer = await jsonrpc(authUrl(server.url), 'auth.listTokens', { password: passwords[current] });
  const listed = (answer.result as { tokens?: { id: string; label: string | null; revoked: boolean }[] } | undefined)?.tokens;
  if (!Array.isArray(listed)) {
    problems.push(`listTokens failed: ${JSON.stringify(answer)}`);
    return;
  }
  const byId = new Map(listed.map((e) => [e.id, e]));
  for (const token of tokens) {
    if (token.id === undefined) continue;
    const entry = byId.get(token.id);
    const label = `token #${tokens.indexOf(token)} ${token.id} (password ${token.epoch}, current ${current}, revoked ${token.revoked})`;
    if (token.epoch !== current) {
      if (entry !== undefined) problems.push(`${label}: of an earlier password, yet listed`);
      continue;
    }
    counts.listedChecks++;
    if (entry === undefined) problems.push(`${label}: acknowledged, not listed`);
    else if (entry.label !== (token.label ?? null))
      problems.push(`${label}: listed with label ${JSON.stringify(entry.label)}, issued with ${JSON.stringify(token.label)}`);
    else if (entry.revoked !== (token.revoked === 'yes')) problems.push(`${label}: listed revoked ${entry.revoked}`);
  }
}

function record(token: string, epoch: number, grantedPath: string, other: string, id?: string, label?: string): void {
  tokens.push({ token, epoch, granted: grantedPath, other, revoked: 'no', revoking: false, id, label });
  counts.ackTokens++;
  wake();
}

let sleepers: (() => void)[] = [];

/** Resolves when a token joins the model, or the round ends. */
function nextToken(): Promise<void> {
  return new Promise((done) => sleepers.push(done));
}

function wake(): void {
  const woken = sleepers;
  sleepers = [];
  for (const done of woken) done();
}

// Password changes take turns with the other calls on the client side: a change waits
// for the calls out to be answered and holds new ones back until it is. So every call
// names the password in force and any refusal is a fault, and an unanswered change at
// the kill is the only uncertainty about the password.
let changing: Promise<void> | undefined;
let outstanding = 0;
let drained: (() => void) | undefined;

/** Waits until no password change is out. */
async function turn(): Promise<void> {
  while (changing !== undefined) await changing;
}

/**
 * Sends `call` at once (the caller has had its turn, and nothing awaited since): its
 * JSON-RPC answer, or undefined when the connection broke first (the kill).
 */
async function send(call: () => Promise<RpcResponse>): Promise<RpcResponse | undefined> {
  outstanding++;
  try {
    return await call();
  } catch (error) {
    if (/expected HTTP 200|not JSON/.test((error as Error).message)) throw error;
    return undefined;
  } finally {
    outstanding--;
    if (outstanding === 0) drained?.();
  }
}

/**
 * Streams calls at `server` until `stopped()`; a call whose connection breaks ends its
 * client. `acknowledged` hears of each success as soon as the model holds it.
 */
async function stream(server: Server, stopped: () => boolean, problems: string[], acknowledged: (kind: Trigger) => void): Promise<void> {
  const auth = authUrl(server.url);
  const passwordClient = async (): Promise<void> => {
    while (!stopped()) {
      // A random spacing, so that changes fall at random among the other calls: a count of
      // tokens issued, not a time, so that how often the password changes, against the
      // calls a change makes moot (revoking a token of an earlier password), is the same
      // however slowly a loaded machine answers.
      for (let issued = 2 + random(4); issued > 0 && !stopped(); issued--) await nextToken();
      if (stopped()) return;
      let release!: () => void;
      changing = new Promise((done) => {
        release = done;
      });
      try {
        if (outstanding > 0)
          await new Promise<void>((done) => {
            drained = done;
          });
        drained = undefined;
        if (stopped()) return;
        const next = passwords.push(`p${passwords.length}-${randomPassword()}`) - 1;
        pendingChange = next;
        let answer: RpcResponse | undefined;
        try {
          outstanding++;
          answer = await jsonrpc(auth, 'auth.changePassword', { oldPassword: passwords[current], newPassword: passwords[next] });
        } catch {
          return; // unanswered: the next restart tells
        } finally {
          outstanding--;
        }
        if (!sameJson(answer.result, SUCCESS)) {
          problems.push(`changePassword ${current} -> ${next} failed: ${JSON.stringify(answer)}`);
          pendingChange = undefined;
          return;
        }
        replacedSinceCheck.add(current);
        current = next;
        pendingChange = undefined;
        counts.ackChanges++;
        acknowledged('password change');
      } finally {
        changing = undefined;
        release();
      }
    }
  };
  const tokenClient = async (): Promise<void> => {
    while (!stopped()) {
      const { endpoints, granted: grantedPath, other, fresh } = endpointsFor();
      await turn();
      const epoch = current;
      const label = random(2) === 0 ? undefined : `client label ${random(1000)} \u{1F511}`;
      const answer = await send(() => jsonrpc(auth, 'auth.newToken', { password: passwords[epoch], endpoints, label }));
      if (answer === undefined) return;
      if (typeof answer.result?.token === 'string' && typeof answer.result?.id === 'string') {
        record(answer.result.token, epoch, grantedPath, other, answer.result.id, label);
        acknowledged('new token');
        if (fresh) acknowledged('new endpoint list');
      } else {
        problems.push(`newToken with password ${epoch} failed: ${JSON.stringify(answer)}`);
      }
    }
  };
  const revokeClient = async (): Promise<void> => {
    while (!stopped()) {
      await turn();
      const candidates = tokens.filter((c) => c.epoch === current && c.revoked === 'no' && !c.revoking);
      if (candidates.length === 0) {
        if (!stopped()) await nextToken();
        continue;
      }
      const token = candidates[random(candidates.length)];
      token.revoking = true;
      token.revoked = 'maybe';
      // Half of them by id, where the model knows it.
      const byId = token.id !== undefined && random(2) === 0;
      const answer = await send(() =>
        jsonrpc(
          auth,
          'auth.revokeToken',
          byId ? { password: passwords[token.epoch], id: token.id } : { password: passwords[token.epoch], token: token.token },
        ),
      );
      token.revoking = false;
      if (answer === undefined) return; // unanswered: stays 'maybe' until a restart tells
      if (sameJson(answer.result, REVOKED)) {
        token.revoked = 'yes';
        counts.ackRevocations++;
        acknowledged(byId ? 'revocation by id' : 'revocation');
      } else {
        problems.push(`revokeToken with password ${token.epoch} (current ${current}) failed: ${JSON.stringify(answer)}`);
        token.revoked = 'no'; // a refused call changes nothing
      }
    }
  };
  await Promise.all([
    passwordClient(),
    ...Array.from({ length: TOKEN_CLIENTS }, tokenClient),
    ...Array.from({ length: REVOKE_CLIENTS }, revokeClient),
  ]);
}

function sameJson(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

const errorLines = (logs: readonly LogLine[]): LogLine[] => logs.filter((l) => l.level === 'error');

t.test(
  `${ROUNDS} rounds of SIGKILL right after an answer, during a state write or at a random moment: every acknowledged effect survives`,
  async (t) => {
    // Every password after the first is a change's, whose record the server makes at its
    // production cost; the first one's is cheap, and so is each start's check of the file.
    // The default thread count, as deployed: an answer then comes from an HTTP thread once the
    // owner's write is done, which is the path whose "on disk at the answer" this checks.
    let server = await startServer(t, { cheapChecks: true });
    passwords.push(server.password);
    for (let round = 1; round <= ROUNDS; round++) {
      const problems: string[] = [];
      const trigger = TRIGGERS[(round - 1) % TRIGGERS.length];
      const running = server;
      const began = Date.now();
      let stopped = false;
      let killed!: () => void;
      const exit = new Promise<Exit>((done) => {
        // Synchronous: the kill is sent before anything else runs, the answer's effect included.
        killed = () => {
          if (stopped) return;
          stopped = true;
          done(running.stop('SIGKILL'));
          wake();
        };
      });
      let answers = 0;
      const clients = stream(
        running,
        () => stopped,
        problems,
        (kind) => {
          if (kind === trigger && Date.now() - began >= MIN_STREAM_MS) killed();
          else if (++answers === TRIGGER_WITHIN_ANSWERS && trigger !== 'random moment') {
            problems.push(`no ${trigger} came within ${TRIGGER_WITHIN_ANSWERS} acknowledged calls`);
            killed();
          }
        },
      );
      // The folder's watcher hears of the temporary file and the rename as they happen.
      const writes =
        trigger === 'state write'
          ? watch(running.dataDir, () => {
              if (Date.now() - began >= MIN_STREAM_MS) killed();
            })
          : undefined;
      const timer = trigger === 'random moment' ? setTimeout(killed, MIN_STREAM_MS + random(MAX_STREAM_MS - MIN_STREAM_MS)) : undefined;
      const { signal } = await exit;
      clearTimeout(timer);
      writes?.close();
      await clients;
      if (signal !== 'SIGKILL') problems.push(`the server was not killed: ${JSON.stringify(signal)}`);
      problems.push(...errorLines(running.logs).map((l) => `error log: ${JSON.stringify(l)}`));
      const unanswered = pendingChange === undefined ? '' : `, a password change unanswered`;

      if (round % 4 === 0) {
        // A kill while the server starts (reading and perhaps writing its state) must not
        // damage the state either; a random moment lands anywhere in the start.
        const early = launch(t, server.args);
        await sleep(random(400));
        const earlyExit = await early.stop('SIGKILL');
        if (earlyExit.code !== null)
          problems.push(`the start killed early exited by itself: ${JSON.stringify(earlyExit)} ${early.stderr()}`);
      }
      try {
        server = await restartServer(t, server);
        await checkPasswords(server, problems);
        await checkTokens(server, problems);
        await checkInventory(server, problems);
      } catch (error) {
        problems.push(`the restart failed: ${(error as Error).message}`);
      }
      const when =
        trigger === 'random moment'
          ? 'at a random moment'
          : trigger === 'state write'
            ? 'during a state write'
            : `right after the answer to a ${trigger}`;
      t.same(
        problems,
        [],
        `round ${round}: killed ${when}` +
          `${unanswered}${round % 4 === 0 ? ', and once more while starting' : ''}; after the restart: ${tokens.length} tokens, password ${current}`,
      );
      // From here the model no longer tells what the server should hold.
      if (problems.length > 0) return;
    }

    // A clean stop loses nothing either.
    const problems: string[] = [];
    const stopExit = await server.stop('SIGTERM');
    t.same(stopExit, { code: 0, signal: null }, 'the last server stops cleanly');
    problems.push(...errorLines(server.logs).map((l) => `error log: ${JSON.stringify(l)}`));
    server = await restartServer(t, server);
    await checkPasswords(server, problems);
    await checkTokens(server, problems);
    await checkInventory(server, problems);
    t.same(problems, [], 'after a clean stop and start');

    const checked = counts.tokenChecks + counts.passwordChecks;
    t.comment(
      `acknowledged effects: ${counts.ackTokens} token issues, ${counts.ackRevocations} revocations, ` +
        `${counts.ackChanges} password changes; checked ${checked} times after ${ROUNDS} restarts ` +
        `(${counts.tokenChecks} token checks, of which ${counts.revocationChecks} of acknowledged revocations; ` +
        `${counts.passwordChecks} password checks; ${counts.listedChecks} inventory entries checked); ` +
        `${counts.unansweredSettled} unanswered calls settled by a restart`,
    );
    t.ok(counts.ackRevocations > 0, 'some revocations were acknowledged');
    t.ok(counts.ackChanges > 0, 'some password changes were acknowledged');
    t.ok(counts.revocationChecks > 0, 'acknowledged revocations were checked after a crash');
    t.ok(checked > 0, 'acknowledged effects were checked');
    t.ok(counts.listedChecks > 0, 'inventory entries were checked after a crash');
  },
);
