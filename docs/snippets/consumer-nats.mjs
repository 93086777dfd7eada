// Consumes TourOps events from NATS JetStream: declares the stream on the subscription's subject
// (before creating the subscription: a subject no stream takes is a failed attempt) and a durable
// consumer, verifies each message with receiver.mjs's `verify`, acknowledges it. Run once without
// TOUROPS_SIGNING_KEYS to declare (it consumes nothing and stops), subscribe, then run with the
// subscription's signingKey: the events in between wait in the stream.
//   npm install nats
//   NATS_URL=localhost:4222 STREAM=TOUROPS SUBJECT=tourops.events DURABLE=billing \
//   TOUROPS_SIGNING_KEYS=whsec_... node consumer-nats.mjs
import { AckPolicy, connect } from 'nats';
import { verify } from './receiver.mjs';

const signingKeys = (process.env.TOUROPS_SIGNING_KEYS ?? '').split(',').filter(Boolean);
const stream = process.env.STREAM ?? 'TOUROPS';
const subject = process.env.SUBJECT ?? 'tourops.events';
const durable = process.env.DURABLE ?? 'tourops-consumer';

const connection = await connect({ servers: process.env.NATS_URL ?? 'localhost:4222' });
const manager = await connection.jetstreamManager();
// Nats-Msg-Id is the event id: within the duplicate window a redelivery is stored once.
await manager.streams.add({ name: stream, subjects: [subject], duplicate_window: 120e9 });
await manager.consumers.add(stream, { durable_name: durable, ack_policy: AckPolicy.Explicit });
if (signingKeys.length === 0) {
  // Without a key no message can be verified: leave them all in the stream rather than end them.
  console.log(
    `declared ${stream} (${subject}) and ${durable}; set TOUROPS_SIGNING_KEYS to consume`,
  );
  await connection.close();
  process.exit(0);
}
const consumer = await connection.jetstream().consumers.get(stream, durable);
console.log(`consuming ${stream} (${subject}) as ${durable}`);

for await (const message of await consumer.consume()) {
  let event;
  try {
    event = verify(
      Buffer.from(message.data),
      message.headers?.get('service-signature'),
      signingKeys,
    );
  } catch (error) {
    console.log(`refused: ${error.message}`);
    message.term();
    continue;
  }
  // Do the work, then ack. Deduplicate on event.id: a retry after the window can repeat one.
  console.log(`verified ${event.type} ${event.id}`);
  message.ack();
}
