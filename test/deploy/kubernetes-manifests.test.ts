// deploy/kubernetes/ as an operator applies it: both overlays rendered by `kubectl kustomize`,
// every object checked against the OpenAPI schemas of Kubernetes 1.36 (kubernetes-models) and the
// prometheus-operator CRDs, unknown fields refused as `kubectl apply` (strict validation) does,
// and the settings the pods get read by the service's own config loader. Then what the manifests
// promise: probes, drain timing, restricted pods, secrets as files, the migration Job, the h2c
// Service, the PDB and HPA, the generated PrometheusRule.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import proxyaddr from "@fastify/proxy-addr";
import YAML from "yaml";
import { isLoopbackHost, loadConfig, type Config } from "../../src/config/config.js";
import { newTempDir, TEST_MASTER_KEY, TEST_OPERATOR_TOKEN } from "../helpers/backend.js";
import { ALERT_RULES_FILE, PROMETHEUS_RULE_FILE, prometheusRuleOf } from "../../scripts/generate-kubernetes.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
const KUBERNETES_DIR = path.join(root, "deploy/kubernetes");

/** A rendered object, as loose JSON: the schema validation below is what checks its shape. */
type Json = Record<string, any>;

/** `kubectl kustomize` of an overlay, as objects. kubectl missing is a failure that says how to get it. */
function render(overlay: "dev" | "production"): Json[] {
  const result = spawnSync("kubectl", ["kustomize", path.join(KUBERNETES_DIR, "overlays", overlay)], {
    encoding: "utf8",
  });
  if (result.error && (result.error as NodeJS.ErrnoException).code === "ENOENT") {
    assert.fail(
      "kubectl is not on PATH: the manifests are rendered with `kubectl kustomize` (kubectl 1.27+ with kustomize v5; " +
        "Debian: apt-get install kubernetes-client is too old, take kubectl from your Kubernetes distribution)",
    );
  }
  assert.equal(result.status, 0, `kubectl kustomize overlays/${overlay} failed:\n${result.stderr}`);
  return YAML.parseAllDocuments(result.stdout).map((document) => document.toJSON() as Json);
}

/** The schema model class of an object's apiVersion and kind (the core group is `v1`). */
async function modelOf(object: Json): Promise<{ new (data: Json): { validate(): void } }> {
  const apiVersion = String(object.apiVersion);
  const module = apiVersion.startsWith("monitoring.coreos.com/")
    ? `@kubernetes-models/prometheus-operator/${apiVersion}`
    : `kubernetes-models/${apiVersion}`;
  const models = (await import(module)) as Record<string, { new (data: Json): { validate(): void } }>;
  const model = models[String(object.kind)];
  assert.ok(model, `no schema for ${apiVersion} ${object.kind}`);
  return model;
}

/** The schema's complaints about an object (empty when it is valid). */
function schemaErrors(model: { new (data: Json): { validate(): void } }, object: Json): string[] {
  try {
    new model(object).validate();
    return [];
  } catch (error) {
    const errors = (error as { errors?: { instancePath: string; message?: string }[] }).errors;
    return errors ? errors.map((e) => `${e.instancePath} ${e.message ?? ""}`) : [String(error)];
  }
}

/**
 * Fields the schema does not know. The compiled schemas ignore unknown properties, where the API
 * server's strict field validation refuses them; so each property in turn is given a value no
 * type accepts: a known one then fails validation, an unknown one does not.
 */
function unknownFields(model: { new (data: Json): { validate(): void } }, object: Json): string[] {
  const unknown: string[] = [];
  const visit = (value: unknown, at: string[]): void => {
    if (Array.isArray(value)) value.forEach((item, index) => visit(item, [...at, String(index)]));
    else if (value !== null && typeof value === "object") {
      for (const key of Object.keys(value)) {
        const probe = structuredClone(object);
        let parent: Json = probe;
        for (const step of at) parent = parent[step] as Json;
        parent[key] = Symbol("probe");
        if (schemaErrors(model, probe).length === 0) unknown.push([...at, key].join("."));
        else visit((value as Json)[key], [...at, key]);
      }
    }
  };
  visit(object, []);
  return unknown;
}

function only(objects: Json[], kind: string, name?: string): Json {
  const found = objects.filter((o) => o.kind === kind && (name === undefined || o.metadata.name === name));
  assert.equal(found.length, 1, `one ${kind}${name ? ` ${name}` : ""} expected, found ${found.length}`);
  return found[0]!;
}

/** The environment a workload's container gets: envFrom ConfigMaps of the same rendering, then env. */
function containerEnv(objects: Json[], container: Json): Record<string, string> {
  const env: Record<string, string> = {};
  for (const source of (container.envFrom ?? []) as Json[]) {
    assert.ok(source.configMapRef, "envFrom takes ConfigMaps only (secrets come as files)");
    Object.assign(env, only(objects, "ConfigMap", source.configMapRef.name).data);
  }
  for (const variable of (container.env ?? []) as Json[]) {
    assert.ok(variable.value !== undefined, `${variable.name}: plain values only (secrets come as files)`);
    env[variable.name] = String(variable.value);
  }
  return env;
}

/**
 * Where each *_FILE setting points: a file of a mounted Secret volume that lists it. Returns the
 * setting's name without _FILE for each.
 */
function secretFiles(podSpec: Json, container: Json, env: Record<string, string>): string[] {
  const names: string[] = [];
  for (const [name, file] of Object.entries(env).filter(([name]) => name.endsWith("_FILE"))) {
    const mount = ((container.volumeMounts ?? []) as Json[]).find((m) => file.startsWith(`${m.mountPath}/`));
    assert.ok(mount, `${name}=${file} is under no mounted volume`);
    assert.equal(mount.readOnly, true, `${name}: the secret volume is mounted read-only`);
    const volume = ((podSpec.volumes ?? []) as Json[]).find((v) => v.name === mount.name);
    assert.ok(volume?.secret, `${name}=${file} is not in a Secret volume`);
    const item = path.posix.relative(mount.mountPath, file);
    assert.ok(
      ((volume.secret.items ?? []) as Json[]).some((i) => i.path === item),
      `${name}: the Secret volume lists no item ${item} (a missing key must stop the pod, not the start)`,
    );
    names.push(name.slice(0, -"_FILE".length));
  }
  return names;
}

/** A valid value for each secret setting, written where a *_FILE setting will read it. */
const SECRET_SAMPLES: Record<string, string> = {
  MASTER_KEY: TEST_MASTER_KEY,
  OPERATOR_TOKEN: TEST_OPERATOR_TOKEN,
  DATABASE_URL: "postgres://auth_app:password@postgres.example:5432/auth",
  DATABASE_DIRECT_URL: "postgres://auth_app:password@postgres.example:5432/auth",
  REDIS_URL: "redis://:password@redis.example:6379",
};

/**
 * The service's config loader on a container's environment, the secret files replaced by sample
 * files. Every variable the manifest sets must be one the loader reads: a misspelt or retired name
 * would be ignored at start, silently. The names read are recorded from the loader itself.
 */
function configOf(env: Record<string, string>, secrets: string[]): Config {
  const dir = newTempDir();
  const given: Record<string, string> = { ...env };
  for (const name of secrets) {
    const sample = SECRET_SAMPLES[name];
    assert.ok(sample, `no sample value for the secret setting ${name}`);
    const file = path.join(dir, name);
    fs.writeFileSync(file, `${sample}\n`);
    given[`${name}_FILE`] = file;
  }
  const read = new Set<string>();
  const recording = new Proxy(given, {
    get: (target, name) => {
      if (typeof name === "string") read.add(name);
      return Reflect.get(target, name) as unknown;
    },
    has: (target, name) => {
      if (typeof name === "string") read.add(name);
      return Reflect.has(target, name);
    },
  });
  const config = loadConfig(recording);
  const unread = Object.keys(env).filter((name) => !read.has(name));
  assert.deepEqual(unread, [], `set by the manifests but never read by src/config/config.ts: ${unread.join(", ")}`);
  return config;
}

/** The pod template of a Deployment or Job with its one container. */
function podOf(workload: Json): { spec: Json; container: Json } {
  const spec = workload.spec.template.spec as Json;
  assert.equal(spec.containers.length, 1, `${workload.kind} ${workload.metadata.name}: one container`);
  return { spec, container: spec.containers[0] as Json };
}

function matches(selector: Json, labels: Json): boolean {
  return Object.entries(selector.matchLabels as Json).every(([key, value]) => labels[key] === value);
}

/** An overlay rendered once (in the first test that asks: a failure to render fails each test) and its Deployment read. */
const views = new Map<string, ReturnType<typeof readOverlay>>();
function viewOf(overlay: "dev" | "production"): ReturnType<typeof readOverlay> {
  if (!views.has(overlay)) views.set(overlay, readOverlay(overlay));
  return views.get(overlay)!;
}

function readOverlay(overlay: "dev" | "production") {
  const objects = render(overlay);
  const deployment = only(objects, "Deployment");
  const { spec, container } = podOf(deployment);
  const env = containerEnv(objects, container);
  const secrets = secretFiles(spec, container, env);
  const config = configOf(env, secrets);
  const serverLabels = deployment.spec.template.metadata.labels as Json;
  return { objects, deployment, spec, container, env, secrets, config, serverLabels };
}

const packageVersion = (JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8")) as { version: string })
  .version;

for (const overlay of ["dev", "production"] as const) {
  describe(`deploy/kubernetes/overlays/${overlay}`, () => {
    it("every object is valid against its Kubernetes 1.36 (or prometheus-operator) schema, no unknown field", async () => {
      const { objects } = viewOf(overlay);
      assert.ok(objects.length > 0);
      for (const object of objects) {
        const model = await modelOf(object);
        const what = `${object.kind} ${object.metadata?.name}`;
        assert.deepEqual(schemaErrors(model, object), [], `${what} fails its schema`);
        assert.deepEqual(unknownFields(model, object), [], `${what} has fields its schema does not know`);
      }
    });

    it("every pod is restricted (non-root, read-only root, no capabilities, RuntimeDefault seccomp) with a tmp emptyDir", () => {
      const { objects } = viewOf(overlay);
      const workloads = objects.filter((o) => o.kind === "Deployment" || o.kind === "Job");
      assert.ok(workloads.length > 0);
      for (const workload of workloads) {
        const { spec, container } = podOf(workload);
        const what = `${workload.kind} ${workload.metadata.name}`;
        assert.equal(spec.securityContext.runAsNonRoot, true, what);
        assert.equal(spec.securityContext.seccompProfile.type, "RuntimeDefault", what);
        assert.equal(container.securityContext.allowPrivilegeEscalation, false, what);
        assert.equal(container.securityContext.readOnlyRootFilesystem, true, what);
        assert.deepEqual(container.securityContext.capabilities.drop, ["ALL"], what);
        assert.equal(spec.automountServiceAccountToken, false, what);
        assert.equal(
          spec.enableServiceLinks,
          false,
          `${what}: Service links would set ADMIN_PORT=tcp://… and the like`,
        );
        const tmp = (container.volumeMounts as Json[]).find((m) => m.mountPath === "/tmp");
        assert.ok(
          (spec.volumes as Json[]).some((v) => v.name === tmp?.name && v.emptyDir),
          `${what}: /tmp is an emptyDir`,
        );
        assert.equal(container.image, `localhost/auth-service:${packageVersion}`, `${what}: the image of this version`);
      }
    });

    it("DATA_DIR is a writable volume: the root filesystem is read-only, and every start writes its record there", () => {
      const { spec, container, config } = viewOf(overlay);
      const mount = (container.volumeMounts as Json[]).find((m) => m.mountPath === config.storage.dataDir);
      assert.ok(mount, `nothing mounted at DATA_DIR ${config.storage.dataDir}`);
      assert.notEqual(mount.readOnly, true);
      const volume = (spec.volumes as Json[]).find((v) => v.name === mount.name);
      assert.ok(volume?.emptyDir || volume?.persistentVolumeClaim, `${mount.name}: an emptyDir or a claim`);
    });

    it("the Services: REST and gRPC on one h2c port, and the admin port, both on the config's ports", () => {
      const { objects } = viewOf(overlay);
      const deployment = only(objects, "Deployment");
      const { spec, container } = podOf(deployment);
      const config = configOf(
        containerEnv(objects, container),
        secretFiles(spec, container, containerEnv(objects, container)),
      );
      const portNamed = (name: string) => (container.ports as Json[]).find((p) => p.name === name)?.containerPort;
      assert.equal(portNamed("http"), config.http.port);
      assert.equal(portNamed("admin"), config.http.admin?.port);
      const services = objects.filter((o) => o.kind === "Service");
      for (const service of services)
        assert.ok(matches({ matchLabels: service.spec.selector }, deployment.spec.template.metadata.labels));
      const publicPort = only(objects, "Service", "travel-auth").spec.ports[0] as Json;
      assert.equal(publicPort.targetPort, "http");
      assert.equal(publicPort.appProtocol, "kubernetes.io/h2c");
      if (overlay === "production")
        assert.equal((only(objects, "Service", "travel-auth-admin").spec.ports[0] as Json).targetPort, "admin");
      // Without a NetworkPolicy in front, the operator surface stays on the pod's loopback.
      else assert.ok(config.http.admin && isLoopbackHost(config.http.admin.host));
    });

    it("probes: startup and liveness on /healthz, readiness on /readyz; startup outlasts the waits for the database and the migration job", () => {
      const { objects } = viewOf(overlay);
      const { spec, container } = podOf(only(objects, "Deployment"));
      const env = containerEnv(objects, container);
      const config = configOf(env, secretFiles(spec, container, env));
      assert.equal(container.startupProbe.httpGet.path, "/healthz");
      assert.equal(container.readinessProbe.httpGet.path, "/readyz");
      for (const probe of [container.startupProbe, container.readinessProbe]) assert.equal(probe.httpGet.port, "http");
      const startupSeconds = container.startupProbe.periodSeconds * container.startupProbe.failureThreshold;
      const waitsSeconds = (config.storage.migrationWaitTimeoutMs + config.storage.databaseStartupWaitMs) / 1000;
      assert.ok(
        startupSeconds >= waitsSeconds,
        `startup probe gives ${startupSeconds} s, the start may wait ${waitsSeconds} s`,
      );
      if (overlay === "production") assert.equal(container.livenessProbe.httpGet.path, "/healthz");
    });
  });
}

describe("deploy/kubernetes/overlays/dev: one replica on the embedded default, runnable by `podman kube play`", () => {
  it("one replica, never two on the volume; no Postgres, no Redis; DATA_DIR on the one persistent volume", () => {
    const { objects, deployment, spec, container, env } = viewOf("dev");
    assert.equal(deployment.spec.replicas, 1);
    assert.equal(deployment.spec.strategy.type, "Recreate");
    const config = configOf(env, secretFiles(spec, container, env));
    assert.equal(config.storage.databaseUrl, undefined);
    assert.equal(config.storage.redisUrl, undefined);
    const persistent = (spec.volumes as Json[]).filter((v) => v.persistentVolumeClaim);
    assert.equal(persistent.length, 1);
    const mount = (container.volumeMounts as Json[]).find((m) => m.name === persistent[0]!.name);
    assert.equal(mount?.mountPath, config.storage.dataDir);
    only(objects, "PersistentVolumeClaim", persistent[0]!.persistentVolumeClaim.claimName);
  });

  it("only what podman 4.3's kube play runs or skips: volume types it knows, no liveness probe (it would run curl)", () => {
    const { objects, spec, container } = viewOf("dev");
    // podman kube play creates Pods, Deployments, PVCs, ConfigMaps and Secrets, and skips other kinds.
    const skipped = new Set(["Service", "ServiceAccount"]);
    const played = new Set(["Deployment", "PersistentVolumeClaim", "ConfigMap"]);
    for (const object of objects) assert.ok(played.has(object.kind) || skipped.has(object.kind), object.kind);
    for (const volume of spec.volumes as Json[]) {
      const type = Object.keys(volume).filter((key) => key !== "name");
      assert.ok(
        type.every((t) => ["emptyDir", "persistentVolumeClaim", "hostPath", "configMap"].includes(t)),
        `${volume.name}: ${type}`,
      );
    }
    assert.equal(container.livenessProbe, undefined);
    assert.equal(container.lifecycle, undefined);
  });
});

describe("deploy/kubernetes/overlays/production", () => {
  it("three replicas at least, by the HPA (the Deployment leaves replicas to it); a PDB keeps all but one", () => {
    const { objects, deployment, spec, serverLabels } = viewOf("production");
    assert.equal(deployment.spec.replicas, undefined);
    const hpa = only(objects, "HorizontalPodAutoscaler");
    assert.equal(hpa.spec.minReplicas, 3);
    assert.ok(hpa.spec.maxReplicas > hpa.spec.minReplicas);
    assert.deepEqual(hpa.spec.scaleTargetRef, {
      apiVersion: "apps/v1",
      kind: "Deployment",
      name: deployment.metadata.name,
    });
    const pdb = only(objects, "PodDisruptionBudget");
    assert.ok(matches(pdb.spec.selector, serverLabels));
    assert.equal(pdb.spec.maxUnavailable, 1);
    assert.equal(deployment.spec.strategy.rollingUpdate.maxUnavailable, 0);
    assert.ok(spec.topologySpreadConstraints.some((c: Json) => c.topologyKey === "kubernetes.io/hostname"));
  });

  it("Postgres and Redis from secret files; the instances leave migrations to the Job", () => {
    const { env, secrets, config } = viewOf("production");
    assert.deepEqual(secrets.sort(), ["DATABASE_URL", "MASTER_KEY", "OPERATOR_TOKEN", "REDIS_URL"]);
    assert.equal(config.storage.databaseUrl, SECRET_SAMPLES.DATABASE_URL);
    assert.equal(config.storage.redisUrl, SECRET_SAMPLES.REDIS_URL);
    assert.equal(config.secrets.masterKey?.value, TEST_MASTER_KEY);
    assert.equal(env.MIGRATE_ON_START, "false");
    assert.equal(config.storage.migrateOnStart, false);
  });

  it("the migration Job: the CLI's migrate, with the same image, settings and secrets, in-process", () => {
    const { objects, container, config, serverLabels } = viewOf("production");
    const job = only(objects, "Job");
    const pod = podOf(job);
    assert.deepEqual(pod.container.args, ["dist/src/cli/main.js", "migrate"]);
    assert.equal(pod.container.image, container.image);
    const jobEnv = containerEnv(objects, pod.container);
    const jobConfig = configOf(jobEnv, secretFiles(pod.spec, pod.container, jobEnv));
    assert.equal(jobConfig.storage.databaseUrl, config.storage.databaseUrl);
    assert.equal(jobConfig.storage.databaseSchema, config.storage.databaseSchema);
    // The CLI asks the admin URL first: nothing may answer there in the Job's pod, or an older
    // running server would be asked to migrate.
    assert.match(jobConfig.adminUrl, /^http:\/\/127\.0\.0\.1:/);
    // Its pods are no server: the Services, PDB and HPA must not count them.
    assert.notEqual(
      job.spec.template.metadata.labels["app.kubernetes.io/component"],
      serverLabels["app.kubernetes.io/component"],
    );
    assert.ok(job.spec.activeDeadlineSeconds * 1000 > jobConfig.storage.migrationLockTimeoutMs);
  });

  it("on deletion: the preStop sleep, then the service's drain and shutdown, all inside the grace period", () => {
    const { spec, container, config } = viewOf("production");
    const preStop = container.lifecycle.preStop.sleep.seconds as number;
    assert.ok(preStop > 0);
    const shutdownSeconds = config.http.shutdownDeadlineMs / 1000;
    assert.ok(config.http.shutdownDeadlineMs >= config.http.shutdownDrainMs + config.http.shutdownTimeoutMs);
    assert.ok(
      spec.terminationGracePeriodSeconds >= preStop + shutdownSeconds,
      `grace ${spec.terminationGracePeriodSeconds} s < preStop ${preStop} s + SHUTDOWN_DEADLINE_MS ${shutdownSeconds} s`,
    );
    assert.equal(container.livenessProbe.httpGet.path, "/healthz");
  });

  it("requests and limits cover what the bench measured (bench/results.json)", () => {
    const { container } = viewOf("production");
    const results = JSON.parse(fs.readFileSync(path.join(root, "bench/results.json"), "utf8")) as {
      memory: { serviceRssAfterRoundBytes: number[] };
      scaling: { steps: { instances: number; instanceCpuPercentOfCore: number[] }[] };
    };
    const bytes = (quantity: string) => {
      const match = /^(\d+)(Mi|Gi)$/.exec(quantity);
      assert.ok(match, quantity);
      return Number(match[1]) * 2 ** (match[2] === "Gi" ? 30 : 20);
    };
    const cores = (quantity: string) =>
      quantity.endsWith("m") ? Number(quantity.slice(0, -1)) / 1000 : Number(quantity);
    const { requests, limits } = container.resources as { requests: Json; limits: Json };
    const rss = Math.max(...results.memory.serviceRssAfterRoundBytes);
    assert.ok(bytes(requests.memory) >= rss, `memory request ${requests.memory} below the measured RSS ${rss} B`);
    assert.ok(bytes(limits.memory) > bytes(requests.memory));
    const saturated = Math.max(...results.scaling.steps.find((s) => s.instances === 1)!.instanceCpuPercentOfCore) / 100;
    assert.ok(
      cores(limits.cpu) >= saturated,
      `a saturated instance used ${saturated} cores: the limit must not throttle it`,
    );
    assert.ok(cores(requests.cpu) >= 1, "one event loop: a core per instance (docs/scaling.md)");
  });

  it("the NetworkPolicy admits the public port from the ingress controller only, whose addresses TRUSTED_PROXIES trusts", () => {
    const { objects, config, serverLabels } = viewOf("production");
    const policy = only(objects, "NetworkPolicy");
    assert.ok(matches(policy.spec.podSelector, serverLabels));
    const rulesFor = (port: string) =>
      (policy.spec.ingress as Json[]).filter((rule) => (rule.ports as Json[]).some((p) => p.port === port));
    for (const port of ["http", "admin"]) {
      const rules = rulesFor(port);
      assert.equal(rules.length, 1, port);
      assert.ok(rules[0]!.from.length > 0, `${port}: some peers, not everyone`);
      for (const peer of rules[0]!.from as Json[])
        assert.ok(Object.keys(peer.namespaceSelector?.matchLabels ?? {}).length > 0);
    }
    assert.notDeepEqual(rulesFor("http")[0]!.from, rulesFor("admin")[0]!.from);
    assert.ok(config.http.trustedProxies.length > 0);
    proxyaddr.compile([...config.http.trustedProxies]);
  });

  it("the PrometheusRule is deploy/prometheus-alerts.yml, as `npm run generate:kubernetes` makes it", async () => {
    const { objects } = viewOf("production");
    const source = fs.readFileSync(ALERT_RULES_FILE, "utf8");
    assert.equal(
      fs.readFileSync(PROMETHEUS_RULE_FILE, "utf8"),
      await prometheusRuleOf(source),
      "deploy/kubernetes/overlays/production/prometheus-rule.yaml is stale: run npm run generate:kubernetes",
    );
    assert.deepEqual(only(objects, "PrometheusRule").spec, YAML.parse(source));
    const monitor = only(objects, "ServiceMonitor");
    assert.ok(matches(monitor.spec.selector, only(objects, "Service", "travel-auth-admin").metadata.labels));
  });
});
