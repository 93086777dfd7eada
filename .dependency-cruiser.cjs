// The layers of src/, top to bottom (docs/development.md "Layout"): entry points (src/*.ts at the
// top: runtime, serve, start-worker, cluster, main, demo; src/cli) → delivery (the engine) and
// http (Fastify) → services → repositories and rate-limit → db → config → domain, lib,
// notifications and transformations (the sandbox). An import may only point down; the entry
// points are the only files not listed.
const layer = (name) => `^src/${name}(/|\\.ts$)`;
const below = {
  lib: [],
  domain: ['lib'],
  notifications: ['lib', 'domain'],
  transformations: ['lib', 'domain'],
  config: ['lib', 'domain'],
  'startup-error': ['lib', 'domain', 'config'],
  db: ['lib', 'domain', 'config'],
  repositories: ['lib', 'domain', 'db'],
  'rate-limit': ['lib', 'domain', 'config', 'db'],
  services: ['lib', 'domain', 'notifications', 'transformations', 'config', 'db', 'repositories'],
  http: ['lib', 'domain', 'transformations', 'config', 'db', 'repositories', 'rate-limit', 'services'],
  delivery: [
    'lib',
    'domain',
    'notifications',
    'transformations',
    'config',
    'db',
    'repositories',
    'rate-limit',
    'services',
  ],
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
      name: 'engine-never-imports-an-entry-point',
      severity: 'error',
      comment:
        'src/delivery is run by the entry points (runtime, start-worker, serve); it is handed what it needs.',
      from: { path: '^src/delivery/', pathNot: '\\.test\\.ts$' },
      to: { path: '^src/([^/]+\\.ts|cli/)', pathNot: '^src/(config|startup-error)\\.ts$' },
    },
    // Inside src/http: the request pipeline and the reference the API serves about itself sit
    // below the routes; public and admin routes share them but never each other.
    {
      name: 'http-pipeline-stays-below',
      severity: 'error',
      comment: 'src/http/pipeline is what every request goes through: it knows no route or page.',
      from: { path: '^src/http/pipeline/', pathNot: '\\.test\\.ts$' },
      to: { path: '^src/http/', pathNot: '^src/http/pipeline/' },
    },
    {
      name: 'http-reference-stays-below-routes',
      severity: 'error',
      comment: 'src/http/reference describes the API; it may use the schemas, not the routes.',
      from: { path: '^src/http/reference/' },
      to: { path: '^src/http/(routes|admin)/|^src/http/(app|public-api)\\.ts$' },
    },
    {
      name: 'http-public-and-admin-routes-apart',
      severity: 'error',
      comment: 'Shared shapes live in src/http/schemas.ts, not in the other API\'s routes.',
      from: { path: '^src/http/(routes|admin)/' },
      to: { path: '^src/http/(routes|admin)/', pathNot: '^src/http/$1/' },
    },
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
