// `stackflux convert` over a corpus of cluster-stack-operator objects (test/unit/convert/corpus/
// <case>/input.yaml, flags in `args`): stdout must be expected.yaml, stderr stderr.txt, the exit
// code `exit`; every printed ClusterStack must pass the ClusterStack CRD's schema (unknown fields
// rejected, as kubectl's strict validation does); no credential of the input is ever printed.
// Then the pure parts: CSO's -source flag, the release names CSO would create = the tags
// stackflux pins, settings CSO reads from env / envFrom / Secrets.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parseAllDocuments } from 'yaml';
import { clusterStackCrd } from '../../../controller/api/clusterstack.ts';
import { objectSchema } from '../../../controller/api/crds.ts';
import type { CommandIO } from '../../../controller/cli/command.ts';
import { main } from '../../../controller/cli/main.ts';
import {
  type CsoReleaseSource,
  convertClusterStacks,
  csoReleaseName,
  csoReleaseSource,
  sourceFlag,
} from '../../../controller/convert/cso.ts';
import { clusterClassNameForTag, formatReleaseTag } from '../../../controller/releases/tags.ts';
import { closedSchema, kubernetesAjv } from '../../support/crd-schema.ts';

const CORPUS = join(import.meta.dirname, 'corpus');
const ROOT = join(import.meta.dirname, '..', '..', '..');
// SECRETPW: the password inside an OCI_REPOSITORY read from a Secret (hostile-values, issue 31 F8).
const SECRETS_IN_CORPUS = ['s3cr3t-token-value', 'literal-password-value', 'SECRETPW'];
/** A control character a terminal acts on (C0 but newline, DEL, C1 such as CSI U+009B). */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching control characters is its purpose
const TERMINAL_CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;

/** The ClusterStack CRD's schema, unknown fields rejected: '' when `o` passes, else ajv's errors. */
function strictValidator() {
  const ajv = kubernetesAjv();
  const validate = ajv.compile(closedSchema(objectSchema(clusterStackCrd)) as object);
  return (o: unknown) => (validate(o) ? '' : ajv.errorsText(validate.errors));
}

async function convert(args: string[]): Promise<{ code: number; out: string; err: string }> {
  let out = '';
  let err = '';
  const io: CommandIO = { stdout: (t) => (out += t), stderr: (t) => (err += t), env: {} };
  const code = await main(['convert', ...args], io);
  return { code, out, err };
}

describe('stackflux convert: the corpus of CSO objects', () => {
  const validate = strictValidator();
  for (const name of readdirSync(CORPUS).sort()) {
    const dir = join(CORPUS, name);
    const read = (f: string) => readFileSync(join(dir, f), 'utf8');
    const args = readdirSync(dir).includes('args') ? read('args').split('\n').filter(Boolean) : [];
    it(`${name}: ${read('input.yaml').split('\n')[0]?.replace(/^# /, '')}`, async () => {
      const got = await convert(['-f', join(dir, 'input.yaml'), ...args]);
      assert.equal(got.out, read('expected.yaml'));
      assert.equal(got.err, read('stderr.txt'));
      assert.equal(got.code, Number(read('exit').trim()));
      for (const secret of SECRETS_IN_CORPUS) {
        assert.ok(!got.out.includes(secret), 'no credential on stdout');
        assert.ok(!got.err.includes(secret), 'no credential on stderr');
      }
      assert.doesNotMatch(got.err, TERMINAL_CONTROL, 'a raw control character on stderr');
      for (const doc of parseAllDocuments(got.out)) {
        const object = doc.toJS() as { spec: { source: Record<string, unknown> } };
        // The CRD's CEL rule (ajv does not evaluate CEL): exactly one of git, github and oci.
        const kinds = ['git', 'github', 'oci'].filter((k) => object.spec.source[k] !== undefined);
        assert.equal(kinds.length, 1, `exactly one source kind, got ${kinds.join(', ')}`);
        assert.equal(validate(object), '', 'passes the ClusterStack CRD schema');
      }
    });
  }

  it('-f - reads the objects from stdin', () => {
    const dir = join(CORPUS, 'github-pinned');
    const r = spawnSync(process.execPath, [join(ROOT, 'bin', 'stackflux.js'), 'convert', '-f', '-'], {
      input: readFileSync(join(dir, 'input.yaml')),
      encoding: 'utf8',
    });
    assert.equal(r.status, 0, r.stderr);
    assert.equal(r.stdout, readFileSync(join(dir, 'expected.yaml'), 'utf8'));
  });

  it('usage: exactly one input; a --git-url with credentials is refused and not echoed', async () => {
    assert.equal((await convert([])).code, 2, 'neither -f nor --from-cluster');
    assert.equal((await convert(['-f', 'x', '--from-cluster'])).code, 2, 'both');
    const bad = await convert([
      '-f',
      join(CORPUS, 'no-source', 'input.yaml'),
      '--git-url',
      'https://u:p@h/x.git',
    ]);
    assert.equal(bad.code, 2);
    assert.match(bad.err, /--git-url/);
    assert.ok(!bad.err.includes('u:p@'), 'a URL with credentials is not echoed');
  });
});

describe('convert: the pure parts', () => {
  it("CSO's -source flag as Go's flag package reads it", () => {
    assert.deepEqual(sourceFlag([]), { source: 'github', local: false });
    assert.deepEqual(sourceFlag(['/manager', '-source', 'oci']), { source: 'oci', local: false });
    assert.deepEqual(sourceFlag(['--source=oci', '--leader-elect=true']), { source: 'oci', local: false });
    assert.deepEqual(sourceFlag(['-source=github', '-local']), { source: 'github', local: true });
    assert.deepEqual(sourceFlag(['-local=false']), { source: 'github', local: false });
  });

  it('the releases CSO creates for spec.versions are the tags stackflux pins, so the ClusterClass names stay', () => {
    for (const [k8s, version, csoName, className] of [
      ['1.30', 'v1', 'docker-ferrol-1-30-v1', 'docker-ferrol-1-30-v1'],
      ['1.9', 'v12', 'docker-ferrol-1-9-v12', 'docker-ferrol-1-9-v12'],
      ['1.31', 'v0-sha.a1b2c3d', 'docker-ferrol-1-31-v0-sha-a1b2c3d', 'docker-ferrol-1-31-v0-sha.a1b2c3d'],
    ] as const) {
      const tag = formatReleaseTag('docker', 'ferrol', k8s, version);
      assert.equal(csoReleaseName('docker', 'ferrol', k8s, version), csoName);
      assert.equal(tag, csoName, `${version}: stackflux's ClusterStackRelease is CSO's`);
      assert.equal(clusterClassNameForTag(tag), className);
    }
  });

  it('an OCI_REPOSITORY with a tag, a digest or no registry host is reported, not guessed', () => {
    const stack = {
      apiVersion: 'clusterstack.x-k8s.io/v1alpha1',
      kind: 'ClusterStack',
      metadata: { name: 'a', namespace: 'n' },
      spec: { provider: 'docker', name: 'ferrol', kubernetesVersion: '1.30', noProvider: true },
    };
    const unset = (env: string) => ({ env, origin: { from: 'unset' as const }, set: false });
    const oci = (repository: string) =>
      convertClusterStacks([stack], {
        secretName: 's',
        source: {
          kind: 'oci',
          registry: 'r.example.com',
          repository,
          credentials: { username: unset('U'), password: unset('P'), token: unset('T') },
        },
      });
    for (const bad of ['r.example.com/stacks:v1', 'r.example.com/stacks@sha256:00', 'stacks'])
      assert.match(oci(bad).problems.join(), /is not <registry host>\/<repository>/, bad);
    assert.deepEqual(oci('oci://r.example.com:5000/kaas/cluster-stacks').objects[0]?.spec.source, {
      oci: { url: 'oci://r.example.com:5000/kaas/cluster-stacks' },
    });
  });

  it('a credential of CSO is referenced, never read into the output; an unknown Secret is assumed set', () => {
    const deployment = {
      metadata: { namespace: 'cso-system' },
      spec: {
        template: {
          spec: {
            containers: [
              {
                name: 'manager',
                command: ['/manager'],
                env: [
                  { name: 'GIT_PROVIDER', value: 'github' },
                  { name: 'GIT_ORG_NAME', value: 'o' },
                  { name: 'GIT_REPOSITORY_NAME', value: 'r' },
                  { name: 'GIT_ACCESS_TOKEN', valueFrom: { secretKeyRef: { name: 's', key: 'tok' } } },
                ],
              },
            ],
          },
        },
      },
    };
    const known = csoReleaseSource(deployment, new Map([['cso-system/s', { tok: btoa('xyz') }]]));
    assert.deepEqual(known.source, {
      kind: 'github',
      owner: 'o',
      repo: 'r',
      token: {
        env: 'GIT_ACCESS_TOKEN',
        origin: { from: 'secret', namespace: 'cso-system', name: 's', key: 'tok' },
        set: true,
      },
    });
    const empty = csoReleaseSource(deployment, new Map([['cso-system/s', { tok: '' }]]));
    assert.equal(empty.source?.kind === 'github' && empty.source.token.set, false);
    const unknown = csoReleaseSource(deployment, new Map());
    assert.equal(unknown.source?.kind === 'github' && unknown.source.token.set, undefined);
    const stack = {
      apiVersion: 'clusterstack.x-k8s.io/v1alpha1',
      kind: 'ClusterStack',
      metadata: { name: 'a', namespace: 'n' },
      spec: { provider: 'docker', name: 'ferrol', kubernetesVersion: '1.30', noProvider: true },
    };
    const withToken = (s: CsoReleaseSource | undefined) =>
      convertClusterStacks([stack], { secretName: 'creds', ...(s ? { source: s } : {}) });
    assert.deepEqual(withToken(known.source).objects[0]?.spec.source, {
      github: { owner: 'o', repo: 'r', secretRef: { name: 'creds' } },
    });
    assert.deepEqual(withToken(empty.source).objects[0]?.spec.source, { github: { owner: 'o', repo: 'r' } });
    assert.deepEqual(withToken(unknown.source).objects[0]?.spec.source, {
      github: { owner: 'o', repo: 'r', secretRef: { name: 'creds' } },
    });
    assert.ok(!JSON.stringify(withToken(known.source)).includes('xyz'));
  });
});
