import assert from 'node:assert/strict';
import type { LookupAddress } from 'node:dns';
import { lookup as dnsLookup } from 'node:dns/promises';
import { describe, it } from 'node:test';
import {
  AddressGuard,
  caresResolver,
  PRIVATE_TARGETS_HINT,
  type Resolver,
  type UrlCheck,
} from '../src/domain/address-guard.ts';
import { runningNow } from '../src/lib/deadline.ts';
import { DnsServer } from './helpers/dns-server.ts';

/** A resolver from a fixed table; checkUrl only resolves, it never connects. */
function tableResolver(table: Record<string, string[]>): Resolver {
  return async (hostname) => {
    const addresses = table[hostname];
    if (addresses === undefined) {
      throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    }
    return addresses;
  };
}

function reasonOf(check: UrlCheck): string {
  assert.equal(check.ok, false, 'expected the URL to be rejected');
  return check.ok ? '' : check.reason;
}

/** Calls guard.lookup as net.connect would, and returns what it called back with. */
function lookup(
  guard: AddressGuard,
  hostname: string,
  all: boolean,
): Promise<{ error: NodeJS.ErrnoException | null; address: string | LookupAddress[] }> {
  return new Promise((resolve) => {
    guard.lookup(hostname, { all }, (error, address) => resolve({ error, address }));
  });
}

const strict = new AddressGuard({ allowPrivate: false, resolver: tableResolver({}) });

describe('AddressGuard.isAllowedAddress', () => {
  const rejected = [
    ['10/8 private', '10.0.0.1'],
    ['172.16/12 private', '172.16.5.4'],
    ['172.31 private', '172.31.255.255'],
    ['192.168/16 private', '192.168.1.1'],
    ['loopback', '127.0.0.1'],
    ['loopback elsewhere in 127/8', '127.8.9.10'],
    ['link-local (cloud metadata)', '169.254.169.254'],
    ['CGNAT', '100.64.0.1'],
    ['unspecified', '0.0.0.0'],
    ['broadcast', '255.255.255.255'],
    ['IPv4 multicast', '224.0.0.1'],
    ['reserved 240/4', '240.0.0.1'],
    ['documentation TEST-NET', '203.0.113.7'],
    ['IPv6 loopback', '::1'],
    ['IPv6 unspecified', '::'],
    ['IPv6 link-local', 'fe80::1'],
    ['IPv6 link-local with zone', 'fe80::1%eth0'],
    ['IPv6 unique local fc00::/7 (fc)', 'fc00::1'],
    ['IPv6 unique local fc00::/7 (fd)', 'fd12:3456::1'],
    ['IPv6 multicast', 'ff02::1'],
    ['IPv4-mapped loopback', '::ffff:127.0.0.1'],
    ['IPv4-mapped private', '::ffff:10.0.0.1'],
    ['IPv4-mapped private, hex form', '::ffff:a00:1'],
    ['IPv4-compatible loopback', '::127.0.0.1'],
    ['NAT64 of a private address', '64:ff9b::a00:1'],
    ['6to4', '2002:a00:1::1'],
    ['Teredo', '2001:0:4136:e378::1'],
    ['IPv6 documentation', '2001:db8::1'],
    ['a host name', 'example.com'],
    ['a short IPv4 form', '127.1'],
    ['a decimal IPv4 form', '2130706433'],
    ['a bracketed IPv6', '[2606:4700::1111]'],
    ['empty', ''],
  ];
  for (const [what, address] of rejected) {
    it(`rejects ${what}: ${address}`, () => {
      assert.equal(strict.isAllowedAddress(address), false);
    });
  }

  for (const address of ['93.184.215.14', '8.8.8.8', '2606:4700::1111', '::ffff:8.8.8.8']) {
    it(`allows public unicast ${address}`, () => {
      assert.equal(strict.isAllowedAddress(address), true);
    });
  }

  it('with allowPrivate allows every parsable address, and still no garbage', () => {
    const open = new AddressGuard({ allowPrivate: true, resolver: tableResolver({}) });
    for (const address of ['127.0.0.1', '10.0.0.1', '::1', 'fe80::1', '8.8.8.8']) {
      assert.equal(open.isAllowedAddress(address), true, address);
    }
    assert.equal(open.isAllowedAddress('not-an-ip'), false);
  });
});

describe('AddressGuard.checkUrl', () => {
  const guard = new AddressGuard({
    allowPrivate: false,
    resolver: tableResolver({
      'hooks.example.com': ['93.184.215.14', '2606:2800:21f:cb07:6820:80da:af6b:8b2c'],
      'mixed.example.com': ['93.184.215.14', '10.0.0.1', '8.8.8.8'],
      'v6-private.example.com': ['2606:4700::1111', 'fd00::5'],
      'empty.example.com': [],
    }),
  });

  it('accepts an https URL whose every address is public', async () => {
    const check = await guard.checkUrl('https://hooks.example.com/tourops?x=1');
    assert.equal(check.ok, true);
    assert.equal(check.ok && check.url.hostname, 'hooks.example.com');
  });

  it('accepts a public literal IPv4 and IPv6 host without resolving', async () => {
    assert.equal((await guard.checkUrl('https://93.184.215.14/hook')).ok, true);
    assert.equal((await guard.checkUrl('https://[2606:4700::1111]:8443/hook')).ok, true);
  });

  it('rejects http', async () => {
    assert.equal(
      reasonOf(await guard.checkUrl('http://hooks.example.com/')),
      'must use https (or a broker: amqps or tls)',
    );
  });

  it('rejects other schemes and unparsable URLs', async () => {
    assert.equal(
      reasonOf(await guard.checkUrl('ftp://hooks.example.com/')),
      'must use https (or a broker: amqps or tls)',
    );
    assert.equal(reasonOf(await guard.checkUrl('not-a-url')), 'must be a valid URL');
  });

  it('refuses what another URL parser would read another host from', async () => {
    // User information (even empty), backslashes, whitespace and control characters: WHATWG
    // reads `https://1.1.1.1\@127.0.0.1/` as host 1.1.1.1, other parsers as 127.0.0.1.
    for (const url of [
      'https://user:pass@hooks.example.com/',
      'https://user@hooks.example.com/',
      'https://@hooks.example.com/',
      'https://1.1.1.1\\@127.0.0.1:8443/hook',
      'https://hooks.example.com\\@127.0.0.1/',
      'https://hooks.exa\tmple.com/',
      'https://hooks.example.com/a\nb',
      'https://hooks.example.com/\u0000',
      'https://hooks.example.com /',
    ]) {
      assert.match(reasonOf(await guard.checkUrl(url)), /credentials|backslashes/, url);
    }
    // An `@` after the authority is part of the path or query, not user information.
    assert.equal((await guard.checkUrl('https://hooks.example.com/a@b?c=d@e')).ok, true);
  });

  it('rejects a URL over 2048 characters, and accepts one of exactly 2048', async () => {
    const base = 'https://hooks.example.com/';
    const exact = base + 'a'.repeat(2048 - base.length);
    assert.equal((await guard.checkUrl(exact)).ok, true);
    assert.equal(reasonOf(await guard.checkUrl(`${exact}a`)), 'must be at most 2048 characters');
  });

  it('rejects credentials in the URL', async () => {
    for (const url of [
      'https://user:secret@hooks.example.com/',
      'https://user@hooks.example.com/',
      'https://:secret@hooks.example.com/',
    ]) {
      assert.equal(reasonOf(await guard.checkUrl(url)), 'must not contain credentials', url);
    }
  });

  it('rejects literal private, loopback, link-local, CGNAT and mapped hosts', async () => {
    for (const [url, address] of [
      ['https://10.0.0.1/hook', '10.0.0.1'],
      ['https://172.16.0.1/hook', '172.16.0.1'],
      ['https://192.168.0.10/hook', '192.168.0.10'],
      ['https://127.0.0.1:8443/hook', '127.0.0.1'],
      ['https://169.254.169.254/latest/meta-data', '169.254.169.254'],
      ['https://100.64.1.2/', '100.64.1.2'],
      ['https://0.0.0.0/', '0.0.0.0'],
      ['https://[::1]/', '::1'],
      ['https://[fe80::1]/', 'fe80::1'],
      ['https://[fd00::1]/', 'fd00::1'],
      // The URL parser normalises these to the forms the guard sees.
      ['https://[::ffff:127.0.0.1]/', '::ffff:7f00:1'],
      ['https://[::ffff:10.0.0.1]/', '::ffff:a00:1'],
      ['https://2130706433/', '127.0.0.1'],
      ['https://0x7f.1/', '127.0.0.1'],
    ]) {
      assert.equal(
        reasonOf(await guard.checkUrl(url)),
        `is a private or reserved address (${address}); ${PRIVATE_TARGETS_HINT}`,
        url,
      );
    }
  });

  it('rejects a name with one private address among public ones', async () => {
    assert.equal(
      reasonOf(await guard.checkUrl('https://mixed.example.com/')),
      `resolves to a private or reserved address (10.0.0.1); ${PRIVATE_TARGETS_HINT}`,
    );
    assert.equal(
      reasonOf(await guard.checkUrl('https://v6-private.example.com/')),
      `resolves to a private or reserved address (fd00::5); ${PRIVATE_TARGETS_HINT}`,
    );
  });

  it('rejects a name that resolves to no address', async () => {
    assert.equal(
      reasonOf(await guard.checkUrl('https://empty.example.com/')),
      'host name does not resolve',
    );
  });

  it('rejects a name the resolver fails on', async () => {
    assert.equal(
      reasonOf(await guard.checkUrl('https://unknown.example.com/')),
      'host name does not resolve',
    );
    const failing = new AddressGuard({
      allowPrivate: false,
      resolver: async () => {
        throw Object.assign(new Error('queryA ESERVFAIL'), { code: 'ESERVFAIL' });
      },
    });
    assert.equal(
      reasonOf(await failing.checkUrl('https://hooks.example.com/')),
      'host name could not be resolved',
    );
  });

  it('rejects localhost through its resolved address', async () => {
    const local = new AddressGuard({
      allowPrivate: false,
      resolver: tableResolver({ localhost: ['::1', '127.0.0.1'] }),
    });
    assert.equal(
      reasonOf(await local.checkUrl('https://localhost:8443/')),
      `resolves to a private or reserved address (::1); ${PRIVATE_TARGETS_HINT}`,
    );
  });

  it('with allowPrivate lets 127.0.0.1 and a name resolving to it through', async () => {
    const open = new AddressGuard({
      allowPrivate: true,
      resolver: tableResolver({ localhost: ['127.0.0.1'] }),
    });
    assert.equal((await open.checkUrl('https://127.0.0.1:8443/hook')).ok, true);
    assert.equal((await open.checkUrl('https://localhost:8443/hook')).ok, true);
    // The other rules still hold.
    assert.equal(
      reasonOf(await open.checkUrl('http://127.0.0.1/')),
      'must use https (or a broker: amqps or tls)',
    );
  });
});

describe('AddressGuard.lookup (connect time)', () => {
  // Only private and loopback answers here: a lookup that allowed one would hand it to a socket.
  const guard = new AddressGuard({
    allowPrivate: false,
    resolver: tableResolver({
      'rebind.test': ['127.0.0.1'],
      'internal.test': ['10.0.0.1', 'fd00::1'],
      'empty.test': [],
    }),
  });

  it('refuses a name that now resolves to a private address', async () => {
    for (const all of [true, false]) {
      const { error } = await lookup(guard, 'rebind.test', all);
      assert.ok(error, 'expected an error');
      assert.equal(error.code, 'EADDRBLOCKED');
      assert.match(error.message, /127\.0\.0\.1/);
    }
    const { error } = await lookup(guard, 'internal.test', true);
    assert.equal(error?.code, 'EADDRBLOCKED');
    assert.match(error?.message ?? '', /10\.0\.0\.1, fd00::1/);
  });

  it('reports a name without addresses as ENOTFOUND and passes resolver errors on', async () => {
    assert.equal((await lookup(guard, 'empty.test', true)).error?.code, 'ENOTFOUND');
    assert.equal((await lookup(guard, 'nowhere.test', true)).error?.code, 'ENOTFOUND');
  });

  it('with allowPrivate returns the addresses in both callback shapes, filtered by family', async () => {
    const open = new AddressGuard({
      allowPrivate: true,
      resolver: tableResolver({ 'dual.test': ['::1', '127.0.0.1', 'garbage'] }),
    });
    const all = await lookup(open, 'dual.test', true);
    assert.equal(all.error, null);
    assert.deepEqual(all.address, [
      { address: '::1', family: 6 },
      { address: '127.0.0.1', family: 4 },
    ]);
    const one = await lookup(open, 'dual.test', false);
    assert.equal(one.address, '::1');
    const v4 = await new Promise<unknown[]>((resolve) => {
      open.lookup('dual.test', { family: 4 }, (error, address, family) =>
        resolve([error, address, family]),
      );
    });
    assert.deepEqual(v4, [null, '127.0.0.1', 4]);
  });
});

describe('name resolution is bounded and off the thread pool', () => {
  const never: Resolver = () => new Promise(() => {});

  it('refuses a name whose resolver never answers, within WEBHOOK_DNS_TIMEOUT', async () => {
    // On the time-out's own clock, this process's running time (src/lib/deadline.ts): refused
    // once it has passed, not before.
    const guard = new AddressGuard({ allowPrivate: false, timeoutMs: 300, resolver: never });
    const atTimeout = async <T>(pending: Promise<T>): Promise<T> => {
      const start = runningNow();
      const outcome = await pending;
      assert.ok(runningNow() - start >= 300, 'answered before the time-out');
      return outcome;
    };
    assert.equal(
      reasonOf(await atTimeout(guard.checkUrl('https://slow.example.com/hook'))),
      'host name did not resolve within 300 ms',
    );
    const { error } = await atTimeout(lookup(guard, 'slow.example.com', true));
    // At connect time as dns.lookup reports a temporary failure (the attempt's class: dns).
    assert.equal(error?.code, 'EAI_AGAIN');
  });

  it("asks DNS servers through c-ares: others' lookups go on while names hang", async () => {
    const server = await DnsServer.start({ 'hooks.test': '127.0.0.1' }, ['hang.test']);
    try {
      const resolver = caresResolver({ timeoutMs: 1_000, servers: [server.address] });
      assert.deepEqual(await resolver('hooks.test'), ['127.0.0.1']);
      await assert.rejects(resolver('nowhere.test'), { code: 'ENOTFOUND' });
      assert.deepEqual(await resolver('LocalHost'), ['127.0.0.1', '::1']);
      const guard = new AddressGuard({ allowPrivate: true, timeoutMs: 1_000, resolver });
      assert.equal((await guard.checkUrl('https://hooks.test/hook')).ok, true);
      // Eight names that never resolve, twice libuv's pool: dns.lookup, which takes a thread
      // of that pool, still answers at once beside them.
      // In the order of events: it answers while every one of them still hangs.
      let answered = 0;
      const hanging = Array.from({ length: 8 }, () =>
        guard.checkUrl('https://hang.test/hook').finally(() => {
          answered += 1;
        }),
      );
      await dnsLookup('localhost');
      assert.equal(answered, 0, 'dns.lookup waited behind the hanging names');
      for (const check of await Promise.all(hanging)) {
        assert.equal(reasonOf(check), 'host name did not resolve within 1 s');
      }
      assert.ok(server.queries.includes('hang.test'));
    } finally {
      await server.close();
    }
  });
});

describe('AddressGuard.checkUrl: broker destinations', () => {
  const resolver = tableResolver({
    'mq.example.com': ['93.184.215.14'],
    'mq.internal': ['10.0.0.5'],
    localhost: ['127.0.0.1'],
  });
  const strict = new AddressGuard({ allowPrivate: false, resolver });
  const open = new AddressGuard({ allowPrivate: true, resolver });
  const amqps = 'amqps://app:secret@mq.example.com/orders?exchange=tourops&routingKey=events';

  it('accepts amqps and tls with credentials, on a public host', async () => {
    assert.equal((await strict.checkUrl(amqps)).ok, true);
    assert.equal(
      (await strict.checkUrl('tls://app:secret@mq.example.com:4222?subject=tourops.events')).ok,
      true,
    );
    assert.equal((await strict.checkUrl('amqps://93.184.215.14?exchange=&routingKey=q')).ok, true);
  });

  it('takes plaintext amqp and nats only where private targets are allowed', async () => {
    for (const url of [
      'amqp://mq.example.com/?exchange=x&routingKey=y',
      'nats://mq.example.com?subject=a',
    ]) {
      assert.match(
        reasonOf(await strict.checkUrl(url)),
        /^must use amqps or tls \(plaintext (amqp|nats) is for development\)/,
      );
      assert.equal((await open.checkUrl(url)).ok, true, url);
    }
    assert.equal(
      (await open.checkUrl('amqp://guest:guest@localhost:5672/?exchange=x&routingKey=y')).ok,
      true,
    );
  });

  it('guards broker hosts as HTTPS hosts: private names and literals refused', async () => {
    assert.match(
      reasonOf(await strict.checkUrl('amqps://mq.internal/?exchange=x&routingKey=y')),
      /^resolves to a private or reserved address \(10\.0\.0\.5\)/,
    );
    assert.match(
      reasonOf(await strict.checkUrl('tls://127.0.0.1:4222?subject=a')),
      /^is a private or reserved address \(127\.0\.0\.1\)/,
    );
    assert.equal(
      reasonOf(await strict.checkUrl('tls://nowhere.example.com?subject=a')),
      'host name does not resolve',
    );
  });

  it('names what a broker URL lacks or has too much of', async () => {
    const cases: Array<[string, RegExp]> = [
      ['amqps://mq.example.com/?exchange=x', /query parameter routingKey once/],
      ['amqps://mq.example.com/?routingKey=y', /query parameter exchange once/],
      ['amqps://mq.example.com/?exchange=x&routingKey=y&exchange=z', /exchange once/],
      [
        'amqps://mq.example.com/?exchange=x&routingKey=y&queue=q',
        /exchange and routingKey only, not queue/,
      ],
      ['tls://mq.example.com', /query parameter subject once/],
      ['tls://mq.example.com?subject=a.*', /without spaces or the wildcards/],
      ['tls://mq.example.com?subject=a..b', /dot-separated tokens/],
      ['tls://mq.example.com/stream?subject=a', /must have no path/],
      ['tls://mq.example.com?subject=a#frag', /fragment/],
      ['amqps:///?exchange=x&routingKey=y', /must name a host/],
      ['amqps://u%ZZ:p@mq.example.com/?exchange=x&routingKey=y', /percent-encode/],
      ['amqps://u:p%E0%A4%A@mq.example.com/?exchange=x&routingKey=y', /percent-encode/],
      ['amqps://mq.example.com/%ED%A0%80?exchange=x&routingKey=y', /percent-encode/],
      ['kafka://mq.example.com/topic', /^must use https \(or a broker: amqps or tls\)$/],
    ];
    for (const [url, reason] of cases)
      assert.match(reasonOf(await strict.checkUrl(url)), reason, url);
  });
});
