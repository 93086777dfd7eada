import assert from 'node:assert/strict';
import { existsSync, mkdtempSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { chromium, type Page } from 'playwright-core';
import { ADMIN_TOKEN, createTestContext } from './helpers/context.ts';

// The reference page as a reader sees it: Debian's chromium, headless, on a real server over
// loopback. Nothing may load from another origin (the page must work with no network).

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
// `.ci/run` installs chromium and sets REQUIRE_BROWSER, so there a missing browser fails the test.
const skip =
  !existsSync(CHROMIUM) && !process.env.REQUIRE_BROWSER
    ? `no browser at ${CHROMIUM} (apt-get install chromium; .ci/run does)`
    : false;

const SETTLE_MS = 90_000;

/**
 * Resolves once no request of the page has been in flight for half a second; fails naming the
 * requests still pending. Playwright's own `networkidle` state once never fired in CI, and its
 * time-out named nothing to look at (its maintainers call that state unreliable for tests).
 */
function networkSettled(page: Page): (timeoutMs: number) => Promise<void> {
  const inflight = new Map<object, string>();
  let lastActivity = Date.now();
  page.on('request', (request) => {
    inflight.set(request, request.url());
    lastActivity = Date.now();
  });
  const done = (request: object) => {
    inflight.delete(request);
    lastActivity = Date.now();
  };
  page.on('requestfinished', done);
  page.on('requestfailed', done);
  return async (timeoutMs) => {
    const deadline = Date.now() + timeoutMs;
    while (inflight.size > 0 || Date.now() - lastActivity < 500) {
      if (Date.now() > deadline) {
        assert.fail(`requests pending after ${timeoutMs} ms: ${[...inflight.values()].join(', ')}`);
      }
      await sleep(50);
    }
  };
}

interface Operation {
  tags?: string[];
  summary?: string;
}

describe('the API reference page in Chromium', { skip }, () => {
  it('renders every tag, operation and webhook of the served document, offline and without errors', async () => {
    const ctx = await createTestContext('sqlite');
    const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
    try {
      await ctx.app.listen({ port: 0, host: '127.0.0.1' });
      const origin = `http://127.0.0.1:${(ctx.app.server.address() as AddressInfo).port}`;
      const openapi = await (await fetch(`${origin}/v1/openapi.json`)).json();

      const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
      const problems: string[] = [];
      const settled = networkSettled(page);
      page.on('requestfailed', (request) => problems.push(`failed: ${request.url()}`));
      page.on('response', (response) => {
        if (response.status() >= 400) problems.push(`${response.status()}: ${response.url()}`);
      });
      page.on('request', (request) => {
        if (!request.url().startsWith(origin) && !request.url().startsWith('data:')) {
          problems.push(`another origin: ${request.url()}`);
        }
      });
      page.on('console', (message) => {
        if (message.type() === 'error') problems.push(`console: ${message.text()}`);
      });
      page.on('pageerror', (error) => problems.push(`page error: ${error.message}`));

      // `/`: styled by its own stylesheet, naming the token prefix of this instance; it points to
      // the reference, which loads everything from this server.
      const shots = mkdtempSync(join(tmpdir(), 'tourops-reference-'));
      await page.goto(`${origin}/`);
      const start = await page.innerText('body');
      assert.match(start, /start with tk_test_/);
      assert.doesNotMatch(start, /tk_live_/);
      assert.equal(
        await page.evaluate(
          () => getComputedStyle(document.querySelector('.cards') as Element).display,
        ),
        'grid',
      );
      for (const card of ['Receiving webhooks', 'TypeScript SDK', 'Problem types']) {
        assert.ok(start.includes(card), card);
      }
      await page.screenshot({ path: join(shots, 'start.png'), fullPage: true });
      await page.click('a[href="/docs/"]');
      // Rendered progressively: wait for the document's title and for an example from it, then
      // for the network to settle (every request answered before `problems` is read). Generous
      // time-outs: this runs beside another suite on 2 cores, and once took 30 s to settle.
      for (const expected of [openapi.info.title as string, 'Lisbon and Porto in spring']) {
        await page.waitForFunction((t) => document.body.innerText.includes(t), expected, {
          timeout: SETTLE_MS,
        });
      }
      await settled(SETTLE_MS);
      const text = await page.innerText('body');

      const operations = Object.values(openapi.paths as Record<string, Record<string, Operation>>)
        .flatMap((methods) => Object.values(methods))
        .filter((operation) => operation.summary);
      const tags = new Set(operations.flatMap((operation) => operation.tags ?? []));
      assert.ok(tags.size >= 7, `tags: ${[...tags]}`);
      for (const tag of tags) assert.ok(text.includes(tag), `tag ${tag} shown`);
      for (const operation of operations) {
        assert.ok(text.includes(operation.summary as string), `operation "${operation.summary}"`);
      }
      for (const [type, entry] of Object.entries(
        openapi.webhooks as Record<string, { post: Operation }>,
      )) {
        assert.ok(text.includes(entry.post.summary as string), `webhook ${type}`);
      }
      // Examples from the document, not placeholders generated by the renderer.
      assert.ok(text.includes('Lisbon and Porto in spring'), 'the trip example is shown');
      assert.ok(text.includes('validation-failed'), 'a problem example is shown');
      assert.ok(text.includes('Receiving webhooks'), 'the receiver snippets are shown');
      for (const [language, code] of [
        ['Python', 'from tourops_webhooks import WebhookVerificationError, verify'],
        ['Go', 'event, err := verifier.Verify(body, r.Header)'],
        ['PHP', '(new Verifier($keys))->verify('],
      ]) {
        assert.ok(text.includes(code), `the ${language} receiver is shown`);
      }
      assert.ok(text.includes('TimestampOutsideTolerance'), "the verifiers' errors");
      assert.ok(text.includes('npm install ./dist/tourops-sdk-'), "the SDK's README is shown");
      assert.ok(!text.includes('Generate SDKs'), "Scalar's own toolbar is off");
      // One sidebar group per name: no tag is called like the section Scalar gives the events.
      assert.ok(!tags.has('Webhooks'), 'a tag named Webhooks beside the events');
      // The viewport only: a full-page shot of every operation costs more than the rest of the test.
      await page.screenshot({ path: join(shots, 'docs.png') });
      console.log(`# screenshots in ${shots}`);
      assert.deepEqual(problems, []);

      // The admin API's own reference, there because the admin API is enabled in this context.
      const admin = await (
        await fetch(`${origin}/admin/v1/openapi.json`, {
          headers: { authorization: `Bearer ${ADMIN_TOKEN}` },
        })
      ).json();
      await page.goto(`${origin}/admin/docs/`);
      for (const expected of [admin.info.title as string, 'atlantico-tours']) {
        await page.waitForFunction((t) => document.body.innerText.includes(t), expected, {
          timeout: SETTLE_MS,
        });
      }
      await settled(SETTLE_MS);
      const adminText = await page.innerText('body');
      for (const methods of Object.values(
        admin.paths as Record<string, Record<string, Operation>>,
      )) {
        for (const operation of Object.values(methods)) {
          assert.ok(
            adminText.includes(operation.summary as string),
            `admin "${operation.summary}"`,
          );
        }
      }
      await page.screenshot({ path: join(shots, 'admin-docs.png') });
      assert.deepEqual(problems, []);
    } finally {
      await browser.close();
      await ctx.close();
    }
  });
});

describe('the admin API reference', () => {
  it('does not exist while the admin API is off', async () => {
    const ctx = await createTestContext('sqlite', { env: { ADMIN_API_TOKEN: '' } });
    try {
      for (const url of ['/admin/docs/', '/admin/docs/openapi.json', '/admin/v1/openapi.json']) {
        assert.equal((await ctx.app.inject({ url })).statusCode, 404, url);
      }
      assert.equal((await ctx.app.inject({ url: '/docs/' })).statusCode, 200);
    } finally {
      await ctx.close();
    }
  });
});
