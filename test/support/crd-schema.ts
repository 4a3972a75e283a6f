// Validating objects against a CRD's OpenAPI schema with ajv, as the API server would, for unit
// tests: Kubernetes' own keywords known, and (closedSchema) unknown fields rejected like kubectl's
// strict field validation.
import { Ajv } from 'ajv';

/** ajv that accepts the Kubernetes-only keywords (it does not evaluate them: CEL rules are not checked). */
export function kubernetesAjv(): Ajv {
  const a = new Ajv({ strict: false, allErrors: true });
  for (const k of [
    'x-kubernetes-preserve-unknown-fields',
    'x-kubernetes-list-type',
    'x-kubernetes-list-map-keys',
    'x-kubernetes-map-type',
    'x-kubernetes-validations',
  ]) {
    a.addKeyword(k);
  }
  return a;
}

/** The CRD's schema with unknown fields rejected (kubectl's strict field validation). */
export function closedSchema(schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(closedSchema);
  if (typeof schema !== 'object' || schema === null) return schema;
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(schema)) {
    out[key] =
      key === 'properties'
        ? Object.fromEntries(Object.entries(value as object).map(([k, v]) => [k, closedSchema(v)]))
        : closedSchema(value);
  }
  if (
    out.type === 'object' &&
    out.properties &&
    out.additionalProperties === undefined &&
    !out['x-kubernetes-preserve-unknown-fields']
  ) {
    out.additionalProperties = false;
  }
  return out;
}
