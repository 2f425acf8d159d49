import path from "node:path";

import { defineConfig } from "@tarojs/cli";

// The TypeScript client is compiled from its source in clients/ts, outside this package.
const client = path.resolve(process.cwd(), "..", "ts", "src");

export default defineConfig<"webpack5">(() => ({
  projectName: "slotwheel-miniprogram",
  // Taro writes this into project.config.json; fixed so that the build is the same on every machine.
  date: "2025-1-1",
  designWidth: 750,
  deviceRatio: { 640: 2.34 / 2, 750: 1, 375: 2, 828: 1.81 / 2 },
  sourceRoot: "src",
  outputRoot: `dist/${process.env.TARO_ENV}`,
  plugins: [],
  defineConstants: {
    // The server a WeChat build talks to (a mini-program may only call its configured HTTPS domains).
    // The H5 build is served by slotwheel itself at /app/ and talks to its own origin: "".
    SLOTWHEEL_API_BASE: JSON.stringify(process.env.SLOTWHEEL_API_BASE ?? ""),
  },
  alias: { "@slotwheel/client": path.join(client, "index.ts") },
  copy: { patterns: [], options: {} },
  framework: "react",
  compiler: { type: "webpack5", prebundle: { enable: false } },
  // No persistent cache: a rebuild must not depend on what an earlier one left behind.
  cache: { enable: false },
  logger: { quiet: true, stats: false },
  mini: {
    compile: { include: [client] },
    postcss: {
      pxtransform: { enable: true, config: {} },
      cssModules: { enable: false },
    },
  },
  h5: {
    // Served by the binary at /app/ (api/h5app); assets are named by content hash.
    publicPath: "/app/",
    staticDirectory: "static",
    router: { mode: "hash" },
    compile: { include: [client] },
    output: {
      filename: "js/[name].[contenthash:8].js",
      chunkFilename: "js/[name].[contenthash:8].js",
    },
    miniCssExtractPluginOption: {
      ignoreOrder: true,
      filename: "css/[name].[contenthash:8].css",
      chunkFilename: "css/[name].[contenthash:8].css",
    },
    enableSourceMap: false,
    postcss: {
      autoprefixer: { enable: true, config: {} },
      cssModules: { enable: false },
    },
  },
}));
