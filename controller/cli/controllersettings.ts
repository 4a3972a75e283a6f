// The installed controller's settings for the CLI a person types against a live cluster, as
// `flux` reads its install: `stackflux preview` and `diff` compare with the fleet branches the
// controller writes, so they take its --fleet-url, --fleet-branch-prefix and --fleet-secret from
// its Deployment (labelled by `stackflux install` and the Helm chart, in --controller-namespace,
// flux-system by default as for install) unless given, and say where they found them.
import { ApiError, type KubeClient, type KubeObject } from '../runtime/client.ts';
import type { CommandIO, FlagValues } from './command.ts';

/** Where `stackflux install` puts the controller unless told otherwise. */
export const DEFAULT_CONTROLLER_NAMESPACE = 'flux-system';

/** The flag of preview and diff naming the controller's namespace. */
export const controllerNamespaceFlag = {
  'controller-namespace': {
    type: 'string' as const,
    description: `namespace of the installed controller whose --fleet-url, --fleet-branch-prefix and --fleet-secret are used when --fleet-url is not given (default: ${DEFAULT_CONTROLLER_NAMESPACE})`,
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

/** The installed controller's settings, read from its Deployment(s) in `namespace`. */
export async function readControllerSettings(
  client: KubeClient,
  namespace: string,
): Promise<ControllerSettings> {
  try {
    const list = await client.list<Deployment>('apps/v1', 'Deployment', {
      namespace,
      labelSelector: CONTROLLER_SELECTOR,
    });
    const s = settingsOf(list.items);
    return s.found ? s : { found: false, why: `${s.why} in namespace ${namespace}` };
  } catch (err) {
    if (err instanceof ApiError && (err.status === 403 || err.status === 401))
      return {
        found: false,
        why: `Deployments of namespace ${namespace} cannot be listed with these credentials (${err.status})`,
      };
    throw err;
  }
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
