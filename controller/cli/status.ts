// `stackflux status`: one table from ClusterStack to its releases to the ClusterAddons (Clusters)
// using each release to their addons, with Ready and the reason, in the style of `flux get`.
import type { ClusterAddon } from '../api/clusteraddon.ts';
import type { ClusterStack } from '../api/clusterstack.ts';
import type { ClusterStackRelease } from '../api/clusterstackrelease.ts';
import type { Condition } from '../api/meta.ts';
import { API_VERSION } from '../api/meta.ts';
import { ROLLOUT_CONDITION } from '../api/rollout.ts';
import type { KubeObject } from '../runtime/client.ts';
import type { Command } from './command.ts';
import { clientFromFlags, kubeFlags, namespaceFlag } from './kube.ts';

export interface StatusInput {
  clusterStacks: ClusterStack[];
  releases: ClusterStackRelease[];
  clusterAddons: ClusterAddon[];
}

interface Row {
  namespace: string;
  name: string;
  revision: string;
  ready: string;
  message: string;
}

function cmp(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function readyOf(conditions: readonly Condition[] | undefined): { ready: string; message: string } {
  const c = conditions?.find((x) => x.type === 'Ready');
  if (c === undefined) return { ready: 'Unknown', message: 'no Ready condition yet (not reconciled)' };
  return { ready: c.status, message: c.reason && c.message ? c.message : c.reason };
}

function oneLine(s: string): string {
  return s.replace(/\s*\n\s*/g, ' ');
}

const byNsName = (
  a: { metadata: { namespace?: string; name: string } },
  b: { metadata: { namespace?: string; name: string } },
) => cmp(a.metadata.namespace ?? '', b.metadata.namespace ?? '') || cmp(a.metadata.name, b.metadata.name);

/** The release's provider object (providerRef), with its ProviderReady reason and message. */
function providerRow(r: ClusterStackRelease, depth: string): Row | undefined {
  const p = r.status?.provider;
  if (p === undefined) return undefined;
  const c = r.status?.conditions?.find((x) => x.type === 'ProviderReady');
  return {
    namespace: r.metadata.namespace ?? '',
    name: `${depth}provider/${p.kind}/${p.name}`,
    revision: '',
    ready: c?.status ?? (p.ready ? 'True' : 'False'),
    message: c !== undefined ? `${c.reason}: ${c.message}` : '',
  };
}

/**
 * A Helm-chart addon's revision: the chart version of its last Helm release, the digest of the
 * values it ran with (shortened, as flux shortens digests) and the Helm revision.
 */
function helmRevision(a: NonNullable<NonNullable<ClusterAddon['status']>['addons']>[number]): string {
  if (a.chartVersion === undefined) return 'not installed yet';
  const digest = a.valuesDigest?.replace(/^(sha256:[0-9a-f]{12})[0-9a-f]*$/, '$1');
  return `chart ${a.chartVersion}${digest !== undefined ? ` values ${digest}` : ''}${a.helmRevision !== undefined ? ` (Helm revision ${a.helmRevision})` : ''}`;
}

/** The Progressive rollout of a ClusterStack: phase, per-wave progress and why it waits. */
function rolloutRow(cs: ClusterStack): Row | undefined {
  const r = cs.status?.rollout;
  if (r === undefined) return undefined;
  const c = cs.status?.conditions?.find((x) => x.type === ROLLOUT_CONDITION);
  const waves = (r.waves ?? [])
    .map(
      (w) =>
        `${w.name} ${w.done}/${w.total}${w.inFlight > 0 ? ` (${w.inFlight} in flight)` : ''}${w.failed > 0 ? ` (${w.failed} failed)` : ''}`,
    )
    .join(', ');
  return {
    namespace: cs.metadata.namespace ?? '',
    name: '  rollout',
    revision: r.targetRelease ?? '',
    ready: c?.status ?? 'Unknown',
    message: `${r.phase ?? ''}${waves !== '' ? `: ${waves}` : ''}${r.message ? `; ${r.message}` : ''}${r.nextWindow ? `; next window ${r.nextWindow}` : ''}`,
  };
}

/** The rows of the status table: stack → releases → cluster addons → addons (tree-indented names). */
export function statusRows(input: StatusInput): Row[] {
  const rows: Row[] = [];
  const shownAddons = new Set<string>();
  const addonRows = (ns: string, releaseName: string | undefined, depth: string) => {
    for (const ca of [...input.clusterAddons].sort(byNsName)) {
      const key = `${ca.metadata.namespace}/${ca.metadata.name}`;
      if (ca.metadata.namespace !== ns || shownAddons.has(key)) continue;
      const rel = ca.status?.release ?? ca.spec.release;
      if (releaseName !== undefined && rel !== releaseName) continue;
      shownAddons.add(key);
      rows.push({
        namespace: ns,
        name: `${depth}clusteraddon/${ca.metadata.name}`,
        // The tip of the Cluster's fleet branch, as Flux names a branch revision (shortened).
        revision:
          ca.status?.fleetCommit === undefined
            ? (rel ?? '')
            : ca.status.fleetBranch !== undefined
              ? `${ca.status.fleetBranch}@sha1:${ca.status.fleetCommit.slice(0, 12)}`
              : `${rel ?? ''}@${ca.status.fleetCommit.slice(0, 12)}`,
        ...readyOf(ca.status?.conditions),
      });
      for (const a of ca.status?.addons ?? []) {
        rows.push({
          namespace: ns,
          name: `${depth}  addon/${a.name}`,
          revision: a.helmRelease !== undefined ? helmRevision(a) : (a.lastAppliedRevision ?? ''),
          ready: a.ready ? 'True' : 'False',
          message: a.message ?? a.reason ?? '',
        });
      }
    }
  };
  for (const cs of [...input.clusterStacks].sort(byNsName)) {
    const ns = cs.metadata.namespace ?? '';
    rows.push({
      namespace: ns,
      name: `clusterstack/${cs.metadata.name}`,
      revision: cs.status?.latestRelease ?? '',
      ...readyOf(cs.status?.conditions),
    });
    const rollout = rolloutRow(cs);
    if (rollout !== undefined) rows.push(rollout);
    const releases = input.releases
      .filter((r) => r.metadata.namespace === ns && r.spec.clusterStack === cs.metadata.name)
      .sort(byNsName);
    for (const r of releases) {
      rows.push({
        namespace: ns,
        name: `  clusterstackrelease/${r.metadata.name}`,
        revision: r.status?.lastAppliedRevision ?? r.status?.revision ?? r.spec.tag,
        ...readyOf(r.status?.conditions),
      });
      const provider = providerRow(r, '    ');
      if (provider !== undefined) rows.push(provider);
      addonRows(ns, r.metadata.name, '    ');
    }
  }
  // Releases and ClusterAddons not under a listed ClusterStack.
  for (const r of [...input.releases].sort(byNsName)) {
    const ns = r.metadata.namespace ?? '';
    if (
      input.clusterStacks.some(
        (cs) => cs.metadata.namespace === ns && cs.metadata.name === r.spec.clusterStack,
      )
    )
      continue;
    rows.push({
      namespace: ns,
      name: `clusterstackrelease/${r.metadata.name}`,
      revision: r.status?.lastAppliedRevision ?? r.status?.revision ?? r.spec.tag,
      ...readyOf(r.status?.conditions),
    });
    addonRows(ns, r.metadata.name, '  ');
  }
  for (const ns of [...new Set(input.clusterAddons.map((c) => c.metadata.namespace ?? ''))].sort(cmp))
    addonRows(ns, undefined, '');
  return rows.map((r) => ({ ...r, message: oneLine(r.message) }));
}

export function formatTable(rows: Row[], allNamespaces: boolean): string {
  const header = {
    namespace: 'NAMESPACE',
    name: 'NAME',
    revision: 'REVISION',
    ready: 'READY',
    message: 'MESSAGE',
  };
  const all = [header, ...rows];
  const cols = (
    allNamespaces
      ? ['namespace', 'name', 'revision', 'ready', 'message']
      : ['name', 'revision', 'ready', 'message']
  ) as (keyof Row)[];
  const width = (k: keyof Row) => Math.max(...all.map((r) => r[k].length));
  return all
    .map((r) =>
      cols
        .map((k, i) => (i === cols.length - 1 ? r[k] : r[k].padEnd(width(k))))
        .join('  ')
        .trimEnd(),
    )
    .map((l) => `${l}\n`)
    .join('');
}

export const statusCommand: Command = {
  name: 'status',
  summary: 'Show ClusterStacks → releases → clusters → addons with READY and the reason',
  flags: {
    ...kubeFlags,
    'all-namespaces': { type: 'boolean', short: 'A', description: 'every namespace', default: false },
  },
  run: async (flags, _positionals, io) => {
    const client = clientFromFlags(flags, 'stackflux-status');
    try {
      const all = flags['all-namespaces'] === true;
      const scope = all ? {} : { namespace: namespaceFlag(flags) };
      const list = async <T>(kind: string): Promise<T[]> =>
        (await client.listAll<KubeObject>(API_VERSION, kind, scope)).items as unknown as T[];
      const input: StatusInput = {
        clusterStacks: await list<ClusterStack>('ClusterStack'),
        releases: await list<ClusterStackRelease>('ClusterStackRelease'),
        clusterAddons: await list<ClusterAddon>('ClusterAddon'),
      };
      const rows = statusRows(input);
      if (rows.length === 0) {
        io.stderr(
          `no ClusterStacks, ClusterStackReleases or ClusterAddons found${all ? '' : ` in namespace ${scope.namespace}`}\n`,
        );
        return 0;
      }
      io.stdout(formatTable(rows, all));
      return 0;
    } finally {
      client.close();
    }
  },
};
