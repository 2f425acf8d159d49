// npm run check:weapp — checks that dist/weapp is a mini-program WeChat's tools can load: app.json
// parses and lists pages, every listed page has its .js, .json, .wxml and .wxss, every page folder
// that exists is listed, and project.config.json names the root.
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join, relative } from "node:path";

const root = process.argv[2] ?? "dist/weapp";
const problems = [];
const app = JSON.parse(readFileSync(join(root, "app.json"), "utf8"));
if (!Array.isArray(app.pages) || app.pages.length === 0) problems.push("app.json lists no pages");
for (const f of ["app.js", "app.json", "app.wxss", "project.config.json"]) {
  if (!existsSync(join(root, f))) problems.push(`${f} is missing`);
}
for (const page of app.pages ?? []) {
  for (const ext of ["js", "json", "wxml", "wxss"]) {
    if (!existsSync(join(root, `${page}.${ext}`))) problems.push(`page ${page} has no ${page}.${ext}`);
  }
  const json = join(root, `${page}.json`);
  if (existsSync(json)) JSON.parse(readFileSync(json, "utf8"));
}
// Every page that exists is listed: a page folder app.json forgot cannot be opened.
function pagesUnder(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...pagesUnder(p));
    else if (name.endsWith(".wxml")) out.push(relative(root, p).replace(/\.wxml$/, ""));
  }
  return out;
}
const listed = new Set(app.pages ?? []);
for (const page of existsSync(join(root, "pages")) ? pagesUnder(join(root, "pages")) : []) {
  if (!listed.has(page)) problems.push(`${page}.wxml exists but app.json does not list it`);
}
const project = JSON.parse(readFileSync(join(root, "project.config.json"), "utf8"));
if (project.compileType !== "miniprogram") problems.push("project.config.json: compileType is not miniprogram");
if (problems.length) {
  console.error(`check:weapp: ${root} is not a loadable mini-program:\n  ${problems.join("\n  ")}`);
  process.exit(1);
}
console.log(`check:weapp: ${root}: ${app.pages.length} pages, each with js/json/wxml/wxss`);
