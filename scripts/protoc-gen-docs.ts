/**
 * A local buf plugin (buf.gen.yaml): the proto comments of every travel.* file that declares a service, as
 * data (`<file>_docs.ts` beside its `_pb.ts`). protoc-gen-es keeps comments only as JSDoc, and its
 * runtime descriptors carry no source info, so code that shows the contract's words to people
 * (the operator CLI's help) reads them from here: the comment is written once, in the proto.
 */
import type { DescField, DescMessage } from "@bufbuild/protobuf";
import { createEcmaScriptPlugin, getComments, runNodeJs } from "@bufbuild/protoplugin";

/** The leading comment as one paragraph per blank-line-separated block, lines joined by spaces. */
function commentOf(desc: Parameters<typeof getComments>[0]): string | undefined {
  const leading = getComments(desc).leading?.trim();
  if (!leading) return undefined;
  return leading
    .split(/\n\s*\n/)
    .map((block) =>
      block
        .split("\n")
        .map((line) => line.trim())
        .join(" "),
    )
    .join("\n\n");
}

runNodeJs(
  createEcmaScriptPlugin({
    name: "protoc-gen-docs",
    version: "v1",
    generateTs(schema) {
      for (const file of schema.files) {
        // The project's own contracts; the vendored ones (google, grpc) are documented upstream.
        if (file.services.length === 0 || !file.proto.package.startsWith("travel.")) continue;
        const entries: Array<[string, string]> = [];
        const add = (name: string, text: string | undefined) => text && entries.push([name, text]);
        const messages: DescMessage[] = [];
        const collect = (message: DescMessage) => {
          messages.push(message);
          message.nestedMessages.forEach(collect);
        };
        file.messages.forEach(collect);
        for (const service of file.services) {
          add(service.typeName, commentOf(service));
          for (const method of service.methods) add(`${service.typeName}.${method.name}`, commentOf(method));
        }
        for (const message of messages) {
          add(message.typeName, commentOf(message));
          message.fields.forEach((field: DescField) => add(`${message.typeName}.${field.name}`, commentOf(field)));
        }
        const f = schema.generateFile(`${file.name}_docs.ts`);
        f.preamble(file);
        f.print("/**");
        f.print(" * The leading comments of ", file.proto.name, " by full name (a method: Service.Method; a");
        f.print(" * field: Message.field_name), for help texts. Elements without a comment are absent.");
        f.print(" */");
        f.print("export const docs: Readonly<Record<string, string>> = {");
        for (const [name, text] of entries) f.print("  ", JSON.stringify(name), ": ", JSON.stringify(text), ",");
        f.print("};");
      }
    },
  }),
);
