// Reads YAML the way Go's gopkg.in/yaml.v3 Unmarshal fills a struct, for the few files csctl and
// the cluster-stack-operator read so (csctl.yaml, clusteraddon.yaml, metadata.yaml):
// - fields not in the struct are ignored: csctl and CSO accept them, and exactness beats
//   strictness here (a real stack with an extra field must read as it does there);
// - a missing or null field is the zero value ("" / empty list / zero struct);
// - a string field takes any scalar as written (`kubernetesVersion: 1.30` is "1.30", not 1.3);
// - a mapping where a string or list is expected, a scalar where a mapping is, a duplicate key,
//   or a document that is not YAML is an error, as yaml.v3 reports it.
// Errors name the file and the field path. Aliases are followed, at most MAX_YAML_ALIASES times
// per file (a "billion laughs" file is refused, not expanded).
import { type Document, isAlias, isMap, isScalar, isSeq, type Node, parseDocument } from 'yaml';
import { MAX_YAML_ALIASES } from '../../api/release.ts';

export class StructReader {
  readonly errors: string[] = [];
  private aliases = 0;

  readonly file: string;
  private readonly doc: Document | undefined;

  private constructor(file: string, doc: Document | undefined) {
    this.file = file;
    this.doc = doc;
  }

  /** Parses `text`; a YAML syntax error is recorded and the root reads as empty. */
  static parse(file: string, text: string): StructReader {
    const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: false });
    const reader = new StructReader(file, doc.errors.length > 0 ? undefined : doc);
    for (const e of doc.errors) reader.errors.push(`${file}: invalid YAML: ${e.message.split('\n')[0]}`);
    return reader;
  }

  /** The document's root node (undefined: empty document or a syntax error). */
  root(): unknown {
    return this.deref(this.doc?.contents ?? undefined);
  }

  private deref(node: unknown): unknown {
    if (!isAlias(node) || this.doc === undefined) return node;
    this.aliases += 1;
    if (this.aliases > MAX_YAML_ALIASES) {
      if (this.aliases === MAX_YAML_ALIASES + 1)
        this.errors.push(`${this.file}: more than ${MAX_YAML_ALIASES} alias expansions`);
      return undefined;
    }
    return node.resolve(this.doc);
  }

  private isNull(node: unknown): boolean {
    return node === undefined || node === null || (isScalar(node) && node.value === null);
  }

  /** The fields of a mapping by key (empty for null); undefined after recording an error. */
  struct(node: unknown, field: string): Map<string, unknown> | undefined {
    const n = this.deref(node);
    if (this.isNull(n)) return new Map();
    if (!isMap(n)) {
      this.errors.push(`${this.file}: ${field || 'the document'} must be a mapping`);
      return undefined;
    }
    const fields = new Map<string, unknown>();
    for (const pair of n.items) {
      const key = this.deref(pair.key);
      // A non-string key never matches a struct field's name: ignored, like an unknown field.
      if (isScalar(key) && key.value !== null) fields.set(String(key.source ?? key.value), pair.value);
    }
    return fields;
  }

  /** A string field: any scalar as written; "" when missing or null. */
  string(node: unknown, field: string): string {
    const n = this.deref(node);
    if (this.isNull(n)) return '';
    if (!isScalar(n)) {
      this.errors.push(`${this.file}: ${field} must be a string`);
      return '';
    }
    return typeof n.value === 'string' ? n.value : String(n.source ?? n.value);
  }

  /** A list field's items; [] when missing or null; undefined after recording an error. */
  list(node: unknown, field: string): unknown[] | undefined {
    const n = this.deref(node);
    if (this.isNull(n)) return [];
    if (!isSeq(n)) {
      this.errors.push(`${this.file}: ${field} must be a list`);
      return undefined;
    }
    return n.items as Node[];
  }

  /** True when the field is present with a value (not missing, not null). */
  given(node: unknown): boolean {
    return !this.isNull(this.deref(node));
  }
}
