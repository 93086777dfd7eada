import type { Transporter } from 'nodemailer';

/** What a tenant's contacts are told when one of its webhook subscriptions pauses by itself. */
export interface PausedNotice {
  to: string[];
  tenantId: string;
  subscriptionId: string;
  url: string;
  pausedAt: string;
  /** `gone`: its receiver answered 410; `consecutive_failures`: the auto-pause rule. */
  reason: 'gone' | 'consecutive_failures';
  /** Consecutive 4xx answers when it paused. */
  clientErrorRun: number;
}

export interface Mailer {
  /** One message to every address in `notice.to`; rejects when the SMTP server can't be reached or refuses it. */
  webhookPaused(notice: PausedNotice): Promise<void>;
  /** Closes the pooled SMTP connections. */
  close(): void;
}

export interface MailerOptions {
  /** Defaults to `Tour operator API <no-reply@{host of publicBaseUrl}>`. */
  from?: string;
  publicBaseUrl: string;
  /** Connection and greeting timeout in ms; 10 s unless set. */
  timeoutMs?: number;
}

/** Null when SMTP_URL is unset: no mail is sent then. `smtpUrl` is an smtp:// or smtps:// URL. */
export function createMailer(smtpUrl: string | null, options: MailerOptions): Mailer | null {
  if (smtpUrl === null) return null;
  const timeoutMs = options.timeoutMs ?? 10_000;
  // The client library is loaded with the first mail: most starts send none.
  let transport: Promise<Transporter> | null = null;
  const transporter = () =>
    (transport ??= import('nodemailer').then(({ default: nodemailer }) =>
      nodemailer.createTransport({
        url: smtpUrl,
        pool: true,
        maxConnections: 2,
        connectionTimeout: timeoutMs,
        greetingTimeout: timeoutMs,
        socketTimeout: Math.max(timeoutMs, 30_000),
      }),
    ));
  const from =
    options.from ?? `Tour operator API <no-reply@${new URL(options.publicBaseUrl).hostname}>`;

  return {
    async webhookPaused(notice) {
      if (notice.to.length === 0) return;
      await (await transporter()).sendMail({
        from,
        to: notice.to,
        subject: `Webhook endpoint paused: ${oneLine(notice.url)}`,
        text: pausedText(notice),
      });
    },
    close() {
      void transport?.then((opened) => opened.close());
    },
  };
}

function pausedText(notice: PausedNotice): string {
  const id = notice.subscriptionId;
  return [
    `Webhook subscription ${id} was paused at ${notice.pausedAt}.`,
    '',
    `Tenant:   ${notice.tenantId}`,
    `Endpoint: ${notice.url}`,
    notice.reason === 'gone'
      ? 'Reason:   the endpoint answered 410 Gone, which asks us to stop sending.'
      : `Reason:   ${notice.clientErrorRun} consecutive deliveries were refused (a 4xx answer, credentials refused by its token server, or a broker's refusal).`,
    '',
    'Once the endpoint is fixed, resume the subscription with either:',
    `  POST /admin/v1/webhooks/${id}/enable`,
    `  tourops webhooks enable ${id}`,
    '',
  ].join('\n');
}

function oneLine(value: string): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is removed
  return value.replace(/[\u0000-\u001f\u007f]+/g, ' ');
}
