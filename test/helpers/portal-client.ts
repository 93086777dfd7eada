import assert from 'node:assert/strict';
import type { LightMyRequestResponse } from 'fastify';
import type { TestContext } from './context.ts';

/** A browser's cookie jar and form tokens, enough to drive the portal through inject. */
export class PortalClient {
  private readonly cookies = new Map<string, string>();
  constructor(private readonly ctx: TestContext) {}

  private remember(response: LightMyRequestResponse): void {
    for (const cookie of response.cookies as Array<{ name: string; value: string }>) {
      if (cookie.value === '') this.cookies.delete(cookie.name);
      else this.cookies.set(cookie.name, cookie.value);
    }
  }

  async get(url: string): Promise<LightMyRequestResponse> {
    const response = await this.ctx.app.inject({ method: 'GET', url, headers: this.header() });
    this.remember(response);
    return response;
  }

  async post(
    url: string,
    form: Record<string, string> | Array<[string, string]>,
  ): Promise<LightMyRequestResponse> {
    const response = await this.ctx.app.inject({
      method: 'POST',
      url,
      headers: { ...this.header(), 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams(form).toString(),
    });
    this.remember(response);
    return response;
  }

  /** A person's visit of a portal link: its page, then the page's button. */
  async signIn(path: string): Promise<LightMyRequestResponse> {
    const page = await this.get(path);
    const match = /name="_csrf" value="([^"]+)"/.exec(page.body);
    if (page.statusCode !== 200 || !match) return page;
    return this.post(path, { _csrf: match[1] });
  }

  /** The CSRF token of a page's forms. */
  async csrf(page = '/portal/'): Promise<string> {
    const body = (await this.get(page)).body;
    const match = /name="_csrf" value="([^"]+)"/.exec(body);
    assert.ok(match, `no CSRF token on ${page}`);
    return match[1];
  }

  /** The session's cookies as a `Cookie` header, for a client other than inject (the fuzzer). */
  cookieHeader(): string {
    return this.header().cookie ?? '';
  }

  private header(): Record<string, string> {
    return this.cookies.size === 0
      ? {}
      : { cookie: [...this.cookies].map(([name, value]) => `${name}=${value}`).join('; ') };
  }
}

/** The path of a portal link (its origin is PUBLIC_BASE_URL, not the test server). */
export const pathOf = (url: string) => new URL(url).pathname;
