/**
 * A stand-in for the npm registry that serves one package, from its packed
 * tarball, on 127.0.0.1: what `bun add multi-tensor-copier` and
 * `deno add npm:multi-tensor-copier` fetch once the package is published,
 * so that tests/package/install_test.sh can run the README's "once
 * published" commands before it is (with NPM_CONFIG_REGISTRY pointing here).
 * Every other name is a 404.
 *
 *   deno run --allow-net=127.0.0.1 --allow-read --allow-write tests/package/registry.ts TARBALL PACKAGE_JSON PORT_FILE
 *
 * PACKAGE_JSON is the tarball's package.json; the port chosen is written to
 * PORT_FILE once the server listens. Runs until it is killed.
 *
 * @module
 */
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";

const [tarball, packageJson, portFile] = Deno.args;
if (tarball === undefined || packageJson === undefined || portFile === undefined) {
  console.error("usage: registry.ts TARBALL PACKAGE_JSON PORT_FILE");
  Deno.exit(2);
}
const bytes = readFileSync(tarball);
const pkg = JSON.parse(readFileSync(packageJson, "utf8")) as { name: string; version: string };
const file = `${pkg.name}-${pkg.version}.tgz`;

let base = "";
const server: Deno.HttpServer<Deno.NetAddr> = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, (request): Response => {
  const { pathname } = new URL(request.url);
  if (pathname === `/${pkg.name}`) {
    // The packument: the one version, its package.json and where its tarball is.
    const dist = {
      tarball: `${base}/${pkg.name}/-/${file}`,
      shasum: createHash("sha1").update(bytes).digest("hex"),
      integrity: `sha512-${createHash("sha512").update(bytes).digest("base64")}`,
    };
    return Response.json({ name: pkg.name, "dist-tags": { latest: pkg.version }, versions: { [pkg.version]: { ...pkg, dist } } });
  }
  if (pathname === `/${pkg.name}/-/${file}`) return new Response(bytes, { headers: { "content-type": "application/octet-stream" } });
  return Response.json({ error: "not found" }, { status: 404 });
});
base = `http://127.0.0.1:${server.addr.port}`;
Deno.writeTextFileSync(portFile, String(server.addr.port));
