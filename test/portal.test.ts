import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BACKENDS, createWebhookTestContext, type TestContext } from './helpers/context.ts';
import { deliveryRows } from './helpers/delivery-rows.ts';
import { createClient, createTenant, mintToken, type TenantFixture } from './helpers/fixtures.ts';
import { testClientPki } from './helpers/https-receiver.ts';
import { PortalClient, pathOf } from './helpers/portal-client.ts';

// The webhook portal over HTTP (the browser's view is in portal-browser.test.ts): links, the
// session cookie, what ends a session, CSRF, read-only sessions, tenants kept apart.

const HOOK = 'https://127.0.0.1:9/hook';

for (const backend of BACKENDS) {
  describe(`webhook portal over HTTP (${backend})`, () => {
    let ctx: TestContext;
    let tenant: TenantFixture;
    let other: TenantFixture;

    before(async () => {
      ctx = await createWebhookTestContext(backend);
      tenant = await createTenant(ctx);
      other = await createTenant(ctx);
    });
    after(() => ctx.close());

    const link = async (owner: TenantFixture, body?: unknown): Promise<string> => {
      const response = await ctx.api('POST', '/api/v1/portal/sessions', {
        token: owner.token,
        body,
      });
      assert.equal(response.statusCode, 201, response.body);
      return response.json().data.url;
    };
    const signedIn = async (owner: TenantFixture, body?: unknown) => {
      const client = new PortalClient(ctx);
      const landed = await client.signIn(pathOf(await link(owner, body)));
      assert.equal(landed.statusCode, 303);
      return client;
    };
    // No worker runs here, and no event of the type is made: nothing is sent to it.
    const subscribe = async (owner: TenantFixture) => {
      const created = await ctx.api('POST', '/api/v1/webhooks', {
        token: owner.token,
        body: { url: HOOK, events: ['client.created'] },
      });
      assert.equal(created.statusCode, 201, created.body);
      return created.json().data.id as string;
    };

    it('answers 201 with a one-time link valid 10 minutes, for webhooks:write only', async () => {
      const before = Date.now();
      const response = await ctx.api('POST', '/api/v1/portal/sessions', { token: tenant.token });
      assert.equal(response.statusCode, 201);
      const { url, expiresAt } = response.json().data;
      assert.match(url, /^http:\/\/api\.test\/portal\/session\/[A-Za-z0-9_-]{43}$/);
      const ttl = Date.parse(expiresAt) - before;
      assert.ok(ttl > 9.9 * 60_000 && ttl <= 10 * 60_000 + 1_000, `ttl ${ttl}`);

      const reader = await mintToken(ctx, tenant.id, ['webhooks:read']);
      const refused = await ctx.api('POST', '/api/v1/portal/sessions', { token: reader.token });
      assert.equal(refused.statusCode, 403);
      assert.equal(refused.json().type.endsWith('/scope-required'), true);

      const bad = await ctx.api('POST', '/api/v1/portal/sessions', {
        token: tenant.token,
        body: { readOnly: 'yes' },
      });
      assert.equal(bad.statusCode, 422);
      assert.match(String(bad.headers['content-type']), /^application\/problem\+json/);
    });

    it('lets the admin API make links; an unknown tenant is 404, an inactive one 409', async () => {
      const made = await ctx.adminRequest(
        'POST',
        `/admin/v1/tenants/${tenant.id}/portal-sessions`,
        {
          readOnly: true,
        },
      );
      assert.equal(made.statusCode, 201, made.body);
      const client = new PortalClient(ctx);
      assert.equal((await client.signIn(pathOf(made.json().data.url))).statusCode, 303);
      assert.match((await client.get('/portal/')).body, /Read-only/);

      const unknown = await ctx.adminRequest(
        'POST',
        '/admin/v1/tenants/ten_unknown/portal-sessions',
      );
      assert.equal(unknown.statusCode, 404);

      const idle = await createTenant(ctx);
      await ctx.admin('PATCH', `/admin/v1/tenants/${idle.id}`, { active: false });
      const refused = await ctx.adminRequest(
        'POST',
        `/admin/v1/tenants/${idle.id}/portal-sessions`,
      );
      assert.equal(refused.statusCode, 409);
      assert.equal(refused.json().code, 'tenant_inactive');
    });

    it('exchanges a link once for an HttpOnly, SameSite=Strict session cookie of 1 hour', async () => {
      const path = pathOf(await link(tenant));
      const client = new PortalClient(ctx);
      const first = await client.signIn(path);
      assert.equal(first.statusCode, 303);
      assert.equal(first.headers.location, '/portal/');
      const cookie = (first.cookies as Array<Record<string, unknown>>).find(
        (c) => c.name === 'tourops_portal',
      );
      assert.ok(cookie);
      assert.equal(cookie.httpOnly, true);
      assert.equal(cookie.sameSite, 'Strict');
      assert.equal(cookie.path, '/portal');
      assert.equal(cookie.maxAge, 3600);
      // Served over plain HTTP here: Secure would stop the browser from sending it back.
      assert.equal(cookie.secure, undefined);
      const page = await client.get('/portal/');
      assert.equal(page.statusCode, 200);
      assert.match(String(page.headers['content-type']), /^text\/html/);

      // Used: a plain page saying so, to anyone (the same browser too).
      const again = await client.get(path);
      assert.equal(again.statusCode, 410);
      assert.match(again.body, /no longer works/);
      assert.equal(again.headers['set-cookie'], undefined);
      assert.equal((await new PortalClient(ctx).get(path)).statusCode, 410);
      // A link that never existed reads the same.
      assert.equal((await client.get(`/portal/session/${'A'.repeat(43)}`)).statusCode, 410);
    });

    it("uses a link only by its button: HEAD and a scanner's GET leave it for the person", async () => {
      const path = pathOf(await link(tenant));
      const head = await ctx.app.inject({ method: 'HEAD', url: path });
      assert.equal(head.statusCode, 200);
      assert.equal(
        head.headers['set-cookie'] === undefined ||
          !/tourops_portal=/.test(String(head.headers['set-cookie'])),
        true,
      );
      const scanner = new PortalClient(ctx);
      const preview = await scanner.get(path);
      assert.equal(preview.statusCode, 200);
      assert.match(
        preview.body,
        /<form method="post" action="\/portal\/session\/[A-Za-z0-9_-]{43}">/,
      );
      assert.equal(
        (preview.cookies as Array<{ name: string }>).some((c) => c.name === 'tourops_portal'),
        false,
      );
      assert.equal((await scanner.get('/portal/')).statusCode, 401, 'a visit signs no one in');
      // The button without the page's CSRF token (another site's form) signs no one in either.
      const forged = await new PortalClient(ctx).post(path, {});
      assert.equal(forged.statusCode, 403);

      const person = new PortalClient(ctx);
      assert.equal((await person.signIn(path)).statusCode, 303);
      assert.equal((await person.get('/portal/')).statusCode, 200);
      // Used now: every later visit, the scanner's included, is told so, and nobody else gets in.
      assert.equal((await ctx.app.inject({ method: 'HEAD', url: path })).statusCode, 410);
      assert.equal((await scanner.signIn(path)).statusCode, 410);
      assert.equal((await scanner.get('/portal/')).statusCode, 401);
    });

    it('refuses an expired link', async () => {
      const path = pathOf(await link(tenant));
      await ctx.runtime.database.db
        .updateTable('portalSessions')
        .set({ linkExpiresAt: new Date(Date.now() - 1000).toISOString() })
        .where('tenantId', '=', tenant.id)
        .where('sessionHash', 'is', null)
        .execute();
      assert.equal((await new PortalClient(ctx).get(path)).statusCode, 410);
    });

    it('signs out no one else, and every page needs a session', async () => {
      const anonymous = await ctx.app.inject({ method: 'GET', url: '/portal/' });
      assert.equal(anonymous.statusCode, 401);
      assert.match(anonymous.body, /Not signed in/);
      const forged = await ctx.app.inject({
        method: 'GET',
        url: '/portal/catalog',
        headers: { cookie: `tourops_portal=${'B'.repeat(43)}` },
      });
      assert.equal(forged.statusCode, 401);

      const client = await signedIn(tenant);
      const token = await client.csrf();
      assert.equal((await client.post('/portal/sign-out', { _csrf: token })).statusCode, 200);
      assert.equal((await client.get('/portal/')).statusCode, 401);
    });

    it('answers a path the router cannot read with its own not-found page, as a person sees it', async () => {
      const client = await signedIn(tenant);
      for (const url of [
        `/portal/endpoints/${'A'.repeat(300)}`,
        '/portal/endpoints/%E0%A4%A',
        '/portal/nowhere',
      ]) {
        const page = await client.get(url);
        assert.equal(page.statusCode, 404, url);
        assert.match(String(page.headers['content-type']), /^text\/html/, url);
        assert.match(page.body, /There is no such page in the portal/, url);
      }
    });

    it('ends the sessions of a revoked token and of an inactive tenant', async () => {
      const owner = await createTenant(ctx);
      const byToken = await signedIn(owner);
      const spare = await mintToken(ctx, owner.id, ['*']);
      const bySpare = new PortalClient(ctx);
      const made = await ctx.api('POST', '/api/v1/portal/sessions', { token: spare.token });
      await bySpare.signIn(pathOf(made.json().data.url));
      assert.equal((await bySpare.get('/portal/')).statusCode, 200);

      await ctx.admin('POST', `/admin/v1/tokens/${spare.id}/revoke`);
      assert.equal((await bySpare.get('/portal/')).statusCode, 401);
      assert.equal((await byToken.get('/portal/')).statusCode, 200, 'another token: still in');

      await ctx.admin('PATCH', `/admin/v1/tenants/${owner.id}`, { active: false });
      assert.equal((await byToken.get('/portal/')).statusCode, 401);
    });

    it('refuses a change without its CSRF token, and every change of a read-only session', async () => {
      const id = await subscribe(tenant);
      const client = await signedIn(tenant);
      await client.get('/portal/');
      const noToken = await client.post(`/portal/endpoints/${id}/pause`, {});
      assert.equal(noToken.statusCode, 403);
      assert.match(noToken.body, /form has expired/);
      const wrong = await client.post(`/portal/endpoints/${id}/pause`, { _csrf: 'x'.repeat(40) });
      assert.equal(wrong.statusCode, 403);
      assert.equal((await ctx.runtime.services.webhooks.get(tenant.id, id)).active, true);

      const reader = await signedIn(tenant, { readOnly: true });
      const page = (await reader.get(`/portal/endpoints/${id}`)).body;
      assert.doesNotMatch(page, /action="[^"]*\/(pause|rotate-key|delete|test|recover)"/);
      const token = await reader.csrf(`/portal/endpoints/${id}`);
      for (const action of ['pause', 'delete', 'rotate-key', 'test', 'recover']) {
        const refused = await reader.post(`/portal/endpoints/${id}/${action}`, {
          _csrf: token,
          eventType: 'client.created',
          since: '2020-01-01T00:00',
        });
        assert.equal(refused.statusCode, 403, action);
        assert.match(refused.body, /Read-only session/);
      }
      const edit = await reader.post(`/portal/endpoints/${id}`, {
        _csrf: token,
        url: 'https://portal.test/changed',
        events: 'client.created',
      });
      assert.equal(edit.statusCode, 403);
      const create = await reader.post('/portal/endpoints', {
        _csrf: token,
        url: 'https://portal.test/new',
        events: 'client.created',
      });
      assert.equal(create.statusCode, 403);
      const after = await ctx.runtime.services.webhooks.get(tenant.id, id);
      assert.equal(after.active, true);
      assert.equal(after.url, HOOK);
      assert.equal((await ctx.runtime.services.webhooks.list(tenant.id)).length >= 1, true);
      const deliveries = await ctx.runtime.services.deliveries.listDeliveries(tenant.id, id, {});
      assert.equal(deliveries.data.length, 0, 'no test event was sent');
      // Signing out is the one thing a read-only session may post.
      assert.equal((await reader.post('/portal/sign-out', { _csrf: token })).statusCode, 200);
    });

    it("answers 404 for another tenant's endpoints and deliveries, and changes nothing", async () => {
      const theirs = await subscribe(other);
      const client = await signedIn(tenant);
      for (const path of [
        `/portal/endpoints/${theirs}`,
        `/portal/endpoints/${theirs}/events`,
        `/portal/endpoints/${theirs}/deliveries/dlv_01JD000000000000000000000`,
      ]) {
        const response = await client.get(path);
        assert.equal(response.statusCode, 404, path);
        assert.match(String(response.headers['content-type']), /^text\/html/);
      }
      const token = await client.csrf();
      const pause = await client.post(`/portal/endpoints/${theirs}/pause`, { _csrf: token });
      assert.equal(pause.statusCode, 404);
      assert.equal((await ctx.runtime.services.webhooks.get(other.id, theirs)).active, true);
    });

    it('acts once per form: a double submit of one rendered form pauses once', async () => {
      const id = await subscribe(tenant);
      const client = await signedIn(tenant);
      const page = (await client.get(`/portal/endpoints/${id}`)).body;
      const form =
        /action="\/portal\/endpoints\/[^"]+\/pause"[^>]*>.*?name="_csrf" value="([^"]+)".*?name="idempotencyKey" value="([^"]+)"/s.exec(
          page,
        );
      assert.ok(form, 'a pause form with its key');
      const fields = { _csrf: form[1], idempotencyKey: form[2] };
      const first = await client.post(`/portal/endpoints/${id}/pause`, fields);
      assert.equal(first.statusCode, 303);
      await ctx.api('PATCH', `/api/v1/webhooks/${id}`, {
        token: tenant.token,
        body: { active: true },
      });
      // The same form again: replayed, so the endpoint re-enabled in between stays enabled.
      const second = await client.post(`/portal/endpoints/${id}/pause`, fields);
      assert.equal(second.statusCode, 303);
      assert.equal((await ctx.runtime.services.webhooks.get(tenant.id, id)).active, true);
    });

    it('serves pages with a CSP without unsafe-inline, no-store, and a 422 page for a bad form', async () => {
      const client = await signedIn(tenant);
      const page = await client.get('/portal/catalog');
      const csp = String(page.headers['content-security-policy']);
      assert.match(csp, /script-src 'self'/);
      assert.match(csp, /style-src 'self'/);
      assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval|https:|\*/);
      assert.equal(page.headers['cache-control'], 'no-store');
      assert.equal(page.headers['referrer-policy'], 'no-referrer');

      const token = await client.csrf('/portal/endpoints/new');
      const bad = await client.post('/portal/endpoints', {
        _csrf: token,
        url: 'http://insecure.test/hook',
      });
      assert.equal(bad.statusCode, 422);
      assert.match(bad.body, /<code>events<\/code>/);
      assert.equal(
        (await ctx.runtime.services.webhooks.list(tenant.id)).some((s) =>
          s.url.startsWith('http:'),
        ),
        false,
      );
    });

    it("shows when a pending delivery is tried next: its own time, or the end of the endpoint's hold", async () => {
      const id = await subscribe(tenant);
      await ctx.runtime.services.deliveries.fireTest(tenant.id, {
        subscriptionId: id,
        eventType: 'client.created',
      });
      const client = await signedIn(tenant);
      const [delivery] = (
        await ctx.runtime.services.deliveries.listDeliveries(tenant.id, id, { limit: 1 })
      ).data;
      assert.equal(delivery.status, 'pending');
      const cell = (body: string) => /Next attempt<\/dt><dd>(.*?)<\/dd>/s.exec(body)?.[1] ?? '';
      const deliveryPath = `/portal/endpoints/${id}/deliveries/${delivery.id}`;
      assert.match(
        cell((await client.get(deliveryPath)).body),
        new RegExp(`datetime="${delivery.nextAttemptAt}"`),
      );

      // The endpoint answered 429 with Retry-After: held for 40 minutes, the delivery with it.
      const heldUntil = new Date(Date.now() + 40 * 60_000).toISOString();
      await ctx.runtime.database.db
        .updateTable('webhookSubscriptions')
        .set({ heldUntil })
        .where('id', '=', id)
        .execute();
      const endpoint = (await client.get(`/portal/endpoints/${id}`)).body;
      const row =
        new RegExp(`<tr>\\s*<td><a href="[^"]*${delivery.id}">.*?</tr>`, 's').exec(endpoint)?.[0] ??
        '';
      assert.match(
        row,
        new RegExp(`datetime="${heldUntil}".*held by the endpoint's Retry-After`, 's'),
      );
      assert.match(
        cell((await client.get(deliveryPath)).body),
        new RegExp(`datetime="${heldUntil}"`),
      );

      // Paused: nothing goes until it is enabled, whatever the times say.
      await ctx.runtime.services.webhooks.update(tenant.id, id, { active: false });
      assert.match(cell((await client.get(deliveryPath)).body), /when the endpoint is enabled/);
    });

    it('enables a paused endpoint and recovers what it missed, in one action', async () => {
      const id = await subscribe(tenant);
      await ctx.runtime.services.webhooks.update(tenant.id, id, { active: false });
      for (const displayName of ['Missed A', 'Missed B']) {
        await ctx.api('POST', '/api/v1/clients', {
          token: tenant.token,
          body: { kind: 'individual', displayName },
        });
      }
      const client = await signedIn(tenant);
      const page = (await client.get(`/portal/endpoints/${id}`)).body;
      assert.match(page, /paused<\/span> <span class="muted">by hand/);
      const form =
        /<form method="post" action="([^"]*enable-and-recover)"[^>]*>.*?name="_csrf" value="([^"]+)".*?name="idempotencyKey" value="([^"]+)"/s.exec(
          page,
        );
      assert.ok(form, 'the action is offered on a paused endpoint');
      const done = await client.post(form[1], { _csrf: form[2], idempotencyKey: form[3] });
      assert.equal(done.statusCode, 303, done.body);
      const shown = await ctx.runtime.services.webhooks.get(tenant.id, id);
      assert.equal(shown.active, true);
      assert.equal(shown.pauseReason, null);
      const queued = await deliveryRows(ctx.runtime.database.db)
        .select(['sequence', 'status'])
        .where('subscriptionId', '=', id)
        .orderBy('sequence')
        .execute();
      assert.deepEqual(queued, [
        { sequence: 1, status: 'pending' },
        { sequence: 2, status: 'pending' },
      ]);
      // Not paused any more: the same action is refused, nothing queued twice.
      const again = await client.post(form[1], {
        _csrf: form[2],
        idempotencyKey: crypto.randomUUID(),
      });
      assert.equal(again.statusCode, 409);
    });

    it('judges every form by the API body schema, strictly: one 422 naming each field, no change', async () => {
      const id = await subscribe(tenant);
      const client = await signedIn(tenant);
      const token = await client.csrf(`/portal/endpoints/${id}`);
      const stored = () => ctx.runtime.services.webhooks.get(tenant.id, id);
      const count = async () => (await ctx.runtime.services.webhooks.list(tenant.id)).length;
      const before = { subscription: await stored(), count: await count() };
      /** Posts `fields` with a fresh key; the fields the 422 page names. */
      const refused = async (path: string, fields: Array<[string, string]>) => {
        const answer = await client.post(path, [
          ['_csrf', token],
          ['idempotencyKey', crypto.randomUUID()],
          ...fields,
        ]);
        assert.equal(answer.statusCode, 422, `${path}: ${answer.body.slice(0, 300)}`);
        return [...answer.body.matchAll(/<li><code>([^<]+)<\/code>/g)].map((m) => m[1]).sort();
      };
      const subscriptionForm: Array<[string, string]> = [
        ['url', 'https://portal.test/hook'],
        ['events', 'client.created'],
        ['ordering', 'none'],
      ];
      const badFields: Array<[string, string]> = [
        ['color', 'red'],
        ['standardWebhooks', 'maybe'],
        ['maxConcurrency', '1e3'],
        ['maxPerSecond', '2.5'],
      ];
      const named = ['color', 'maxConcurrency', 'maxPerSecond', 'standardWebhooks'];
      assert.deepEqual(
        await refused('/portal/endpoints', [...subscriptionForm, ...badFields]),
        named,
      );
      assert.deepEqual(
        await refused(`/portal/endpoints/${id}`, [...subscriptionForm, ...badFields]),
        named,
      );
      for (const value of ['1000', '0x10', ' 5', 'abc', '16.0']) {
        const fields = await refused(`/portal/endpoints/${id}`, [
          ...subscriptionForm,
          ['maxConcurrency', value],
        ]);
        assert.deepEqual(fields, ['maxConcurrency'], value);
      }
      assert.deepEqual(
        await refused(`/portal/endpoints/${id}`, [
          ...subscriptionForm,
          ['events', 'booking.bogus'],
        ]),
        ['events.1'],
      );
      // Every field is held to its API twin's rule, on both backends alike: the idempotency key
      // as the Idempotency-Key header, a NUL or a number past the double range as in a body.
      const heldToTheApi = async (fields: Array<[string, string]>, key: string) => {
        const answer = await client.post(`/portal/endpoints/${id}`, [
          ['_csrf', token],
          ['idempotencyKey', key],
          ['events', 'client.created'],
          ...(fields.some(([name]) => name === 'url') ? [] : [['url', before.subscription.url]]),
          ...fields,
        ] as Array<[string, string]>);
        assert.equal(answer.statusCode, 422, answer.body.slice(0, 300));
        return [...answer.body.matchAll(/<li><code>([^<]+)<\/code>/g)].map((m) => m[1]).sort();
      };
      const fresh = crypto.randomUUID();
      assert.deepEqual(await heldToTheApi([], 'a\u0000b'), ['idempotencyKey']);
      assert.deepEqual(await heldToTheApi([], 'k'.repeat(256)), ['idempotencyKey']);
      assert.deepEqual(await heldToTheApi([], 'caf\u00e9'), ['idempotencyKey']);
      assert.deepEqual(await heldToTheApi([['url', 'https://a\u0000b.test/']], fresh), ['url']);
      assert.deepEqual(
        await heldToTheApi([['filter', '{"data.amountCents": {"$lt": 1e309}}']], fresh),
        ['filter.data.amountCents.$lt'],
      );
      // A key of 255 characters, the API's longest, is taken.
      const longest = await client.post(`/portal/endpoints/${id}`, [
        ['_csrf', token],
        ['idempotencyKey', 'k'.repeat(255)],
        ['events', 'client.created'],
        ['url', before.subscription.url],
      ]);
      assert.ok(longest.statusCode < 400, `${longest.statusCode} ${longest.body.slice(0, 300)}`);

      // Names an object already has (its prototype's) are unknown fields like any other, on every
      // form: none may slip past as the object's own.
      for (const name of [
        '__proto__',
        'constructor',
        'toString',
        'hasOwnProperty',
        '__lookupGetter__',
      ]) {
        for (const [path, form] of [
          ['/portal/endpoints', subscriptionForm],
          [`/portal/endpoints/${id}`, subscriptionForm],
          [
            `/portal/endpoints/${id}/recover`,
            [
              ['since', '2026-02-28T10:00'],
              ['tzOffset', '0'],
            ],
          ],
          [`/portal/endpoints/${id}/test`, [['eventType', 'client.created']]],
          [`/portal/endpoints/${id}/pause`, []],
        ] as Array<[string, Array<[string, string]>]>) {
          assert.deepEqual(await refused(path, [...form, [name, '1']]), [name], `${path} ${name}`);
        }
      }
      // Impossible or malformed times are refused, not rolled over to another day.
      for (const since of [
        '2026-02-31T00:00',
        '2026-04-31T10:00',
        '2026-03-01T24:00',
        '2026-3-1T10:00',
        'yesterday',
      ]) {
        assert.deepEqual(
          await refused(`/portal/endpoints/${id}/recover`, [
            ['since', since],
            ['tzOffset', '0'],
          ]),
          ['since'],
          since,
        );
      }
      assert.deepEqual(
        await refused(`/portal/endpoints/${id}/recover`, [
          ['since', '2026-02-28T10:00'],
          ['tzOffset', '0'],
          ['until', 'soon'],
          ['extra', '1'],
        ]),
        ['extra', 'until'],
      );
      assert.deepEqual(
        await refused(`/portal/endpoints/${id}/test`, [['eventType', 'booking.bogus']]),
        ['eventType'],
      );
      assert.deepEqual(
        await refused(`/portal/endpoints/${id}/test`, [
          ['eventType', 'client.created'],
          ['subscription', 'x'],
        ]),
        ['subscription'],
      );
      for (const action of ['pause', 'enable', 'delete', 'rotate-key']) {
        assert.deepEqual(
          await refused(`/portal/endpoints/${id}/${action}`, [['active', 'true']]),
          ['active'],
          action,
        );
      }
      assert.deepEqual(await stored(), before.subscription);
      assert.equal(await count(), before.count);
      const recovered = await deliveryRows(ctx.runtime.database.db)
        .select('id')
        .where('subscriptionId', '=', id)
        .execute();
      assert.equal(recovered.length, 0, 'no test fired, nothing recovered');
    });

    it('sets a payload filter as the API does, refuses what it refuses, and dry-runs it read-only', async () => {
      const owner = await createTenant(ctx);
      const client = await signedIn(owner);
      const token = await client.csrf('/portal/endpoints/new');
      const form = (filter: string): Array<[string, string]> => [
        ['_csrf', token],
        ['idempotencyKey', crypto.randomUUID()],
        ['url', HOOK],
        ['events', 'client.created'],
        ['ordering', 'none'],
        ['filter', filter],
      ];
      const named = (body: string) =>
        [...body.matchAll(/<li><code>([^<]+)<\/code>/g)].map((m) => m[1]);
      // The API's own faults, by the same paths, and text that is no JSON at all.
      for (const [filter, path] of [
        ['{"data.displayName": {"$gt": "ten"}}', 'filter.data.displayName.$gt'],
        // Held against the catalog of the endpoint's events.
        ['{"data.displayNam": "Ana"}', 'filter.data.displayNam'],
        ['{"$or": [{"type": "client.created"}, 3]}', 'filter.$or.1'],
        ['{"currency": "EUR"}', 'filter.currency'],
        ['{"data.kind": "company",', 'filter'],
        ['["company"]', 'filter'],
        ['{"__proto__": {"type": "x"}}', 'filter.__proto__'],
      ]) {
        const refused = await client.post('/portal/endpoints', form(filter));
        assert.equal(refused.statusCode, 422, filter);
        assert.deepEqual(named(refused.body), [path], filter);
        const api = await ctx.api('POST', '/api/v1/webhooks', {
          token: owner.token,
          body: `{"url":"${HOOK}","events":["client.created"],"filter":${filter}}` as unknown,
          headers: { 'content-type': 'application/json' },
        });
        assert.ok(api.statusCode === 422 || api.statusCode === 400, `${filter}: ${api.statusCode}`);
      }
      assert.equal((await ctx.runtime.services.webhooks.list(owner.id)).length, 0);

      const created = await client.post('/portal/endpoints', form('{"data.kind": "company"}'));
      assert.equal(created.statusCode, 200, created.body.slice(0, 300));
      const [subscription] = await ctx.runtime.services.webhooks.list(owner.id);
      assert.deepEqual(subscription.filter, { 'data.kind': 'company' });
      const page = (await client.get(`/portal/endpoints/${subscription.id}`)).body;
      assert.match(page, /<textarea id="filter" name="filter"[^>]*>\{\n {2}&#34;data\.kind&#34;/);

      for (const [kind, displayName] of [
        ['company', 'Acme'],
        ['individual', 'Ada'],
        ['company', 'Globex'],
      ]) {
        await createClient(ctx, owner, { kind, displayName });
      }
      // Read-only sessions may try filters: the dry run is a GET and changes nothing.
      const reader = await signedIn(owner, { readOnly: true });
      const tried = await reader.get(
        `/portal/endpoints/${subscription.id}/filter-test?${new URLSearchParams({
          filter: '{"data.displayName": {"$prefix": "G"}}',
        })}`,
      );
      assert.equal(tried.statusCode, 200, tried.body.slice(0, 300));
      assert.match(tried.body, /It would take 1 of the last 2 events\./);
      assert.deepEqual(
        [...tried.body.matchAll(/class="badge (?:ok|muted)">(taken|skipped)/g)].map((m) => m[1]),
        ['skipped', 'taken'],
      );
      const broken = await reader.get(
        `/portal/endpoints/${subscription.id}/filter-test?filter=${encodeURIComponent('{"type": {"$exist": true}}')}`,
      );
      assert.equal(broken.statusCode, 422);
      assert.deepEqual(named(broken.body), ['filter.type.$exist']);
      assert.match(broken.body, /did you mean \$exists\?/);

      // Emptied in the edit form: no filter, every event again.
      const edit = await client.csrf(`/portal/endpoints/${subscription.id}`);
      const saved = await client.post(`/portal/endpoints/${subscription.id}`, [
        ['_csrf', edit],
        ['idempotencyKey', crypto.randomUUID()],
        ['url', HOOK],
        ['events', 'client.created'],
        ['ordering', 'none'],
        ['filter', '  '],
      ]);
      assert.equal(saved.statusCode, 303);
      assert.equal(
        (await ctx.runtime.services.webhooks.get(owner.id, subscription.id)).filter,
        null,
      );
    });

    it('sets a transformation and a retry schedule, refuses what the API refuses, and dry-runs code read-only', async () => {
      const owner = await createTenant(ctx);
      const client = await signedIn(owner);
      const token = await client.csrf('/portal/endpoints/new');
      const code =
        'function handler(webhook) {\r\n  webhook.payload = { text: webhook.type };\r\n  return webhook;\r\n}';
      const form = (transformation: string, retrySchedule: string): Array<[string, string]> => [
        ['_csrf', token],
        ['idempotencyKey', crypto.randomUUID()],
        ['url', HOOK],
        ['events', 'client.created'],
        ['ordering', 'none'],
        ['transformation', transformation],
        ['retrySchedule', retrySchedule],
      ];
      const named = (body: string) =>
        [...body.matchAll(/<li><code>([^<]+)<\/code>/g)].map((m) => m[1]);
      for (const [transformation, retrySchedule, path] of [
        ['function handler(webhook) {\n  return webhook +;\n}', '', 'transformation.code'],
        ['const x = 1;', '', 'transformation.code'],
        ['', '30s, 25h', 'retrySchedule.1'],
        ['', 'soon', 'retrySchedule.0'],
      ]) {
        const refused = await client.post('/portal/endpoints', form(transformation, retrySchedule));
        assert.equal(refused.statusCode, 422, `${transformation} ${retrySchedule}`);
        assert.deepEqual(named(refused.body), [path]);
      }
      assert.equal((await ctx.runtime.services.webhooks.list(owner.id)).length, 0);

      const created = await client.post('/portal/endpoints', form(code, '30s, 5m 2h'));
      assert.equal(created.statusCode, 200, created.body.slice(0, 300));
      const [subscription] = await ctx.runtime.services.webhooks.list(owner.id);
      assert.deepEqual(subscription.transformation, { code: code.replaceAll('\r\n', '\n') });
      assert.deepEqual(subscription.retrySchedule, ['30s', '5m', '2h']);
      const page = (await client.get(`/portal/endpoints/${subscription.id}`)).body;
      assert.match(page, /<pre class="code" aria-label="The transformation">function handler/);
      assert.match(page, /Retries: after 30s, 5m, 2h\./);
      assert.match(
        page,
        /<input id="retrySchedule" name="retrySchedule" type="text" autocomplete="off" value="30s, 5m, 2h">/,
      );

      await createClient(ctx, owner, { kind: 'company', displayName: 'Acme' });
      await createClient(ctx, owner, { kind: 'individual', displayName: 'Ada' });
      // Read-only sessions may try code: a POST for its length, yet a dry run that changes nothing.
      const reader = await signedIn(owner, { readOnly: true });
      const readerToken = await reader.csrf(`/portal/endpoints/${subscription.id}`);
      const tried = await reader.post(`/portal/endpoints/${subscription.id}/transformation-test`, [
        ['_csrf', readerToken],
        [
          'code',
          "function handler(webhook) {\n  if (webhook.payload.data.kind === 'individual') return { ...webhook, cancel: true };\n  webhook.headers['x-kind'] = webhook.payload.data.kind;\n  return webhook;\n}",
        ],
      ]);
      assert.equal(tried.statusCode, 200, tried.body.slice(0, 300));
      assert.match(
        tried.body,
        /Of the last 2 events, 1 would be sent, 1 cancelled, 0 would fail\./,
      );
      assert.deepEqual(
        [...tried.body.matchAll(/class="badge (?:ok|muted|bad)">(sent|cancelled|fails)/g)].map(
          (m) => m[1],
        ),
        ['sent', 'cancelled'],
      );
      assert.match(tried.body, /with x-kind/);
      const failing = await reader.post(
        `/portal/endpoints/${subscription.id}/transformation-test`,
        [
          ['_csrf', readerToken],
          ['code', 'function handler(webhook) { throw new Error("no partner id"); }'],
        ],
      );
      assert.equal(failing.statusCode, 200);
      assert.match(failing.body, /0 would be sent, 0 cancelled, 2 would fail/);
      assert.match(failing.body, /Error: no partner id/);
      const broken = await reader.post(`/portal/endpoints/${subscription.id}/transformation-test`, [
        ['_csrf', readerToken],
        ['code', 'function handler(webhook) {'],
      ]);
      assert.equal(broken.statusCode, 422);
      assert.deepEqual(named(broken.body), ['code']);
      // The read-only session still changes nothing else.
      const paused = await reader.post(`/portal/endpoints/${subscription.id}/pause`, [
        ['_csrf', readerToken],
        ['idempotencyKey', crypto.randomUUID()],
      ]);
      assert.equal(paused.statusCode, 403);

      // Emptied in the edit form: no transformation, the default schedule.
      const edit = await client.csrf(`/portal/endpoints/${subscription.id}`);
      const saved = await client.post(`/portal/endpoints/${subscription.id}`, [
        ['_csrf', edit],
        ['idempotencyKey', crypto.randomUUID()],
        ['url', HOOK],
        ['events', 'client.created'],
        ['ordering', 'none'],
        ['transformation', ' '],
        ['retrySchedule', ''],
      ]);
      assert.equal(saved.statusCode, 303);
      const after = await ctx.runtime.services.webhooks.get(owner.id, subscription.id);
      assert.equal(after.transformation, null);
      assert.equal(after.retrySchedule, null);
    });

    it('sets receiver authentication in write-only fields, kept by an edit on the same origin', async () => {
      const owner = await createTenant(ctx);
      const client = await signedIn(owner);
      const pki = await testClientPki();
      const [apiKey, password] = ['k-form-7e2c90', 'pw-form-41d8a3'];
      const stored = async (id: string) => {
        const row = await ctx.runtime.database.db
          .selectFrom('webhookSubscriptions')
          .select('receiverSecrets')
          .where('id', '=', id)
          .executeTakeFirstOrThrow();
        assert.ok(row.receiverSecrets !== null);
        return JSON.parse(ctx.runtime.services.secrets.decrypt(row.receiverSecrets, id));
      };
      const named = (body: string) =>
        [...body.matchAll(/<li><code>([^<]+)<\/code>/g)].map((m) => m[1]);
      const token = await client.csrf('/portal/endpoints/new');
      const form = (fields: Array<[string, string]>): Array<[string, string]> => [
        ['_csrf', token],
        ['idempotencyKey', crypto.randomUUID()],
        ['url', HOOK],
        ['events', 'client.created'],
        ['ordering', 'none'],
        ...fields,
      ];
      // Lines that are no headers, and a secret left empty on a new endpoint: refused, nothing made.
      const refused = await client.post(
        '/portal/endpoints',
        form([
          ['headers', 'X-Api-Key: a\nno colon here\nX-Api-Key: b'],
          ['auth', 'basic'],
          ['auth.username', 'ops'],
          ['auth.password', ''],
        ]),
      );
      assert.equal(refused.statusCode, 422);
      assert.deepEqual(named(refused.body).sort(), ['auth.password', 'headers']);
      assert.match(
        refused.body,
        /line 2 is not &#34;Name: value&#34;; line 3 gives X-Api-Key again/,
      );
      assert.equal((await ctx.runtime.services.webhooks.list(owner.id)).length, 0);

      const created = await client.post(
        '/portal/endpoints',
        form([
          ['headers', `X-Api-Key: ${apiKey}\n\n`],
          ['auth', 'basic'],
          ['auth.username', 'ops'],
          ['auth.password', password],
          ['clientCertificate.certificate', pki.client.certificate],
          ['clientCertificate.privateKey', pki.client.privateKey],
        ]),
      );
      assert.equal(created.statusCode, 200, created.body.slice(0, 500));
      const [made] = await ctx.runtime.services.webhooks.list(owner.id);
      assert.deepEqual(await stored(made.id), {
        headers: { 'X-Api-Key': apiKey },
        auth: { type: 'basic', username: 'ops', password },
        clientCertificate: pki.client,
      });

      // The edit form shows names and the scheme, never a secret; sent back as shown, it keeps all.
      const page = (await client.get(`/portal/endpoints/${made.id}`)).body;
      for (const secret of [apiKey, password, pki.client.privateKey.split('\n')[1]]) {
        assert.equal(page.includes(secret), false, secret);
      }
      assert.match(page, /name="headers"[^>]*>X-Api-Key: \*\*\*<\/textarea>/);
      assert.match(page, /<option value="basic" selected>/);
      assert.match(
        page,
        /name="auth.password" type="password"[^>]*placeholder="stored: leave empty/,
      );
      assert.match(page, /Stored: <code>CN&#61;tourops-client/);
      const edit = await client.csrf(`/portal/endpoints/${made.id}`);
      // The form as the page has it, the `changed` fields in place of theirs.
      const asShown = (url: string, changed: Array<[string, string]> = []) => {
        const names = new Set(changed.map(([name]) => name));
        return [...shown(url).filter(([name]) => !names.has(name)), ...changed];
      };
      const shown = (url: string): Array<[string, string]> => [
        ['_csrf', edit],
        ['idempotencyKey', crypto.randomUUID()],
        ['url', url],
        ['events', 'client.created'],
        ['ordering', 'none'],
        ['headers', 'X-Api-Key: ***'],
        ['auth', 'basic'],
        ['auth.username', 'ops'],
        ['auth.password', ''],
        ['auth.tokenUrl', ''],
        ['auth.clientId', ''],
        ['auth.clientSecret', ''],
        ['clientCertificate.certificate', ''],
        ['clientCertificate.privateKey', ''],
      ];
      const kept = await client.post(`/portal/endpoints/${made.id}`, asShown(`${HOOK}/moved`));
      assert.equal(kept.statusCode, 303, kept.body.slice(0, 500));
      assert.deepEqual(await stored(made.id), {
        headers: { 'X-Api-Key': apiKey },
        auth: { type: 'basic', username: 'ops', password },
        clientCertificate: pki.client,
      });

      // Another origin: the masked secrets are refused by name and nothing changes.
      const moved = await client.post(
        `/portal/endpoints/${made.id}`,
        asShown('https://127.0.0.2:9/hook'),
      );
      assert.equal(moved.statusCode, 422);
      assert.deepEqual(named(moved.body).sort(), ['auth.password', 'headers.X-Api-Key']);
      assert.equal(
        (await ctx.runtime.services.webhooks.get(owner.id, made.id)).url,
        `${HOOK}/moved`,
      );
      // Sent again, with the certificate removed and no scheme: saved so.
      const again = await client.post(
        `/portal/endpoints/${made.id}`,
        asShown('https://127.0.0.2:9/hook', [
          ['headers', 'X-Api-Key: k-new'],
          ['auth', ''],
          ['clientCertificate.remove', 'true'],
        ]),
      );
      assert.equal(again.statusCode, 303, again.body.slice(0, 500));
      assert.deepEqual(await stored(made.id), {
        headers: { 'X-Api-Key': 'k-new' },
        auth: null,
        clientCertificate: null,
      });
    });

    it('names receiver authentication on the endpoint page, never a secret', async () => {
      const owner = await createTenant(ctx);
      const secrets = ['k-portal-5c1e9a', 'pw-portal-2b7d41'];
      const created = await ctx.api('POST', '/api/v1/webhooks', {
        token: owner.token,
        body: {
          url: HOOK,
          events: ['client.created'],
          headers: { 'X-Api-Key': secrets[0] },
          auth: { type: 'basic', username: 'ops', password: secrets[1] },
        },
      });
      assert.equal(created.statusCode, 201, created.body);
      const client = await signedIn(owner, { readOnly: true });
      const page = (await client.get(`/portal/endpoints/${created.json().data.id}`)).body;
      assert.match(page, /Extra headers<\/dt><dd><code>X-Api-Key<\/code>/);
      assert.match(page, /HTTP Basic as <code>ops<\/code>/);
      for (const secret of secrets) assert.equal(page.includes(secret), false, secret);
    });
  });
}
