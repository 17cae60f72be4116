// One subscription to the server's run events, shared by the history views (the list, the
// open run, bulk replay): started with the first listener, ended with the last.

import type { RunEvent } from '../api';
import { useEditor } from '../store/editor';

type Listener = (e: RunEvent) => void;

const listeners = new Set<Listener>();
let stop: (() => void) | null = null;
let starting: Promise<void> | null = null;

function start() {
  const api = useEditor.getState().api;
  if (!api || stop || starting) return;
  starting = api
    .subscribeRunEvents((e) => listeners.forEach((l) => l(e)))
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
