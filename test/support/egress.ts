// Servers for tests of the outbound policy (controller/sources/egress.ts): a fake "metadata"
// endpoint on 127.0.0.2 — loopback, and outside the test environment's allow-list (127.0.0.1/32) —
// that records every request and answers what a cloud metadata service would; and a fake OCI
// registry on 127.0.0.1 whose every /v2/ request is answered 401 with a Bearer realm there.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';

/** What the fake metadata endpoint answers: the credentials issue 31 F1 got into a release. */
export const METADATA_ANSWER = '{"AccessKeyId":"ASIAFAKEMETADATA","SecretAccessKey":"fake","Token":"fake"}\n';

export interface RecordingServer {
  /** scheme://host:port */
  url: string;
  /** Every request's method and path, in order. */
  readonly requests: string[];
  close(): Promise<void>;
}

function listening(
  server: Server,
  host: string,
  scheme: string,
  requests: string[],
): Promise<RecordingServer> {
  return new Promise((resolve) =>
    server.listen(0, host, () =>
      resolve({
        url: `${scheme}://${host}:${(server.address() as AddressInfo).port}`,
        requests,
        close: () =>
          new Promise<void>((r) => {
            server.closeAllConnections();
            server.close(() => r());
          }),
      }),
    ),
  );
}

/** The fake metadata endpoint on 127.0.0.2 (plain http): records, and answers METADATA_ANSWER. */
export function startMetadataServer(): Promise<RecordingServer> {
  const requests: string[] = [];
  const server = createServer((req, res) => {
    requests.push(`${req.method} ${req.url}`);
    res.writeHead(200, { 'content-type': 'application/json' }).end(METADATA_ANSWER);
  });
  return listening(server, '127.0.0.2', 'http', requests);
}

export type Handler = (req: IncomingMessage, res: ServerResponse) => void;

/** A server on 127.0.0.1 (allowed in the test environment) answering with `handler`; https with `tls`. */
export function startServer(handler: Handler, tls?: { cert: Buffer; key: Buffer }): Promise<RecordingServer> {
  const requests: string[] = [];
  const wrapped: Handler = (req, res) => {
    requests.push(`${req.method} ${req.url}`);
    handler(req, res);
  };
  const server = tls === undefined ? createServer(wrapped) : createHttpsServer(tls, wrapped);
  return listening(server as Server, '127.0.0.1', tls === undefined ? 'http' : 'https', requests);
}

/** A registry whose every /v2/ request is answered 401 with a Bearer realm at `realm`. */
export function startRealmRegistry(realm: string): Promise<RecordingServer> {
  return startServer((_req, res) => {
    res
      .writeHead(401, {
        'www-authenticate': `Bearer realm="${realm}",service="registry",scope="repository:scs/stack:pull"`,
        'content-type': 'application/json',
      })
      .end('{"errors":[{"code":"UNAUTHORIZED"}]}');
  });
}
