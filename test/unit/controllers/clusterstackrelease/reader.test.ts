// What a reconcile reads of a release: the pin, the listing, the moved tag, a read in the
// background (pending) and a failed read (fetchError), with a fake validator and pollers.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ReadPending } from '../../../../controller/controllers/clusterstackrelease/backgroundreads.ts';
import { ReleaseReader } from '../../../../controller/controllers/clusterstackrelease/reader.ts';
import { ReleaseSourceAccess } from '../../../../controller/controllers/clusterstackrelease/sourceaccess.ts';
import type { StackDescription } from '../../../../controller/releases/format.ts';
import type { ValidationResult } from '../../../../controller/releases/stack.ts';
import { type RemoteTag, SourceError } from '../../../../controller/sources/git.ts';
import type { SourcePollers } from '../../../../controller/sources/poller.ts';
import { type Release, release, TAG } from './fakes.ts';

const OK = { ok: true, value: { cluster: {} } } as unknown as ValidationResult<StackDescription>;
const BAD: ValidationResult<StackDescription> = { ok: false, errors: ['bad'] };

function reader(opts: {
  listed?: string;
  tags?: RemoteTag[];
  verdicts?: Record<string, ValidationResult<StackDescription> | Error>;
}) {
  const validated: string[] = [];
  const triggered: string[] = [];
  const warnings: string[] = [];
  const pollers = {
    commitOf: () => opts.listed,
    trigger: (urls: readonly string[]) => {
      triggered.push(...urls);
      return urls.length;
    },
  } as unknown as SourcePollers;
  const validator = {
    validate: async (_key: string, _src: unknown, at: string) => {
      validated.push(at);
      const v = opts.verdicts?.[at] ?? OK;
      if (v instanceof Error) throw v;
      return v;
    },
  };
  const r = new ReleaseReader(
    { pollers, listTags: async () => opts.tags ?? [], fetchTree: async () => ({}) as never, cacheDir: '/c' },
    validator,
  );
  const log = { warn: (_o: unknown, msg: string) => void warnings.push(msg) };
  const read = (rel: Release) =>
    r.read('team-a/r1', rel, new ReleaseSourceAccess({ credentials: async () => ({}) }, rel), log as never);
  return { read, validated, triggered, warnings };
}

describe('ReleaseReader', () => {
  it('a tag that is no release tag is a verdict; nothing is read', async () => {
    const { read, validated } = reader({ listed: 'c1' });
    const got = await read(release({ spec: { tag: 'not-a-tag' } }));
    assert.equal(got.stack?.ok, false);
    assert.deepEqual(validated, []);
  });

  it('a release being deleted is not read', async () => {
    const { read, validated } = reader({ listed: 'c1' });
    const got = await read(release({ metadata: { deletionTimestamp: '2026-01-01T00:00:00Z' } }));
    assert.equal(got.stack, undefined);
    assert.equal(got.commit, 'c1');
    assert.deepEqual(validated, []);
  });

  it('validates at the pin, and passes where the tag points now', async () => {
    const { read, validated } = reader({ listed: 'c2' });
    const got = await read(release({ status: { commit: 'c1' } as never }));
    assert.deepEqual(validated, ['c1']);
    assert.deepEqual([got.commit, got.listed, got.stack], ['c1', 'c2', OK]);
  });

  it('follows a moved tag away from an invalid pin', async () => {
    const { read, validated } = reader({ listed: 'c2', verdicts: { c1: BAD } });
    const got = await read(release({ status: { commit: 'c1' } as never }));
    assert.deepEqual(validated, ['c1', 'c2']);
    assert.equal(got.commit, 'c2');
  });

  it('without pin or poller listing, lists the tags; a tag not listed is TagNotFound', async () => {
    const listed = reader({ tags: [{ tag: TAG, commit: 'c9' } as RemoteTag] });
    assert.equal((await listed.read(release())).commit, 'c9');
    const missing = reader({ tags: [] });
    const got = await missing.read(release());
    assert.ok(got.fetchError instanceof SourceError);
    assert.equal(got.fetchError.reason, 'TagNotFound');
    assert.deepEqual(missing.warnings, ['reading the release failed']);
  });

  it('a read in the background is pending, not a failure, and logs nothing', async () => {
    const { read, warnings } = reader({ listed: 'c1', verdicts: { c1: new ReadPending('reading') } });
    const got = await read(release());
    assert.equal(got.pending, true);
    assert.equal(got.fetchError, undefined);
    assert.equal(got.stack, undefined);
    assert.deepEqual(warnings, []);
  });

  it('a moved tag makes the pollers list the source again', async () => {
    const { read, triggered } = reader({
      listed: 'c1',
      verdicts: { c1: new SourceError('TagMoved', 'moved') },
    });
    const got = await read(release());
    assert.ok(got.fetchError instanceof SourceError);
    assert.deepEqual(triggered, ['https://git.example/stacks.git']);
  });
});
