// `stackflux convert`: cluster-stack-operator ClusterStacks (from a file or the cluster) →
// stackflux ClusterStacks on stdout (controller/convert/cso.ts does the conversion). Reads CSO's
// Deployment and the Secrets its env names to learn the release source; prints no credential.
import { readFileSync } from 'node:fs';
import { parseAllDocuments } from 'yaml';
import { REPO_URL_PATTERN } from '../api/clusterstack.ts';
import {
  type ConvertOptions,
  CSO_API_VERSION,
  convertClusterStacks,
  csoReleaseSource,
  type SecretData,
} from '../convert/cso.ts';
import { terminalSafe } from '../convert/quote.ts';
import { canonicalYaml, isRecord } from '../offline/yaml.ts';
import type { KubeClient } from '../runtime/client.ts';
import { type Command, type CommandIO, type FlagValues, UsageError } from './command.ts';
import { clientFromFlags, kubeFlags } from './kube.ts';

type Obj = Record<string, unknown>;
const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);

const CSO_DEPLOYMENT_LABEL = 'control-plane=cso-controller-manager';

/** Multi-document YAML (or JSON) → documents; a List's items stay inside (the conversion reads them). */
export function parseDocuments(text: string): unknown[] {
  return parseAllDocuments(text).map((doc) => {
    const error = doc.errors[0];
    if (error !== undefined) throw new UsageError(`input is not YAML: ${error.message.split('\n')[0]}`);
    return doc.toJS({ maxAliasCount: 0 });
  });
}

const isKind = (o: unknown, apiVersion: string, kind: string): o is Obj =>
  isRecord(o) && o.apiVersion === apiVersion && o.kind === kind;

function flatten(docs: readonly unknown[]): unknown[] {
  return docs.flatMap((d) => (isRecord(d) && Array.isArray(d.items) ? flatten(d.items) : [d]));
}

/** Secrets of the documents by namespace/name, data base64 as the API keeps it (stringData encoded). */
export function secretsOf(docs: readonly unknown[]): Map<string, Record<string, string>> {
  const out = new Map<string, Record<string, string>>();
  for (const s of flatten(docs)) {
    if (!isKind(s, 'v1', 'Secret') || !isRecord(s.metadata)) continue;
    const data: Record<string, string> = {};
    for (const [k, v] of Object.entries(isRecord(s.data) ? s.data : {}))
      if (typeof v === 'string') data[k] = v;
    for (const [k, v] of Object.entries(isRecord(s.stringData) ? s.stringData : {}))
      if (typeof v === 'string') data[k] = Buffer.from(v, 'utf8').toString('base64');
    out.set(`${str(s.metadata.namespace) ?? 'default'}/${String(s.metadata.name)}`, data);
  }
  return out;
}

/** CSO's Deployment among the documents: the one running CSO's /manager. */
function csoDeploymentOf(docs: readonly unknown[]): Obj | undefined {
  return flatten(docs).find((d): d is Obj => {
    if (!isKind(d, 'apps/v1', 'Deployment')) return false;
    const spec = (d.spec as Obj | undefined)?.template as Obj | undefined;
    const containers = ((spec?.spec as Obj | undefined)?.containers ?? []) as Obj[];
    return containers.some((c) => Array.isArray(c.command) && c.command.includes('/manager'));
  });
}

/** What convert reads from the cluster: CSO's ClusterStacks, its Deployment, the Secrets its env names. */
async function readCluster(
  client: KubeClient,
  flags: FlagValues,
): Promise<{ docs: unknown[]; deployment?: Obj; secrets: Map<string, Record<string, string>> }> {
  const all = flags['all-namespaces'] === true;
  const namespace = str(flags.namespace) ?? 'default';
  const stacks = await client.listAll(CSO_API_VERSION, 'ClusterStack', all ? {} : { namespace });
  const csoNamespace = str(flags['cso-namespace']) ?? 'cso-system';
  const name = str(flags['cso-deployment']);
  const deployment = (
    name !== undefined
      ? await client.get('apps/v1', 'Deployment', name, csoNamespace)
      : (
          await client.list('apps/v1', 'Deployment', {
            namespace: csoNamespace,
            labelSelector: CSO_DEPLOYMENT_LABEL,
          })
        ).items[0]
  ) as Obj | undefined;
  const secrets = new Map<string, Record<string, string>>();
  const template = ((deployment?.spec as Obj | undefined)?.template as Obj | undefined)?.spec as
    | Obj
    | undefined;
  const names = new Set<string>();
  for (const c of (template?.containers ?? []) as Obj[]) {
    for (const e of (c.env ?? []) as Obj[]) {
      const ref = ((e.valueFrom as Obj | undefined)?.secretKeyRef as Obj | undefined)?.name;
      if (typeof ref === 'string') names.add(ref);
    }
    for (const e of (c.envFrom ?? []) as Obj[]) {
      const ref = (e.secretRef as Obj | undefined)?.name;
      if (typeof ref === 'string') names.add(ref);
    }
  }
  for (const secretName of names) {
    const s = await client.get('v1', 'Secret', secretName, csoNamespace);
    if (s !== undefined)
      for (const [k, v] of secretsOf([{ ...s, apiVersion: 'v1', kind: 'Secret' }])) secrets.set(k, v);
  }
  return { docs: stacks.items, ...(deployment !== undefined ? { deployment } : {}), secrets };
}

export const convertCommand: Command = {
  name: 'convert',
  summary:
    "Print stackflux ClusterStacks for the cluster-stack-operator's ClusterStacks (same names, same releases)",
  usage: 'convert (-f FILE | --from-cluster) [flags]',
  examples: [
    'stackflux convert --from-cluster -A > clusterstacks.yaml',
    'kubectl get clusterstacks.clusterstack.x-k8s.io -A -o yaml | stackflux convert -f - --git-url https://git.example/stacks.git',
  ],
  flags: {
    filename: {
      type: 'string',
      short: 'f',
      description: "YAML with CSO's ClusterStacks (and optionally its Deployment and Secret); - for stdin",
    },
    'from-cluster': {
      type: 'boolean',
      description: "read CSO's ClusterStacks, its Deployment and the Secrets it names from the cluster",
      default: false,
    },
    'all-namespaces': {
      type: 'boolean',
      short: 'A',
      description: 'with --from-cluster: every namespace',
      default: false,
    },
    'cso-namespace': { type: 'string', description: "namespace of CSO's Deployment", default: 'cso-system' },
    'cso-deployment': {
      type: 'string',
      description: `CSO's Deployment (default: the one labelled ${CSO_DEPLOYMENT_LABEL})`,
    },
    'git-url': {
      type: 'string',
      description: "read the releases from this Git repository's tags instead of CSO's GitHub or OCI source",
    },
    'source-path': {
      type: 'string',
      description: 'spec.source.path: folder of the stack in the release tree',
    },
    'secret-name': {
      type: 'string',
      description: 'Secret (in each ClusterStack namespace) to reference for the release credentials',
      default: 'stackflux-release-credentials',
    },
    ...kubeFlags,
  },
  async run(flags, positionals, io: CommandIO) {
    if (positionals.length > 0) throw new UsageError(`unexpected argument "${positionals[0]}"`);
    const file = str(flags.filename);
    const fromCluster = flags['from-cluster'] === true;
    if ((file === undefined) === !fromCluster)
      throw new UsageError('give exactly one of -f FILE and --from-cluster');
    const gitUrl = str(flags['git-url']);
    if (gitUrl !== undefined && !new RegExp(REPO_URL_PATTERN).test(gitUrl))
      // Not echoed: it may hold credentials.
      throw new UsageError('--git-url is not an https, http or ssh URL without credentials');

    let docs: unknown[];
    let deployment: Obj | undefined;
    let secrets: SecretData;
    if (file !== undefined) {
      docs = parseDocuments(readFileSync(file === '-' ? 0 : file, 'utf8'));
      deployment = csoDeploymentOf(docs);
      secrets = secretsOf(docs);
    } else {
      const client = clientFromFlags(flags, 'stackflux-convert');
      try {
        ({ docs, deployment, secrets } = await readCluster(client, flags));
      } finally {
        client.close();
      }
    }

    const problems: string[] = [];
    const options: ConvertOptions = {
      secretName: str(flags['secret-name']) ?? 'stackflux-release-credentials',
      ...(str(flags['source-path']) !== undefined ? { path: str(flags['source-path']) } : {}),
    };
    if (gitUrl !== undefined) options.git = { url: gitUrl };
    else if (deployment === undefined && fromCluster) {
      const where = str(flags['cso-namespace']) ?? 'cso-system';
      const which = str(flags['cso-deployment']) ?? `labelled ${CSO_DEPLOYMENT_LABEL}`;
      problems.push(
        `release source: no Deployment ${which} in namespace ${where} (--cso-namespace, --cso-deployment), or name the releases with --git-url`,
      );
      options.sourceReported = true;
    } else if (deployment !== undefined) {
      const found = csoReleaseSource(deployment, secrets);
      problems.push(...found.problems.map((p) => `release source: ${p}`));
      if (found.source !== undefined) options.source = found.source;
      else options.sourceReported = true;
    }
    const result = convertClusterStacks(docs, options);
    problems.push(...result.problems);
    if (result.objects.length > 0) io.stdout(result.objects.map((o) => `---\n${canonicalYaml(o)}`).join(''));
    // Values in these lines are quoted where they are built; a control character that reaches one
    // some other way (a parser's reason quoting the raw text) is escaped here all the same.
    for (const note of result.notes) io.stderr(`Note: ${terminalSafe(note)}\n`);
    for (const problem of [...new Set(problems)]) io.stderr(`Cannot convert: ${terminalSafe(problem)}\n`);
    return problems.length > 0 ? 2 : 0;
  },
};
