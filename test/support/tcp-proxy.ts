// A TCP proxy on 127.0.0.1 in front of a service port, for client tests that need the network to misbehave
// at a chosen moment: answers that never come back (the request reached the service, its response is lost),
// connections cut in the middle, and connections refused for a while.
import { connect, createServer, type Server, type Socket } from 'node:net';
import type { AddressInfo } from 'node:net';

export interface TcpProxy {
  readonly port: number;
  /** `127.0.0.1:<port>`. */
  readonly address: string;
  /** Connections accepted so far. */
  readonly accepted: number;
  /** From now on bytes from the service are not passed on: requests arrive, their answers are lost. */
  dropResponses(): void;
  /** Destroys every open connection, both sides (the client sees the connection drop); passes bytes again. */
  cut(): void;
  /** While on, new connections are destroyed as soon as they are accepted. */
  refuse(on: boolean): void;
  close(): Promise<void>;
}

export async function startTcpProxy(targetPort: number): Promise<TcpProxy> {
  const pairs = new Set<[Socket, Socket]>();
  let dropping = false;
  let refusing = false;
  let accepted = 0;
  const server: Server = createServer((client) => {
    if (refusing) {
      client.destroy();
      return;
    }
    accepted++;
    const upstream = connect(targetPort, '127.0.0.1');
    const pair: [Socket, Socket] = [client, upstream];
    pairs.add(pair);
    client.on('data', (chunk) => upstream.write(chunk));
    upstream.on('data', (chunk) => {
      if (!dropping) client.write(chunk);
    });
    const end = () => {
      pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    for (const s of pair) {
      s.on('error', end);
      s.on('close', end);
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    address: `127.0.0.1:${port}`,
    get accepted() {
      return accepted;
    },
    dropResponses: () => void (dropping = true),
    cut() {
      for (const [client, upstream] of pairs) {
        client.destroy();
        upstream.destroy();
      }
      pairs.clear();
      dropping = false;
    },
    refuse: (on) => void (refusing = on),
    close: () =>
      new Promise<void>((resolve) => {
        for (const [client, upstream] of pairs) {
          client.destroy();
          upstream.destroy();
        }
        server.close(() => resolve());
      }),
  };
}
