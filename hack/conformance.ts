// `npm run conformance -- <stack dir> [--tag TAG] [--version vN]`: reads a stack folder as it
// would be released (a real cluster-stack-operator stack copied unchanged, or a stackflux one)
// through the release-format interface and prints what stackflux makes of it: the stack
// description as YAML. The rendered ClusterClass and addon output are to follow once the Go
// engine (controller/rendering/goengine) is wired behind the format's renderer seams.
// Exit status 1 and the errors on stderr when the release is invalid.
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { canonicalYaml } from '../controller/offline/yaml.ts';
import { readReleaseDescription } from '../controller/releases/format.ts';
import { parseReleaseTag } from '../controller/releases/tags.ts';
import { binaryFilesOf } from '../controller/releases/tree.ts';
import { readStackDir, tagOfStackDir } from './lib/stack-dir.ts';

/** The report of one stack folder: the description (without the native stack.yaml copy), or errors. */
export function conformanceReport(dir: string, opts: { tag?: string; version?: string } = {}) {
  const tree = readStackDir(dir);
  const tag = opts.tag ?? tagOfStackDir(tree, opts.version);
  if (tag === undefined)
    return { ok: false as const, errors: ['cannot tell the tag from csctl.yaml or stack.yaml: pass --tag'] };
  const parsed = parseReleaseTag(tag);
  if (!parsed.ok) return { ok: false as const, errors: [`tag ${tag}: ${parsed.reason}`] };
  const read = readReleaseDescription(tree, parsed.value);
  if (!read.ok) return { ok: false as const, tag, errors: read.errors };
  const { manifest: _manifest, ...description } = read.value;
  return {
    ok: true as const,
    tag,
    description,
    files: { text: tree.size, binary: [...binaryFilesOf(tree).keys()] },
  };
}

if (import.meta.main) {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: { tag: { type: 'string' }, version: { type: 'string' } },
  });
  const dir = positionals[0];
  if (dir === undefined || positionals.length > 1) {
    process.stderr.write('usage: npm run conformance -- <stack dir> [--tag TAG] [--version vN]\n');
    process.exit(2);
  }
  const report = conformanceReport(resolve(dir), {
    ...(values.tag !== undefined ? { tag: values.tag } : {}),
    ...(values.version !== undefined ? { version: values.version } : {}),
  });
  if (!report.ok) {
    process.stderr.write(
      `${report.tag ?? dir}: invalid release\n${report.errors.map((e) => `  ${e}\n`).join('')}`,
    );
    process.exit(1);
  }
  process.stdout.write(canonicalYaml({ tag: report.tag, ...report.description, files: report.files }));
}
