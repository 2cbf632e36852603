import { expect } from 'chai';
import { type ServerSentEvent, serverSentEvents } from '../../src/client/liveEvents.ts';

/** The events parsed from a stream that arrives in these chunks, and the retry delays heard. */
async function parse(...chunks: Array<string | Uint8Array>): Promise<{ events: ServerSentEvent[]; retries: number[] }> {
  const encoder = new TextEncoder();
  async function* body(): AsyncGenerator<Uint8Array> {
    for (const chunk of chunks) yield typeof chunk === 'string' ? encoder.encode(chunk) : chunk;
  }
  const retries: number[] = [];
  const events: ServerSentEvent[] = [];
  for await (const event of serverSentEvents(body(), (ms) => retries.push(ms))) events.push(event);
  return { events, retries };
}

// The WHATWG EventSource parsing rules, which the live stream's reader follows over fetch.
describe('Server-Sent Events parsing', () => {
  it('dispatches an event at a blank line, its data lines joined by newlines, as a message by default', async () => {
    const { events } = await parse('id: 7\ndata: {"a":1}\ndata: second\n\n');
    expect(events).to.deep.equal([{ id: '7', event: 'message', data: '{"a":1}\nsecond' }]);
  });

  it('carries the last id over to events that set none, and names events by their event field', async () => {
    const { events } = await parse('id: 1\ndata: a\n\nevent: heartbeat\ndata: b\n\n');
    expect(events).to.deep.equal([
      { id: '1', event: 'message', data: 'a' },
      { id: '1', event: 'heartbeat', data: 'b' },
    ]);
  });

  it('takes CRLF, CR and LF as line ends, a CRLF split across chunks included', async () => {
    const { events } = await parse('data: a\r', '\ndata: b\r\r', 'data: c\n\n');
    expect(events.map((event) => event.data)).to.deep.equal(['a\nb', 'c']);
  });

  it('decodes a character split across chunks', async () => {
    const bytes = new TextEncoder().encode('data: é😀\n\n');
    const { events } = await parse(bytes.subarray(0, 8), bytes.subarray(8));
    expect(events[0]!.data).to.equal('é😀');
  });

  it('ignores comments, unknown fields and events without data; removes one leading space only', async () => {
    const { events } = await parse(': keep-alive\nfoo: bar\n\nevent: x\n\ndata:  two spaces\ndata\n\n');
    expect(events).to.deep.equal([{ id: undefined, event: 'message', data: ' two spaces\n' }]);
  });

  it('hears numeric retry delays only, and ignores an id holding NUL', async () => {
    const { events, retries } = await parse('retry: 2500\nretry: soon\nid: 5\n\nid: a\u0000b\ndata: x\n\n');
    expect(retries).to.deep.equal([2500]);
    expect(events).to.deep.equal([{ id: '5', event: 'message', data: 'x' }]);
  });

  it('discards an event the stream ends before closing, as EventSource does', async () => {
    const { events } = await parse('data: whole\n\ndata: cut off');
    expect(events.map((event) => event.data)).to.deep.equal(['whole']);
  });
});
