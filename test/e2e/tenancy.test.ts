// Issue 22 end to end, a tenant must not reach beyond its namespace: one `stackflux run` started
// the way a platform admin locks it down (--default-service-account), against the real test
// environment (kube-apiserver, kustomize-controller, the Git server).
//
// 1. Lockdown: the tenant's ClusterStack names no serviceAccountName and its release's cluster-class/
//    holds a ClusterRoleBinding to cluster-admin. The tenant namespace's ServiceAccount named as the
//    default has only namespace-scoped rights. kustomize-controller is NOT restarted with Flux's own
//    lockdown flags (the environment is shared): stackflux naming the ServiceAccount on the
//    Kustomization is what makes Flux impersonate it, so Flux's forbidden error must reach the
//    release and no ClusterRoleBinding may exist.
// 2. secretRef opt-in: a ClusterStack naming an unlabelled Secret gets SourceReady=False
//    SecretNotAllowed naming the Secret and the label, and no request carrying the Secret's value
//    reaches the URL the tenant chose (a local server recording every Authorization header, and the
//    GitHub fake); once labelled, the Secret is used.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { API_VERSION, LABEL_SOURCE_CREDENTIALS } from '../../controller/api/meta.ts';
import type { KubeObject } from '../../controller/runtime/client.ts';
import { createRepo, type Endpoints } from '../../hack/lib/testenv.ts';
import {
  assertEscalationForbidden,
  ControllerProcess,
  cond,
  controllerSteps,
  createClusterClassOnlyServiceAccount,
  createTestNamespace,
  cutEscalatingRelease,
  deleteTestNamespace,
  e2eSuite,
  ferrolClusterStack,
  initRepo,
  pinnedFerrolStack,
  push,
  waitFor,
} from '../support/e2e.ts';
import { GitHubFake } from '../support/githubfake.ts';

const { env, client, ns, work, repoDir } = e2eSuite('tenancy');
const APPLIER = 'tenant-applier';
const step = controllerSteps(() => controller);
let controller: ControllerProcess | undefined;
let gh: GitHubFake | undefined;

/** A Git-over-HTTP endpoint of the tenant's choosing: asks for Basic auth, records what it gets. */
class RecordingServer {
  readonly authorizations: string[] = [];
  url = '';
  #server: Server | undefined;
  async start(): Promise<void> {
    const server = createServer((req, res) => {
      this.authorizations.push(req.headers.authorization ?? '');
      res.writeHead(401, { 'www-authenticate': 'Basic realm="tenant"' }).end();
    });
    this.#server = server;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    const addr = server.address();
    this.url = `http://127.0.0.1:${typeof addr === 'object' && addr !== null ? addr.port : 0}/stacks.git`;
  }
  async stop(): Promise<void> {
    await new Promise((r) => this.#server?.close(r));
  }
}
const recorder = new RecordingServer();

type Obj = KubeObject & {
  spec: { serviceAccountName?: string };
  status?: { conditions?: Array<{ type: string; status: string; reason?: string; message?: string }> };
};

const secret = (name: string, data: Record<string, string>, labelled: boolean): KubeObject => ({
  apiVersion: 'v1',
  kind: 'Secret',
  metadata: { name, namespace: ns, ...(labelled ? { labels: { [LABEL_SOURCE_CREDENTIALS]: 'true' } } : {}) },
  stringData: data,
});

async function sourceReady(stack: string) {
  return cond(await client.get<Obj>(API_VERSION, 'ClusterStack', stack, ns), 'SourceReady');
}

describe('a tenant does not reach beyond its namespace (issue 22)', { timeout: 10 * 60_000 }, () => {
  let repoUrl = '';

  before(async () => {
    await createTestNamespace(client, ns);
    repoUrl = await createRepo(env as Endpoints, ns);
    initRepo(repoDir);
    await recorder.start();
    gh = await GitHubFake.start();
    controller = await ControllerProcess.start({
      kubeconfig: env.kubeconfig,
      namespace: ns,
      cacheDir: join(work, 'cache'),
      extraArgs: [`--default-service-account=${APPLIER}`, `--github-api-url=${gh.url}`],
    });
  });

  after(async () => {
    await deleteTestNamespace(client, ns);
    await controller?.stop();
    await recorder.stop();
    await gh?.stop();
    client.close();
    rmSync(work, { recursive: true, force: true });
  });

  it("1. --default-service-account: a release's ClusterRoleBinding is forbidden to the tenant's ServiceAccount; Flux's error is on the release", () =>
    step(async () => {
      // The tenant's ServiceAccount, named as the default, may only manage ClusterClasses here.
      await createClusterClassOnlyServiceAccount(client, ns, APPLIER);
      const escalate = `${ns}-escalate`;
      const tag = cutEscalatingRelease(repoDir, 'ferrol-1-30', {
        version: 'v1',
        binding: escalate,
        ns,
        subject: APPLIER,
      });
      push(repoDir, repoUrl, tag);
      // The ClusterStack names no serviceAccountName: only the controller flag stands in the way.
      const stack = pinnedFerrolStack(ns, repoUrl, ['v1']);
      assert.equal(stack.spec.serviceAccountName, undefined);
      await client.create(stack);

      await assertEscalationForbidden(client, ns, { tag, sa: APPLIER, binding: escalate });
    }));

  it('2. a secretRef to an unlabelled Secret: SecretNotAllowed, and its value reaches no server; labelled, it is used', () =>
    step(async () => {
      const password = `tenant-pw-${randomBytes(12).toString('hex')}`;
      const basic = Buffer.from(`victim:${password}`).toString('base64');
      const unlabelledToken = `ghp_victim${randomBytes(12).toString('hex')}`;
      const labelledToken = `ghp_tenant${randomBytes(12).toString('hex')}`;
      assert.ok(gh);
      gh.token = labelledToken;
      gh.releases = [{ tag: 'docker-ghstack-1-30-v1', commit: 'a'.repeat(40) }];
      // Secrets of the namespace the tenant cannot read; only the last is labelled by its owner.
      await client.create(secret('victim-git', { username: 'victim', password }, false));
      await client.create(secret('victim-github', { token: unlabelledToken }, false));
      await client.create(secret('tenant-github', { token: labelledToken }, true));
      const stacks = [
        ferrolClusterStack(ns, 'leak-git', {
          name: 'leakgit',
          interval: '3s',
          source: { git: { url: recorder.url, secretRef: { name: 'victim-git' } }, path: 'x' },
        }),
        ferrolClusterStack(ns, 'leak-github', {
          name: 'leakgh',
          interval: '3s',
          source: { github: { owner: 'acme', repo: 'stacks', secretRef: { name: 'victim-github' } } },
        }),
        ferrolClusterStack(ns, 'allowed-github', {
          name: 'ghstack',
          interval: '3s',
          source: { github: { owner: 'acme', repo: 'stacks', secretRef: { name: 'tenant-github' } } },
        }),
      ];
      for (const s of stacks) await client.create(s);

      for (const [stack, name] of [
        ['leak-git', 'victim-git'],
        ['leak-github', 'victim-github'],
      ] as const) {
        const c = await waitFor(`${stack}: SourceReady=False SecretNotAllowed`, async () => {
          const s = await sourceReady(stack);
          return s?.reason === 'SecretNotAllowed' ? s : undefined;
        });
        assert.equal(c.status, 'False');
        assert.match(
          c.message ?? '',
          new RegExp(`Secret ${ns}/${name} is not labelled ${LABEL_SOURCE_CREDENTIALS}`),
        );
        assert.ok(!(c.message ?? '').includes(password) && !(c.message ?? '').includes(unlabelledToken));
      }
      await waitFor('the labelled Secret lists the GitHub source', async () =>
        (await sourceReady('allowed-github'))?.status === 'True' ? true : undefined,
      );
      assert.ok(
        gh.log.some((r) => r.authorization.includes(labelledToken)),
        'the labelled token was sent',
      );
      assert.deepEqual(
        gh.log.filter((r) => r.authorization.includes(unlabelledToken)),
        [],
        'the unlabelled token reached the GitHub API',
      );
      assert.deepEqual(
        recorder.authorizations.filter((a) => a.includes(basic) || a.includes(password)),
        [],
        'the unlabelled password reached the URL the tenant chose',
      );

      // The same Secret once its owner labels it: stackflux sends it (so the recorder would see a leak).
      await client.mergePatch('v1', 'Secret', 'victim-git', ns, {
        metadata: { labels: { [LABEL_SOURCE_CREDENTIALS]: 'true' } },
      });
      await waitFor('the labelled password is sent to the source', async () =>
        recorder.authorizations.some((a) => a.includes(basic)) ? true : undefined,
      );
      await waitFor('SourceReady no longer SecretNotAllowed', async () => {
        const s = await sourceReady('leak-git');
        return s !== undefined && s.reason !== 'SecretNotAllowed' ? s : undefined;
      });
    }));
});
