// Handed case C13 in the browser: the UI's event stream reconnects by itself with
// `Last-Event-ID`, and when the server cannot resume from it (a `reset` event) the run list is
// loaded again; live events then flow on the new connection.

import { expect, test } from '@playwright/test';
import { apiPut } from './helpers';
import { listGen, openRuns, reloaded, row, startRun } from './history-helpers';

const uniq = () => Math.random().toString(36).slice(2, 10);

test('the live stream reconnects with Last-Event-ID, and a reset reloads the list', async ({ page, request }) => {
  const wf = `events-${uniq()}`;
  await apiPut(request, `/workflows/${wf}`, {
    id: wf,
    name: wf,
    version: 1,
    steps: [{ id: 'start', kind: 'manual_trigger', position: { x: 0, y: 0 }, config: {} }],
    edges: [],
  });

  // The first connection is held until the page is ready, then answered with an id and
  // dropped (as a restart or a proxy would); later ones go to the real server.
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const asked: (string | null)[] = [];
  await page.route('**/api/v1/events', async (route) => {
    const last = route.request().headers()['last-event-id'] ?? null;
    asked.push(last);
    if (asked.length === 1) {
      await gate;
      await route.fulfill({ status: 200, headers: { 'Content-Type': 'text/event-stream' }, body: 'id: 5\n\n' });
    } else {
      await route.continue();
    }
  });

  await openRuns(page);
  const before = await listGen(page);
  release();
  // The UI reconnects, resuming after id 5. The server's ids started after that (5 is not an
  // id of this process), so it answers `reset`: the list is loaded again.
  await expect.poll(() => asked).toEqual([null, '5']);
  await reloaded(page, before);

  // The new connection carries live events: a new run appears without a reload.
  const gen = await listGen(page);
  const run = await startRun(request, wf, { n: 1 });
  await expect(row(page, run.id)).toBeVisible();
  expect(await listGen(page)).toBe(gen);
  expect(asked).toEqual([null, '5']);
});
