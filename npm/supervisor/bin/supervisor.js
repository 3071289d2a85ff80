#!/usr/bin/env node
// The npm package's launcher: runs the supervisor binary of this platform's
// package (an optional dependency npm installed beside this one) with this
// process's arguments, stdio and signals, and exits as it does. Hosts never
// start servers through it: `supervisor install` writes the binary's own
// path (copied out of npx's cache first) into their configs.
'use strict';
const { spawn } = require('child_process');

const os = { linux: 'linux', darwin: 'darwin', win32: 'win32' }[process.platform];
const cpu = { x64: 'x64', arm64: 'arm64' }[process.arch];
const pkg = `@seed-86a41135/supervisor-${os}-${cpu}`;
const file = process.platform === 'win32' ? 'supervisor.exe' : 'supervisor';

let exe;
try {
  if (!os || !cpu) throw new Error('unsupported');
  exe = require.resolve(`${pkg}/bin/${file}`);
} catch (e) {
  process.stderr.write(
    `supervisor: no binary for ${process.platform}/${process.arch}: the package ${pkg} is not installed.\n` +
      'hint: binaries exist for linux, darwin and win32 on x64 and arm64; reinstall without --omit=optional ' +
      '(npm i -g @seed-86a41135/supervisor), or download a release archive\n');
  process.exit(125);
}

const child = spawn(exe, process.argv.slice(2), { stdio: 'inherit', windowsHide: true });
const forward = ['SIGINT', 'SIGTERM', 'SIGHUP'];
for (const sig of forward) process.on(sig, () => child.kill(sig));
child.on('error', (err) => {
  process.stderr.write(`supervisor: cannot run ${exe}: ${err.message}\n`);
  process.exit(125);
});
child.on('exit', (code, signal) => {
  if (signal) {
    // End the way the binary ended: by the same signal.
    for (const sig of forward) process.removeAllListeners(sig);
    process.kill(process.pid, signal);
    return;
  }
  process.exit(code === null ? 125 : code);
});
