import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loggedQuery } from './log-fields.ts';

describe('loggedQuery', () => {
  it("keeps the values of the API's own numbers, enums, dates, ids and cursors", () => {
    assert.equal(
      loggedQuery('/api/v1/trips?limit=2&status=active&publishedAt%5Bgte%5D=2026-01-01T00:00:00Z'),
      'limit=2&status=active&publishedAt%5Bgte%5D=2026-01-01T00:00:00Z',
    );
    assert.equal(loggedQuery('/api/v1/trips'), undefined);
    assert.equal(loggedQuery('/api/v1/trips?'), undefined);
  });

  it("redacts every other value: a search's text, a made-up name, a credential", () => {
    assert.equal(
      loggedQuery('/api/v1/clients?q=Ada%20Lovelace&limit=2&email=ada%40mail.test&flag'),
      'q=[redacted]&limit=2&email=[redacted]&flag',
    );
    assert.equal(
      loggedQuery('/x?access_token=tk_live_SECRET&api%5Fkey=abc&Signature=s&password='),
      'access_token=[redacted]&api%5Fkey=[redacted]&Signature=[redacted]&password=[redacted]',
    );
    // A name that does not decode is judged as written.
    assert.equal(loggedQuery('/x?limit%zz=1'), 'limit%zz=[redacted]');
  });

  it('cuts a long query string', () => {
    const logged = loggedQuery(`/x?cursor=${'a'.repeat(2000)}`) as string;
    assert.equal(logged.length, 513);
    assert.ok(logged.endsWith('…'));
  });
});
