// The installation's render seed key (rendering/determinism.ts) lives in the management cluster: a
// Secret in the controller's namespace, read at start and created when absent (issue 32). Kept in
// the cache folder (an emptyDir in a Pod) it was new after every restart and on every replica, so
// each re-render made new certificates (genCA, …) and committed them. Two replicas starting at once
// both try to create it; the one refused with AlreadyExists reads the winner's, so all use one key.
// A Secret that holds no valid key is an error, never overwritten: a new key rotates every
// generated value of every Cluster, which must be a decision (deleting the Secret), not a fallback.
import { readFileSync, rmSync } from 'node:fs';
import { newRenderSeedKey, parseRenderSeedKey } from '../rendering/determinism.ts';
import { ApiError, isConflict, type KubeClient, type KubeObject } from '../runtime/client.ts';

/** The data key of the Secret holding the render seed key (64 hex digits). */
export const RENDER_SEED_DATA_KEY = 'key';

/** The file the key was kept in before (in the cache folder): read once to seed the Secret. */
export const LEGACY_RENDER_SEED_FILE = 'render-seed.key';

/** The render seed Secret of an installation whose objects are named `controller`. */
export function renderSeedSecretName(controller: string): string {
  return `${controller}-render-seed`;
}

/** The Secret's name for the default installation name (stackflux install --name). */
export const DEFAULT_RENDER_SEED_SECRET = renderSeedSecretName('stackflux-controller');

export interface SecretRef {
  namespace: string;
  name: string;
}

export interface RenderSeedSecret extends KubeObject {
  type?: string;
  immutable?: boolean;
  data?: Record<string, string>;
}

/** `NAMESPACE/NAME`, or undefined when it is not of that form. */
export function parseSecretRef(text: string): SecretRef | undefined {
  const [namespace, name, ...rest] = text.split('/');
  return namespace && name && rest.length === 0 ? { namespace, name } : undefined;
}

export const refText = (ref: SecretRef): string => `${ref.namespace}/${ref.name}`;

/** Where the controller leader-elects when --leader-election-namespace is not given. */
const DEFAULT_CONTROLLER_NAMESPACE = 'flux-system';

/**
 * The render seed Secret of a controller with these flag values (empty: not given): its
 * --render-seed-secret, else DEFAULT_RENDER_SEED_SECRET in its --leader-election-namespace (the
 * namespace it knows as its own). Undefined when --render-seed-secret is not NAMESPACE/NAME.
 */
export function controllerRenderSeedSecret(
  renderSeedSecret: string,
  leaderElectionNamespace: string,
): SecretRef | undefined {
  if (renderSeedSecret !== '') return parseSecretRef(renderSeedSecret);
  return {
    namespace: leaderElectionNamespace || DEFAULT_CONTROLLER_NAMESPACE,
    name: DEFAULT_RENDER_SEED_SECRET,
  };
}

/** The key a Secret holds, or what is wrong with it (never its value: it is a secret). */
export function renderSeedKeyOfSecret(secret: RenderSeedSecret): { key: string } | { problem: string } {
  const encoded = secret.data?.[RENDER_SEED_DATA_KEY];
  if (encoded === undefined) return { problem: `it has no data.${RENDER_SEED_DATA_KEY}` };
  const text = Buffer.from(encoded, 'base64').toString('utf8');
  const key = parseRenderSeedKey(text);
  if (key === undefined)
    return {
      problem: `its data.${RENDER_SEED_DATA_KEY} is not 64 hex digits (32 bytes) but ${text.trim().length} character(s)`,
    };
  return { key };
}

/** Why a Secret is refused, and the two ways out. */
export function malformedSecretMessage(ref: SecretRef, problem: string): string {
  return (
    `render seed Secret ${refText(ref)} holds no usable key: ${problem}. ` +
    `Restore the key it held (64 hex digits in data.${RENDER_SEED_DATA_KEY}), or delete the Secret to have a new one made ` +
    '(every value templates generate — genCA certificates, randAlpha passwords — then changes on the next render)'
  );
}

export class RenderSeedSecretError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'RenderSeedSecretError';
  }
}

/** The Secret holding `key`: immutable, so changing the key is deleting it (a decision), not an edit. */
export function renderSeedSecret(ref: SecretRef, key: string): RenderSeedSecret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: ref.name,
      namespace: ref.namespace,
      labels: { 'app.kubernetes.io/part-of': 'stackflux', 'app.kubernetes.io/component': 'render-seed' },
    },
    type: 'Opaque',
    immutable: true,
    data: { [RENDER_SEED_DATA_KEY]: Buffer.from(key, 'utf8').toString('base64') },
  };
}

/** What the loader does with what it read: use its key, create the Secret with `candidate`, or refuse. */
export type RenderSeedStep = { use: string } | { create: RenderSeedSecret; key: string } | { refuse: string };

export function renderSeedStep(
  read: RenderSeedSecret | undefined,
  ref: SecretRef,
  candidate: () => string,
): RenderSeedStep {
  if (read === undefined) {
    const key = candidate();
    return { create: renderSeedSecret(ref, key), key };
  }
  const held = renderSeedKeyOfSecret(read);
  return 'key' in held ? { use: held.key } : { refuse: malformedSecretMessage(ref, held.problem) };
}

/**
 * Where the key came from: the Secret as it was, created (new or from the legacy file), or
 * another replica's that was created first.
 */
export type RenderSeedOrigin = 'read' | 'created' | 'migrated' | 'created-by-another';

export interface LoadRenderSeedOptions {
  /** The cache folder's old key file: when the Secret is absent, its key seeds it (then it is removed). */
  legacyKeyFile?: string;
  /** A new key (default: 32 random bytes). */
  newKey?: () => string;
}

/** Tries of read → create: a Secret deleted right after another replica created it is read again. */
const LOAD_ATTEMPTS = 3;

/**
 * The installation's render seed key from Secret `ref`, created when absent. Throws
 * RenderSeedSecretError when the Secret holds no key or cannot be read or created.
 */
export async function loadRenderSeedKey(
  client: Pick<KubeClient, 'get' | 'create'>,
  ref: SecretRef,
  o: LoadRenderSeedOptions = {},
): Promise<{ key: string; origin: RenderSeedOrigin }> {
  const legacy = o.legacyKeyFile !== undefined ? legacyKey(o.legacyKeyFile) : undefined;
  const candidate = () => legacy ?? (o.newKey ?? newRenderSeedKey)();
  for (let attempt = 0; attempt < LOAD_ATTEMPTS; attempt++) {
    const read = await apiCall(ref, 'read', () =>
      client.get<RenderSeedSecret>('v1', 'Secret', ref.name, ref.namespace),
    );
    const step = renderSeedStep(read, ref, candidate);
    if ('refuse' in step) throw new RenderSeedSecretError(step.refuse);
    if ('use' in step) {
      removeLegacy(o.legacyKeyFile);
      return { key: step.use, origin: attempt === 0 ? 'read' : 'created-by-another' };
    }
    try {
      await client.create(step.create);
    } catch (err) {
      // AlreadyExists: another replica was first; its key is read on the next round.
      if (isConflict(err)) continue;
      throw apiError(ref, 'create', err);
    }
    removeLegacy(o.legacyKeyFile);
    return { key: step.key, origin: legacy !== undefined ? 'migrated' : 'created' };
  }
  throw new RenderSeedSecretError(
    `render seed Secret ${refText(ref)} existed when created and was gone when read, ${LOAD_ATTEMPTS} times: something deletes it`,
  );
}

/**
 * The key Secret `ref` holds, for a reader that must not create it (the CLI); undefined when the
 * Secret does not exist. Throws RenderSeedSecretError when it holds no key; API errors as they are.
 */
export async function readRenderSeedKey(
  client: Pick<KubeClient, 'get'>,
  ref: SecretRef,
): Promise<string | undefined> {
  const read = await client.get<RenderSeedSecret>('v1', 'Secret', ref.name, ref.namespace);
  if (read === undefined) return undefined;
  const held = renderSeedKeyOfSecret(read);
  if ('problem' in held) throw new RenderSeedSecretError(malformedSecretMessage(ref, held.problem));
  return held.key;
}

/** The key of the cache folder's old key file, when it holds one. */
function legacyKey(file: string): string | undefined {
  try {
    return parseRenderSeedKey(readFileSync(file, 'utf8'));
  } catch {
    return undefined;
  }
}

/** Once the Secret holds the key, the old file must not bring a rotated key back. */
function removeLegacy(file: string | undefined): void {
  if (file !== undefined) rmSync(file, { force: true });
}

async function apiCall<T>(ref: SecretRef, verb: 'read' | 'create', call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    throw apiError(ref, verb, err);
  }
}

function apiError(ref: SecretRef, verb: 'read' | 'create', err: unknown): RenderSeedSecretError {
  const denied = err instanceof ApiError && (err.status === 401 || err.status === 403);
  return new RenderSeedSecretError(
    `cannot ${verb} the render seed Secret ${refText(ref)}: ${err instanceof Error ? err.message : String(err)}` +
      (denied
        ? `; the controller needs get and create on Secrets in namespace ${ref.namespace} (stackflux install's Role <name>-render-seed)`
        : ''),
  );
}
