import { version } from '../version.ts';
import type { Command } from './command.ts';

export const versionCommand: Command = {
  name: 'version',
  summary: 'Print the stackflux version',
  flags: {
    output: { type: 'string', short: 'o', description: 'output format: text or json', default: 'text' },
  },
  run: async (flags, _positionals, io) => {
    const info = { version, node: process.versions.node };
    io.stdout(
      flags.output === 'json' ? `${JSON.stringify(info)}\n` : `stackflux ${version} (node ${info.node})\n`,
    );
    return 0;
  },
};
