// @ts-check
/**
 * The layering rules of src/ and gen/, as a dependency-cruiser configuration.
 *
 * `configFor({ src, gen })` builds the rule set for source roots at other places (the test runs
 * it on a small fixture too, to prove the rules can fail); `module.exports` itself is the
 * configuration for the real tree, so the CLI can use the same rules:
 *
 *   npx depcruise src gen --config test/unit/architecture/dependency-rules.cjs
 *
 * Every import counts, type-only ones included (tsPreCompilationDeps): a layer that names
 * another layer's types depends on it even if the import vanishes when compiled.
 */

/** The files of packages/ that src/ may import (rule 14), wherever the tree is rooted. */
const SHARED_FROM_PACKAGES = "(^|/)packages/verifier/src/(jws|token-format|dpop-proof)\\.ts$";

/** Escapes a path for use inside a regular expression. */
const esc = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");

/**
 * @param {{ src?: string; gen?: string; tsConfig?: string }} [roots] source roots relative to
 *   the cruise's base directory, without trailing slashes
 * @returns {import("dependency-cruiser").IConfiguration}
 */
function configFor({ src = "src", gen = "gen", tsConfig = "tsconfig.json" } = {}) {
  const S = `^${esc(src)}/`;
  const G = `^${esc(gen)}/`;
  /** A folder of src, as a path regex: `in_("domain")` → ^src/domain/ */
  const in_ = (...folders) => `${S}(${folders.join("|")})/`;
  const npm = ["npm", "npm-dev", "npm-optional", "npm-peer", "npm-bundled", "npm-no-pkg", "npm-unknown"];

  return {
    forbidden: [
      {
        name: "no-circular",
        comment: "1. No circular dependencies anywhere in src/.",
        severity: "error",
        from: { path: S },
        to: { circular: true },
      },
      {
        name: "errors-imports-only-errors",
        comment: "2. src/errors imports nothing in src/ outside src/errors.",
        severity: "error",
        from: { path: in_("errors") },
        to: { path: S, pathNot: in_("errors") },
      },
      {
        name: "config-imports-only-config-and-errors",
        comment:
          "3. src/config may import values only from src/config and src/errors (and no generated code). It may `import type` a settings group from the layer that takes it whole, so each config shape is declared once, by its user; config stays a leaf at run time (a type import from app/ or cli/ would be a cycle, rule 1). One exception: src/store/data-dir.ts, a leaf (node:fs only) that makes DATA_DIR, where config writes the secrets it generates; one maker for every writer, since Node's recursive mkdir spins forever under /proc.",
        severity: "error",
        from: { path: in_("config") },
        to: {
          path: `${S}|${G}`,
          pathNot: [in_("config", "errors"), `${S}store/data-dir\\.ts$`],
          dependencyTypesNot: ["type-only"],
        },
      },
      {
        name: "domain-imports-only-domain-and-errors",
        comment: "4. src/domain may import only src/domain and src/errors: never gen/ or another src layer.",
        severity: "error",
        from: { path: in_("domain") },
        to: { path: `${S}|${G}`, pathNot: in_("domain", "errors") },
      },
      {
        name: "domain-npm-only-jose",
        comment:
          "4. Of npm packages the domain may import only jose and the two pure SCIM libraries (scim2-parse-filter, scim-patch: no I/O, no state) (node built-ins are fine).",
        severity: "error",
        from: { path: in_("domain") },
        to: { dependencyTypes: npm, pathNot: "(^|/)node_modules/(jose|scim2-parse-filter|scim-patch)/" },
      },
      {
        name: "domain-area-imports-other-areas-only-by-model-or-ports",
        comment:
          "4. A file in src/domain/<area>/ may import from another area only its model.ts or ports.ts, and anything in src/domain/shared/.",
        severity: "error",
        from: { path: `${S}domain/([^/]+)/` },
        to: {
          path: `${S}domain/(?!$1/|shared/)[^/]+/`,
          pathNot: `${S}domain/[^/]+/(model|ports)\\.ts$`,
        },
      },
      {
        name: "store-imports-only-store-errors-and-domain-contracts",
        comment:
          "5. src/store may import src/store, src/errors and, of src/domain, only **/model.ts, **/ports.ts and src/domain/shared/**; never another layer or gen/.",
        severity: "error",
        from: { path: in_("store") },
        to: {
          path: `${S}|${G}`,
          pathNot: [
            in_("store", "errors"),
            `${S}domain/shared/`,
            `${S}domain/(model|ports)\\.ts$`,
            `${S}domain/.*/(model|ports)\\.ts$`,
          ],
        },
      },
      {
        name: "rpc-not-to-store-gateway-http-app-config-cli",
        comment: "6. src/rpc must not import src/store, src/gateway, src/http, src/app, src/config, src/cli.",
        severity: "error",
        from: { path: in_("rpc") },
        to: { path: in_("store", "gateway", "http", "app", "config", "cli") },
      },
      {
        name: "gateway-not-to-domain-store-http-app-config-cli",
        comment: "7. src/gateway must not import src/domain, src/store, src/http, src/app, src/config, src/cli.",
        severity: "error",
        from: { path: in_("gateway") },
        to: { path: in_("domain", "store", "http", "app", "config", "cli") },
      },
      {
        name: "http-not-to-domain-store-app-config-cli",
        comment: "8. src/http must not import src/domain, src/store, src/app, src/config, src/cli.",
        severity: "error",
        from: { path: in_("http") },
        to: { path: in_("domain", "store", "app", "config", "cli") },
      },
      {
        name: "observability-imports-only-observability",
        comment: "9. src/observability must not import other src layers.",
        severity: "error",
        from: { path: in_("observability") },
        to: { path: S, pathNot: in_("observability") },
      },
      {
        name: "app-only-from-main-and-cli",
        comment: "10. Only src/main.ts and src/cli/** (and test/, bench/) may import src/app/**.",
        severity: "error",
        from: { path: `${S}|${G}`, pathNot: [`${S}main\\.ts$`, in_("cli", "app")] },
        to: { path: in_("app") },
      },
      {
        name: "gen-not-to-src",
        comment: "11. Generated code never imports src/.",
        severity: "error",
        from: { path: G },
        to: { path: S },
      },
      {
        name: "opentelemetry-sdk-only-in-observability",
        comment:
          "12. Of OpenTelemetry, only src/observability (the SDK setup, tracing.ts) may import the SDK and exporter packages; the faces, the RPC core and the stores make their spans with @opentelemetry/api alone (a no-op while tracing is off), naming attributes with @opentelemetry/semantic-conventions (constants only), and the domain imports none of it (rule 4).",
        severity: "error",
        from: { path: S, pathNot: in_("observability") },
        to: { dependencyTypes: npm, path: "(^|/)node_modules/@opentelemetry/(?!api/|semantic-conventions/)" },
      },
      {
        name: "connect-private-sections-only-in-connect-internals",
        comment:
          "13. Connect's sections marked private and outside semver (@connectrpc/connect/protocol, /protocol-connect, /protocol-grpc, /protocol-grpc-web) are imported by src/http/protocol/connect-internals.ts alone, which names the pinned version and why each export is needed: a Connect upgrade is checked in one file (CONTRIBUTING.md, Upgrading Connect).",
        severity: "error",
        from: { path: `${S}|${G}`, pathNot: `${S}http/protocol/connect-internals\\.ts$` },
        to: { dependencyTypes: npm, path: "(^|/)node_modules/@connectrpc/connect/dist/[^/]+/protocol[^/]*/" },
      },
      {
        name: "src-takes-only-the-shared-token-format-from-packages",
        comment:
          "14. Of packages/, src/ may import only the verifier package's JWS module and access-token format (packages/verifier/src/jws.ts, token-format.ts): the one implementation the service and the package's resource servers verify with (CONTRIBUTING.md, \"The JWS module\"). The service's build compiles them in.",
        severity: "error",
        from: { path: S },
        to: { path: "(^|/)packages/", pathNot: SHARED_FROM_PACKAGES },
      },
      {
        name: "shared-token-format-imports-only-node-and-itself",
        comment:
          "15. The shared JWS module and token format import node built-ins and each other only, so the package stays self-contained and the service imports nothing else of it.",
        severity: "error",
        from: { path: SHARED_FROM_PACKAGES },
        to: { dependencyTypesNot: ["core"], pathNot: SHARED_FROM_PACKAGES },
      },
      {
        name: "no-unresolvable",
        comment:
          "Every import of src/ and gen/ resolves: a cruise that cannot resolve sees no edges to judge, and an unresolved package cannot be told from an allowed one.",
        severity: "error",
        from: { path: `${S}|${G}` },
        to: { couldNotResolve: true },
      },
    ],
    options: {
      doNotFollow: { path: "(^|/)node_modules/" },
      tsPreCompilationDeps: true,
      tsConfig: { fileName: tsConfig },
      moduleSystems: ["es6", "cjs"],
      enhancedResolveOptions: {
        exportsFields: ["exports"],
        conditionNames: ["import", "require", "node", "default", "types"],
        mainFields: ["module", "main", "types", "typings"],
      },
    },
  };
}

module.exports = configFor();
// Not enumerable: the CLI clones the configuration, and a function cannot be cloned.
Object.defineProperty(module.exports, "configFor", { value: configFor, enumerable: false });
