import {
  fromJson,
  toJson,
  type DescEnum,
  type JsonObject,
  type JsonValue,
  type MessageInitShape,
} from "@bufbuild/protobuf";
import {
  CreditUsageType,
  CreditUsageTypeSchema,
  MigrationStatus,
  NameSuffix,
  UnusedCreditFopCardAccessType,
  UnusedCreditFopCardAccessTypeSchema,
  UnusedCreditFopSchema,
  UnusedCreditInfo_CreditStatus,
  UnusedCreditInfo_CreditStatusSchema,
  UnusedCreditInfo_RedeemVia,
  UnusedCreditInfo_RedeemViaSchema,
  UnusedCreditInfo_SegmentsAvailable,
  UnusedCreditInfo_SegmentsAvailableSchema,
  UnusedCreditInfo_SourceOfTruth,
  UnusedCreditInfo_SourceOfTruthSchema,
  UnusedCreditInfo_ThirdPartySource,
  UnusedCreditInfo_ThirdPartySourceSchema,
  UnusedCreditInfo_TicketType,
  UnusedCreditInfo_TicketTypeSchema,
  type CompanyCreditFilter,
  type ListCompanyTransferableUnusedCreditsResponseSchema,
  type MigrateCompanyCreditsResponseSchema,
  type UnusedCreditInfoSchema,
} from "../../../gen/travel/aircredit/v3/air_credit_pb.js";
import { ImportedAirCreditSchema, type ImportedAirCredit } from "../../../gen/travel/operator/v1/operator_pb.js";
import type { CreditImportRow, CreditVocabulary } from "../../domain/air-credits/air-credit-import.js";
import type { CreditListing } from "../../domain/air-credits/air-credit-listing.js";
import type { MigrationOutcome } from "../../domain/air-credits/air-credit-migration.js";
import type { CreditFilter, UnusedCredit } from "../../domain/air-credits/model.js";
import { contractValidator } from "../contract-validator.js";
import type { Path } from "@bufbuild/protobuf/reflect";

type EnumObject = Record<string, string | number>;

/** A domain enum string → its proto number (0, the unset value, for anything unknown). */
function enumValue<E extends EnumObject>(enumObject: E, name: string | undefined): E[keyof E] {
  const value = name === undefined ? undefined : enumObject[name];
  return (typeof value === "number" ? value : 0) as E[keyof E];
}

/** The request's filter, normalised: `pccs` wins over the deprecated `pcc`; unset values mean "any". */
export function creditFilter(filter: CompanyCreditFilter | undefined): CreditFilter {
  const range = filter?.expiryDateRange;
  const pccs = filter?.pccs.length ? filter.pccs : filter?.pcc ? [filter.pcc] : [];
  return {
    suppliers: filter?.supplier ? [filter.supplier] : [],
    airlineCodes: filter?.selectedAirlines ?? [],
    expiryFrom: range?.expiryDateStart?.iso8601 || undefined,
    expiryTo: range?.expiryDateEnd?.iso8601 || undefined,
    fopLabels: filter?.fopLabel ?? [],
    pccs,
    fopCardAccessTypes: filter?.fopCardAccessType ?? [],
    legalEntityNames: filter?.legalEntityNames ?? [],
  };
}

const date = (iso8601: string | undefined) => (iso8601 === undefined ? undefined : { iso8601 });

/** A stored FOP object as the contract's UnusedCreditFop; one it cannot read is left out. */
function fopInfo(value: Readonly<Record<string, unknown>> | undefined) {
  if (value === undefined) return undefined;
  try {
    return fromJson(UnusedCreditFopSchema, value as JsonValue, { ignoreUnknownFields: true });
  } catch {
    return undefined;
  }
}

/** An enum's value names; its zero value only where the reference has it (`zero`). */
const namesOf = (e: DescEnum, zero: boolean) => e.values.filter((v) => zero || v.number !== 0).map((v) => v.name);

/**
 * The names each enum-valued field of an import row may take: the v3 contract's enums. The zero
 * value counts where it is the reference's own (STATUS_UNKNOWN, TICKET_TYPE_UNKNOWN, UNKNOWN,
 * UNKNOWN_SOURCE), not where proto3 added it (…_UNSPECIFIED; CREDIT_USAGE_TYPE_UNKNOWN: a credit's
 * usage type is known).
 */
export const creditVocabulary: CreditVocabulary = {
  segmentsAvailable: namesOf(UnusedCreditInfo_SegmentsAvailableSchema, true),
  ticketType: namesOf(UnusedCreditInfo_TicketTypeSchema, true),
  status: namesOf(UnusedCreditInfo_CreditStatusSchema, true),
  source: namesOf(UnusedCreditInfo_ThirdPartySourceSchema, true),
  redeemVia: namesOf(UnusedCreditInfo_RedeemViaSchema, false),
  sourceOfTruth: namesOf(UnusedCreditInfo_SourceOfTruthSchema, false),
  creditUsageType: namesOf(CreditUsageTypeSchema, false),
  fopCardAccessType: namesOf(UnusedCreditFopCardAccessTypeSchema, false),
};

/** A violated field as the JSON names it: "exchangeInfo.previousTicket", "items[2]". */
function jsonPathOf(path: Path): string {
  return path
    .map((part) => {
      switch (part.kind) {
        case "field":
        case "extension":
          return `.${part.jsonName}`;
        case "list_sub":
          return `[${part.index}]`;
        case "map_sub":
          return `[${String(part.key)}]`;
        case "oneof":
          return `.${part.name}`;
      }
    })
    .join("")
    .slice(1);
}

/** ImportedAirCredit's rules (operator.proto), applied row by row: the request's own rules leave the rows to the service. */
const rowValidator = contractValidator([ImportedAirCreditSchema.file]);

/**
 * An import row as the domain reads it: what the contract's rules found wrong with it (by JSON
 * field name), the suffix by name, the FOP object as the JSON it is stored as.
 */
export function creditImportRow(c: ImportedAirCredit): CreditImportRow {
  const checked = rowValidator.validate(ImportedAirCreditSchema, c);
  if (checked.kind === "error") throw checked.error;
  return {
    ...c,
    violations:
      checked.kind === "valid"
        ? []
        : checked.error.violations.map((v) => ({
            field: jsonPathOf(v.field),
            reason: v.message,
          })),
    passengerName: c.passengerName && {
      ...c.passengerName,
      suffix: c.passengerName.suffix ? NameSuffix[c.passengerName.suffix] : "",
    },
    fopInfo: c.fopInfo && (toJson(UnusedCreditFopSchema, c.fopInfo) as JsonObject),
  };
}

export function unusedCreditInfo(c: UnusedCredit): MessageInitShape<typeof UnusedCreditInfoSchema> {
  return {
    sourcePnr: c.sourcePnr ?? "",
    spotnanaPnr: c.spotnanaPnr ?? "",
    ticketNumber: c.ticketNumber,
    airlineCode: c.airlineCode,
    // The reference requires both fields: without a name there is no airlineInfo.
    airlineInfo: c.airlineName === undefined ? undefined : { airlineCode: c.airlineCode, airlineName: c.airlineName },
    // The decimal text becomes a JSON number only here, at the edge (Money.amount is a double).
    totalFare: { amount: Number(c.totalFare.amount), currencyCode: c.totalFare.currencyCode },
    issueDate: date(c.issueDate),
    expiryDate: date(c.expiryDate),
    usedDate: date(c.usedDate),
    departureDate: date(c.departureDate),
    segmentsAvailable: enumValue(UnusedCreditInfo_SegmentsAvailable, c.segmentsAvailable),
    passengerName: c.passengerName && {
      given: c.passengerName.given,
      family1: c.passengerName.family1,
      family2: c.passengerName.family2 ?? "",
      middle: c.passengerName.middle ?? "",
      preferred: c.passengerName.preferred ?? "",
      suffix: enumValue(NameSuffix, c.passengerName.suffix),
    },
    departureCountry: c.departureCountry ?? "",
    arrivalCountry: c.arrivalCountry ?? "",
    ticketType: enumValue(UnusedCreditInfo_TicketType, c.ticketType),
    pcc: c.pcc ?? "",
    status: enumValue(UnusedCreditInfo_CreditStatus, c.status),
    source: enumValue(UnusedCreditInfo_ThirdPartySource, c.source),
    tripId: c.tripId ?? "",
    redeemVia: enumValue(UnusedCreditInfo_RedeemVia, c.redeemVia),
    sourceOfTruth: enumValue(UnusedCreditInfo_SourceOfTruth, c.sourceOfTruth),
    owningPcc: c.owningPcc ?? "",
    paymentSourceId: c.paymentSourceId,
    creditUsageType: enumValue(CreditUsageType, c.creditUsageType),
    email: c.email ?? "",
    fopInfo: fopInfo(c.fopInfo),
    fopLabel: c.fopLabel ?? "",
    exchangeInfo: c.previousTicket === undefined ? undefined : { previousTicket: c.previousTicket },
    fopCardAccessType: enumValue(UnusedCreditFopCardAccessType, c.fopCardAccessType),
    legalEntityName: c.legalEntityName ?? "",
  };
}

export function listResponse(
  listing: CreditListing,
): MessageInitShape<typeof ListCompanyTransferableUnusedCreditsResponseSchema> {
  return {
    unusedCreditInfos: listing.credits.map(unusedCreditInfo),
    paginationParams: { offset: listing.offset, totalRecords: listing.totalRecords },
    companyTransferableFopLabels: [...listing.fopLabels],
    companyTransferablePccs: [...listing.pccs],
    companyTransferableLegalEntityNames: [...listing.legalEntityNames],
    supportedAirlines: listing.supportedAirlines.map((a) => ({ ...a })),
  };
}

export function migrateResponse(
  outcomes: readonly MigrationOutcome[],
): MessageInitShape<typeof MigrateCompanyCreditsResponseSchema> {
  return {
    migrationStatus: outcomes.map((o) => ({
      paymentSourceId: o.paymentSourceId,
      status: o.status === "SUCCESS" ? MigrationStatus.SUCCESS : MigrationStatus.FAILED,
      failureReason: o.failureReason ?? "",
    })),
  };
}
