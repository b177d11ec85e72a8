// Build the optional splice(2) addon (native/splice.c → build/Release/ksp_splice.node) with node-gyp.
// Run by `npm ci`/`npm install` (the package's install script) and `npm run build:native`. It never
// fails the install: without a compiler, node-gyp or Node's headers the proxy uses its JavaScript
// splice (proxy/splice-native.ts), and this prints why.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = dirname(dirname(fileURLToPath(import.meta.url)));
const skip = (why) => {
  console.log(`kube-stream-proxy: native splice addon not built (${why}); the passthrough uses its JavaScript copy loop`);
  process.exit(0);
};
if (process.platform !== 'linux') skip('not Linux');
// node-gyp: the one npm passes to install scripts, else npm's bundled copy next to this node.
const candidates = [
  process.env.npm_config_node_gyp,
  join(dirname(process.execPath), '..', 'lib', 'node_modules', 'npm', 'node_modules', 'node-gyp', 'bin', 'node-gyp.js'),
].filter(Boolean);
const gyp = candidates.find((p) => existsSync(p));
if (!gyp) skip('node-gyp not found');
const args = [gyp, 'rebuild', '--loglevel=error'];
// Offline machines: use the headers installed beside node (Debian/NodeSource: /usr/include/node).
const nodedir = join(dirname(process.execPath), '..');
if (existsSync(join(nodedir, 'include', 'node', 'node_api.h'))) args.push(`--nodedir=${nodedir}`);
const r = spawnSync(process.execPath, args, { cwd: root, stdio: ['ignore', 'inherit', 'inherit'], timeout: 300_000 });
if (r.status !== 0) skip(`node-gyp exited ${r.status ?? r.signal}`);
console.log('kube-stream-proxy: native addons built (build/Release/ksp_splice.node: the splice(2) relay; ksp_cast.node: session recording output encoding)');
