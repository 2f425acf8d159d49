// Taro's preset: React with TypeScript, compiled for the webpack5 runner.
module.exports = {
  presets: [["taro", { framework: "react", ts: true, compiler: "webpack5" }]],
};
