// What one reconcile reads of a release: the commit it is validated at (the pin, status.commit;
// before a pin, the commit the source poller or a listing gives for the tag), where the tag points
// now (moved-tag detection), the validation at that commit and, for a Helm-chart cluster-class,
// its render. A read still running in the background is no failure (pending); a failed read is
// kept (fetchError) for the condition, the Events and the reconcile's error.
import type { ClusterStackRelease } from '../../api/clusterstackrelease.ts';
import { type RenderedClass, rendersClusterClass } from '../../reconcilers/clusterstackrelease.ts';
import type { StackDescription } from '../../releases/format.ts';
import type { ValidationResult } from '../../releases/stack.ts';
import { parseReleaseTag } from '../../releases/tags.ts';
import type { Logger } from '../../runtime/logging.ts';
import { SourceError } from '../../sources/git.ts';
import { ReadPending, readOffWorker } from './backgroundreads.ts';
import { type ClassRenderDeps, renderReleaseClass } from './classrender.ts';
import type { ReleaseSourceAccess } from './sourceaccess.ts';
import type { ClusterStackReleaseDeps, ReleaseRead } from './types.ts';
import type { ReleaseValidator } from './validator.ts';

export type ReaderDeps = Pick<ClusterStackReleaseDeps, 'pollers' | 'listTags' | 'reads'> & ClassRenderDeps;

export class ReleaseReader {
  private readonly deps: ReaderDeps;
  private readonly validator: Pick<ReleaseValidator, 'validate'>;

  constructor(deps: ReaderDeps, validator: Pick<ReleaseValidator, 'validate'>) {
    this.deps = deps;
    this.validator = validator;
  }

  /** Reads release `key` (nothing is fetched for a release being deleted; a bad tag is a verdict). */
  async read(
    key: string,
    release: ClusterStackRelease,
    src: ReleaseSourceAccess,
    log: Pick<Logger, 'warn'>,
  ): Promise<ReleaseRead> {
    const { deps } = this;
    const { source, tag, namespace, ref } = src;
    const deleting = release.metadata.deletionTimestamp !== undefined;
    let dependenciesUnreachable = false;
    const validateAt = (at: string, parsedTag: Parameters<ReleaseValidator['validate']>[3]) =>
      this.validator.validate(key, src, at, parsedTag, () => {
        dependenciesUnreachable = true;
      });

    // The release is pinned to the commit it was validated at (status.commit); the listing says
    // where the tag points now. Only a release without a valid pin follows the tag.
    const pinned = release.status?.commit;
    let listed = deps.pollers.commitOf(ref, tag);
    let commit = pinned ?? listed;
    let stack: ValidationResult<StackDescription> | undefined;
    let renderedClass: RenderedClass | undefined;
    let fetchError: unknown;
    let pending = false;
    const parsed = parseReleaseTag(tag);
    if (!parsed.ok) {
      stack = { ok: false, errors: [`tag ${tag}: ${parsed.reason}`] };
    } else if (!deleting) {
      try {
        if (commit === undefined) {
          listed = (
            await readOffWorker(
              deps.reads?.listings,
              {
                key: `${source.url}\n${source.insecure === true}\n${ref.secretName ?? ''}\n${namespace}`,
                namespace,
                what: `listing the tags of ${source.url}`,
                read: async (signal) =>
                  deps.listTags(source.url, await src.credentials(), {
                    ...(source.insecure === true ? { insecure: true } : {}),
                    signal,
                  }),
              },
              () => deps.reads?.wake(key),
            )
          ).find((t) => t.tag === tag)?.commit;
          if (listed === undefined)
            throw new SourceError('TagNotFound', `tag ${tag} not found in ${source.url}`);
          commit = listed;
        }
        stack = await validateAt(commit, parsed.value);
        if (!stack.ok && listed !== undefined && listed !== commit) {
          // Nothing of an invalid pinned commit was ever applied: the tag moved to fix it, follow it.
          commit = listed;
          stack = await validateAt(commit, parsed.value);
        }
        if (stack.ok && rendersClusterClass(stack.value)) {
          const at = commit;
          renderedClass = await renderReleaseClass(deps, key, src, at, stack.value);
        }
      } catch (err) {
        if (err instanceof ReadPending) {
          // Not a failure: the read runs in the background and wakes this release when it settles.
          pending = true;
          stack = undefined;
          renderedClass = undefined;
        } else {
          fetchError = err;
        }
        if (err instanceof SourceError && err.reason === 'TagMoved') deps.pollers.trigger([source.url]);
        if (!pending)
          log.warn(
            { err: { message: err instanceof Error ? err.message : String(err) } },
            'reading the release failed',
          );
      }
    }
    return { listed, commit, stack, renderedClass, fetchError, pending, dependenciesUnreachable };
  }
}
