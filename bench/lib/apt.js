// The tools the bench drives (wrk, HAProxy, nginx) are Debian packages: found on PATH, or
// installed with apt-get when missing.
import { execFileSync } from 'node:child_process';
import { log } from './common.js';

/** Commands the bench uses and the Debian package that has each. */
export const PACKAGES = { wrk: 'wrk', haproxy: 'haproxy', nginx: 'nginx-light' };

function has(command) {
  try {
    execFileSync('sh', ['-c', `command -v ${command}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

/**
 * Makes sure each command is on PATH: `apt-get install -y <packages>` for the missing
 * ones, after `apt-get update` if the first attempt fails (a fresh image has no lists).
 */
export function ensureCommands(commands) {
  const missing = commands.filter((c) => !has(c));
  if (missing.length === 0) return;
  const packages = missing.map((c) => {
    if (!PACKAGES[c]) throw new Error(`bench: no Debian package known for the command ${c}`);
    return PACKAGES[c];
  });
  log(`${missing.join(', ')} not found; installing ${packages.join(' ')} with apt-get`);
  const apt = (args) =>
    execFileSync('apt-get', args, {
      stdio: ['ignore', 'ignore', 'inherit'],
      env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
    });
  try {
    apt(['install', '-y', '--no-install-recommends', ...packages]);
  } catch {
    apt(['update']);
    apt(['install', '-y', '--no-install-recommends', ...packages]);
  }
  const still = commands.filter((c) => !has(c));
  if (still.length > 0) {
    throw new Error(`${still.join(', ')} still missing after apt-get install ${packages.join(' ')}; install them by hand (root is needed)`);
  }
}
