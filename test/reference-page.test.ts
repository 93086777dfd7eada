import assert from 'node:assert/strict';
import { existsSync, mkdtempSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { chromium } from 'playwright-core';
import { createTestContext } from './helpers/context.ts';

// The reference page as a reader sees it: Debian's chromium, headless, on a real server over
// loopback. Nothing may load from another origin (the page must work with no network).

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
// `.ci/run` installs chromium and sets REQUIRE_BROWSER, so there a missing browser fails the test.
const skip =
  !existsSync(CHROMIUM) && !process.env.REQUIRE_BROWSER
    ? `no browser at ${CHROMIUM} (apt-get install chromium; .ci/run does)`
    : false;

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

      // `/` points to the reference, which loads everything from this server.
      await page.goto(`${origin}/`);
      await page.click('a[href="/docs/"]');
      await page.waitForLoadState('networkidle');
      await page.waitForFunction(
        (title) => document.body.innerText.includes(title),
        openapi.info.title as string,
      );
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
      const shots = mkdtempSync(join(tmpdir(), 'tourops-reference-'));
      await page.screenshot({ path: join(shots, 'docs.png') });
      await page.screenshot({ path: join(shots, 'docs-full.png'), fullPage: true });
      console.log(`# screenshots in ${shots}`);
      assert.deepEqual(problems, []);
    } finally {
      await browser.close();
      await ctx.close();
    }
  });
});
