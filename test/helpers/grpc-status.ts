import { fromBinary } from "@bufbuild/protobuf";
import { BinaryReader, WireType } from "@bufbuild/protobuf/wire";
import { ErrorResponseSchema, type ErrorResponse } from "../../gen/travel/common/v1/error_pb.js";

export interface AnyMessage {
  typeUrl: string;
  value: Uint8Array;
}

/** Decodes a serialized google.rpc.Status {1: code, 2: message, 3: repeated Any {1: type_url, 2: value}}. */
export function decodeRpcStatus(bytes: Uint8Array): { code: number; message: string; details: AnyMessage[] } {
  const reader = new BinaryReader(bytes);
  const status = { code: 0, message: "", details: [] as AnyMessage[] };
  while (reader.pos < reader.len) {
    const [fieldNo, wireType] = reader.tag();
    if (fieldNo === 1 && wireType === WireType.Varint) status.code = reader.int32();
    else if (fieldNo === 2 && wireType === WireType.LengthDelimited) status.message = reader.string();
    else if (fieldNo === 3 && wireType === WireType.LengthDelimited) {
      const any = new BinaryReader(reader.bytes());
      const detail: AnyMessage = { typeUrl: "", value: new Uint8Array() };
      while (any.pos < any.len) {
        const [n, t] = any.tag();
        if (n === 1 && t === WireType.LengthDelimited) detail.typeUrl = any.string();
        else if (n === 2 && t === WireType.LengthDelimited) detail.value = any.bytes();
        else any.skip(t, n);
      }
      status.details.push(detail);
    } else reader.skip(wireType, fieldNo);
  }
  return status;
}

/** The travel.common.v1.ErrorResponse among a status's details, if any. */
export function errorResponseIn(details: readonly AnyMessage[]): ErrorResponse | undefined {
  const detail = details.find((d) => d.typeUrl.endsWith("travel.common.v1.ErrorResponse"));
  return detail && fromBinary(ErrorResponseSchema, detail.value);
}
