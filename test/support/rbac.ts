// The RBAC that `stackflux install --export` generates, applied for a test namespace, and a
// kubeconfig with a ServiceAccount token bound to it (tests that run the controller without admin).
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { parse, parseAllDocuments, stringify } from 'yaml';
import { GROUP } from '../../controller/api/meta.ts';
import type { KubeClient, KubeObject } from '../../controller/runtime/client.ts';
import { stackflux } from './e2e.ts';
import { eventually } from './env.ts';

/** Field manager of the RBAC objects the tests apply. */
export const FIELD_MANAGER = 'stackflux-test';

/** Applies the install manifests (not the Deployment: no pods run here); returns the ServiceAccount name. */
export async function installGenerated(
  admin: KubeClient,
  ns: string,
): Promise<{ serviceAccount: string; clusterScoped: KubeObject[] }> {
  const out = stackflux(['install', '--export', `--namespace=${ns}`]);
  assert.equal(out.status, 0, out.stderr);
  const objects = parseAllDocuments(out.stdout)
    .map((d) => d.toJS() as KubeObject | null)
    .filter((o): o is KubeObject => o !== null);
  const kinds = objects.map((o) => o.kind);
  for (const k of ['ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding'])
    assert.ok(kinds.includes(k), `install --export has a ${k}`);
  // The cluster-scoped RBAC objects get a per-test suffix so parallel runs do not share them; their
  // rules and subjects are exactly what install generated.
  const suffix = (name: string | undefined) => `${name}-${ns}`;
  const clusterScoped: KubeObject[] = [];
  let serviceAccount = '';
  const crds: string[] = [];
  for (const obj of objects) {
    if (obj.kind === 'Deployment') continue;
    if (obj.kind === 'ClusterRole') obj.metadata.name = suffix(obj.metadata.name);
    if (obj.kind === 'ClusterRoleBinding') {
      obj.metadata.name = suffix(obj.metadata.name);
      const ref = obj.roleRef as { name: string };
      ref.name = suffix(ref.name);
    }
    if (obj.kind === 'ServiceAccount') serviceAccount = obj.metadata.name ?? '';
    if (obj.kind === 'CustomResourceDefinition') crds.push(obj.metadata.name ?? '');
    if (obj.kind === 'ClusterRole' || obj.kind === 'ClusterRoleBinding') clusterScoped.push(obj);
    await admin.apply(obj, { force: true, fieldManager: FIELD_MANAGER });
  }
  // The bound ClusterRole is aggregated (Cluster API's pattern): kube-controller-manager fills its
  // rules from the ClusterRoles labelled stackflux.io/aggregate-to-controller=true.
  const aggregated = clusterScoped.filter((o) => o.kind === 'ClusterRole' && o.aggregationRule !== undefined);
  assert.equal(aggregated.length, 1, 'install --export has one aggregated ClusterRole');
  await aggregatedRulesInclude(admin, aggregated[0]?.metadata.name ?? '', GROUP);
  for (const name of crds)
    await eventually(`CRD ${name} Established`, async () => {
      const got = await admin.get<
        KubeObject & { status?: { conditions?: { type: string; status: string }[] } }
      >('apiextensions.k8s.io/v1', 'CustomResourceDefinition', name);
      return got?.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')
        ? true
        : undefined;
    });
  return { serviceAccount, clusterScoped };
}

/** Waits until the aggregated ClusterRole carries a rule for apiGroup (aggregation is asynchronous). */
export async function aggregatedRulesInclude(
  admin: KubeClient,
  name: string,
  apiGroup: string,
): Promise<void> {
  await eventually(`aggregated ClusterRole ${name} has rules for ${apiGroup}`, async () => {
    const role = await admin.get<KubeObject & { rules?: { apiGroups?: string[] }[] }>(
      'rbac.authorization.k8s.io/v1',
      'ClusterRole',
      name,
    );
    return role?.rules?.some((r) => r.apiGroups?.includes(apiGroup)) ? true : undefined;
  });
}

/** Writes `file`: a kubeconfig with the server and CA of `adminKubeconfig` and a token of the ServiceAccount. */
export async function writeServiceAccountKubeconfig(
  admin: KubeClient,
  ns: string,
  serviceAccount: string,
  adminKubeconfig: string,
  file: string,
): Promise<void> {
  const tr = await admin.request<{ status: { token: string } }>(
    'POST',
    `/api/v1/namespaces/${ns}/serviceaccounts/${serviceAccount}/token`,
    {
      body: {
        apiVersion: 'authentication.k8s.io/v1',
        kind: 'TokenRequest',
        spec: { expirationSeconds: 3600 },
      },
    },
  );
  assert.ok(tr.status.token, 'TokenRequest returned a token');
  const base = parse(readFileSync(adminKubeconfig, 'utf8')) as {
    'current-context': string;
    contexts: { name: string; context: { cluster: string } }[];
    clusters: { name: string; cluster: Record<string, unknown> }[];
  };
  const ctx = base.contexts.find((c) => c.name === base['current-context']);
  const cluster = base.clusters.find((c) => c.name === ctx?.context.cluster);
  assert.ok(cluster, 'the cluster of the current context of $KUBECONFIG');
  writeFileSync(
    file,
    stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'testenv', cluster: cluster.cluster }],
      users: [{ name: serviceAccount, user: { token: tr.status.token } }],
      contexts: [{ name: 'sa', context: { cluster: 'testenv', user: serviceAccount } }],
      'current-context': 'sa',
    }),
    { mode: 0o600 },
  );
}
