// The move from the cluster-stack-operator (pure): CSO's ClusterStacks (clusterstack.x-k8s.io/
// v1alpha1) and the release source its Deployment reads (env GIT_* or OCI_*, the `-source` flag)
// → stackflux ClusterStacks with the same names and the same releases, so every ClusterClass keeps
// its name and no Cluster changes class. What stackflux cannot express is a problem (the CLI exits
// 2), never dropped. Credentials are referenced by where they live, never read into the output.

import type { ClusterStack, ClusterStackSource } from '../api/clusterstack.ts';
import { KUBERNETES_MINOR_PATTERN, TAG_SEGMENT_PATTERN } from '../api/clusterstack.ts';
import { API_VERSION, LABEL_SOURCE_CREDENTIALS } from '../api/meta.ts';
import { isRecord } from '../offline/yaml.ts';
import { formatReleaseTag, parseReleaseTag, parseStackVersion } from '../releases/tags.ts';
import { named, quote } from './quote.ts';

export const CSO_API_VERSION = 'clusterstack.x-k8s.io/v1alpha1';

/** Where one setting of CSO's manager container comes from (the value itself only if not a credential). */
export type SettingOrigin =
  | { from: 'literal' }
  | { from: 'secret'; namespace: string; name: string; key: string }
  | { from: 'unset' }
  /** A source convert does not read (a ConfigMap, a fieldRef): named for the report. */
  | { from: 'other'; what: string };

export interface Setting {
  env: string;
  origin: SettingOrigin;
  /** The value where it is known and not a credential; credentials are never kept. */
  value?: string;
  /** Credentials: whether a non-empty value is set (undefined: its Secret was not in the input). */
  set?: boolean;
}

export type CsoReleaseSource =
  | { kind: 'github'; owner: string; repo: string; token: Setting }
  | {
      kind: 'oci';
      repository: string;
      registry: string;
      /** Where each came from when it was read from a Secret: then its value is never printed. */
      repositoryFrom?: string;
      registryFrom?: string;
      credentials: Record<'username' | 'password' | 'token', Setting>;
    };

/** A Secret's data by "namespace/name": base64 as the API returns it, or stringData. */
export type SecretData = ReadonlyMap<string, Readonly<Record<string, string>>>;

const CREDENTIAL_ENVS = new Set(['GIT_ACCESS_TOKEN', 'OCI_ACCESS_TOKEN', 'OCI_USERNAME', 'OCI_PASSWORD']);

type Obj = Record<string, unknown>;
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const rec = (v: unknown): Obj => (isRecord(v) ? v : {});
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);

/** CSO's manager container: the one named manager, else the one running /manager, else the first. */
function managerContainer(deployment: Obj): Obj | undefined {
  const containers = arr(rec(rec(rec(deployment.spec).template).spec).containers).map(rec);
  return (
    containers.find((c) => c.name === 'manager') ??
    containers.find((c) => arr(c.command).includes('/manager')) ??
    containers[0]
  );
}

/** The value of CSO's `-source` flag (Go's flag package: -source X, -source=X, --source X, --source=X). */
export function sourceFlag(argv: readonly string[]): { source: string; local: boolean } {
  let source = 'github';
  let local = false;
  for (let i = 0; i < argv.length; i++) {
    const m = /^--?(source|local)(?:=(.*))?$/.exec(argv[i] ?? '');
    if (m === null) continue;
    // Go's strconv.ParseBool spellings of true.
    if (m[1] === 'local')
      local = m[2] === undefined || ['1', 't', 'T', 'true', 'TRUE', 'True'].includes(m[2]);
    else if (m[2] !== undefined) source = m[2];
    else source = argv[++i] ?? source;
  }
  return { source, local };
}

/** A Secret's value (data is base64, as the API returns it). */
function decode(data: Readonly<Record<string, string>>, key: string): string | undefined {
  const raw = data[key];
  return raw === undefined ? undefined : Buffer.from(raw, 'base64').toString('utf8');
}

/**
 * One environment variable of the manager container as CSO sees it: env (last one wins, as in
 * Kubernetes) over envFrom. Secrets are looked up in `secrets` (data base64, as from the API).
 */
function setting(container: Obj, namespace: string, env: string, secrets: SecretData): Setting {
  const credential = CREDENTIAL_ENVS.has(env);
  const known = (value: string | undefined, origin: SettingOrigin): Setting =>
    credential
      ? { env, origin, ...(value === undefined ? {} : { set: value !== '' }) }
      : { env, origin, ...(value === undefined ? {} : { value }) };
  const entry = arr(container.env)
    .map(rec)
    .filter((e) => e.name === env)
    .at(-1);
  if (entry !== undefined) {
    const ref = rec(rec(entry.valueFrom).secretKeyRef);
    const name = str(ref.name);
    const key = str(ref.key);
    if (name !== undefined && key !== undefined) {
      const data = secrets.get(`${namespace}/${name}`);
      return known(data === undefined ? undefined : (decode(data, key) ?? ''), {
        from: 'secret',
        namespace,
        name,
        key,
      });
    }
    const valueFrom = rec(entry.valueFrom);
    const configMap = rec(valueFrom.configMapKeyRef);
    if (str(configMap.name) !== undefined)
      return known(undefined, {
        from: 'other',
        what: `ConfigMap ${named(namespace)}/${named(String(configMap.name))} key ${named(String(configMap.key))}`,
      });
    if (Object.keys(valueFrom).length > 0)
      return known(undefined, {
        from: 'other',
        what: `valueFrom ${Object.keys(valueFrom).map(named).join(', ')}`,
      });
    return known(str(entry.value) ?? '', { from: 'literal' });
  }
  // Later envFrom sources win; each gives the variables <prefix><key>.
  for (const from of arr(container.envFrom).map(rec).reverse()) {
    const prefix = str(from.prefix) ?? '';
    if (!env.startsWith(prefix)) continue;
    const key = env.slice(prefix.length);
    const configMap = str(rec(from.configMapRef).name);
    if (configMap !== undefined)
      return known(undefined, {
        from: 'other',
        what: `envFrom ConfigMap ${named(namespace)}/${named(configMap)}`,
      });
    const name = str(rec(from.secretRef).name);
    if (name === undefined) continue;
    const data = secrets.get(`${namespace}/${name}`);
    if (data !== undefined && data[key] === undefined) continue;
    return known(data === undefined ? undefined : decode(data, key), {
      from: 'secret',
      namespace,
      name,
      key,
    });
  }
  return credential ? { env, origin: { from: 'unset' }, set: false } : { env, origin: { from: 'unset' } };
}

function describeOrigin(s: Setting): string {
  const o = s.origin;
  if (o.from === 'secret') return `Secret ${named(o.namespace)}/${named(o.name)} key ${named(o.key)}`;
  if (o.from === 'other') return o.what;
  return o.from === 'literal' ? `the Deployment's env ${s.env}` : `${s.env} (unset)`;
}

/** A setting's value for a message: quoted, or only where it lives when that is a Secret. */
function shownValue(s: Setting): string {
  return s.origin.from === 'secret' ? `(the value of ${describeOrigin(s)})` : quote(s.value ?? '');
}

/** `{[field]: where}` when the setting was read from a Secret (its value then stays unprinted). */
function fromSecret<K extends string>(field: K, s: Setting): Partial<Record<K, string>> {
  return s.origin.from === 'secret' ? ({ [field]: describeOrigin(s) } as Record<K, string>) : {};
}

/** A non-credential setting's value, or the problem of not knowing it. */
function required(s: Setting, problems: string[]): string | undefined {
  if (s.value !== undefined && s.value !== '') return s.value;
  problems.push(
    s.origin.from === 'other'
      ? `${s.env} comes from ${describeOrigin(s)}, which convert does not read: name the releases with --git-url, or set it in a Secret`
      : s.value === undefined && s.origin.from === 'secret'
        ? `${s.env} comes from ${describeOrigin(s)}, which is not in the input: pass that Secret too (-f) or use --from-cluster`
        : `${s.env} is not set in CSO's Deployment: CSO itself cannot list releases`,
  );
  return undefined;
}

/** The release source CSO's Deployment reads (pkg/assetsclient/github and oci of CSO). */
export function csoReleaseSource(
  deployment: Obj,
  secrets: SecretData,
): { source?: CsoReleaseSource; problems: string[] } {
  const problems: string[] = [];
  const namespace = str(rec(deployment.metadata).namespace) ?? 'default';
  const container = managerContainer(deployment);
  if (container === undefined) return { problems: ["CSO's Deployment has no containers"] };
  const argv = [...arr(container.command), ...arr(container.args)].flatMap((a) =>
    typeof a === 'string' ? [a] : [],
  );
  const { source, local } = sourceFlag(argv);
  if (local)
    problems.push(
      'CSO runs with -local (releases from its local disk): there is no release source to convert',
    );
  const get = (env: string) => setting(container, namespace, env, secrets);
  if (source === 'github') {
    const provider = get('GIT_PROVIDER');
    const owner = required(get('GIT_ORG_NAME'), problems);
    const repo = required(get('GIT_REPOSITORY_NAME'), problems);
    const providerName = required(provider, problems);
    if (providerName !== undefined && providerName !== 'github')
      problems.push(`GIT_PROVIDER is ${shownValue(provider)}: CSO supports only github`);
    if (problems.length > 0 || owner === undefined || repo === undefined) return { problems };
    return { source: { kind: 'github', owner, repo, token: get('GIT_ACCESS_TOKEN') }, problems };
  }
  if (source === 'oci') {
    const registrySetting = get('OCI_REGISTRY');
    const repositorySetting = get('OCI_REPOSITORY');
    const registry = required(registrySetting, problems);
    const repository = required(repositorySetting, problems);
    if (problems.length > 0 || registry === undefined || repository === undefined) return { problems };
    return {
      source: {
        kind: 'oci',
        registry,
        repository,
        ...fromSecret('repositoryFrom', repositorySetting),
        ...fromSecret('registryFrom', registrySetting),
        credentials: {
          username: get('OCI_USERNAME'),
          password: get('OCI_PASSWORD'),
          token: get('OCI_ACCESS_TOKEN'),
        },
      },
      problems,
    };
  }
  return { problems: [`CSO's -source is ${quote(source)}: CSO knows only github and oci`] };
}

export interface ConvertOptions {
  /** The release source CSO reads (csoReleaseSource); overridden by `git`. */
  source?: CsoReleaseSource;
  /** CSO's source was found but cannot be converted (reported by csoReleaseSource): not reported again per stack. */
  sourceReported?: boolean;
  /** Releases read from this Git repository instead (CSO's releases mirrored as Git tags). */
  git?: { url: string };
  /** spec.source.path of every output (the stack's folder in a Git tree). */
  path?: string;
  /** Name of the Secret (in each ClusterStack's namespace) that the user creates with the credentials. */
  secretName: string;
}

export interface Conversion {
  objects: ClusterStack[];
  /** Not expressible: the CLI prints them on stderr and exits 2. */
  problems: string[];
  /** Steps for the user (e.g. a Secret to create); not errors. */
  notes: string[];
}

/** CSO ClusterStacks of the documents (also inside List kinds). */
export function csoClusterStacks(docs: readonly unknown[]): Obj[] {
  return docs.flatMap((d) => {
    if (!isRecord(d)) return [];
    if (typeof d.kind === 'string' && d.kind.endsWith('List') && Array.isArray(d.items))
      return csoClusterStacks(d.items);
    return d.apiVersion === CSO_API_VERSION && d.kind === 'ClusterStack' ? [d] : [];
  });
}

const OCI_PREFIX = 'oci://';
/** <host[:port]>/<path> with the distribution spec's path components (oras remote.NewRepository). */
const OCI_REFERENCE =
  /^(\[[0-9a-fA-F:]+\]|[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*)(:[0-9]+)?(\/[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*)+$/;

/** spec.source of the output, and what the user has to do for its credentials. */
function convertSource(
  options: ConvertOptions,
  namespace: string,
  problems: string[],
  notes: string[],
): ClusterStackSource | undefined {
  const path = options.path !== undefined && options.path !== '' ? { path: options.path } : {};
  if (options.git !== undefined) return { git: { url: options.git.url }, ...path };
  const src = options.source;
  if (src === undefined) {
    if (options.sourceReported === true) problems.push('its release source cannot be converted (above)');
    else
      problems.push(
        "no release source: pass CSO's Deployment and its Secret in -f, use --from-cluster, or name a Git repository with --git-url",
      );
    return undefined;
  }
  const secretRef = { name: options.secretName };
  const create = (keys: Array<[string, Setting]>) => {
    const from = keys.map(([key, s]) => `${key} = the value of ${describeOrigin(s)}`).join(', ');
    notes.push(
      `create Secret ${named(namespace)}/${named(options.secretName)} labelled ${LABEL_SOURCE_CREDENTIALS}=true with ${from} (nothing was copied)`,
    );
  };
  // A credential whose Secret was not in the input may be set: referenced (the Secret is a step).
  const isSet = (s: Setting) => s.set !== false;
  if (src.kind === 'github') {
    if (!isSet(src.token)) return { github: { owner: src.owner, repo: src.repo }, ...path };
    create([['token', src.token]]);
    return { github: { owner: src.owner, repo: src.repo, secretRef }, ...path };
  }
  // OCI_REPOSITORY is the whole reference (registry host included, oras remote.NewRepository);
  // OCI_REGISTRY only scopes the credentials.
  const repository = src.repository.startsWith(OCI_PREFIX)
    ? src.repository.slice(OCI_PREFIX.length)
    : src.repository;
  const host = repository.split('/')[0] ?? '';
  if (!OCI_REFERENCE.test(repository)) {
    problems.push(
      `OCI_REPOSITORY ${src.repositoryFrom !== undefined ? `(the value of ${src.repositoryFrom})` : quote(repository)} is not <registry host>/<repository> (a repository, without tag or digest)`,
    );
    return undefined;
  }
  const creds = (Object.entries(src.credentials) as Array<[string, Setting]>).filter(([, s]) => isSet(s));
  if (creds.length > 0 && host !== src.registry)
    notes.push(
      `OCI_REGISTRY ${src.registryFrom !== undefined ? `(the value of ${src.registryFrom})` : quote(src.registry)} is not the host of OCI_REPOSITORY${src.repositoryFrom !== undefined ? '' : ` (${quote(host)})`}: CSO scopes its credentials to the former, stackflux sends them to the latter`,
    );
  if (creds.some(([key]) => key === 'token'))
    notes.push(
      'OCI_ACCESS_TOKEN: CSO sends it base64-encoded as a bearer token; put the token in the form your registry expects',
    );
  const url = `${OCI_PREFIX}${repository}`;
  if (creds.length === 0) return { oci: { url }, ...path };
  create(creds);
  return { oci: { url, secretRef }, ...path };
}

const KNOWN_SPEC = new Set([
  'provider',
  'name',
  'kubernetesVersion',
  'channel',
  'versions',
  'autoSubscribe',
  'noProvider',
  'providerRef',
]);

/** Names of the ClusterStackReleases (= ClusterClass names, dash form) CSO creates for `versions` (clusterstack.New(...).String()). */
export function csoReleaseName(
  provider: string,
  name: string,
  kubernetesVersion: string,
  version: string,
): string {
  const [major, minor] = kubernetesVersion.split('.').map(Number);
  const custom = /^v(\d+)-(\w+)\.(\w+)$/.exec(version);
  const v =
    custom === null ? `v${Number(version.slice(1))}` : `v${Number(custom[1])}-${custom[2]}-${custom[3]}`;
  return [provider, name, `${major}-${minor}`, v].join('-');
}

function convertOne(
  cso: Obj,
  options: ConvertOptions,
  notes: string[],
): { object?: ClusterStack; problems: string[] } {
  const meta = rec(cso.metadata);
  const spec = rec(cso.spec);
  const name = str(meta.name) ?? '';
  const namespace = str(meta.namespace);
  const problems: string[] = [];
  for (const key of Object.keys(spec))
    if (!KNOWN_SPEC.has(key))
      problems.push(`spec.${named(key)} is not a field of CSO's ClusterStack that stackflux knows`);
  const provider = str(spec.provider) ?? '';
  const stack = str(spec.name) ?? '';
  const kubernetesVersion = str(spec.kubernetesVersion) ?? '';
  const channel = str(spec.channel) ?? 'stable';
  for (const [field, value] of [
    ['provider', provider],
    ['name', stack],
  ] as const)
    if (!new RegExp(TAG_SEGMENT_PATTERN).test(value) || value.length > 20)
      problems.push(
        `spec.${field} ${quote(value)} is not 1-20 lower-case letters and digits (stackflux reads it from release tags)`,
      );
  if (!new RegExp(KUBERNETES_MINOR_PATTERN).test(kubernetesVersion))
    problems.push(`spec.kubernetesVersion ${quote(kubernetesVersion)} is not <major>.<minor>`);
  if (channel !== 'stable' && channel !== 'custom')
    problems.push(`spec.channel ${quote(channel)} is not stable or custom`);
  const versions = arr(spec.versions).map((v) => String(v));
  for (const version of versions) {
    const parsed = parseStackVersion(version);
    if (!parsed.ok) problems.push(`spec.versions: ${parsed.reason}`);
    else if (parsed.value.channel !== channel)
      problems.push(
        `spec.versions: ${named(version)} is a ${parsed.value.channel} version but the channel is ${channel}`,
      );
    else if (problems.length === 0) {
      const tag = parseReleaseTag(formatReleaseTag(provider, stack, kubernetesVersion, version));
      if (!tag.ok) problems.push(`spec.versions: ${named(version)}: release ${tag.reason}`);
    }
  }
  const noProvider = spec.noProvider === true;
  const ref = isRecord(spec.providerRef) ? spec.providerRef : undefined;
  if (!noProvider && ref === undefined)
    problems.push('neither noProvider nor providerRef is set (CSO refuses it too)');
  let providerRef: ClusterStack['spec']['providerRef'];
  if (!noProvider && ref !== undefined) {
    const refNs = str(ref.namespace);
    if (refNs !== undefined && refNs !== '' && refNs !== namespace)
      problems.push(
        `spec.providerRef.namespace ${quote(refNs)} is not the ClusterStack's namespace: stackflux reads the template from the ClusterStack's namespace`,
      );
    const dropped = ['uid', 'resourceVersion', 'fieldPath'].filter((k) => ref[k] !== undefined);
    if (dropped.length > 0)
      notes.push(
        `${named(namespace ?? '')}/${named(name)}: spec.providerRef.${dropped.join(', ')} left out (a template is found by kind and name)`,
      );
    providerRef = {
      ...(str(ref.apiVersion) !== undefined ? { apiVersion: str(ref.apiVersion) } : {}),
      ...(str(ref.kind) !== undefined ? { kind: str(ref.kind) } : {}),
      ...(str(ref.name) !== undefined ? { name: str(ref.name) } : {}),
    };
  }
  const sourceProblems: string[] = [];
  const source = convertSource(options, namespace ?? '<namespace>', sourceProblems, notes);
  problems.push(...sourceProblems);
  if (problems.length > 0 || source === undefined) return { problems };
  const labels = rec(meta.labels) as Record<string, string>;
  return {
    problems,
    object: {
      apiVersion: API_VERSION,
      kind: 'ClusterStack',
      metadata: {
        name,
        ...(namespace !== undefined ? { namespace } : {}),
        ...(Object.keys(labels).length > 0 ? { labels } : {}),
      },
      spec: {
        provider,
        name: stack,
        kubernetesVersion,
        channel: channel as 'stable' | 'custom',
        ...(versions.length > 0 ? { versions } : {}),
        // CSO's default is true as well; written out so the releases do not hang on a default.
        autoSubscribe: spec.autoSubscribe !== false,
        noProvider,
        ...(providerRef !== undefined ? { providerRef } : {}),
        source,
      },
    },
  };
}

/** Converts every CSO ClusterStack of `docs`; sorted by namespace and name. */
export function convertClusterStacks(docs: readonly unknown[], options: ConvertOptions): Conversion {
  const objects: ClusterStack[] = [];
  const problems: string[] = [];
  const notes = new Set<string>();
  const stacks = csoClusterStacks(docs);
  if (stacks.length === 0) problems.push(`no ${CSO_API_VERSION} ClusterStack in the input`);
  for (const cso of stacks) {
    const id = `${named(str(rec(cso.metadata).namespace) ?? '')}/${named(str(rec(cso.metadata).name) ?? '')}`;
    const stackNotes: string[] = [];
    const one = convertOne(cso, options, stackNotes);
    for (const n of stackNotes) notes.add(n);
    problems.push(...one.problems.map((p) => `ClusterStack ${id}: ${p}`));
    if (one.object !== undefined) objects.push(one.object);
  }
  const key = (o: ClusterStack) => `${o.metadata.namespace ?? ''}/${o.metadata.name}`;
  objects.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
  return { objects, problems, notes: [...notes] };
}
