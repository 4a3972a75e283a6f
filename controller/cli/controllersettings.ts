// The installed controller's settings for the CLI a person types against a live cluster, as
// `flux` reads its install: `stackflux preview` and `diff` compare with the fleet branches the
// controller writes, so they take its --fleet-url, --fleet-branch-prefix and --fleet-secret from
// its Deployment (labelled by `stackflux install` and the Helm chart, in --controller-namespace,
// flux-system by default as for install) unless given, and say where they found them. They also
// read the installation's render seed key from the Secret the controller uses, so the random values
// a preview's templates generate (genCA, randAlpha, …) are the ones the controller commits.
import {
  controllerRenderSeedSecret,
  DEFAULT_RENDER_SEED_SECRET,
  parseSecretRef,
  readRenderSeedKey,
  refText,
  type SecretRef,
} from '../controllers/renderseed.ts';
import { ApiError, type KubeClient, type KubeObject } from '../runtime/client.ts';
import { type CommandIO, type FlagValues, UsageError } from './command.ts';

/** Where `stackflux install` puts the controller unless told otherwise. */
export const DEFAULT_CONTROLLER_NAMESPACE = 'flux-system';

/** The flag of preview and diff naming the controller's namespace. */
export const controllerNamespaceFlag = {
  'controller-namespace': {
    type: 'string' as const,
    description: `namespace of the installed controller whose --fleet-url, --fleet-branch-prefix and --fleet-secret are used when --fleet-url is not given, and whose render seed Secret is read (default: ${DEFAULT_CONTROLLER_NAMESPACE})`,
  },
};

/** The flag of preview and diff naming the installation's render seed Secret. */
export const renderSeedSecretFlag = {
  'render-seed-secret': {
    type: 'string' as const,
    description: `NAMESPACE/NAME of the installation's render seed Secret, read so the values templates generate (genCA, randAlpha, …) are the controller's (default: the installed controller's --render-seed-secret, else ${DEFAULT_RENDER_SEED_SECRET} in --controller-namespace); unreadable or absent: this process's own key, whose values differ`,
  },
};

/** The flags the CLI takes over from the controller (only those the CLI has too). */
export const INHERITED_FLAGS = ['fleet-url', 'fleet-branch-prefix', 'fleet-secret'] as const;
export type InheritedFlag = (typeof INHERITED_FLAGS)[number];

/** The label `stackflux install` and the chart put on the controller's Deployment. */
export const CONTROLLER_SELECTOR = 'app.kubernetes.io/name=stackflux';

export type ControllerSettings =
  | { found: true; where: string; flags: Partial<Record<InheritedFlag, string>> }
  | { found: false; why: string };

interface Deployment extends KubeObject {
  spec?: { template?: { spec?: { containers?: { name?: string; args?: string[] }[] } } };
}

/** `--name=value` and `--name value` of a container's args (the last one wins, as in the CLI). */
export function argFlags(args: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (let i = 0; i < args.length; i++) {
    const a = args[i] ?? '';
    if (!a.startsWith('--')) continue;
    const eq = a.indexOf('=');
    if (eq > 2) out.set(a.slice(2, eq), a.slice(eq + 1));
    else {
      const next = args[i + 1];
      if (next !== undefined && !next.startsWith('--')) {
        out.set(a.slice(2), next);
        i++;
      } else out.set(a.slice(2), 'true');
    }
  }
  return out;
}

/** The inherited flags of the controllers among `deployments` (every `stackflux run` container). */
export function settingsOf(deployments: readonly Deployment[]): ControllerSettings {
  const found: { where: string; flags: Partial<Record<InheritedFlag, string>> }[] = [];
  for (const d of deployments) {
    for (const c of d.spec?.template?.spec?.containers ?? []) {
      const args = c.args ?? [];
      if (args[0] !== 'run') continue;
      const all = argFlags(args.slice(1));
      const flags: Partial<Record<InheritedFlag, string>> = {};
      for (const f of INHERITED_FLAGS) {
        const v = all.get(f);
        if (v !== undefined && v !== '') flags[f] = v;
      }
      found.push({ where: `Deployment ${d.metadata.namespace ?? ''}/${d.metadata.name ?? ''}`, flags });
    }
  }
  if (found.length === 0)
    return { found: false, why: `no Deployment labelled ${CONTROLLER_SELECTOR} runs \`stackflux run\`` };
  // Shards of one installation share the fleet; controllers that do not are not one answer.
  const [first, ...rest] = found as [(typeof found)[number], ...typeof found];
  const same = rest.every((r) => INHERITED_FLAGS.every((f) => r.flags[f] === first.flags[f]));
  if (!same)
    return {
      found: false,
      why: `the controllers ${found.map((f) => f.where).join(', ')} have different fleet settings; pass them as flags`,
    };
  return { found: true, where: found.map((f) => f.where).join(', '), flags: first.flags };
}

/** The controller Deployments of `namespace`, or why they cannot be listed (no permission). */
async function controllerDeployments(
  client: KubeClient,
  namespace: string,
): Promise<{ items: Deployment[] } | { why: string }> {
  try {
    const list = await client.list<Deployment>('apps/v1', 'Deployment', {
      namespace,
      labelSelector: CONTROLLER_SELECTOR,
    });
    return { items: list.items };
  } catch (err) {
    if (err instanceof ApiError && (err.status === 403 || err.status === 401))
      return {
        why: `Deployments of namespace ${namespace} cannot be listed with these credentials (${err.status})`,
      };
    throw err;
  }
}

/** The installed controller's settings, read from its Deployment(s) in `namespace`. */
export async function readControllerSettings(
  client: KubeClient,
  namespace: string,
): Promise<ControllerSettings> {
  const listed = await controllerDeployments(client, namespace);
  if ('why' in listed) return { found: false, why: listed.why };
  const s = settingsOf(listed.items);
  return s.found ? s : { found: false, why: `${s.why} in namespace ${namespace}` };
}

/**
 * The render seed Secrets the `stackflux run` containers among `deployments` use, each once
 * (resolved as `stackflux run` resolves its flags).
 */
export function renderSeedSecretsOf(deployments: readonly Deployment[]): SecretRef[] {
  const refs = new Map<string, SecretRef>();
  for (const d of deployments)
    for (const c of d.spec?.template?.spec?.containers ?? []) {
      const args = c.args ?? [];
      if (args[0] !== 'run') continue;
      const flags = argFlags(args.slice(1));
      const ref = controllerRenderSeedSecret(
        flags.get('render-seed-secret') ?? '',
        flags.get('leader-election-namespace') ?? '',
      );
      if (ref !== undefined) refs.set(refText(ref), ref);
    }
  return [...refs.values()];
}

/**
 * Where the installation's render seed key is: --render-seed-secret, else the installed
 * controller's, else the default Secret in --controller-namespace.
 */
async function renderSeedSecretFor(client: KubeClient, flags: FlagValues): Promise<SecretRef> {
  const given = typeof flags['render-seed-secret'] === 'string' ? flags['render-seed-secret'] : '';
  if (given !== '') {
    const ref = parseSecretRef(given);
    if (ref === undefined)
      throw new UsageError(`--render-seed-secret must be NAMESPACE/NAME, got "${given}"`);
    return ref;
  }
  const namespace =
    typeof flags['controller-namespace'] === 'string' && flags['controller-namespace'] !== ''
      ? flags['controller-namespace']
      : DEFAULT_CONTROLLER_NAMESPACE;
  const listed = await controllerDeployments(client, namespace);
  const refs = 'items' in listed ? renderSeedSecretsOf(listed.items) : [];
  // Controllers that disagree are not one installation: its default Secret is tried.
  return refs.length === 1 && refs[0] !== undefined
    ? refs[0]
    : { namespace, name: DEFAULT_RENDER_SEED_SECRET };
}

/**
 * The installation's render seed key for a preview or diff, and a note on stderr saying where it
 * came from or why the renders use this process's own key (absent, or not readable with these
 * credentials). A Secret that holds no key is an error, as it is for the controller.
 */
export async function installationRenderSeedKey(
  client: KubeClient,
  flags: FlagValues,
  io: Pick<CommandIO, 'stderr'>,
): Promise<string | undefined> {
  const ref = await renderSeedSecretFor(client, flags);
  const own = "this process's own key: generated values (genCA, randAlpha, …) differ from the controller's";
  let key: string | undefined;
  try {
    key = await readRenderSeedKey(client, ref);
  } catch (err) {
    if (!(err instanceof ApiError && (err.status === 403 || err.status === 401))) throw err;
    io.stderr(
      `render seed Secret ${refText(ref)} cannot be read with these credentials (${err.status}); ${own}\n`,
    );
    return undefined;
  }
  io.stderr(
    key !== undefined
      ? `using the installation's render seed key (Secret ${refText(ref)})\n`
      : `no render seed Secret ${refText(ref)}; ${own}\n`,
  );
  return key;
}

/**
 * The flags with the installed controller's fleet settings where --fleet-url (and --sources-dir)
 * is not given; says on stderr what it took from where. `why`: why nothing was taken.
 */
export async function inheritFleetFlags(
  client: KubeClient,
  flags: FlagValues,
  io: Pick<CommandIO, 'stderr'>,
): Promise<{ flags: FlagValues; why?: string }> {
  const given = (f: string) => typeof flags[f] === 'string' && flags[f] !== '';
  if (given('fleet-url')) return { flags };
  const namespace = given('controller-namespace')
    ? String(flags['controller-namespace'])
    : DEFAULT_CONTROLLER_NAMESPACE;
  const settings = await readControllerSettings(client, namespace);
  const out = withControllerSettings(flags, settings);
  if (out.note !== undefined) io.stderr(`${out.note}\n`);
  return settings.found ? out : { flags, why: settings.why };
}

/**
 * Flag values with the controller's fleet settings where none was given. `note` says what was
 * taken and from where (for stderr); nothing is taken once --fleet-url is given.
 */
export function withControllerSettings<F extends Record<string, unknown>>(
  flags: F,
  settings: ControllerSettings,
): { flags: F; note?: string } {
  const given = (f: string) => typeof flags[f] === 'string' && flags[f] !== '';
  if (!settings.found || given('fleet-url')) return { flags };
  const taken = INHERITED_FLAGS.filter((f) => !given(f) && settings.flags[f] !== undefined);
  if (taken.length === 0) return { flags };
  const out: Record<string, unknown> = { ...flags };
  for (const f of taken) out[f] = settings.flags[f];
  return {
    flags: out as F,
    note: `using the controller's ${taken.map((f) => `--${f}=${settings.flags[f]}`).join(' ')} (from ${settings.where})`,
  };
}
