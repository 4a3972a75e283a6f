// Installs stackflux's CRDs (crds/*.yaml) into a cluster with server-side apply (idempotent)
// and waits until they are Established. Used by e2e tests.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import type { KubeClient, KubeObject } from '../../controller/runtime/client.ts';

export const CRDS_DIR = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'crds');

export function readCrdFiles(dir: string = CRDS_DIR): KubeObject[] {
  const out: KubeObject[] = [];
  for (const file of readdirSync(dir).sort()) {
    if (!file.endsWith('.yaml')) continue;
    for (const doc of parseAllDocuments(readFileSync(join(dir, file), 'utf8'))) {
      const obj = doc.toJS() as KubeObject | null;
      if (obj?.kind === 'CustomResourceDefinition') out.push(obj);
    }
  }
  return out;
}

export async function installCrds(
  client: KubeClient,
  dir: string = CRDS_DIR,
  timeoutMs = 60_000,
): Promise<void> {
  const crds = readCrdFiles(dir);
  for (const crd of crds) await client.apply(crd, { force: true, fieldManager: 'stackflux-test' });
  const deadline = Date.now() + timeoutMs;
  for (const crd of crds) {
    for (;;) {
      const got = await client.get<
        KubeObject & { status?: { conditions?: { type: string; status: string }[] } }
      >('apiextensions.k8s.io/v1', 'CustomResourceDefinition', crd.metadata.name ?? '');
      if (got?.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')) break;
      if (Date.now() > deadline)
        throw new Error(`CRD ${crd.metadata.name} not Established after ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 200));
    }
  }
}
