import { parseArgs } from 'node:util';

/** A flag of a command; also readable from STACKFLUX_<NAME> (dashes become underscores). */
export interface FlagSpec {
  type: 'string' | 'boolean';
  description: string;
  short?: string;
  default?: string | boolean;
}

export interface CommandIO {
  stdout: (text: string) => void;
  stderr: (text: string) => void;
  env: Readonly<Record<string, string | undefined>>;
}

export type FlagValues = Record<string, string | boolean | undefined>;

export interface Command {
  name: string;
  summary: string;
  /** What follows "stackflux " in the usage line (default: "<name> [flags]"). */
  usage?: string;
  /** Lines shown under "Examples:" in --help. */
  examples?: string[];
  flags: Record<string, FlagSpec>;
  /** Returns the process exit code. */
  run: (flags: FlagValues, positionals: string[], io: CommandIO) => Promise<number>;
}

export class UsageError extends Error {}

export function envName(flag: string): string {
  return `STACKFLUX_${flag.toUpperCase().replaceAll('-', '_')}`;
}

/** Parses argv for one command: explicit flags win over STACKFLUX_* variables, which win over defaults. */
export function parseFlags(
  command: Command,
  argv: string[],
  env: CommandIO['env'],
): { flags: FlagValues; positionals: string[] } {
  const options: Record<string, { type: 'string' | 'boolean'; short?: string }> = {
    help: { type: 'boolean', short: 'h' },
  };
  for (const [name, spec] of Object.entries(command.flags)) {
    options[name] = spec.short === undefined ? { type: spec.type } : { type: spec.type, short: spec.short };
  }
  let parsed: ReturnType<typeof parseArgs>;
  try {
    parsed = parseArgs({ args: argv, options, allowPositionals: true, strict: true });
  } catch (err) {
    throw new UsageError(err instanceof Error ? err.message : String(err));
  }
  const flags: FlagValues = { help: parsed.values.help === true };
  for (const [name, spec] of Object.entries(command.flags)) {
    const given = parsed.values[name];
    const fromEnv = env[envName(name)];
    if (typeof given === 'string' || typeof given === 'boolean') flags[name] = given;
    else if (fromEnv !== undefined)
      flags[name] = spec.type === 'boolean' ? /^(1|true|yes)$/i.test(fromEnv) : fromEnv;
    else flags[name] = spec.default;
  }
  return { flags, positionals: parsed.positionals };
}

export function commandHelp(command: Command): string {
  const lines = [`Usage: stackflux ${command.usage ?? `${command.name} [flags]`}`, '', command.summary, ''];
  if (command.examples !== undefined && command.examples.length > 0)
    lines.push('Examples:', ...command.examples.map((e) => `  ${e}`), '');
  lines.push('Flags:');
  const entries = Object.entries(command.flags);
  const label = (name: string, spec: FlagSpec) =>
    `  ${spec.short ? `-${spec.short}, ` : '    '}--${name}${spec.type === 'string' ? ' string' : ''}`;
  const width = Math.max(18, ...entries.map(([name, spec]) => label(name, spec).length)) + 3;
  for (const [name, spec] of entries) {
    const def =
      spec.default !== undefined && spec.default !== '' ? ` (default ${JSON.stringify(spec.default)})` : '';
    lines.push(`${label(name, spec).padEnd(width)}${spec.description}${def} [${envName(name)}]`);
  }
  lines.push(`${'  -h, --help'.padEnd(width)}help for this command`);
  return `${lines.join('\n')}\n`;
}
