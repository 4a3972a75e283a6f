// The render process (child_process.fork with a heap cap): renders one addon per message with the
// pure renderAddon and tells the parent which template it is in, so a render stopped for its time
// or memory budget is reported with the file that overran. Started and killed by ./bounded/slots.ts
// only.
//
// Every reply is bounded before it is sent (issue 22): a result's files and values count against
// the output cap inside renderAddon, and the texts a reply carries besides (a failure's message, a
// file name) are cut to a few KiB, so nothing a template does makes the controller receive more.

import { renderAnyAddon } from './addon.ts';
import {
  configureGoEngine,
  type GoEngineCall,
  type GoEngineResult,
  loadGoEngine,
  runGoEngineCall,
} from './goengine/index.ts';
import type { AddonRenderInput, RenderResult } from './types.ts';

/** parent → render process */
export interface RenderRequest {
  id: number;
  input: AddonRenderInput;
  maxOutputBytes: number;
  /** A csctl addon: goengine.wasm (located by the parent) and the engine's memory cap. */
  engine?: { path: string; memoryMb: number };
}

/** parent → render process: one Go engine call (Go template, helm template, Go YAML). */
export interface GoEngineRequest {
  id: number;
  goEngine: GoEngineCall;
  maxOutputBytes: number;
  /** goengine.wasm, located by the parent (this process gets no environment). */
  enginePath: string;
  engineMemoryMb: number;
}

/** render process → parent */
export type RenderReply =
  | { id: 0; type: 'ready' }
  | { id: number; type: 'template'; file: string }
  /** The Go engine was loaded for this request: its time budget starts now. */
  | { id: number; type: 'engineLoaded' }
  | { id: number; type: 'done'; result: RenderResult }
  | { id: number; type: 'goEngine'; result: GoEngineResult };

/** Longest message or file name a reply carries (a helper's error may quote a huge value). */
export const MAX_REPLY_TEXT = 4096;

/** `text` cut to `max` UTF-16 units, saying so; never flattens a longer rope first. */
export function capText(text: string, max = MAX_REPLY_TEXT): string {
  if (text.length <= max) return text;
  return `${text.slice(0, max)}… (${text.length - max} more characters cut)`;
}

/** The result as it may be sent: a failure's message capped. */
export function boundedReply(result: RenderResult): RenderResult {
  return result.ok ? result : { ...result, message: capText(result.message) };
}

const send = process.send?.bind(process);
if (send !== undefined) {
  let engineConfig = '';
  // The instance lives as long as this process: configured once, reused by every call. It is
  // loaded before the request runs, and the parent told, so that the request's time budget does
  // not pay for compiling the module (seconds on a loaded machine).
  const useEngine = (id: number, path: string, maxMemoryMb: number) => {
    const config = `${path}\0${maxMemoryMb}`;
    if (config === engineConfig) return;
    configureGoEngine({ path, maxMemoryMb });
    engineConfig = config;
    loadGoEngine(); // a failure is the request's own answer, from the call that follows
    send({ id, type: 'engineLoaded' } satisfies RenderReply);
  };
  process.on('message', (request: RenderRequest | GoEngineRequest) => {
    if ('goEngine' in request) {
      useEngine(request.id, request.enginePath, request.engineMemoryMb);
      const result = runGoEngineCall(request.goEngine, request.maxOutputBytes);
      const bounded = result.ok ? result : { ...result, error: capText(result.error) };
      send({ id: request.id, type: 'goEngine', result: bounded } satisfies RenderReply);
      return;
    }
    const { id, input, maxOutputBytes, engine } = request;
    if (engine !== undefined) useEngine(id, engine.path, engine.memoryMb);
    const result = renderAnyAddon(input, {
      maxOutputBytes,
      onTemplate: (file) => send({ id, type: 'template', file: capText(file) } satisfies RenderReply),
    });
    send({ id, type: 'done', result: boundedReply(result) } satisfies RenderReply);
  });
  // The controller went away (or closed the pool): nothing is left to render for.
  process.on('disconnect', () => process.exit(0));
  // Loaded: the parent starts the time budget of a render only now, not while the process starts.
  send({ id: 0, type: 'ready' } satisfies RenderReply);
}
