// npm run build:app — builds the H5 app and puts it where the binary embeds it (api/h5app/dist),
// replacing the previous build, so that `go run .` serves it at /app/. CI runs this and fails when
// the committed files differ (scripts/check-clients.sh).
import { execFileSync } from "node:child_process";
import { cpSync, rmSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const here = join(dirname(fileURLToPath(import.meta.url)), "..");
const target = join(here, "..", "..", "api", "h5app", "dist");

rmSync(join(here, "dist", "h5"), { recursive: true, force: true });
// The H5 build talks to the origin that serves it: no server is baked in.
execFileSync("npx", ["--no-install", "taro", "build", "--type", "h5"], {
  cwd: here,
  stdio: "inherit",
  env: { ...process.env, SLOTWHEEL_API_BASE: "", NODE_ENV: "production" },
});
rmSync(target, { recursive: true, force: true });
cpSync(join(here, "dist", "h5"), target, { recursive: true });
console.log(`build:app: ${target} updated`);
