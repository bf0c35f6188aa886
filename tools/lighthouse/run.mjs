// make lighthouse: every page of the site through Lighthouse (desktop
// preset, no throttling, performance only), one at a time, against a
// server this script starts in CPU mode on a free port. It prints one row
// per page and exits 1 when a page scores under MIN_SCORE or blocks its
// main thread for MAX_TBT_MS or more (issue 30's goal).
//
//   node tools/lighthouse/run.mjs SERVER_BINARY [PATH...]
//
// The pages are found, not listed: the home page, the course map and the
// lab's index are read, and every page of this site they link to (lessons,
// exercises, the tools) joins the list; a path's query counts once (/step
// and one /step?…). Paths on the command line (or LIGHTHOUSE_PAGES, space
// separated) replace the list. LIGHTHOUSE_RUNS=k runs each page k times and
// keeps the median by score. Reports land in tools/lighthouse/reports/.
//
// LIGHTHOUSE_SITE=DIR measures the static site (make site) instead: DIR is
// served as a plain static host serves it (a file, or a folder's
// index.html; no compression), and its pages are found the same way.
import { spawn, execFile } from 'node:child_process';
import { createServer } from 'node:net';
import { createServer as createHTTPServer } from 'node:http';
import { mkdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, extname, join, normalize, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const MIN_SCORE = 90;
const MAX_TBT_MS = 200;

const here = dirname(fileURLToPath(import.meta.url));
const lighthouseBin = join(here, 'node_modules', '.bin', 'lighthouse');
const reports = join(here, 'reports');
const chrome = process.env.CHROME_PATH || '/usr/bin/chromium';
const runs = Math.max(1, Number(process.env.LIGHTHOUSE_RUNS) || 1);

const site = process.env.LIGHTHOUSE_SITE || '';
const [serverBin, ...asked] = process.argv.slice(2);
if (!serverBin && !site) {
  console.error('usage: run.mjs SERVER_BINARY [PATH...]');
  process.exit(2);
}

function freePort() {
  return new Promise((resolve, reject) => {
    const l = createServer();
    l.on('error', reject);
    l.listen(0, '127.0.0.1', () => {
      const { port } = l.address();
      l.close(() => resolve(port));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitHealthy(base, server) {
  for (let k = 0; k < 200; k++) {
    if (server.exitCode !== null) throw new Error(`the server exited (${server.exitCode})`);
    try {
      const res = await fetch(`${base}/healthz`);
      if (res.ok) return;
    } catch { /* not listening yet */ }
    await sleep(100);
  }
  throw new Error('the server did not answer /healthz within 20 s');
}

// A page of this site worth measuring: HTML a reader opens, not an API,
// a static file, a room (which needs a presenter) or a worklog.
const skipped = /^\/(static|api|ws|r|join|docs|debug|healthz)(\/|$)|\.(js|json|svg|png)$/;

async function findPages(base) {
  const seeds = ['/', '/lessons', '/lab'];
  const seen = new Map(); // pathname, and a '?' if it has a query -> path
  for (const s of seeds) seen.set(s, s);
  for (const s of seeds) {
    const html = await (await fetch(base + s)).text();
    for (const m of html.matchAll(/<a\b[^>]*\bhref="([^"#]+)/g)) {
      const href = m[1].replaceAll('&amp;', '&');
      if (!href.startsWith('/') || href.startsWith('//')) continue;
      const u = new URL(href, base);
      if (skipped.test(u.pathname)) continue;
      const key = u.pathname + (u.search ? '?' : '');
      if (!seen.has(key)) seen.set(key, u.pathname + u.search);
    }
  }
  return [...seen.values()];
}

function lighthouse(url, out) {
  const args = [
    url,
    '--preset=desktop',
    '--throttling-method=provided',
    '--only-categories=performance',
    '--chrome-flags=--headless=new --no-sandbox',
    '--output=json',
    `--output-path=${out}`,
    '--quiet',
  ];
  return new Promise((resolve, reject) => {
    execFile(lighthouseBin, args, { env: { ...process.env, CHROME_PATH: chrome }, maxBuffer: 1 << 26 }, (err, _stdout, stderr) => {
      if (err) return reject(new Error(`lighthouse ${url}: ${err.message}\n${stderr}`));
      resolve(JSON.parse(readFileSync(out, 'utf8')));
    });
  });
}

function figures(lhr) {
  const a = lhr.audits;
  return {
    score: Math.round((lhr.categories.performance.score ?? 0) * 100),
    tbt: a['total-blocking-time']?.numericValue ?? NaN,
    lcp: a['largest-contentful-paint']?.numericValue ?? NaN,
    cls: a['cumulative-layout-shift']?.numericValue ?? NaN,
    bytes: a['total-byte-weight']?.numericValue ?? NaN,
    error: lhr.runtimeError?.message,
  };
}

const fileName = (path) => (path.replace(/^\//, '').replace(/[^a-zA-Z0-9]+/g, '_') || 'home').slice(0, 80);

const types = { '.html': 'text/html; charset=utf-8', '.js': 'text/javascript', '.mjs': 'text/javascript', '.css': 'text/css',
  '.json': 'application/json', '.wasm': 'application/wasm', '.svg': 'image/svg+xml', '.png': 'image/png', '.woff2': 'font/woff2',
  '.woff': 'font/woff', '.ttf': 'font/ttf' };

// serveSite serves folder dir as a static host does: the file a path
// names, or the index.html of the folder it names; 404 otherwise.
function serveSite(dir, port) {
  const root = resolve(dir);
  const srv = createHTTPServer((req, res) => {
    let p = normalize(decodeURIComponent(new URL(req.url, 'http://x').pathname));
    let file = join(root, p);
    try {
      if (!file.startsWith(root)) throw new Error('outside');
      if (statSync(file).isDirectory()) file = join(file, 'index.html');
      const body = readFileSync(file);
      res.writeHead(200, { 'Content-Type': types[extname(file)] || 'application/octet-stream' });
      res.end(body);
    } catch {
      res.writeHead(404, { 'Content-Type': 'text/plain' });
      res.end('not found');
    }
  });
  return new Promise((ok) => srv.listen(port, '127.0.0.1', () => ok(srv)));
}

async function main() {
  mkdirSync(reports, { recursive: true });
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  let stop;
  if (site) {
    const srv = await serveSite(site, port);
    stop = () => srv.close();
    process.on('exit', stop);
  } else {
    const server = spawn(serverBin, ['-addr', `127.0.0.1:${port}`, '-worker', 'none'], { stdio: ['ignore', 'ignore', 'inherit'] });
    stop = () => { if (server.exitCode === null) server.kill('SIGTERM'); };
    process.on('exit', stop);
    process.on('SIGINT', () => process.exit(130));
    await waitHealthy(base, server);
  }

  const fromEnv = (process.env.LIGHTHOUSE_PAGES || '').split(/\s+/).filter(Boolean);
  const pages = asked.length ? asked : fromEnv.length ? fromEnv : await findPages(base);
  console.log(`Lighthouse ${JSON.parse(readFileSync(join(here, 'node_modules/lighthouse/package.json'), 'utf8')).version}, desktop preset, throttling off (provided), ${pages.length} pages, ${runs} run(s) each, ${base} (${site ? `the static site in ${site}` : 'CPU mode'})`);

  const rows = [];
  for (const path of pages) {
    const tries = [];
    for (let k = 0; k < runs; k++) {
      const out = join(reports, `${fileName(path)}${runs > 1 ? `.${k + 1}` : ''}.json`);
      try {
        tries.push(figures(await lighthouse(base + path, out)));
      } catch (e) {
        tries.push({ score: 0, tbt: NaN, lcp: NaN, cls: NaN, bytes: NaN, error: e.message.split('\n')[0] });
      }
    }
    tries.sort((a, b) => a.score - b.score);
    const f = tries[Math.floor((tries.length - 1) / 2)];
    const ok = !f.error && f.score >= MIN_SCORE && f.tbt < MAX_TBT_MS;
    rows.push({ path, ...f, ok });
    console.log(row(rows.at(-1), runs > 1 ? `  (scores ${tries.map((t) => t.score).join(', ')})` : ''));
  }

  console.log('\n| page | score | TBT (ms) | LCP (ms) | CLS | transfer (KiB) |\n|---|---|---|---|---|---|');
  for (const r of rows) {
    console.log(`| \`${r.path}\` | ${r.score} | ${fmt(r.tbt)} | ${fmt(r.lcp)} | ${Number.isFinite(r.cls) ? r.cls.toFixed(3) : '–'} | ${fmt(r.bytes / 1024)} |`);
  }
  const bad = rows.filter((r) => !r.ok);
  if (bad.length) {
    console.log(`\n${bad.length} of ${rows.length} pages miss the goal (score >= ${MIN_SCORE}, TBT < ${MAX_TBT_MS} ms): ${bad.map((r) => r.path).join(' ')}`);
    process.exitCode = 1;
  } else {
    console.log(`\nevery page of ${rows.length}: score >= ${MIN_SCORE}, TBT < ${MAX_TBT_MS} ms`);
  }
  stop();
}

const fmt = (x) => (Number.isFinite(x) ? String(Math.round(x)) : '–');

function row(r, extra) {
  const mark = r.ok ? ' ' : '✗';
  return `${mark} ${r.path.padEnd(48).slice(0, 48)} score ${String(r.score).padStart(3)}  TBT ${fmt(r.tbt).padStart(5)} ms  LCP ${fmt(r.lcp).padStart(5)} ms  CLS ${Number.isFinite(r.cls) ? r.cls.toFixed(3) : '  –  '}  ${fmt(r.bytes / 1024).padStart(5)} KiB${r.error ? `  error: ${r.error}` : ''}${extra}`;
}

main().catch((e) => {
  console.error(e.message);
  process.exit(2);
});
