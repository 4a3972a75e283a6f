// Keeps the README and docs/ honest: every YAML snippet is accepted by the real API server
// (server-side dry run, with the CRDs installed), and every command they show exists — npm
// scripts in package.json, stackflux subcommands and flags, hack/testenv subcommands.
// The demo (npm run demo) runs the README's story end to end. test/unit/docs/ checks the
// rest without a cluster (flag tables, flags in prose commands, links).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { before, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { commandHelp, parseFlags } from '../../controller/cli/command.ts';
import { commands } from '../../controller/cli/main.ts';
import { KubeClient, type KubeObject, loadKubeConfig } from '../../controller/runtime/client.ts';
import { installCrds } from '../../hack/lib/crds.ts';
import { docPages } from '../../hack/lib/flagdocs.ts';
import { testEnv } from '../support/env.ts';

const root = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const pages = docPages(root);
const blocks = pages.flatMap((page) =>
  [...readFileSync(join(root, page), 'utf8').matchAll(/```(\w+)\n([\s\S]*?)```/g)].map((m) => ({
    page,
    lang: m[1] ?? '',
    text: m[2] ?? '',
  })),
);
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
  scripts: Record<string, string>;
};
const testenvUsage = readFileSync(join(root, 'hack', 'lib', 'testenv-cli.ts'), 'utf8');

/** Shell commands of the pages' sh blocks, one per `&&`/line, comments stripped, each with its page. */
function shellCommands(): { page: string; cmd: string }[] {
  return blocks
    .filter((b) => b.lang === 'sh')
    .flatMap((b) =>
      b.text.split('\n').map((line) => ({ page: b.page, line: line.replace(/\s+#.*$/, '').trim() })),
    )
    .filter(({ line }) => line !== '' && !line.startsWith('#'))
    .flatMap(({ page, line }) => line.split('&&').map((c) => ({ page, cmd: c.trim() })));
}

describe('README and docs/', () => {
  it('has YAML and shell snippets to check', () => {
    assert.ok(blocks.filter((b) => b.lang === 'yaml').length >= 2);
    assert.ok(shellCommands().length >= 5);
  });

  it('every npm script it runs exists', () => {
    for (const { page, cmd } of shellCommands().filter((c) => c.cmd.startsWith('npm run '))) {
      const script = cmd.split(/\s+/)[2] ?? '';
      assert.ok(pkg.scripts[script], `package.json has script "${script}" (${page}: ${cmd})`);
    }
  });

  it('every stackflux command and flag it shows exists', () => {
    const shown = shellCommands().filter((c) => /^(npx )?stackflux /.test(c.cmd));
    assert.ok(shown.length >= 3);
    for (const { page, cmd } of shown) {
      const argv = cmd
        .replace(/^(npx )?stackflux /, '')
        .replace(/\s*>.*$/, '')
        .split(/\s+/);
      const command = commands.find((c) => c.name === argv[0]);
      assert.ok(command, `stackflux has command "${argv[0]}" (${page}: ${cmd})`);
      assert.doesNotThrow(
        () => parseFlags(command, argv.slice(1), {}),
        `flags of "${cmd}" (${page}) parse:\n${commandHelp(command)}`,
      );
    }
  });

  it('every hack/testenv subcommand it shows exists', () => {
    const shown = shellCommands()
      .map((c) => ({ ...c, cmd: c.cmd.replace(/^source "\$\(/, '') }))
      .filter((c) => c.cmd.startsWith('hack/testenv '));
    assert.ok(shown.length >= 4);
    for (const { page, cmd } of shown) {
      const sub = cmd.split(/\s+/)[1] ?? '';
      assert.match(
        testenvUsage,
        new RegExp(`case '${sub}'`),
        `hack/testenv has subcommand "${sub}" (${page}: ${cmd})`,
      );
    }
  });

  describe('YAML snippets against the real API server', () => {
    let client: KubeClient;
    before(async () => {
      client = new KubeClient(loadKubeConfig({ kubeconfig: testEnv().kubeconfig }));
      await installCrds(client);
    });

    // Fragments (a spec excerpt with no kind) and the cluster-stack-operator's own ClusterStack (the
    // "before" of the migration section, a CRD not installed here; test/unit/api/crds.test.ts checks
    // it against ours) are not objects this API server serves; every other snippet must be accepted.
    const servedHere = (o: KubeObject): boolean =>
      typeof o.kind === 'string' && !String(o.apiVersion).startsWith('clusterstack.x-k8s.io/');
    for (const [i, block] of blocks.filter((b) => b.lang === 'yaml').entries()) {
      it(`snippet ${i + 1} (${block.page}) is accepted by a server-side dry run`, async () => {
        const parsed = parseAllDocuments(block.text);
        assert.ok(parsed.length > 0);
        assert.deepEqual(
          parsed.flatMap((d) => d.errors),
          [],
          'the snippet is valid YAML',
        );
        const objects = parsed.map((d) => d.toJS() as KubeObject).filter(servedHere);
        for (const obj of objects) {
          const ns = obj.metadata.namespace;
          if (ns)
            await client.apply(
              { apiVersion: 'v1', kind: 'Namespace', metadata: { name: ns } },
              { force: true },
            );
          await client.apply(obj, { dryRun: true, force: true, fieldManager: 'readme-test' });
        }
      });
    }
  });
});
