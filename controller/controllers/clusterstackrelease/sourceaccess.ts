// How one reconcile reaches a release's source: the poller's SourceRef of spec.source and the
// source Secret's credentials, read at most once per reconcile (and not at all without a secretRef).
import type { ClusterStackRelease } from '../../api/clusterstackrelease.ts';
import type { GitCredentials } from '../../sources/git.ts';
import type { SourceRef } from '../../sources/poller.ts';
import type { ClusterStackReleaseDeps } from './types.ts';

export class ReleaseSourceAccess {
  readonly namespace: string;
  readonly tag: string;
  readonly source: ClusterStackRelease['spec']['source'];
  readonly ref: SourceRef;
  private creds: GitCredentials | undefined;

  private readonly deps: Pick<ClusterStackReleaseDeps, 'credentials'>;

  constructor(deps: Pick<ClusterStackReleaseDeps, 'credentials'>, release: ClusterStackRelease) {
    this.deps = deps;
    this.namespace = release.metadata.namespace ?? 'default';
    this.tag = release.spec.tag;
    this.source = release.spec.source;
    const source = this.source;
    this.ref = {
      url: source.url,
      namespace: this.namespace,
      ...(source.secretRef !== undefined ? { secretName: source.secretRef.name } : {}),
      ...(source.insecure === true ? { insecure: true } : {}),
    };
  }

  /** The source Secret's credentials (undefined without a secretRef), read once. */
  async credentials(): Promise<GitCredentials | undefined> {
    if (this.ref.secretName === undefined) return undefined;
    this.creds ??= await this.deps.credentials(this.namespace, this.ref.secretName);
    return this.creds;
  }
}
