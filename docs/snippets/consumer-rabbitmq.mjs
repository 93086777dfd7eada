// Consumes TourOps events from RabbitMQ: declares the exchange and a queue bound to it (declare
// them before creating the subscription: an unroutable message is a failed attempt), verifies
// each message with receiver.mjs's `verify`, acknowledges it. Run once without
// TOUROPS_SIGNING_KEYS to declare (it consumes nothing and stops), subscribe, then run with the
// subscription's signingKey: the events in between wait in the queue.
//   npm install amqplib
//   AMQP_URL=amqp://guest:guest@localhost:5672 EXCHANGE=tourops QUEUE=tourops-events \
//   BINDING='events.#' TOUROPS_SIGNING_KEYS=whsec_... node consumer-rabbitmq.mjs
import amqp from 'amqplib';
import { verify } from './receiver.mjs';

const signingKeys = (process.env.TOUROPS_SIGNING_KEYS ?? '').split(',').filter(Boolean);
const exchange = process.env.EXCHANGE ?? 'tourops';
const binding = process.env.BINDING ?? 'events.#';

const connection = await amqp.connect(process.env.AMQP_URL ?? 'amqp://guest:guest@localhost:5672');
const channel = await connection.createChannel();
await channel.assertExchange(exchange, 'topic', { durable: true });
const { queue } = await channel.assertQueue(process.env.QUEUE ?? 'tourops-events', {
  durable: true,
});
await channel.bindQueue(queue, exchange, binding);
if (signingKeys.length === 0) {
  // Without a key no message can be verified: leave them all in the queue rather than drop them.
  console.log(`declared ${exchange} and ${queue}; set TOUROPS_SIGNING_KEYS to consume`);
  await connection.close();
  process.exit(0);
}
await channel.prefetch(32);
console.log(`consuming ${queue}, bound to ${exchange} with ${binding}`);

await channel.consume(queue, (message) => {
  if (message === null) return;
  const headers = message.properties.headers ?? {};
  let event;
  try {
    // The message body is the HTTP body, byte for byte; the headers are the delivery's.
    event = verify(message.content, String(headers['service-signature']), signingKeys);
  } catch (error) {
    console.log(`refused: ${error.message}`);
    channel.nack(message, false, false);
    return;
  }
  // Do the work, then ack. Deduplicate on event.id (also the message_id): a retry can repeat one.
  console.log(`verified ${event.type} ${event.id}`);
  channel.ack(message);
});
