// Flags of how release sources are read, shared by `stackflux run` and the commands that read
// sources outside the controller (`diff`): offline reads a source exactly as the controller does.
import { parseDuration } from '../controllers/duration.ts';
import { DEFAULT_GITHUB_API_URL } from '../releases/githuburl.ts';
import { configureGitNetwork } from '../sources/git.ts';
import { type Command, type FlagValues, UsageError } from './command.ts';

/** The GitHub a spec.source.github names; `render` takes it too (a snapshot's sources are keyed by clone URL). */
export const githubApiUrlFlag: Command['flags'] = {
  'github-api-url': {
    type: 'string',
    description:
      'GitHub REST API root where spec.source.github releases are listed and their csctl assets downloaded; trees are cloned from its host (https://github.com for api.github.com)',
    default: DEFAULT_GITHUB_API_URL,
  },
};

export const sourceFlags: Command['flags'] = {
  'git-timeout': {
    type: 'string',
    description:
      'a git network operation (listing, fetch, push) that transfers nothing for this long fails (SourceTimeout, FleetTimeout); a fleet push must finish within 5 times it',
    default: '1m',
  },
  ...githubApiUrlFlag,
};

function str(v: string | boolean | undefined): string {
  return typeof v === 'string' ? v : '';
}

/** Applies --git-timeout to git's network operations and returns --github-api-url; usage errors name the flag. */
export function sourceOptions(flags: FlagValues): { githubApiUrl: string } {
  const gitTimeoutText = str(flags['git-timeout']) || '1m';
  const gitTimeoutMs = parseDuration(gitTimeoutText);
  if (gitTimeoutMs === undefined || gitTimeoutMs < 1000)
    throw new UsageError(`--git-timeout "${gitTimeoutText}" is not a duration of at least 1s, like 1m`);
  configureGitNetwork({ stallTimeoutMs: gitTimeoutMs });
  return { githubApiUrl: githubApiUrlOf(flags) };
}

/** --github-api-url, checked. */
export function githubApiUrlOf(flags: FlagValues): string {
  const githubApiUrl = str(flags['github-api-url']) || DEFAULT_GITHUB_API_URL;
  if (!/^https?:\/\/[^/@\s]+(\/\S*)?$/.test(githubApiUrl))
    throw new UsageError(`--github-api-url "${githubApiUrl}" must be an http(s) URL without credentials`);
  return githubApiUrl;
}
