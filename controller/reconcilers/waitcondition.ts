// A csctl addon's waitForPostCondition (clusteraddon.yaml) as Flux health checks of the addon's
// Kustomization. The cluster-stack-operator evaluates ONE CEL expression over the named objects of
// the workload cluster, each bound to its `key` (internal/controller/clusteraddon_controller.go,
// getDynamicResourceAndEvaluateCEL), and moves on once it is true. kustomize-controller (v1.5+)
// evaluates `spec.healthCheckExprs` per applied object of a kind, the object's top-level fields
// being the variables (`data.x`, not `key.data.x`), and with `wait: true` only over the objects the
// Kustomization applies (`spec.healthChecks` is then ignored). So a condition maps when it reads
// one object, that object is one the addon applies, and every use of its key is `<key>.<field>`:
// `<key>.` is dropped and the expression is guarded to that object's name and namespace, so the
// other objects of the kind stay as they are (only kinds kstatus treats as ready once they exist
// may share the expression). Anything else is reported, never silently dropped.
//
// A waitForPreCondition must hold BEFORE the step is applied, over objects that already exist in
// the workload cluster (the addon does not apply them). Its Flux form is a gate: a Kustomization
// applying an empty folder with `wait: false`, whose `spec.healthChecks` are the condition's objects
// and whose `spec.healthCheckExprs` are built as above; the addon's Kustomization dependsOn it.
// Verified on kustomize-controller v1.9.5 (hack/testenv): with `wait: false` it polls the listed
// objects with the custom expressions even though it applied none of them; a missing object is
// `NotFound` until the timeout (HealthCheckFailed, retried every interval). Every object a gate
// checks has its own guarded expression, so objects of one kind may share it.
import { Environment } from '@marcbachmann/cel-js';
import { MAX_HEALTH_CHECK_LENGTH } from '../api/rollout.ts';
import type { WaitForCondition } from '../releases/description.ts';
import { ASSUMED_INPUT, compileHealthCheck, estimateCost, MAX_COST } from './healthcheck.ts';

/** One entry of a Kustomization's spec.healthCheckExprs (kustomize.toolkit.fluxcd.io/v1). */
export interface HealthCheckExpr {
  apiVersion: string;
  kind: string;
  current: string;
}

/** An object the addon's Kustomization applies, its namespace as applied (targetNamespace filled in). */
export interface AppliedObject {
  apiVersion: string;
  kind: string;
  name: string;
  /** Empty for a cluster-scoped object. */
  namespace: string;
}

/** The health check expressions of an addon's post-conditions, and the conditions that have none. */
export interface PostConditionChecks {
  exprs: HealthCheckExpr[];
  /** Why a condition cannot be a Flux health check, one line each. */
  unmapped: string[];
}

/** An entry of a Kustomization's spec.healthChecks (Flux's NamespacedObjectKindReference). */
export interface HealthCheckRef {
  apiVersion: string;
  kind: string;
  name: string;
  /** Absent for a cluster-scoped object. */
  namespace?: string;
}

/** An addon's pre-condition gate: the objects it checks and their expressions; what has none. */
export interface PreConditionChecks extends PostConditionChecks {
  /** The objects of the mapped conditions, each once. */
  healthChecks: HealthCheckRef[];
}

/** Kinds kstatus reports Current as soon as they exist: a guarded expression changes nothing for them. */
const READY_ONCE_EXISTING = new Set(['/ConfigMap', '/Secret', '/ServiceAccount', '/Namespace']);

const parser = new Environment({ unlistedVariablesAreDyn: true });

const groupOf = (apiVersion: string): string =>
  (apiVersion.includes('/') ? apiVersion.split('/')[0] : '') ?? '';
const groupKind = (o: { apiVersion: string; kind: string }): string => `${groupOf(o.apiVersion)}/${o.kind}`;

type Token = { kind: 'ident' | 'string' | 'other'; text: string; start: number; end: number };

/** CEL's tokens as far as the rewrite needs them: identifiers, string literals (skipped), the rest. */
function tokens(text: string): Token[] | string {
  const out: Token[] = [];
  let i = 0;
  while (i < text.length) {
    const c = text[i] as string;
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    const prefix = /^[rRbB]{0,2}(?=['"])/.exec(text.slice(i, i + 3))?.[0];
    if (prefix !== undefined) {
      const start = i;
      const raw = /r/i.test(prefix);
      i += prefix.length;
      const q = text[i] as string;
      const delim = text.startsWith(q.repeat(3), i) ? q.repeat(3) : q;
      i += delim.length;
      for (;;) {
        if (i >= text.length) return `an unterminated string at ${start}`;
        if (!raw && text[i] === '\\') i += 2;
        else if (text.startsWith(delim, i)) break;
        else i++;
      }
      i += delim.length;
      out.push({ kind: 'string', text: text.slice(start, i), start, end: i });
      continue;
    }
    const ident = /^[A-Za-z_][A-Za-z0-9_]*/.exec(text.slice(i))?.[0];
    if (ident !== undefined) {
      out.push({ kind: 'ident', text: ident, start: i, end: i + ident.length });
      i += ident.length;
      continue;
    }
    out.push({ kind: 'other', text: c, start: i, end: i + 1 });
    i++;
  }
  return out;
}

/** The expression over the object's top-level fields, or why there is none. */
export function withoutKey(
  expression: string,
  key: string,
): { ok: true; text: string } | { ok: false; why: string } {
  const toks = tokens(expression);
  if (typeof toks === 'string') return { ok: false, why: toks };
  let text = '';
  let copied = 0;
  for (const [i, t] of toks.entries()) {
    if (t.kind !== 'ident' || t.text !== key || toks[i - 1]?.text === '.') continue;
    const dot = toks[i + 1];
    const field = toks[i + 2];
    if (dot?.text !== '.' || field?.kind !== 'ident')
      return { ok: false, why: `it uses ${key} other than as ${key}.<field>` };
    if (toks[i - 1]?.text === '(' && toks[i - 2]?.text === 'has' && toks[i + 3]?.text === ')')
      return { ok: false, why: `has(${key}.${field.text}) has no form over the object's own fields` };
    text += expression.slice(copied, t.start);
    copied = field.start;
  }
  return { ok: true, text: text + expression.slice(copied) };
}

function parses(expression: string): string | undefined {
  try {
    parser.parse(expression);
    return undefined;
  } catch (err: unknown) {
    return err instanceof Error ? err.message.split('\n')[0] : String(err);
  }
}

const API_VERSION = /^(?:[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\/)?v[0-9]+(?:(?:alpha|beta)[0-9]+)?$/;
const KIND = /^[A-Za-z][A-Za-z0-9]{0,62}$/;
const NAMESPACE = /^(?:[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)?$/;

/**
 * Why the release's object reference cannot name an object of the workload cluster (it goes into
 * a Kustomization the tenants' kustomize-controller reads): the API server's own rules, names as
 * path segments (up to 253 characters, no "/", "%", not "." or "..").
 */
function referenceProblem(o: WaitForCondition['objects'][number]): string | undefined {
  const ref = JSON.stringify(`${o.apiVersion} ${o.kind} ${o.namespace}/${o.name}`.slice(0, 300));
  if (!API_VERSION.test(o.apiVersion)) return `${ref}: apiVersion is not <group>/<version> or <version>`;
  if (!KIND.test(o.kind)) return `${ref}: kind is not a Kubernetes kind name`;
  if (!NAMESPACE.test(o.namespace)) return `${ref}: namespace is not a DNS label`;
  if (
    o.name.length === 0 ||
    o.name.length > 253 ||
    /[/%\s\p{Cc}]/u.test(o.name) ||
    o.name === '.' ||
    o.name === '..'
  )
    return `${ref}: name is not an object name`;
  return undefined;
}

/** One condition as a guarded expression for its object's kind, or why it cannot be one. */
function mapCondition(
  condition: WaitForCondition,
  checked: CheckedObjects,
): { ok: true; object: AppliedObject; current: string } | { ok: false; why: string } {
  // The expression runs in kustomize-controller, which every tenant shares: the length and cost
  // bounds of a rollout health check hold for it too.
  if (condition.conditions.length > MAX_HEALTH_CHECK_LENGTH)
    return {
      ok: false,
      why: `the expression is ${condition.conditions.length} characters long, more than the limit of ${MAX_HEALTH_CHECK_LENGTH}`,
    };
  const syntax = parses(condition.conditions);
  if (syntax !== undefined) return { ok: false, why: `the expression does not parse: ${syntax}` };
  const compiled = compileHealthCheck(condition.conditions);
  if (!('reason' in compiled)) {
    const cost = estimateCost(compiled, ASSUMED_INPUT);
    if (cost > MAX_COST)
      return {
        ok: false,
        why: `the expression may cost ${cost.toExponential(2)} units over lists of ${ASSUMED_INPUT.items} items, more than the limit of ${MAX_COST}`,
      };
  }
  const [object, ...more] = condition.objects;
  if (object === undefined) return { ok: false, why: 'it names no object' };
  if (more.length > 0)
    return {
      ok: false,
      why: `it reads ${condition.objects.length} objects; Flux checks one object at a time`,
    };
  const bad = referenceProblem(object);
  if (bad !== undefined) return { ok: false, why: bad };
  const ref = `${object.kind} ${object.namespace ? `${object.namespace}/` : ''}${object.name}`;
  const same = (o: AppliedObject) => groupKind(o) === groupKind(object) && o.name === object.name;
  // A reference without namespace is to a cluster-scoped object (CSO gets it without one).
  const target =
    checked.kind === 'condition-objects'
      ? { apiVersion: object.apiVersion, kind: object.kind, name: object.name, namespace: object.namespace }
      : checked.applied.find((o) => same(o) && (o.namespace === object.namespace || object.namespace === ''));
  if (target === undefined)
    return { ok: false, why: `${ref} is not an object this addon applies; Flux checks only those` };
  const shared =
    checked.kind === 'applied' &&
    checked.applied.some((o) => groupKind(o) === groupKind(object) && o !== target);
  if (shared && !READY_ONCE_EXISTING.has(groupKind(object)))
    return {
      ok: false,
      why: `the addon applies other ${object.kind} objects, whose own readiness the expression would replace`,
    };
  const rewritten = withoutKey(condition.conditions, object.key);
  if (!rewritten.ok) return rewritten;
  const guard = [
    `metadata.name == ${JSON.stringify(object.name)}`,
    ...(object.namespace ? [`metadata.namespace == ${JSON.stringify(object.namespace)}`] : []),
  ].join(' && ');
  return { ok: true, object: target, current: `(${guard} ? (${rewritten.text}) : true)` };
}

/**
 * Which objects Flux evaluates the expressions over: those the addon's Kustomization applies
 * (post-conditions, `wait: true`), or exactly the conditions' own objects (a pre-condition gate's
 * `spec.healthChecks`, each with its own guarded expression).
 */
type CheckedObjects = { kind: 'applied'; applied: readonly AppliedObject[] } | { kind: 'condition-objects' };

/** The conditions mapped one by one, joined per kind with &&; the objects they check; what has no form. */
function mapConditions(
  conditions: readonly WaitForCondition[],
  checked: CheckedObjects,
): PostConditionChecks & { objects: AppliedObject[] } {
  const byKind = new Map<string, HealthCheckExpr>();
  const unmapped: string[] = [];
  const objects: AppliedObject[] = [];
  for (const condition of conditions) {
    const mapped = mapCondition(condition, checked);
    if (!mapped.ok) {
      unmapped.push(`"${condition.conditions}": ${mapped.why}`);
      continue;
    }
    objects.push(mapped.object);
    const k = groupKind(mapped.object);
    const have = byKind.get(k);
    if (have !== undefined) have.current = `${have.current} && ${mapped.current}`;
    else
      byKind.set(k, {
        apiVersion: mapped.object.apiVersion,
        kind: mapped.object.kind,
        current: mapped.current,
      });
  }
  return { exprs: [...byKind.values()], unmapped, objects };
}

/**
 * The Flux health check expressions of an addon's post-conditions (one entry per kind, its
 * conditions joined with &&) over the objects the addon applies, and the conditions that cannot be
 * one (described for the ClusterAddon's condition).
 */
export function postConditionHealthChecks(
  conditions: readonly WaitForCondition[],
  applied: readonly AppliedObject[],
): PostConditionChecks {
  const { exprs, unmapped } = mapConditions(conditions, { kind: 'applied', applied });
  return { exprs, unmapped };
}

/**
 * An addon's pre-conditions as the health checks of its gate Kustomization: the objects of the
 * mapped conditions (each once) as `spec.healthChecks`, their expressions as `spec.healthCheckExprs`,
 * and the conditions that cannot be mapped (described for the ClusterAddon's condition).
 */
export function preConditionHealthChecks(conditions: readonly WaitForCondition[]): PreConditionChecks {
  const { exprs, unmapped, objects } = mapConditions(conditions, { kind: 'condition-objects' });
  const refs = new Map<string, HealthCheckRef>();
  for (const o of objects) {
    const ref = {
      apiVersion: o.apiVersion,
      kind: o.kind,
      name: o.name,
      ...(o.namespace !== '' ? { namespace: o.namespace } : {}),
    };
    refs.set(`${groupKind(o)} ${o.namespace}/${o.name}`, ref);
  }
  return { healthChecks: [...refs.values()], exprs, unmapped };
}
