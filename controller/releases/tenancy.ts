// What the platform admin allows tenants (controller flags, threaded into the pure reconcilers as
// input): whose rights Flux applies with, and where remote Helm charts may come from.
import type { StackManifest } from '../api/release.ts';
import { chartHostErrors, type ValidationResult } from './stack.ts';

export interface TenancyPolicy {
  /**
   * `--default-service-account`: the ServiceAccount, in each object's own namespace, that Flux
   * impersonates to apply to the MANAGEMENT cluster when nothing names one (a release's
   * cluster-class/ without the ClusterStack's serviceAccountName; a Helm addon's folder). Flux's
   * name and meaning. Undefined: kustomize-controller's own rights.
   */
  defaultServiceAccount?: string;
  /**
   * `--allowed-chart-hosts`: hosts a remote Helm chart (stack.yaml `repository`) may come from;
   * an entry `*.example.com` allows every host below example.com. Undefined: any host.
   */
  allowedChartHosts?: readonly string[];
  /**
   * `--insecure-chart-hosts`: hosts (or `*.domain`) a chart dependency may be fetched from over
   * plain http. Undefined: https only.
   */
  insecureChartHosts?: readonly string[];
  /**
   * `--allow-source-networks`: CIDRs and hosts outbound source requests may reach although they
   * are loopback, link-local, private or cluster-internal (sources/egress.ts). Undefined: none.
   */
  allowSourceNetworks?: readonly string[];
}

const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const HOST_PATTERN =
  /^(\*\.)?[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)*$/;

/** Why `name` cannot be a ServiceAccount name (a DNS-1123 subdomain), or undefined. */
export function serviceAccountNameError(name: string): string | undefined {
  if (name.length > 253 || !DNS1123_SUBDOMAIN.test(name))
    return `"${name}" is not a ServiceAccount name (a DNS-1123 subdomain: lower-case letters, digits, "-" and ".")`;
  return undefined;
}

/**
 * `--allowed-chart-hosts` text → hosts ("a.example,*.b.example"); undefined when empty (any host).
 * Throws naming the bad entry.
 */
export function parseAllowedChartHosts(text: string): string[] | undefined {
  const entries = text
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (entries.length === 0) return undefined;
  for (const e of entries) {
    if (!HOST_PATTERN.test(e))
      throw new Error(`"${e}" is not a host name or *.domain (no scheme, port or path)`);
  }
  return entries.map((e) => e.toLowerCase());
}

/**
 * A release's stack.yaml validation with the tenancy policy applied: a remote chart from a host
 * --allowed-chart-hosts does not list makes the release invalid, like any other stack.yaml error.
 */
export function withChartPolicy(
  stack: ValidationResult<StackManifest>,
  tenancy: TenancyPolicy | undefined,
): ValidationResult<StackManifest> {
  if (!stack.ok) return stack;
  const errors = chartHostErrors(stack.value, tenancy?.allowedChartHosts);
  return errors.length > 0 ? { ok: false, errors } : stack;
}
