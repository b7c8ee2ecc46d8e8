// What a start loads: the fleet's code (etcd3, and gRPC under it, about as much CPU to
// load as the rest of api-auth) only for a gateway of a fleet, and the server's (uWS, the
// core, the HTTP stack) only to serve, not for help, the version or a refused command line.
import t from 'tap';
import { join } from 'node:path';
import { launch, MAIN, ROOT, startServer, type Running } from '../helpers/server.js';

const PROBE = join(ROOT, 'test', 'helpers', 'loaded-modules.cjs');
const PROBED = { nodeFlags: ['--require', PROBE] };

/** The npm packages of the modules in the probe's first report. */
async function packagesOf(run: Running): Promise<Set<string>> {
  const modules = (await run.waitForLog((l) => l.msg === 'loaded modules')).modules as string[];
  return new Set(
    modules.map((path) => /[\\/]node_modules[\\/]((@[^\\/]+[\\/])?[^\\/]+)/.exec(path)?.[1]).filter((name) => name !== undefined),
  );
}

t.test('a start on a data folder loads no fleet code: neither etcd3 nor gRPC', async (t) => {
  const server = await startServer(t, { cheapChecks: true, node: PROBED });
  server.child.kill('SIGUSR2');
  const packages = await packagesOf(server);
  t.ok(packages.has('prom-client'), `the probe sees the packages the start loaded (${[...packages].join(', ')})`);
  t.notOk(packages.has('etcd3'), 'not etcd3');
  t.notOk(
    [...packages].some((name) => name.startsWith('@grpc')),
    'nor gRPC',
  );
});

t.test("the version, help and a refused command line load none of the server's packages", async (t) => {
  for (const args of [['--version'], ['--help'], ['--http-port', 'many']]) {
    const run = launch(t, args, MAIN, PROBED);
    const exit = await run.waitForExit();
    t.equal(exit.code, args[0] === '--http-port' ? 2 : 0, `${args.join(' ')}: its exit code`);
    const packages = await packagesOf(run);
    t.same(
      [...packages].filter((name) => ['uWebSockets.js', 'prom-client', 'etcd3'].includes(name)),
      [],
      `${args.join(' ')}: no uWS, prom-client or etcd3`,
    );
  }
});
