// stack.yaml validation of a release tree at a commit, cached by commit (a bad tree is a verdict
// too): reads the tree (in the background when there are background reads), its release
// description, and fetches chart dependencies not vendored, once per release (cached on disk by
// commit), as CSO's `helm template --dependency-update` would.
import { readReleaseDescription, type StackDescription } from '../../releases/format.ts';
import type { ValidationResult } from '../../releases/stack.ts';
import type { ReleaseTag } from '../../releases/tags.ts';
import {
  ChartDependencyError,
  dependencyChartDirs,
  releaseTreeKey,
  withChartDependencies,
} from '../../sources/chartrepo.ts';
import { SourceError } from '../../sources/git.ts';
import { readOffWorker } from './backgroundreads.ts';
import type { ReleaseSourceAccess } from './sourceaccess.ts';
import type { ClusterStackReleaseDeps } from './types.ts';

const MAX_CACHED_VALIDATIONS = 1000;

/** Look again at a release whose chart dependencies' repository could not be reached. */
export const DEPENDENCY_RETRY_MS = 60_000;

export type ValidatorDeps = Pick<ClusterStackReleaseDeps, 'fetchTree' | 'cacheDir' | 'tenancy' | 'reads'>;

export class ReleaseValidator {
  private readonly validations = new Map<string, ValidationResult<StackDescription>>();

  private readonly deps: ValidatorDeps;

  constructor(deps: ValidatorDeps) {
    this.deps = deps;
  }

  /**
   * The validation of `src`'s tree at `at`. A chart repository that could not be reached is no
   * verdict: `onDependenciesUnreachable` is called and the result is not cached.
   */
  async validate(
    key: string,
    src: ReleaseSourceAccess,
    at: string,
    parsedTag: ReleaseTag,
    onDependenciesUnreachable: () => void,
  ): Promise<ValidationResult<StackDescription>> {
    const { deps, validations } = this;
    const { source, tag, namespace, ref } = src;
    const cacheKey = `${source.url}\n${at}\n${source.path ?? ''}\n${tag}`;
    const cached = validations.get(cacheKey);
    if (cached !== undefined) return cached;
    let result: ValidationResult<StackDescription>;
    try {
      const tree = await readOffWorker(
        deps.reads?.trees,
        {
          key: `${cacheKey}\n${ref.secretName ?? ''}\n${namespace}`,
          namespace,
          what: `reading tag ${tag} of ${source.url}`,
          read: async (signal) =>
            deps.fetchTree(source, tag, at, deps.cacheDir, await src.credentials(), signal),
        },
        () => deps.reads?.wake(key),
      );
      result = readReleaseDescription(tree, parsedTag);
      // Chart dependencies not vendored are fetched here, once per release (cached on disk by
      // commit), as CSO's `helm template --dependency-update` would, so that every Cluster's
      // render reads them from the tree.
      const charts = result.ok ? dependencyChartDirs(result.value) : [];
      if (charts.length > 0) {
        try {
          await withChartDependencies(tree, charts, {
            cacheDir: deps.cacheDir,
            treeKey: releaseTreeKey(source.url, at, source.path ?? ''),
            ...(deps.tenancy !== undefined ? { tenancy: deps.tenancy } : {}),
          });
        } catch (err) {
          if (!(err instanceof ChartDependencyError)) throw err;
          if (err.transient) {
            onDependenciesUnreachable();
            return {
              ok: false,
              errors: [`${err.message} (tried again in ${DEPENDENCY_RETRY_MS / 1000} s)`],
            };
          }
          result = { ok: false, errors: [err.message] };
        }
      }
    } catch (err) {
      // A symbolic link, a submodule, a tree over a limit: a verdict on the commit, not a failure
      // to fetch it, so the release reports it (InvalidRelease) and is not retried.
      if (!(err instanceof SourceError && err.reason === 'InvalidRelease')) throw err;
      result = { ok: false, errors: [err.message] };
    }
    if (validations.size >= MAX_CACHED_VALIDATIONS) {
      const first = validations.keys().next().value;
      if (first !== undefined) validations.delete(first);
    }
    validations.set(cacheKey, result);
    return result;
  }
}
