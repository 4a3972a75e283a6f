#!/usr/bin/env node
// Runs the compiled CLI when present (installed package, container image); in a source
// checkout Node 24 runs the TypeScript directly (type stripping).
import { existsSync } from 'node:fs';

const compiled = new URL('../dist/controller/cli/main.js', import.meta.url);
const entry = existsSync(compiled) ? compiled : new URL('../controller/cli/main.ts', import.meta.url);
const { main } = await import(entry.href);
process.exitCode = await main(process.argv.slice(2));
