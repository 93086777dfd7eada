import { html } from 'ghtml';
import { sampleEventData } from '../../domain/event-samples.ts';
import { EVENT_DATA_SCHEMAS } from '../../domain/event-schemas.ts';
import {
  DEFAULT_MAX_CONCURRENCY,
  MAX_CONCURRENCY,
  MAX_PER_SECOND,
  ORDERINGS,
} from '../../domain/flow-control.ts';
import { CERTIFICATE_WARNING_DAYS, expiresSoon } from '../../domain/receiver-auth.ts';
import { DELIVERY_STATUSES, SUBSCRIBABLE_EVENT_TYPES } from '../../domain/states.ts';
import { PAYLOAD_FORMS, THIN_DATA_SCHEMAS } from '../../domain/thin-payload.ts';
import { mayRedeliver } from '../../domain/webhook-moves.ts';
import type { Page } from '../../lib/cursor.ts';
import type { Attempt, Delivery, LedgerEvent } from '../../services/deliveries-service.ts';
import type { FilterTestResult } from '../../services/dry-runs-service.ts';
import type { Subscription } from '../../services/subscription-view.ts';
import {
  actionButton,
  endpointPath,
  type Frame,
  formFields,
  json,
  page,
  seg,
  statusBadge,
  textBlock,
  time,
} from './layout.ts';
import { receiverAuthFields } from './receiver-auth-form.ts';
import { transformationFields, transformationSection } from './transformation-pages.ts';

/** A page of a signed-in session: its frame, and a fresh idempotency key per rendered form. */
export interface View extends Frame {
  key: () => string;
}

/** Why an endpoint is paused, in a few words. */
const PAUSE_WHY: Record<NonNullable<Subscription['pauseReason']>, string> = {
  manual: 'by hand',
  consecutive_failures: 'after failing again and again',
  gone: 'its receiver answered 410 Gone',
  deleted: '',
};

function state(subscription: Subscription): string {
  if (subscription.deliveryState.reason === 'deleted')
    return html`<span class="badge bad">deleted</span>`;
  if (!subscription.active) {
    const why = subscription.pauseReason === null ? '' : PAUSE_WHY[subscription.pauseReason];
    return html`<span class="badge warn">paused</span>!${why ? html` <span class="muted">${why}</span>` : ''}`;
  }
  return html`<span class="badge ok">active</span>`;
}

function health(subscription: Subscription): string {
  const { succeeded, deadLettered, pending } = subscription.last24h;
  return html`<span>${succeeded} delivered</span>, <span!${deadLettered > 0 ? ' class="bad-text"' : ''}>${deadLettered} failed</span>, <span>${pending} pending</span>`;
}

function flow(subscription: Subscription): string {
  const { concurrencyLimit, inFlight, pausedUntil, reason } = subscription.deliveryState;
  const why =
    reason === 'retry_after'
      ? html` · held by the endpoint's Retry-After until !${time(pausedUntil)}`
      : reason === 'backpressure'
        ? html` · slowed: the endpoint pushed back`
        : '';
  return html`${inFlight} in flight of ${concurrencyLimit} allowed!${why}`;
}

/**
 * When a pending delivery will be tried next, as the endpoint's state decides it: not while the
 * subscription is paused, not before a Retry-After hold ends, else at its own `nextAttemptAt`.
 */
function nextAttempt(delivery: Delivery, subscription: Subscription): string {
  if (delivery.status !== 'pending') return html`<span class="muted">—</span>`;
  if (!subscription.active) return html`<span class="muted">when the endpoint is enabled</span>`;
  const { reason, pausedUntil } = subscription.deliveryState;
  const due = delivery.nextAttemptAt;
  if (reason === 'retry_after' && pausedUntil !== null && (due === null || pausedUntil > due)) {
    return html`!${time(pausedUntil)} <span class="muted">(held by the endpoint's Retry-After)</span>`;
  }
  return time(due, 'as soon as a slot is free');
}

export function endpointsPage(view: View, subscriptions: Subscription[]): string {
  const add = view.readOnly
    ? ''
    : html`<p><a class="button" href="/portal/endpoints/new">Add an endpoint</a></p>`;
  const body =
    subscriptions.length === 0
      ? html`<div class="empty"><h2>No endpoints yet</h2><p>An endpoint is an HTTPS URL of yours that receives signed events (a booking confirmed, a payment succeeded…).</p>!${
          view.readOnly
            ? html`<p>This session is read-only: ask for a full session to add one.</p>`
            : html`<p><a class="button" href="/portal/endpoints/new">Add your first endpoint</a> then send it a test event.</p>`
        }</div>`
      : html`<div class="table-wrap"><table>
<caption>Endpoints and their last 24 hours</caption>
<thead><tr><th scope="col">URL</th><th scope="col">State</th><th scope="col">Events</th><th scope="col">Last 24 h</th><th scope="col">Flow</th></tr></thead>
<tbody>!${subscriptions.map(
          (s) => html`<tr>
<td><a class="url" href="${endpointPath(s.id)}">${s.url}</a></td>
<td>!${state(s)}</td>
<td>${s.events.length} type${s.events.length === 1 ? '' : 's'}</td>
<td>!${health(s)}</td>
<td>!${flow(s)}</td>
</tr>`,
        )}</tbody></table></div>`;
  return page('Endpoints', html`<h1>Webhook endpoints</h1>!${add}!${body}`, view);
}

function eventCheckboxes(selected: readonly string[]): string {
  return html`<fieldset><legend>Events to send</legend><div class="checks">!${SUBSCRIBABLE_EVENT_TYPES.map(
    (type) =>
      html`<label><input type="checkbox" name="events" value="${type}"!${
        selected.includes(type) ? ' checked' : ''
      }> ${type}</label>`,
  )}</div><p class="hint"><a href="/portal/catalog">What each event carries</a></p></fieldset>`;
}

function flowFields(s: Subscription | null): string {
  return html`<details><summary>Flow control and headers</summary>
<label for="maxConcurrency">Most deliveries at once (1-${MAX_CONCURRENCY})</label>
<input id="maxConcurrency" name="maxConcurrency" type="number" min="1" max="${MAX_CONCURRENCY}" value="${s?.maxConcurrency ?? DEFAULT_MAX_CONCURRENCY}">
<label for="maxPerSecond">Most deliveries a second (1-${MAX_PER_SECOND}, empty for no cap)</label>
<input id="maxPerSecond" name="maxPerSecond" type="number" min="1" max="${MAX_PER_SECOND}" value="${s?.maxPerSecond ?? ''}">
<label for="ordering">Ordering</label>
<select id="ordering" name="ordering">!${ORDERINGS.map(
    (o) =>
      html`<option value="${o}"!${(s?.ordering ?? 'none') === o ? ' selected' : ''}>${
        o === 'none'
          ? 'none: as they fall due'
          : 'per_object: one at a time per booking, trip or client'
      }</option>`,
  )}</select>
<label for="payload">Payload</label>
<select id="payload" name="payload">!${PAYLOAD_FORMS.map(
    (form) =>
      html`<option value="${form}"!${(s?.payload ?? 'full') === form ? ' selected' : ''}>${
        form === 'full'
          ? 'full: the whole event'
          : 'thin: ids and the names of what changed (fetch the rest with GET /api/v1/events/{id})'
      }</option>`,
  )}</select>
<label class="check"><input type="checkbox" name="standardWebhooks" value="true"!${
    s?.standardWebhooks ? ' checked' : ''
  }> Also send the Standard Webhooks headers</label>
<label class="check"><input type="checkbox" name="asymmetricSignatures" value="true"!${
    s?.asymmetricSignatures ? ' checked' : ''
  }> Also sign with an Ed25519 key pair (v1a; needs the Standard Webhooks headers)</label>
</details>`;
}

/** The filter as the forms show it: indented JSON, empty for none. */
const filterText = (filter: Subscription['filter']) =>
  filter === null ? '' : JSON.stringify(filter, null, 2);

function filterField(s: Subscription | null): string {
  return html`<label for="filter">Payload filter: JSON, empty for every event of the types above</label>
<textarea id="filter" name="filter" rows="4" class="code" spellcheck="false" placeholder='{"data.currency": "EUR", "data.amountCents": {"$gte": 10000}}'>${filterText(s?.filter ?? null)}</textarea>
<p class="hint"><a href="/docs/#description/payload-filters">The filter language</a>: paths <code>type</code> and <code>data.…</code>, operators <code>$eq $neq $in $nin $gt $gte $lt $lte $exists $prefix</code>, <code>$and</code> and <code>$or</code>.</p>`;
}

export function newEndpointPage(view: View): string {
  return page(
    'Add an endpoint',
    html`<h1>Add an endpoint</h1>
<form method="post" action="/portal/endpoints" class="stack">!${formFields(view.csrf, view.key())}
<label for="url">URL: HTTPS, or a RabbitMQ (amqps://) or NATS JetStream (tls://) broker</label>
<input id="url" name="url" type="url" required placeholder="https://example.com/webhooks" autocomplete="off">
!${eventCheckboxes([])}
!${filterField(null)}
!${transformationFields(null)}
!${flowFields(null)}
!${receiverAuthFields(null)}
<p><button type="submit" class="primary">Add endpoint</button> <a href="/portal/">Cancel</a></p>
</form>`,
    view,
  );
}

/** After creating an endpoint or rotating its key: the key, once. */
export function signingKeyPage(
  view: View,
  subscription: Subscription,
  signingKey: string,
  rotated: { oldKeyUntil: string } | null,
): string {
  return page(
    'Signing key',
    html`<h1>${rotated ? 'New signing key' : 'Endpoint added'}</h1>
<p class="url">${subscription.url}</p>
<div class="notice" role="status"><p><strong>Copy the signing key now: it is shown only once.</strong> Verify every delivery's <code>Service-Signature</code> with it.</p>
<label for="key">Signing key</label>
<input id="key" class="code" readonly value="${signingKey}" data-select></div>
!${rotated ? html`<p>The old key keeps signing deliveries (beside the new one) until !${time(rotated.oldKeyUntil)}.</p>` : ''}
<p><a class="button" href="${endpointPath(subscription.id)}">Go to the endpoint</a></p>`,
    view,
  );
}

export interface EndpointPageData {
  subscription: Subscription;
  deliveries: Page<Delivery>;
  filter: { status?: string; eventType?: string };
  /** A fixed message after an action (never tenant text). */
  done: string | null;
}

export function endpointPage(view: View, data: EndpointPageData): string {
  const s = data.subscription;
  const path = endpointPath(s.id);
  const deleted = s.deliveryState.reason === 'deleted';
  const canAct = !view.readOnly && !deleted;
  return page(
    s.url,
    html`<p class="crumbs"><a href="/portal/">Endpoints</a> ›</p>
<h1 class="url">${s.url}</h1>
!${data.done === null ? '' : html`<p class="notice" role="status">${data.done}</p>`}
<dl class="facts">
<div><dt>State</dt><dd>!${state(s)}!${s.pausedAt ? html` since !${time(s.pausedAt)}` : ''}</dd></div>
<div><dt>Last 24 h</dt><dd>!${health(s)}</dd></div>
<div><dt>Flow</dt><dd>!${flow(s)}</dd></div>
<div><dt>Failures in a row</dt><dd>${s.consecutiveFailures}</dd></div>
<div><dt>Last success</dt><dd>!${time(s.lastSuccessAt)}</dd></div>
<div><dt>Last failure</dt><dd>!${time(s.lastFailureAt)}</dd></div>
<div><dt>Events</dt><dd>${s.events.join(', ')}</dd></div>
<div><dt>Id</dt><dd><code>${s.id}</code></dd></div>
!${s.publicKey ? html`<div><dt>Public key (v1a)</dt><dd><code>${s.publicKey}</code></dd></div>` : ''}
!${receiverAuthFacts(s)}
</dl>
<p><a href="${path}/events">Ledger: every event by sequence</a></p>
!${filterSection(s, filterText(s.filter))}
!${transformationSection(view, s, s.transformation?.code ?? '')}
!${deliveriesSection(data, path)}
!${canAct ? actions(view, s) : ''}
!${canAct ? editSection(view, s) : ''}`,
    view,
  );
}

/** Receiver authentication as the facts list shows it: names and schemes, never a secret. */
function receiverAuthFacts(s: Subscription): string {
  const names = Object.keys(s.headers);
  const headers =
    names.length === 0
      ? ''
      : html`<div><dt>Extra headers</dt><dd>!${names.map((name) => html`<code>${name}</code>`).join(', ')} <span class="muted">(values hidden)</span></dd></div>`;
  const certificate = s.clientCertificate;
  const tls =
    certificate === null
      ? ''
      : html`<div><dt>Client certificate</dt><dd><code>${certificate.subject}</code>, expires !${time(certificate.notAfter)}!${
          expiresSoon(certificate.notAfter, Date.now())
            ? html` <span class="badge bad">expires within ${CERTIFICATE_WARNING_DAYS} days: replace it</span>`
            : ''
        }</dd></div>`;
  const auth = s.auth;
  if (auth === null) return headers + tls;
  const scheme =
    auth.type === 'basic'
      ? html`HTTP Basic as <code>${auth.username}</code>`
      : html`OAuth2 client credentials: client <code>${auth.clientId}</code> at <code class="url">${auth.tokenUrl}</code>`;
  return html`!${headers}<div><dt>Authentication</dt><dd>!${scheme} <span class="muted">(secret hidden)</span></dd></div>!${tls}`;
}

/** The subscription's filter, and a form that tries one on its last 50 events (a GET: no change). */
function filterSection(s: Subscription, text: string): string {
  return html`<section aria-labelledby="filter-h"><h2 id="filter-h">Payload filter</h2>
!${s.filter === null ? html`<p>None: every event of its types is sent.</p>` : json(s.filter, 'The payload filter')}
<form method="get" action="${endpointPath(s.id)}/filter-test" class="stack">
<label for="try-filter">A filter to try (JSON; empty for none)</label>
<textarea id="try-filter" name="filter" rows="4" class="code" spellcheck="false">${text}</textarea>
<p><button type="submit">Try on the last 50 events</button> <span class="hint">Nothing is saved or sent.</span></p>
</form></section>`;
}

/** A filter's dry run on the subscription's last 50 ledger events. */
export function filterTestPage(
  view: View,
  subscription: Subscription,
  tried: { text: string; result: FilterTestResult },
): string {
  const path = endpointPath(subscription.id);
  const events = tried.result.events ?? [];
  const taken = events.filter((e) => e.matches).length;
  return page(
    'Try a filter',
    html`<p class="crumbs"><a href="/portal/">Endpoints</a> › <a class="url" href="${path}">${subscription.url}</a> ›</p>
<h1>Try a filter</h1>
<p role="status">${
      events.length === 0
        ? 'The ledger has no events yet.'
        : `It would take ${taken} of the last ${events.length} events.`
    }</p>
!${filterSection(subscription, tried.text)}
!${
      events.length === 0
        ? ''
        : html`<div class="table-wrap"><table>
<caption>The last ${events.length} events, oldest first</caption>
<thead><tr><th scope="col">Sequence</th><th scope="col">Event</th><th scope="col">Filter</th></tr></thead>
<tbody>!${events.map(
            (e) => html`<tr>
<td>${e.sequence}</td>
<td>${e.type}</td>
<td>!${e.matches ? html`<span class="badge ok">taken</span>` : html`<span class="badge muted">skipped</span>`}</td>
</tr>`,
          )}</tbody></table></div>`
    }`,
    view,
  );
}

function actions(view: View, s: Subscription): string {
  const path = endpointPath(s.id);
  const first = SUBSCRIBABLE_EVENT_TYPES[0];
  return html`<section aria-labelledby="actions-h"><h2 id="actions-h">Actions</h2>
<div class="row">
!${
    s.active
      ? actionButton(`${path}/pause`, 'Pause deliveries', view.csrf, view.key())
      : html`!${actionButton(`${path}/enable-and-recover`, 'Enable and recover what was missed', view.csrf, view.key())}!${actionButton(`${path}/enable`, 'Enable only', view.csrf, view.key())}`
  }
!${actionButton(`${path}/rotate-key`, 'Rotate signing key', view.csrf, view.key(), {
    confirm: 'Rotate the signing key? The old one keeps signing for 24 hours.',
  })}
!${actionButton(`${path}/delete`, 'Delete endpoint', view.csrf, view.key(), {
    danger: true,
    confirm: 'Delete this endpoint? Pending deliveries will never be sent.',
  })}
</div>
!${
    s.active
      ? html`<form method="post" action="${path}/test" class="stack">!${formFields(view.csrf, view.key())}
<h3>Send a test event</h3>
<label for="eventType">Test event type</label>
<select id="eventType" name="eventType" data-samples>!${SUBSCRIBABLE_EVENT_TYPES.map(
          (type) => html`<option value="${type}">${type}</option>`,
        )}</select>
<div class="samples">!${SUBSCRIBABLE_EVENT_TYPES.map(
          (type) =>
            html`<div data-sample="${type}"!${type === first ? '' : ' hidden'}><p class="hint">Sample <code>data</code> of ${type} (marked <code>"test": true</code>):</p>!${json(
              sampleEventData(type, new Date()),
              `Sample data of ${type}`,
            )}</div>`,
        )}</div>
<p><button type="submit">Send test event</button></p>
</form>
<form method="post" action="${path}/recover" class="stack">!${formFields(view.csrf, view.key())}
<h3>Recover failed deliveries</h3>
<p class="hint">Sends again every delivery that failed for good since this time (your time zone).</p>
<label for="since">Since</label>
<input id="since" name="since" type="datetime-local" required step="1">
<input type="hidden" name="tzOffset" value="0" data-tz-offset>
<p><button type="submit">Recover</button></p>
</form>`
      : ''
  }
</section>`;
}

function deliveriesSection(data: EndpointPageData, path: string): string {
  const { deliveries, filter } = data;
  const rows = deliveries.data;
  const older =
    deliveries.meta.hasMore && deliveries.meta.cursor
      ? html`<p><a href="${path}?${new URLSearchParams({
          ...(filter.status ? { status: filter.status } : {}),
          ...(filter.eventType ? { type: filter.eventType } : {}),
          cursor: deliveries.meta.cursor,
        }).toString()}">Older deliveries</a></p>`
      : '';
  return html`<section aria-labelledby="deliveries-h"><h2 id="deliveries-h">Deliveries</h2>
<form method="get" action="${path}" class="row filters">
<label for="status">Status</label>
<select id="status" name="status"><option value="">any</option>!${DELIVERY_STATUSES.map(
    (st) => html`<option value="${st}"!${filter.status === st ? ' selected' : ''}>${st}</option>`,
  )}</select>
<label for="type">Event type</label>
<select id="type" name="type"><option value="">any</option>!${SUBSCRIBABLE_EVENT_TYPES.map(
    (t) => html`<option value="${t}"!${filter.eventType === t ? ' selected' : ''}>${t}</option>`,
  )}<option value="webhook.test"!${filter.eventType === 'webhook.test' ? ' selected' : ''}>webhook.test</option></select>
<button type="submit">Filter</button>
</form>
!${
    rows.length === 0
      ? html`<div class="empty"><p>${
          filter.status || filter.eventType
            ? 'No delivery matches this filter.'
            : 'No deliveries yet. Send a test event above, or wait for the next event of a subscribed type.'
        }</p></div>`
      : html`<div class="table-wrap"><table>
<caption>Newest first</caption>
<thead><tr><th scope="col">Created</th><th scope="col">Event</th><th scope="col">Status</th><th scope="col">Attempts</th><th scope="col">Last answer</th><th scope="col">Next attempt</th></tr></thead>
<tbody>!${rows.map(
          (d) => html`<tr>
<td><a href="${path}/deliveries/${seg(d.id)}">!${time(d.createdAt)}</a></td>
<td>${d.eventType}!${d.isTest ? html` <span class="badge muted">test</span>` : ''}</td>
<td>!${statusBadge(d.status)}</td>
<td>${d.attempts}</td>
<td>${d.lastResponseStatus ?? d.lastError ?? '—'}</td>
<td>!${nextAttempt(d, data.subscription)}</td>
</tr>`,
        )}</tbody></table></div>`
  }
!${older}
</section>`;
}

function editSection(view: View, s: Subscription): string {
  return html`<section aria-labelledby="edit-h"><h2 id="edit-h">Edit</h2>
<form method="post" action="${endpointPath(s.id)}" class="stack">!${formFields(view.csrf, view.key())}
<label for="edit-url">URL (a broker password shows as ***: leave it to keep the stored one)</label>
<input id="edit-url" name="url" type="url" required value="${s.url}" autocomplete="off">
!${eventCheckboxes(s.events)}
!${filterField(s)}
!${transformationFields(s)}
!${flowFields(s)}
!${receiverAuthFields(s)}
<p><button type="submit" class="primary">Save</button></p>
</form></section>`;
}

export function deliveryPage(
  view: View,
  subscription: Subscription,
  delivery: Delivery,
  eventData: Record<string, unknown> | null,
  attempts: Attempt[],
  done: string | null,
): string {
  const path = endpointPath(subscription.id);
  const canRedeliver = !view.readOnly && subscription.active && mayRedeliver(delivery.status);
  return page(
    `Delivery ${delivery.id}`,
    html`<p class="crumbs"><a href="/portal/">Endpoints</a> › <a class="url" href="${path}">${subscription.url}</a> ›</p>
<h1>Delivery of ${delivery.eventType}</h1>
!${done === null ? '' : html`<p class="notice" role="status">${done}</p>`}
<dl class="facts">
<div><dt>Status</dt><dd>!${statusBadge(delivery.status)}</dd></div>
<div><dt>Created</dt><dd>!${time(delivery.createdAt)}</dd></div>
<div><dt>Delivered</dt><dd>!${time(delivery.deliveredAt, 'not yet')}</dd></div>
<div><dt>Next attempt</dt><dd>!${nextAttempt(delivery, subscription)}</dd></div>
<div><dt>Event id</dt><dd><code>${delivery.eventId}</code></dd></div>
<div><dt>Sequence</dt><dd>${delivery.sequence ?? 'test event'}</dd></div>
<div><dt>Delivery id</dt><dd><code>${delivery.id}</code></dd></div>
</dl>
!${
      canRedeliver
        ? html`<p>!${actionButton(`${path}/deliveries/${seg(delivery.id)}/redeliver`, 'Redeliver', view.csrf, view.key())} <span class="hint">A new delivery of the same event, attempts from 1.</span></p>`
        : ''
    }
<section aria-labelledby="attempts-h"><h2 id="attempts-h">Attempts</h2>
!${
      attempts.length === 0
        ? html`<div class="empty"><p>No attempt yet: the worker sends it when it falls due.</p></div>`
        : html`<ol class="attempts" reversed>!${attempts.map(
            (a) => html`<li><h3>Attempt ${a.attempt}: !${
              a.status === null
                ? html`<span class="badge bad">${a.errorClass ?? 'error'}</span>`
                : html`<span class="badge ${a.status < 300 ? 'ok' : 'bad'}">HTTP ${a.status}</span>`
            }</h3>
<p>!${time(a.startedAt)} · ${a.durationMs} ms!${a.retryAfter ? html` · Retry-After ${a.retryAfter}` : ''}</p>
!${a.responseBody === '' ? html`<p class="muted">Empty response body.</p>` : textBlock(a.responseBody, `Response body of attempt ${a.attempt}`)}
</li>`,
          )}</ol>`
    }
</section>
<section aria-labelledby="payload-h"><h2 id="payload-h">Event data</h2>
!${eventData === null ? html`<p class="muted">The event is no longer kept.</p>` : json(eventData, 'Data of the event')}
</section>`,
    view,
  );
}

export function ledgerPage(
  view: View,
  subscription: Subscription,
  after: number,
  events: LedgerEvent[],
  hasMore: boolean,
): string {
  const path = endpointPath(subscription.id);
  const last = events.at(-1)?.sequence;
  return page(
    'Ledger',
    html`<p class="crumbs"><a href="/portal/">Endpoints</a> › <a class="url" href="${path}">${subscription.url}</a> ›</p>
<h1>Ledger</h1>
<p class="hint">Every event sent to this endpoint, by <code>sequence</code>: what <code>GET /api/v1/webhooks/{id}/events?after=${after}</code> answers.</p>
!${
      events.length === 0
        ? html`<div class="empty"><p>No events after sequence ${after}.</p></div>`
        : html`<div class="table-wrap"><table>
<caption>After sequence ${after}</caption>
<thead><tr><th scope="col">Sequence</th><th scope="col">Event</th><th scope="col">Created</th><th scope="col">Delivery</th><th scope="col">Data</th></tr></thead>
<tbody>!${events.map(
            (e) => html`<tr>
<td>${e.sequence}</td>
<td>${e.type}</td>
<td>!${time(new Date(e.created * 1000).toISOString())}</td>
<td><a href="${path}/deliveries/${seg(e.deliveryId)}">!${statusBadge(e.deliveryStatus)}</a></td>
<td><details><summary>data</summary>!${json(e.data, `Data of event ${e.sequence}`)}</details></td>
</tr>`,
          )}</tbody></table></div>`
    }
!${hasMore && last !== undefined ? html`<p><a href="${path}/events?after=${last}">Next events</a></p>` : ''}`,
    view,
  );
}

export function catalogPage(view: View): string {
  return page(
    'Event catalog',
    html`<h1>Event catalog</h1>
<p>Each delivery is a JSON envelope <code>{id, type, created, data}</code> signed with the endpoint's key; <code>data</code> follows the schema of its type. An endpoint with the <code>thin</code> payload gets the thin <code>data</code> instead: ids and the names of the members that changed, no values.</p>
<nav aria-label="Event types"><ul class="toc">!${SUBSCRIBABLE_EVENT_TYPES.map(
      (type) => html`<li><a href="#${type}">${type}</a></li>`,
    )}</ul></nav>
!${SUBSCRIBABLE_EVENT_TYPES.map(
      (
        type,
      ) => html`<section id="${type}" aria-labelledby="h-${type}"><h2 id="h-${type}">${type}</h2>
<div class="two">
<div><h3>Schema of data</h3>!${json(EVENT_DATA_SCHEMAS[type], `Schema of ${type}`)}</div>
<div><h3>Sample</h3>!${json(sampleEventData(type, new Date()), `Sample of ${type}`)}</div>
</div>
<h3>Schema of thin data</h3>!${json(THIN_DATA_SCHEMAS[type], `Schema of thin ${type}`)}</section>`,
    )}`,
    view,
  );
}

/** A page outside a session, or an error: a heading, a sentence, and what to do next. */
export function messagePage(
  title: string,
  message: string,
  next: { href: string; label: string } | null,
  frame: Frame | null,
  details: Record<string, string[]> = {},
): string {
  const fields = Object.entries(details);
  return page(
    title,
    html`<div class="message"><h1>${title}</h1><p>${message}</p>!${
      fields.length === 0
        ? ''
        : html`<ul>!${fields.map(([field, messages]) => html`<li><code>${field}</code>: ${messages.join('; ')}</li>`)}</ul>`
    }!${next === null ? '' : html`<p><a href="${next.href}">${next.label}</a></p>`}</div>`,
    frame,
  );
}

/** What a portal link shows: one button, so only a person's click uses the link. */
export function signInPage(secret: string, csrf: string): string {
  return page(
    'Sign in',
    html`<div class="message"><h1>Sign in to the webhook portal</h1><p>This link works once: the button signs this browser in for an hour.</p>
<form method="post" action="/portal/session/${secret}">!${formFields(csrf)}<button type="submit">Sign in</button></form></div>`,
    null,
  );
}
