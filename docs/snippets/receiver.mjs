// A TourOps webhook receiver in Node, standard library only: listens, verifies, acknowledges.
//   TOUROPS_SIGNING_KEYS=whsec_... node receiver.mjs      (PORT, default 4242; POST /webhooks)
// With TLS_CERT and TLS_KEY (PEM files) it serves https, as a real delivery's target must.
import { createHmac, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import { pathToFileURL } from 'node:url';

const signingKeys = (process.env.TOUROPS_SIGNING_KEYS ?? '').split(',').filter(Boolean);
const TOLERANCE_SECONDS = 300;

/** The parsed event, or throws: `rawBody` is the bytes received, before any JSON parsing. */
export function verify(rawBody, signatureHeader, keys, now = Date.now() / 1000) {
  const parts = String(signatureHeader ?? '')
    .split(',')
    .map((part) => part.split('='));
  const t = Number(parts.find(([name]) => name === 't')?.[1]);
  const candidates = parts.filter(([name]) => name === 'v1').map(([, value]) => value);
  if (!Number.isInteger(t) || candidates.length === 0) throw new Error('no t or no v1');
  if (Math.abs(now - t) > TOLERANCE_SECONDS) throw new Error('t is too far from now');
  const matches = keys.some((key) => {
    const expected = createHmac('sha256', key).update(`${t}.`).update(rawBody).digest();
    return candidates.some(
      (candidate) =>
        candidate.length === 64 && timingSafeEqual(expected, Buffer.from(candidate, 'hex')),
    );
  });
  if (!matches) throw new Error('no signature matches the signing keys');
  return JSON.parse(rawBody.toString('utf8'));
}

function receive(request, response) {
  const chunks = [];
  request.on('data', (chunk) => chunks.push(chunk));
  request.on('end', () => {
    let event;
    try {
      event = verify(Buffer.concat(chunks), request.headers['service-signature'], signingKeys);
    } catch (error) {
      console.log(`refused: ${error.message}`);
      response.writeHead(400).end();
      return;
    }
    // Acknowledge at once; do the work after (deduplicate on event.id: deliveries can repeat).
    response.writeHead(204).end();
    console.log(`verified ${event.type} ${event.id}`);
  });
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const { TLS_CERT, TLS_KEY } = process.env;
  const tls =
    TLS_CERT && TLS_KEY ? { cert: readFileSync(TLS_CERT), key: readFileSync(TLS_KEY) } : null;
  const server = tls ? createTlsServer(tls, receive) : createServer(receive);
  const port = Number(process.env.PORT ?? 4242);
  server.listen(port, '127.0.0.1', () =>
    console.log(`listening on ${tls ? 'https' : 'http'}://127.0.0.1:${port}/webhooks`),
  );
}
