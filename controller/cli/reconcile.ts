// `stackflux reconcile|suspend|resume`, with the habits of `flux reconcile|suspend|resume`:
// - reconcile sets reconcile.fluxcd.io/requestedAt to the current time, waits until the object's
//   status.lastHandledReconcileAt holds that value and the status reflects its current spec
//   (observedGeneration == generation, not Reconciling: kstatus "Current"), then prints the Ready
//   message; Ready=False or Stalled fails (exit 1). --with-source first does the same to the Flux
//   sources the object's Flux objects read (a ClusterStack: the GitRepository of each release).
// - suspend sets spec.suspend=true; resume sets it false together with a reconcile request and
//   waits like reconcile. Progress goes to stderr with flux's symbols (► ✔ ◎ ✗).
import type { ClusterAddon } from '../api/clusteraddon.ts';
import type { ClusterStackRelease } from '../api/clusterstackrelease.ts';
import { FLUX_KUSTOMIZE_API_VERSION, FLUX_SOURCE_API_VERSION } from '../api/flux.ts';
import { API_VERSION, type Condition, LABEL_CLUSTER, RECONCILE_REQUEST_ANNOTATION } from '../api/meta.ts';
import { parseDuration } from '../controllers/duration.ts';
import { type FluxSourceRef, fluxSourcesOf } from '../reconcilers/reconcilerequest.ts';
import type { KubeClient, KubeObject } from '../runtime/client.ts';
import { type Command, type CommandIO, type FlagSpec, type FlagValues, UsageError } from './command.ts';
import { CLI_KINDS, type CliKind, resolveKind } from './get.ts';
import { clientFromFlags, kubeFlags, namespaceFlag } from './kube.ts';

interface Reconcilable extends KubeObject {
  spec?: { suspend?: boolean };
  status?: {
    observedGeneration?: number;
    lastHandledReconcileAt?: string;
    conditions?: Condition[];
    artifact?: { revision?: string };
  };
}

interface Target {
  apiVersion: string;
  kind: string;
  name: string;
  namespace: string;
}

export type Outcome = { done: false; why: string } | { done: true; ready: boolean; message: string };

/**
 * Whether obj's status answers the reconcile request `value` (flux reconcile's test): the request
 * is handled, the status is for the current generation, and it is not in progress (Reconciling or
 * Ready=Unknown). Stalled=True or Ready=False is a failed answer.
 */
export function reconcileOutcome(obj: Reconcilable, value: string): Outcome {
  const status = obj.status;
  if (status?.lastHandledReconcileAt !== value) return { done: false, why: 'request not handled yet' };
  const gen = obj.metadata.generation;
  if (gen !== undefined && status.observedGeneration !== undefined && status.observedGeneration !== gen)
    return { done: false, why: `observedGeneration ${status.observedGeneration} != generation ${gen}` };
  const cond = (type: string) => status.conditions?.find((c) => c.type === type);
  const stalled = cond('Stalled');
  if (stalled?.status === 'True') return { done: true, ready: false, message: stalled.message };
  if (cond('Reconciling')?.status === 'True') return { done: false, why: cond('Reconciling')?.message ?? '' };
  const ready = cond('Ready');
  if (ready === undefined || ready.status === 'Unknown')
    return { done: false, why: ready?.message ?? 'no Ready condition' };
  return { done: true, ready: ready.status === 'True', message: ready.message || ready.reason };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Polls obj until reconcileOutcome says done; throws after timeoutMs with the last reason. */
async function waitHandled(client: KubeClient, t: Target, value: string, timeoutMs: number, pollMs: number) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const obj = await client.get<Reconcilable>(t.apiVersion, t.kind, t.name, t.namespace);
    if (obj === undefined) throw new Error(`${t.kind} ${t.namespace}/${t.name} was deleted`);
    const outcome = reconcileOutcome(obj, value);
    if (outcome.done) return { obj, outcome };
    if (Date.now() >= deadline)
      throw new Error(
        `timed out waiting for ${t.kind} ${t.namespace}/${t.name} reconciliation: ${outcome.why}`,
      );
    await sleep(pollMs);
  }
}

interface Ctx {
  client: KubeClient;
  io: CommandIO;
  timeoutMs: number;
  pollMs: number;
}

/** Annotates (and optionally patches) t with a new request and waits for the answer. */
async function requestAndWait(
  ctx: Ctx,
  t: Target,
  extraPatch: Record<string, unknown> = {},
  done = 'annotated',
): Promise<boolean> {
  const { client, io } = ctx;
  const value = new Date().toISOString();
  await client.mergePatch(t.apiVersion, t.kind, t.name, t.namespace, {
    ...extraPatch,
    metadata: { annotations: { [RECONCILE_REQUEST_ANNOTATION]: value } },
  });
  io.stderr(`✔ ${t.kind} ${done}\n`);
  io.stderr(`◎ waiting for ${t.kind} reconciliation\n`);
  const { obj, outcome } = await waitHandled(client, t, value, ctx.timeoutMs, ctx.pollMs);
  if (!outcome.done) return false;
  io.stderr(`✔ ${t.kind} reconciliation completed\n`);
  if (!outcome.ready) {
    io.stderr(`✗ ${t.kind} reconciliation failed: '${outcome.message}'\n`);
    return false;
  }
  const revision = obj.status?.artifact?.revision;
  io.stderr(
    `✔ ${t.apiVersion === API_VERSION || revision === undefined ? outcome.message : `fetched revision ${revision}`}\n`,
  );
  return true;
}

/** The Flux sources behind a stackflux object (--with-source). */
async function sourcesOf(
  client: KubeClient,
  kind: CliKind['kind'],
  obj: KubeObject,
): Promise<FluxSourceRef[]> {
  const namespace = obj.metadata.namespace ?? 'default';
  if (kind === 'ClusterStack') {
    const releases = await client.listAll<ClusterStackRelease & KubeObject>(
      API_VERSION,
      'ClusterStackRelease',
      {
        namespace,
      },
    );
    return releases.items
      .filter((r) => r.spec.clusterStack === obj.metadata.name && r.status?.gitRepository !== undefined)
      .map((r) => ({
        apiVersion: FLUX_SOURCE_API_VERSION,
        kind: 'GitRepository',
        name: r.status?.gitRepository ?? '',
        namespace,
      }))
      .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  }
  const cluster = (obj as unknown as ClusterAddon).spec.cluster;
  const ks = await client.listAll(FLUX_KUSTOMIZE_API_VERSION, 'Kustomization', {
    namespace,
    labelSelector: `${LABEL_CLUSTER}=${cluster}`,
  });
  return fluxSourcesOf(ks.items);
}

const RECONCILABLE = CLI_KINDS.filter((k) => k.kind !== 'ClusterStackRelease');
const SUSPENDABLE = CLI_KINDS.filter((k) => k.kind === 'ClusterStack');

const waitFlags: Record<string, FlagSpec> = {
  timeout: { type: 'string', description: 'how long to wait for the reconciliation', default: '5m' },
};

/** Runs a verb on `<kind> NAME`: resolves both, builds the client, maps errors to flux-style output. */
async function onObject(
  flags: FlagValues,
  positionals: string[],
  io: CommandIO,
  allowed: readonly CliKind[],
  verb: (ctx: Ctx, kind: CliKind, t: Target, obj: Reconcilable) => Promise<boolean>,
): Promise<number> {
  const kind = resolveKind(positionals[0], allowed);
  const name = positionals[1];
  if (name === undefined || name === '') throw new UsageError(`${kind.kind} name is required`);
  if (positionals.length > 2) throw new UsageError(`unexpected arguments: ${positionals.slice(2).join(' ')}`);
  const timeoutMs = parseDuration(typeof flags.timeout === 'string' ? flags.timeout : '5m');
  if (timeoutMs === undefined)
    throw new UsageError(`--timeout ${String(flags.timeout)} is not a duration like 30s or 5m`);
  const namespace = namespaceFlag(flags);
  const client = clientFromFlags(flags, 'stackflux-cli');
  try {
    const t: Target = { apiVersion: API_VERSION, kind: kind.kind, name, namespace };
    const obj = await client.get<Reconcilable>(API_VERSION, kind.kind, name, namespace);
    if (obj === undefined) {
      io.stderr(`✗ ${kind.kind} ${namespace}/${name} not found\n`);
      return 1;
    }
    return (await verb({ client, io, timeoutMs, pollMs: 1_000 }, kind, t, obj)) ? 0 : 1;
  } catch (err) {
    io.stderr(`✗ ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  } finally {
    client.close();
  }
}

export const reconcileCommand: Command = {
  name: 'reconcile',
  summary:
    'Reconcile a ClusterStack (list its source now) or a ClusterAddon (re-render) and wait, like `flux reconcile`',
  usage: 'reconcile clusterstack|clusteraddon NAME [-n NAMESPACE] [--with-source] [flags]',
  examples: [
    'stackflux reconcile clusterstack ferrol -n team-a',
    'stackflux reconcile clusterstack ferrol --with-source',
  ],
  flags: {
    ...kubeFlags,
    'with-source': {
      type: 'boolean',
      description:
        'first ask Flux to fetch the sources behind it (the GitRepository of each release) and wait',
      default: false,
    },
    ...waitFlags,
  },
  run: (flags, positionals, io) =>
    onObject(flags, positionals, io, RECONCILABLE, async (ctx, kind, t, obj) => {
      if (obj.spec?.suspend === true) {
        io.stderr(
          `✗ resource is suspended (resume it: stackflux resume ${kind.aliases[0]} ${t.name} -n ${t.namespace})\n`,
        );
        return false;
      }
      if (flags['with-source'] === true) {
        for (const s of await sourcesOf(ctx.client, kind.kind, obj)) {
          io.stderr(`► annotating ${s.kind} ${s.name} in ${s.namespace} namespace\n`);
          if (!(await requestAndWait(ctx, s))) return false;
        }
      }
      io.stderr(`► annotating ${t.kind} ${t.name} in ${t.namespace} namespace\n`);
      return requestAndWait(ctx, t);
    }),
};

export const suspendCommand: Command = {
  name: 'suspend',
  summary: 'Suspend a ClusterStack: its source is not listed and no release is created or deleted',
  usage: 'suspend clusterstack NAME [-n NAMESPACE] [flags]',
  examples: ['stackflux suspend clusterstack ferrol -n team-a'],
  flags: { ...kubeFlags },
  run: (flags, positionals, io) =>
    onObject(flags, positionals, io, SUSPENDABLE, async (ctx, _kind, t) => {
      io.stderr(`► suspending ${t.kind} ${t.name} in ${t.namespace} namespace\n`);
      await ctx.client.mergePatch(t.apiVersion, t.kind, t.name, t.namespace, { spec: { suspend: true } });
      io.stderr(`✔ ${t.kind} suspended\n`);
      return true;
    }),
};

export const resumeCommand: Command = {
  name: 'resume',
  summary: 'Resume a suspended ClusterStack, request a reconcile and wait for it, like `flux resume`',
  usage: 'resume clusterstack NAME [-n NAMESPACE] [flags]',
  examples: ['stackflux resume clusterstack ferrol -n team-a'],
  flags: { ...kubeFlags, ...waitFlags },
  run: (flags, positionals, io) =>
    onObject(flags, positionals, io, SUSPENDABLE, async (ctx, _kind, t) => {
      io.stderr(`► resuming ${t.kind} ${t.name} in ${t.namespace} namespace\n`);
      return requestAndWait(ctx, t, { spec: { suspend: false } }, 'resumed');
    }),
};
