// Creates an empty embedded database (PGlite's initdb, no migrations) at process.argv[2] and
// closes it cleanly; run by test/helpers/pglite-template.ts, once per machine and PGlite version.
import { PGlite } from "@electric-sql/pglite";

const pg = new PGlite(process.argv[2]);
await pg.waitReady;
await pg.close();
