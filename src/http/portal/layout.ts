import type { FastifyReply } from 'fastify';
import { html } from 'ghtml';

/**
 * The portal's page frame and small shared pieces. Templates are ghtml tagged literals: every
 * `${value}` is escaped; `!${…}` (no escaping) is used only for fragments that are themselves
 * the output of `html`, never for a value, so tenant-controlled text (URLs, event data, response
 * excerpts) always reaches the page as text.
 */

/** Sends a rendered page as the answer (every page and error page of the portal). */
export function sendPage(reply: FastifyReply, body: string, status = 200): FastifyReply {
  return reply.code(status).type('text/html; charset=utf-8').send(body);
}

/** What every page of a signed-in session shows in its header. */
export interface Frame {
  /** The CSRF token of the sign-out form (and of every form on the page). */
  csrf: string;
  readOnly: boolean;
}

export function page(title: string, body: string, frame: Frame | null): string {
  return html`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>${title} · Webhook portal</title>
<link rel="stylesheet" href="/portal/assets/portal.css">
<script src="/portal/assets/portal.js" defer></script>
</head>
<body>
<a class="skip" href="#main">Skip to content</a>
<header class="top">
<span class="brand">Webhook portal</span>
!${
    frame === null
      ? ''
      : html`<nav aria-label="Portal">
<a href="/portal/">Endpoints</a>
<a href="/portal/catalog">Event catalog</a>
</nav>
!${frame.readOnly ? html`<span class="badge muted" title="This session can look but not change anything">Read-only</span>` : ''}
<form method="post" action="/portal/sign-out" class="inline">
<input type="hidden" name="_csrf" value="${frame.csrf}">
<button type="submit" class="link">Sign out</button>
</form>`
  }
</header>
<main id="main">
!${body}
</main>
</body>
</html>`;
}

/**
 * An instant: UTC in the markup (and on hover), the browser's own time zone once the script
 * runs. `null` reads "never".
 */
export function time(iso: string | null, none = 'never'): string {
  if (iso === null) return html`<span class="muted">${none}</span>`;
  const utc = `${iso.slice(0, 19).replace('T', ' ')} UTC`;
  return html`<time datetime="${iso}" title="${utc}">${utc}</time>`;
}

/** Text as it is, in a scrollable block (focusable, so it scrolls from the keyboard). */
export function textBlock(text: string, label: string): string {
  return html`<pre class="code" tabindex="0" aria-label="${label}">${text}</pre>`;
}

/** Pretty JSON as text in a scrollable block. */
export function json(value: unknown, label: string): string {
  return textBlock(JSON.stringify(value, null, 2), label);
}

/** A hidden field carrying the form's CSRF token, and one carrying its idempotency key. */
export function formFields(csrf: string, idempotencyKey?: string): string {
  return html`<input type="hidden" name="_csrf" value="${csrf}">!${
    idempotencyKey === undefined
      ? ''
      : html`<input type="hidden" name="idempotencyKey" value="${idempotencyKey}">`
  }`;
}

/** A one-button form posting to `action` (pause, enable, redeliver…). */
export function actionButton(
  action: string,
  label: string,
  csrf: string,
  idempotencyKey: string,
  options: { danger?: boolean; confirm?: string } = {},
): string {
  return html`<form method="post" action="${action}" class="inline"!${
    options.confirm === undefined ? '' : html` data-confirm="${options.confirm}"`
  }>!${formFields(csrf, idempotencyKey)}<button type="submit"!${options.danger ? ' class="danger"' : ''}>${label}</button></form>`;
}

/** A delivery status as a badge. */
export function statusBadge(status: string): string {
  const tone =
    status === 'success'
      ? 'ok'
      : status === 'dead_letter'
        ? 'bad'
        : status === 'in_flight'
          ? 'info'
          : 'muted';
  return html`<span class="badge ${tone}">${status.replace('_', ' ')}</span>`;
}

/** An id in a path (ids are ours, but a path is no place for anything unescaped). */
export const seg = (value: string) => encodeURIComponent(value);

/** An endpoint's page in the portal. */
export const endpointPath = (id: string) => `/portal/endpoints/${seg(id)}`;
