import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  type AmbientTransaction,
  isRetryable,
  pauseBeforeRerun,
  TRANSACTION_ATTEMPTS,
} from '../db/ambient.ts';
import type { Database } from '../db/database.ts';
import { type Clock, nowIso } from '../lib/clock.ts';
import { pacedBatches } from '../lib/paced-batches.ts';
import { ApiProblem, fieldError } from '../lib/problems.ts';
import type { SecretBox } from '../lib/secret-box.ts';
import type {
  IdempotencyEntry,
  IdempotencyRepository,
  IdempotencyRow,
  StoredAnswer,
} from '../repositories/idempotency-repository.ts';

/** A write sent with an Idempotency-Key: whose key, and what it asks. */
export interface KeyedWrite {
  tenantId: string;
  key: string;
  /** Method, path with query and body, hashed (see fingerprint). */
  fingerprint: string;
}

/** A key this request holds: the request runs in `transaction`, which records its answer. */
interface LockedKey extends IdempotencyEntry {
  readonly transaction: AmbientTransaction;
}

type IdempotencyStart =
  | { kind: 'execute'; locked: LockedKey }
  | { kind: 'replay'; response: StoredAnswer };

/** What `run` answered, and whether it was the stored answer of an earlier request. */
export interface WriteOutcome {
  answer: StoredAnswer;
  replayed: boolean;
}

export interface IdempotencyPurgeOptions {
  /** Most keys one statement deletes. */
  batchSize?: number;
  /** After each statement, a pause of this many times its duration (at least 1 ms). */
  pauseFactor?: number;
  /** Stops between statements (the server is closing). */
  signal?: AbortSignal;
  /** Called after every statement with the keys it deleted. */
  onBatch?: (keys: number) => void;
}

const PURGE_BATCH = 500;
const PURGE_PAUSE_FACTOR = 2;

/** How long a duplicate waits for the first request's answer before its 409. */
const WAIT_FOR_FIRST_MS = 2_000;
const POLL_MS = 20;
const KEY_PATTERN = /^[\x20-\x7e]{1,255}$/;

/**
 * Idempotency keys (docs/api-behaviour.md): the first request locks the key inside
 * the transaction it then executes in, so the key's row, the side effects and the stored answer
 * commit together or not at all (a crash frees the key at once); its final response is stored,
 * sealed, for IDEMPOTENCY_TTL; duplicates replay it byte for byte, or wait briefly while it runs.
 * 5xx, 401 and 429 answers release the key.
 */
interface IdempotencyServiceDeps {
  keys: IdempotencyRepository;
  database: Database;
  clock: Clock;
  ttlMs: number;
  /** Stored answers can carry secrets (a new subscription's signing key) and personal data. */
  secrets: SecretBox;
}

export class IdempotencyService {
  constructor(private readonly deps: IdempotencyServiceDeps) {}

  static fingerprint(method: string, pathWithQuery: string, body: string): string {
    return createHash('sha256')
      .update(`${method}\n${pathWithQuery}\n`)
      .update(createHash('sha256').update(body).digest('hex'))
      .digest('hex');
  }

  /** `field`: how the caller names the key (the API's header, a portal form's field). */
  assertValidKey(key: unknown, field = 'Idempotency-Key'): asserts key is string {
    if (typeof key !== 'string' || !KEY_PATTERN.test(key)) {
      throw fieldError(field, 'must be 1 to 255 printable ASCII characters');
    }
  }

  /**
   * Runs a write once per key: locks the key, runs `execute` in the transaction that locked it,
   * stores its answer and commits, so the key's row, side effects and stored answer commit
   * together or not at all. A key already answered replays that answer; a key another request
   * holds is waited for briefly. An answer that must not stick (5xx, 401, 429) or a failure
   * rolls everything back and frees the key. `execute` must do no I/O but the database's: the
   * locked key holds a transaction open (on SQLite, the write lock) while it runs. When PostgreSQL
   * aborts the transaction for a conflict (deadlock, serialization), it all runs again.
   */
  async run(write: KeyedWrite, execute: () => Promise<StoredAnswer>): Promise<WriteOutcome> {
    for (let attempt = 1; ; attempt++) {
      const start = await this.start(write);
      if (start.kind === 'replay') return { answer: start.response, replayed: true };
      const { locked } = start;
      try {
        const answer = await locked.transaction.run(execute);
        await this.finish(locked, answer);
        return { answer, replayed: false };
      } catch (error) {
        await this.abandon(locked).catch(() => undefined);
        if (!isRetryable(error) || attempt === TRANSACTION_ATTEMPTS) throw error;
        await pauseBeforeRerun(attempt);
      }
    }
  }

  /**
   * Answers a key with what was answered before the write could run (its body refused, a check
   * before its unit of work failed): stored, so that a retry replays it like any other; or, when
   * a finished request holds the key already, that request's answer, which `replayable` callers
   * get instead (a refused token is not one: its 403 comes before any replay). 422 when the key
   * was used for something else. A key another request holds is left to it.
   */
  async answerEarly(
    write: KeyedWrite,
    answer: StoredAnswer,
    replayable: boolean,
  ): Promise<WriteOutcome> {
    const given = { answer, replayed: false };
    if (!isStored(answer.status)) return given;
    const tried = await this.lockOnce(write, replayable);
    if ('locked' in tried) {
      await this.finish(tried.locked, answer);
      return given;
    }
    const stored = tried.row ? this.replayOf(tried.row, write) : null;
    return stored ? { answer: stored, replayed: true } : given;
  }

  /**
   * One try at the key: the key locked, holding its transaction; or, when a finished request holds
   * the key, its row (read only when `readTaken`); or neither, when a live request holds it.
   */
  private async lockOnce(
    write: KeyedWrite,
    readTaken: boolean,
  ): Promise<{ locked: LockedKey } | { row: IdempotencyRow | undefined }> {
    const entry = this.entry(write);
    const transaction = await this.deps.database.beginAmbient();
    let row: IdempotencyRow | undefined;
    try {
      const outcome = await transaction.run(() => this.deps.keys.lock(entry));
      if (outcome === 'locked') return { locked: { ...entry, transaction } };
      if (outcome === 'taken' && readTaken) {
        row = await transaction.run(() => this.deps.keys.find(write.tenantId, write.key));
      }
    } catch (error) {
      await transaction.rollback().catch(() => undefined);
      throw error;
    }
    await transaction.rollback();
    return { row };
  }

  private entry(write: KeyedWrite): IdempotencyEntry {
    const now = this.deps.clock.now();
    return {
      ...write,
      createdAt: now.toISOString(),
      expiresAt: new Date(now.getTime() + this.deps.ttlMs).toISOString(),
    };
  }

  private replayOf(row: IdempotencyRow, write: KeyedWrite): StoredAnswer | null {
    if (row.fingerprint !== write.fingerprint) {
      throw new ApiProblem(
        'idempotency-key-reuse',
        'This Idempotency-Key was already used with a different method, path or body.',
      );
    }
    if (row.responseStatus == null || row.responseBody === null) return null;
    return {
      status: row.responseStatus,
      type: row.responseType,
      body: this.unseal(row.responseBody, write.tenantId, write.key),
    };
  }

  private async start(write: KeyedWrite): Promise<IdempotencyStart> {
    const deadline = Date.now() + WAIT_FOR_FIRST_MS;
    for (;;) {
      const tried = await this.lockOnce(write, true);
      if ('locked' in tried) return { kind: 'execute', locked: tried.locked };
      const stored = tried.row ? this.replayOf(tried.row, write) : null;
      if (stored) return { kind: 'replay', response: stored };
      // Another live request holds the key (or its row was just purged): wait for its answer.
      if (Date.now() >= deadline) {
        throw new ApiProblem(
          'idempotency-in-progress',
          'A request with this Idempotency-Key is still running; retry with the same key.',
        );
      }
      await sleep(POLL_MS);
    }
  }

  /**
   * Stores what the endpoint answered and commits the transaction that locked the key, or, for
   * answers that must not stick, rolls the request back, which frees the key.
   */
  private async finish(locked: LockedKey, response: StoredAnswer): Promise<void> {
    if (!isStored(response.status)) return this.abandon(locked);
    const { tenantId, key, transaction } = locked;
    const sealed = {
      ...response,
      body: this.deps.secrets.encrypt(response.body, sealContext(tenantId, key)),
    };
    try {
      // The answer's row and COMMIT go out together.
      await transaction.commitWith(() => this.deps.keys.complete(locked, sealed));
    } catch (error) {
      await this.abandon(locked);
      throw error;
    }
  }

  /** Undoes the request's writes and its lock: the key is free for a retry. */
  private async abandon(locked: LockedKey): Promise<void> {
    await locked.transaction.rollback();
  }

  /** Answers stored before they were sealed are JSON text (`{…}`) or empty, never `v1.…`. */
  private unseal(stored: string, tenantId: string, key: string): string {
    return stored.startsWith('v1.')
      ? this.deps.secrets.decrypt(stored, sealContext(tenantId, key))
      : stored;
  }

  /**
   * Deletes the keys expired by now, in statements of at most `batchSize` keys, each paused
   * after like the retention purge's: one DELETE of everything would hold SQLite's write lock
   * (every write waits) or run into PostgreSQL's statement_timeout, and fail again each time.
   * Resolves with the number of keys deleted.
   */
  async purgeExpired(options: IdempotencyPurgeOptions = {}): Promise<number> {
    const limit = options.batchSize ?? PURGE_BATCH;
    const pacing = {
      batchSize: limit,
      pauseFactor: options.pauseFactor ?? PURGE_PAUSE_FACTOR,
      signal: options.signal,
    };
    const now = nowIso(this.deps.clock);
    let deleted = 0;
    await pacedBatches(
      '',
      pacing,
      (from) => this.deps.keys.deleteExpired(from, now, limit),
      (keys) => {
        deleted += keys;
        options.onBatch?.(keys);
      },
    );
    return deleted;
  }
}

/** Binds a sealed answer to its key: copied to another row, it no longer decrypts. */
function sealContext(tenantId: string, key: string): string {
  return `idempotency ${tenantId} ${key}`;
}

/** Whether an answer is kept for replays (under 500, but not 401 or 429); others free the key. */
function isStored(status: number): boolean {
  return status < 500 && status !== 401 && status !== 429;
}
