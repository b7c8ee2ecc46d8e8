// Preloaded (node --require) into a program a test starts: on SIGUSR2, and at its exit,
// it writes the CommonJS modules the program has loaded so far (those an ES module
// imported too), as one JSON line on stdout beside the program's own.
'use strict';
const report = () => {
  process.stdout.write(JSON.stringify({ msg: 'loaded modules', modules: Object.keys(require.cache) }) + '\n');
};
process.on('SIGUSR2', report);
process.on('exit', report);
