import {
  createCipheriv,
  createDecipheriv,
  createSecretKey,
  hkdfSync,
  type KeyObject,
  randomFillSync,
} from 'node:crypto';

const VERSION = 'v1.';
const IV_BYTES = 12;
const TAG_BYTES = 16;
// The info string separates this key from anything else derived from SECRET_KEY; changing it
// makes every sealed value undecryptable, so a new derivation needs a new format version.
const HKDF_INFO = 'tourops secret-box v1 aes-256-gcm';

/**
 * IVs are handed out from one fill of the system's random generator at a time: a lone 12-byte
 * randomBytes call on a request's path costs more than the cipher's own work. Each IV is taken
 * once; IVs are not secret, only never reused.
 */
const ivPool = Buffer.alloc(IV_BYTES * 256);
let ivAt = ivPool.length;
function nextIv(): Buffer {
  if (ivAt === ivPool.length) {
    randomFillSync(ivPool);
    ivAt = 0;
  }
  const iv = Buffer.from(ivPool.subarray(ivAt, ivAt + IV_BYTES));
  ivAt += IV_BYTES;
  return iv;
}

/**
 * Encrypts small secrets (webhook signing keys) at rest with AES-256-GCM.
 *
 * Key: HKDF-SHA256(ikm = SECRET_KEY as UTF-8, salt = empty, info = HKDF_INFO), 32 bytes. HKDF,
 * not a password hash, because SECRET_KEY is required to be random (≥32 chars), not memorable.
 * Sealed format: `v1.` + base64url(iv(12) | tag(16) | ciphertext), a fresh random IV each time.
 *
 * context (optional) is authenticated as AAD, not stored: seal with the owning row's id and a
 * value copied to another row no longer decrypts. decrypt must be given the same context.
 */
export class SecretBox {
  readonly #key: KeyObject | null;

  /** null: no key (a CLI command that seals and opens nothing); using the box then throws. */
  constructor(secretKey: string | null) {
    if (secretKey === null) {
      this.#key = null;
      return;
    }
    if (secretKey.length < 32) throw new Error('SecretBox: SECRET_KEY must be at least 32 chars');
    const derived = Buffer.from(hkdfSync('sha256', secretKey, Buffer.alloc(0), HKDF_INFO, 32));
    this.#key = createSecretKey(derived);
    derived.fill(0);
  }

  encrypt(plaintext: string, context?: string): string {
    const key = this.key();
    const iv = nextIv();
    const cipher = createCipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
    const aad = contextBytes(context);
    if (aad) cipher.setAAD(aad);
    const ciphertext = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    const sealed = Buffer.concat([iv, cipher.getAuthTag(), ciphertext]);
    return `${VERSION}${sealed.toString('base64url')}`;
  }

  decrypt(sealed: string, context?: string): string {
    if (!sealed.startsWith(VERSION)) {
      throw new Error('SecretBox: unknown sealed format (expected a "v1." prefix)');
    }
    const encoded = sealed.slice(VERSION.length);
    const bytes = Buffer.from(encoded, 'base64url');
    // Buffer.from skips invalid characters and ignores spare low bits of the last one; requiring
    // the canonical encoding means every altered character is rejected, not silently decoded.
    if (bytes.length < IV_BYTES + TAG_BYTES || bytes.toString('base64url') !== encoded) {
      throw new Error('SecretBox: malformed sealed value');
    }
    const aad = contextBytes(context);
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.key(), bytes.subarray(0, IV_BYTES), {
        authTagLength: TAG_BYTES,
      });
      decipher.setAuthTag(bytes.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
      if (aad) decipher.setAAD(aad);
      const body = bytes.subarray(IV_BYTES + TAG_BYTES);
      // Nothing is returned before final() has checked the tag.
      return Buffer.concat([decipher.update(body), decipher.final()]).toString('utf8');
    } catch (cause) {
      throw new Error(
        'SecretBox: cannot decrypt: the sealed value was altered, or SECRET_KEY or context differ',
        { cause },
      );
    }
  }

  private key(): KeyObject {
    if (this.#key === null) throw new Error('SecretBox: no SECRET_KEY was given to this process');
    return this.#key;
  }
}

// An empty context would add no AAD, so a caller passing an empty id would silently get an
// unbound value; refuse it instead.
function contextBytes(context: string | undefined): Buffer | null {
  if (context === undefined) return null;
  if (context === '') throw new Error('SecretBox: context, when given, must not be empty');
  return Buffer.from(context, 'utf8');
}
