import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { loggedQuery } from './log-fields.ts';

describe('loggedQuery', () => {
  it('keeps ordinary parameters as sent', () => {
    assert.equal(loggedQuery('/api/v1/trips?limit=2&status=active'), 'limit=2&status=active');
    assert.equal(loggedQuery('/api/v1/trips'), undefined);
    assert.equal(loggedQuery('/api/v1/trips?'), undefined);
  });

  it('redacts the value of anything named like a credential, however spelled', () => {
    assert.equal(
      loggedQuery('/x?access_token=tk_live_SECRET&limit=2&api%5Fkey=abc&Signature=s&password='),
      'access_token=[redacted]&limit=2&api%5Fkey=[redacted]&Signature=[redacted]&password=[redacted]',
    );
    // A name that does not decode is judged as written.
    assert.equal(loggedQuery('/x?token%zz=1'), 'token%zz=[redacted]');
  });

  it('cuts a long query string', () => {
    const logged = loggedQuery(`/x?q=${'a'.repeat(2000)}`) as string;
    assert.equal(logged.length, 513);
    assert.ok(logged.endsWith('…'));
  });
});
