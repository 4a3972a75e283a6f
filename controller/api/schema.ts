// OpenAPI v3 (structural, as Kubernetes CRDs accept it) schemas written as `as const` data, and
// the TypeScript type derived from them: the schema is the ONE source of truth for both the CRD
// YAML (hack/gen-crds.ts → crds/) and the types the reconcilers use.
//
// Only the subset of OpenAPI the CRDs here use is typed:
//   string/integer/number/boolean (with enum), array (items), object with `properties` and
//   `required`, object with `additionalProperties` (a map), and
//   `x-kubernetes-preserve-unknown-fields: true` (free-form → Record<string, unknown>), and
//   `x-kubernetes-int-or-string: true` (number | string).
// Anything else derives to `unknown`, which a type test would notice.

/** The JSON value of a schema (what may appear in a CRD's openAPIV3Schema). */
export interface JSONSchemaProps {
  readonly type?: 'string' | 'integer' | 'number' | 'boolean' | 'array' | 'object';
  readonly description?: string;
  readonly format?: string;
  readonly pattern?: string;
  readonly enum?: readonly (string | number | boolean)[];
  readonly default?: unknown;
  readonly minimum?: number;
  readonly maximum?: number;
  readonly minLength?: number;
  readonly maxLength?: number;
  readonly minItems?: number;
  readonly maxItems?: number;
  readonly items?: JSONSchemaProps;
  readonly properties?: { readonly [key: string]: JSONSchemaProps };
  readonly additionalProperties?: JSONSchemaProps;
  readonly required?: readonly string[];
  readonly 'x-kubernetes-preserve-unknown-fields'?: boolean;
  readonly 'x-kubernetes-int-or-string'?: boolean;
  readonly 'x-kubernetes-list-type'?: 'atomic' | 'set' | 'map';
  readonly 'x-kubernetes-list-map-keys'?: readonly string[];
  readonly 'x-kubernetes-map-type'?: 'atomic' | 'granular';
  readonly 'x-kubernetes-validations'?: readonly { readonly rule: string; readonly message?: string }[];
}

type Simplify<T> = { -readonly [K in keyof T]: T[K] } & {};

type RequiredKeys<S> = S extends { readonly required: readonly (infer R)[] } ? R : never;

type ObjectFromProperties<P, R> = Simplify<
  { -readonly [K in keyof P as K extends R ? K : never]: FromSchema<P[K]> } & {
    -readonly [K in keyof P as K extends R ? never : K]?: FromSchema<P[K]>;
  }
>;

/** The TypeScript type of the values a schema accepts. */
export type FromSchema<S> = S extends { readonly enum: readonly (infer E)[] }
  ? E
  : S extends { readonly 'x-kubernetes-int-or-string': true }
    ? number | string
    : S extends { readonly type: 'string' }
      ? string
      : S extends { readonly type: 'integer' | 'number' }
        ? number
        : S extends { readonly type: 'boolean' }
          ? boolean
          : S extends { readonly type: 'array'; readonly items: infer I }
            ? FromSchema<I>[]
            : S extends { readonly type: 'object'; readonly properties: infer P }
              ? ObjectFromProperties<P, RequiredKeys<S>>
              : S extends { readonly type: 'object'; readonly additionalProperties: infer A }
                ? Record<string, FromSchema<A>>
                : S extends { readonly 'x-kubernetes-preserve-unknown-fields': true }
                  ? Record<string, unknown>
                  : unknown;

/** Identity at runtime; checks at compile time that `s` is a schema and keeps its literal type. */
export function schema<const S extends JSONSchemaProps>(s: S): S {
  return s;
}
