// Flags of the tenancy policy, shared by `stackflux run`, `render`, `diff` and `preview` (offline =
// live) and exposed by `install`: whose rights Flux applies with, where remote Helm charts may come
// from, which internal networks source requests may reach.
import { parseAllowedChartHosts, serviceAccountNameError, type TenancyPolicy } from '../releases/tenancy.ts';
import { configureEgress, parseEgressAllowList } from '../sources/egress.ts';
import { type Command, type FlagValues, UsageError } from './command.ts';

export const tenancyFlags: Command['flags'] = {
  'default-service-account': {
    type: 'string',
    description:
      "ServiceAccount (in each object's namespace) Flux impersonates to apply a release's cluster-class/ when its ClusterStack sets no serviceAccountName, and a Helm addon's HelmRelease; Flux's flag of the same name (default: Flux's own rights)",
  },
  'allowed-chart-hosts': {
    type: 'string',
    description:
      'comma-separated hosts (or *.domain) a remote Helm chart of stack.yaml (or a chart dependency of a csctl addon) may come from; another host makes the release InvalidRelease (default: any host)',
  },
  'insecure-chart-hosts': {
    type: 'string',
    description:
      'comma-separated hosts (or *.domain) a chart dependency may be fetched from over plain http (default: https only)',
  },
  'allow-source-networks': {
    type: 'string',
    description:
      'comma-separated CIDRs (10.0.0.0/8, fd00::/8) and hosts (git.platform.svc, *.corp.example) that source requests (Git, GitHub, OCI registries, token realms, redirects, chart repositories) may reach although they are loopback, link-local, private, CGNAT or cluster-internal; any other such destination is refused (default: none)',
  },
};

function str(v: string | boolean | undefined): string {
  return typeof v === 'string' ? v : '';
}

/** The tenancy policy of the flags; usage errors name the flag. */
export function tenancyPolicy(flags: FlagValues): TenancyPolicy {
  const policy: TenancyPolicy = {};
  const sa = str(flags['default-service-account']);
  if (sa !== '') {
    const error = serviceAccountNameError(sa);
    if (error !== undefined) throw new UsageError(`--default-service-account ${error}`);
    policy.defaultServiceAccount = sa;
  }
  try {
    const hosts = parseAllowedChartHosts(str(flags['allowed-chart-hosts']));
    if (hosts !== undefined) policy.allowedChartHosts = hosts;
  } catch (err) {
    throw new UsageError(`--allowed-chart-hosts: ${err instanceof Error ? err.message : String(err)}`);
  }
  try {
    const hosts = parseAllowedChartHosts(str(flags['insecure-chart-hosts']));
    if (hosts !== undefined) policy.insecureChartHosts = hosts;
  } catch (err) {
    throw new UsageError(`--insecure-chart-hosts: ${err instanceof Error ? err.message : String(err)}`);
  }
  const networks = str(flags['allow-source-networks']);
  try {
    // The process's outbound policy is set here, where every command that reads sources parses it.
    configureEgress(parseEgressAllowList(networks));
  } catch (err) {
    throw new UsageError(`--allow-source-networks: ${err instanceof Error ? err.message : String(err)}`);
  }
  const entries = networks
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (entries.length > 0) policy.allowSourceNetworks = entries;
  return policy;
}
