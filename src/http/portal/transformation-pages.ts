import { html } from 'ghtml';
import type { TransformationTestResult } from '../../services/dry-runs-service.ts';
import type { Subscription } from '../../services/subscription-view.ts';
import { endpointPath, type Frame, formFields, page } from './layout.ts';

/** The portal's transformation pieces: the form fields, the endpoint's section, the dry run's page. */

/** The transformation's code and the retry schedule, as the create and edit forms take them. */
export function transformationFields(s: Subscription | null): string {
  return html`<details!${s?.transformation || s?.retrySchedule ? ' open' : ''}><summary>Transformation and retries</summary>
<label for="transformation">Transformation: JavaScript defining <code>handler(webhook)</code>, empty for none</label>
<textarea id="transformation" name="transformation" rows="8" class="code" spellcheck="false" placeholder="function handler(webhook) {&#10;  webhook.payload = { text: webhook.type };&#10;  return webhook;&#10;}">${s?.transformation?.code ?? ''}</textarea>
<p class="hint"><a href="/docs/#description/transformations">Transformations</a>: return the webhook changed (<code>payload</code>, <code>headers</code>, <code>url</code>) or with <code>cancel: true</code>; try one on the endpoint's page first.</p>
<label for="retrySchedule">Waits between attempts (e.g. <code>30s, 5m, 2h</code>; empty for the default)</label>
<input id="retrySchedule" name="retrySchedule" type="text" autocomplete="off" value="${s?.retrySchedule?.join(', ') ?? ''}">
</details>`;
}

/**
 * The subscription's transformation and retry schedule, and an editor that tries code on its last
 * 50 events (a POST for the code's length, yet a dry run: read-only sessions may send it).
 */
export function transformationSection(view: Frame, s: Subscription, code: string): string {
  return html`<section aria-labelledby="transformation-h"><h2 id="transformation-h">Transformation</h2>
!${s.transformation === null ? html`<p>None: each event is sent as it is.</p>` : html`<pre class="code" aria-label="The transformation">${s.transformation.code}</pre>`}
<p>Retries: ${s.retrySchedule === null ? 'the default schedule' : `after ${s.retrySchedule.join(', ')}`}.</p>
<form method="post" action="${endpointPath(s.id)}/transformation-test" class="stack">!${formFields(view.csrf)}
<label for="try-code">Code to try (JavaScript defining <code>handler(webhook)</code>)</label>
<textarea id="try-code" name="code" rows="10" class="code" spellcheck="false" required>${code}</textarea>
<p><button type="submit">Try the code on the last 50 events</button> <span class="hint">Nothing is saved or sent.</span></p>
</form></section>`;
}

/** What a transformation makes of the subscription's last 50 ledger events. */
export function transformationTestPage(
  view: Frame,
  subscription: Subscription,
  tried: { code: string; result: TransformationTestResult },
): string {
  const events = 'events' in tried.result ? tried.result.events : [];
  const failed = events.filter((e) => 'error' in e).length;
  const cancelled = events.filter((e) => 'result' in e && e.result.cancel).length;
  const outcome = (e: (typeof events)[number]) =>
    'error' in e
      ? html`<span class="badge bad">fails</span> <code>${e.error}</code>`
      : e.result.cancel
        ? html`<span class="badge muted">cancelled</span> nothing sent`
        : html`<span class="badge ok">sent</span> to <code class="url">${e.result.url}</code>!${
            Object.keys(e.result.headers).length === 0
              ? ''
              : html`, with ${Object.keys(e.result.headers).join(', ')}`
          }<pre class="code">${JSON.stringify(e.result.payload, null, 2)}</pre>`;
  return page(
    'Try a transformation',
    html`<p class="crumbs"><a href="/portal/">Endpoints</a> › <a class="url" href="${endpointPath(subscription.id)}">${subscription.url}</a> ›</p>
<h1>Try a transformation</h1>
<p role="status">${
      events.length === 0
        ? 'The ledger has no events yet.'
        : `Of the last ${events.length} events, ${events.length - failed - cancelled} would be sent, ${cancelled} cancelled, ${failed} would fail.`
    }</p>
!${transformationSection(view, subscription, tried.code)}
!${
      events.length === 0
        ? ''
        : html`<div class="table-wrap"><table>
<caption>The last ${events.length} events, oldest first, as they would go now</caption>
<thead><tr><th scope="col">Sequence</th><th scope="col">Event</th><th scope="col">What would be sent</th></tr></thead>
<tbody>!${events.map(
            (e) => html`<tr>
<td>${e.sequence}</td>
<td>${e.type}</td>
<td>!${outcome(e)}</td>
</tr>`,
          )}</tbody></table></div>`
    }`,
    view,
  );
}
