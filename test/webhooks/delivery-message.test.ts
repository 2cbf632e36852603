import { expect } from 'chai';
import {
  decodeDeliveryMessage,
  deliveryMessageId,
  encodeDeliveryMessage,
  MAX_DELIVERIES_PER_MESSAGE,
} from '../../src/delivery/deliveryMessage.ts';

const bytes = (text: string) => new TextEncoder().encode(text);

describe('delivery messages', () => {
  it('carry a batch of deliveries through encoding and decoding unchanged', () => {
    const deliveries = [
      { deliveryId: '1', attempt: 1 },
      { deliveryId: '9223372036854775807', attempt: 5 },
    ];
    expect(decodeDeliveryMessage(bytes(encodeDeliveryMessage(deliveries)))).to.deep.equal(deliveries);
  });

  it('still read the single-delivery form of earlier versions (messages published before an upgrade)', () => {
    expect(decodeDeliveryMessage(bytes('{"d":"42","a":3}'))).to.deep.equal([{ deliveryId: '42', attempt: 3 }]);
  });

  it('read a message that is a view into a larger buffer', () => {
    const framed = bytes(`xx${encodeDeliveryMessage([{ deliveryId: '7', attempt: 2 }])}yy`);
    expect(decodeDeliveryMessage(framed.subarray(2, framed.length - 2))).to.deep.equal([{ deliveryId: '7', attempt: 2 }]);
  });

  for (const [name, text] of [
    ['not JSON', 'garbage'],
    ['null', 'null'],
    ['an empty batch', '{"b":[]}'],
    ['an id that is not a bigint', '{"b":[["12a",1]]}'],
    ['an id beyond 19 digits', `{"b":[["${'9'.repeat(20)}",1]]}`],
    ['attempt 0', '{"b":[["1",0]]}'],
    ['a fractional attempt', '{"b":[["1",1.5]]}'],
    ['an entry of three values', '{"b":[["1",1,1]]}'],
    ['a single delivery without its attempt', '{"d":"1"}'],
    [
      'a batch larger than any relay publishes',
      JSON.stringify({ b: Array.from({ length: MAX_DELIVERIES_PER_MESSAGE + 1 }, (_, index) => [String(index + 1), 1]) }),
    ],
  ] as const) {
    it(`refuse ${name}`, () => {
      expect(decodeDeliveryMessage(bytes(text))).to.equal(undefined);
    });
  }

  it('are named after their first delivery and its publication, so a re-published attempt is not a duplicate', () => {
    expect(deliveryMessageId({ deliveryId: '42', attempt: 2 }, 1)).to.equal('42.2.1');
    expect(deliveryMessageId({ deliveryId: '42', attempt: 2 }, 2)).to.not.equal(deliveryMessageId({ deliveryId: '42', attempt: 2 }, 1));
  });
});
