// Issue 11 end to end, release side: `stackflux run` as a subprocess against the real test
// environment. A release tag force-moved after validation is never applied (defect 4), and a
// release holding a symbolic link is InvalidRelease naming the path (defect 1). Steps run in order.
// Issue 22: a release whose tree holds an entry named `..` is InvalidRelease naming the path and
// makes the controller run nothing (the controller runs with HOME at its cache folder, as the
// image did, where the `..` path planted a git config).
import assert from 'node:assert/strict';
import { existsSync, readdirSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { KubeObject } from '../../controller/runtime/client.ts';
import { createRepo, type Endpoints } from '../../hack/lib/testenv.ts';
import { CraftedRepo } from '../support/crafted-tree.ts';
import {
  assertEscalationForbidden,
  ControllerProcess,
  cond,
  controllerSteps,
  createClusterClassOnlyServiceAccount,
  createTestNamespace,
  cutEscalatingRelease,
  cutRelease,
  deleteTestNamespace,
  e2eSuite,
  ferrolTag,
  git,
  initRepo,
  pinnedFerrolStack,
  push,
  waitFor,
} from '../support/e2e.ts';

const { env, client, ns, work, repoDir, cskr, releaseReady, clusterClass } = e2eSuite('release-hardening');
let controller: ControllerProcess | undefined;

type Flux = KubeObject & {
  spec: { ref?: Record<string, string> };
  status?: { lastHandledReconcileAt?: string; lastAppliedRevision?: string };
};

const step = controllerSteps(() => controller);

describe('release hardening: pinned commits and release trees from Git objects', {
  timeout: 10 * 60_000,
}, () => {
  let repoUrl = '';

  before(async () => {
    await createTestNamespace(client, ns);
    repoUrl = await createRepo(env as Endpoints, ns);
    initRepo(repoDir);
    cutRelease(repoDir, 'ferrol-1-30', { example: 'docker-ferrol-1-30', k8s: '1-30', version: 'v1' });
    push(repoDir, repoUrl, ferrolTag('v1'));
    controller = await ControllerProcess.start({
      kubeconfig: env.kubeconfig,
      namespace: ns,
      cacheDir: join(work, 'cache'),
      // As the image had it before issue 22: HOME is the release cache.
      env: { HOME: join(work, 'cache') },
    });
    await client.create(pinnedFerrolStack(ns, repoUrl, ['v1', 'v2']));
  });

  after(async () => {
    await deleteTestNamespace(client, ns);
    await controller?.stop();
    client.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('1. a force-moved tag: Flux keeps applying the validated commit, the release reports TagMoved', () =>
    step(async () => {
      const v1 = await waitFor('v1 Ready', () => releaseReady(ferrolTag('v1')));
      const validated = v1.status?.commit ?? '';
      assert.match(validated, /^[0-9a-f]{40}$/);
      assert.match(v1.status?.lastAppliedRevision ?? '', new RegExp(`@sha1:${validated}$`));

      // The moved tag's commit adds an object to cluster-class/ that must never reach the cluster.
      writeFileSync(
        join(repoDir, 'ferrol-1-30', 'cluster-class', 'unvalidated.yaml'),
        'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: unvalidated-content\ndata: {a: b}\n',
      );
      git(repoDir, 'add', '-A');
      git(repoDir, 'commit', '-q', '-m', 'unvalidated change');
      git(repoDir, 'tag', '-f', ferrolTag('v1'));
      git(repoDir, 'push', '-q', '-f', repoUrl, 'main', `refs/tags/${ferrolTag('v1')}`);
      const moved = git(repoDir, 'rev-parse', 'HEAD');

      const reported = await waitFor(
        'v1 reports TagMoved',
        async () => {
          const r = await cskr(ferrolTag('v1'));
          return cond(r, 'Ready')?.reason === 'TagMoved' ? r : undefined;
        },
        { timeoutMs: 120_000 },
      );
      assert.equal(cond(reported, 'Ready')?.status, 'False');
      assert.match(
        cond(reported, 'Ready')?.message ?? '',
        new RegExp(`now points at ${moved}, not at the validated commit ${validated}`),
      );
      assert.equal(reported.status?.commit, validated, 'the pin stays');
      const repo = await client.get<Flux>(
        'source.toolkit.fluxcd.io/v1',
        'GitRepository',
        ferrolTag('v1'),
        ns,
      );
      assert.deepEqual(repo?.spec.ref, { name: `refs/tags/${ferrolTag('v1')}`, commit: validated });

      // Make Flux fetch and apply again now, and wait until it has handled exactly that request.
      const token = `moved-${Date.now()}`;
      for (const [apiVersion, kind] of [
        ['source.toolkit.fluxcd.io/v1', 'GitRepository'],
        ['kustomize.toolkit.fluxcd.io/v1', 'Kustomization'],
      ] as const) {
        await client.mergePatch(apiVersion, kind, ferrolTag('v1'), ns, {
          metadata: { annotations: { 'reconcile.fluxcd.io/requestedAt': token } },
        });
      }
      const ks = await waitFor('Kustomization v1 handled the reconcile request', async () => {
        const k = await client.get<Flux>(
          'kustomize.toolkit.fluxcd.io/v1',
          'Kustomization',
          ferrolTag('v1'),
          ns,
        );
        return k?.status?.lastHandledReconcileAt === token ? k : undefined;
      });
      assert.equal(ks.status?.lastAppliedRevision, `refs/tags/${ferrolTag('v1')}@sha1:${validated}`);
      assert.equal(await client.get('v1', 'ConfigMap', 'unvalidated-content', ns), undefined);
      assert.ok(await clusterClass(ferrolTag('v1')), 'the validated ClusterClass stays applied');
    }));

  it('2. a release holding a symbolic link is InvalidRelease naming the path; nothing is applied', () =>
    step(async () => {
      cutRelease(repoDir, 'ferrol-1-30', {
        example: 'docker-ferrol-1-30',
        k8s: '1-30',
        version: 'v2',
        edit: (dir) => symlinkSync('/etc/hostname', join(dir, 'cluster-addon', 'cni', 'leak.yaml')),
      });
      push(repoDir, repoUrl, ferrolTag('v2'));
      const v2 = await waitFor('v2 Ready=False', async () => {
        const r = await cskr(ferrolTag('v2'));
        return cond(r, 'Ready')?.status === 'False' ? r : undefined;
      });
      assert.equal(cond(v2, 'Ready')?.reason, 'InvalidRelease');
      assert.match(
        cond(v2, 'Ready')?.message ?? '',
        /ferrol-1-30\/cluster-addon\/cni\/leak\.yaml is a symbolic link/,
      );
      assert.equal(
        await client.get('kustomize.toolkit.fluxcd.io/v1', 'Kustomization', ferrolTag('v2'), ns),
        undefined,
      );
      assert.equal(
        await client.get('source.toolkit.fluxcd.io/v1', 'GitRepository', ferrolTag('v2'), ns),
        undefined,
      );
    }));

  // Issue 11 defect 5: cluster-class/ applied as a least-privilege ServiceAccount.
  it("3. a release applied as a least-privilege ServiceAccount cannot create a ClusterRoleBinding; Flux's error is on the release", () =>
    step(async () => {
      const sa = 'release-applier';
      await createClusterClassOnlyServiceAccount(client, ns, sa);
      const escalate = `${ns}-escalate`;
      const locked = cutEscalatingRelease(repoDir, 'locked-1-30', {
        name: 'locked',
        version: 'v1',
        binding: escalate,
        ns,
        subject: sa,
      });
      push(repoDir, repoUrl, locked);
      const stack = pinnedFerrolStack(ns, repoUrl, ['v1']);
      await client.create({
        ...stack,
        metadata: { name: 'locked', namespace: ns },
        spec: {
          ...stack.spec,
          name: 'locked',
          serviceAccountName: sa,
          source: { git: { url: repoUrl }, path: 'locked-1-30' },
        },
      });
      await assertEscalationForbidden(client, ns, { tag: locked, sa, binding: escalate });
    }));

  // Issue 22 row 1: git's fsck only warns about a tree entry named `..`, and a fetch does not
  // fsck; the entry chain below puts `.gitconfig` three folders above the stack folder, which
  // was the cache folder (HOME) when the release cache was written unchecked.
  it('4. a release tree with a ".." entry is InvalidRelease naming the path; no planted command runs; a later normal tag works', () =>
    step(async () => {
      const marker = join(work, 'planted-command-ran');
      const payload = `[protocol "ext"]\n\tallow = always\n[url "ext::sh -c touch% ${marker}% #"]\n\tinsteadOf = http://\n\tinsteadOf = https://\n`;
      const hostile = cutRelease(repoDir, 'hostile-1-30', {
        example: 'docker-ferrol-1-30',
        name: 'hostile',
        k8s: '1-30',
        version: 'v1',
      });
      const crafted = new CraftedRepo(repoDir);
      const up = (entries: ReturnType<CraftedRepo['file']>[]) => crafted.dir('..', entries);
      crafted.withExtra(
        git(repoDir, 'rev-parse', 'HEAD'),
        'hostile-1-30',
        [up([up([up([crafted.file('.gitconfig', payload)])])])],
        hostile,
      );
      git(repoDir, 'push', '-q', '-f', repoUrl, `refs/tags/${hostile}`);
      const stack = pinnedFerrolStack(ns, repoUrl, ['v1', 'v2']);
      await client.create({
        ...stack,
        metadata: { name: 'hostile', namespace: ns },
        spec: { ...stack.spec, name: 'hostile', source: { git: { url: repoUrl }, path: 'hostile-1-30' } },
      });
      const invalid = await waitFor('the crafted release reports InvalidRelease', async () => {
        const r = await cskr(hostile);
        return cond(r, 'Ready')?.status === 'False' ? r : undefined;
      });
      assert.equal(cond(invalid, 'Ready')?.reason, 'InvalidRelease', cond(invalid, 'Ready')?.message);
      assert.match(
        cond(invalid, 'Ready')?.message ?? '',
        /path "hostile-1-30\/\.\.\/\.\.\/\.\.\/\.gitconfig" has a "\.\." component/,
      );

      // A normal later tag: listed, fetched and applied by the same controller's git.
      const next = cutRelease(repoDir, 'hostile-1-30', {
        example: 'docker-ferrol-1-30',
        name: 'hostile',
        k8s: '1-30',
        version: 'v2',
      });
      push(repoDir, repoUrl, next);
      await waitFor('the next normal release is Ready', () => releaseReady(next));
      assert.equal(existsSync(marker), false, 'the planted command never ran');
      const planted = readdirSync(work, { recursive: true, encoding: 'utf8' }).filter((p) =>
        p.endsWith('.gitconfig'),
      );
      assert.deepEqual(planted, [], 'no .gitconfig was written anywhere');
    }));
});
