// simple-oauth2 ships no types (and @types/simple-oauth2 is not installed): the part these tests use.
declare module "simple-oauth2" {
  interface AccessToken {
    readonly token: Record<string, unknown>;
    revoke(tokenType: "access_token" | "refresh_token"): Promise<void>;
  }
  interface ModuleOptions {
    client: { id: string; secret: string };
    auth: { tokenHost: string; tokenPath?: string; revokePath?: string };
    options?: { authorizationMethod?: "header" | "body" };
  }
  export class ClientCredentials {
    constructor(options: ModuleOptions);
    getToken(params: { scope?: string | string[] }): Promise<AccessToken>;
  }
  const simpleOauth2: { ClientCredentials: typeof ClientCredentials };
  export default simpleOauth2;
}
