// GitFleetWriter against the real smart-HTTP Git server of hack/testenv: one branch per Cluster,
// written with plumbing from a bare cache and pushed atomically with a lease per ref. What the
// remote holds is always read from the outside (ls-remote, or a separate mirror) — never through
// the writer under test.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import type { BranchChange } from '../../../controller/gitops/branches.ts';
import { branchTreeIds } from '../../../controller/gitops/objects.ts';
import {
  receivePackCapabilities,
  SmartHttpError,
  smartHttpPush,
} from '../../../controller/gitops/smart-http.ts';
import { GitFleetWriter, type GitFleetWriterConfig } from '../../../controller/gitops/writer.ts';
import { SourceError } from '../../../controller/sources/git.ts';
import { createRepo, type Endpoints } from '../../../hack/lib/testenv.ts';
import { uniqueName } from '../../support/env.ts';

function required(name: string): string {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set: source the env.sh of a running hack/testenv`);
  return v;
}
const gitServerUrl = required('GIT_SERVER_URL');
const work = mkdtempSync(join(tmpdir(), 'stackflux-writer-'));
after(() => rmSync(work, { recursive: true, force: true }));

const PREFIX = 'stackflux/';

function git(args: string[], cwd = work): string {
  return execFileSync('git', args, {
    cwd,
    encoding: 'utf8',
    env: {
      ...process.env,
      GIT_AUTHOR_NAME: 'other',
      GIT_AUTHOR_EMAIL: 'o@th.er',
      GIT_COMMITTER_NAME: 'other',
      GIT_COMMITTER_EMAIL: 'o@th.er',
    },
  }).trim();
}

/** Branch → tip, as the remote advertises it. */
function remoteTips(url: string): Map<string, string> {
  const tips = new Map<string, string>();
  for (const line of git(['ls-remote', '--heads', url]).split('\n').filter(Boolean)) {
    const [sha, ref] = line.split('\t');
    if (sha && ref) tips.set(ref.replace(/^refs\/heads\//, ''), sha);
  }
  return tips;
}

/** A fresh bare mirror of the remote's branches, for history assertions. */
function mirror(url: string): string {
  const dir = mkdtempSync(join(work, 'mirror-'));
  git(['init', '-q', '--bare', dir]);
  git(['--git-dir', dir, 'fetch', '-q', url, '+refs/heads/*:refs/heads/*']);
  return dir;
}

function commitCount(url: string, branch: string): number {
  return Number(git(['--git-dir', mirror(url), 'rev-list', '--count', `refs/heads/${branch}`]));
}

function subjects(url: string, branch: string): string[] {
  return git(['--git-dir', mirror(url), 'log', '--format=%s', `refs/heads/${branch}`]).split('\n');
}

/** The files of one Cluster's branch: three addons of small YAML, `rev` marks a change. */
function clusterFiles(cluster: string, rev = 1): Map<string, string> {
  return new Map([
    ['cni/kustomization.yaml', `resources:\n- cni.yaml\n`],
    ['cni/cni.yaml', `kind: ConfigMap\nmetadata:\n  name: cni-${cluster}\ndata:\n  rev: "${rev}"\n`],
    ['csi/values.yaml', `cluster: ${cluster}\nreplicas: 2\n`],
    ['metrics/deploy/metrics.yaml', `kind: Deployment\nmetadata:\n  name: metrics\n`],
  ]);
}

function change(cluster: string, rev = 1, message = `render ${cluster} rev ${rev}`): BranchChange {
  return { branch: `${PREFIX}default/${cluster}`, files: clusterFiles(cluster, rev), message };
}

async function newRepo(): Promise<string> {
  return createRepo({ gitServerUrl } as Endpoints, uniqueName('fleetw'));
}

/**
 * Installs a server hook in a repository of the test environment's Git server (its bare
 * repositories are under <state dir>/git), as a host's push rules or server hooks would refuse.
 */
function installHook(repo: string, hook: 'pre-receive' | 'update', script: string): void {
  const file = join(required('STACKFLUX_TESTENV_DIR'), 'git', `${repo}.git`, 'hooks', hook);
  writeFileSync(file, script);
  chmodSync(file, 0o755);
}

/** Refuses a whole push when any pushed tree holds a file named `refused-by-host`. */
const PRE_RECEIVE_REFUSING = `#!/bin/sh
status=0
while read old new ref; do
  case "$new" in 0000000000000000000000000000000000000000) continue ;; esac
  if git ls-tree -r --name-only "$new" | grep -q 'refused-by-host'; then
    echo "policy: $ref holds a file named refused-by-host" >&2
    status=1
  fi
done
exit $status
`;

/** Refuses one ref (and so, atomically, the push) when its tree holds `refused-by-host`. */
const UPDATE_REFUSING = `#!/bin/sh
if git ls-tree -r --name-only "$3" | grep -q 'refused-by-host'; then
  echo "policy: $1 holds a file named refused-by-host" >&2
  exit 1
fi
exit 0
`;

/** A Cluster's files with one the host refuses. */
function refusedChange(cluster: string): BranchChange {
  const files = clusterFiles(cluster, 9);
  files.set('cni/refused-by-host', 'the host refuses this\n');
  return { branch: `${PREFIX}default/${cluster}`, files, message: `render ${cluster} refused` };
}

for (const transport of ['smart-http', 'git'] as const) {
  describe(`GitFleetWriter against the real git server, pushing with ${transport}`, () => {
    function writer(url: string, cache: string, extra: Partial<GitFleetWriterConfig> = {}): GitFleetWriter {
      return new GitFleetWriter({
        url,
        branchPrefix: PREFIX,
        cacheDir: join(work, `${transport}-${cache}`),
        author: { name: 'stackflux', email: 'stackflux@example.invalid' },
        pushTransport: transport,
        ...extra,
      });
    }

    it('first write into an empty repository creates every branch in one push; trees are the computed ones', async () => {
      const url = await newRepo();
      const w = writer(url, 'first');
      await w.refresh(); // an empty remote is fine
      assert.equal(await w.branch(`${PREFIX}default/c0`), undefined);

      const changes = Array.from({ length: 6 }, (_, i) => change(`c${i}`));
      const res = await w.write(changes);
      assert.equal(res.pushed, true);
      assert.equal(res.pushes, 1, 'one push for the whole batch');
      assert.equal(res.attempts, 1);
      assert.equal(res.commits, 6);
      assert.deepEqual([...res.changed].sort(), changes.map((c) => c.branch).sort());

      const tips = remoteTips(url);
      assert.deepEqual([...tips.keys()].sort(), changes.map((c) => c.branch).sort());
      const m = mirror(url);
      for (const c of changes) {
        const ids = branchTreeIds(c.files as Map<string, string>);
        const state = res.branches.get(c.branch);
        assert.equal(state?.commit, tips.get(c.branch));
        assert.equal(git(['--git-dir', m, 'rev-parse', `refs/heads/${c.branch}^{tree}`]), ids.tree);
        assert.equal(state?.tree, ids.tree);
        assert.deepEqual(state?.addons, ids.addons);
        // branch() reads the same from the local cache.
        assert.deepEqual(await w.branch(c.branch), state);
      }
      assert.equal(
        git(['--git-dir', m, 'show', `refs/heads/${PREFIX}default/c3:cni/cni.yaml`]),
        'kind: ConfigMap\nmetadata:\n  name: cni-c3\ndata:\n  rev: "1"',
      );
      assert.equal(
        git(['--git-dir', m, 'log', '-1', '--format=%an <%ae>|%cn|%s|%P', `refs/heads/${PREFIX}default/c3`]),
        'stackflux <stackflux@example.invalid>|stackflux|render c3 rev 1|',
      );
      await w.close();
    });

    it('the host refuses one branch of a batch (pre-receive hook): that branch stays, the others land', async () => {
      const name = uniqueName('fleetw-refuse');
      const url = await createRepo({ gitServerUrl } as Endpoints, name);
      const w = writer(url, 'refuse');
      const clusters = Array.from({ length: 9 }, (_, i) => `r${i}`);
      await w.write(clusters.map((c) => change(c)));
      installHook(name, 'pre-receive', PRE_RECEIVE_REFUSING);
      const before = remoteTips(url);

      const batch = [...clusters.map((c) => (c === 'r5' ? refusedChange(c) : change(c, 2))), change('fresh')];
      const res = await w.write(batch);
      const bad = `${PREFIX}default/r5`;
      assert.deepEqual([...res.refused.keys()], [bad]);
      assert.match(
        res.refused.get(bad) ?? '',
        /^pre-receive hook declined: .*policy: refs\/heads\/stackflux\/default\/r5 holds a file named refused-by-host/,
      );
      assert.deepEqual(res.deferred, []);
      assert.equal(res.branches.has(bad), false, 'no state claimed for the refused branch');
      assert.deepEqual(
        [...res.changed].sort(),
        batch
          .map((c) => c.branch)
          .filter((b) => b !== bad)
          .sort(),
      );
      // Bisection: one bad branch among 10 costs at most 2·⌈log2 10⌉ pushes beyond the first.
      assert.ok(res.pushes <= 1 + 2 * 4, `${res.pushes} pushes`);

      const after = remoteTips(url);
      assert.equal(after.get(bad), before.get(bad), 'the refused branch keeps its previous commit');
      assert.equal(after.size, clusters.length + 1, 'nothing deleted, the new branch created');
      const m = mirror(url);
      for (const c of batch.filter((b) => b.branch !== bad))
        assert.equal(
          git(['--git-dir', m, 'rev-parse', `refs/heads/${c.branch}^{tree}`]),
          branchTreeIds(c.files as Map<string, string>).tree,
        );
      assert.equal((await w.branch(bad))?.commit, before.get(bad), 'the local cache agrees');

      // Retried (its back-off over) with other Clusters' changes: the refused branch is pushed on its
      // own, so the others land in one push and no bisection is spent on it again.
      const again = await w.write([
        refusedChange('r5'),
        ...clusters.filter((c) => c !== 'r5').map((c) => change(c, 3)),
      ]);
      assert.deepEqual([...again.refused.keys()], [bad]);
      assert.equal(again.pushes, 2, 'one push of the others, one of the refused branch alone');
      assert.equal(again.changed.length, clusters.length - 1);

      // Fixed content lands through the same writer.
      const fixed = await w.write([change('r5', 3, 'fixed')]);
      assert.deepEqual(fixed.changed, [bad]);
      assert.equal(fixed.refused.size, 0);
      assert.deepEqual(subjects(url, bad), ['fixed', 'render r5 rev 1']);
      await w.close();
    });

    it('the host names the refused ref (update hook): one more push, no bisection', async () => {
      const name = uniqueName('fleetw-named');
      const url = await createRepo({ gitServerUrl } as Endpoints, name);
      installHook(name, 'update', UPDATE_REFUSING);
      const w = writer(url, 'named');
      const batch = [change('n0'), refusedChange('n1'), change('n2'), change('n3')];
      const res = await w.write(batch);
      assert.deepEqual([...res.refused.keys()], [`${PREFIX}default/n1`]);
      assert.match(res.refused.get(`${PREFIX}default/n1`) ?? '', /^hook declined/);
      assert.equal(res.pushes, 2, 'the refused push and the push of the rest');
      assert.deepEqual([...remoteTips(url).keys()].sort(), [
        `${PREFIX}default/n0`,
        `${PREFIX}default/n2`,
        `${PREFIX}default/n3`,
      ]);
      await w.close();
    });

    it('a host that refuses everything: the narrowing stops at its budget and defers the rest', async () => {
      const name = uniqueName('fleetw-all');
      const url = await createRepo({ gitServerUrl } as Endpoints, name);
      installHook(name, 'pre-receive', '#!/bin/sh\necho "pushes are disabled" >&2\nexit 1\n');
      const w = writer(url, 'all', { maxNarrowingPushes: 3 });
      const res = await w.write(Array.from({ length: 8 }, (_, i) => change(`a${i}`)));
      assert.equal(res.pushes, 4, 'the first push and the budget of 3');
      assert.equal(res.refused.size + res.deferred.length, 8);
      assert.ok(res.deferred.length > 0);
      assert.match(res.deferredReason ?? '', /pre-receive hook declined: .*pushes are disabled/);
      assert.equal(remoteTips(url).size, 0);
      await w.close();
    });

    it('an unchanged write makes no commit and no push', async () => {
      const url = await newRepo();
      const w = writer(url, 'noop');
      const changes = Array.from({ length: 4 }, (_, i) => change(`c${i}`));
      await w.write(changes);
      const before = remoteTips(url);
      // Same content, other message and other Map order: still no commit.
      const res = await w.write(
        changes.map((c) => ({ ...c, files: new Map([...(c.files ?? [])].reverse()), message: 'again' })),
      );
      assert.equal(res.pushed, false);
      assert.equal(res.pushes, 0);
      assert.equal(res.commits, 0);
      assert.equal(res.attempts, 0);
      assert.deepEqual(res.changed, []);
      assert.deepEqual(remoteTips(url), before);
      for (const c of changes) assert.equal(res.branches.get(c.branch)?.commit, before.get(c.branch));
      assert.equal(commitCount(url, changes[0]?.branch as string), 1);
      await w.close();
    });

    it('one branch changed among many: only that ref moves, on top of its old tip', async () => {
      const url = await newRepo();
      const w = writer(url, 'one');
      const all = Array.from({ length: 20 }, (_, i) => change(`c${i}`));
      await w.write(all);
      const before = remoteTips(url);
      const res = await w.write([...all.slice(0, 7), change('c7', 2, 'values change'), ...all.slice(8)]);
      assert.deepEqual(res.changed, [`${PREFIX}default/c7`]);
      assert.equal(res.commits, 1);
      assert.equal(res.pushes, 1);
      const afterTips = remoteTips(url);
      for (const [branch, tip] of before) {
        if (branch === `${PREFIX}default/c7`) assert.notEqual(afterTips.get(branch), tip);
        else assert.equal(afterTips.get(branch), tip, `${branch} did not move`);
      }
      const m = mirror(url);
      assert.equal(
        git(['--git-dir', m, 'rev-parse', `refs/heads/${PREFIX}default/c7^`]),
        before.get(`${PREFIX}default/c7`),
      );
      assert.equal(commitCount(url, `${PREFIX}default/c7`), 2);
      assert.equal(commitCount(url, `${PREFIX}default/c6`), 1);
      await w.close();
    });

    it('files: null deletes the branch; deleting an absent branch pushes nothing', async () => {
      const url = await newRepo();
      const w = writer(url, 'delete');
      await w.write([change('a'), change('b')]);
      const res = await w.write([{ branch: `${PREFIX}default/a`, files: null, message: 'cluster deleted' }]);
      assert.deepEqual(res.changed, [`${PREFIX}default/a`]);
      assert.equal(res.branches.get(`${PREFIX}default/a`), null);
      assert.deepEqual([...remoteTips(url).keys()], [`${PREFIX}default/b`]);
      assert.equal(await w.branch(`${PREFIX}default/a`), undefined);
      const again = await w.write([
        { branch: `${PREFIX}default/a`, files: null, message: 'cluster deleted' },
      ]);
      assert.equal(again.pushed, false);
      assert.equal(again.pushes, 0);
      // Deletes and updates go in the same push.
      const mixed = await w.write([
        { branch: `${PREFIX}default/b`, files: null, message: 'gone' },
        change('c'),
      ]);
      assert.equal(mixed.pushes, 1);
      assert.deepEqual([...remoteTips(url).keys()], [`${PREFIX}default/c`]);
      await w.close();
    });

    it('a concurrent writer moves a ref: the lease rejects, the retry converges, no update is lost', async () => {
      const url = await newRepo();
      const seed = writer(url, 'race-seed');
      await seed.write([change('x'), change('y')]);
      const other = writer(url, 'race-other');
      await other.refresh();
      let raced = false;
      const ours = writer(url, 'race-ours', {
        hooks: {
          afterCommit: async () => {
            if (raced) return;
            raced = true;
            // Between our build and our push, another writer changes x (ours too) and y (not ours).
            const r = await other.write([change('x', 5, 'other x'), change('y', 5, 'other y')]);
            assert.equal(r.pushes, 1);
          },
        },
      });
      await ours.refresh();
      const res = await ours.write([change('x', 2, 'ours x'), change('z', 2, 'ours z')]);
      assert.equal(res.attempts, 2, 'the first push is refused, the second lands');
      assert.equal(res.pushes, 2);
      assert.deepEqual([...res.changed].sort(), [`${PREFIX}default/x`, `${PREFIX}default/z`]);
      // x: our commit on top of the other writer's (its commit kept in history), with our tree.
      assert.deepEqual(subjects(url, `${PREFIX}default/x`), ['ours x', 'other x', 'render x rev 1']);
      const m = mirror(url);
      assert.equal(
        git(['--git-dir', m, 'rev-parse', `refs/heads/${PREFIX}default/x^{tree}`]),
        branchTreeIds(clusterFiles('x', 2)).tree,
      );
      // y: the other writer's change stays.
      assert.deepEqual(subjects(url, `${PREFIX}default/y`), ['other y', 'render y rev 1']);
      // z: created once, although its first push was refused with the rest of the batch.
      assert.deepEqual(subjects(url, `${PREFIX}default/z`), ['ours z']);
      await Promise.all([seed.close(), other.close(), ours.close()]);
    });

    it('a crash between building the commits and the push: a fresh instance makes exactly one commit', async () => {
      const url = await newRepo();
      const seed = writer(url, 'crash');
      await seed.write([change('a'), change('keep')]);
      await seed.close();
      const crashing = writer(url, 'crash', {
        hooks: {
          afterCommit: () => {
            throw new Error('killed between commit and push');
          },
        },
      });
      const batch = [change('a', 2, 'upgrade a'), change('b', 1, 'new b')];
      await assert.rejects(crashing.write(batch), /killed between commit and push/);
      await crashing.close();
      assert.equal(commitCount(url, `${PREFIX}default/a`), 1, 'nothing was pushed');
      assert.equal(remoteTips(url).has(`${PREFIX}default/b`), false);

      // "Restart": a new instance over the same cache (the unpushed commits are in it, dangling).
      const restarted = writer(url, 'crash');
      const res = await restarted.write(batch);
      assert.equal(res.pushes, 1);
      assert.equal(commitCount(url, `${PREFIX}default/a`), 2, 'exactly one new commit on a');
      assert.equal(commitCount(url, `${PREFIX}default/b`), 1);
      assert.deepEqual(subjects(url, `${PREFIX}default/a`), ['upgrade a', 'render a rev 1']);
      const again = await restarted.write(batch);
      assert.equal(again.pushed, false);
      assert.equal(commitCount(url, `${PREFIX}default/a`), 2);
      await restarted.close();
    });

    it('a crash after the push landed but before the local refs moved: the next write adds nothing', async () => {
      const url = await newRepo();
      const crashing = writer(url, 'crash-after', {
        hooks: {
          afterPush: () => {
            throw new Error('killed after push');
          },
        },
      });
      const batch = [change('a', 1, 'first a')];
      await assert.rejects(crashing.write(batch), /killed after push/);
      await crashing.close();
      assert.equal(commitCount(url, `${PREFIX}default/a`), 1, 'the push landed');
      const tip = remoteTips(url).get(`${PREFIX}default/a`);

      const restarted = writer(url, 'crash-after');
      const res = await restarted.write(batch);
      assert.equal(res.pushed, false);
      assert.equal(res.commits, 0);
      assert.equal(res.branches.get(`${PREFIX}default/a`)?.commit, tip);
      assert.equal(commitCount(url, `${PREFIX}default/a`), 1);
      await restarted.close();
    });

    it('a large batch (a pack, packed local refs) reads back through the same instance, then changes one', async () => {
      const url = await newRepo();
      const w = writer(url, 'large');
      const all = Array.from({ length: 150 }, (_, i) => change(`l${i}`));
      assert.equal((await w.write(all)).pushes, 1);
      const tips = remoteTips(url);
      assert.equal(tips.size, 150);
      for (const c of all) assert.equal((await w.branch(c.branch))?.commit, tips.get(c.branch));
      const res = await w.write([change('l77', 2, 'one of many')]);
      assert.deepEqual(res.changed, [`${PREFIX}default/l77`]);
      assert.equal(
        (await w.branch(`${PREFIX}default/l77`))?.commit,
        remoteTips(url).get(`${PREFIX}default/l77`),
      );
      assert.equal((await w.write(all.slice(0, 77))).pushed, false, 'the rest still matches');
      await w.close();
    });

    it("each branch's history shows what that Cluster ran and why", async () => {
      const url = await newRepo();
      const w = writer(url, 'history');
      await w.write([change('a', 1, 'release v1.0.0'), change('b', 1, 'release v1.0.0')]);
      await w.write([change('a', 2, 'values change: pod CIDR')]);
      await w.write([
        {
          branch: `${PREFIX}default/a`,
          files: new Map([...clusterFiles('a', 2)].slice(0, 2)),
          message: 'disable csi',
        },
      ]);
      assert.deepEqual(subjects(url, `${PREFIX}default/a`), [
        'disable csi',
        'values change: pod CIDR',
        'release v1.0.0',
      ]);
      assert.deepEqual(subjects(url, `${PREFIX}default/b`), ['release v1.0.0']);
      const state = await w.branch(`${PREFIX}default/a`);
      assert.deepEqual([...(state?.addons.keys() ?? [])], ['cni']);
      await w.close();
    });

    it('writes of one instance are serialized; bad branch names are refused before any git work', async () => {
      const url = await newRepo();
      const w = writer(url, 'serial');
      const results = await Promise.all(Array.from({ length: 4 }, (_, i) => w.write([change(`s${i}`)])));
      assert.deepEqual(
        results.map((r) => r.changed),
        Array.from({ length: 4 }, (_, i) => [`${PREFIX}default/s${i}`]),
      );
      assert.equal(remoteTips(url).size, 4);
      await assert.rejects(
        w.write([{ branch: 'main', files: new Map(), message: 'x' }]),
        (e: unknown) =>
          e instanceof SourceError && e.reason === 'InvalidFleetChange' && /not under/.test(e.message),
      );
      await assert.rejects(
        w.write([{ branch: `${PREFIX}default/a b`, files: new Map(), message: 'x' }]),
        (e: unknown) => e instanceof SourceError && e.reason === 'InvalidFleetChange',
      );
      await assert.rejects(
        w.write([{ branch: `${PREFIX}default/p`, files: new Map([['../x', 'y']]), message: 'x' }]),
        (e: unknown) => e instanceof SourceError && /invalid fleet file path/.test(e.message),
      );
      await w.close();
    });

    it('with credentials on the auth server: writes; a wrong password fails without showing it', async () => {
      const authBase = required('GIT_SERVER_AUTH_URL');
      const user = required('GIT_SERVER_USER');
      const password = required('GIT_SERVER_PASSWORD');
      const name = uniqueName('fleetw-auth');
      await createRepo({ gitServerUrl } as Endpoints, name);
      const url = `${authBase}/${name}.git`;

      const w = writer(url, 'auth', { credentials: { username: user, password } });
      const res = await w.write([change('a')]);
      assert.equal(res.pushes, 1);
      assert.equal(remoteTips(`${gitServerUrl}/${name}.git`).size, 1);
      await w.close();

      const wrong = `${password}-wrong`;
      const bad = writer(url, 'auth-bad', { credentials: { username: user, password: wrong } });
      const err = await bad.write([change('b')]).then(
        () => assert.fail('a wrong password must fail'),
        (e: unknown) => e,
      );
      assert.ok(err instanceof SourceError);
      assert.equal(err.reason, 'FleetAuthenticationFailed');
      assert.match(err.message, /Authentication failed/);
      // The push side's own HTTP client (smart-http) with the wrong password: capabilities and push.
      const creds = { username: user, password: wrong };
      const capsErr = await receivePackCapabilities(url, creds, 10_000).then(
        () => assert.fail('a wrong password must fail'),
        (e: unknown) => e,
      );
      const pushErr = await smartHttpPush(
        url,
        [{ ref: `refs/heads/${PREFIX}default/x`, old: res.branches.get(`${PREFIX}default/a`)?.commit }],
        undefined,
        {
          credentials: creds,
          capabilities: ['report-status'],
          timeoutMs: 10_000,
        },
      ).then(
        () => assert.fail('a wrong password must fail'),
        (e: unknown) => e,
      );
      for (const e of [capsErr, pushErr]) {
        assert.ok(e instanceof SmartHttpError);
        assert.equal(e.status, 401);
        assert.match(e.message, /authentication failed/);
      }
      const token = Buffer.from(`${user}:${wrong}`).toString('base64');
      for (const e of [err, capsErr, pushErr] as Error[]) {
        for (const text of [e.message, String(e.stack)]) {
          assert.ok(!text.includes(wrong), 'the wrong password is not in the error');
          assert.ok(!text.includes(password), 'the password is not in the error');
          assert.ok(!text.includes(token), 'nor its basic-auth token');
        }
      }
      assert.equal(remoteTips(`${gitServerUrl}/${name}.git`).size, 1, 'nothing was written');
      await bad.close();
    });
  });
}

describe('smart-http client (node:http): a server that stalls or is not there', () => {
  it('a push whose answer never comes ends as a TimeoutError once its timeout has passed, not before', async () => {
    const { createServer } = await import('node:http');
    let requests = 0;
    const held: import('node:http').ServerResponse[] = [];
    const server = createServer((req, res) => {
      requests += 1;
      req.resume();
      held.push(res); // never answered
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const { port } = server.address() as import('node:net').AddressInfo;
    try {
      const started = performance.now();
      const err = await smartHttpPush(
        `http://127.0.0.1:${port}/stalled.git`,
        [{ ref: 'refs/heads/x', new: 'a'.repeat(40) }],
        Buffer.alloc(64 << 10, 1),
        { capabilities: ['report-status'], timeoutMs: 800 },
      ).then(
        () => assert.fail('a stalled push must fail'),
        (e: unknown) => e,
      );
      const elapsed = performance.now() - started;
      assert.ok(err instanceof Error);
      assert.equal(err.name, 'TimeoutError');
      assert.ok(elapsed >= 700, `ended after ${Math.round(elapsed)} ms, before its timeout`);
      assert.equal(requests, 1);
      const caps = await receivePackCapabilities(`http://127.0.0.1:${port}/stalled.git`, undefined, 500).then(
        () => assert.fail('stalled capabilities must fail'),
        (e: unknown) => e,
      );
      assert.ok(caps instanceof Error);
      assert.equal(caps.name, 'TimeoutError');
    } finally {
      for (const res of held) res.destroy();
      server.close();
    }
  });

  it('a closed port is the connection error itself, without the credentials', async () => {
    const { createServer } = await import('node:net');
    const probe = createServer();
    await new Promise<void>((r) => probe.listen(0, '127.0.0.1', r));
    const { port } = probe.address() as import('node:net').AddressInfo;
    await new Promise<void>((r) => probe.close(() => r()));
    const err = await smartHttpPush(
      `http://127.0.0.1:${port}/gone.git`,
      [{ ref: 'refs/heads/x', new: 'a'.repeat(40) }],
      undefined,
      { credentials: { username: 'u', password: 'secret-pw-1' }, capabilities: [], timeoutMs: 5_000 },
    ).then(
      () => assert.fail('a closed port must fail'),
      (e: unknown) => e,
    );
    assert.ok(err instanceof Error);
    assert.match(err.message, /ECONNREFUSED/);
    assert.doesNotMatch(`${err.message}${String(err.stack)}`, /secret-pw-1/);
  });
});
