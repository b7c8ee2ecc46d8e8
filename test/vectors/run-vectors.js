// @ts-check
// Runs the shared core vectors (core-vectors.json) through the portable `Core` of
// build/host/core/core.js. Plain ESM with no runtime built-ins: Node, Deno, Bun and browsers
// all run this same file against the same build/core.wasm. The format is described in
// assembly/README.md ("Conformance vectors").
import { Core } from '../../build/host/core/core.js';
import { Outcome, admitRecord, checkRecord } from '../../build/host/core/abi.js';
import { splitGrantEntries } from '../../build/host/core/grants.js';

/** GrantError codes of host/core/core.ts by the core's grantAdd result. */
const GRANT_ERRORS = {
  [-1]: 'empty',
  [-2]: 'too-many-entries',
  [-3]: 'table-full',
  [-4]: 'bad-entry',
  [-5]: 'entry-too-long',
  [-6]: 'bad-method',
  [-7]: 'method-too-long',
  [-8]: 'too-many-methods',
  [-9]: 'no-methods',
  [-10]: 'bad-limit',
  [-11]: 'too-many-clients',
};
/** IssueError codes of host/core/core.ts by the core's issue result. */
const ISSUE_ERRORS = { [-1]: 'unknown-grant', [-2]: 'window-full', [-3]: 'bad-time', [-4]: 'no-key' };

/**
 * @param {WebAssembly.Module | BufferSource} wasm build/core.wasm, compiled or as bytes
 * @param {{ cases: any[] }} vectors the parsed core-vectors.json
 * @returns {Promise<{ total: number, passed: number, failed: number, failures: { name: string, problems: string[] }[] }>}
 */
export async function runVectors(wasm, vectors) {
  const module = wasm instanceof WebAssembly.Module ? wasm : await WebAssembly.compile(wasm);
  /** @type {{ name: string, problems: string[] }[]} */
  const failures = [];
  for (const vector of vectors.cases) {
    /** @type {string[]} */
    const problems = [];
    try {
      runCase(module, vector, problems);
    } catch (error) {
      problems.push(`threw ${error instanceof Error ? `${error.name}: ${error.message}` : String(error)}`);
    }
    if (problems.length > 0) failures.push({ name: vector.name, problems });
  }
  const total = vectors.cases.length;
  return { total, passed: total - failures.length, failed: failures.length, failures };
}

/**
 * A random source for `new Core(module, { random })` that hands out `draws`, one per
 * call, each exactly the size asked for: the way to a fixed password.
 * @param {Uint8Array[]} draws
 * @returns {((into: Uint8Array) => void) & { unused(): number }}
 */
export function fixedEntropy(draws) {
  let next = 0;
  /** @param {Uint8Array} into */
  const random = (into) => {
    const draw = draws[next++];
    if (draw === undefined || draw.length !== into.length) {
      throw new Error(`entropy draw ${next} of ${into.length} bytes is not in the vector`);
    }
    into.set(draw);
  };
  return Object.assign(random, { unused: () => draws.length - next });
}

/** @param {string} hex */
export function fromHex(hex) {
  const bytes = new Uint8Array(hex.length / 2);
  for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return bytes;
}

/** @param {Uint8Array} bytes */
export function toHex(bytes) {
  let hex = '';
  for (const b of bytes) hex += b.toString(16).padStart(2, '0');
  return hex;
}

/**
 * @param {WebAssembly.Module} module
 * @param {any} vector
 * @param {string[]} problems
 */
function runCase(module, vector, problems) {
  /** @param {boolean} ok @param {string} what */
  const expect = (ok, what) => {
    if (!ok) problems.push(what);
  };
  const random = vector.kind === 'password' ? fixedEntropy(vector.entropy.map(fromHex)) : undefined;
  const core = new Core(module, { windowLog2: vector.windowLog2 ?? 12, random });
  // What each check and admit found besides its answer.
  const checked = checkRecord();
  const admitted = admitRecord();
  switch (vector.kind) {
    case 'sha256': {
      const digest = toHex(core.sha256(fromHex(vector.message)));
      expect(digest === vector.digest, `sha256 gave ${digest}`);
      return;
    }
    case 'hmacSha256': {
      const tag = toHex(core.hmacSha256(fromHex(vector.key), fromHex(vector.message)));
      expect(tag === vector.tag, `hmacSha256 gave ${tag}`);
      return;
    }
    case 'password': {
      const password = core.generatePassword(vector.length);
      expect(random?.unused() === 0, `${random?.unused()} entropy draws were left unused`);
      expect(password === vector.password, `generatePassword gave ${password}`);
      return;
    }
    case 'tokens':
      break;
    default:
      throw new Error(`unknown case kind ${vector.kind}`);
  }

  if (vector.key !== null) core.setKey(fromHex(vector.key));
  core.generation = vector.generation;
  /** A grant's entries: its endpoints, then, for a method scope, "" and its patterns. @param {string[]} entries */
  const addGrant = (entries) => {
    const { endpoints, methods, limits } = splitGrantEntries(entries);
    return core.addGrant(endpoints, methods, limits);
  };
  vector.grants.forEach((/** @type {string[]} */ entries, /** @type {number} */ id) => {
    const got = addGrant(entries);
    expect(got === id, `grant ${JSON.stringify(entries)} got id ${got}, not ${id}`);
  });

  vector.setup.forEach((/** @type {any} */ step, /** @type {number} */ i) => {
    const at = `setup ${i} (${step.op})`;
    switch (step.op) {
      case 'addGrant': {
        if (step.refused === undefined) {
          const got = addGrant(step.entries);
          expect(got === step.id, `${at}: id ${got}, not ${step.id}`);
          break;
        }
        try {
          addGrant(step.entries);
          problems.push(`${at}: accepted, not refused with ${step.refused}`);
        } catch (error) {
          const e = /** @type {any} */ (error);
          expect(
            e.name === 'GrantError' && e.code === GRANT_ERRORS[step.refused] && e.entry === step.entry,
            `${at}: ${e.name} ${e.code} at entry ${e.entry}, not ${GRANT_ERRORS[step.refused]} at ${step.entry}`,
          );
        }
        break;
      }
      case 'issue': {
        if (step.refused !== undefined) {
          try {
            core.issue(step.grant, step.now, step.lifetime);
            problems.push(`${at}: issued, not refused with ${step.refused}`);
          } catch (error) {
            const e = /** @type {Error & { code?: string }} */ (error);
            expect(
              e.name === 'IssueError' && e.code === ISSUE_ERRORS[step.refused],
              `${at}: threw ${e.name} ${e.code}, not IssueError ${ISSUE_ERRORS[step.refused]}`,
            );
          }
          break;
        }
        const { token, claims } = core.issue(step.grant, step.now, step.lifetime);
        expect(token === step.token, `${at}: token ${token}, not ${step.token}`);
        expect(sameClaims(claims, step.claims), `${at}: claims ${JSON.stringify(claims)}, not ${JSON.stringify(step.claims)}`);
        break;
      }
      case 'revoke': {
        const { outcome, claims } = core.revoke(step.token, step.now);
        expect(outcome === step.code, `${at}: ${Outcome[outcome]}, not ${step.outcome}`);
        expect(sameClaims(claims, step.claims), `${at}: claims ${JSON.stringify(claims)}, not ${JSON.stringify(step.claims)}`);
        break;
      }
      case 'bumpGeneration': {
        const generation = core.bumpGeneration();
        expect(generation === step.generation, `${at}: generation ${generation}, not ${step.generation}`);
        break;
      }
      case 'restoreSerials': {
        let result = 0;
        try {
          core.restoreSerials(step.floor, step.next, step.expiryBound);
        } catch {
          result = -1;
        }
        expect(result === step.result, `${at}: ${result}, not ${step.result}`);
        break;
      }
      case 'revokeSerial': {
        const result = core.revokeSerial(step.serial);
        expect(result === step.result, `${at}: ${result}, not ${step.result}`);
        break;
      }
      case 'sweep':
        core.sweep(step.now);
        break;
      case 'setKey':
        core.setKey(fromHex(step.key));
        break;
      case 'authorize': {
        const outcome = core.authorize(step.header, step.path, step.now);
        expect(outcome === step.code, `${at}: ${Outcome[outcome]}, not ${step.outcome}`);
        break;
      }
      case 'setLimitShare':
        core.setLimitShare(step.members);
        break;
      case 'admit': {
        const result = core.admit(step.serial, step.expiry, step.grant, step.n, fromHex(step.client), step.nowMs, admitted);
        expect(result === step.result, `${at}: ${result}, not ${step.result}`);
        if (result === 2 || result === 4) {
          const wait = Math.round(admitted.waitMs * 1e6);
          expect(wait === step.wait, `${at}: waits ${wait} ns, not ${step.wait}`);
        }
        break;
      }
      default:
        throw new Error(`${at}: unknown step`);
    }
  });

  vector.checks.forEach((/** @type {any} */ check, /** @type {number} */ i) => {
    if (check.call === 'usage') {
      const usage = core.usage(check.serial);
      const same = check.found ? usage?.requests === check.requests && usage?.lastUsedMs === check.lastMs : usage === undefined;
      expect(same, `check ${i} (usage ${check.serial}): ${JSON.stringify(usage)}, not ${JSON.stringify(check)}`);
      return;
    }
    if (check.call === 'methodAllowed') {
      let result;
      try {
        result = core.methodAllowed(check.grant, check.method) ? 1 : 0;
      } catch (error) {
        if (!(error instanceof RangeError)) throw error;
        result = -1;
      }
      expect(result === check.result, `check ${i} (methodAllowed ${check.grant}): ${result}, not ${check.result}`);
      return;
    }
    expect(Outcome[check.outcome] === check.code, `check ${i}: the file names ${check.outcome} with code ${check.code}`);
    const outcome =
      check.call === 'authorize'
        ? core.authorize(check.header, check.path, check.now, checked)
        : core.verify(check.token, check.path, check.now, checked);
    expect(outcome === check.code, `check ${i} (${check.call}): ${Outcome[outcome]}, not ${check.outcome}`);
    if (outcome === Outcome.Scoped || outcome === Outcome.Limited) {
      expect(
        checked.grant === check.grant,
        `check ${i} (${check.call}): ${Outcome[outcome]} with grant ${checked.grant}, not ${check.grant}`,
      );
    }
    if (outcome === Outcome.Limited) {
      expect(checked.serial === check.serial, `check ${i} (${check.call}): Limited with serial ${checked.serial}, not ${check.serial}`);
      expect(checked.expiry === check.expiry, `check ${i} (${check.call}): Limited with expiry ${checked.expiry}, not ${check.expiry}`);
    }
  });
}

/** @param {any} got @param {any} expected */
function sameClaims(got, expected) {
  if (got === undefined || expected === undefined) return got === expected;
  return (
    got.serial === expected.serial &&
    got.expiry === expected.expiry &&
    got.generation === expected.generation &&
    got.grant === expected.grant
  );
}
