// Starts a fresh slotwheel binary in embedded mode (in-process Redis, a new SQLite file, dev log-in
// and dev payments on) on a free loopback port, as a newcomer's `go run .` would run.
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";

export interface Server {
  baseUrl: string;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const addr = s.address();
      s.close(() => (typeof addr === "object" && addr ? resolve(addr.port) : reject(new Error("no port"))));
    });
  });
}

/** startServer runs $SLOTWHEEL_BIN (built by scripts/check-clients.sh) and resolves once it listens. */
export async function startServer(extraEnv: Record<string, string> = {}): Promise<Server> {
  const bin = process.env.SLOTWHEEL_BIN;
  if (!bin) {
    throw new Error("SLOTWHEEL_BIN is not set: build the binary (go build -o <path> .) and point SLOTWHEEL_BIN at it");
  }
  const dir = mkdtempSync(join(tmpdir(), "slotwheel-client-"));
  const port = await freePort();
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    // Embedded mode: no server of the developer's or CI's may leak in.
    if (v !== undefined && !k.startsWith("SLOTWHEEL_")) {
      env[k] = v;
    }
  }
  Object.assign(env, { SLOTWHEEL_HTTP_ADDR: `127.0.0.1:${port}`, SLOTWHEEL_SQLITE_PATH: join(dir, "slotwheel.db") }, extraEnv);
  const child: ChildProcess = spawn(bin, ["all"], { env, stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  await new Promise<void>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      log += chunk.toString();
      if (log.includes("slotwheel is listening on")) {
        resolve();
      }
    };
    child.stdout?.on("data", onData);
    child.stderr?.on("data", (chunk: Buffer) => (log += chunk.toString()));
    child.once("exit", (code) => reject(new Error(`slotwheel exited (${code}) before listening:\n${log}`)));
  });
  return {
    baseUrl: `http://127.0.0.1:${port}`,
    async stop() {
      child.kill("SIGTERM");
      await exited;
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
