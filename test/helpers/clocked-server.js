// `node clocked-server.js <startMs> <stepMs> <args...>`: the library's server, started
// with the command line <args...> on a clock of its own that starts at <startMs> and moves
// <stepMs> forward on each SIGUSR2 (logging `clock moved`). A test drives such a server's
// time, yet can still kill -9 it, as it cannot a server of its own process.
import { createLogger, parseArgs, startServer } from '../../build/host/index.js';

const [start, step, ...args] = process.argv.slice(2);
let now = Number(start);
const clock = () => now;
const log = createLogger(undefined, 'info', clock);
const command = parseArgs(args);
if (command.action !== 'serve') throw new Error(`${JSON.stringify(args)} is not a command line that serves`);
const server = await startServer({ ...command.options, httpThreads: 1 }, { log, clock });
process.on('SIGUSR2', () => {
  now += Number(step);
  log.info('clock moved', { now });
});
process.on('SIGTERM', () => void server.stop().then(() => process.exit(0)));
