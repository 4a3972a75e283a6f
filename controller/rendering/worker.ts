// The render worker (worker_threads): renders one addon per message with the pure renderAddon and
// tells the parent which template it is in, so a render stopped for its time or memory budget is
// reported with the file that overran. Started and terminated by ./bounded.ts only.
import { type MessagePort, parentPort, workerData } from 'node:worker_threads';
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

const requests = parentPort;
// Replies go to a port of their own, which the parent can read synchronously (receiveMessageOnPort).
const replies = (workerData as { replyPort?: MessagePort } | null)?.replyPort;
if (requests !== null && replies !== undefined) {
  requests.on('message', (request: RenderRequest) => {
    const { id, input, maxOutputBytes } = request;
    const result = renderAddon(input, {
      maxOutputBytes,
      onTemplate: (file) => replies.postMessage({ id, type: 'template', file } satisfies RenderReply),
    });
    replies.postMessage({ id, type: 'done', result } satisfies RenderReply);
  });
  // Loaded: the parent starts the time budget of a render only now, not while the worker starts.
  replies.postMessage({ id: 0, type: 'ready' } satisfies RenderReply);
}
