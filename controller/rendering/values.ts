// Values of one addon: addon defaults (values.yaml) < per-cluster values < central values,
// deep-merged, then checked against the addon's values.schema.json.
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import type { PlainObject } from './types.ts';

export function isPlainObject(value: unknown): value is PlainObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Deep merge: objects merge key by key, everything else (arrays, scalars, null) in `override`
 * replaces what is in `base`. Inputs are not modified; key order is base's, then new keys.
 */
export function mergeValues(base: PlainObject, override: PlainObject): PlainObject {
  const out: PlainObject = {};
  for (const [key, value] of Object.entries(base)) out[key] = value;
  for (const [key, value] of Object.entries(override)) {
    const existing = out[key];
    out[key] = isPlainObject(existing) && isPlainObject(value) ? mergeValues(existing, value) : value;
  }
  return out;
}

/** Merges layers lowest precedence first. */
export function mergeAll(layers: readonly PlainObject[]): PlainObject {
  return layers.reduce<PlainObject>((acc, layer) => mergeValues(acc, layer), {});
}

// Compiled validators keyed by schema text. Each schema gets its own Ajv instance so two
// schemas with the same $id never collide. Bounded; an eviction only costs a recompile.
const validators = new Map<string, ValidateFunction>();
const VALIDATOR_LIMIT = 128;

/** Compiles a values schema; throws with Ajv's reason when the schema itself is invalid. */
export function compileSchema(schemaText: string): ValidateFunction {
  const hit = validators.get(schemaText);
  if (hit) return hit;
  const schema: unknown = JSON.parse(schemaText);
  if (typeof schema !== 'object' || schema === null || Array.isArray(schema)) {
    throw new Error('the schema must be a JSON object');
  }
  const ajv = new Ajv({ strict: false, allErrors: true });
  const validate = ajv.compile(schema);
  if (validators.size >= VALIDATOR_LIMIT) {
    const oldest = validators.keys().next();
    if (!oldest.done) validators.delete(oldest.value);
  }
  validators.set(schemaText, validate);
  return validate;
}

/** `/a/0/b-c` → `Values.a[0].b-c` */
function fieldName(instancePath: string, extra?: string): string {
  const parts = instancePath === '' ? [] : instancePath.slice(1).split('/');
  if (extra !== undefined) parts.push(extra);
  let out = 'Values';
  for (const raw of parts) {
    const part = raw.replace(/~1/g, '/').replace(/~0/g, '~');
    out += /^\d+$/.test(part) ? `[${part}]` : `.${part}`;
  }
  return out;
}

export function formatSchemaError(error: ErrorObject): string {
  const params = error.params as Record<string, unknown>;
  if (error.keyword === 'required' && typeof params.missingProperty === 'string') {
    return `${fieldName(error.instancePath, params.missingProperty)} is required`;
  }
  if (error.keyword === 'additionalProperties' && typeof params.additionalProperty === 'string') {
    return `${fieldName(error.instancePath, params.additionalProperty)} is not allowed (unknown field)`;
  }
  if (error.keyword === 'enum' && Array.isArray(params.allowedValues)) {
    return `${fieldName(error.instancePath)} must be one of ${JSON.stringify(params.allowedValues)}`;
  }
  return `${fieldName(error.instancePath)} ${error.message ?? `fails ${error.keyword}`}`;
}

/** Undefined when valid, else every problem, one per field, in Ajv's (deterministic) order. */
export function validateValues(validate: ValidateFunction, values: PlainObject): string[] | undefined {
  if (validate(values)) return undefined;
  const messages = (validate.errors ?? []).map(formatSchemaError);
  return [...new Set(messages)];
}
