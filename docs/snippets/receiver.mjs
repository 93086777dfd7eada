// A TourOps webhook receiver in Node, standard library only: listens, verifies, acknowledges.
//   TOUROPS_SIGNING_KEYS=whsec_... node receiver.mjs      (PORT, default 4242; POST /webhooks)
// With TLS_CERT and TLS_KEY (PEM files) it serves https, as a real delivery's target must.
// With TOUROPS_PUBLIC_KEYS=whpk_... (asymmetricSignatures) it checks the v1a Ed25519 signature.
import {
  createHmac,
  createPublicKey,
  timingSafeEqual,
  verify as verifySignature,
} from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import { pathToFileURL } from 'node:url';

const signingKeys = (process.env.TOUROPS_SIGNING_KEYS ?? '').split(',').filter(Boolean);
const publicKeys = (process.env.TOUROPS_PUBLIC_KEYS ?? '').split(',').filter(Boolean);
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

/** The same with the Standard Webhooks headers' v1a (Ed25519) signature and `whpk_` keys. */
export function verifyV1a(rawBody, headers, keys, now = Date.now() / 1000) {
  const id = headers['webhook-id'];
  const stamp = String(headers['webhook-timestamp'] ?? '');
  if (!id || !/^\d+$/.test(stamp)) throw new Error('webhook-id or webhook-timestamp missing');
  if (Math.abs(now - Number(stamp)) > TOLERANCE_SECONDS) throw new Error('timestamp too far');
  const signed = Buffer.concat([Buffer.from(`${id}.${stamp}.`), rawBody]);
  const signatures = String(headers['webhook-signature'] ?? '')
    .split(' ')
    .filter((part) => part.startsWith('v1a,'))
    .map((part) => Buffer.from(part.slice(4), 'base64'));
  // A raw Ed25519 public key, framed as the DER SubjectPublicKeyInfo Node reads.
  const spki = (key) =>
    createPublicKey({
      key: Buffer.concat([
        Buffer.from('302a300506032b6570032100', 'hex'),
        Buffer.from(key.slice(5), 'base64'),
      ]),
      format: 'der',
      type: 'spki',
    });
  const matches = keys.some((key) =>
    signatures.some((signature) => verifySignature(null, signed, spki(key), signature)),
  );
  if (!matches) throw new Error('no v1a signature matches the public keys');
  return JSON.parse(rawBody.toString('utf8'));
}

function receive(request, response) {
  const chunks = [];
  request.on('data', (chunk) => chunks.push(chunk));
  request.on('end', () => {
    let event;
    try {
      const rawBody = Buffer.concat(chunks);
      event =
        publicKeys.length > 0
          ? verifyV1a(rawBody, request.headers, publicKeys)
          : verify(rawBody, request.headers['service-signature'], signingKeys);
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
