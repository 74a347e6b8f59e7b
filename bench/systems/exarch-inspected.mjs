// exarch with a live inspector attached that no one watches (an app that offers live inspection
// before anyone opens it): what an idle inspector costs. The workloads are exarch's own.
import { startLiveInspector } from '../../dist/src/watch/inspect/liveInspector.js';
import * as exarch from './exarch.mjs';

export const label = 'exarch, idle live inspector';
export const packages = [];

/** Started on first use, not on import: the runner imports this module for its label. */
let started;
async function withInspector(run, size) {
  started ??= startLiveInspector({ port: 0 }).then((inspector) => {
    exarch.hooks.created = (actor) => {
      const detach = inspector.attach(actor);
      actor.subscribe({ complete: detach });
    };
  });
  await started;
  return run(size);
}

export const loop = (steps) => withInspector(exarch.loop, steps);
export const fanout = (children) => withInspector(exarch.fanout, children);
export const stream = (count) => withInspector(exarch.stream, count);
