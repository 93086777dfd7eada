import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { buildRelease, GO_MODULE, releaseVersion, setVersion } from '../scripts/release.ts';
import { startWorker } from '../src/start-worker.ts';
import { createWebhookTestContext, type TestContext } from './helpers/context.ts';
import { createClient, createTenant } from './helpers/fixtures.ts';
import { HttpsReceiver } from './helpers/https-receiver.ts';
import { ROOT } from './helpers/processes.ts';

// `npm run release` (contract.md, "Releases"): every artifact, installed offline into a clean
// project of its language as its registry would install it, verifies a delivery the service
// made to a real receiver, and refuses a copy with one byte changed.

const run = promisify(execFile);
const PYTHON = '/usr/bin/python3';
const CLIENT_NAME = 'Zoë Ångström';

/** A delivery as received, the same with one byte of the body changed, and what verifies it. */
interface Case {
  body: string;
  tampered: string;
  headers: Record<string, string>;
  keys: string[];
  now: number;
  eventId: string;
}

/** What each program prints: the event id it verified, then the refusal of the tampered copy. */
const expected = (c: Case) => JSON.stringify([c.eventId, 'NoMatchingSignature']);

/** `npm pack` of each dependency of `manifest`, and of theirs, from node_modules: the tarballs. */
async function packedDependencies(manifest: string, into: string): Promise<string[]> {
  const names = new Set<string>();
  const visit = (path: string) => {
    const dependencies = JSON.parse(readFileSync(path, 'utf8')).dependencies ?? {};
    for (const name of Object.keys(dependencies)) {
      if (names.has(name)) continue;
      names.add(name);
      visit(join(ROOT, 'node_modules', name, 'package.json'));
    }
  };
  visit(manifest);
  const folders = [...names].map((name) => join(ROOT, 'node_modules', name));
  const packed = await run('npm', ['pack', '--ignore-scripts', '--silent', ...folders], {
    cwd: into,
  });
  return packed.stdout
    .trim()
    .split('\n')
    .map((file) => join(into, file));
}

describe('npm run release', () => {
  const work = mkdtempSync(join(tmpdir(), 'tourops-release-test-'));
  const out = join(work, 'dist');
  // npm's cache is the machine's: what `npm ci` put there stands in for the registry.
  const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? work, LANG: 'C.UTF-8' };
  const version = releaseVersion();
  let ctx: TestContext;
  let receiver: HttpsReceiver;
  let worker: ReturnType<typeof startWorker>;
  let delivery: Case;

  before(async () => {
    ctx = await createWebhookTestContext('sqlite');
    receiver = await HttpsReceiver.start();
    worker = startWorker(ctx.runtime, { pollIntervalMs: 50 });
    const tenant = await createTenant(ctx, { tier: 'pro' });
    const created = await ctx.api('POST', '/api/v1/webhooks', {
      token: tenant.token,
      body: { url: receiver.url('/hook'), events: ['client.created'] },
    });
    assert.equal(created.statusCode, 201, created.body);
    await createClient(ctx, tenant, { displayName: CLIENT_NAME });
    const [request] = await receiver.waitFor(1);
    const event = JSON.parse(request.body) as { id: string; created: number };
    delivery = {
      body: request.body,
      tampered: request.body.replace(CLIENT_NAME, CLIENT_NAME.replace('Z', 'X')),
      headers: Object.fromEntries(
        Object.entries(request.headers).map(([name, value]) => [name, String(value)]),
      ),
      keys: [created.json().signingKey],
      now: event.created,
      eventId: event.id,
    };
    assert.notEqual(delivery.tampered, delivery.body);
  });
  after(async () => {
    await worker?.stop();
    await receiver?.close();
    await ctx?.close();
    rmSync(work, { recursive: true, force: true });
  });

  it('moves the version of package.json and every manifest together, and refuses a mismatch', () => {
    const copy = join(work, 'checkout');
    for (const path of [
      'package.json',
      'sdk/package.json',
      'sdk/python/pyproject.toml',
      'sdk/php/composer.json',
    ]) {
      cpSync(join(ROOT, path), join(copy, path), { recursive: true });
    }
    assert.equal(releaseVersion(copy), version);
    setVersion('9.8.7', copy, false);
    assert.equal(releaseVersion(copy), '9.8.7');
    assert.equal(
      JSON.parse(readFileSync(join(copy, 'sdk/php/composer.json'), 'utf8')).version,
      '9.8.7',
    );
    assert.throws(() => setVersion('9.8', copy, false), /must be <major>\.<minor>\.<patch>/);
    cpSync(join(ROOT, 'sdk/python/pyproject.toml'), join(copy, 'sdk/python/pyproject.toml'));
    assert.throws(
      () => releaseVersion(copy),
      new RegExp(`sdk/python/pyproject.toml says version ${version}; package.json says 9.8.7`),
    );
  });

  it('builds every artifact of one version, the version of every manifest', () => {
    const made = buildRelease(version, out);
    assert.deepEqual(made, [
      `tourops-sdk-${version}.tgz`,
      `tourops_webhooks-${version}-py3-none-any.whl`,
      `tourops_webhooks-${version}.tar.gz`,
      `goproxy/${GO_MODULE}/@v/list`,
      `goproxy/${GO_MODULE}/@v/v${version}.info`,
      `goproxy/${GO_MODULE}/@v/v${version}.mod`,
      `goproxy/${GO_MODULE}/@v/v${version}.zip`,
      `tourops-webhooks-${version}.zip`,
    ]);
    const info = JSON.parse(
      readFileSync(join(out, `goproxy/${GO_MODULE}/@v/v${version}.info`), 'utf8'),
    );
    assert.equal(info.Version, `v${version}`);
    assert.equal(JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')).version, version);
  });

  it('TypeScript: the npm tarball, installed into a clean project', async () => {
    const project = join(work, 'npm');
    mkdirSync(project);
    writeFileSync(
      join(project, 'package.json'),
      JSON.stringify({ name: 'receiver', type: 'module', private: true }),
    );
    // No registry: the SDK's dependencies are packed from this checkout's node_modules, as a
    // mirror would serve them, and installed beside it.
    const dependencies = await packedDependencies(join(ROOT, 'sdk/package.json'), work);
    const sdk = join(out, `tourops-sdk-${version}.tgz`);
    await run('npm', ['install', '--offline', '--no-audit', '--no-fund', ...dependencies, sdk], {
      cwd: project,
      env,
    });
    writeFileSync(
      join(project, 'verify.mjs'),
      `import { verifyWebhook } from '@tourops/sdk';
const c = JSON.parse(process.env.CASE);
const out = [];
for (const body of [c.body, c.tampered]) {
  try { out.push(verifyWebhook(body, c.headers, c.keys, { now: c.now }).id); }
  catch (error) { out.push(error.check); }
}
console.log(JSON.stringify(out));
`,
    );
    const { stdout } = await run('node', ['verify.mjs'], {
      cwd: project,
      env: { ...env, CASE: JSON.stringify(delivery) },
    });
    assert.equal(stdout.trim(), expected(delivery));
  });

  it('Python: the wheel and the sdist, each installed into a plain virtual environment', async () => {
    const program = `import json, os, tourops_webhooks as tw
c = json.loads(os.environ["CASE"])
out = []
for body in (c["body"], c["tampered"]):
    try:
        out.append(tw.verify(body.encode(), c["headers"], c["keys"], now=c["now"])["id"])
    except tw.WebhookVerificationError as error:
        out.append(type(error).__name__)
print(json.dumps(out, separators=(",", ":")))
`;
    // The sdist built to a wheel as pip would, by the machine's setuptools (a clean venv has no
    // `wheel`, and no index to fetch one from).
    const fromSdist = join(work, 'from-sdist');
    await run(
      PYTHON,
      [
        '-m',
        'pip',
        'wheel',
        '--no-deps',
        '--no-build-isolation',
        '--no-index',
        '--wheel-dir',
        fromSdist,
        join(out, `tourops_webhooks-${version}.tar.gz`),
      ],
      { env },
    );
    for (const [name, wheel] of [
      ['wheel', join(out, `tourops_webhooks-${version}-py3-none-any.whl`)],
      ['sdist', join(fromSdist, `tourops_webhooks-${version}-py3-none-any.whl`)],
    ]) {
      const venv = join(work, `venv-${name}`);
      await run(PYTHON, ['-m', 'venv', venv], { env });
      await run(
        join(venv, 'bin/pip'),
        ['install', '--no-index', '--disable-pip-version-check', wheel],
        { env },
      );
      const { stdout } = await run(join(venv, 'bin/python'), ['-c', program], {
        cwd: work,
        env: { ...env, CASE: JSON.stringify(delivery) },
      });
      assert.equal(stdout.trim(), expected(delivery), name);
    }
  });

  it('Go: the module fetched from the module proxy layout (GOPROXY=file://)', async () => {
    const project = join(work, 'go');
    mkdirSync(project);
    const goEnv = {
      ...env,
      GOPROXY: `file://${join(out, 'goproxy')}`,
      // As docs/verifiers.md says: no checksum database knows a module of your own proxy.
      GONOSUMDB: 'tourops.example',
      // A module cache of its own (the module comes from the proxy), deletable afterwards; the
      // build cache is the machine's.
      GOPATH: join(work, 'gopath'),
      GOFLAGS: '-modcacherw',
    };
    writeFileSync(join(project, 'go.mod'), 'module example.com/receiver\n\ngo 1.19\n');
    writeFileSync(
      join(project, 'main.go'),
      `package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"${GO_MODULE}"
)

func main() {
	var c struct {
		Body, Tampered string
		Headers        map[string]string
		Keys           []string
		Now            int64
	}
	if err := json.Unmarshal([]byte(os.Getenv("CASE")), &c); err != nil {
		panic(err)
	}
	header := http.Header{}
	for name, value := range c.Headers {
		header.Set(name, value)
	}
	verifier := tourops.Verifier{Keys: c.Keys, Now: func() time.Time { return time.Unix(c.Now, 0) }}
	out := []string{}
	for _, body := range []string{c.Body, c.Tampered} {
		event, err := verifier.Verify([]byte(body), header)
		switch {
		case err == nil:
			out = append(out, event.ID)
		case errors.Is(err, tourops.ErrBodyNotRaw):
			out = append(out, "BodyNotRaw")
		case errors.Is(err, tourops.ErrNoMatchingSignature):
			out = append(out, "NoMatchingSignature")
		default:
			out = append(out, err.Error())
		}
	}
	printed, _ := json.Marshal(out)
	fmt.Println(string(printed))
}
`,
    );
    await run('go', ['get', `${GO_MODULE}@v${version}`], { cwd: project, env: goEnv });
    const { stdout } = await run('go', ['run', '.'], {
      cwd: project,
      env: { ...goEnv, CASE: JSON.stringify(delivery) },
    });
    assert.equal(stdout.trim(), expected(delivery));
    assert.match(
      readFileSync(join(project, 'go.mod'), 'utf8'),
      new RegExp(`${GO_MODULE} v${version}`),
    );
  });

  it('PHP: the Composer artifact, from an artifact repository', async () => {
    const project = join(work, 'php');
    mkdirSync(project);
    writeFileSync(
      join(project, 'composer.json'),
      JSON.stringify({
        repositories: [{ type: 'artifact', url: out }, { 'packagist.org': false }],
        require: { 'tourops/webhooks': version },
      }),
    );
    await run('composer', ['install', '--no-interaction', '--no-progress'], {
      cwd: project,
      env: { ...env, COMPOSER_HOME: join(work, 'composer') },
    });
    writeFileSync(
      join(project, 'verify.php'),
      `<?php
require __DIR__ . '/vendor/autoload.php';
$c = json_decode(getenv('CASE'), true);
$out = [];
foreach ([$c['body'], $c['tampered']] as $body) {
    try {
        $out[] = (new TourOps\\Webhooks\\Verifier($c['keys']))->verify($body, $c['headers'], $c['now'])['id'];
    } catch (TourOps\\Webhooks\\VerificationException $error) {
        $out[] = preg_replace('/^.*\\\\\\\\|Exception$/', '', get_class($error));
    }
}
echo json_encode($out), "\\n";
`,
    );
    const { stdout } = await run('php', ['verify.php'], {
      cwd: project,
      env: { ...env, CASE: JSON.stringify(delivery) },
    });
    assert.equal(stdout.trim(), expected(delivery));
  });
});
