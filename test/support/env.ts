// What integration and end-to-end tests know about the running test environment. `npm test`
// starts it (hack/run-tests.ts) and passes its addresses as environment variables.
import { KubeConfig, KubernetesObjectApi } from '@kubernetes/client-node';
import type { Endpoints } from '../../hack/lib/testenv.ts';

export type { Endpoints };

function required(name: string): string {
  const value = process.env[name];
  if (!value) {
    throw new Error(
      `${name} is not set: this test needs the real test environment. Run it through "npm test" ` +
        '(which starts hack/testenv), or "hack/testenv up" and source the env.sh it prints.',
    );
  }
  return value;
}

export function testEnv(): Endpoints {
  return {
    stateDir: required('STACKFLUX_TESTENV_DIR'),
    kubeconfig: required('KUBECONFIG'),
    workloadKubeconfig: required('WORKLOAD_KUBECONFIG'),
    workloadClusterName: required('WORKLOAD_CLUSTER_NAME'),
    workloadNamespace: required('WORKLOAD_CLUSTER_NAMESPACE'),
    gitServerUrl: required('GIT_SERVER_URL'),
    gitServerAuthUrl: required('GIT_SERVER_AUTH_URL'),
    gitServerUser: required('GIT_SERVER_USER'),
    gitServerPassword: required('GIT_SERVER_PASSWORD'),
    sourceControllerStorage: required('FLUX_SOURCE_CONTROLLER_STORAGE'),
    sourceControllerHealth: required('FLUX_SOURCE_CONTROLLER_HEALTH'),
    kustomizeControllerHealth: required('FLUX_KUSTOMIZE_CONTROLLER_HEALTH'),
    capiCrds: required('CAPI_CRDS'),
    etcdUrl: required('ETCD_URL'),
    helmControllerHealth: process.env.FLUX_HELM_CONTROLLER_HEALTH,
    binDir: process.env.TESTENV_BIN_DIR,
    registry: process.env.STACKFLUX_TESTENV_REGISTRY,
    registryCa: process.env.STACKFLUX_TESTENV_REGISTRY_CA,
  };
}

export function kubeConfigFrom(file: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(file);
  return kc;
}

/** Object API clients for the management and workload clusters. */
export function clients(env = testEnv()): {
  mgmt: KubernetesObjectApi;
  workload: KubernetesObjectApi;
  mgmtConfig: KubeConfig;
} {
  const mgmtConfig = kubeConfigFrom(env.kubeconfig);
  return {
    mgmt: KubernetesObjectApi.makeApiClient(mgmtConfig),
    workload: KubernetesObjectApi.makeApiClient(kubeConfigFrom(env.workloadKubeconfig)),
    mgmtConfig,
  };
}

/** Polls fn until it returns a value other than undefined; the error names what was awaited and the last observation. */
export async function eventually<T>(
  what: string,
  fn: () => Promise<T | undefined>,
  { timeoutMs = 300_000, intervalMs = 500 }: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await fn();
      if (value !== undefined) return value;
      last = 'not yet';
    } catch (err) {
      last = err instanceof Error ? err.message : err;
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  throw new Error(`timed out after ${timeoutMs / 1000}s waiting for ${what}; last: ${String(last)}`);
}

let counter = 0;
/** A namespace name unique to this test process, so test files can share one cluster. */
export function uniqueName(prefix: string): string {
  counter += 1;
  return `${prefix}-${process.pid}-${counter}`;
}
