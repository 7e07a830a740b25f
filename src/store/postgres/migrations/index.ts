import type { Knex } from "knex";
import * as initialSchema from "./20261121000100_initial_schema.js";
import * as tokens from "./20261121000200_tokens.js";
import * as credentialOutbox from "./20261121000300_credential_outbox.js";
import * as dropServiceSettings from "./20261122000100_drop_service_settings.js";
import * as credentialChanges from "./20261122000200_credential_changes.js";
import * as refreshTokenAct from "./20261122000300_refresh_token_act.js";
import * as usersScim from "./20261122000400_users_scim.js";
import * as airCreditsV3 from "./20261122000500_air_credits_v3.js";
import * as revokedAccessTokens from "./20261122000600_revoked_access_tokens.js";
import * as airCreditInstants from "./20261125000100_air_credit_instants.js";
import * as signingKeyActivation from "./20261125000200_signing_key_activation.js";
import * as usersScimNames from "./20261125000300_users_scim_names.js";
import * as trustedIssuerCompany from "./20261125000400_trusted_issuer_company.js";
import * as resourceServers from "./20261126000100_resource_servers.js";
import * as ssfPollPositions from "./20261126000200_ssf_poll_positions.js";
import * as auditPartitions from "./20261126001000_audit_partitions.js";
import * as apiUserLastToken from "./20261126001100_api_user_last_token.js";
import * as usersScimAttributes from "./20261129000100_users_scim_attributes.js";
import * as auditWindowIndex from "./20261129001000_audit_window_index.js";
import * as replayCache from "./20261129002000_replay_cache.js";
import * as apiUserPublicKeys from "./20261129002100_api_user_public_keys.js";
import * as apiUserDpopBound from "./20261129002200_api_user_dpop_bound.js";
import * as apiUserJwksUri from "./20261129002300_api_user_jwks_uri.js";
import * as resourceServerPublicKeys from "./20261129002400_resource_server_public_keys.js";
import * as resourceServerJwksUri from "./20261129002500_resource_server_jwks_uri.js";
import * as trustedIssuerRegistration from "./20261129002600_trusted_issuer_registration.js";

/**
 * One static list shared by the server and the CLI: the knex CLI cannot load .ts migrations,
 * and mixing directory-based runs with a custom source corrupts the migration table.
 */
const migrations: ReadonlyArray<readonly [string, Knex.Migration]> = [
  ["20261121000100_initial_schema", initialSchema],
  ["20261121000200_tokens", tokens],
  ["20261121000300_credential_outbox", credentialOutbox],
  ["20261122000100_drop_service_settings", dropServiceSettings],
  ["20261122000200_credential_changes", credentialChanges],
  ["20261122000300_refresh_token_act", refreshTokenAct],
  ["20261122000400_users_scim", usersScim],
  ["20261122000500_air_credits_v3", airCreditsV3],
  ["20261122000600_revoked_access_tokens", revokedAccessTokens],
  ["20261125000100_air_credit_instants", airCreditInstants],
  ["20261125000200_signing_key_activation", signingKeyActivation],
  ["20261125000300_users_scim_names", usersScimNames],
  ["20261125000400_trusted_issuer_company", trustedIssuerCompany],
  ["20261126000100_resource_servers", resourceServers],
  ["20261126000200_ssf_poll_positions", ssfPollPositions],
  ["20261126001000_audit_partitions", auditPartitions],
  ["20261126001100_api_user_last_token", apiUserLastToken],
  ["20261129000100_users_scim_attributes", usersScimAttributes],
  ["20261129001000_audit_window_index", auditWindowIndex],
  ["20261129002000_replay_cache", replayCache],
  ["20261129002100_api_user_public_keys", apiUserPublicKeys],
  ["20261129002200_api_user_dpop_bound", apiUserDpopBound],
  ["20261129002300_api_user_jwks_uri", apiUserJwksUri],
  ["20261129002400_resource_server_public_keys", resourceServerPublicKeys],
  ["20261129002500_resource_server_jwks_uri", resourceServerJwksUri],
  ["20261129002600_trusted_issuer_registration", trustedIssuerRegistration],
];

export const migrationSource: Knex.MigrationSource<string> = {
  getMigrations: async () => migrations.map(([name]) => name),
  getMigrationName: (name) => name,
  getMigration: async (name) => {
    const found = migrations.find(([candidate]) => candidate === name);
    if (!found) throw new Error(`unknown migration ${name}`);
    return found[1];
  },
};
