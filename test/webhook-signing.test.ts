import assert from 'node:assert/strict';
import { createDecipheriv, createHmac, hkdfSync, randomBytes } from 'node:crypto';
import { describe, it } from 'node:test';
import Stripe from 'stripe';
import { newSigningKey, servesStandardWebhooks, signatureHeader } from '../src/domain/signing.ts';
import { SecretBox } from '../src/lib/secret-box.ts';

// constructEvent only verifies and parses locally; the client never makes a request here.
const stripe = new Stripe('sk_test_x');
const verify = (body: string | Buffer, header: string, key: string) =>
  stripe.webhooks.constructEvent(body, header, key);

const body = JSON.stringify({
  id: 'evt_1',
  object: 'event',
  type: 'booking.confirmed',
  data: { city: 'Zürich', note: 'café — 5 €' },
});
const nowSeconds = () => Math.floor(Date.now() / 1000);
const hmacHex = (key: string, text: string) =>
  createHmac('sha256', key).update(text, 'utf8').digest('hex');

const NO_MATCH = (error: unknown) =>
  error instanceof Stripe.errors.StripeSignatureVerificationError &&
  /No signatures found matching/.test(error.message);

const HEADER = /^t=(\d+),v1=([0-9a-f]{64})(?:,v1=([0-9a-f]{64}))?$/;

describe('webhook signing keys', () => {
  it('have the documented shape: whsec_ + the base64 of 33 random bytes, letters and digits only', () => {
    for (let i = 0; i < 50; i++) {
      const key = newSigningKey();
      assert.match(key, /^whsec_[A-Za-z0-9]{44}$/);
      const raw = Buffer.from(key.slice('whsec_'.length), 'base64');
      assert.equal(raw.length, 33);
      assert.equal(raw.toString('base64'), key.slice('whsec_'.length));
      assert.ok(servesStandardWebhooks(key));
    }
    // The form made before: Stripe's libraries only.
    assert.ok(!servesStandardWebhooks(`whsec_${'A'.repeat(42)}_`));
    assert.ok(!servesStandardWebhooks(`whsec_${'A'.repeat(43)}`));
  });

  it('are unique', () => {
    const keys = new Set(Array.from({ length: 1000 }, () => newSigningKey()));
    assert.equal(keys.size, 1000);
  });
});

describe('Service-Signature header', () => {
  it('with one key verifies with Stripe constructEvent, as a string and as raw bytes', () => {
    const key = newSigningKey();
    const header = signatureHeader(nowSeconds(), body, [key]);
    assert.deepEqual(verify(body, header, key), JSON.parse(body));
    assert.deepEqual(verify(Buffer.from(body, 'utf8'), header, key), JSON.parse(body));
  });

  it('with two keys during a rotation verifies with the new key and with the old key', () => {
    const newKey = newSigningKey();
    const oldKey = newSigningKey();
    const header = signatureHeader(nowSeconds(), body, [newKey, oldKey]);
    assert.deepEqual(verify(body, header, newKey), JSON.parse(body));
    assert.deepEqual(verify(body, header, oldKey), JSON.parse(body));
    assert.throws(() => verify(body, header, newSigningKey()), NO_MATCH);
  });

  it('fails for a tampered body, with one key and with both rotation keys', () => {
    const newKey = newSigningKey();
    const oldKey = newSigningKey();
    const tampered = body.replace('Zürich', 'Zurich');
    assert.notEqual(tampered, body);
    const single = signatureHeader(nowSeconds(), body, [newKey]);
    assert.throws(() => verify(tampered, single, newKey), NO_MATCH);
    const double = signatureHeader(nowSeconds(), body, [newKey, oldKey]);
    assert.throws(() => verify(tampered, double, newKey), NO_MATCH);
    assert.throws(() => verify(tampered, double, oldKey), NO_MATCH);
  });

  it('fails for a different key, including one differing in its last character', () => {
    const key = newSigningKey();
    const header = signatureHeader(nowSeconds(), body, [key]);
    assert.throws(() => verify(body, header, newSigningKey()), NO_MATCH);
    const nearMiss = key.slice(0, -1) + (key.endsWith('A') ? 'B' : 'A');
    assert.throws(() => verify(body, header, nearMiss), NO_MATCH);
    // The whole string, `whsec_` included, is the HMAC key.
    assert.throws(() => verify(body, header, key.slice('whsec_'.length)), NO_MATCH);
  });

  it('has exactly the format t=<digits>,v1=<64 hex>[,v1=<64 hex>], new key first', () => {
    const t = 1_767_225_600;
    const newKey = newSigningKey();
    const oldKey = newSigningKey();

    const one = signatureHeader(t, body, [newKey]);
    assert.equal(one, `t=${t},v1=${hmacHex(newKey, `${t}.${body}`)}`);
    assert.match(one, HEADER);
    assert.equal(HEADER.exec(one)?.[3], undefined);

    const two = signatureHeader(t, body, [newKey, oldKey]);
    const match = HEADER.exec(two);
    assert.ok(match, two);
    assert.equal(match[1], String(t));
    assert.equal(match[2], hmacHex(newKey, `${t}.${body}`));
    assert.equal(match[3], hmacHex(oldKey, `${t}.${body}`));
    assert.notEqual(match[2], match[3]);
  });

  it('carries the given timestamp: a far-past t is rejected by the default tolerance', () => {
    const key = newSigningKey();
    const stale = signatureHeader(nowSeconds() - 3600, body, [key]);
    assert.throws(
      () => verify(body, stale, key),
      (error: unknown) =>
        error instanceof Stripe.errors.StripeSignatureVerificationError &&
        /Timestamp outside the tolerance zone/.test(error.message),
    );
    // Same key and body, sending time now: accepted, so only the timestamp made the difference.
    assert.deepEqual(
      verify(body, signatureHeader(nowSeconds(), body, [key]), key),
      JSON.parse(body),
    );
  });

  it('refuses inputs that would sign but never verify', () => {
    const key = newSigningKey();
    assert.throws(() => signatureHeader(1.5, body, [key]), RangeError);
    assert.throws(() => signatureHeader(-1, body, [key]), RangeError);
    assert.throws(() => signatureHeader(Number.NaN, body, [key]), RangeError);
    assert.throws(() => signatureHeader(nowSeconds(), body, []), RangeError);
    assert.throws(() => signatureHeader(nowSeconds(), body, ['']), TypeError);
    assert.throws(() => signatureHeader(nowSeconds(), body, [key, 'v1.c2VhbGVk']), TypeError);
  });
});

describe('SecretBox', () => {
  const secretKey = randomBytes(32).toString('base64url');
  const box = new SecretBox(secretKey);
  const plaintext = newSigningKey();

  it('round-trips, with and without a context, including empty and non-ASCII text', () => {
    assert.equal(box.decrypt(box.encrypt(plaintext)), plaintext);
    assert.equal(box.decrypt(box.encrypt(plaintext, 'whs_1'), 'whs_1'), plaintext);
    assert.equal(box.decrypt(box.encrypt('')), '');
    assert.equal(box.decrypt(box.encrypt('Zürich — 5 € 🚌')), 'Zürich — 5 € 🚌');
    // A new instance from the same SECRET_KEY (a restart) still decrypts.
    assert.equal(
      new SecretBox(secretKey).decrypt(box.encrypt(plaintext, 'whs_1'), 'whs_1'),
      plaintext,
    );
  });

  it('writes v1. + base64url(iv | tag | ciphertext) under the documented HKDF-SHA256 key', () => {
    const sealed = box.encrypt(plaintext, 'whs_1');
    assert.match(sealed, /^v1\.[A-Za-z0-9_-]+$/);
    const bytes = Buffer.from(sealed.slice(3), 'base64url');
    assert.equal(bytes.length, 12 + 16 + Buffer.byteLength(plaintext));
    // Decrypt independently, so the documented derivation and layout are what is stored.
    const key = Buffer.from(
      hkdfSync('sha256', secretKey, Buffer.alloc(0), 'tourops secret-box v1 aes-256-gcm', 32),
    );
    const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(0, 12));
    decipher.setAuthTag(bytes.subarray(12, 28));
    decipher.setAAD(Buffer.from('whs_1', 'utf8'));
    const opened = Buffer.concat([decipher.update(bytes.subarray(28)), decipher.final()]);
    assert.equal(opened.toString('utf8'), plaintext);
  });

  it('gives different output for two encryptions of the same text (fresh IV)', () => {
    const a = box.encrypt(plaintext);
    const b = box.encrypt(plaintext);
    assert.notEqual(a, b);
    const iv = (sealed: string) => Buffer.from(sealed.slice(3), 'base64url').subarray(0, 12);
    assert.notDeepEqual(iv(a), iv(b));
    assert.equal(box.decrypt(a), plaintext);
    assert.equal(box.decrypt(b), plaintext);
  });

  it('fails when any byte of iv, tag or ciphertext is altered', () => {
    const sealed = box.encrypt(plaintext, 'whs_1');
    const bytes = Buffer.from(sealed.slice(3), 'base64url');
    for (let i = 0; i < bytes.length; i++) {
      for (const flip of [0x01, 0x80]) {
        const altered = Buffer.from(bytes);
        altered[i] ^= flip;
        assert.throws(
          () => box.decrypt(`v1.${altered.toString('base64url')}`, 'whs_1'),
          /SecretBox: cannot decrypt/,
          `byte ${i} ^ ${flip}`,
        );
      }
    }
  });

  it('fails when any character of the sealed text is altered, dropped or added', () => {
    const sealed = box.encrypt(plaintext, 'whs_1');
    for (let i = 0; i < sealed.length; i++) {
      for (const replacement of ['A', 'B', 'f', 'g', '-', '_', '.', '=']) {
        if (sealed[i] === replacement) continue;
        const altered = sealed.slice(0, i) + replacement + sealed.slice(i + 1);
        assert.throws(() => box.decrypt(altered, 'whs_1'), /^Error: SecretBox: /, `char ${i}`);
      }
    }
    assert.throws(() => box.decrypt(sealed.slice(0, -1), 'whs_1'), /SecretBox: /);
    assert.throws(() => box.decrypt(`${sealed}A`, 'whs_1'), /SecretBox: /);
    assert.throws(() => box.decrypt(`${sealed}=`, 'whs_1'), /SecretBox: /);
    assert.throws(() => box.decrypt(`${sealed}\n`, 'whs_1'), /SecretBox: /);
  });

  it('fails under another SECRET_KEY', () => {
    const sealed = box.encrypt(plaintext);
    const other = new SecretBox(randomBytes(32).toString('base64url'));
    assert.throws(() => other.decrypt(sealed), /SecretBox: cannot decrypt/);
    // A key differing in one character only is just as wrong.
    const nearKey = secretKey.slice(0, -1) + (secretKey.endsWith('A') ? 'B' : 'A');
    assert.throws(() => new SecretBox(nearKey).decrypt(sealed), /SecretBox: cannot decrypt/);
  });

  it('fails with a wrong, missing or unexpected context', () => {
    const bound = box.encrypt(plaintext, 'whs_1');
    assert.throws(() => box.decrypt(bound, 'whs_2'), /SecretBox: cannot decrypt/);
    assert.throws(() => box.decrypt(bound), /SecretBox: cannot decrypt/);
    const unbound = box.encrypt(plaintext);
    assert.throws(() => box.decrypt(unbound, 'whs_1'), /SecretBox: cannot decrypt/);
    // An empty context would bind nothing, so it is refused rather than silently accepted.
    assert.throws(() => box.encrypt(plaintext, ''), /context/);
    assert.throws(() => box.decrypt(unbound, ''), /context/);
  });

  it('does not reveal the plaintext in the sealed text', () => {
    const sealed = box.encrypt(plaintext);
    const secretPart = plaintext.slice('whsec_'.length);
    assert.ok(!sealed.includes(plaintext));
    assert.ok(!sealed.includes(secretPart));
    assert.ok(!sealed.includes(Buffer.from(plaintext).toString('base64url').slice(4, 40)));
    const bytes = Buffer.from(sealed.slice(3), 'base64url');
    assert.equal(bytes.indexOf(Buffer.from(secretPart)), -1);
    assert.equal(bytes.indexOf(Buffer.from('whsec_')), -1);
  });

  it('rejects an unknown format and a short SECRET_KEY with clear errors', () => {
    const sealed = box.encrypt(plaintext);
    assert.throws(() => box.decrypt(`v2.${sealed.slice(3)}`), /unknown sealed format/);
    assert.throws(() => box.decrypt(sealed.slice(3)), /unknown sealed format/);
    assert.throws(() => box.decrypt(''), /unknown sealed format/);
    assert.throws(() => box.decrypt('v1.'), /malformed/);
    assert.throws(() => box.decrypt('v1.AAAA'), /malformed/);
    assert.throws(() => new SecretBox('x'.repeat(31)), /at least 32/);
  });
});
