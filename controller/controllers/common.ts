// Helpers shared by the live controllers: comparisons that avoid no-op writes, owner lookups,
// and Secret → git credentials.
import { isDeepStrictEqual } from 'node:util';
import { LABEL_ALLOW_PLAIN_HTTP, LABEL_SOURCE_CREDENTIALS } from '../api/meta.ts';
import type { KubeClient, KubeObject } from '../runtime/client.ts';
import type { GitCredentials } from '../sources/git.ts';
import { SourceError } from '../sources/git.ts';

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Every field of want is in have with an equal value (objects compared key by key, in any order). */
export function isSubset(want: unknown, have: unknown): boolean {
  if (isRecord(want)) {
    if (!isRecord(have)) return false;
    return Object.entries(want).every(([k, v]) => isSubset(v, have[k]));
  }
  if (Array.isArray(want)) {
    if (!Array.isArray(have) || have.length !== want.length) return false;
    return want.every((v, i) => isSubset(v, have[i]));
  }
  return isDeepStrictEqual(want, have);
}

/** Deep equality ignoring key order (JSON values). */
export function sameJson(a: unknown, b: unknown): boolean {
  return isSubset(a, b) && isSubset(b, a);
}

/** Whether applying desired would change existing (labels, owner references and spec). */
export function needsApply(existing: KubeObject | undefined, desired: KubeObject): boolean {
  if (existing === undefined) return true;
  const { metadata, ...rest } = desired;
  const { ownerReferences, labels, annotations } = metadata;
  return !isSubset({ ...rest, metadata: { ownerReferences, labels, annotations } }, existing);
}

/** The Ready condition of a status, if any. */
export function readyCondition(
  status: unknown,
): { status: string; reason?: string; message?: string } | undefined {
  const conditions = isRecord(status) ? status.conditions : undefined;
  if (!Array.isArray(conditions)) return undefined;
  const c: unknown = conditions.find((x: unknown) => isRecord(x) && x.type === 'Ready');
  if (!isRecord(c) || typeof c.status !== 'string') return undefined;
  return {
    status: c.status,
    ...(typeof c.reason === 'string' ? { reason: c.reason } : {}),
    ...(typeof c.message === 'string' ? { message: c.message } : {}),
  };
}

/** "namespace/name" of the controller owner of kind, if any. */
export function ownerKey(obj: KubeObject, kind: string): string | undefined {
  const owner = obj.metadata.ownerReferences?.find((o) => o.kind === kind && o.controller === true);
  if (owner === undefined) return undefined;
  const ns = obj.metadata.namespace;
  return ns ? `${ns}/${owner.name}` : owner.name;
}

interface SecretObject extends KubeObject {
  data?: Record<string, string>;
}

async function getSecret(client: KubeClient, namespace: string, name: string): Promise<SecretObject> {
  const secret = await client.get<SecretObject>('v1', 'Secret', name, namespace);
  if (secret === undefined) {
    throw new SourceError(
      'SecretNotFound',
      `Secret ${namespace}/${name} referenced by the source does not exist`,
    );
  }
  return secret;
}

/**
 * Git credentials from a Secret with the keys of a Flux GitRepository secret: username/password,
 * or a bearerToken / token (GitHub) used as the password. Read directly (Secrets are not cached).
 * For Secrets the platform admin names (--fleet-secret); a tenant's secretRef goes through
 * sourceSecretCredentials.
 */
export async function secretCredentials(
  client: KubeClient,
  namespace: string,
  name: string,
): Promise<GitCredentials> {
  return credentialsOf(await getSecret(client, namespace, name), namespace, name);
}

/**
 * The credentials of a ClusterStack's secretRef: only a Secret labelled
 * stackflux.io/source-credentials: "true". stackflux sends them to the URL the ClusterStack names,
 * so without the opt-in anyone who may create a ClusterStack could send any Secret of the namespace
 * (one they cannot read) to a server of theirs. The label is checked on the Secret read for the
 * request (Secrets are not cached), so removing it stops the next use. The error names the Secret
 * and the label, never a value.
 */
export async function sourceSecretCredentials(
  client: KubeClient,
  namespace: string,
  name: string,
): Promise<GitCredentials> {
  const secret = await getSecret(client, namespace, name);
  if (secret.metadata.labels?.[LABEL_SOURCE_CREDENTIALS] !== 'true') {
    throw new SourceError(
      'SecretNotAllowed',
      `Secret ${namespace}/${name} is not labelled ${LABEL_SOURCE_CREDENTIALS}: "true"; stackflux sends a source's Secret only when its owner allows it (kubectl label secret -n ${namespace} ${name} ${LABEL_SOURCE_CREDENTIALS}=true)`,
    );
  }
  const creds = credentialsOf(secret, namespace, name);
  // Read here, applied where the transport is known (sources/releasetree.ts plainHttpRefusal).
  creds.secret = `${namespace}/${name}`;
  if (secret.metadata.labels?.[LABEL_ALLOW_PLAIN_HTTP] === 'true') creds.allowPlainHttp = true;
  return creds;
}

function credentialsOf(secret: SecretObject, namespace: string, name: string): GitCredentials {
  const data = secret.data ?? {};
  const dec = (k: string): string | undefined =>
    data[k] !== undefined ? Buffer.from(data[k], 'base64').toString('utf8') : undefined;
  const username = dec('username');
  const password = dec('password');
  if (password !== undefined) return { username: username ?? 'git', password };
  const token = dec('bearerToken') ?? dec('token');
  if (token !== undefined) return { username: username ?? 'x-access-token', password: token, token };
  // A kubernetes.io/dockerconfigjson Secret: which entry applies depends on the registry (oci.ts).
  const dockerConfigJson = dec('.dockerconfigjson');
  if (dockerConfigJson !== undefined) return { dockerConfigJson };
  throw new SourceError(
    'InvalidSecret',
    `Secret ${namespace}/${name} has neither username/password, token nor .dockerconfigjson (ssh keys are not supported for listing yet)`,
  );
}
