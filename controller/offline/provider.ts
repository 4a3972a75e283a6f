// Provider kinds in a snapshot (mirrors controller/controllers/provider.ts): a kind is "served" when
// the snapshot holds its CustomResourceDefinition (serving that version) or any object of it, and
// the template / provider object is looked up by name like the live caches look it up.
import type { ClusterStackRelease } from '../api/clusterstackrelease.ts';
import { groupOf, versionOf } from '../api/resources.ts';
import {
  type ProviderLookup,
  type ProviderObject,
  type ProviderRef,
  type ProviderTemplate,
  providerObjectKind,
  providerObjectRef,
  type ReleaseProviderInput,
} from '../reconcilers/provider.ts';
import type { SnapshotObject } from './snapshot.ts';
import type { World } from './world.ts';
import { isRecord } from './yaml.ts';

function crdServes(crd: SnapshotObject, group: string, version: string, kind: string): boolean {
  const spec = crd.spec;
  if (!isRecord(spec) || spec.group !== group) return false;
  if (!isRecord(spec.names) || spec.names.kind !== kind) return false;
  const versions = Array.isArray(spec.versions) ? spec.versions : [];
  return versions.some((v) => isRecord(v) && v.name === version && v.served !== false);
}

export function servedInSnapshot(world: World, apiVersion: string, kind: string): boolean {
  const group = groupOf(apiVersion);
  if (world.list(group, kind).length > 0) return true;
  return world
    .list('apiextensions.k8s.io', 'CustomResourceDefinition')
    .some((crd) => crdServes(crd, group, versionOf(apiVersion), kind));
}

function lookup<T>(
  world: World,
  apiVersion: string,
  kind: string,
  name: string,
  ns: string,
): ProviderLookup<T> {
  if (!servedInSnapshot(world, apiVersion, kind)) return { state: 'notServed', apiVersion, kind };
  const obj = world.get(apiVersion, kind, name, ns);
  return obj === undefined ? { state: 'notFound' } : { state: 'found', object: obj as unknown as T };
}

export function snapshotTemplate(
  world: World,
  ref: ProviderRef,
  ns: string,
): ProviderLookup<ProviderTemplate> {
  const template = lookup<ProviderTemplate>(world, ref.apiVersion, ref.kind, ref.name, ns);
  if (template.state !== 'found') return template;
  const objectKind = providerObjectKind(ref.kind);
  return servedInSnapshot(world, ref.apiVersion, objectKind)
    ? template
    : { state: 'notServed', apiVersion: ref.apiVersion, kind: objectKind };
}

export function snapshotReleaseProvider(
  world: World,
  release: ClusterStackRelease,
): ReleaseProviderInput | undefined {
  const templateRef = release.spec.providerRef;
  const objectRef = providerObjectRef(release);
  if (templateRef === undefined || objectRef === undefined) return undefined;
  const ns = release.metadata.namespace ?? 'default';
  return {
    template: snapshotTemplate(world, templateRef, ns),
    object: lookup<ProviderObject>(world, objectRef.apiVersion, objectRef.kind, objectRef.name, ns),
  };
}
