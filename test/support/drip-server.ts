// A "Git server" (or any HTTP server) that drips: every request is answered 200 and then one
// byte every 100 ms, for ever. Ten bytes a second is faster than git's GIT_HTTP_LOW_SPEED_LIMIT
// (1 byte/s), so only a total deadline ends a read of it (issue 31 F11).
import { createServer, type Server } from 'node:http';
import type { Socket } from 'node:net';

export class DrippingServer {
  readonly sockets = new Set<Socket>();
  requests = 0;
  url = '';
  port = 0;
  #server: Server | undefined;

  async start(): Promise<void> {
    const server = createServer((req, res) => {
      this.requests += 1;
      req.resume();
      res.writeHead(200, { 'content-type': 'application/x-git-upload-pack-advertisement' });
      res.flushHeaders();
      const timer = setInterval(() => res.write('0'), 100);
      res.on('close', () => clearInterval(timer));
    });
    server.on('connection', (s) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const addr = server.address();
    this.port = typeof addr === 'object' && addr !== null ? addr.port : 0;
    this.url = `http://127.0.0.1:${this.port}/tenant/release.git`;
    this.#server = server;
  }

  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.#server?.close(() => resolve()) ?? resolve());
  }
}
