import { createRegistry, type DescFile } from "@bufbuild/protobuf";
import { createValidator, type Validator } from "@bufbuild/protovalidate";

/**
 * A protovalidate validator for messages of these files: one place builds every validator (the
 * interceptor, the import's row check, the CLI). Its registry holds the files and every file they
 * import, so a rule that names a message of an imported file is planned the same everywhere.
 */
export function contractValidator(files: readonly DescFile[]): Validator {
  const seen = new Set<DescFile>();
  const visit = (file: DescFile): void => {
    if (seen.has(file)) return;
    seen.add(file);
    file.dependencies.forEach(visit);
  };
  files.forEach(visit);
  return createValidator({ registry: createRegistry(...seen) });
}
