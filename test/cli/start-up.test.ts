// What a start loads: the fleet's code (etcd3, and gRPC under it, about as much CPU to
// load as the rest of api-auth) only for a gateway of a fleet, never for a start on a
// data folder.
import t from 'tap';
import { join } from 'node:path';
import { ROOT, startServer } from '../helpers/server.js';

const PROBE = join(ROOT, 'test', 'helpers', 'loaded-modules.cjs');

t.test('a start on a data folder loads no fleet code: neither etcd3 nor gRPC', async (t) => {
  const server = await startServer(t, { cheapChecks: true, node: { nodeFlags: ['--require', PROBE] } });
  server.child.kill('SIGUSR2');
  const modules = (await server.waitForLog((l) => l.msg === 'loaded modules')).modules as string[];
  const packages = new Set(modules.map((path) => /[\\/]node_modules[\\/]((@[^\\/]+[\\/])?[^\\/]+)/.exec(path)?.[1]).filter((name) => name !== undefined));
  t.ok(packages.has('prom-client'), `the probe sees the packages the start loaded (${[...packages].join(', ')})`);
  t.notOk(packages.has('etcd3'), 'not etcd3');
  t.notOk([...packages].some((name) => name!.startsWith('@grpc')), 'nor gRPC');
});
