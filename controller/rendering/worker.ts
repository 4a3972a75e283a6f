// The render worker (worker_threads): renders one addon per message with the pure renderAddon and
// tells the parent which template it is in, so a render stopped for its time or memory budget is
// reported with the file that overran. Started and terminated by ./bounded.ts only.
import { parentPort } from 'node:worker_threads';
import { renderAddon } from './render.ts';
import type { RenderAddonInput } from './types.ts';

/** parent → worker */
export interface RenderRequest {
  id: number;
  input: RenderAddonInput;
  maxOutputBytes: number;
}

/** worker → parent */
export type RenderReply =
  | { id: 0; type: 'ready' }
  | { id: number; type: 'template'; file: string }
  | { id: number; type: 'done'; result: ReturnType<typeof renderAddon> };

const port = parentPort;
if (port !== null) {
  port.on('message', (request: RenderRequest) => {
    const { id, input, maxOutputBytes } = request;
    const result = renderAddon(input, {
      maxOutputBytes,
      onTemplate: (file) => port.postMessage({ id, type: 'template', file } satisfies RenderReply),
    });
    port.postMessage({ id, type: 'done', result } satisfies RenderReply);
  });
  // Loaded: the parent starts the time budget of a render only now, not while the worker starts.
  port.postMessage({ id: 0, type: 'ready' } satisfies RenderReply);
}
