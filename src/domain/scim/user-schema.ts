import { ENTERPRISE_USER_SCHEMA, SCHEMA_SCHEMA, USER_SCHEMA } from "./model.js";

/**
 * The one table of what this service holds of a SCIM User (RFC 7643 4.1 and 4.3): /Schemas is
 * rendered from it, PATCH paths are resolved against it (readOnly → mutability, absent → noTarget),
 * and `attributes`/`excludedAttributes` are checked against it. Where each attribute is stored is
 * said in its description; test/scim/scim-idp-compat.test.ts PATCHes every readWrite leaf listed in
 * /Schemas and reads it back, so the table and the storage cannot drift apart.
 */
export interface AttributeDefinition {
  readonly name: string;
  readonly type: "string" | "boolean" | "complex" | "reference";
  readonly mutability: "readOnly" | "readWrite";
  readonly description: string;
  readonly multiValued?: boolean;
  readonly required?: boolean;
  readonly caseExact?: boolean;
  readonly returned?: "always" | "default";
  readonly uniqueness?: "none" | "server";
  readonly canonicalValues?: readonly string[];
  readonly referenceTypes?: readonly string[];
  readonly subAttributes?: readonly AttributeDefinition[];
}

export interface SchemaDefinition {
  readonly id: string;
  readonly name: string;
  readonly description: string;
  readonly attributes: readonly AttributeDefinition[];
}

const USER: SchemaDefinition = {
  id: USER_SCHEMA,
  name: "User",
  description:
    "A user of the API user's company. Only the attributes listed are held: on create and replace other attributes are ignored; a PATCH naming one is refused (noTarget).",
  attributes: [
    {
      name: "id",
      type: "string",
      mutability: "readOnly",
      caseExact: true,
      returned: "always",
      uniqueness: "server",
      description: "The user's id (users.id), also the profile API's userId",
    },
    {
      name: "userName",
      type: "string",
      mutability: "readWrite",
      required: true,
      uniqueness: "server",
      description: "The business email address (businessInfo.email); unique in the company, case-insensitive",
    },
    {
      name: "externalId",
      type: "string",
      mutability: "readWrite",
      caseExact: true,
      uniqueness: "server",
      description:
        "The provisioning client's id for the user (users.external_id); unique among the company's users, so two IdP objects cannot claim one user",
    },
    {
      name: "name",
      type: "complex",
      mutability: "readWrite",
      description: "The user's name",
      subAttributes: [
        { name: "givenName", type: "string", mutability: "readWrite", description: "personalInfo.name.given" },
        { name: "familyName", type: "string", mutability: "readWrite", description: "personalInfo.name.family1" },
        {
          name: "formatted",
          type: "string",
          mutability: "readWrite",
          description: 'Stored as sent; on create and replace without one, "givenName familyName"',
        },
      ],
    },
    {
      name: "displayName",
      type: "string",
      mutability: "readWrite",
      description: 'Stored as sent; on create and replace without one, "givenName familyName"',
    },
    {
      name: "title",
      type: "string",
      mutability: "readWrite",
      description: "businessInfo.designation (the job title); a replace without it keeps it",
    },
    {
      name: "emails",
      type: "complex",
      multiValued: true,
      mutability: "readWrite",
      description:
        'Exactly one email, the work email, which is the userName: writing emails[type eq "work"].value changes userName; other types are refused (invalidValue)',
      subAttributes: [
        { name: "value", type: "string", mutability: "readWrite", description: "The userName" },
        {
          name: "type",
          type: "string",
          mutability: "readWrite",
          canonicalValues: ["work"],
          description: "Always work",
        },
        { name: "primary", type: "boolean", mutability: "readWrite", description: "Always true" },
      ],
    },
    {
      name: "active",
      type: "boolean",
      mutability: "readWrite",
      description: 'isActive; also accepted as the strings "True" and "False"',
    },
  ],
};

const ENTERPRISE_USER: SchemaDefinition = {
  id: ENTERPRISE_USER_SCHEMA,
  name: "EnterpriseUser",
  description: "The enterprise extension (RFC 7643 4.3), mapped onto the user profile's businessInfo",
  attributes: [
    { name: "employeeNumber", type: "string", mutability: "readWrite", description: "businessInfo.employeeId" },
    { name: "costCenter", type: "string", mutability: "readWrite", description: "businessInfo.costCenterRef.name" },
    {
      name: "organization",
      type: "string",
      mutability: "readWrite",
      description: 'businessInfo.companySpecifiedAttributes, fixedColumnName "organization"',
    },
    {
      name: "division",
      type: "string",
      mutability: "readWrite",
      description: 'businessInfo.companySpecifiedAttributes, fixedColumnName "division"',
    },
    { name: "department", type: "string", mutability: "readWrite", description: "businessInfo.departmentRef.name" },
    {
      name: "manager",
      type: "complex",
      mutability: "readWrite",
      description: "businessInfo.managerRef: the id and display name of another user of the company",
      subAttributes: [
        {
          name: "value",
          type: "string",
          mutability: "readWrite",
          caseExact: true,
          description: "The id of a user of the company (also accepted as a plain string in place of the object)",
        },
        {
          name: "$ref",
          type: "reference",
          mutability: "readOnly",
          referenceTypes: ["User"],
          description: "The manager's location",
        },
        {
          name: "displayName",
          type: "string",
          mutability: "readOnly",
          description: "The manager's displayName when the manager was set",
        },
      ],
    },
  ],
};

/** Every schema a User resource may carry: the core one first. */
export const USER_SCHEMAS: readonly SchemaDefinition[] = [USER, ENTERPRISE_USER];

/** Common attributes (RFC 7643 3.1) the service owns: never writable, echoed back by clients. */
export const SERVICE_OWNED = new Set(["id", "meta", "schemas"]);

/** The schema a URN names (case-insensitive, RFC 7644 3.10), the core one when there is none. */
export function schemaNamed(urn: string | undefined): SchemaDefinition | undefined {
  if (urn === undefined) return USER;
  return USER_SCHEMAS.find((s) => s.id.toLowerCase() === urn.toLowerCase());
}

export function attributeNamed(
  attributes: readonly AttributeDefinition[] | undefined,
  name: string,
): AttributeDefinition | undefined {
  return attributes?.find((a) => a.name.toLowerCase() === name.toLowerCase());
}

/** One schema as /Schemas shows it (RFC 7643 7), with every characteristic spelled out. */
export function schemaDocument(schema: SchemaDefinition, baseUrl: string): Record<string, unknown> {
  const render = (a: AttributeDefinition): Record<string, unknown> => ({
    name: a.name,
    type: a.type,
    multiValued: a.multiValued ?? false,
    description: a.description,
    required: a.required ?? false,
    caseExact: a.caseExact ?? false,
    mutability: a.mutability,
    returned: a.returned ?? "default",
    uniqueness: a.uniqueness ?? "none",
    ...(a.canonicalValues ? { canonicalValues: a.canonicalValues } : {}),
    ...(a.referenceTypes ? { referenceTypes: a.referenceTypes } : {}),
    ...(a.subAttributes ? { subAttributes: a.subAttributes.map(render) } : {}),
  });
  return {
    schemas: [SCHEMA_SCHEMA],
    id: schema.id,
    name: schema.name,
    description: schema.description,
    attributes: schema.attributes.map(render),
    meta: { resourceType: "Schema", location: `${baseUrl}/Schemas/${schema.id}` },
  };
}
