import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { describe, test } from "node:test";
import type { DescFile, DescMethodUnary, DescService } from "@bufbuild/protobuf";
import { ConnectError, createConnectRouter } from "@connectrpc/connect";
import ts from "typescript";
import { file_travel_common_v1_error } from "../../../gen/travel/common/v1/error_pb.js";
import { silentLogger } from "../../../src/domain/shared/observability.js";
import { createMetrics } from "../../../src/observability/metrics.js";
import { AREAS, contractServices, reflectionFilesOn, serviceNamesOn, type RpcDomain } from "../../../src/rpc/areas.js";
import { createHealthService } from "../../../src/rpc/health.js";
import { createRpcCore } from "../../../src/rpc/routes.js";

/*
 * The registry of areas (src/rpc/areas.ts) is the one list of the contract's services: every
 * service generated under gen/travel has exactly one record there, everything that serves or lists
 * services derives from it, and no other source file names a service descriptor to serve it.
 */

const root = fileURLToPath(new URL("../../../", import.meta.url));
const tsFilesUnder = (dir: string) =>
  (readdirSync(path.join(root, dir), { recursive: true }) as string[])
    .filter((f) => f.endsWith(".ts"))
    .map((f) => path.join(dir, f));

type Module = Record<string, unknown>;
const isService = (value: unknown): value is DescService => (value as DescService | undefined)?.kind === "service";
const isFile = (value: unknown): value is DescFile => (value as DescFile | undefined)?.kind === "file";

/** Every generated module of the contract (gen/travel), by its path relative to the repository. */
const contractModules = new Map<string, Module>();
for (const file of tsFilesUnder("gen/travel"))
  contractModules.set(file, (await import(pathToFileURL(path.join(root, file)).href)) as Module);
const servicesOfContract = [...contractModules.values()].flatMap((module) => Object.values(module).filter(isService));

/** The services a named export of a generated module stands for: a service descriptor, or a file's. */
const servicesNamedBy = (value: unknown): DescService[] =>
  isService(value) ? [value] : isFile(value) ? value.services : [];

/**
 * Every src file (gen/ aside) that imports or re-exports a service descriptor of the contract, or
 * the file descriptor holding one, by the service's type name: read from the import declarations,
 * so a type-only import counts as well.
 */
function filesNamingServices(): Map<string, Set<string>> {
  const naming = new Map<string, Set<string>>();
  for (const file of tsFilesUnder("src")) {
    const text = readFileSync(path.join(root, file), "utf8");
    if (!text.includes("gen/travel/")) continue;
    const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest);
    for (const statement of source.statements) {
      if (!(ts.isImportDeclaration(statement) || ts.isExportDeclaration(statement))) continue;
      const specifier = statement.moduleSpecifier;
      if (!specifier || !ts.isStringLiteral(specifier) || !specifier.text.startsWith(".")) continue;
      const target = path
        .relative(root, path.resolve(root, path.dirname(file), specifier.text))
        .replace(/\.js$/, ".ts");
      const module = contractModules.get(target);
      if (!module) continue;
      const bindings = ts.isImportDeclaration(statement)
        ? statement.importClause?.namedBindings
        : statement.exportClause;
      // A namespace import (or `export *`) reaches every export of the module.
      const names =
        bindings && (ts.isNamedImports(bindings) || ts.isNamedExports(bindings))
          ? bindings.elements.map((e) => (e.propertyName ?? e.name).text)
          : Object.keys(module);
      for (const service of names.flatMap((name) => servicesNamedBy(module[name]))) {
        const files = naming.get(service.typeName) ?? new Set<string>();
        naming.set(service.typeName, files.add(file));
      }
    }
  }
  return naming;
}

/** A client of a service names it to call it; serving it is the registry's alone. */
const CLIENTS = /^src\/cli\//;

const typeNames = (services: readonly DescService[]) => services.map((s) => s.typeName);

describe("the registry of areas", () => {
  test("has exactly one record for every service of the contract (gen/travel), and nothing else", () => {
    assert.ok(servicesOfContract.length >= 6, `found ${servicesOfContract.length} services under gen/travel`);
    const registered = typeNames(AREAS.map((area) => area.service));
    assert.deepEqual(
      registered.filter((name, i) => registered.indexOf(name) !== i),
      [],
      "a service registered twice",
    );
    assert.deepEqual([...registered].sort(), typeNames(servicesOfContract).sort());
  });

  test("no source file outside an area's record names a service descriptor to serve or list it", async () => {
    const naming = filesNamingServices();
    for (const area of AREAS) {
      const name = area.service.typeName;
      const files = [...(naming.get(name) ?? [])].filter((file) => !CLIENTS.test(file));
      assert.equal(files.length, 1, `${name} is named in ${files.length} source file(s): ${files.join(", ")}`);
      const module = (await import(pathToFileURL(path.join(root, files[0]!)).href)) as Module;
      assert.ok(
        Object.values(module).includes(area),
        `${files[0]} names ${name} but does not export its area's record: the record is the one place that may`,
      );
    }
    // And no descriptor of the contract is named anywhere without a record (the first test covers the registry side).
    assert.deepEqual([...naming.keys()].sort(), typeNames(contractServices).sort());
  });

  test("derives the service lists: the REST gateway's, each face's health and reflection", () => {
    assert.deepEqual(contractServices, typeNames(AREAS.map((a) => a.service)).map(serviceNamed));
    assert.deepEqual(serviceNamesOn("public", false), typeNames(contractServices));
    assert.deepEqual(serviceNamesOn("admin", false), []);
    const admin = AREAS.filter((a) => a.face === "admin").map((a) => a.service.typeName);
    assert.ok(admin.length > 0, "at least one area is served on the admin face");
    assert.deepEqual(serviceNamesOn("admin", true), admin);
    assert.deepEqual(
      serviceNamesOn("public", true),
      typeNames(contractServices).filter((name) => !admin.includes(name)),
    );
    for (const adminFace of [false, true])
      for (const face of ["public", "admin"] as const) {
        const files = reflectionFilesOn(face, adminFace);
        const served = serviceNamesOn(face, adminFace);
        assert.deepEqual(
          files.map((f) => f.proto.name),
          [...new Set([...served.map(serviceNamed).map((s) => s.file), file_travel_common_v1_error])].map(
            (f) => f.proto.name,
          ),
          `reflection on the ${face} face (admin face: ${adminFace}) serves its services' files and the error detail`,
        );
      }
  });

  test("the RPC core routes every area on its face, and calls every one in process", async () => {
    const domain = { verifiers: {} } as RpcDomain;
    const observers = { logger: silentLogger, metrics: createMetrics() };
    const routed = (routes: ((router: ReturnType<typeof createConnectRouter>) => void) | undefined) => {
      const router = createConnectRouter();
      routes?.(router);
      return [...new Set(router.handlers.map((h) => h.service.typeName))];
    };
    const health = createHealthService(async () => true);
    const single = createRpcCore(domain, observers, { health });
    const infrastructure = ["grpc.reflection.v1.ServerReflection", "grpc.reflection.v1alpha.ServerReflection"];
    assert.deepEqual(routed(single.routes), [
      ...serviceNamesOn("public", false),
      ...infrastructure,
      "grpc.health.v1.Health",
    ]);
    assert.equal(single.adminRoutes, undefined);
    const split = createRpcCore(domain, observers, { admin: {} });
    assert.deepEqual(routed(split.routes), serviceNamesOn("public", true));
    assert.deepEqual(routed(split.adminRoutes), serviceNamesOn("admin", true));
    // In process, every service answers: here with whatever the stub domain makes of the call, never "not served".
    for (const { service } of AREAS) {
      const method = service.methods.find((m) => m.methodKind === "unary")!;
      const answer = await single.transport.unary(method as DescMethodUnary, undefined, undefined, undefined, {}).then(
        () => "answered",
        (error: unknown) => ConnectError.from(error).message,
      );
      assert.doesNotMatch(answer, /not served in process/, `${service.typeName}.${method.name}`);
    }
  });
});

function serviceNamed(typeName: string): DescService {
  const service = servicesOfContract.find((s) => s.typeName === typeName);
  assert.ok(service, `${typeName} is a service of the contract`);
  return service;
}
