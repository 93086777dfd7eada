// The layers of src/, top to bottom (README "Layout"): entry points (cli, main, serve, demo,
// runtime) → webhooks (the delivery worker) and http (Fastify) → services → repositories and
// rate-limit → db → config → domain, lib and notifications. An import may only point down.
const layer = (name) => `^src/${name}(/|\\.ts$)`;
const below = {
  lib: [],
  domain: ['lib'],
  notifications: ['lib', 'domain'],
  config: ['lib', 'domain'],
  'startup-error': ['lib', 'domain', 'config'],
  db: ['lib', 'domain', 'config'],
  repositories: ['lib', 'domain', 'db'],
  'rate-limit': ['lib', 'domain', 'config', 'db'],
  services: ['lib', 'domain', 'notifications', 'config', 'db', 'repositories'],
  http: ['lib', 'domain', 'config', 'db', 'repositories', 'rate-limit', 'services'],
  webhooks: ['lib', 'domain', 'notifications', 'config', 'db', 'repositories', 'services', 'runtime'],
};
const layers = Object.keys(below);

module.exports = {
  forbidden: [
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'Import circles make the load order and the layers ambiguous.',
      from: { path: '^src/' },
      to: { circular: true },
    },
    ...layers.map((name) => ({
      name: `${name}-imports-only-below`,
      severity: 'error',
      comment: `src/${name} may import only ${below[name].join(', ') || 'itself'} (and packages).`,
      from: { path: layer(name), pathNot: '\\.test\\.ts$' },
      to: {
        path: '^src/',
        pathNot: [layer(name), ...below[name].map(layer)],
      },
    })),
    {
      name: 'src-never-imports-tests-or-bench',
      severity: 'error',
      from: { path: '^src/', pathNot: '\\.test\\.ts$' },
      to: { path: '^(test|bench|scripts)/' },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    exclude: { path: '\\.test\\.ts$' },
  },
};
