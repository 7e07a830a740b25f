// Property-based fuzzing of the SCIM-token envelope (src/domain/shared/scim-token.ts), no server:
// Base64 of {"v":1,"kid":…,"scope":"scim","clientId":…,"encryptedSecret":…}, the secret sealed
// with AES-256-GCM under the key deriveKeyMaterial() derives, the clientId as associated data.
// Properties:
//   S1 sealing is total and honest: for a clientId of 1..256 RFC 3986 unreserved characters and
//      a well-formed secret (the empty one included), open(seal(clientId, secret)) gives back
//      exactly both (while the token fits 4096 characters); for any other clientId or a secret
//      with a lone surrogate, sealScimToken throws instead of making a token that opens to
//      something else;
//   S2 openScimToken never throws and yields undefined for arbitrary strings, and for Base64 of
//      arbitrary JSON (any JSON, and envelope-shaped objects with arbitrary field values);
//   S3 mutated genuine envelopes: every change of meaning (a bit flip in any field's decoded
//      bytes, another clientId — swapped in from another envelope or edited —, another or unknown
//      key id, another key under the same id, another version or scope, a field added, removed or
//      retyped) yields undefined; a change that keeps the meaning (key order, whitespace, an
//      equivalent number spelling) yields the original secret or undefined; never anything else:
//      never a wrong secret, never another clientId;
//   S4 a token is opened with the key its kid names only: a key map with several keys opens each
//      key's tokens and nothing else;
//   S5 envelopes forged with the right key (raw AES-GCM, the clientId's UTF-8 as associated data)
//      open only for clientIds of that alphabet: never for a clientId with a lone surrogate, whose
//      UTF-8 it shares with other strings (U+FFFD), nor for control, space or non-ASCII characters.
// Pure CPU: each property runs FUZZ_RUNS × 10 cases (1 000 by default, ~1 s per property).
import assert from "node:assert/strict";
import crypto from "node:crypto";
import { describe, test } from "node:test";
import fc from "fast-check";
import { deriveKeyMaterial, type KeyMaterial } from "../../src/domain/shared/key-material.js";
import { openScimToken, sealScimToken, type ScimEnvelope } from "../../src/domain/shared/scim-token.js";
import { FUZZ_RUNS, FUZZ_SEED, fuzzParams, fuzzUnit, loneSurrogate, show } from "./fuzz-kit.js";

/** The clientIds an envelope may carry (scim-token.ts): 1..256 RFC 3986 unreserved characters. */
const CLIENT_ID = /^[A-Za-z0-9._~-]{1,256}$/;
const wellFormed = (text: string) => !/\p{Surrogate}/u.test(text);

/** Cheap per case, so many more runs than the server properties. */
const RUNS = FUZZ_RUNS * 10;
const MAX_TOKEN_LENGTH = 4096;

const keyMaterial = fc
  .uint8Array({ minLength: 32, maxLength: 64 })
  .map((bytes) => deriveKeyMaterial(Buffer.from(bytes)));
const keysOf = (m: KeyMaterial) => new Map([[m.scimTokenKeyId, m.scimTokenKey]]);

/** clientIds as the service makes them (26 base32 characters), and any others of the alphabet, 1..256 long. */
const clientId = fc.oneof(
  fc.stringMatching(/^[a-z2-7]{26}$/),
  fc.string({ unit: fc.constantFrom(..."ABCXYZabcxyz0189._~-"), minLength: 1, maxLength: 40 }),
  fc.string({ unit: fc.constantFrom(..."az27._~-"), minLength: 200, maxLength: 256 }),
);
/** Any string at all: the alphabet's, and what sealing must refuse (empty, too long, hostile, lone surrogates). */
const anyClientId = fc.oneof(
  clientId,
  fc.string({ unit: fuzzUnit, maxLength: 40 }),
  fc.string({ unit: "binary", minLength: 1, maxLength: 300 }),
  fc
    .tuple(clientId, loneSurrogate, fc.nat())
    .map(([id, unit, at]) => id.slice(0, at % (id.length + 1)) + unit + id.slice(at % (id.length + 1))),
  fc.string({ unit: fc.constantFrom("a", "z"), minLength: 257, maxLength: 300 }),
);
/** Secrets are well-formed text (the service's are base64url), empty included. */
const secret = fc.oneof(
  fc.base64String({ minLength: 0, maxLength: 64 }),
  fc.string({ unit: "binary", maxLength: 200 }),
  fc.constant(""),
);
/** Also secrets that are not well-formed (a lone surrogate cannot survive UTF-8): sealing refuses them. */
const anySecret = fc.oneof(secret, fc.string({ unit: fuzzUnit, maxLength: 40 }));

interface Envelope {
  v: unknown;
  kid: unknown;
  scope: unknown;
  clientId: unknown;
  encryptedSecret: unknown;
  [extra: string]: unknown;
}

const decode = (token: string) => JSON.parse(Buffer.from(token, "base64").toString("utf8")) as Envelope;
const encode = (json: unknown) => Buffer.from(JSON.stringify(json), "utf8").toString("base64");
const encodeText = (text: string) => Buffer.from(text, "utf8").toString("base64");

/** A token sealed with raw AES-256-GCM, bypassing sealScimToken's checks: what holding the key allows. */
function forge(material: KeyMaterial, id: string, plain: Buffer): string {
  const iv = crypto.randomBytes(12);
  const cipher = crypto.createCipheriv("aes-256-gcm", material.scimTokenKey, iv);
  cipher.setAAD(Buffer.from(id, "utf8"));
  const sealed = Buffer.concat([iv, cipher.update(plain), cipher.final(), cipher.getAuthTag()]);
  return encode({
    v: 1,
    kid: material.scimTokenKeyId,
    scope: "scim",
    clientId: id,
    encryptedSecret: sealed.toString("base64url"),
  });
}

/** openScimToken must never throw: a throw is reported as a failure of its own, with the input. */
function open(keys: ReadonlyMap<string, Buffer>, token: string): ScimEnvelope | undefined {
  try {
    return openScimToken(keys, token);
  } catch (error) {
    assert.fail(`openScimToken threw ${String(error)} for ${show(token)}`);
  }
}

/** A change of one genuine envelope; `meaningful`: the decoded envelope says something else. */
type Mutation = {
  name: string;
  meaningful: boolean;
  apply: (token: string, env: Envelope, other: { token: string; env: Envelope; material: KeyMaterial }) => string;
};

const flipBase64url = (text: string, at: number, bit: number) => {
  const bytes = Buffer.from(text, "base64url");
  if (bytes.length === 0) return text;
  bytes[at % bytes.length] ^= 1 << bit;
  return bytes.toString("base64url");
};
const flipChar = (text: string, at: number, bit: number) => {
  if (text.length === 0) return "x";
  const i = at % text.length;
  const flipped = String.fromCharCode(text.charCodeAt(i) ^ (1 << bit));
  return text.slice(0, i) + flipped + text.slice(i + 1);
};

const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  fc.record({ at: fc.nat(), bit: fc.nat(7) }).map(({ at, bit }): Mutation => ({
    name: `flip bit ${bit} of byte ${at} of encryptedSecret`,
    meaningful: true,
    apply: (_t, env) => encode({ ...env, encryptedSecret: flipBase64url(env.encryptedSecret as string, at, bit) }),
  })),
  fc.record({ at: fc.nat(), bit: fc.nat(15) }).map(({ at, bit }): Mutation => ({
    name: `flip bit ${bit} of UTF-16 unit ${at} of clientId`,
    meaningful: true,
    apply: (_t, env) => encode({ ...env, clientId: flipChar(env.clientId as string, at, bit) }),
  })),
  fc.record({ at: fc.nat(), bit: fc.nat(6) }).map(({ at, bit }): Mutation => ({
    name: `flip bit ${bit} of character ${at} of kid`,
    meaningful: true,
    apply: (_t, env) => encode({ ...env, kid: flipChar(env.kid as string, at, bit) }),
  })),
  fc.record({ at: fc.nat(), bit: fc.nat(6) }).map(({ at, bit }): Mutation => ({
    name: `flip bit ${bit} of character ${at} of scope`,
    meaningful: true,
    apply: (_t, env) => encode({ ...env, scope: flipChar(env.scope as string, at, bit) }),
  })),
  fc.constant<Mutation>({
    name: "swap in the other envelope's clientId",
    meaningful: true,
    apply: (_t, env, other) => encode({ ...env, clientId: other.env.clientId }),
  }),
  fc.constant<Mutation>({
    name: "swap in the other envelope's encryptedSecret",
    meaningful: true,
    apply: (_t, env, other) => encode({ ...env, encryptedSecret: other.env.encryptedSecret }),
  }),
  fc.constant<Mutation>({
    name: "the other key's id",
    meaningful: true,
    apply: (_t, env, other) => encode({ ...env, kid: other.material.scimTokenKeyId }),
  }),
  fc.string({ maxLength: 16 }).map((kid): Mutation => ({
    name: `kid ${JSON.stringify(kid)}`,
    meaningful: true,
    apply: (_t, env) => encode({ ...env, kid }),
  })),
  fc.constantFrom<unknown>(0, 2, -1, 1.5, "1", true, null, [1], 1e21).map((v): Mutation => ({
    name: `v ${JSON.stringify(v)}`,
    meaningful: true,
    apply: (_t, env) => encode({ ...env, v }),
  })),
  fc.constantFrom<unknown>("SCIM", "scim ", "", "api-users", null, ["scim"]).map((scope): Mutation => ({
    name: `scope ${JSON.stringify(scope)}`,
    meaningful: true,
    apply: (_t, env) => encode({ ...env, scope }),
  })),
  fc.constantFrom("v", "kid", "scope", "clientId", "encryptedSecret").map((field): Mutation => ({
    name: `without ${field}`,
    meaningful: true,
    apply: (_t, env) => {
      const copy: Record<string, unknown> = { ...env };
      delete copy[field];
      return encode(copy);
    },
  })),
  fc.tuple(fc.string({ maxLength: 10 }), fc.jsonValue({ maxDepth: 1 })).map(([field, value]): Mutation => ({
    name: `with an extra field ${JSON.stringify(field)}`,
    // Setting an existing field changes its value (meaningful unless equal); a new field must be refused.
    meaningful: true,
    apply: (_t, env) => encode({ ...env, [field === "" ? "extra" : `x${field}`]: value }),
  })),
  fc
    .tuple(
      fc.constantFrom("v", "kid", "scope", "clientId", "encryptedSecret"),
      fc.constantFrom<unknown>(null, 1, "", [], {}, true, ["x"]),
    )
    .map(([field, value]): Mutation => ({
      name: `${field} retyped to ${JSON.stringify(value)}`,
      meaningful: true,
      apply: (_t, env) => encode({ ...env, [field]: value }),
    })),
  fc.constant<Mutation>({
    name: "sealed under another key with the same kid",
    meaningful: true,
    apply: (_t, env, other) => {
      const resealed = decode(
        sealScimToken(other.material.scimTokenKey, env.kid as string, {
          clientId: env.clientId as string,
          secret: "x",
        }),
      );
      return encode({ ...env, encryptedSecret: resealed.encryptedSecret });
    },
  }),
  fc.record({ at: fc.nat(), bit: fc.nat(7) }).map(({ at, bit }): Mutation => ({
    name: `flip bit ${bit} of byte ${at} of the decoded token`,
    // Meaningful unless the flip lands in a way JSON ignores; checked by comparing the decoded envelopes.
    meaningful: false,
    apply: (token) => {
      const bytes = Buffer.from(token, "base64");
      bytes[at % bytes.length] ^= 1 << bit;
      return bytes.toString("base64");
    },
  })),
  fc.nat().map((at): Mutation => ({
    name: `truncated at ${at}`,
    meaningful: false,
    apply: (token) => token.slice(0, at % token.length),
  })),
  fc.constant<Mutation>({
    name: "keys reordered",
    meaningful: false,
    apply: (_t, env) => encode(Object.fromEntries(Object.entries(env).reverse())),
  }),
  fc.constant<Mutation>({
    name: "pretty-printed",
    meaningful: false,
    apply: (_t, env) => encodeText(JSON.stringify(env, null, 2)),
  }),
  fc.constant<Mutation>({
    name: "v spelled 1.0",
    meaningful: false,
    apply: (_t, env) => encodeText(JSON.stringify(env).replace('"v":1', '"v":1.0')),
  }),
  fc.constant<Mutation>({
    name: "duplicate clientId, the genuine one last",
    meaningful: false,
    apply: (_t, env, other) =>
      encodeText(`{"clientId":${JSON.stringify(other.env.clientId)},${JSON.stringify(env).slice(1)}`),
  }),
  fc.constant<Mutation>({
    name: "duplicate clientId, the other one last",
    meaningful: true,
    apply: (_t, env, other) =>
      encodeText(`${JSON.stringify(env).slice(0, -1)},"clientId":${JSON.stringify(other.env.clientId)}}`),
  }),
  fc.constant<Mutation>({ name: "no Base64 padding", meaningful: false, apply: (token) => token.replace(/=+$/, "") }),
  fc.constant<Mutation>({
    name: "base64url alphabet",
    meaningful: false,
    apply: (token) => token.replace(/\+/g, "-").replace(/\//g, "_"),
  }),
  fc.constant<Mutation>({
    name: "Base64 with a line break",
    meaningful: false,
    apply: (token) => `${token.slice(0, 10)}\n${token.slice(10)}`,
  }),
  fc.constant<Mutation>({ name: "surrounding whitespace", meaningful: false, apply: (token) => ` ${token} ` }),
  fc.constant<Mutation>({
    name: "encryptedSecret in standard Base64",
    meaningful: false,
    apply: (_t, env) =>
      encode({ ...env, encryptedSecret: Buffer.from(env.encryptedSecret as string, "base64url").toString("base64") }),
  }),
);

/** Whether two tokens decode to the same envelope (same fields, same values, same secret bytes). */
function sameMeaning(a: string, b: string): boolean {
  try {
    const x = decode(a);
    const y = decode(b);
    const keys = (o: object) => Object.keys(o).sort().join(",");
    if (keys(x) !== keys(y)) return false;
    for (const k of Object.keys(x)) {
      if (k === "encryptedSecret") {
        if (typeof x[k] !== "string" || typeof y[k] !== "string") return false;
        if (!Buffer.from(x[k] as string, "base64url").equals(Buffer.from(y[k] as string, "base64url"))) return false;
      } else if (JSON.stringify(x[k]) !== JSON.stringify(y[k])) return false;
    }
    return true;
  } catch {
    return false;
  }
}

describe(`SCIM-token envelope fuzzing (runs=${RUNS}, FUZZ_SEED=${FUZZ_SEED})`, () => {
  test("S1: sealing round-trips every clientId of the alphabet with every well-formed secret, and refuses everything else", () => {
    fc.assert(
      fc.property(keyMaterial, anyClientId, anySecret, (material, id, plain) => {
        const context = `clientId ${show(id)}, secret ${show(plain)}`;
        if (!CLIENT_ID.test(id) || !wellFormed(plain)) {
          assert.throws(
            () => sealScimToken(material.scimTokenKey, material.scimTokenKeyId, { clientId: id, secret: plain }),
            TypeError,
            `sealed: ${context}`,
          );
          return;
        }
        const token = sealScimToken(material.scimTokenKey, material.scimTokenKeyId, { clientId: id, secret: plain });
        const opened = open(keysOf(material), token);
        if (token.length > MAX_TOKEN_LENGTH)
          assert.equal(opened, undefined, `over ${MAX_TOKEN_LENGTH} characters: refused (${context})`);
        else assert.deepEqual(opened, { clientId: id, secret: plain }, `token ${show(token)} (${context})`);
      }),
      fuzzParams(RUNS),
    );
  });

  test("S2a: arbitrary strings never throw and open nothing", () => {
    const keys = keysOf(deriveKeyMaterial(crypto.randomBytes(32)));
    fc.assert(
      fc.property(
        fc.oneof(
          fc.string({ unit: fuzzUnit, maxLength: 80 }),
          fc.base64String({ maxLength: 400 }),
          fc.string({ unit: "binary", maxLength: 5000 }),
          fc.stringMatching(/^[A-Za-z0-9+/]{1,600}={0,2}$/),
        ),
        (token) => {
          assert.equal(open(keys, token), undefined, show(token));
        },
      ),
      fuzzParams(RUNS),
    );
  });

  test("S2b: Base64 of arbitrary JSON, and of envelope-shaped JSON with arbitrary values, never throws and opens nothing", () => {
    const material = deriveKeyMaterial(crypto.randomBytes(32));
    const keys = keysOf(material);
    const anyValue = fc.oneof(
      fc.jsonValue({ maxDepth: 2 }),
      fc.string({ unit: fuzzUnit, maxLength: 30 }),
      clientId,
      fc.constant(material.scimTokenKeyId),
      fc.constant("scim"),
      fc.constant(1),
    );
    const envelopeShaped = fc.record(
      {
        v: anyValue,
        kid: anyValue,
        scope: anyValue,
        clientId: anyValue,
        encryptedSecret: fc.oneof(
          anyValue,
          fc.uint8Array({ maxLength: 80 }).map((b) => Buffer.from(b).toString("base64url")),
        ),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(
        fc.oneof(fc.jsonValue({ maxDepth: 3 }), envelopeShaped),
        fc.constantFrom("base64", "base64url"),
        (json, alphabet) => {
          const token = Buffer.from(JSON.stringify(json) ?? "null", "utf8").toString(alphabet as BufferEncoding);
          assert.equal(open(keys, token), undefined, `${show(json)} → ${show(token)}`);
        },
      ),
      fuzzParams(RUNS),
    );
  });

  test("S3: mutated genuine envelopes open to undefined, or (when the meaning is unchanged) to exactly the original — never a wrong secret", () => {
    fc.assert(
      fc.property(
        keyMaterial,
        keyMaterial,
        clientId,
        clientId,
        secret,
        mutation,
        (material, otherMaterial, id, otherId, plain, m) => {
          fc.pre(id !== otherId);
          const token = sealScimToken(material.scimTokenKey, material.scimTokenKeyId, { clientId: id, secret: plain });
          fc.pre(token.length <= MAX_TOKEN_LENGTH);
          const otherToken = sealScimToken(material.scimTokenKey, material.scimTokenKeyId, {
            clientId: otherId,
            secret: `${plain}-other`,
          });
          const mutated = m.apply(token, decode(token), {
            token: otherToken,
            env: decode(otherToken),
            material: otherMaterial,
          });
          // The key map knows both keys: a token naming the other key's id is checked with that key.
          const keys = new Map([...keysOf(material), ...keysOf(otherMaterial)]);
          const opened = open(keys, mutated);
          if (opened === undefined) return;
          const context = `${m.name}: ${show(token)} → ${show(mutated)} opened ${show(opened)}`;
          assert.deepEqual(
            opened,
            { clientId: id, secret: plain },
            `a mutated envelope opened to something else: ${context}`,
          );
          // Accepted: only if the envelope still says the same (then `meaningful` mutations must not have been accepted).
          assert.ok(
            sameMeaning(token, mutated),
            `a changed envelope was accepted (${m.meaningful ? "a change of meaning" : "decodes differently"}): ${context}`,
          );
        },
      ),
      fuzzParams(RUNS),
    );
  });

  test("S4: with several keys, each token opens under its own kid's key only", () => {
    fc.assert(
      fc.property(
        fc.array(keyMaterial, { minLength: 2, maxLength: 4 }),
        clientId,
        secret,
        fc.nat(),
        (materials, id, plain, pick) => {
          const keys = new Map(materials.map((m) => [m.scimTokenKeyId, m.scimTokenKey] as const));
          fc.pre(keys.size === materials.length);
          const sealer = materials[pick % materials.length]!;
          const token = sealScimToken(sealer.scimTokenKey, sealer.scimTokenKeyId, { clientId: id, secret: plain });
          fc.pre(token.length <= MAX_TOKEN_LENGTH);
          assert.deepEqual(open(keys, token), { clientId: id, secret: plain });
          // Every other key under the sealer's kid refuses it.
          for (const other of materials) {
            if (other === sealer) continue;
            assert.equal(open(new Map([[sealer.scimTokenKeyId, other.scimTokenKey]]), token), undefined);
          }
        },
      ),
      fuzzParams(RUNS),
    );
  });

  test("S5: envelopes forged with the right key open only for clientIds of the alphabet — never one with a lone surrogate, a control or a non-ASCII character", () => {
    fc.assert(
      fc.property(keyMaterial, anyClientId, fc.uint8Array({ maxLength: 64 }), (material, id, plain) => {
        const token = forge(material, id, Buffer.from(plain));
        fc.pre(token.length <= MAX_TOKEN_LENGTH);
        const opened = open(keysOf(material), token);
        const context = `clientId ${show(id)}: ${show(token)} opened ${show(opened)}`;
        if (!CLIENT_ID.test(id)) {
          assert.equal(opened, undefined, `an envelope for a clientId outside the alphabet opened: ${context}`);
          return;
        }
        // Inside the alphabet the forgery is a genuine token (the key was used): it opens, which shows the forgery is well made.
        assert.equal(opened?.clientId, id, context);
        assert.deepEqual(
          Buffer.from(opened.secret, "utf8"),
          Buffer.from(Buffer.from(plain).toString("utf8"), "utf8"),
          context,
        );
      }),
      fuzzParams(RUNS),
    );
  });
});
