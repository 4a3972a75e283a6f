// Cluster API's side of the runtime extension, for tests: a serving certificate as cert-manager's
// self-signed Issuer makes one (the certificate is its own CA: ca.crt = tls.crt), and calls as
// Cluster API's runtime client makes them (POST <path>?timeout=10s, JSON body, no Content-Type,
// trusting only the caBundle, server name = the Service's host).
import { execFileSync } from 'node:child_process';
import { mkdirSync, readFileSync } from 'node:fs';
import { request } from 'node:https';
import type { Socket } from 'node:net';
import { join } from 'node:path';
import {
  type RuntimeExtensionServer,
  serveRuntimeExtension,
} from '../../controller/controllers/upgradehook.ts';
import type { UpgradeStageLookup } from '../../controller/reconcilers/upgradehook.ts';
import type { BodyServerLimits } from '../../controller/runtime/bodyserver.ts';
import { type RawAnswer, rawRequest } from './webhook.ts';

export interface ServingCertificate {
  certFile: string;
  keyFile: string;
  /** What Cluster API puts into caBundle. */
  ca: Buffer;
}

/** A self-signed P-256 certificate for localhost and 127.0.0.1 in `dir`. */
export function servingCertificate(dir: string, cn = 'stackflux-test'): ServingCertificate {
  mkdirSync(dir, { recursive: true });
  const certFile = join(dir, 'tls.crt');
  const keyFile = join(dir, 'tls.key');
  execFileSync(
    'openssl',
    [
      'req',
      '-x509',
      '-newkey',
      'ec',
      '-pkeyopt',
      'ec_paramgen_curve:prime256v1',
      '-nodes',
      '-keyout',
      keyFile,
      '-out',
      certFile,
      '-days',
      '2',
      '-subj',
      `/CN=${cn}`,
      '-addext',
      'subjectAltName=DNS:localhost,IP:127.0.0.1',
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  return { certFile, keyFile, ca: readFileSync(certFile) };
}

export interface HookAnswer {
  status: number;
  body: Record<string, unknown>;
  /** SHA-256 fingerprint of the certificate the server presented. */
  fingerprint: string;
}

/** One call as Cluster API's runtime client (internal/runtime/client httpCall) makes it. */
export function callHook(url: string, path: string, body: unknown, ca: Buffer): Promise<HookAnswer> {
  const payload = Buffer.from(typeof body === 'string' ? body : JSON.stringify(body));
  const target = new URL(`${path}?timeout=10s`, url);
  return new Promise((resolve, reject) => {
    const req = request(
      target,
      {
        method: 'POST',
        ca,
        servername: 'localhost',
        agent: false,
        headers: { 'content-length': String(payload.length) },
      },
      (res) => {
        const chunks: Buffer[] = [];
        const fingerprint = (
          res.socket as Socket & { getPeerCertificate(): { fingerprint256: string } }
        ).getPeerCertificate().fingerprint256;
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          const text = Buffer.concat(chunks).toString('utf8');
          resolve({
            status: res.statusCode ?? 0,
            body: JSON.parse(text) as Record<string, unknown>,
            fingerprint,
          });
        });
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}

/**
 * Starts a runtime extension (this lookup and limits, certificate `cert`), lets `send` post raw
 * requests over TLS and returns the last answer as a corpus outcome: reason "HTTP <status>"
 * (and the hook status for a 200), message its body. Every connection is closed afterwards.
 */
export async function hookOutcome(
  cert: ServingCertificate,
  lookup: UpgradeStageLookup,
  limits: Partial<BodyServerLimits>,
  send: (
    post: (path: string, headers: Record<string, string>, body?: Buffer | string) => Promise<RawAnswer>,
    server: RuntimeExtensionServer,
  ) => Promise<RawAnswer>,
): Promise<{ reason: string; message: string }> {
  const server = await serveRuntimeExtension('127.0.0.1:0', {
    lookup,
    certFile: cert.certFile,
    keyFile: cert.keyFile,
    limits,
    reloadIntervalMs: 0,
  });
  const sockets: Socket[] = [];
  try {
    const answer = await send(async (path, headers, body) => {
      const a = await rawRequest(server.url, path, headers, body, 30_000, cert.ca);
      sockets.push(a.socket);
      return a;
    }, server);
    let hookStatus = '';
    if (answer.status === 200)
      hookStatus = ` ${String((JSON.parse(answer.body) as { status?: unknown }).status)}`;
    return { reason: `HTTP ${answer.status}${hookStatus}`, message: answer.body };
  } finally {
    for (const s of sockets) s.destroy();
    await server.close();
  }
}
