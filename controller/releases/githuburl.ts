// Where a GitHub repository is cloned from, given the REST API root stackflux talks to
// (`stackflux run --github-api-url`). github.com serves its API at api.github.com; GitHub
// Enterprise Server serves it below its own host (https://ghe.example.com/api/v3), which is also
// the host it clones from. So: api.github.com → https://github.com, any other API root → its origin.

export const DEFAULT_GITHUB_API_URL = 'https://api.github.com';

/** The web/clone origin of the GitHub whose REST API root is `apiUrl`. */
export function githubCloneOrigin(apiUrl: string = DEFAULT_GITHUB_API_URL): string {
  const url = new URL(apiUrl);
  return url.host === 'api.github.com' ? 'https://github.com' : url.origin;
}

/** The https clone URL of owner/repo on the GitHub of `apiUrl`. */
export function githubCloneUrl(owner: string, repo: string, apiUrl?: string): string {
  return `${githubCloneOrigin(apiUrl)}/${owner}/${repo}.git`;
}

/** owner/repo of a clone URL githubCloneUrl made for `apiUrl`; undefined for any other URL. */
export function parseGithubCloneUrl(
  url: string,
  apiUrl?: string,
): { owner: string; repo: string } | undefined {
  const prefix = `${githubCloneOrigin(apiUrl)}/`;
  if (!url.startsWith(prefix)) return undefined;
  const m = /^([A-Za-z0-9][A-Za-z0-9-]*)\/([A-Za-z0-9._-]+)\.git$/.exec(url.slice(prefix.length));
  return m?.[1] !== undefined && m[2] !== undefined ? { owner: m[1], repo: m[2] } : undefined;
}
