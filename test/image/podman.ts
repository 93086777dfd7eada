import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
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

/** The base image made from Debian's packages (Node 20.19 from trixie), once per machine. */
const DEBIAN_BASE = 'localhost/tourops-base:trixie';

async function debianBase(): Promise<string> {
  if (await exists()) return DEBIAN_BASE;
  const dir = mkdtempSync(join(tmpdir(), 'tourops-base-'));
  const tarball = join(dir, 'base.tar');
  await run(
    'mmdebstrap',
    ['--variant=minbase', '--include=ca-certificates,nodejs', 'trixie', tarball],
    {
      maxBuffer: 64 * 1024 * 1024,
    },
  );
  await podman(['import', tarball, DEBIAN_BASE]);
  return DEBIAN_BASE;
}

const exists = async () => {
  try {
    await podman(['image', 'exists', DEBIAN_BASE]);
    return true;
  } catch {
    return false;
  }
};

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

/** A name of this run's own, for a container, a volume or a network. */
export const unique = (what: string) => `tourops-test-${what}-${randomBytes(4).toString('hex')}`;
