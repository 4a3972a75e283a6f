import { type Command, type CommandIO, commandHelp, parseFlags, UsageError } from './command.ts';
import { convertCommand } from './convert.ts';
import { diffCommand } from './diff.ts';
import { getCommand } from './get.ts';
import { installCommand } from './install.ts';
import { previewCommand } from './preview.ts';
import { reconcileCommand, resumeCommand, suspendCommand } from './reconcile.ts';
import { renderCommand } from './render.ts';
import { inputResourcesCommand, outputResourcesCommand } from './resources.ts';
import { rolloutCommand } from './rollout.ts';
import { runCommand } from './run.ts';
import { statusCommand } from './status.ts';
import { versionCommand } from './version.ts';

export const commands: Command[] = [
  runCommand,
  renderCommand,
  diffCommand,
  previewCommand,
  statusCommand,
  getCommand,
  reconcileCommand,
  suspendCommand,
  resumeCommand,
  rolloutCommand,
  installCommand,
  convertCommand,
  inputResourcesCommand,
  outputResourcesCommand,
  versionCommand,
];

function rootHelp(): string {
  const width = Math.max(...commands.map((c) => c.name.length), 4) + 2;
  const lines = [
    'stackflux turns cluster stacks released as Git tags into Flux objects.',
    '',
    'Usage: stackflux <command> [flags]',
    '',
    'Commands:',
    ...commands.map((c) => `  ${c.name.padEnd(width)}${c.summary}`),
    `  ${'help'.padEnd(width)}Help about any command`,
    '',
    'Every flag can also be set with a STACKFLUX_<FLAG> environment variable.',
    'Run "stackflux <command> --help" for a command\'s flags.',
  ];
  return `${lines.join('\n')}\n`;
}

const processIO: CommandIO = {
  stdout: (text) => process.stdout.write(text),
  stderr: (text) => process.stderr.write(text),
  env: process.env,
};

export async function main(argv: string[], io: CommandIO = processIO): Promise<number> {
  const [name, ...rest] = argv;
  if (name === undefined || name === 'help' || name === '--help' || name === '-h') {
    const topic = name === 'help' ? commands.find((c) => c.name === rest[0]) : undefined;
    io.stdout(topic ? commandHelp(topic) : rootHelp());
    return 0;
  }
  const command = commands.find((c) => c.name === name);
  if (!command) {
    io.stderr(`Error: unknown command "${name}"\n\n${rootHelp()}`);
    return 2;
  }
  try {
    const { flags, positionals } = parseFlags(command, rest, io.env);
    if (flags.help === true) {
      io.stdout(commandHelp(command));
      return 0;
    }
    return await command.run(flags, positionals, io);
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr(`Error: ${err.message}\n\n${commandHelp(command)}`);
      return 2;
    }
    io.stderr(`Error: ${err instanceof Error ? err.message : String(err)}\n`);
    return 1;
  }
}

if (import.meta.main) {
  process.exitCode = await main(process.argv.slice(2));
}
