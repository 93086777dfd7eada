import assert from 'node:assert/strict';
import type { AddressInfo, Socket } from 'node:net';
import { createServer } from 'node:net';
import { after, before, beforeEach, describe, it } from 'node:test';
import { createMailer, type Mailer, type PausedNotice } from '../src/notifications/mailer.ts';
import { SmtpReceiver } from './helpers/smtp-receiver.ts';

/** Headers unfolded, body with quoted-printable soft breaks and escapes undone. */
function parse(raw: string): { headers: Map<string, string>; body: string } {
  const split = raw.indexOf('\r\n\r\n');
  const headers = new Map<string, string>();
  for (const line of raw
    .slice(0, split)
    .replace(/\r\n[ \t]+/g, ' ')
    .split('\r\n')) {
    const colon = line.indexOf(':');
    headers.set(line.slice(0, colon).toLowerCase(), line.slice(colon + 1).trim());
  }
  let body = raw.slice(split + 4);
  if (headers.get('content-transfer-encoding') === 'quoted-printable') {
    body = body
      .replace(/=\r\n/g, '')
      .replace(/=([0-9A-F]{2})/g, (_, hex: string) =>
        String.fromCharCode(Number.parseInt(hex, 16)),
      );
  }
  return { headers, body: body.replace(/\r\n/g, '\n') };
}

async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const notice: PausedNotice = {
  to: ['ops@example.com', 'dev@example.com'],
  tenantId: 'ten_01J0000000000000000000000',
  subscriptionId: 'wh_01J0000000000000000000000',
  url: 'https://hooks.example.com/tourops',
  pausedAt: '2025-06-10T08:30:00.000Z',
  reason: 'consecutive_failures',
  clientErrorRun: 24,
};

describe('createMailer', () => {
  let smtp: SmtpReceiver;
  let port: number;
  const mailers: Mailer[] = [];

  function mailer(url = `smtp://127.0.0.1:${port}`): Mailer {
    const created = createMailer(url, {
      publicBaseUrl: 'https://api.example.com',
      timeoutMs: 2000,
    });
    assert.ok(created);
    mailers.push(created);
    return created;
  }

  before(async () => {
    smtp = await SmtpReceiver.start();
    port = smtp.port;
  });

  beforeEach(() => {
    smtp.messages.length = 0;
    smtp.connections = 0;
  });

  after(async () => {
    for (const created of mailers) created.close();
    await smtp.close();
  });

  it('returns null without an SMTP URL', () => {
    assert.equal(createMailer(null, { publicBaseUrl: 'https://api.example.com' }), null);
  });

  it('sends one message to every recipient with the subject, the id and how to resume', async () => {
    await mailer().webhookPaused(notice);

    assert.equal(smtp.messages.length, 1);
    const [message] = smtp.messages;
    assert.deepEqual(message.rcptTo, ['ops@example.com', 'dev@example.com']);
    assert.equal(message.from, 'no-reply@api.example.com');
    const { headers, body } = parse(message.raw);
    assert.equal(
      headers.get('subject'),
      'Webhook endpoint paused: https://hooks.example.com/tourops',
    );
    assert.equal(headers.get('from'), 'Tour operator API <no-reply@api.example.com>');
    assert.equal(headers.get('to'), 'ops@example.com, dev@example.com');
    assert.match(body, /wh_01J0000000000000000000000 was paused at 2025-06-10T08:30:00\.000Z/);
    assert.match(body, /https:\/\/hooks\.example\.com\/tourops/);
    assert.match(body, /24 consecutive deliveries were refused \(a 4xx answer/);
    assert.match(body, /POST \/admin\/v1\/webhooks\/wh_01J0000000000000000000000\/enable/);
    assert.match(body, /tourops webhooks enable wh_01J0000000000000000000000/);
  });

  it('reuses one pooled connection for several notices', async () => {
    const pooled = mailer();
    await pooled.webhookPaused(notice);
    await pooled.webhookPaused({ ...notice, subscriptionId: 'wh_01J0000000000000000000001' });
    assert.equal(smtp.messages.length, 2);
    assert.equal(smtp.connections, 1);
  });

  it('honours an explicit from address', async () => {
    const created = createMailer(`smtp://127.0.0.1:${port}`, {
      from: 'Alerts <alerts@tours.example>',
      publicBaseUrl: 'https://api.example.com',
    });
    assert.ok(created);
    mailers.push(created);
    await created.webhookPaused(notice);
    assert.equal(smtp.messages[0].from, 'alerts@tours.example');
  });

  it('rejects, without hanging, when the SMTP server cannot be reached', {
    timeout: 10_000,
  }, async () => {
    const unreachable = mailer(`smtp://127.0.0.1:${await closedPort()}`);
    await assert.rejects(unreachable.webhookPaused(notice), (error: unknown) => {
      assert.ok(error instanceof Error);
      return true;
    });
  });

  it('gives up on a server that accepts but never greets', { timeout: 10_000 }, async () => {
    const sockets: Socket[] = [];
    const silent = createServer((socket) => sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    try {
      const { port: silentPort } = silent.address() as AddressInfo;
      // It gives up on its own greeting time-out (timeoutMs above), not on the test's.
      await assert.rejects(
        mailer(`smtp://127.0.0.1:${silentPort}`).webhookPaused(notice),
        (error: NodeJS.ErrnoException) => {
          assert.equal(error.code, 'ETIMEDOUT', error.message);
          assert.match(error.message, /greeting/i);
          return true;
        },
      );
    } finally {
      for (const socket of sockets) socket.destroy();
      await new Promise<void>((resolve) => silent.close(() => resolve()));
    }
  });
});
