import assert from 'node:assert/strict';
import { existsSync, mkdirSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { AxeBuilder } from '@axe-core/playwright';
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core';
import { startWorker } from '../src/start-worker.ts';
import { BACKENDS, createWebhookTestContext, type TestContext } from './helpers/context.ts';
import { createClient, createTenant, type TenantFixture } from './helpers/fixtures.ts';
import { HttpsReceiver } from './helpers/https-receiver.ts';
import { until } from './helpers/until.ts';

// The webhook portal as an integrator uses it: Debian's chromium, headless, on a real server over
// loopback, a real worker and a real HTTPS receiver. Screenshots land in PORTAL_SCREENSHOTS (or
// a temp dir) to be looked at.

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const skip =
  !existsSync(CHROMIUM) && !process.env.REQUIRE_BROWSER
    ? `no browser at ${CHROMIUM} (apt-get install chromium; .ci/run does)`
    : false;
const SHOTS = process.env.PORTAL_SCREENSHOTS ?? join(tmpdir(), 'portal-screenshots');

/** Tenant-controlled text that would run if it reached the page as markup. */
// No spaces: the URL carries them too, and a URL may not contain spaces.
const SCRIPT = '<script>window.__xss="script"</script>';
const IMG = "\"><img/src=x/onerror=window.__xss='img'>";

for (const backend of BACKENDS) {
  describe(`webhook portal in Chromium (${backend})`, { skip }, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;
    let receiver: HttpsReceiver;
    let worker: ReturnType<typeof startWorker>;
    let browser: Browser;
    let origin: string;
    let failing = true;

    before(async () => {
      mkdirSync(SHOTS, { recursive: true });
      ctx = await createWebhookTestContext(backend, { WEBHOOK_RETRY_SCHEDULE: '20ms' });
      tenant = await createTenant(ctx);
      receiver = await HttpsReceiver.start({
        responder: () =>
          failing ? { status: 500, body: `upstream broke ${SCRIPT}${IMG}` } : { status: 204 },
      });
      worker = startWorker(ctx.runtime, { pollIntervalMs: 50 });
      await ctx.app.listen({ port: 0, host: '127.0.0.1' });
      origin = `http://127.0.0.1:${(ctx.app.server.address() as AddressInfo).port}`;
      browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    });
    after(async () => {
      await browser?.close();
      await worker?.stop();
      await receiver?.close();
      await ctx?.close();
    });

    /** A fresh browser signed in by a new link; it records what a page must never do. */
    async function signIn(
      readOnly = false,
    ): Promise<{ page: Page; context: BrowserContext; problems: string[] }> {
      const made = await ctx.api('POST', '/api/v1/portal/sessions', {
        token: tenant.token,
        body: { readOnly },
      });
      const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      const page = await context.newPage();
      const problems: string[] = [];
      page.on('request', (request) => {
        if (!request.url().startsWith(origin)) problems.push(`another origin: ${request.url()}`);
      });
      page.on('console', (message) => {
        // Errors, and Chromium's warnings about the markup (`[DOM] …`, at any level).
        if (message.type() === 'error' || message.text().startsWith('[DOM]')) {
          problems.push(`console: ${message.text()}`);
        }
      });
      page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));
      page.on('dialog', (dialog) => {
        if (dialog.type() !== 'confirm') problems.push(`dialog: ${dialog.message()}`);
        void dialog.accept();
      });
      await page.goto(origin + new URL(made.json().data.url).pathname);
      await page.getByRole('button', { name: 'Sign in' }).click();
      await page.waitForURL(`${origin}/portal/`);
      return { page, context, problems };
    }

    /**
     * No serious or critical axe-core violation on the page as it is. The markup does not depend
     * on the database, and axe-core is the costliest step: it runs on the first backend only.
     */
    async function accessible(page: Page, what: string): Promise<void> {
      if (backend !== BACKENDS[0]) return;
      const results = await new AxeBuilder({ page }).analyze();
      const bad = results.violations.filter(
        (v) => v.impact === 'serious' || v.impact === 'critical',
      );
      assert.deepEqual(
        bad.map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`),
        [],
        `axe-core on ${what}`,
      );
    }

    /**
     * No box whose content spills out of it (an event name past its cell), at 1280 and 390
     * pixels wide; scrolling tables, code blocks and form controls aside.
     */
    async function nothingSpills(page: Page, what: string): Promise<void> {
      for (const width of [1280, 390]) {
        await page.setViewportSize({ width, height: 900 });
        const spilling = await page.evaluate(() =>
          [...document.querySelectorAll('body *')]
            .filter((el) => !el.closest('.table-wrap, pre, textarea, input, select'))
            .filter((el) => el.clientWidth > 0 && el.scrollWidth > el.clientWidth + 1)
            .filter((el) => getComputedStyle(el).overflowX === 'visible')
            .map((el) => `${el.tagName.toLowerCase()} "${el.textContent?.trim().slice(0, 40)}"`),
        );
        assert.deepEqual(spilling, [], `${what} at ${width} px`);
      }
      await page.setViewportSize({ width: 1280, height: 900 });
    }

    // Pictures to look at, of the first backend only: the pages are the same on the other.
    const shot = async (page: Page, name: string) => {
      if (backend !== BACKENDS[0]) return;
      await page.screenshot({ path: join(SHOTS, `${backend}-${name}.png`), fullPage: true });
    };

    const noScriptRan = async (page: Page) =>
      assert.equal(await page.evaluate(() => (window as { __xss?: string }).__xss), undefined);

    it('shows an endpoint, a failed delivery and its attempts, and redelivers it', async () => {
      const hostileUrl = receiver.url(`/hook?note=${SCRIPT}${IMG}`);
      const created = await ctx.api('POST', '/api/v1/webhooks', {
        token: tenant.token,
        body: { url: hostileUrl, events: ['client.created'] },
      });
      assert.equal(created.statusCode, 201, created.body);
      const id = created.json().data.id;
      const storedUrl = created.json().data.url as string;
      await ctx.api('POST', '/api/v1/clients', {
        token: tenant.token,
        body: { kind: 'individual', displayName: `${SCRIPT}${IMG}` },
      });
      // Both attempts fail: dead-lettered.
      const deliveryId = await until(async () => {
        const list = await ctx.api('GET', `/api/v1/webhooks/${id}/deliveries`, {
          token: tenant.token,
        });
        return list.json().data.find((d: { status: string }) => d.status === 'dead_letter')?.id as
          | string
          | undefined;
      }, 'the delivery dead-lettered');

      const { page, context, problems } = await signIn();
      assert.equal(new URL(page.url()).pathname, '/portal/');
      // The link is spent, and left the address bar.
      await page.getByRole('heading', { name: 'Webhook endpoints' }).waitFor();
      const link = page.getByRole('link', { name: storedUrl });
      assert.equal(await link.count(), 1, 'the endpoint URL is shown as text');
      await noScriptRan(page);
      await accessible(page, 'the endpoint list');
      await shot(page, 'endpoints');

      await link.click();
      await page.getByRole('heading', { name: 'Deliveries', exact: true }).waitFor();
      assert.equal(await page.locator('h1').textContent(), storedUrl);
      // Times: UTC on hover, the browser's zone on the page.
      const firstTime = page.locator('time').first();
      assert.match(String(await firstTime.getAttribute('title')), / UTC$/);
      await accessible(page, 'the endpoint page');
      await shot(page, 'endpoint');

      // Filter: dead letters of client.created.
      await page.getByLabel('Status').selectOption('dead_letter');
      await page.getByLabel('Event type', { exact: true }).selectOption('client.created');
      await page.getByRole('button', { name: 'Filter' }).click();
      await page.waitForURL(/status=dead_letter/);
      await page.locator(`a[href$="/deliveries/${deliveryId}"]`).click();
      await page.getByRole('heading', { name: 'Attempts' }).waitFor();
      assert.equal(await page.getByText('HTTP 500').count(), 2);
      const excerpt = await page.getByLabel('Response body of attempt 2').textContent();
      assert.equal(excerpt, `upstream broke ${SCRIPT}${IMG}`);
      const data = await page.getByLabel('Data of the event').textContent();
      assert.ok(data?.includes(JSON.stringify(`${SCRIPT}${IMG}`)), 'the event field as text');
      await noScriptRan(page);
      await accessible(page, 'the delivery page');
      await shot(page, 'delivery-failed');

      failing = false;
      await page.getByRole('button', { name: 'Redeliver' }).click();
      await page.getByText('Queued again as this new delivery.').waitFor();
      // The redelivery recorded (the worker's record), then shown.
      await until(async () => {
        const list = await ctx.api('GET', `/api/v1/webhooks/${id}/deliveries?status=success`, {
          token: tenant.token,
        });
        return list.json().data.length > 0 ? true : undefined;
      }, 'the redelivery succeeded');
      await page.reload();
      await page.locator('.badge.ok', { hasText: 'success' }).first().waitFor();
      assert.ok(receiver.requests.some((r) => r.method === 'POST'));
      await shot(page, 'delivery-redelivered');

      // The ledger and the catalog.
      await page.goto(`${origin}/portal/endpoints/${id}/events`);
      await page.getByRole('heading', { name: 'Ledger' }).waitFor();
      await page.locator('summary', { hasText: 'data' }).first().click();
      await noScriptRan(page);
      await accessible(page, 'the ledger');
      await shot(page, 'ledger');
      await page.getByRole('link', { name: 'Event catalog' }).click();
      await page.getByRole('heading', { name: 'booking.confirmed' }).waitFor();
      await accessible(page, 'the catalog');

      // On a phone: nothing wider than the screen but the scrollable tables and code blocks.
      await page.setViewportSize({ width: 390, height: 844 });
      await page.goto(`${origin}/portal/endpoints/${id}`);
      const overflow = await page.evaluate(
        () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
      );
      const wide = await page.evaluate(() =>
        [...document.querySelectorAll('main *')]
          .filter((el) => el.getBoundingClientRect().right > document.documentElement.clientWidth)
          .filter((el) => !el.closest('.table-wrap, pre'))
          .map((el) => `${el.tagName.toLowerCase()}.${el.className}#${el.id}`),
      );
      assert.ok(
        overflow <= 0,
        `the page is ${overflow}px wider than the phone: ${wide.join(', ')}`,
      );
      await shot(page, 'endpoint-phone');

      assert.deepEqual(problems, []);
      await context.close();
    });

    it('creates an endpoint showing its key once, sends a test event, and pauses it', async () => {
      const { page, context, problems } = await signIn();
      await page.getByRole('link', { name: 'Add an endpoint' }).first().click();
      await accessible(page, 'the new endpoint form');
      await page.getByLabel(/^URL: HTTPS/).fill(receiver.url('/created'));
      await page.getByLabel('booking.confirmed').check();
      await page.getByRole('button', { name: 'Add endpoint' }).click();
      const key = await page.getByLabel('Signing key').inputValue();
      assert.match(key, /^whsec_/);
      await shot(page, 'created');
      await page.getByRole('link', { name: 'Go to the endpoint' }).click();
      assert.equal(await page.getByText(key).count(), 0, 'the key is not shown again');

      // The sample of the chosen type is shown before sending it.
      await page.getByLabel('Test event type').selectOption('trip.published');
      assert.equal(await page.getByLabel('Sample data of trip.published').isVisible(), true);
      const before = receiver.requests.length;
      await page.getByRole('button', { name: 'Send test event' }).click();
      await page.getByText('Test event sent').waitFor();
      const sent = await until(
        () => receiver.requests.slice(before).find((r) => r.path === '/created'),
        'the test event arrived',
      );
      assert.equal(JSON.parse(sent.body).type, 'trip.published');

      await page.getByRole('button', { name: 'Pause deliveries' }).click();
      await page.getByText('Deliveries are paused').waitFor();
      assert.match(await page.locator('.facts').innerText(), /paused\s+by hand/);
      const enableOnly = page.getByRole('button', { name: 'Enable only', exact: true });
      const heal = page.getByRole('button', { name: 'Enable and recover what was missed' });
      assert.equal(await enableOnly.count(), 1);
      assert.equal(await heal.count(), 1);
      await accessible(page, 'the endpoint page after an action');
      // The pause missed nothing here: enabling and recovering queues nothing, and says so.
      await heal.click();
      await page.getByText('Enabled: the events missed while paused').waitFor();
      assert.equal(await page.getByRole('button', { name: 'Pause deliveries' }).count(), 1);
      assert.deepEqual(problems, []);
      await context.close();
    });

    it('refuses a malformed payload filter as the API does, saves a good one and dry-runs it', async () => {
      const { page, context, problems } = await signIn();
      await page.getByRole('link', { name: 'Add an endpoint' }).first().click();
      const fill = async (filter: string) => {
        await page.getByLabel(/^URL: HTTPS/).fill(receiver.url('/filtered'));
        await page.getByLabel('client.created').check();
        await page.getByLabel(/^Payload filter/).fill(filter);
        await page.getByRole('button', { name: 'Add endpoint' }).click();
      };
      await fill('{"data.kind": {"$in": "company"}}');
      await page.getByText('Please check the form').waitFor();
      assert.match(
        await page.locator('main').innerText(),
        /filter\.data\.kind\.\$in: must be a non-empty array/,
      );
      await shot(page, 'filter-refused');
      await page.goBack();
      await fill('{"data.kind": "company"}');
      await page.getByRole('link', { name: 'Go to the endpoint' }).click();
      const id = new URL(page.url()).pathname.split('/').at(-1) as string;

      for (const [kind, displayName] of [
        ['company', 'Acme'],
        ['individual', 'Ada'],
        ['company', 'Globex'],
      ]) {
        await createClient(ctx, tenant, { kind, displayName });
      }
      await page.reload();
      await page.getByLabel('A filter to try').fill('{"data.displayName": {"$prefix": "G"}}');
      await page.getByRole('button', { name: 'Try on the last 50 events' }).click();
      await page.getByText('It would take 1 of the last 2 events.').waitFor();
      assert.equal(new URL(page.url()).pathname, `/portal/endpoints/${id}/filter-test`);
      assert.deepEqual(await page.locator('tbody td:nth-child(3)').allInnerTexts(), [
        'skipped',
        'taken',
      ]);
      await accessible(page, 'the filter dry run');
      await shot(page, 'filter-dry-run');
      // The refused form's page is a 422, which the browser logs; nothing else may show up.
      assert.deepEqual(
        problems.filter((p) => !p.includes('status of 422')),
        [],
      );
      await context.close();
    });

    it('edits a transformation and tries it on the last events, read-only too', async () => {
      const made = await ctx.api('POST', '/api/v1/webhooks', {
        token: tenant.token,
        body: { url: receiver.url('/transformed'), events: ['client.created'] },
      });
      const id = made.json().data.id as string;
      for (const [kind, displayName] of [
        ['company', 'Acme'],
        ['individual', 'Ada'],
      ]) {
        await createClient(ctx, tenant, { kind, displayName });
      }
      const { page, context, problems } = await signIn();
      await page.goto(`${origin}/portal/endpoints/${id}`);
      // Saved through the edit form, as the API takes it.
      await page.getByText('Transformation and retries').click();
      await page
        .getByLabel(/^Transformation: JavaScript/)
        .fill(
          'function handler(webhook) {\n  webhook.payload = { text: webhook.payload.data.displayName };\n  return webhook;\n}',
        );
      await page.getByLabel(/^Waits between attempts/).fill('30s, 5m');
      await page.getByRole('button', { name: 'Save' }).click();
      await page.getByText('Saved.').waitFor();
      assert.match(await page.locator('main').innerText(), /Retries: after 30s, 5m\./);
      await context.close();

      const reader = await signIn(true);
      await reader.page.goto(`${origin}/portal/endpoints/${id}`);
      await reader.page
        .getByLabel(/^Code to try/)
        .fill(
          "function handler(webhook) {\n  if (webhook.payload.data.kind === 'individual') return { ...webhook, cancel: true };\n  webhook.payload = { text: 'New client: ' + webhook.payload.data.displayName };\n  webhook.headers['x-channel'] = 'sales';\n  return webhook;\n}",
        );
      await reader.page.getByRole('button', { name: 'Try the code on the last 50 events' }).click();
      await reader.page
        .getByText('Of the last 2 events, 1 would be sent, 1 cancelled, 0 would fail.')
        .waitFor();
      assert.match(await reader.page.locator('tbody').innerText(), /"text": "New client: Acme"/);
      await accessible(reader.page, 'the transformation dry run');
      await nothingSpills(reader.page, 'the transformation dry run');
      await shot(reader.page, 'transformation-dry-run');
      assert.deepEqual(problems, []);
      assert.deepEqual(reader.problems, []);
      await reader.context.close();
      await ctx.api('DELETE', `/api/v1/webhooks/${id}`, { token: tenant.token });
    });

    it('sets receiver authentication in write-only fields; an edit keeps the secrets unseen', async () => {
      const { page, context, problems } = await signIn();
      const [apiKey, password] = ['k-chromium-93b1d0', 'pw-chromium-6a2f55'];
      await page.getByRole('link', { name: 'Add an endpoint' }).first().click();
      await page.getByLabel(/^URL: HTTPS/).fill(receiver.url('/gated'));
      await page.getByLabel('booking.confirmed').check();
      await page.getByText('Receiver authentication').click();
      await page.getByLabel(/^Extra headers/).fill(`X-Api-Key: ${apiKey}`);
      await page.getByLabel('Authentication', { exact: true }).selectOption('basic');
      await page.getByLabel('Username', { exact: true }).fill('ops');
      await page.getByLabel('Password', { exact: true }).fill(password);
      await accessible(page, 'the new endpoint form with receiver authentication');
      await nothingSpills(page, 'the new endpoint form');
      await shot(page, 'receiver-auth-new');
      await page.getByRole('button', { name: 'Add endpoint' }).click();
      await page.getByRole('link', { name: 'Go to the endpoint' }).click();
      const path = new URL(page.url()).pathname;

      // The edit form shows the names and the scheme, never a secret, and saving it keeps them.
      assert.equal(await page.getByLabel(/^Extra headers/).inputValue(), 'X-Api-Key: ***');
      assert.equal(await page.getByLabel('Password', { exact: true }).inputValue(), '');
      const html = await page.content();
      for (const secret of [apiKey, password]) assert.equal(html.includes(secret), false, secret);
      await nothingSpills(page, 'the endpoint page');
      await shot(page, 'receiver-auth-endpoint');
      await page.getByLabel(/^URL \(a broker password/).fill(receiver.url('/gated-2'));
      await page.getByRole('button', { name: 'Save' }).click();
      await page.getByText('Saved.').waitFor();

      const before = receiver.requests.length;
      await page.getByRole('button', { name: 'Send test event' }).click();
      await page.getByText('Test event sent').waitFor();
      const sent = await until(
        () => receiver.requests.slice(before).find((r) => r.path === '/gated-2'),
        'the test event arrived',
      );
      assert.equal(sent.headers['x-api-key'], apiKey);
      const basic = `Basic ${Buffer.from(`ops:${password}`).toString('base64')}`;
      assert.equal(sent.headers.authorization, basic);
      await ctx.api('DELETE', `/api/v1/webhooks/${path.split('/').at(-1)}`, {
        token: tenant.token,
      });
      assert.deepEqual(problems, []);
      await context.close();
    });

    it('a read-only session sees everything and cannot change anything, even by a direct POST', async () => {
      const list = await ctx.api('GET', '/api/v1/webhooks', { token: tenant.token });
      const subscription = list.json().data.find((s: { active: boolean }) => s.active);
      const { page, context } = await signIn(true);
      await page.getByText('Read-only', { exact: true }).waitFor();
      assert.equal(await page.getByRole('link', { name: 'Add an endpoint' }).count(), 0);
      await page.goto(`${origin}/portal/endpoints/${subscription.id}`);
      assert.equal(await page.getByRole('button', { name: 'Pause deliveries' }).count(), 0);
      assert.equal(await page.getByRole('button', { name: 'Send test event' }).count(), 0);
      await shot(page, 'read-only');
      // The page's own CSRF token, posted by hand: the server refuses.
      const status = await page.evaluate(async (path) => {
        const token = (document.querySelector('input[name="_csrf"]') as HTMLInputElement).value;
        const response = await fetch(path, {
          method: 'POST',
          headers: { 'content-type': 'application/x-www-form-urlencoded' },
          body: new URLSearchParams({ _csrf: token }).toString(),
        });
        return response.status;
      }, `/portal/endpoints/${subscription.id}/pause`);
      assert.equal(status, 403);
      const after = await ctx.api('GET', '/api/v1/webhooks', { token: tenant.token });
      assert.equal(
        after.json().data.find((s: { id: string }) => s.id === subscription.id).active,
        true,
      );
      await context.close();
    });
  });
}
