// The hashing thread runs api-auth's own module only. A node that embeds the library may
// start with loaders and preloads (a TypeScript loader, an APM agent's --import); they
// have nothing to do with hashing, and a thread that inherited them would start them
// all again, which under a TypeScript loader costs a second of CPU per start.
import t from 'tap';
import { execFile } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { PROGRAM_ENV, ROOT, randomPassword, tempDir, untracked } from '../helpers/server.js';

t.test("the hashing thread starts without the embedding process's preloads", async (t) => {
  const dir = tempDir(t);
  const seen = join(dir, 'threads');
  const preload = join(dir, 'preload.mjs');
  writeFileSync(
    preload,
    `import { appendFileSync } from 'node:fs';
import { isMainThread } from 'node:worker_threads';
appendFileSync(${JSON.stringify(seen)}, isMainThread ? 'main\\n' : 'worker\\n');
`,
  );
  const passwordFile = join(dir, 'password');
  writeFileSync(passwordFile, randomPassword(), { mode: 0o600 });
  mkdirSync(join(dir, 'data'), { mode: 0o700 });
  // createAuth checks the password file's password on the hashing thread before it resolves.
  const embedder = join(dir, 'embedder.mjs');
  writeFileSync(
    embedder,
    `import { createAuth, createLogger } from ${JSON.stringify(pathToFileURL(join(ROOT, 'build', 'host', 'index.js')).href)};
const auth = await createAuth({ passwordFile: ${JSON.stringify(passwordFile)}, dataDir: ${JSON.stringify(join(dir, 'data'))}, log: createLogger(() => undefined) });
await auth.close();
process.stdout.write('opened\\n');
`,
  );
  const embed = (flags: string[], nodeOptions?: string): Promise<{ code: number; stdout: string; stderr: string }> =>
    new Promise((done) => {
      execFile(
        ...untracked(process.execPath, [...flags, embedder], nodeOptions),
        { env: PROGRAM_ENV, timeout: 30_000 },
        (error, stdout, stderr) => done({ code: error ? Number(error.code) : 0, stdout, stderr }),
      );
    });
  const run = await embed([`--import=${pathToFileURL(preload).href}`]);
  t.equal(run.code, 0, `it exits 0 ${run.stderr}`);
  t.equal(run.stdout, 'opened\n', 'the service opened, which hashed on its thread');
  t.equal(readFileSync(seen, 'utf8'), 'main\n', 'the preload ran on the main thread only');

  // A preload in NODE_OPTIONS too, beside flags of V8's that a thread does not take.
  const required = join(dir, 'preload.cjs');
  writeFileSync(
    required,
    `require('node:fs').appendFileSync(${JSON.stringify(seen)},
  require('node:worker_threads').isMainThread ? 'env main\\n' : 'env worker\\n');
`,
  );
  const again = await embed(['--stack-trace-limit=50'], `--require=${required}`);
  t.equal(again.code, 0, `it exits 0 ${again.stderr}`);
  t.equal(again.stdout, 'opened\n', 'the service opened, which hashed on its thread');
  t.equal(readFileSync(seen, 'utf8'), 'main\nenv main\n', 'the preload of NODE_OPTIONS ran on the main thread only');
});
