import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { ROOT } from '../helpers/processes.ts';

// `npm run test:image`'s podman: the image built from the Containerfile as docs/development.md
// ("The image") says, on a base made from Debian's packages when BASE_IMAGE names none.

const run = promisify(execFile);

/** A containers.conf for this sandbox (no default ulimits, runc), unless CONTAINERS_CONF is set. */
function containersConf(): string {
  if (process.env.CONTAINERS_CONF) return process.env.CONTAINERS_CONF;
  const dir = mkdtempSync(join(tmpdir(), 'tourops-podman-'));
  const file = join(dir, 'containers.conf');
  writeFileSync(file, '[containers]\ndefault_ulimits = []\n\n[engine]\nruntime = "runc"\n');
  return file;
}

const env = { ...process.env, CONTAINERS_CONF: containersConf() };

/** `podman <args>`: its output; fails with podman's stderr. */
export async function podman(args: string[], options: { input?: string } = {}): Promise<string> {
  const child = run('podman', args, { env, maxBuffer: 64 * 1024 * 1024, encoding: 'utf8' });
  if (options.input !== undefined) child.child.stdin?.end(options.input);
  try {
    return (await child).stdout.trim();
  } catch (error) {
    const { stderr } = error as { stderr?: string };
    throw new Error(`podman ${args.join(' ')}: ${stderr ?? error}`);
  }
}

/** A podman command that may fail (a container already gone): nothing is thrown. */
export const podmanQuietly = (args: string[]) => podman(args).catch(() => '');

const exists = async (image: string) => {
  try {
    await podman(['image', 'exists', image]);
    return true;
  } catch {
    return false;
  }
};

/** `image` made from Debian trixie's minimal base with `packages`, once per machine. */
async function debianImage(image: string, packages: string[]): Promise<string> {
  if (await exists(image)) return image;
  const dir = mkdtempSync(join(tmpdir(), 'tourops-base-'));
  try {
    const tarball = join(dir, 'base.tar');
    const include = `--include=${packages.join(',')}`;
    await run('mmdebstrap', ['--variant=minbase', include, 'trixie', tarball], {
      maxBuffer: 64 * 1024 * 1024,
    });
    await podman(['import', tarball, image]);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return image;
}

/** The base image made from Debian's packages: Node 20.19 from trixie. */
const debianBase = () =>
  debianImage('localhost/tourops-base:trixie', ['ca-certificates', 'nodejs']);

/**
 * Stand-ins for the official postgres, redis and haproxy images compose.yaml names, from
 * Debian's packages (test/image/stand-ins): the image of each.
 */
export async function standIns(): Promise<{ postgres: string; redis: string; haproxy: string }> {
  const base = await debianImage('localhost/tourops-services:trixie', [
    'ca-certificates',
    'postgresql',
    'redis-server',
    'haproxy',
    'socat',
  ]);
  const context = join(ROOT, 'test/image/stand-ins');
  const build = (target: string, tag: string) =>
    podman(['build', '--build-arg', `BASE=${base}`, '--target', target, '--tag', tag, context]);
  await build('postgres', 'localhost/tourops-postgres:test');
  await build('services', 'localhost/tourops-services:test');
  return {
    postgres: 'localhost/tourops-postgres:test',
    redis: 'localhost/tourops-services:test',
    haproxy: 'localhost/tourops-services:test',
  };
}

/** `podman-compose <args>` (Debian's), with podman's configuration: its output. */
export async function compose(args: string[], cwd: string): Promise<string> {
  try {
    const { stdout } = await run('podman-compose', args, { cwd, env, maxBuffer: 64 * 1024 * 1024 });
    return stdout.trim();
  } catch (error) {
    const { stderr, stdout } = error as { stderr?: string; stdout?: string };
    throw new Error(`podman-compose ${args.join(' ')}: ${stdout ?? ''}${stderr ?? error}`);
  }
}

export const IMAGE = 'localhost/tourops:test';

/**
 * Builds the Containerfile into IMAGE (podman's layer cache makes a rebuild of unchanged layers
 * quick), its labels from package.json and git; BASE_IMAGE from the environment, or the Debian
 * base. A CA bundle of the machine's (a TLS-inspecting proxy's) goes to npm as the `ca` secret.
 */
export async function buildImage(): Promise<{ version: string; revision: string }> {
  const base = process.env.BASE_IMAGE ?? (await debianBase());
  const version = JSON.parse(
    (await run('node', ['-p', 'JSON.stringify(require("./package.json"))'], { cwd: ROOT })).stdout,
  ).version as string;
  const revision = (await run('git', ['rev-parse', 'HEAD'], { cwd: ROOT })).stdout.trim();
  const ca = process.env.NODE_EXTRA_CA_CERTS;
  await podman([
    'build',
    '--format',
    'docker',
    '--network',
    'host',
    ...(ca && existsSync(ca) ? ['--secret', `id=ca,src=${ca}`] : []),
    '--build-arg',
    `BASE_IMAGE=${base}`,
    '--build-arg',
    `VERSION=${version}`,
    '--build-arg',
    `REVISION=${revision}`,
    '--tag',
    IMAGE,
    ROOT,
  ]);
  return { version, revision };
}

/**
 * The quick start's container, detached: IMAGE on the host's network listening on
 * 127.0.0.1:`port` (so that it reaches a receiver on this machine's loopback), its root
 * filesystem read-only, `volume` at /data; `env` and `mounts` (`--volume` values) besides.
 */
export async function runOnLoopback(options: {
  name: string;
  port: number;
  volume: string;
  env?: Record<string, string>;
  mounts?: string[];
}): Promise<void> {
  const env = { HOST: '127.0.0.1', PORT: String(options.port), ...options.env };
  await podman([
    'run',
    '--detach',
    '--name',
    options.name,
    '--read-only',
    '--network',
    'host',
    ...[`${options.volume}:/data`, ...(options.mounts ?? [])].flatMap((m) => ['--volume', m]),
    ...Object.entries(env).flatMap(([key, value]) => ['--env', `${key}=${value}`]),
    IMAGE,
  ]);
}

/** A name of this run's own, for a container, a volume or a network. */
export const unique = (what: string) => `tourops-test-${what}-${randomBytes(4).toString('hex')}`;
