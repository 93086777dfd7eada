import assert from 'node:assert/strict';
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
