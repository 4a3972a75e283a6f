// `stackflux get clusterstacks|releases|addons [-A]`: the table of `flux get`, with Flux's columns
// (NAME, REVISION, SUSPENDED, READY, MESSAGE; NAMESPACE first with -A), cells padded and separated
// by tabs as flux prints them, sorted by namespace and name.
import type { ClusterAddon } from '../api/clusteraddon.ts';
import type { ClusterStack } from '../api/clusterstack.ts';
import type { ClusterStackRelease } from '../api/clusterstackrelease.ts';
import { API_VERSION, type Condition } from '../api/meta.ts';
import type { KubeObject } from '../runtime/client.ts';
import { type Command, type FlagValues, UsageError } from './command.ts';
import { clientFromFlags, kubeFlags, namespaceFlag } from './kube.ts';

/** A stackflux kind as the CLI verbs name it. */
export interface CliKind {
  kind: 'ClusterStack' | 'ClusterStackRelease' | 'ClusterAddon';
  /** The word `get` takes (plural, as `flux get kustomizations`). */
  plural: string;
  /** Other words accepted: singular, kind, short name. */
  aliases: readonly string[];
}

export const CLI_KINDS: readonly CliKind[] = [
  { kind: 'ClusterStack', plural: 'clusterstacks', aliases: ['clusterstack', 'csk'] },
  {
    kind: 'ClusterStackRelease',
    plural: 'releases',
    aliases: ['release', 'clusterstackreleases', 'clusterstackrelease', 'cskr'],
  },
  { kind: 'ClusterAddon', plural: 'addons', aliases: ['addon', 'clusteraddons', 'clusteraddon', 'caddon'] },
];

/** The kind a word names (case-insensitive), or a usage error listing the accepted words. */
export function resolveKind(word: string | undefined, allowed: readonly CliKind[] = CLI_KINDS): CliKind {
  const w = (word ?? '').toLowerCase();
  const found = allowed.find((k) => k.plural === w || k.aliases.includes(w));
  if (found === undefined) {
    const words = allowed.map((k) => k.plural).join('|');
    throw new UsageError(
      word === undefined ? `a kind is required: ${words}` : `unknown kind "${word}": ${words}`,
    );
  }
  return found;
}

export interface FluxRow {
  namespace: string;
  name: string;
  revision: string;
  suspended: string;
  ready: string;
  message: string;
}

function readyOf(conditions: readonly Condition[] | undefined): { ready: string; message: string } {
  const c = conditions?.find((x) => x.type === 'Ready');
  if (c === undefined) return { ready: 'Unknown', message: 'not reconciled yet' };
  return { ready: c.status, message: (c.message || c.reason).replace(/\s*\n\s*/g, ' ') };
}

/** REVISION of a ClusterAddon: the revision every addon applied, else the fleet commit. */
function addonRevision(ca: ClusterAddon): string {
  const applied = new Set((ca.status?.addons ?? []).map((a) => a.lastAppliedRevision ?? ''));
  const [only] = [...applied];
  if (applied.size === 1 && only !== undefined && only !== '') return only;
  return ca.status?.fleetCommit !== undefined ? `sha1:${ca.status.fleetCommit}` : '';
}

/** One row per object, in flux's order (namespace, then name). */
export function fluxRows(kind: CliKind['kind'], objects: readonly KubeObject[]): FluxRow[] {
  const row = (o: KubeObject): FluxRow => {
    const base = { namespace: o.metadata.namespace ?? '', name: o.metadata.name ?? '' };
    if (kind === 'ClusterStack') {
      const cs = o as unknown as ClusterStack;
      return {
        ...base,
        revision: cs.status?.latestRelease ?? '',
        suspended: cs.spec.suspend === true ? 'True' : 'False',
        ...readyOf(cs.status?.conditions),
      };
    }
    if (kind === 'ClusterStackRelease') {
      const r = o as unknown as ClusterStackRelease;
      return {
        ...base,
        revision: r.status?.lastAppliedRevision ?? r.status?.revision ?? r.spec.tag,
        suspended: r.spec.suspend === true ? 'True' : 'False',
        ...readyOf(r.status?.conditions),
      };
    }
    const ca = o as unknown as ClusterAddon & { spec: { suspend?: boolean } };
    return {
      ...base,
      revision: addonRevision(ca),
      suspended: ca.spec.suspend === true ? 'True' : 'False',
      ...readyOf(ca.status?.conditions),
    };
  };
  const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  return objects.map(row).sort((a, b) => cmp(a.namespace, b.namespace) || cmp(a.name, b.name));
}

/** The table as flux prints it: padded cells joined by tabs, NAMESPACE first with -A. */
export function formatFluxTable(
  rows: readonly FluxRow[],
  o: { allNamespaces: boolean; noHeader?: boolean },
): string {
  const cols: (keyof FluxRow)[] = [
    ...(o.allNamespaces ? (['namespace'] as const) : []),
    'name',
    'revision',
    'suspended',
    'ready',
    'message',
  ];
  const header = Object.fromEntries(cols.map((c) => [c, c.toUpperCase()])) as unknown as FluxRow;
  const all = o.noHeader === true ? [...rows] : [header, ...rows];
  const width = (k: keyof FluxRow) => Math.max(...all.map((r) => r[k].length));
  return all
    .map(
      (r) =>
        `${cols
          .map((k, i) => (i === cols.length - 1 ? r[k] : r[k].padEnd(width(k))))
          .join('\t')
          .trimEnd()}\n`,
    )
    .join('');
}

/** Lists the objects of a kind in the namespace the flags name (every namespace with -A). */
export async function listKind(
  flags: FlagValues,
  kind: CliKind['kind'],
  userAgent: string,
): Promise<KubeObject[]> {
  const client = clientFromFlags(flags, userAgent);
  try {
    const scope = flags['all-namespaces'] === true ? {} : { namespace: namespaceFlag(flags) };
    return (await client.listAll<KubeObject>(API_VERSION, kind, scope)).items;
  } finally {
    client.close();
  }
}

export const getCommand: Command = {
  name: 'get',
  summary:
    'Show ClusterStacks, releases or ClusterAddons with REVISION, SUSPENDED and READY, like `flux get`',
  usage: 'get clusterstacks|releases|addons [-A] [-n NAMESPACE] [flags]',
  examples: [
    'stackflux get clusterstacks -n team-a',
    'stackflux get releases -A',
    'stackflux get addons -A --no-header',
  ],
  flags: {
    ...kubeFlags,
    'all-namespaces': { type: 'boolean', short: 'A', description: 'every namespace', default: false },
    'no-header': { type: 'boolean', description: 'leave out the header row', default: false },
  },
  run: async (flags, positionals, io) => {
    if (positionals.length > 1)
      throw new UsageError(`unexpected arguments: ${positionals.slice(1).join(' ')}`);
    const kind = resolveKind(positionals[0]);
    const all = flags['all-namespaces'] === true;
    const rows = fluxRows(kind.kind, await listKind(flags, kind.kind, 'stackflux-get'));
    if (rows.length === 0) {
      io.stderr(`✗ no ${kind.kind} objects found${all ? '' : ` in ${namespaceFlag(flags)} namespace`}\n`);
      return 0;
    }
    io.stdout(formatFluxTable(rows, { allNamespaces: all, noHeader: flags['no-header'] === true }));
    return 0;
  },
};
