// One subscription to the server's run events, shared by the history views (the list, the
// open run, bulk replay): started with the first listener, ended with the last.

import type { RunEvent } from '../api';
import { useEditor } from '../store/editor';

type Listener = (e: RunEvent) => void;

const listeners = new Set<Listener>();
const resetListeners = new Set<() => void>();
let stop: (() => void) | null = null;
let starting: Promise<void> | null = null;

function start() {
  const api = useEditor.getState().api;
  if (!api || stop || starting) return;
  starting = api
    .subscribeRunEvents(
      (e) => listeners.forEach((l) => l(e)),
      () => resetListeners.forEach((l) => l()),
    )
    .then((unsub) => {
      if (listeners.size) stop = unsub;
      else unsub();
    })
    .catch(() => {
      /* no stream: the views still load on demand */
    })
    .finally(() => {
      starting = null;
    });
}

/** Listen to run events; returns the function that stops listening. */
export function onRunEvent(l: Listener): () => void {
  listeners.add(l);
  start();
  return () => {
    listeners.delete(l);
    if (!listeners.size && stop) {
      stop();
      stop = null;
    }
  };
}

/**
 * Called when the stream could not resume after a reconnect (events were lost: the server's
 * buffer moved on, or it restarted): reload the lists. Returns the function that stops it.
 */
export function onStreamReset(l: () => void): () => void {
  resetListeners.add(l);
  return () => resetListeners.delete(l);
}
