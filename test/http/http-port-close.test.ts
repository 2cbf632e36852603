import { expect } from 'chai';
import { Worker } from 'node:worker_threads';
import { HttpPort } from '../../src/http/httpServer.ts';

/**
 * A closing port and the connections the kernel completed while the process was kept off the CPU. Those wait
 * in the accept queue, and closing the listener then resets them: the port must take them (and hold their
 * requests) before it judges the queue quiet. The clients run on a worker thread, so that they connect while
 * the port's thread is blocked, as a busy node keeps a process from running.
 */
describe('a closing HTTP port, after its process was kept off the CPU', () => {
  const CLIENTS = 10;

  /**
   * Opens CLIENTS connections, each sending one request; sets the shared flag once the kernel has completed
   * them all, and reports each one's status line, or its error code.
   */
  const clientsSource = `
    const { parentPort, workerData } = require('node:worker_threads');
    const net = require('node:net');
    const flag = new Int32Array(workerData.flag);
    let connected = 0;
    const outcomes = Array.from({ length: workerData.clients }, () => new Promise((resolve) => {
      const socket = net.connect(workerData.port, '127.0.0.1', () => {
        socket.write('GET / HTTP/1.1\\r\\nHost: test\\r\\n\\r\\n');
        connected += 1;
        if (connected === workerData.clients) {
          Atomics.store(flag, 0, 1);
          Atomics.notify(flag, 0);
        }
      });
      let answer = '';
      socket.on('data', (chunk) => (answer += chunk));
      socket.on('error', (error) => resolve(error.code));
      socket.on('close', () => resolve(answer.split('\\r\\n')[0] || 'closed without an answer'));
    }));
    Promise.all(outcomes).then((results) => parentPort.postMessage(results));
  `;

  it('answers every connection queued while it was blocked, instead of resetting them when the listener closes', async () => {
    const port = await HttpPort.listen(
      (_request, response) => response.end('ok'),
      '127.0.0.1',
      0,
      () => true,
    );
    const flag = new Int32Array(new SharedArrayBuffer(4));
    const clients = new Worker(clientsSource, { eval: true, workerData: { port: port.port, clients: CLIENTS, flag: flag.buffer } });
    const results = new Promise<string[]>((resolve, reject) => {
      clients.once('message', resolve);
      clients.once('error', reject);
    });
    // This thread blocks (its event loop does not run, so nothing is accepted) until the kernel has completed
    // every client's connection, and then for longer than the port's quiet period.
    expect(Atomics.wait(flag, 0, 0, 10_000), 'every client connected').to.equal('ok');
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 100);
    await port.close(5_000, 0);
    const outcomes = await results;
    await clients.terminate();
    expect(outcomes).to.deep.equal(Array.from({ length: CLIENTS }, () => 'HTTP/1.1 200 OK'));
  });
});
