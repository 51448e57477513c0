// A free loopback port, for the private servers of the tests and the benches.
import { createServer } from 'node:net';

/** A free loopback port (asked of the OS, then released). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}
