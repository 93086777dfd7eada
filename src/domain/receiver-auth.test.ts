import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import {
  NO_RECEIVER_SECRETS,
  nextReceiverSecrets,
  type ReceiverSecrets,
  receiverHeaders,
  shownReceiverAuth,
} from './receiver-auth.ts';

const stored: ReceiverSecrets = {
  headers: { 'X-Api-Key': 'k-1' },
  auth: {
    type: 'oauth2_client_credentials',
    tokenUrl: 'https://login.test/token',
    clientId: 'c',
    clientSecret: 's-1',
  },
};

describe('receiver authentication: what a create or PATCH leaves', () => {
  it('keeps what is not sent, and a masked value of the same name, on the same origin', () => {
    const kept = nextReceiverSecrets(
      { headers: { 'x-api-key': '***', 'X-Team': 'b' } },
      stored,
      true,
    );
    assert.ok('secrets' in kept);
    assert.deepEqual(kept.secrets.headers, { 'x-api-key': 'k-1', 'X-Team': 'b' });
    assert.deepEqual(kept.secrets.auth, stored.auth);
  });

  it('carries no stored secret to another origin', () => {
    const moved = nextReceiverSecrets({}, stored, false);
    assert.ok('errors' in moved);
    assert.deepEqual(Object.keys(moved.errors).sort(), ['auth', 'headers']);
    const resent = nextReceiverSecrets({ headers: null, auth: null }, stored, false);
    assert.deepEqual(resent, { secrets: NO_RECEIVER_SECRETS });
  });

  it('keeps a masked secret only for the same scheme (and token URL), saying which rule refused', () => {
    const basic = nextReceiverSecrets(
      { auth: { type: 'basic', username: 'ops', password: '***' } },
      stored,
      true,
    );
    assert.ok('errors' in basic);
    assert.match(basic.errors['auth.password'][0], /there is none/);
    const otherServer = nextReceiverSecrets(
      {
        auth: {
          ...(stored.auth as object),
          tokenUrl: 'https://elsewhere.test/t',
          clientSecret: '***',
        } as never,
      },
      stored,
      true,
    );
    assert.ok('errors' in otherServer);
    assert.match(otherServer.errors['auth.clientSecret'][0], /same tokenUrl/);
  });

  it('refuses every name docs/api-behaviour.md refuses, by class, and takes the names beside them', () => {
    const refused = [
      'Service-Signature',
      'service-foo',
      'webhook-id',
      'Webhook-Foo',
      'WEBHOOK-SIGNATURE-V2',
      'Connection',
      'Keep-Alive',
      'TE',
      'Trailer',
      'Transfer-Encoding',
      'Upgrade',
      'Proxy-Authorization',
      'proxy-anything',
      'Host',
      'Content-Type',
      'content-anything',
      'User-Agent',
      'Expect',
      'traceparent',
      'tracestate',
      'baggage',
    ];
    for (const name of refused) {
      const result = nextReceiverSecrets({ headers: { [name]: 'v' } }, NO_RECEIVER_SECRETS, true);
      assert.ok('errors' in result, name);
      assert.deepEqual(Object.keys(result.errors), [`headers.${name}`], name);
    }
    for (const name of [
      'X-Webhook-Foo',
      'Webhooks',
      'X-Service-Id',
      'Authorization',
      'X-Api-Key',
    ]) {
      const result = nextReceiverSecrets({ headers: { [name]: 'v' } }, NO_RECEIVER_SECRETS, true);
      assert.ok('secrets' in result, `${name}: ${JSON.stringify(result)}`);
    }
    const withAuth = nextReceiverSecrets(
      { headers: { Authorization: 'v' }, auth: { type: 'basic', username: 'u', password: 'p' } },
      NO_RECEIVER_SECRETS,
      true,
    );
    assert.ok('errors' in withAuth);
    assert.deepEqual(Object.keys(withAuth.errors), ['headers.Authorization']);
    // The docs name each class refused here.
    const docs = readFileSync(new URL('../../docs/api-behaviour.md', import.meta.url), 'utf8');
    const sentence = /Refused names: ([^.]+)\./.exec(docs.replace(/\s+/g, ' '))?.[1] ?? '';
    for (const named of [
      '`Service-…`',
      '`webhook-…`',
      'hop-by-hop',
      '`proxy-…`',
      '`host`',
      '`content-…`',
      '`user-agent`',
      '`expect`',
      'trace context',
      '`authorization` while `auth` is set',
    ]) {
      assert.ok(sentence.includes(named), `the docs name ${named}: ${sentence}`);
    }
  });

  it('shows names and schemes, never a secret; Basic becomes one Authorization header', () => {
    assert.equal(JSON.stringify(shownReceiverAuth(stored)).includes('s-1'), false);
    assert.equal(JSON.stringify(shownReceiverAuth(stored)).includes('k-1'), false);
    const basic = receiverHeaders({
      headers: {},
      auth: { type: 'basic', username: 'u', password: 'p:w' },
    });
    assert.deepEqual(basic, { authorization: `Basic ${Buffer.from('u:p:w').toString('base64')}` });
    assert.deepEqual(receiverHeaders(stored), stored.headers, 'OAuth2 adds its token per attempt');
  });
});
