// gRPC server reflection (grpc.reflection.v1 and v1alpha) for a Connect router.
//
// Why this exists: no npm package implements server reflection for
// connect-node routers (see https://github.com/connectrpc/connect-es/issues/507;
// @grpc/reflection only plugs into @grpc/grpc-js servers). Tools such as
// grpcurl, grpcui, Postman and `buf curl` need it to discover our schema.
//
// Behaviour follows grpc-go's reflection service: file answers carry the
// requested file first, followed by all of its transitive dependencies, and
// unknown names are answered with an error_response (NOT_FOUND) instead of
// failing the stream. v1 and v1alpha messages are field-compatible, so both
// services share one implementation.
import { Code, type ConnectRouter } from "@connectrpc/connect";
import { toBinary, type DescEnum, type DescExtension, type DescFile, type DescMessage } from "@bufbuild/protobuf";
import { FileDescriptorProtoSchema } from "@bufbuild/protobuf/wkt";
import { ServerReflection as ServerReflectionV1 } from "../../gen/grpc/reflection/v1/reflection_pb.js";
import { ServerReflection as ServerReflectionV1alpha } from "../../gen/grpc/reflection/v1alpha/reflection_pb.js";

/** The request oneof, structurally shared by v1 and v1alpha. */
type MessageRequest =
  | { case: "fileByFilename" | "fileContainingSymbol" | "allExtensionNumbersOfType" | "listServices"; value: string }
  | { case: "fileContainingExtension"; value: { containingType: string; extensionNumber: number } }
  | { case: undefined; value?: undefined };

/** The response oneof, as a plain init shape accepted by both versions. */
type MessageResponse =
  | { case: "fileDescriptorResponse"; value: { fileDescriptorProto: Uint8Array[] } }
  | { case: "allExtensionNumbersResponse"; value: { baseTypeName: string; extensionNumber: number[] } }
  | { case: "listServicesResponse"; value: { service: { name: string }[] } }
  | { case: "errorResponse"; value: { errorCode: number; errorMessage: string } };

class DescriptorIndex {
  readonly files = new Map<string, DescFile>(); // keyed by file.proto.name ("a/b.proto")
  readonly symbols = new Map<string, DescFile>(); // fully-qualified name -> defining file
  readonly extensions = new Map<string, DescExtension[]>(); // extendee type name -> extensions
  readonly services = new Set<string>();

  /** Adds a file and its transitive dependencies (idempotent). */
  add(file: DescFile, listServices = true): void {
    if (listServices) file.services.forEach((s) => this.services.add(s.typeName));
    if (this.files.has(file.proto.name)) return;
    this.files.set(file.proto.name, file);
    file.dependencies.forEach((dep) => this.add(dep, false));
    const put = (name: string) => this.symbols.set(name, file);
    const addEnum = (e: DescEnum) => {
      put(e.typeName);
      // Enum values are scoped to the enum's parent (C++ scoping rules).
      const scope = e.typeName.slice(0, e.typeName.lastIndexOf(".") + 1);
      e.values.forEach((v) => put(scope + v.name));
    };
    const addExtension = (x: DescExtension) => {
      put(x.typeName);
      const list = this.extensions.get(x.extendee.typeName) ?? [];
      this.extensions.set(x.extendee.typeName, [...list, x]);
    };
    const addMessage = (m: DescMessage) => {
      put(m.typeName);
      m.fields.forEach((f) => put(`${m.typeName}.${f.name}`));
      m.oneofs.forEach((o) => put(`${m.typeName}.${o.name}`));
      m.nestedMessages.forEach(addMessage);
      m.nestedEnums.forEach(addEnum);
      m.nestedExtensions.forEach(addExtension);
    };
    file.messages.forEach(addMessage);
    file.enums.forEach(addEnum);
    file.extensions.forEach(addExtension);
    for (const service of file.services) {
      put(service.typeName);
      service.methods.forEach((m) => put(`${service.typeName}.${m.name}`));
    }
  }

  /** The file followed by its transitive dependencies, each serialized once. */
  fileResponse(file: DescFile): MessageResponse {
    const seen = new Set<string>();
    const out: Uint8Array[] = [];
    const visit = (f: DescFile) => {
      if (seen.has(f.proto.name)) return;
      seen.add(f.proto.name);
      out.push(toBinary(FileDescriptorProtoSchema, f.proto));
      f.dependencies.forEach(visit);
    };
    visit(file);
    return { case: "fileDescriptorResponse", value: { fileDescriptorProto: out } };
  }

  answer(req: MessageRequest): MessageResponse {
    const notFound = (what: string): MessageResponse => ({
      case: "errorResponse",
      value: { errorCode: Code.NotFound, errorMessage: `${what} not found` },
    });
    switch (req.case) {
      case "listServices":
        return { case: "listServicesResponse", value: { service: [...this.services].map((name) => ({ name })) } };
      case "fileByFilename": {
        const file = this.files.get(req.value);
        return file ? this.fileResponse(file) : notFound(`file "${req.value}"`);
      }
      case "fileContainingSymbol": {
        const file = this.symbols.get(req.value.replace(/^\./, ""));
        return file ? this.fileResponse(file) : notFound(`symbol "${req.value}"`);
      }
      case "fileContainingExtension": {
        const { containingType, extensionNumber } = req.value;
        const ext = this.extensions.get(containingType)?.find((x) => x.number === extensionNumber);
        return ext ? this.fileResponse(ext.file) : notFound(`extension ${extensionNumber} of "${containingType}"`);
      }
      case "allExtensionNumbersOfType": {
        if (!this.symbols.has(req.value)) return notFound(`type "${req.value}"`);
        const extensionNumber = (this.extensions.get(req.value) ?? []).map((x) => x.number);
        return { case: "allExtensionNumbersResponse", value: { baseTypeName: req.value, extensionNumber } };
      }
      default:
        return {
          case: "errorResponse",
          value: { errorCode: Code.InvalidArgument, errorMessage: "empty message_request" },
        };
    }
  }
}

/**
 * Registers grpc.reflection.v1.ServerReflection and grpc.reflection.v1alpha.ServerReflection.
 *
 * Answers for `files` (and their transitive dependencies) plus every service
 * registered on `router` — including reflection itself and grpc.health.v1.Health
 * when registered — looked up when a reflection stream starts, so routes added
 * after this call are included as well.
 */
export function registerReflection(router: ConnectRouter, files: DescFile[]): void {
  const index = new DescriptorIndex();
  const refresh = () => {
    files.forEach((f) => index.add(f));
    for (const h of router.handlers) {
      index.add(h.service.file, false);
      index.services.add(h.service.typeName);
    }
    return index;
  };
  router.service(ServerReflectionV1, {
    async *serverReflectionInfo(requests) {
      const idx = refresh();
      for await (const req of requests) {
        yield { validHost: req.host, originalRequest: req, messageResponse: idx.answer(req.messageRequest) };
      }
    },
  });
  router.service(ServerReflectionV1alpha, {
    async *serverReflectionInfo(requests) {
      const idx = refresh();
      for await (const req of requests) {
        yield { validHost: req.host, originalRequest: req, messageResponse: idx.answer(req.messageRequest) };
      }
    },
  });
}
