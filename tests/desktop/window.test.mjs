// The real desktop window: the built Tauri app (target/debug/fluxo-desktop) driven through
// tauri-driver, which starts Debian's WebKitWebDriver on the app's WebKitGTK webview. Run it
// under a display (`xvfb-run -a -s "-screen 0 1280x800x24" npm test`, or `make test-desktop`).
//
// The app gets a throw-away data dir (FLUXO_DESKTOP_DATA_DIR: a fresh sled store and a
// workflows folder seeded with the templates) and any free listener port (FLUXO_DESKTOP_PORT=0).
// No FLUXO_ENV_* variables: the first launch turns the sandbox destination on (settings
// `sandbox`), and the templates' variables (`env.CRM_URL`, …) point at it, so dry runs, live
// runs and webhooks of the invoice flow all succeed end to end.
//
// Environment: FLUXO_DESKTOP_BIN (default ../../target/debug/fluxo-desktop), TAURI_DRIVER
// (default tauri-driver on PATH, else ~/.cargo/bin/tauri-driver), WEBKIT_WEBDRIVER (default
// /usr/bin/WebKitWebDriver), FLUXO_DESKTOP_SHOT (default ../../target/desktop-shot.png; the
// Runs view goes beside it as desktop-shot-runs.png), FLUXO_DESKTOP_ROOT_SHOT (also save the
// whole Xvfb screen there after the first launch's one-click dry run: the README's hero).

import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { homedir, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { remote } from 'webdriverio';

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, '..', '..');
const bin = process.env.FLUXO_DESKTOP_BIN ?? join(repo, 'target', 'debug', 'fluxo-desktop');
const shot = process.env.FLUXO_DESKTOP_SHOT ?? join(repo, 'target', 'desktop-shot.png');
const webkitDriver = process.env.WEBKIT_WEBDRIVER ?? '/usr/bin/WebKitWebDriver';
const WORKFLOW = 'invoice-paid-once';
const SAMPLE = 'stripe/invoice.paid.json';
const STEPS = ['hook', 'seen', 'route', 'skip', 'create', 'fail', 'undo'];
const WAIT = 20_000;

function tauriDriver() {
  if (process.env.TAURI_DRIVER) return process.env.TAURI_DRIVER;
  const cargoBin = join(process.env.CARGO_HOME ?? join(homedir(), '.cargo'), 'bin', 'tauri-driver');
  return existsSync(cargoBin) ? cargoBin : 'tauri-driver';
}

function freePort() {
  return new Promise((ok, fail) => {
    const srv = createServer();
    srv.on('error', fail);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => ok(port));
    });
  });
}

async function waitForDriver(port, child, log) {
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`tauri-driver exited with ${child.exitCode}:\n${log()}`);
    try {
      const r = await fetch(`http://127.0.0.1:${port}/status`);
      if (r.ok) return;
    } catch {
      /* not up yet */
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`tauri-driver did not answer on port ${port}:\n${log()}`);
}

let driver;
let driverLog = '';
let browser;
let dataDir;

const byTestId = (id) => browser.$(`[data-testid="${id}"]`);

/** The element's rendered text (innerText: WebKitWebDriver's Get Element Text leaves out
 * text inside React Flow's node toolbars). */
const textOf = (id) =>
  browser.execute((id) => document.querySelector(`[data-testid="${id}"]`)?.innerText ?? '', id);

/** Wait for an attribute (React Flow draws after measuring: wait for the DOM, never sleep). */
async function waitAttr(id, name, want) {
  let last;
  await browser.waitUntil(async () => (last = await byTestId(id).getAttribute(name)) === want, {
    timeout: WAIT,
    timeoutMsg: `${name} of ${id} never became ${want} (is ${last})`,
  });
}

async function waitText(id, re) {
  let last;
  await browser.waitUntil(async () => re.test((last = await textOf(id))), {
    timeout: WAIT,
    timeoutMsg: `${id} never matched ${re} (text: ${last})`,
  });
}

/** Collect `run-event`s in the page (what @tauri-apps/api's listen() does), once. */
async function collectRunEvents() {
  await browser.execute(async () => {
    if (window.__fluxoEvents) return;
    window.__fluxoEvents = [];
    const t = window.__TAURI_INTERNALS__;
    await t.invoke('plugin:event|listen', {
      event: 'run-event',
      target: { kind: 'Any' },
      handler: t.transformCallback((e) => window.__fluxoEvents.push(e.payload)),
    });
  });
}

const runEvents = () => browser.execute(() => window.__fluxoEvents);

before(async () => {
  assert.ok(existsSync(bin), `no app binary at ${bin}: run \`bash scripts/desktop-build.sh\` (or set FLUXO_DESKTOP_BIN)`);
  assert.ok(process.env.DISPLAY || process.env.WAYLAND_DISPLAY, 'no display: run under xvfb-run');
  dataDir = mkdtempSync(join(tmpdir(), 'fluxo-desktop-'));
  const [port, nativePort] = [await freePort(), await freePort()];
  // The driver's environment reaches WebKitWebDriver and from there the app.
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('FLUXO_')));
  Object.assign(env, {
    FLUXO_DESKTOP_DATA_DIR: join(dataDir, 'data'),
    FLUXO_DESKTOP_PORT: '0',
    RUST_LOG: env.RUST_LOG ?? 'info,tao=warn,wry=warn',
  });
  driver = spawn(
    tauriDriver(),
    ['--port', String(port), '--native-port', String(nativePort), '--native-driver', webkitDriver],
    { env, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  driver.on('error', (e) => (driverLog += `\ncannot start tauri-driver: ${e.message}`));
  driver.stdout.on('data', (d) => (driverLog += d));
  driver.stderr.on('data', (d) => (driverLog += d));
  await waitForDriver(port, driver, () => driverLog);
  browser = await remote({
    hostname: '127.0.0.1',
    port,
    logLevel: 'warn',
    connectionRetryCount: 0,
    capabilities: {
      browserName: 'wry',
      'wdio:enforceWebDriverClassic': true,
      'tauri:options': { application: bin },
    },
  });
});

after(async () => {
  try {
    await browser?.deleteSession();
  } catch {
    /* the app may be gone already */
  }
  driver?.kill('SIGTERM');
  if (dataDir) rmSync(dataDir, { recursive: true, force: true });
  if (process.exitCode) console.error(`tauri-driver / app log:\n${driverLog}`);
});

test('the window shows the editor with the seeded workflows and the step catalog', async () => {
  await byTestId('editor').waitForDisplayed({ timeout: WAIT });
  // The step catalog comes over IPC (step_kinds).
  await browser.$('.react-flow__node').waitForDisplayed({ timeout: WAIT });
  await byTestId('tab-workflows').click();
  // list_workflows: the templates seeded into the fresh data dir on first launch.
  await byTestId(`workflow-item-${WORKFLOW}`).waitForDisplayed({ timeout: WAIT });
});

test('the first launch opens a template with its sample event, and its one-click Dry Run succeeds', async () => {
  // The first-launch notice (the templates' webhooks are unsigned) is read and dismissed.
  const notice = byTestId('notice-dismiss');
  if (await notice.isDisplayed()) await notice.click();
  // Whatever the first screen shows: its run input is the template's declared sample, not `{}`.
  await byTestId('tab-input').click();
  await browser.waitUntil(async () => /"id": "evt_/.test(await byTestId('run-input').getValue()), {
    timeout: WAIT,
    timeoutMsg: 'the run input is not the template sample',
  });
  await byTestId('dry-run').click();
  await waitText('run-status', /^succeeded$/);
  // The sandbox gives every variable: no placeholder, no warning.
  assert.equal((await browser.$$('[data-testid="run-warnings"]')).length, 0);
  mkdirSync(dirname(shot), { recursive: true });
  await browser.saveScreenshot(shot);
  if (process.env.FLUXO_DESKTOP_ROOT_SHOT) execFileSync('import', ['-window', 'root', process.env.FLUXO_DESKTOP_ROOT_SHOT]);
});

test('opens invoice-paid-once, dry-runs it with a real Stripe payload and draws each step result', async () => {
  await byTestId(`workflow-item-${WORKFLOW}`).click();
  const confirm = byTestId('confirm-ok');
  if (await confirm.isDisplayed()) await confirm.click();
  await waitText('workflow-version', /^v\d+$/);
  // get_workflow: every step of workflows/invoice-paid-once.json drawn, and its 6 edges.
  for (const id of STEPS) await byTestId(`node-${id}`).waitForDisplayed({ timeout: WAIT });
  await browser.waitUntil(async () => (await browser.$$('[data-testid^="edge-"]').length) === 6, {
    timeout: WAIT,
    timeoutMsg: 'the 6 edges were not drawn',
  });

  // sample_payloads, then dry_run of the canvas.
  await byTestId('tab-input').click();
  const select = byTestId('sample-select');
  await select.waitForDisplayed({ timeout: WAIT });
  await select.selectByAttribute('value', SAMPLE);
  await browser.waitUntil(async () => /"type": "invoice.paid"/.test(await byTestId('run-input').getValue()), {
    timeout: WAIT,
    timeoutMsg: 'the sample payload did not fill the run input',
  });
  await byTestId('dry-run').click();

  // The claim, the default route and the simulated create succeed (a dry run sends nothing).
  await waitText('run-status', /^succeeded$/);
  await waitAttr('node-hook', 'data-status', 'succeeded');
  await waitAttr('node-seen', 'data-status', 'succeeded');
  await waitAttr('node-route', 'data-status', 'succeeded');
  await waitAttr('node-create', 'data-status', 'succeeded');
  // Neither the compensation nor the `skip` route ran.
  for (const id of ['fail', 'undo', 'skip']) assert.equal(await byTestId(`node-${id}`).getAttribute('data-status'), 'skipped');

  // A node's result, read from the canvas: select it and its output shows on the node.
  await byTestId('node-seen').click();
  await byTestId('node-output-seen').waitForExist({ timeout: WAIT });
  await waitText('node-output-seen', /"written": true/);

});

test('a live run is queued over IPC and its progress arrives as run-event', async () => {
  await collectRunEvents();
  await byTestId('run-live').click();
  await browser.waitUntil(
    async () => (await runEvents()).some((e) => e.event === 'run_finished' && e.mode === 'live'),
    { timeout: WAIT, timeoutMsg: 'no run_finished run-event for the live run' },
  );
  const live = (await runEvents()).filter((e) => e.mode === 'live');
  assert.equal(live[0].event, 'run_started');
  assert.ok(live.every((e) => e.workflow_id === WORKFLOW && e.run_id === live[0].run_id));
  assert.ok(live.some((e) => e.event === 'step_finished' && e.step_id === 'seen' && e.status === 'succeeded'));
  // The deal is created in the sandbox the first launch started.
  await waitText('run-status', /^succeeded$/);
  await waitAttr('node-create', 'data-status', 'succeeded');
});

test('a webhook posted to the local listener runs the flow while the window is open', async () => {
  await collectRunEvents();
  const info = await browser.execute(() => window.__TAURI_INTERNALS__.invoke('app_info'));
  assert.match(info.listener_url, /^http:\/\/127\.0\.0\.1:\d+$/);
  const payload = readFileSync(join(repo, 'tests', 'fixtures', 'payloads', 'stripe', 'invoice.paid.second.json'));
  const deliver = () =>
    fetch(`${info.webhook_base}/${WORKFLOW}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Idempotency-Key': 'evt_desktop_window_test' },
      body: payload,
    });
  const first = await deliver();
  assert.equal(first.status, 202);
  const { run_id, duplicate } = await first.json();
  assert.equal(duplicate, false);
  await browser.waitUntil(
    async () => (await runEvents()).some((e) => e.run_id === run_id && e.event === 'run_finished'),
    { timeout: WAIT, timeoutMsg: `no run_finished run-event for the webhook's run ${run_id}` },
  );
  // The same delivery again: deduped at the door, no second run.
  const again = await deliver();
  assert.equal(again.status, 200);
  assert.deepEqual(await again.json(), { run_id, duplicate: true });
  // The run is in the store the window reads (get_run). (Only a few members cross back: an
  // `error` member in a script's result reads as a WebDriver error.)
  const run = await browser.execute(
    (id) =>
      window.__TAURI_INTERNALS__
        .invoke('get_run', { id })
        .then((r) => ({ trigger: r.trigger, workflow_id: r.workflow_id, status: r.status })),
    run_id,
  );
  assert.deepEqual(run, { trigger: 'webhook', workflow_id: WORKFLOW, status: 'succeeded' });
});

/** Call a command from the page; answers `{ok}` or `{err: {code, message}}`, with `pick`ed members. */
async function invoke(cmd, args, pick) {
  return browser.execute(
    (cmd, args, pick) =>
      window.__TAURI_INTERNALS__.invoke(cmd, args).then(
        (v) => ({ ok: pick ? Object.fromEntries(pick.map((k) => [k, v[k]])) : v }),
        (e) => ({ err: { code: e.code, message: e.message } }),
      ),
    cmd,
    args ?? {},
    pick ?? null,
  );
}

test('run history, replay, Memory and settings answer over IPC like the HTTP API', async () => {
  // The three runs of this workflow so far (dry, live, webhook), newest first (the first
  // screen's dry run comes before them when the window opened on this workflow).
  const page = await invoke('list_runs', { query: { workflow: WORKFLOW, limit: 10 } }, ['runs', 'next_cursor']);
  assert.ok(page.ok, JSON.stringify(page));
  const runs = page.ok.runs;
  assert.deepEqual(
    runs.slice(0, 3).map((r) => [r.mode, r.trigger]),
    [
      ['live', 'webhook'],
      ['live', 'manual'],
      ['dry', 'manual'],
    ],
  );
  const bad = await invoke('list_runs', { query: { status: 'nope' } });
  assert.equal(bad.err?.code, 'invalid_parameter');
  const stats = await invoke('run_stats', { query: { bucket: 'hour' } }, ['bucket_ms', 'buckets']);
  assert.equal(stats.ok.bucket_ms, 3_600_000);
  assert.ok(stats.ok.buckets.length >= 1);

  // Replay the webhook's run, dry: linked both ways.
  const replay = await invoke('replay_run', { id: runs[0].id, mode: 'dry', version: 'original', wait: true }, [
    'id',
    'mode',
    'trigger',
    'replay_of',
    'status',
  ]);
  assert.deepEqual(
    { ...replay.ok, id: undefined },
    { id: undefined, mode: 'dry', trigger: 'replay', replay_of: runs[0].id, status: 'succeeded' },
  );
  const orig = await invoke('get_run', { id: runs[0].id }, ['replayed_by']);
  assert.deepEqual(orig.ok.replayed_by, [replay.ok.id]);

  // Memory: each event's claim is held (both runs succeeded), counted per namespace; a
  // missing key is a coded error.
  const ns = await invoke('memory_namespaces');
  assert.ok(Array.isArray(ns.ok));
  const list = await invoke('memory_list', { namespace: 'processed-invoices', prefix: 'evt_', limit: 10 });
  assert.equal(list.ok.entries.length, 2);
  const counts = await invoke('memory_counts');
  assert.deepEqual(counts.ok.find((c) => c.namespace === 'processed-invoices'), { namespace: 'processed-invoices', keys: 2, more: false });
  const missing = await invoke('memory_get', { namespace: 'processed-invoices', key: 'nope' });
  assert.equal(missing.err?.code, 'key_not_found');

  // Settings: saved to the throw-away data dir's settings.json; bad ones refused.
  const saved = await invoke('save_settings', { settings: { env: { CRM_URL: 'http://127.0.0.1:9' }, retention_runs: 50 } });
  assert.equal(saved.ok.settings.env.CRM_URL, 'http://127.0.0.1:9');
  assert.equal(saved.ok.effective.retention_runs, 50);
  const file = JSON.parse(readFileSync(join(dataDir, 'data', 'settings.json'), 'utf8'));
  assert.deepEqual(file.env, { CRM_URL: 'http://127.0.0.1:9' });
  const refused = await invoke('save_settings', { settings: { env: { 'bad name': 'x' } } });
  assert.equal(refused.err?.code, 'invalid_settings');
  const token = await invoke('get_token');
  assert.equal(token.ok, readFileSync(join(dataDir, 'data', 'token'), 'utf8').trim());

  // The history view draws the runs from list_runs (and the chart from run_stats).
  await byTestId('view-runs').click();
  await waitAttr('run-list', 'data-loading', 'false');
  // The first screen's dry run, the invoice flow's dry, live, webhook and replay runs (and a
  // scheduled poll, if a 5-minute boundary passed meanwhile).
  await browser.waitUntil(async () => Number(await byTestId('run-list').getAttribute('data-count')) >= 5, {
    timeout: WAIT,
    timeoutMsg: 'fewer than 5 runs listed',
  });
  assert.ok((await browser.$$('[data-testid="run-row"]')).length >= 5);
  await browser.saveScreenshot(shot.replace(/\.png$/, '-runs.png'));
});
