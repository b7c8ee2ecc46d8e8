// An HTTP thread for the crash tests: the real thread runtime (build/host/threads/
// http-thread.js: the app, the safety net, the heartbeat, the stop) around a handler
// that fails on demand. api-auth itself has no request that makes a thread fail, so the
// tests bring their own.
import { runHttpThread } from '../../build/host/threads/http-thread.js';

await runHttpThread(({ data, log }) => {
  let inFlight = 0;
  let idle = null;
  const leave = () => {
    if (--inFlight === 0 && idle !== null) idle();
  };
  return {
    handle(res, req) {
      switch (req.getUrl()) {
        case '/throw':
          throw new Error('thrown in a handler');
        case '/throw-later':
          res.onAborted(() => undefined);
          setTimeout(() => {
            throw new Error('thrown in a timer');
          }, 0);
          return;
        case '/reject-later':
          res.onAborted(() => undefined);
          void Promise.reject(new Error('a rejection nobody handled'));
          return;
        case '/exit':
          process.exit(3);
          return;
        case '/hang':
          for (;;);
        case '/slow': {
          // Answers after ?ms=...: a request in flight when the process stops.
          inFlight++;
          log.info('holding a request', { path: '/slow' });
          let open = true;
          res.onAborted(() => {
            open = false;
            leave();
          });
          setTimeout(
            () => {
              if (open) res.cork(() => res.end(`slow ${data.thread}`));
              if (open) leave();
              open = false;
            },
            Number(req.getQuery('ms') ?? '500'),
          );
          return;
        }
        case '/exec-argv':
          // The flags the thread was started with.
          res.end(JSON.stringify({ thread: data.thread, execArgv: process.execArgv }));
          return;
        default:
          res.end(`thread ${data.thread}`);
      }
    },
    drain: (graceMs) =>
      inFlight === 0
        ? Promise.resolve(0)
        : new Promise((resolve) => {
            const timer = setTimeout(() => resolve(inFlight), graceMs);
            idle = () => {
              clearTimeout(timer);
              resolve(0);
            };
          }),
    collect: async () => [],
    close: async () => undefined,
  };
});
