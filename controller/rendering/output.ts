// Checks that an output file is YAML Kubernetes objects and returns them.
import { parseAllDocuments } from 'yaml';
import { MAX_YAML_ALIASES } from '../api/release.ts';
import type { KubernetesObject } from './types.ts';
import { isPlainObject } from './values.ts';

export class OutputError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'OutputError';
  }
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  return `a ${typeof value}`;
}

/**
 * Parses `text` (the content of `file`) into Kubernetes objects. Empty documents are skipped.
 * Throws OutputError naming the file, the document and, for YAML errors, the line.
 */
export function parseObjects(file: string, text: string): KubernetesObject[] {
  const objects: KubernetesObject[] = [];
  const docs = parseAllDocuments(text, { uniqueKeys: true, prettyErrors: true });
  if (!Array.isArray(docs)) {
    // An empty stream: `parseAllDocuments` returns an EmptyStream.
    return objects;
  }
  docs.forEach((doc, index) => {
    const where = `${file} (document ${index + 1})`;
    const error = doc.errors[0];
    if (error) {
      const line = error.linePos?.[0].line;
      const firstLine = error.message.split('\n')[0] ?? error.message;
      throw new OutputError(`${file}${line === undefined ? '' : `:${line}`}: invalid YAML: ${firstLine}`);
    }
    if (doc.contents === null) return; // an empty document, e.g. a trailing `---`
    let value: unknown;
    try {
      value = doc.toJS({ maxAliasCount: MAX_YAML_ALIASES });
    } catch (e) {
      throw new OutputError(`${where}: invalid YAML: ${e instanceof Error ? e.message : String(e)}`);
    }
    if (value === null || value === undefined) return;
    if (!isPlainObject(value)) {
      throw new OutputError(`${where}: expected a Kubernetes object (a mapping), got ${describe(value)}`);
    }
    const missing: string[] = [];
    if (typeof value.apiVersion !== 'string' || value.apiVersion === '') missing.push('apiVersion');
    if (typeof value.kind !== 'string' || value.kind === '') missing.push('kind');
    const metadata = value.metadata;
    if (!isPlainObject(metadata) || typeof metadata.name !== 'string' || metadata.name === '') {
      missing.push('metadata.name');
    } else if (metadata.namespace !== undefined && typeof metadata.namespace !== 'string') {
      throw new OutputError(`${where}: metadata.namespace must be a string`);
    }
    if (missing.length > 0) {
      throw new OutputError(`${where}: not a Kubernetes object, missing ${missing.join(', ')}`);
    }
    objects.push(value as KubernetesObject);
  });
  return objects;
}

/** `group/kind namespace/name`, the identity kustomize rejects duplicates of. */
export function objectId(object: KubernetesObject): string {
  const group = object.apiVersion.includes('/') ? object.apiVersion.split('/')[0] : '';
  const namespace = object.metadata.namespace ?? '';
  return `${group}/${object.kind} ${namespace ? `${namespace}/` : ''}${object.metadata.name}`;
}
